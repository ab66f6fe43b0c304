//! The host launcher's GPU-like mode (fi_xpu_host_launch(3)): each kernel of
//! tests/c/device_gpu_like.c has a bug that CPU threads forgive and a GPU
//! does not. Each test runs it both ways: the plain launcher lets the bug
//! pass, the GPU-like mode catches it (so each test fails without the mode).
use crate::common;

use common::{cc, log_body, root, run_ok, scratch};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn program() -> &'static PathBuf {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let exe = scratch("device_gpu_like").join("device_gpu_like");
        cc(&[&root().join("tests/c/device_gpu_like.c")], &exe, &[]);
        exe
    })
}

/// Runs one case: with `gpu`, the launch asks for the mode
/// (`FI_XPU_HOST_LAUNCH_GPU`); `env` adds variables. Returns the case's
/// result line and the log's lines (without pid, host and time).
fn case(name: &str, gpu: bool, env: &[(&str, &str)]) -> (String, Vec<String>) {
    let mut cmd = Command::new("timeout");
    cmd.arg("120").arg(program()).arg(name);
    if gpu {
        cmd.arg("gpu");
    }
    // The mode is asked for here or not at all, whatever the suite runs under.
    for var in [
        "FI_XPU_HOST_GPU",
        "FI_XPU_HOST_GPU_HANG_MS",
        "FI_XPU_HOST_GPU_SEED",
        "FI_XPU_HOST_GPU_SUBGROUP",
        "FI_XPU_HOST_GPU_GROUP_MS",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("FI_XPU_HOST_GPU_HANG_MS", "300");
    cmd.envs(env.iter().copied());
    let o = run_ok(&mut cmd);
    let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
    let log = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter_map(log_body)
        .collect();
    (out, log)
}

/// `key=value` of a result line.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

/// At most two groups of six run at once (their work items together), and
/// a group starts only when the one two places before it has finished.
#[test]
fn at_most_k_groups_are_resident() {
    // Groups spin for 200 ms waiting for the others: not a hang here.
    let hang = ("FI_XPU_HOST_GPU_HANG_MS", "5000");
    let (plain, _) = case("resident", false, &[]);
    assert_eq!(field(&plain, "rc"), "0");
    // Plain threads: all 24 work items at once, no group waits.
    assert!(
        field(&plain, "most_items").parse::<u32>().unwrap() > 8,
        "{plain}"
    );
    for (gpu, env) in [
        (true, vec![hang]),
        (false, vec![hang, ("FI_XPU_HOST_GPU", "2")]),
    ] {
        let (out, log) = case("resident", gpu, &env);
        assert_eq!(field(&out, "rc"), "0", "{out}");
        assert!(log.is_empty(), "{log:?}");
        assert!(
            field(&out, "most_items").parse::<u32>().unwrap() <= 8,
            "{out}"
        );
        let done: Vec<u32> = field(&out, "finished_at_start")
            .split(',')
            .map(|n| n.parse().unwrap())
            .collect();
        for (g, d) in done.iter().enumerate() {
            assert!(
                *d + 1 >= g as u32,
                "group {g} started with {d} finished: {out}"
            );
        }
    }
    // Three resident groups: the third starts at once.
    let (out, _) = case("resident", false, &[hang, ("FI_XPU_HOST_GPU", "3")]);
    assert!(out.contains("finished_at_start=0,0,0,"), "{out}");
}

const HANG: &str = "fi_xpu:core:warn: host launch (GPU-like mode, 2 of its 4 groups resident \
                    at once): no resident group made progress for 300 ms while groups 2-3 \
                    waited to become resident; on a GPU this kernel hangs here (";
const LET_RUN: &str = "). Letting the waiting groups run; the launch returns -FI_ETIMEDOUT";

/// `name` works on CPU threads; in the GPU-like mode with 2 of its 4
/// groups resident it is reported as a hang, `groups` saying what each
/// resident group does, and returns -FI_ETIMEDOUT; with every group
/// resident it works. The log of that last run.
fn reported_as_hang(name: &str, groups: &str) -> Vec<String> {
    assert_eq!(case(name, false, &[]).0, format!("{name}: rc=0"));
    let (out, log) = case(name, true, &[]);
    assert_eq!(out, format!("{name}: rc=-110"));
    assert_eq!(log, [format!("{HANG}{groups}{LET_RUN}")]);
    let (out, log) = case(name, true, &[("FI_XPU_HOST_GPU", "4")]);
    assert_eq!(out, format!("{name}: rc=0"));
    log
}

/// A grid-wide barrier made of a counter and a spin: every group waits
/// for groups that cannot start until it has finished.
#[test]
fn a_grid_barrier_over_more_groups_than_resident_is_reported() {
    let log = reported_as_hang(
        "grid_spin",
        "group 0: 1 in a FI_XPU_WORK_GROUP barrier, 1 spinning (fi_xpu_arch_pause); \
         group 1: 1 in a FI_XPU_WORK_GROUP barrier, 1 spinning (fi_xpu_arch_pause)",
    );
    // With every group resident it is a working (cooperative) launch.
    assert_eq!(log.len(), 0);
}

#[test]
fn a_device_barrier_over_more_groups_than_resident_is_reported() {
    reported_as_hang(
        "device_barrier",
        "group 0: 2 in a FI_XPU_DEVICE barrier; group 1: 2 in a FI_XPU_DEVICE barrier",
    );
}

/// Groups 0 and 1 spin on a flag that group 2 sets.
#[test]
fn a_spin_on_a_later_group_is_reported() {
    assert_eq!(case("later_flag", false, &[]).0, "later_flag: rc=0");
    let (out, log) = case("later_flag", true, &[]);
    assert_eq!(out, "later_flag: rc=-110");
    assert_eq!(log.len(), 1, "{log:?}");
    assert!(
        log[0].starts_with(
            "fi_xpu:core:warn: host launch (GPU-like mode, 2 of its 3 groups resident at \
             once): no resident group made progress for 300 ms while group 2 waited to become \
             resident; on a GPU this kernel hangs here (group 0: 1 spinning (fi_xpu_arch_pause)"
        ),
        "{log:?}"
    );
}

/// A group of 32 in 64-lane subgroups (an AMD wavefront) has one partial
/// subgroup: a copy split by the subgroup width misses half the bytes;
/// split by the subgroup's real rank and size it does not.
#[test]
fn code_that_assumes_full_subgroups_is_caught() {
    assert_eq!(
        case("full_subgroup", false, &[]).0,
        "full_subgroup: rc=0 missing=0"
    );
    assert_eq!(
        case("full_subgroup", true, &[]).0,
        "full_subgroup: rc=0 missing=2048"
    );
    // Another width: 24 lanes, then a partial subgroup of 8 that copies
    // only 688 of its 2048 bytes.
    assert_eq!(
        case("full_subgroup", true, &[("FI_XPU_HOST_GPU_SUBGROUP", "24")]).0,
        "full_subgroup: rc=0 missing=1360"
    );
    assert_eq!(
        case("converged", true, &[("FI_XPU_HOST_GPU_SUBGROUP", "24")]).0,
        "converged: rc=0 missing=0"
    );
    assert_eq!(case("converged", true, &[]).0, "converged: rc=0 missing=0");
}

/// Lane 0 publishes, the other lanes read with no subgroup sync between:
/// in the GPU-like mode the lanes take turns in an order that puts lane 0
/// behind some readers, at every seed tried; with a subgroup barrier between,
/// none reads too early.
#[test]
fn warp_synchronous_code_without_a_subgroup_sync_is_caught() {
    for seed in ["1", "2", "3"] {
        let env = [("FI_XPU_HOST_GPU_SEED", seed)];
        let (out, _) = case("lockstep", true, &env);
        assert_eq!(field(&out, "rc"), "0");
        assert!(
            field(&out, "stale").parse::<u32>().unwrap() > 0,
            "seed {seed}: {out}"
        );
        let (out, _) = case("lockstep_sync", true, &env);
        assert_eq!(out, "lockstep_sync: rc=0 stale=0", "seed {seed}");
    }
    // The same order again for the same seed: a failure repeats.
    let env = [("FI_XPU_HOST_GPU_SEED", "2")];
    assert_eq!(
        case("lockstep", true, &env).0,
        case("lockstep", true, &env).0
    );
}

/// A work-group call that one member never reaches (it returned): the
/// GPU-like mode reports who arrived and who is missing, the members that
/// waited get -FI_ETIMEDOUT, and so does the launch, instead of a hang.
#[test]
fn a_work_group_call_that_a_member_skips_is_reported() {
    let (out, log) = case(
        "partial_group",
        true,
        &[("FI_XPU_HOST_GPU_GROUP_MS", "200")],
    );
    assert_eq!(out, "partial_group: rc=-110 ok=4 timedout=3");
    assert_eq!(
        log,
        ["fi_xpu:core:warn: host launch (GPU-like mode): \
             fi_xpu_host_barrier(FI_XPU_WORK_GROUP) in work group 1 waited 200 ms for members \
             that did not come: work items 0-2 of 4 arrived; missing: work item 3 returned \
             from the kernel; on a GPU this kernel hangs here. The members that arrived return \
             -FI_ETIMEDOUT from it, and so does the launch"]
    );
}

#[test]
fn a_subgroup_call_that_a_lane_skips_is_reported() {
    let env = [
        ("FI_XPU_HOST_GPU_GROUP_MS", "200"),
        ("FI_XPU_HOST_GPU_SUBGROUP", "2"),
    ];
    let (out, log) = case("partial_subgroup", true, &env);
    // Subgroup 0 of group 1 (lanes 0-1) and both of group 0 are whole.
    assert_eq!(out, "partial_subgroup: rc=-110 ok=6 timedout=1");
    assert_eq!(
        log,
        ["fi_xpu:core:warn: host launch (GPU-like mode): \
             fi_xpu_host_broadcast(FI_XPU_SUBGROUP) in subgroup 1 of work group 1 waited 200 ms \
             for members that did not come: lane 0 of 2 arrived; missing: lane 1 returned from \
             the kernel; on a GPU this kernel hangs here. The members that arrived return \
             -FI_ETIMEDOUT from it, and so does the launch"]
    );
}

/// With the check off (`FI_XPU_HOST_GPU_GROUP_MS=0`) the kernel hangs, as
/// it would on a GPU.
#[test]
fn the_partial_group_check_can_be_turned_off() {
    let mut cmd = Command::new("timeout");
    cmd.args(["2"])
        .arg(program())
        .args(["partial_group", "gpu"]);
    cmd.env_remove("FI_XPU_HOST_GPU")
        .env("FI_XPU_HOST_GPU_GROUP_MS", "0");
    let st = cmd.status().unwrap();
    assert_eq!(st.code(), Some(124), "{st:?}");
}
