//! Contended atomics on the ofi provider, all ranks to all ranks, four
//! processes (tests/c/ofi_atomics.c), over libfabric's tcp and shm: exact
//! counters and fetched values with and without `FI_DELIVERY_COMPLETE`, and
//! with `FI_INJECT` operands overwritten as soon as the post returns.
//!
//! Over libfabric 1.17's shm, a non-fetching atomic posted with
//! `FI_DELIVERY_COMPLETE` had its inject buffer returned to the pool twice
//! (by the target after applying it and by the initiator on the response),
//! so that later atomics shared buffers: counters far off, duplicate fetched
//! values, crashes inside libfabric. The proxy now posts such an atomic as
//! a fetching one.
use crate::common;

use common::ofi::{have_libfabric, over, program, run_ok};

fn contended(fabric: &str) {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping contended atomics over {fabric}");
        return;
    }
    let out = run_ok(
        &program("ofi_atomics", &[]),
        &[],
        &over(fabric),
        150,
        "ofi_atomics",
    );
    for case in [
        "atomic_add+FI_DELIVERY_COMPLETE",
        "fetch_add+FI_DELIVERY_COMPLETE",
        "fetch_add",
        "atomic_add",
        "fetch_add+FI_INJECT",
    ] {
        assert!(
            out.contains(&format!(
                "ofi_atomics: {case}: 4 ranks x 256 ops each, counters and fetched values right"
            )),
            "{case}: {out}"
        );
    }
}

#[test]
fn contended_atomics_over_tcp() {
    contended("tcp");
}

#[test]
fn contended_atomics_over_shm() {
    contended("shm");
}
