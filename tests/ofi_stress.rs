//! The ofi provider under pressure, over libfabric's tcp and shm providers
//! (tests/c/ofi_stress.c): a peer killed mid-run (also while it holds a
//! lock of the survivor's inside libfabric, tests/c/ofi_wedge.c), a flood that fills the
//! ring, malformed ring entries written by hand, a ring slot whose `seq` is
//! never written right, and posts from the host
//! launcher with work-group, subgroup and device scopes on two progress
//! threads.
use crate::common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::ofi::{have_libfabric, pids, ShmLeftovers};

fn exe() -> &'static PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let dir = common::scratch("ofi-stress");
        let exe = dir.join("ofi_stress");
        // A short flush limit: the survivor of a dead peer flushes a write
        // libfabric may never finish.
        common::cc(
            &[&common::root().join("tests/c/ofi_stress.c")],
            &exe,
            &["-DFI_XPU_OFI_FLUSH_TIMEOUT_MS=2000"],
        );
        exe
    })
}

/// The fault injector of tests/c/ofi_wedge.c, built once.
fn wedge() -> &'static PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let lib = common::scratch("ofi-wedge").join("libofi_wedge.so");
        common::cc(
            &[&common::root().join("tests/c/ofi_wedge.c")],
            &lib,
            &["-shared", "-fPIC", "-Wl,--as-needed"],
        );
        lib
    })
}

/// Runs one mode; returns (stdout, stderr) of a successful run.
fn run(mode: &str, fabric: &str) -> Option<(String, String)> {
    run_with(mode, fabric, &[])
}

fn run_with(mode: &str, fabric: &str, env: &[(&str, &str)]) -> Option<(String, String)> {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping ofi_stress {mode} over {fabric}");
        return None;
    }
    // A hang in the death mode is the bug it guards against: its waits are
    // bounded by 2 s each and closing by FI_XPU_OFI_CLOSE_MS, so it has far
    // less time than the others.
    let limit = if mode == "death" { "45" } else { "120" };
    let start = Instant::now();
    let out = common::run(
        Command::new("timeout")
            .current_dir(exe().parent().unwrap())
            .arg(limit)
            .arg(exe())
            .arg(mode)
            .env("FI_XPU_PROVIDER", "ofi")
            .env("FI_XPU_OFI_PROVIDER", fabric)
            .env("FI_TCP_IFACE", "lo")
            .envs(env.iter().copied()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let _cleanup = ShmLeftovers(pids(&stdout, "ofi_stress"));
    assert!(
        out.status.success(),
        "ofi_stress {mode} over {fabric} failed with {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(&format!("ofi_stress {mode}: ok")),
        "{stdout}"
    );
    // Under memcheck the program runs its slowdown times slower.
    assert!(start.elapsed() < Duration::from_secs(100) * common::memcheck::slowdown());
    Some((stdout, stderr))
}

/// Close limit of the death runs: a progress thread stuck in libfabric is
/// given up after this long.
const CLOSE_MS: &str = "2000";

fn death(fabric: &str, env: &[(&str, &str)]) -> Option<String> {
    let mut env = env.to_vec();
    env.push(("FI_XPU_OFI_CLOSE_MS", CLOSE_MS));
    let (stdout, stderr) = run_with("death", fabric, &env)?;
    // Each wait on the dead peer ended with an error or a timeout, and the
    // survivor closed everything (the C side bounds the time it took).
    for what in ["cntr_wait: ", "cq_sread: ", "flush: ", "teardown "] {
        assert!(stdout.contains(&format!("death: {what}")), "{stdout}");
    }
    Some(stderr)
}

#[test]
fn killed_peer_over_tcp() {
    death("tcp", &[]);
}

#[test]
fn killed_peer_over_shm() {
    death("shm", &[]);
}

/// libfabric's version as pkg-config reports it, as (major, minor).
fn libfabric_version() -> Option<(u32, u32)> {
    let o = Command::new("pkg-config")
        .args(["--modversion", "libfabric"])
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let mut it = v.split('.').map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

/// The peer dies while it holds the lock of the survivor's receive queue
/// inside libfabric's shm provider: the survivor's progress thread spins
/// in libfabric for good, and its closes must give it up instead of
/// waiting for it (which hung the test now and then before).
#[test]
fn killed_peer_holding_shm_lock() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let lib = common::preload(wedge());
    let Some(stderr) = death("shm", &[("LD_PRELOAD", &lib)]) else {
        return;
    };
    let fired = stderr.contains("ofi_wedge: peer");
    if fired {
        assert!(
            stderr.contains("has not come back from a libfabric call"),
            "{stderr}"
        );
        assert_eq!(
            stderr.matches("has not come back").count(),
            1,
            "one thread, given up once: {stderr}"
        );
    } else {
        // Only a libfabric whose shm queues take no lock in shared memory.
        let v = libfabric_version();
        assert!(
            v.is_some_and(|v| v > (1, 17)),
            "the injected death did not fire on libfabric {v:?}\n{stderr}"
        );
        eprintln!("libfabric {v:?}: shm takes no lock a peer could die holding");
    }
}

#[test]
fn flood_over_tcp() {
    run("flood", "tcp");
}

#[test]
fn flood_over_shm() {
    run("flood", "shm");
}

fn malformed(fabric: &str) {
    let Some((_, stderr)) = run("malformed", fabric) else {
        return;
    };
    // One log line per bad entry, at the ring positions the test used
    // (each bad entry is followed by a good one).
    for line in [
        "malformed ring entry at 0 (op 99): Invalid argument",
        "malformed ring entry at 2 (op 1): Message too long",
        "malformed ring entry at 4 (op 1): Invalid argument",
        "malformed ring entry at 6 (op 1): Invalid argument",
        "malformed ring entry at 8 (op 1): Flags not supported",
        "malformed ring entry at 10 (op 1): Permission denied",
    ] {
        assert!(stderr.contains(line), "missing '{line}' in\n{stderr}");
    }
    assert_eq!(
        stderr.matches("malformed ring entry").count(),
        6,
        "{stderr}"
    );
}

#[test]
fn malformed_entries_over_tcp() {
    malformed("tcp");
}

#[test]
fn malformed_entries_over_shm() {
    malformed("shm");
}

fn stalled(fabric: &str) {
    let Some((_, stderr)) = run("stalled", fabric) else {
        return;
    };
    // Only the entry whose `seq` was wrong (position 1) was given up; the
    // slow producer's (position 0) was waited for.
    assert!(
        stderr.contains("ring entry at 1 never published (seq 258)"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("never published").count(), 1, "{stderr}");
}

#[test]
fn stalled_slot_over_tcp() {
    stalled("tcp");
}

#[test]
fn stalled_slot_over_shm() {
    stalled("shm");
}

#[test]
fn launcher_scopes_over_tcp() {
    run("scopes", "tcp");
}

#[test]
fn launcher_scopes_over_shm() {
    run("scopes", "shm");
}
