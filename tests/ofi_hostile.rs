//! A hostile peer against the ofi provider (tests/c/ofi_hostile.c): a
//! second process that speaks libfabric directly sends forged keys,
//! out-of-range and wrapping remote addresses, RMA to a closed
//! registration, bad atomics, oversized messages and floods, then dies in
//! the middle of a transfer, while a buggy kernel of the victim fills a
//! ring with malformed entries. The victim keeps every legitimate value
//! exact and every byte of its private memory, and every wait ends.
use crate::common;

use common::ofi::{have_libfabric, over, program, run_ok};

fn hostile(fabric: &str) {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping the hostile peer over {fabric}");
        return;
    }
    let mut env = over(fabric);
    env.push(("FI_XPU_OFI_OP_TIMEOUT_MS", "2000".into()));
    env.push(("FI_XPU_OFI_STALL_MS", "200".into()));
    env.push(("FI_XPU_OFI_CLOSE_MS", "2000".into()));
    let out = run_ok(
        &program("ofi_hostile", &["-Wl,--no-as-needed", "-lfabric"]),
        &[],
        &env,
        600,
        "hostile",
    );
    eprintln!("{out}");
}

#[test]
fn hostile_peer_over_tcp() {
    hostile("tcp");
}

#[test]
fn hostile_peer_over_shm() {
    hostile("shm");
}
