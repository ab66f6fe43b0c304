//! The part of the C side that runs under valgrind's memcheck in every
//! suite run (the whole C side runs so with `cargo xtask valgrind`): the
//! shm device-handle checks and the ofi provider's two-process operations over tcp,
//! through the same harness (tests/common/memcheck.rs), and the harness
//! itself reporting a planted invalid read.
use crate::common;

use std::process::Command;

#[test]
fn harness_reports_an_invalid_read() {
    if !common::valgrind_usable() {
        return;
    }
    let dir = common::scratch("memcheck-bad");
    let exe = dir.join("memcheck_bad");
    common::cc(&[&common::root().join("tests/c/memcheck_bad.c")], &exe, &[]);
    let r = std::panic::catch_unwind(|| common::memcheck::run_with(&Command::new(&exe), true));
    let msg = match r {
        Ok(_) => panic!("memcheck found nothing in a program with an invalid read"),
        Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(msg.contains("Invalid read of size 1"), "{msg}");
}

#[test]
fn shm_handle_checks_under_memcheck() {
    if !common::valgrind_usable() {
        return;
    }
    let exe = common::ofi::program("handle_checks", &[]);
    let mut cmd = Command::new(&exe);
    cmd.arg("shm")
        .env("FI_XPU_PROVIDER", "shm")
        .env("FI_XPU_LOG_LEVEL", "none")
        .current_dir(exe.parent().unwrap());
    let out = common::memcheck::run_with(&cmd, true).expect("a test program");
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn ofi_ops_over_tcp_under_memcheck() {
    if !common::valgrind_usable() {
        return;
    }
    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let exe = common::ofi::program("ofi_ops", &[]);
    let mut cmd = Command::new("timeout");
    cmd.arg("600")
        .arg(&exe)
        .envs(common::ofi::over("tcp"))
        .current_dir(exe.parent().unwrap());
    let out = common::memcheck::run_with(&cmd, true).expect("a test program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("ofi_ops: ok"),
        "{out:?}"
    );
}
