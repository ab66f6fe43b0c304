//! examples/moe: MoE dispatch and combine (BF16 and FP8 tokens of 7168
//! elements) and the ring allreduce beside it, from device code on the host
//! XPU, at 2, 4 and 8 processes over shm, ofi/tcp and ofi over libfabric's
//! shm. The programs check every byte on every rank and print "ok".
use crate::common;

use common::ofi::{have_libfabric, run};
use std::path::PathBuf;
use std::sync::OnceLock;

fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    let (moe, allreduce) = BUILT.get_or_init(|| {
        let dir = common::scratch("moe-example");
        let build = |src: &str, exe: &str| {
            let out = dir.join(exe);
            common::cc(&[&common::root().join(src)], &out, &["-O2"]);
            out
        };
        (
            build("examples/moe/moe.c", "moe"),
            build("examples/moe/allreduce.c", "allreduce"),
        )
    });
    if name == "moe" {
        moe.clone()
    } else {
        allreduce.clone()
    }
}

/// The provider arguments, or None when that transport is not there.
fn transport(t: &str) -> Option<Vec<&'static str>> {
    match t {
        "shm" => Some(vec!["-p", "shm"]),
        _ if !have_libfabric() => {
            eprintln!("libfabric is not installed: skipping ofi/{t}");
            None
        }
        "tcp" => Some(vec!["-p", "ofi", "-f", "tcp"]),
        _ => Some(vec!["-p", "ofi", "-f", "shm"]),
    }
}

fn check(name: &str, args: &[&str], wants: &[&str]) {
    let env = vec![
        ("FI_XPU_LOG_LEVEL", "warn".to_string()),
        ("FI_TCP_IFACE", "lo".to_string()),
    ];
    let mut out = run(&example(name), args, &env, 300, name);
    // libfabric's shm provider names its files after the pid and refuses
    // (EBUSY at fi_enable) a name a dead process left behind; with pids
    // wrapping at 32768 on a machine that runs many tests, a rank can
    // inherit one. One more run gets other pids.
    if !out.status.success()
        && String::from_utf8_lossy(&out.stderr)
            .contains("fi_enable failed: Device or resource busy")
    {
        out = run(&example(name), args, &env, 300, name);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && wants.iter().all(|w| stdout.contains(w)),
        "{name} {args:?}: {}\n--- stdout\n{stdout}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn moe(n: &str, t: &str, fp8: bool) {
    let Some(mut args) = transport(t) else {
        return;
    };
    args.extend(["-n", n, "-T", "8", "-i", "1"]);
    if fp8 {
        args.push("-8");
    }
    let dtype = if fp8 { "fp8" } else { "bf16" };
    check(
        "moe",
        &args,
        &[
            &format!("moe n={n} "),
            &format!("dtype={dtype} T=8 H=7168 E=4 K=3: ok"),
        ],
    );
}

fn allreduce(n: &str, t: &str) {
    let Some(mut args) = transport(t) else {
        return;
    };
    args.extend(["-n", n, "-c", "65537", "-i", "2"]);
    check(
        "allreduce",
        &args,
        &[&format!("allreduce n={n} prov="), "floats=65537: ok"],
    );
}

#[test]
fn moe_two_ranks_on_shm() {
    moe("2", "shm", false);
    moe("2", "shm", true);
}

#[test]
fn moe_four_ranks_on_shm() {
    moe("4", "shm", false);
    moe("4", "shm", true);
}

#[test]
fn moe_eight_ranks_on_shm() {
    moe("8", "shm", false);
}

#[test]
fn moe_two_ranks_on_ofi_tcp() {
    moe("2", "tcp", false);
    moe("2", "tcp", true);
}

#[test]
fn moe_four_ranks_on_ofi_tcp() {
    moe("4", "tcp", true);
}

#[test]
fn moe_eight_ranks_on_ofi_tcp() {
    moe("8", "tcp", false);
}

#[test]
fn moe_two_ranks_on_ofi_shm() {
    moe("2", "libfabric-shm", false);
    moe("2", "libfabric-shm", true);
}

#[test]
fn moe_four_ranks_on_ofi_shm() {
    moe("4", "libfabric-shm", false);
}

#[test]
fn allreduce_on_every_transport() {
    for t in ["shm", "tcp", "libfabric-shm"] {
        allreduce("2", t);
        allreduce("4", t);
    }
}

/// `-b` binds each forked rank (and the progress thread it starts) to one
/// CPU, and `-W` runs untimed iterations first, as the benchmark runs it;
/// ranks outnumbering the CPUs share them.
#[test]
fn moe_with_ranks_bound_to_cpus() {
    for t in ["shm", "tcp"] {
        let Some(mut args) = transport(t) else {
            continue;
        };
        args.extend(["-n", "4", "-T", "8", "-i", "2", "-b", "-W", "1"]);
        check(
            "moe",
            &args,
            &["moe n=4 ", "dtype=bf16 T=8 H=7168 E=4 K=3: ok"],
        );
    }
}

/// `-s`, what `cargo xtask demo` runs: one screen with the run's shape, the
/// bytes each rank sends, every phase's time and the check's result.
#[test]
fn moe_summary_screen() {
    check(
        "moe",
        &["-s", "-n", "2", "-T", "8", "-i", "2", "-W", "1"],
        &[
            "fi_xpu MoE dispatch and combine: 2 processes, provider shm",
            "tokens           8 per rank, 7168 BF16 elements each, routed to 3 experts",
            "dispatch bytes   344064 per rank (24 tokens x 14336 bytes)",
            "combine bytes    344064 per rank (24 results x 14336 bytes)",
            "dispatch_send",
            "dispatch_signal",
            "expert_combine",
            "combine_signal",
            "combine_reduce",
            "dispatch+combine",
            "verified: every byte of the 2 x 24 dispatched tokens and 2 x 8 combined \
             results, on every rank: ok",
        ],
    );
}
