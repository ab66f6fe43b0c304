//! The ofi provider between two processes over libfabric's tcp and shm
//! providers: RMA, atomics, tagged messages with CQ data, counters and an
//! error completion, all posted through the device API (tests/c/ofi_ops.c),
//! and the ring-entry checks and layouts shared with the C header.
use crate::common;

use common::ofi::{have_libfabric, over, program};

/// Runs tests/c/`name`.c (one process, or its own two) on the ofi
/// provider over libfabric's `fabric` within `limit_s` seconds; it must
/// exit 0 saying `<name>: ok`. Its stderr; `None` when libfabric is not
/// installed (skipped, saying so).
fn run_over(name: &str, fabric: &str, limit_s: u32) -> Option<String> {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping the ofi provider over {fabric}");
        return None;
    }
    let out = common::ofi::run(&program(name, &[]), &[], &over(fabric), limit_s, name);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains(&format!("{name}: ok")),
        "{}\n{stdout}\n{stderr}",
        out.status
    );
    Some(stderr.into_owned())
}

fn run_ops(fabric: &str) {
    let Some(stderr) = run_over("ofi_ops", fabric, 120) else {
        return;
    };
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
    run_over("ofi_stale", fabric, 60);
}

#[test]
fn removed_registrations_and_addresses_are_refused_over_tcp() {
    stale("tcp");
}

#[test]
fn removed_registrations_and_addresses_are_refused_over_shm() {
    stale("shm");
}
