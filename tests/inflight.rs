//! Operations in flight when their kernel exits, and the abort word
//! (tests/c/inflight.c): a 16 MiB streamed and a 16 MiB rendezvous send
//! whose kernels exit at once complete through shm's host progress agent
//! and through the ofi provider's proxy; without the agent they wait for
//! the next kernel and then complete; a raised abort word ends every device
//! wait with -FI_ECANCELED on every provider.
use crate::common;

use common::ofi::{on_fabric, program, run_ok, shm_env};

fn inflight(mode: &str, env: Vec<(&'static str, String)>) {
    let out = run_ok(&program("inflight", &[]), &[mode], &env, 240, "inflight");
    assert!(out.contains(&format!("inflight {mode}: ok")), "{out}");
}

fn ofi(mode: &str, fabric: &str) {
    on_fabric(mode, fabric, |env| inflight(mode, env));
}

#[test]
fn sends_complete_after_their_kernel_exits_on_shm_with_the_agent() {
    inflight("agent", shm_env(&[]));
}

#[test]
fn sends_wait_for_the_next_kernel_on_shm_without_the_agent() {
    inflight("resume", shm_env(&[]));
}

#[test]
fn sends_complete_after_their_kernel_exits_on_ofi_tcp() {
    ofi("agent", "tcp");
}

#[test]
fn sends_complete_after_their_kernel_exits_on_ofi_shm() {
    ofi("agent", "shm");
}

#[test]
fn abort_ends_every_wait_on_shm() {
    inflight("abort", shm_env(&[]));
}

#[test]
fn abort_ends_every_wait_on_ofi_tcp() {
    ofi("abort", "tcp");
}

#[test]
fn abort_ends_every_wait_on_ofi_shm() {
    ofi("abort", "shm");
}
