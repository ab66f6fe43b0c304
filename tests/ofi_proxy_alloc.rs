//! The ofi provider's progress thread allocates nothing per ring entry once
//! warm: `benches/ofi_proxy.c --post N` (one device thread writing 8-byte
//! entries through the proxy over libfabric's shm, one at a time) makes as
//! many heap allocations, counted by valgrind, for 100 entries as for 400,
//! give or take a few that do not depend on the entry count (libfabric's
//! own progress allocates now and then, depending on how the threads were
//! scheduled). Before request records were pooled and the thread's lists
//! kept, each entry cost about five: 1500 more for the longer run.
use crate::common;

use common::ofi;
use std::process::Command;

/// Allocations that come and go with thread scheduling, not with entries,
/// in the fewest of a few runs.
const SCHEDULING_NOISE: u64 = 16;

/// valgrind's count of heap allocations of one run of `n` entries.
fn allocations(exe: &std::path::Path, n: u32) -> u64 {
    let mut cmd = Command::new("valgrind");
    cmd.current_dir(exe.parent().unwrap())
        .args(["--leak-check=no", "--fair-sched=yes", "--error-exitcode=99"])
        .arg(exe)
        .args(["shm", "--post", &n.to_string()])
        .env("FI_XPU_LOG_LEVEL", "none");
    let out = common::run_ok(&mut cmd);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // "==PID==   total heap usage: 1,781 allocs, 1,780 frees, ..."
    let line = stderr
        .lines()
        .find(|l| l.contains("total heap usage:"))
        .unwrap_or_else(|| panic!("no heap summary from valgrind:\n{stderr}"));
    let count = line
        .split("total heap usage:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .replace(',', "");
    count.parse().unwrap()
}

/// benches/ofi_proxy.c built in the scratch directory `tag`; `None`
/// (skipped, saying so) where libfabric is not installed.
fn ofi_proxy(tag: &str) -> Option<std::path::PathBuf> {
    if !ofi::have_libfabric() {
        eprintln!("skipped: libfabric is not installed");
        return None;
    }
    let exe = common::scratch(tag).join("ofi_proxy");
    common::cc(
        &[&common::root().join("benches/ofi_proxy.c")],
        &exe,
        &["-Wl,--no-as-needed", "-lfabric"],
    );
    Some(exe)
}

#[test]
fn proxy_allocates_nothing_per_entry() {
    let Some(exe) = ofi_proxy("ofi-proxy-alloc") else {
        return;
    };
    if !common::valgrind_usable() {
        return;
    }
    // One allocation per entry would add 300 in every run. Scheduling
    // noise only adds (libfabric's progress allocating now and then), a
    // handful on a quiet machine and a few dozen on a busy one, so the
    // fewest of up to three runs of each length is what the entries cost.
    let (mut few, mut many) = (u64::MAX, u64::MAX);
    for _ in 0..3 {
        few = few.min(allocations(&exe, 100));
        many = many.min(allocations(&exe, 400));
        if many.abs_diff(few) <= SCHEDULING_NOISE {
            break;
        }
    }
    assert!(
        many.abs_diff(few) <= SCHEDULING_NOISE,
        "300 more entries made {} more heap allocations ({few} for 100 entries, {many} for 400)",
        many as i64 - few as i64
    );
}

/// The benchmark's other paths run to the end and print their figures:
/// the bare ring (`ring`), and the host-direct writes one at a time
/// (`--host-post`, 8 bytes or a size given) that system-call and
/// instruction counts compare with `--post`.
#[test]
fn bench_ring_and_host_post_run() {
    let Some(exe) = ofi_proxy("ofi-proxy-paths") else {
        return;
    };
    let out = common::run_ok(
        Command::new(&exe)
            .args(["shm", "20", "1", "ring"])
            .env("FI_XPU_LOG_LEVEL", "none"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    for name in ["latency_8B_us", "rate_8B_mps", "bw_16MiB_MBps"] {
        let value = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("ring_{name} ")))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("no ring_{name} figure:\n{stdout}"));
        assert!(value > 0.0, "ring_{name} {value}");
    }
    assert!(
        !stdout.contains("host_") && !stdout.contains("xpu_"),
        "{stdout}"
    );
    for args in [
        &["shm", "--host-post", "50"][..],
        &["shm", "--host-post", "20", "65536"],
        &["shm", "--post", "20", "65536"],
    ] {
        common::run_ok(
            Command::new(&exe)
                .args(args)
                .env("FI_XPU_LOG_LEVEL", "none"),
        );
    }
}
