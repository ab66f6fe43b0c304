//! One large transfer split across the groups of a launch
//! (`fi_xpu_coop_write_part`, `fi_xpu_coop_put_signal_part`) between two
//! processes (tests/c/device_split.c) on shm and on ofi over libfabric's
//! tcp and shm, at every scope: every byte arrives, the initiator sees one
//! completion per share and the target one remote entry per written share
//! and a signal of parts * value; lengths that parts * 16 does not divide,
//! smaller than it, and 0; the split computation itself and bad input with
//! its codes.
use crate::common;

use common::ofi::{on_fabric, program, run_ok};

fn split(env: Vec<(&'static str, String)>) {
    run_ok(
        &program("device_split", &[]),
        &[],
        &env,
        240,
        "device_split",
    );
}

fn shm() -> Vec<(&'static str, String)> {
    vec![
        ("FI_XPU_PROVIDER", "shm".into()),
        ("OFI_COMMON_PROV", "shm".into()),
    ]
}

#[test]
fn split_puts_on_shm() {
    split(shm());
}

/// Under the testing-only delay of data placement a share's signal that
/// overtook its data would be seen with bytes missing.
#[test]
fn split_puts_on_shm_with_late_data() {
    let mut env = shm();
    env.push(("FI_XPU_SHM_TEST_DELAY_US", "5".into()));
    split(env);
}

#[test]
fn split_puts_on_ofi_tcp() {
    on_fabric("split puts", "tcp", split);
}

#[test]
fn split_puts_on_ofi_shm() {
    on_fabric("split puts", "shm", split);
}

#[test]
fn split_puts_on_ofi_tcp_with_late_data() {
    on_fabric("split puts with late data", "tcp", |mut env| {
        env.push(("FI_XPU_OFI_TEST_DELAY_MS", "5".into()));
        split(env);
    });
}
