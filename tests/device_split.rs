//! One large transfer split across the groups of a launch
//! (`fi_xpu_coop_write_part`, `fi_xpu_coop_put_signal_part`) between two
//! processes (tests/c/device_split.c) on shm and on ofi over libfabric's
//! tcp and shm, at every scope: every byte arrives, the initiator sees one
//! completion per share and the target one remote entry per written share
//! and a signal of parts * value; lengths that parts * 16 does not divide,
//! smaller than it, and 0; the split computation itself and bad input with
//! its codes.
use crate::common;

use common::ofi::{on_fabric, run_program, shm_env};

fn split(env: Vec<(&'static str, String)>) {
    run_program("device_split", &env);
}

/// Plain, and under the testing-only delay of data placement, where a
/// share's signal that overtook its data would be seen with bytes missing.
#[test]
fn split_puts_on_shm() {
    split(shm_env(&[]));
    split(shm_env(&[("FI_XPU_SHM_TEST_DELAY_US", "5")]));
}

/// Over libfabric's tcp and shm, and over tcp under the delay.
#[test]
fn split_puts_on_ofi() {
    for fabric in ["tcp", "shm"] {
        on_fabric("split puts", fabric, split);
    }
    on_fabric("split puts with late data", "tcp", |mut env| {
        env.push(("FI_XPU_OFI_TEST_DELAY_MS", "5".into()));
        split(env);
    });
}
