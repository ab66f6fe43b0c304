//! The ofi provider's proxy in isolation (`benches/ofi_proxy.c`): one
//! process, one device thread and its progress thread, writing between two
//! endpoints over libfabric's shm and tcp (loopback), beside host-direct
//! `fi_write` between two endpoints in one thread, both measured in turns in
//! the same run (medians of the rounds).
use super::{cc, cell, figures, median, Figures};
use crate::Result;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// The machine's load, as `uptime` reports it.
pub fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| {
            let w: Vec<&str> = l.split_whitespace().take(3).collect();
            (w.len() == 3).then(|| format!("load average {}", w.join(", ")))
        })
        .unwrap_or_else(|| "load unknown".into())
}

/// Builds benches/ofi_proxy.c into `exe`.
fn build(exe: &Path, lib: &Path) -> Result {
    cc(
        "benches/ofi_proxy.c",
        exe,
        lib,
        &["-lfi_xpu", "-lfabric", "-lpthread"],
    )
}

pub fn run(lib: &Path, dir: &Path, quick: bool) -> Result {
    let exe = dir.join("ofi_proxy");
    build(&exe, lib)?;
    let (iters, rounds) = if quick { ("1000", "3") } else { ("5000", "5") };
    let before = load();
    // The bare ring takes turns with the shm run's two paths (the cores'
    // state changes between runs); a tcp run's sockets and threads would
    // share the cores with it.
    let runs: Vec<(&str, Figures)> = [("shm", "all"), ("tcp", "")]
        .into_iter()
        .map(|(fabric, paths)| {
            let f = figures(
                Command::new(&exe).args([fabric, iters, rounds, paths]),
                &format!("ofi_proxy on {fabric}"),
            );
            (fabric, f)
        })
        .collect();
    let after = load();
    println!(
        "\n### ofi provider: the proxy alone, one process (`ofi_proxy shm {iters} {rounds} all`, `ofi_proxy tcp {iters} {rounds}`)\n"
    );
    println!("Load: {before} before, {after} after.\n");
    println!("| libfabric provider | figure | device code through the proxy | host-direct fi_write | ratio / difference | target | met |");
    println!("|---|---|---|---|---|---|---|");
    let g = |f: &Figures, k: &str| f.get(k).copied();
    for (fabric, f) in &runs {
        let (x, h) = (g(f, "xpu_latency_8B_us"), g(f, "host_latency_8B_us"));
        let (diff, met) = match (x, h) {
            (Some(x), Some(h)) => (format!("{:+.2} µs", x - h), yes(x <= h + 1.5)),
            _ => ("n/a".into(), "n/a"),
        };
        println!(
            "| {fabric} | latency 8 B (µs) | {} | {} | {diff} | ≤ host + 1.5 µs | {met} |",
            cell(x, 2),
            cell(h, 2)
        );
        let rows = [
            ("rate_8B_mps", "message rate 8 B (Mmsg/s)", 0.8, 3),
            ("bw_64KiB_MBps", "bandwidth 64 KiB (MB/s)", 0.9, 0),
            ("bw_1MiB_MBps", "bandwidth 1 MiB (MB/s)", 0.9, 0),
            ("bw_16MiB_MBps", "bandwidth 16 MiB (MB/s)", 0.9, 0),
        ];
        for (key, name, target, digits) in rows {
            let (x, h) = (g(f, &format!("xpu_{key}")), g(f, &format!("host_{key}")));
            let (r, met) = match (x, h) {
                (Some(x), Some(h)) if h > 0.0 => (format!("{:.2}×", x / h), yes(x / h >= target)),
                _ => ("n/a".into(), "n/a"),
            };
            println!(
                "| {fabric} | {name} | {} | {} | {r} | ≥ {target}× | {met} |",
                cell(x, digits),
                cell(h, digits)
            );
        }
    }
    ring_bound(&runs);
    put_signal(&exe, quick);
    per_entry(lib, dir, quick)
}

/// The 8-byte rate of a bare ring between the same two threads (no
/// checks, no libfabric), and the rate a proxy would reach if it added
/// nothing to that ring and to host-direct libfabric's own work per entry:
/// the two costs per entry added up, since the proxy thread pays both.
fn ring_bound(runs: &[(&str, Figures)]) {
    let r = runs
        .iter()
        .find_map(|(_, f)| f.get("ring_rate_8B_mps").copied());
    println!("\n8-byte rate of a bare ring between two threads (the `ring_` figures of the shm run: entries one way, completions back, no checks, no libfabric), and the bound it sets on any proxy: one thread paying both the ring's and host-direct libfabric's time per entry.\n");
    println!("| libfabric provider | bare ring (Mmsg/s) | host-direct (Mmsg/s) | bound: 1 / (1/ring + 1/host) (Mmsg/s) | bound / host-direct | device code through the proxy / bound |");
    println!("|---|---|---|---|---|---|");
    for (fabric, f) in runs {
        let g = |k: &str| f.get(k).copied();
        let (h, x) = (g("host_rate_8B_mps"), g("xpu_rate_8B_mps"));
        let bound = match (r, h) {
            (Some(r), Some(h)) if r > 0.0 && h > 0.0 => Some(1.0 / (1.0 / r + 1.0 / h)),
            _ => None,
        };
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
            _ => "n/a".into(),
        };
        println!(
            "| {fabric} | {} | {} | {} | {} | {} |",
            cell(r, 1),
            cell(h, 3),
            cell(bound, 3),
            ratio(bound, h),
            ratio(x, bound)
        );
    }
}

/// Latency of an 8-byte put with signal, post to completion: its data
/// injected with the signal right behind it where the transport orders
/// write data (`FI_XPU_OFI_ORDERED_SIGNAL=1`, the default), against the
/// signal waiting for the data's delivery completion (`=0`), processes
/// taking turns; an 8-byte write measured in the same processes beside it.
fn put_signal(exe: &Path, quick: bool) {
    let (n, rounds) = if quick { ("500", 3) } else { ("2000", 5) };
    let before = load();
    let mut rows = Vec::new();
    for fabric in ["shm", "sockets", "tcp"] {
        let mut v: BTreeMap<(&'static str, &'static str), Vec<f64>> = BTreeMap::new();
        for _ in 0..rounds {
            for ordered in ["1", "0"] {
                let f = figures(
                    Command::new(exe)
                        .args([fabric, "--put-signal", n])
                        .env("FI_XPU_OFI_ORDERED_SIGNAL", ordered)
                        .env("FI_SOCKETS_IFACE", "lo")
                        .env("FI_TCP_IFACE", "lo"),
                    &format!("ofi_proxy --put-signal on {fabric}"),
                );
                for k in ["xpu_put_signal_8B_us", "xpu_write_8B_us"] {
                    if let Some(&x) = f.get(k) {
                        v.entry((ordered, k)).or_default().push(x);
                    }
                }
            }
        }
        let mut mid = |k: (&'static str, &'static str)| v.get_mut(&k).and_then(|s| median(s));
        let row = [
            mid(("1", "xpu_put_signal_8B_us")),
            mid(("0", "xpu_put_signal_8B_us")),
            mid(("1", "xpu_write_8B_us")),
            mid(("0", "xpu_write_8B_us")),
        ];
        rows.push((fabric, row));
    }
    let after = load();
    println!(
        "\n### ofi provider: 8-byte put with signal, injected and ordered against \
         delivery-complete (`ofi_proxy <fabric> --put-signal {n}`, {rounds} rounds each, \
         FI_XPU_OFI_ORDERED_SIGNAL=1 and =0 taking turns; medians)\n"
    );
    println!("Load: {before} before, {after} after.\n");
    println!("| libfabric provider | put with signal, ordered (µs) | put with signal, delivery complete (µs) | ratio | 8-byte write in the same runs (µs) |");
    println!("|---|---|---|---|---|");
    for (fabric, [o, d, wo, wd]) in rows {
        println!(
            "| {fabric} | {} | {} | {} | {} / {} |",
            cell(o, 2),
            cell(d, 2),
            super::ratio(o, d),
            cell(wo, 2),
            cell(wd, 2)
        );
    }
}

/// Functions whose inclusive instructions are reported per entry: the
/// device-side post, and the proxy's validation, translation (with
/// libfabric's post inside), libfabric's post, and completion.
const COUNTED: [&str; 5] = [
    "xpu_post",
    "fi_xpu_ofi::proxy::post::validate",
    "fi_xpu_ofi::proxy::post::translate_and_post",
    "xo_writemsg",
    "fi_xpu_ofi::proxy::complete::complete",
];

/// Inclusive instructions of the `COUNTED` functions, heap allocations
/// (calls to malloc, calloc, realloc) of the whole process, and the
/// instructions of the proxy thread (`proxy_thread`) and of the libfabric
/// calls it made through the shim (`proxy_libfabric`: its `xo_*`
/// functions, inclusive), for `posts` 8-byte writes posted and completed
/// one at a time over libfabric's shm. Callgrind writes one file per
/// thread; the proxy's is the one that runs the worker loop.
fn callgrind(exe: &Path, dir: &Path, posts: u32) -> Option<BTreeMap<String, f64>> {
    let base = format!("callgrind.proxy.{posts}");
    let out = dir.join(&base);
    let ok = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--fair-sched=yes",
            "--separate-threads=yes",
            "-q",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["shm", "--post", &posts.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    if !ok {
        return None;
    }
    let mut v = BTreeMap::new();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&base))
        {
            files.push(path);
        }
    }
    for file in files {
        let raw = std::fs::read_to_string(&file).ok()?;
        *v.entry("allocations".to_string()).or_insert(0.0) += allocations(&raw);
        let annotated = Command::new("callgrind_annotate")
            .args(["--inclusive=yes", "--auto=no", "--threshold=100"])
            .arg(&file)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let _ = std::fs::remove_file(&file);
        let functions = inclusive_counts(&String::from_utf8_lossy(&annotated.stdout));
        for name in COUNTED {
            if let Some(&n) = functions.get(name) {
                *v.entry(name.to_string()).or_insert(0.0) += n;
            }
        }
        if functions.contains_key(PROXY_LOOP) {
            let total = raw
                .lines()
                .find_map(|l| l.strip_prefix("summary: ").or(l.strip_prefix("totals: ")))
                .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok());
            v.insert("proxy_thread".into(), total?);
            let lf = functions
                .iter()
                .filter(|(name, _)| name.starts_with("xo_"))
                .map(|(_, n)| n)
                .sum();
            v.insert("proxy_libfabric".into(), lf);
        }
    }
    Some(v)
}

/// The proxy thread's loop: the function that marks its callgrind file.
const PROXY_LOOP: &str = "fi_xpu_ofi::proxy::worker::run";

/// Each function's inclusive instructions in `callgrind_annotate` output,
/// from its own line (the one naming its object file; code inlined from
/// other files is listed again on lines without it, and is already in
/// the function's own count).
fn inclusive_counts(annotated: &str) -> BTreeMap<String, f64> {
    let mut v = BTreeMap::new();
    for line in annotated.lines() {
        // "  1,234 (0.5%)  file:name [object]"
        let Some((count, rest)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Ok(count) = count.replace(',', "").parse::<f64>() else {
            continue;
        };
        let Some(name) = rest.split_once("  ").map(|(_, r)| r).and_then(|r| {
            let r = r.strip_suffix(']')?;
            let (f, _) = r.rsplit_once(" [")?;
            Some(f.split_once(':').map_or(f, |(_, n)| n).to_string())
        }) else {
            continue;
        };
        *v.entry(name).or_insert(0.0) += count;
    }
    v
}

/// Calls to the C allocator in a callgrind output file.
fn allocations(raw: &str) -> f64 {
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut callee = String::new();
    let mut total = 0f64;
    for line in raw.lines() {
        if let Some(rest) = line.strip_prefix("cfn=") {
            // "(id) name" defines the id, "(id)" refers to it.
            let (id, name) = rest.split_once(' ').unwrap_or((rest, ""));
            if !name.is_empty() {
                names.insert(id.to_string(), name.to_string());
            }
            callee = names.get(id).cloned().unwrap_or_default();
        } else if let Some(rest) = line.strip_prefix("fn=") {
            if let Some((id, name)) = rest.split_once(' ') {
                names.insert(id.to_string(), name.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("calls=") {
            if matches!(callee.as_str(), "malloc" | "calloc" | "realloc") {
                total += rest
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<f64>().ok())
                    .unwrap_or(0.0);
            }
        }
    }
    total
}

/// Per-entry instructions and allocations: the difference between two
/// runs of different lengths, over the difference in entries, so that
/// setup and teardown cancel out.
pub fn per_entry(lib: &Path, dir: &Path, quick: bool) -> Result {
    let exe = dir.join("ofi_proxy");
    if !exe.exists() {
        build(&exe, lib)?;
    }
    let (a, b) = if quick { (200, 600) } else { (1000, 3000) };
    let (Some(ra), Some(rb)) = (callgrind(&exe, dir, a), callgrind(&exe, dir, b)) else {
        println!("\n(callgrind per entry: valgrind or callgrind_annotate failed)");
        return Ok(());
    };
    let per = |k: &str| -> Option<f64> {
        Some((rb.get(k)? - ra.get(k).copied().unwrap_or(0.0)) / f64::from(b - a))
    };
    let validate = per("fi_xpu_ofi::proxy::post::validate");
    let lf_post = per("xo_writemsg");
    let translate =
        per("fi_xpu_ofi::proxy::post::translate_and_post").map(|t| t - lf_post.unwrap_or(0.0));
    let complete = per("fi_xpu_ofi::proxy::complete::complete");
    println!(
        "\n### ofi provider: instructions per 8-byte write entry (callgrind, libfabric shm; runs of {a} and {b} entries, difference / {})\n",
        b - a
    );
    println!("| part | instructions per entry |");
    println!("|---|---|");
    println!(
        "| device side: `fi_xpu_write` post (`xpu_post`) | {} |",
        cell(per("xpu_post"), 0)
    );
    println!(
        "| proxy: validation (`validate`: entry fields, registrations, AV, known memory) | {} |",
        cell(validate, 0)
    );
    println!(
        "| proxy: translation (`translate_and_post` without libfabric's post) | {} |",
        cell(translate, 0)
    );
    println!(
        "| proxy: completion (`complete`: request lookup, counter, CQ entry) | {} |",
        cell(complete, 0)
    );
    let sum = [validate, translate, complete]
        .into_iter()
        .try_fold(0.0, |s, v| v.map(|v| s + v));
    println!("| proxy: total of the three | {} |", cell(sum, 0));
    println!(
        "| libfabric: `fi_writemsg` (`xo_writemsg`) | {} |",
        cell(lf_post, 0)
    );
    let thread = per("proxy_thread");
    let thread_lf = per("proxy_libfabric");
    println!(
        "| the proxy thread, all of it (its passes included) | {} |",
        cell(thread, 0)
    );
    println!(
        "| of which libfabric's calls (`xo_*`: post, CQ reads, counters, trywait) | {} |",
        cell(thread_lf, 0)
    );
    println!(
        "| of which the proxy's own work | {} |",
        cell(thread.zip(thread_lf).map(|(t, l)| t - l), 0)
    );
    println!(
        "| heap allocations per entry, whole process | {} |",
        cell(per("allocations"), 2)
    );
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
