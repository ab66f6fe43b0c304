//! Remote accesses the target refuses (a wrong key, past the end of the
//! registration), posted with `FI_DELIVERY_COMPLETE` on the ofi provider
//! (tests/c/ofi_bad_remote.c): the initiator gets an error completion in
//! bounded time on every transport. Over libfabric's tcp the transport
//! reports the refusal; libfabric 1.17's shm never answers such an access,
//! so the proxy's per-operation limit (`FI_XPU_OFI_OP_TIMEOUT_MS`) ends it
//! with `-FI_ETIMEDOUT`. Later valid operations on another endpoint are not
//! held up; on the same endpoint, what each transport does is what
//! fi_xpu_ofi(7) documents (tcp may fail the next operation to that peer
//! with `FI_ENOTCONN` while it reconnects; shm fails every later one that
//! waits for an answer).
use crate::common;

use common::ofi::{have_libfabric, over, program, run_ok};

/// Runs the program over `fabric`; its output, after checking that it has
/// the `expected` lines and that another endpoint and the flush were not
/// held up.
fn bad_remote(fabric: &str, expected: &[&str]) -> Option<String> {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping bad remote accesses over {fabric}");
        return None;
    }
    let mut env = over(fabric);
    env.push(("FI_XPU_OFI_OP_TIMEOUT_MS", "1000".into()));
    env.push(("FI_XPU_OFI_CLOSE_MS", "2000".into()));
    let out = run_ok(
        &program("ofi_bad_remote", &[]),
        &[],
        &env,
        120,
        "bad_remote",
    );
    let unheld = [
        "bad_remote: other endpoint: success",
        "bad_remote: flush: done",
    ];
    for line in expected.iter().chain(&unheld) {
        assert!(out.contains(line), "missing '{line}' in\n{out}");
    }
    Some(out)
}

#[test]
fn refused_remote_accesses_fail_over_tcp() {
    let errors = [
        "bad_remote: wrong key: error ",
        "bad_remote: past the end: error ",
    ];
    let Some(out) = bad_remote("tcp", &errors) else {
        return;
    };
    // tcp;ofi_rxm drops the connection after a refused access: the next
    // operation to that peer either goes through a new connection or, when
    // it meets the old one, fails; either way it ends, and its data lands
    // exactly when it succeeded.
    let landed = if out.contains("bad_remote: valid after: success") {
        "landed"
    } else {
        assert!(
            out.contains("bad_remote: valid after: error Transport endpoint is not connected"),
            "{out}"
        );
        "lost"
    };
    assert!(
        out.contains(&format!("bad_remote: target: valid write after {landed}")),
        "{out}"
    );
}

#[test]
fn refused_remote_accesses_time_out_over_shm() {
    // libfabric's shm processes answers in order: behind an access it
    // never answers, the endpoint's later answers never come either.
    bad_remote(
        "shm",
        &[
            "bad_remote: wrong key: error Connection timed out",
            "bad_remote: past the end: error Connection timed out",
            "bad_remote: valid after: error Connection timed out",
        ],
    );
}
