//! `cargo xtask bench-shm`: how the shm provider's costs grow, and its large
//! copies, each figure beside its baseline from the same run, printed as the
//! Markdown tables BENCHMARKS.md keeps. Everything runs `benches/shm_scale.c`
//! (see its opening comment for the modes).
//!
//! - large copies: 4 MiB and 16 MiB writes to a peer beside memcpy (best of
//!   interleaved rounds), with and without non-temporal stores and huge
//!   pages, and the first write through a fresh mapping (time, page faults);
//! - message rate with 1, 8 and 64 posting work items on one endpoint, and
//!   with 2, 4, 8 and 16 processes all-to-all;
//! - memory of one process (/proc/self/smaps_rollup) with 2 to 64 peers, and
//!   with extra registrations;
//! - callgrind instructions of a post, and of `fi_xpu_av_lookup`, with 10,
//!   1000 and the table maximum (1024) registrations and AV entries.
//!
//! Wall-clock figures are printed with the load average (`uptime`) taken
//! beside them; message rates also per CPU-second of the posting processes
//! (getrusage), which other programs' load changes far less; callgrind
//! counts, page faults and memory sizes do not depend on load.
use crate::bench::{callgrind, cc_with, cell, figures, ratio, Figures};
use crate::{mkdir, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            let w: Vec<&str> = s.split_whitespace().take(3).collect();
            (w.len() == 3).then(|| format!("load average {}, {}, {}", w[0], w[1], w[2]))
        })
        .unwrap_or_else(|| "load average n/a".into())
}

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "n/a".into(), |s| s.trim().to_string())
}

fn meminfo(key: &str) -> String {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        })
        .unwrap_or_else(|| "n/a".into())
}

fn scale(exe: &Path, args: &[String], env: &[(&str, &str)]) -> Figures {
    figures(
        Command::new(exe).args(args).envs(env.iter().copied()),
        &format!("shm_scale {}", args.join(" ")),
    )
}

fn args(a: &[&dyn ToString]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

/// Instructions per call of `func` in `shm_scale ARGS`, counted by
/// callgrind over `calls` calls (every process's count summed).
fn instructions(exe: &Path, dir: &Path, func: &str, argv: &[String], calls: u32) -> Option<f64> {
    callgrind(exe, argv, &[], func, dir).map(|t| t / f64::from(calls))
}

/// A message-rate table under `title`, with the column names `head`, and
/// the load average before and after: one row per `n`, the rate and the
/// rate per CPU-second (figures `{key(n)}_mps` and `{key(n)}_cpu_mps` of
/// the run `argv(n)`), each beside the first row's.
fn rate_table(
    exe: &Path,
    title: &str,
    head: &str,
    ns: &[u32],
    argv: impl Fn(u32) -> Vec<String>,
    key: impl Fn(u32) -> String,
) {
    println!("\n### {title}\n");
    println!("{}\n", load());
    println!("{head}");
    println!("|---|---|---|---|---|---|---|");
    let (mut base, mut cbase) = (None, None);
    for &n in ns {
        let f = scale(exe, &argv(n), &[]);
        let r = f.get(&format!("{}_mps", key(n))).copied();
        let c = f.get(&format!("{}_cpu_mps", key(n))).copied();
        base = base.or(r);
        cbase = cbase.or(c);
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} |",
            cell(r, 2),
            cell(base, 2),
            ratio(r, base),
            cell(c, 2),
            cell(cbase, 2),
            ratio(c, cbase)
        );
    }
    println!("\n{}", load());
}

fn kib(f: &Figures, k: &str) -> String {
    f.get(k).map_or("n/a".into(), |v| format!("{v:.0}"))
}

/// `only_copy`: the large-copy table alone (to repeat it under other
/// huge-page settings of the machine).
pub fn run(lib: PathBuf, quick: bool, only_copy: bool) -> Result {
    crate::bench::library_path_first(&lib)?;
    let dir = lib.join("bench");
    mkdir(&dir)?;
    let nt = dir.join("shm_scale");
    let plain = dir.join("shm_scale_memcpy");
    cc_with(
        "benches/shm_scale.c",
        &nt,
        &lib,
        &["-lfi_xpu", "-lpthread"],
        &[],
    )?;
    cc_with(
        "benches/shm_scale.c",
        &plain,
        &lib,
        &["-lfi_xpu", "-lpthread"],
        &["-DFI_XPU_HOST_NT_COPY_MIN=0"],
    )?;
    let g = |f: &Figures, k: &str| f.get(k).copied();

    println!(
        "huge pages on this machine: vm.nr_hugepages {} (HugePages_Free {}), \
         transparent_hugepage/shmem_enabled `{}`",
        read_trim("/proc/sys/vm/nr_hugepages"),
        meminfo("HugePages_Free:"),
        read_trim("/sys/kernel/mm/transparent_hugepage/shmem_enabled"),
    );

    // ---- large copies --------------------------------------------------
    let rounds = if quick { 3 } else { 10 };
    println!(
        "\n### shm: large writes to a peer beside memcpy (best of {rounds} interleaved rounds)\n"
    );
    println!("{}\n", load());
    println!("| copy | FI_XPU_HUGE_PAGES | first 16 MiB write through a fresh mapping (ms) | its page faults | 4 MiB write / memcpy (MB/s) | ratio | 16 MiB write / memcpy (MB/s) | ratio |");
    println!("|---|---|---|---|---|---|---|---|");
    for (name, exe) in [("memcpy", &plain), ("non-temporal ≥ 4 MiB", &nt)] {
        for huge in ["off", "try"] {
            let f = scale(
                exe,
                &args(&[&"copy", &rounds]),
                &[("FI_XPU_HUGE_PAGES", huge)],
            );
            let mut row = format!(
                "| {name} | {huge} | {} | {} |",
                cell(g(&f, "first_write_16MiB_ms"), 2),
                cell(g(&f, "first_write_16MiB_faults"), 0)
            );
            for size in ["4MiB", "16MiB"] {
                let (w, m) = (
                    g(&f, &format!("write_{size}_MBps")),
                    g(&f, &format!("memcpy_{size}_MBps")),
                );
                row += &format!(" {} / {} | {} |", cell(w, 0), cell(m, 0), ratio(w, m));
            }
            println!("{row}");
        }
    }
    println!("\n{}", load());
    if only_copy {
        return Ok(());
    }

    // ---- message rate --------------------------------------------------
    let total: u32 = if quick { 64_000 } else { 640_000 };
    rate_table(
        &nt,
        "shm: 8-byte write rate with N posting work items on one endpoint",
        "| work items | rate (Mmsg/s) | baseline: 1 work item | ratio | per CPU-second (Mmsg) | baseline: 1 work item | ratio |",
        &[1, 8, 64],
        |n| args(&[&"rate", &n, &(total / n)]),
        |n| format!("rate_{n}_items"),
    );

    let posts: u32 = if quick { 20_000 } else { 200_000 };
    rate_table(
        &nt,
        &format!("shm: 8-byte writes all-to-all among P processes ({posts} per process)"),
        "| processes | aggregate rate (Mmsg/s) | baseline: 2 processes | ratio | per CPU-second (Mmsg) | baseline: 2 processes | ratio |",
        &[2, 4, 8, 16],
        |p| args(&[&"alltoall", &p, &posts]),
        |p| format!("alltoall_{p}_procs"),
    );

    // ---- memory ----------------------------------------------------------
    println!(
        "\n### shm: memory of one process connected to P-1 peers (KiB, /proc/self/smaps_rollup)\n"
    );
    println!("Each process: one context (heap {} bytes), one endpoint, a registered 1 MiB allocation \
              and R-1 more registered allocations of 64 KiB; `alone` is before any peer, `connected` \
              after connecting to every other process and one write to each. Connections per pair: \
              1 when only one of the two inserts the other's address, 2 when both do.\n",
             std::env::var("FI_XPU_SHM_HEAP_SIZE").unwrap_or_else(|_| "8388608 (default)".into()));
    println!("| processes | registrations each (R) | connections per pair | state | Rss | Pss | Pss_Shmem | Shared (clean+dirty) | Private (clean+dirty) | VmSize | mappings | open fds |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut runs: Vec<(u32, u32, u32)> = [2u32, 4, 8, 16, 32, 64]
        .iter()
        .map(|&p| (p, 0, 0))
        .collect();
    runs.extend([(32, 0, 1), (8, 100, 0)]);
    for (p, regs, both) in runs {
        let f = scale(&nt, &args(&[&"mem", &p, &regs, &both]), &[]);
        for state in ["alone", "connected"] {
            let tag = if state == "alone" {
                format!("mem_{p}_{regs}_{both}_alone")
            } else {
                format!("mem_{p}_{regs}_{both}")
            };
            let sum = |a: &str, b: &str| match (
                g(&f, &format!("{tag}_{a}_kib")),
                g(&f, &format!("{tag}_{b}_kib")),
            ) {
                (Some(x), Some(y)) => format!("{:.0}", x + y),
                _ => "n/a".into(),
            };
            println!(
                "| {p} | {} | {} | {state} | {} | {} | {} | {} | {} | {} | {} | {} |",
                regs + 1,
                both + 1,
                kib(&f, &format!("{tag}_Rss_kib")),
                kib(&f, &format!("{tag}_Pss_kib")),
                kib(&f, &format!("{tag}_Pss_Shmem_kib")),
                sum("Shared_Clean", "Shared_Dirty"),
                sum("Private_Clean", "Private_Dirty"),
                kib(&f, &format!("{tag}_VmSize_kib")),
                kib(&f, &format!("{tag}_mappings")),
                kib(&f, &format!("{tag}_fds")),
            );
        }
    }

    // ---- lookups -----------------------------------------------------------
    let calls: u32 = if quick { 20 } else { 200 };
    println!("\n### shm: instructions per call with K registrations at the target and K AV entries (callgrind)\n");
    println!(
        "Registrations stop at the domain's 255 shared regions (254 for the target here: its \
              context heap is one), whatever K asks.\n"
    );
    println!("| K | registrations at the target | post_one: 8-byte fi_xpu_write to the last registration via the K-th AV entry | lookup_first: first fi_xpu_av_lookup of the K-th entry | lookup_one: fi_xpu_av_lookup again |");
    println!("|---|---|---|---|---|");
    for k in [10u32, 1000, 1024] {
        let argv = args(&[&"lookup", &k, &k, &calls]);
        let post = instructions(&nt, &dir, "post_one", &argv, calls);
        let first = instructions(&nt, &dir, "lookup_first", &argv, 1);
        let again = instructions(&nt, &dir, "lookup_one", &argv, calls);
        let regs = g(&scale(&nt, &argv, &[]), "lookup_registrations");
        println!(
            "| {k} | {} | {} | {} | {} |",
            cell(regs, 0),
            cell(post, 0),
            cell(first, 0),
            cell(again, 0)
        );
    }
    Ok(())
}
