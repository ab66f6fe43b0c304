//! The ofi provider's proxy in isolation (`benches/ofi_proxy.c`): one
//! process, one device thread and its progress thread, writing between two
//! endpoints over libfabric's shm and tcp (loopback), beside host-direct
//! `fi_write` between two endpoints in one thread, both measured in turns in
//! the same run (medians of the rounds).
use super::{cc, cell, figures, Figures};
use crate::Result;
use std::path::Path;
use std::process::Command;

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

pub fn run(lib: &Path, dir: &Path, quick: bool) -> Result {
    let exe = dir.join("ofi_proxy");
    cc(
        "benches/ofi_proxy.c",
        &exe,
        lib,
        &["-lfi_xpu", "-lfabric", "-lpthread"],
    )?;
    let (iters, rounds) = if quick { ("1000", "3") } else { ("10000", "5") };
    let before = load();
    let runs: Vec<(&str, Figures)> = ["shm", "tcp"]
        .into_iter()
        .map(|fabric| {
            let f = figures(
                Command::new(&exe).args([fabric, iters, rounds]),
                &format!("ofi_proxy on {fabric}"),
            );
            (fabric, f)
        })
        .collect();
    let after = load();
    println!(
        "\n### ofi provider: the proxy alone, one process (`ofi_proxy <fabric> {iters} {rounds}`)\n"
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
    Ok(())
}

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}
