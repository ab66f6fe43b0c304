//! Put-with-signal, fence, quiet, signal waits and direct pointers
//! between two processes (tests/c/device_signal.c) on shm, and on ofi over
//! libfabric's tcp and shm, at every scope; bad input with its codes.
//!
//! Each provider also runs under its testing-only delay of data placement
//! (`FI_XPU_SHM_TEST_DELAY_US`, `FI_XPU_OFI_TEST_DELAY_MS`): a signal that
//! can overtake its data, or a fence that does not hold later operations
//! back, is caught there, where plain runs usually pass by timing. On ofi
//! a fence orders operations per peer (tests/c/ofi_fence.c).
use crate::common;

use common::ofi::{have_libfabric, over, program, run_ok, run_program, shm_env};

fn signal(env: Vec<(&'static str, String)>) {
    run_program("device_signal", &env);
}

/// The same program under AddressSanitizer and UBSan (the C side: the
/// kernels, the device headers, the launcher's threads).
fn signal_asan(mut env: Vec<(&'static str, String)>) {
    if !common::asan_works() {
        eprintln!("skipped: the C compiler cannot link with AddressSanitizer here");
        return;
    }
    env.push(("ASAN_OPTIONS", "detect_leaks=1".into()));
    env.push(("UBSAN_OPTIONS", "halt_on_error=1".into()));
    run_ok(
        &program(
            "device_signal",
            &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"],
        ),
        &[],
        &env,
        240,
        "device_signal",
    );
}

/// As `signal`, with the log at `info`: the log also says `transport` (the
/// libfabric provider's line) and `path` (how signals follow their data).
fn signal_saying(mut env: Vec<(&'static str, String)>, transport: &str, path: &str) {
    env.push(("FI_XPU_LOG_LEVEL", "info".into()));
    let out = common::ofi::run(
        &program("device_signal", &[]),
        &[],
        &env,
        240,
        "device_signal",
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("device_signal: ok"),
        "{}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains(transport) && stderr.contains(path),
        "{stderr}"
    );
}

fn shm(delay_us: Option<&str>) -> Vec<(&'static str, String)> {
    match delay_us {
        Some(d) => shm_env(&[("FI_XPU_SHM_TEST_DELAY_US", d)]),
        None => shm_env(&[]),
    }
}

fn ofi(fabric: &str, delay_ms: Option<&str>) -> Option<Vec<(&'static str, String)>> {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping ofi over {fabric}");
        return None;
    }
    let mut env = over(fabric);
    if let Some(d) = delay_ms {
        env.push(("FI_XPU_OFI_TEST_DELAY_MS", d.into()));
    }
    Some(env)
}

#[test]
fn ordered_signals_on_shm() {
    signal(shm(None));
}

#[test]
fn ordered_signals_on_shm_with_late_data() {
    signal(shm(Some("100")));
}

#[test]
fn ordered_signals_on_shm_under_asan() {
    signal_asan(shm(Some("20")));
}

#[test]
fn ordered_signals_on_ofi_tcp_under_asan() {
    if let Some(env) = ofi("tcp", None) {
        signal_asan(env);
    }
}

#[test]
fn ordered_signals_on_ofi_tcp() {
    if let Some(env) = ofi("tcp", None) {
        signal(env);
    }
}

#[test]
fn ordered_signals_on_ofi_tcp_with_late_data() {
    if let Some(env) = ofi("tcp", Some("30")) {
        signal(env);
    }
}

/// libfabric's shm places write data in order when asked (`FI_ORDER_WAW`,
/// any size): a put's data goes injected and its signal right behind it
/// (the transport line says so). Late data must still come first: the
/// signal may only follow the data into libfabric.
fn injected_over_shm(delay_ms: Option<&str>) {
    let Some(env) = ofi("shm", delay_ms) else {
        return;
    };
    signal_saying(
        env,
        "transport: libfabric provider shm",
        "or at once behind injected data of up to",
    );
}

#[test]
fn ordered_signals_on_ofi_shm() {
    injected_over_shm(None);
}

#[test]
fn ordered_signals_on_ofi_shm_with_late_data() {
    injected_over_shm(Some("30"));
}

/// The same with the ordered path turned off: every signal waits for its
/// data's delivery completion.
#[test]
fn ordered_signals_on_ofi_shm_without_ordered_injection() {
    if let Some(mut env) = ofi("shm", Some("30")) {
        env.push(("FI_XPU_OFI_ORDERED_SIGNAL", "0".into()));
        signal(env);
    }
}

/// libfabric's sockets provider offers `FI_FENCE`: the signal follows its
/// data at once, fenced, rather than after the data's delivery completion
/// (the transport line says which). Late data must still come first.
fn fenced_over_sockets(delay_ms: Option<&str>) {
    let Some(mut env) = ofi("sockets", delay_ms) else {
        return;
    };
    let listed = std::process::Command::new("fi_info")
        .args(["-p", "sockets"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !listed {
        eprintln!("libfabric has no sockets provider here: skipping the FI_FENCE path");
        return;
    }
    env.push(("FI_SOCKETS_IFACE", "lo".into()));
    signal_saying(
        env,
        "transport: libfabric provider sockets",
        "signals follow their data fenced (FI_FENCE)",
    );
}

#[test]
fn fenced_signals_on_ofi_sockets() {
    fenced_over_sockets(None);
}

#[test]
fn fenced_signals_on_ofi_sockets_with_late_data() {
    fenced_over_sockets(Some("30"));
}

/// On ofi a fence orders operations per peer (tests/c/ofi_fence.c): under
/// late write data, an atomic to another peer goes ahead of a write held
/// before the fence, and one to the write's own peer waits for it.
fn per_peer_fence(fabric: &str) {
    if let Some(env) = ofi(fabric, Some("2000")) {
        run_ok(&program("ofi_fence", &[]), &[], &env, 120, "ofi_fence");
    }
}

#[test]
fn fence_orders_per_peer_on_ofi_tcp() {
    per_peer_fence("tcp");
}

#[test]
fn fence_orders_per_peer_on_ofi_shm() {
    per_peer_fence("shm");
}
