//! One source-buffer contract on every provider (tests/c/buffer_reuse.c):
//! a source may change once its operation's local completion is seen, or
//! as soon as the post returns with `FI_INJECT` (up to the inject size);
//! the bytes that arrive are the ones the buffer held at the post. Over
//! the ofi provider the proxy read sources late, so before the contract
//! and `FI_INJECT` were kept, overwritten bytes arrived.
use crate::common;

use common::ofi::{on_fabric, program, run_ok, shm_env};

fn reuse(mode: &str, env: Vec<(&'static str, String)>) {
    let out = run_ok(
        &program("buffer_reuse", &[]),
        &[mode],
        &env,
        120,
        "buffer_reuse",
    );
    assert!(out.contains(&format!("{mode}: ")), "{out}");
}

#[test]
fn reuse_after_completion_on_shm() {
    reuse("completion", shm_env(&[]));
}

#[test]
fn reuse_after_inject_on_shm() {
    reuse("inject", shm_env(&[]));
}

fn ofi(mode: &str, fabric: &str) {
    on_fabric(mode, fabric, |env| reuse(mode, env));
}

#[test]
fn reuse_after_completion_on_ofi_tcp() {
    ofi("completion", "tcp");
}

#[test]
fn reuse_after_completion_on_ofi_shm() {
    ofi("completion", "shm");
}

#[test]
fn reuse_after_inject_on_ofi_tcp() {
    ofi("inject", "tcp");
}

#[test]
fn reuse_after_inject_on_ofi_shm() {
    ofi("inject", "shm");
}
