//! The launcher's weak-ordering mode (fi_xpu_host_launch(3)) catches what
//! CPU threads hide: put-with-signal between two processes on shm
//! (tests/c/device_signal.c, whose target checks every byte as soon as it
//! sees its signal) built with the release before the signal removed, or
//! narrowed from system to device scope (`FI_XPU_I_TEST_SIG_ORDER`, a
//! testing-only hook of fi_xpu/shm/shm__signal.h). Each fails in the mode, with
//! the data missing after its signal, and passes without it: x86's store
//! order keeps the data ahead of the signal, so only the model shows the
//! bug. The unchanged program passes in the mode (as in the weak-ordering
//! pass of `cargo xtask test`).
use crate::common;

use common::ofi::{program, run, run_ok, shm_env};

const WEAK: &str = "-DFI_XPU_HOST_WEAK_ORDER";
/// The release fence and the release store before the signal: relaxed.
const DROPPED: &str = "-DFI_XPU_I_TEST_SIG_ORDER(o,s)=FI_XPU_ARCH_RELAXED,s";
/// Both at device scope: the other process is a host agent in the model.
const NARROWED: &str = "-DFI_XPU_I_TEST_SIG_ORDER(o,s)=o,FI_XPU_ARCH_MS_DEVICE";

fn env(weak: bool) -> Vec<(&'static str, String)> {
    shm_env(&[
        ("FI_XPU_HOST_WEAK_ORDER", if weak { "1" } else { "0" }),
        ("FI_XPU_LOG_LEVEL", "info"),
        // A wide window: the target sees the signal within it even on a
        // loaded machine.
        ("FI_XPU_HOST_WEAK_WINDOW_MS", "100"),
    ])
}

/// Runs the weakened program in the mode: it must fail, its target
/// finding a signal without its data, and the model must say it let a
/// store overtake hidden ones. Then without the mode: it must pass.
fn caught(hook: &str) {
    let exe = program("device_signal", &[WEAK, hook]);
    let out = run(&exe, &[], &env(true), 240, "device_signal");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let missing = stderr
        .lines()
        .find(|l| l.contains("data missing after its signal"));
    assert!(
        !out.status.success() && missing.is_some(),
        "{hook}: the weak-ordering mode did not catch it ({})\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    let model = stderr.lines().find(|l| l.contains("weak-ordering mode: "));
    assert!(
        model.is_some(),
        "{hook}: no store overtook a hidden one\n--- stderr\n{stderr}"
    );
    eprintln!(
        "{hook}: caught:\n  {}\n  {}",
        missing.unwrap_or_default(),
        model.unwrap_or_default()
    );
    run_ok(&exe, &[], &env(false), 240, "device_signal");
}

#[test]
fn a_removed_release_before_a_signal_is_caught() {
    caught(DROPPED);
}

#[test]
fn a_release_narrowed_to_device_scope_before_a_signal_the_host_reads_is_caught() {
    caught(NARROWED);
}

#[test]
fn the_unchanged_program_passes_in_the_mode() {
    run_ok(
        &program("device_signal", &[WEAK]),
        &[],
        &env(true),
        240,
        "device_signal",
    );
}
