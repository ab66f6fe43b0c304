//! The ofi provider between two processes over libfabric's tcp and shm
//! providers: RMA, atomics, tagged messages with CQ data, counters and an
//! error completion, all posted through the device API (tests/c/ofi_ops.c),
//! and the ring-entry checks and layouts shared with the C header.
use crate::common;

use std::process::Command;

fn have_libfabric() -> bool {
    Command::new("pkg-config")
        .args(["--exists", "libfabric"])
        .status()
        .is_ok_and(|s| s.success())
}

fn run_ops(fabric: &str) {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping the ofi provider over {fabric}");
        return;
    }
    let dir = common::scratch(&format!("ofi-ops-{fabric}"));
    let exe = dir.join("ofi_ops");
    common::cc(&[&common::root().join("tests/c/ofi_ops.c")], &exe, &[]);
    let out = common::run_ok(
        Command::new("timeout")
            .arg("120")
            .arg(&exe)
            .env("FI_XPU_PROVIDER", "ofi")
            .env("FI_XPU_OFI_PROVIDER", fabric)
            .env("FI_TCP_IFACE", "lo"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ofi_ops: ok"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("malformed ring entry at 4 (op 1): Permission denied"),
        "the out-of-range local buffer is reported: {stderr}"
    );
    // The wild pointer, private memory as a source, as a read target, as a
    // fetch result, and as a receive buffer on the other side.
    assert_eq!(
        stderr
            .matches("lies in no allocation, import or registration of the context")
            .count(),
        5,
        "{stderr}"
    );
}

#[test]
fn ops_over_tcp() {
    run_ops("tcp");
}

#[test]
fn ops_over_shm() {
    run_ops("shm");
}

/// What the host removed before a device posts is refused: a closed
/// registration's descriptor and an address removed from the AV
/// (tests/c/ofi_stale.c, one process writing to itself).
fn stale(fabric: &str) {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping the ofi provider over {fabric}");
        return;
    }
    let dir = common::scratch(&format!("ofi-stale-{fabric}"));
    let exe = dir.join("ofi_stale");
    common::cc(&[&common::root().join("tests/c/ofi_stale.c")], &exe, &[]);
    let out = common::run_ok(
        Command::new("timeout")
            .arg("60")
            .arg(&exe)
            .current_dir(&dir)
            .env("FI_XPU_PROVIDER", "ofi")
            .env("FI_XPU_OFI_PROVIDER", fabric)
            .env("FI_TCP_IFACE", "lo"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ofi_stale: ok"), "{stdout}");
}

#[test]
fn removed_registrations_and_addresses_are_refused_over_tcp() {
    stale("tcp");
}

#[test]
fn removed_registrations_and_addresses_are_refused_over_shm() {
    stale("shm");
}
