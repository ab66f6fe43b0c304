//! The work-request API (tests/c/wr.c) on every provider that has it: the
//! host prepares requests from libfabric's `struct fi_wr_attr`, kernels on
//! the host launcher modify, queue (each work item its own, at work-group
//! scope) and flush them, between two processes; bad input gets its exact
//! code on the host and on the device.
use crate::common;

use common::ofi::{on_fabric, program, run_ok, shm_env};

fn wr(env: Vec<(&'static str, String)>) {
    let out = run_ok(&program("wr", &[]), &[], &env, 120, "wr");
    assert!(out.contains("wr: ok"), "{out}");
}

#[test]
fn work_requests_on_shm() {
    wr(shm_env(&[]));
}

#[test]
fn work_requests_on_ofi_over_tcp() {
    on_fabric("the work requests", "tcp", wr);
}

#[test]
fn work_requests_on_ofi_over_shm() {
    on_fabric("the work requests", "shm", wr);
}
