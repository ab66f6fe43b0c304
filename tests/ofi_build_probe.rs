//! The ofi provider's build script probes for libfabric; a build made before
//! libfabric was installed must pick it up once it is, without touching
//! anything in the tree (the order "demo, then install packages, then test").
//!
//! Simulated with a compiler whose system include directory is a copy of
//! /usr/include made of symlinks, at first without `rdma/`: "installing
//! libfabric" adds that one link. The environment stays the same across the
//! builds, so only the build script's watched paths can trigger the rerun.
use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// `#include <...>` directories of the system compiler.
fn system_include_dirs() -> Vec<PathBuf> {
    let o = common::run_ok(Command::new("cc").args(["-xc", "-E", "-v", "/dev/null"]));
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .skip_while(|l| !l.starts_with("#include <...>"))
        .skip(1)
        .take_while(|l| !l.starts_with("End of search list"))
        .map(|l| PathBuf::from(l.trim()))
        .collect()
}

/// `cargo check -p fi_xpu_ofi` in `target` with the fake compiler; returns
/// cargo's stderr.
fn check(target: &Path, cc: &Path, pc: &Path) -> String {
    let o = common::run_ok(
        Command::new(env!("CARGO"))
            .current_dir(common::root())
            .args(["check", "-v", "-p", "fi_xpu_ofi", "--target-dir"])
            .arg(target)
            .env("CC", cc)
            .env("PKG_CONFIG_LIBDIR", pc)
            .env_remove("PKG_CONFIG_PATH")
            .env_remove("FI_XPU_OFI_NO_LIBFABRIC"),
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What the newest run of the ofi build script printed.
fn script_output(target: &Path) -> String {
    let build = target.join("debug/build");
    let newest = std::fs::read_dir(&build)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path().join("output")))
        .filter(|p| {
            p.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("fi_xpu_ofi-")
                && p.is_file()
        })
        .max_by_key(|p| std::fs::metadata(p).unwrap().modified().unwrap())
        .expect("the ofi build script ran");
    std::fs::read_to_string(newest).unwrap()
}

/// Whether cargo's verbose log shows the ofi build script running.
fn ran_ofi_script(log: &str) -> bool {
    log.lines().any(|l| {
        l.trim_start().starts_with("Running")
            && l.contains("/fi_xpu_ofi-")
            && l.contains("build-script-build")
    })
}

#[test]
fn libfabric_installed_after_first_build_is_picked_up() {
    let real = Path::new("/usr/include/rdma/fabric.h");
    assert!(
        real.is_file(),
        "libfabric's headers are required (apt-get install libfabric-dev; .ci/run installs it)"
    );
    // Not common::scratch: the fixed path keeps the dependencies' check
    // artifacts between runs, only the scenario's files are fresh.
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ofi-build-probe");
    let _held = common::lock(&base);
    let target = base.join("target");
    let sys = base.join("usr-include");
    let pc = base.join("pkgconfig");
    let _ = std::fs::remove_dir_all(&sys);
    let _ = std::fs::remove_dir_all(&pc);
    let _ = std::fs::remove_dir_all(target.join("debug/build"));
    std::fs::create_dir_all(&sys).unwrap();
    std::fs::create_dir_all(&pc).unwrap();
    for e in std::fs::read_dir("/usr/include").unwrap() {
        let e = e.unwrap();
        if e.file_name() != "rdma" {
            std::os::unix::fs::symlink(e.path(), sys.join(e.file_name())).unwrap();
        }
    }
    let mut search = String::new();
    for dir in system_include_dirs() {
        let dir = if dir == Path::new("/usr/include") {
            sys.clone()
        } else {
            dir
        };
        search += &format!(" -isystem '{}'", dir.display());
    }
    let cc = base.join("cc");
    std::fs::write(
        &cc,
        format!("#!/bin/sh\nexec cc -nostdinc{search} \"$@\"\n"),
    )
    .unwrap();
    std::fs::set_permissions(&cc, std::fs::Permissions::from_mode(0o755)).unwrap();

    // First build: no libfabric headers. The script watches the include
    // directory it searched.
    check(&target, &cc, &pc);
    let out = script_output(&target);
    assert!(!out.contains("cargo:rustc-cfg=ofi_libfabric"), "{out}");
    assert!(
        out.contains(&format!("cargo:rerun-if-changed={}\n", sys.display())),
        "{out}"
    );
    assert!(
        out.contains("cargo:rerun-if-env-changed=PKG_CONFIG_PATH\n"),
        "{out}"
    );

    // Nothing changed: the script does not run again.
    let log = check(&target, &cc, &pc);
    assert!(!ran_ofi_script(&log), "{log}");

    // "Install" libfabric: the same command now builds with it, and watches
    // the headers it used.
    std::os::unix::fs::symlink("/usr/include/rdma", sys.join("rdma")).unwrap();
    let log = check(&target, &cc, &pc);
    assert!(ran_ofi_script(&log), "{log}");
    let out = script_output(&target);
    assert!(out.contains("cargo:rustc-cfg=ofi_libfabric"), "{out}");
    // (gcc names system headers by their canonical path.)
    assert!(
        out.lines()
            .any(|l| l.starts_with("cargo:rerun-if-changed=") && l.ends_with("/rdma/fabric.h")),
        "{out}"
    );
}
