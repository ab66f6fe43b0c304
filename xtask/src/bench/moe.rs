//! MoE dispatch+combine (examples/moe/moe.c: device code on CPU threads,
//! through an fi_xpu world) beside the same exchange driven from the host
//! with libfabric directly (benches/moe_host.c: fi_writemsg with delivery
//! complete, a host-initiated all-to-allv), on the same transport, in the
//! same run: wall-clock ratios at 2 and 4 ranks, and callgrind instructions
//! per dispatched token of the issuing side.
use super::{callgrind, cc, cell, figures, median, ratio};
use crate::Result;
use std::path::Path;
use std::process::Command;

/// Tokens per rank, routed to 3 experts each (7168 BF16 elements).
const TOKENS: u32 = 32;
const TOPK: u32 = 3;

/// Work items per rank: the CPUs shared out over the ranks, at least one,
/// so that the ranks' work items do not outnumber the CPUs (on CPU threads
/// more only take turns on the same cores; each rank also runs the
/// baseline's single thread's worth of communication).
fn work_items(ranks: u32) -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    (cpus / ranks).max(1)
}

fn moe_us(cmd: &mut Command, what: &str) -> Option<f64> {
    figures(cmd.env("FI_TCP_IFACE", "lo"), what)
        .get("moe_us")
        .copied()
}

/// Instructions inside `function` over every process of one run, per
/// token sent (ranks * TOKENS * TOPK): callgrind follows the forked ranks.
fn instructions_per_token(
    cmd: &mut Command,
    function: &str,
    ranks: u32,
    dir: &Path,
) -> Option<f64> {
    let out = dir.join("moe-callgrind");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).ok()?;
    let args: Vec<_> = cmd.get_args().map(|a| a.to_owned()).collect();
    let total = callgrind(
        Path::new(cmd.get_program()),
        &args,
        &[("FI_TCP_IFACE", "lo")],
        function,
        &out,
    )?;
    Some(total / f64::from(ranks * TOKENS * TOPK))
}

pub fn run(lib: &Path, dir: &Path, quick: bool) -> Result {
    let xpu = dir.join("moe");
    let host = dir.join("moe_host");
    cc("examples/moe/moe.c", &xpu, lib, &["-lfi_xpu", "-lpthread"])?;
    cc("benches/moe_host.c", &host, lib, &["-lfi_xpu", "-lfabric"])?;
    let (iters, runs) = if quick { ("3", 1) } else { ("10", 3) };
    let t = TOKENS.to_string();
    println!(
        "\n### MoE dispatch+combine: {TOKENS} tokens of 7168 BF16 per rank, top-{TOPK} of 4 experts per rank ({}; {iters} iterations after 1 untimed, mean of the slowest rank; median of {runs} runs taking turns; fi_xpu launches 1 group of {} and {} work items per rank at 2 and 4 ranks, as many as the CPUs give each rank; the baseline runs 1 thread per rank; in both programs each rank is bound to one CPU, as MPI launchers bind ranks, with its progress thread)\n",
        super::proxy::load(),
        work_items(2),
        work_items(4)
    );
    println!("| ranks | transport | fi_xpu (device code, µs) | host-driven libfabric (µs) | ratio | target |");
    println!("|---|---|---|---|---|---|");
    // fi_xpu's provider and transport, and the libfabric provider of the
    // same transport the baseline drives.
    let rows = [
        ("shm", None, "shm", "≤ 0.5×"),
        ("ofi", Some("tcp"), "tcp", "≤ 1.2×"),
        ("ofi", Some("shm"), "shm", "≤ 1.2×"),
    ];
    for n in [2u32, 4] {
        let items = work_items(n).to_string();
        let ranks = n.to_string();
        for (prov, fabric, lf, target) in rows {
            let mut x = Command::new(&xpu);
            x.args(["-n", &ranks, "-p", prov, "-T", &t, "-i", iters]);
            x.args(["-g", "1", "-w", &items, "-b", "-W", "1"]);
            if let Some(f) = fabric {
                x.args(["-f", f]);
            }
            let label = match fabric {
                Some(f) => format!("{prov}/{f}"),
                None => prov.to_string(),
            };
            let mut base = Command::new(&host);
            base.args([lf, "-n", &ranks, "-T", &t, "-i", iters, "-b", "-W", "1"]);
            // Taking turns, so that a slow spell of the machine falls on
            // both programs.
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..runs {
                a.extend(moe_us(&mut x, &format!("moe on {label}")));
                b.extend(moe_us(&mut base, &format!("moe_host on {lf}")));
            }
            let (a, b) = (median(&mut a), median(&mut b));
            println!(
                "| {n} | {label} vs libfabric {lf} | {} | {} | {} | {target} |",
                cell(a, 0),
                cell(b, 0),
                ratio(a, b)
            );
        }
    }
    println!("\n### MoE dispatch: instructions per token sent (callgrind, 2 ranks, 1 iteration)\n");
    println!("| transport | fi_xpu `moe_phase_dispatch_send` | host `moe_host_dispatch` | ratio | what fi_xpu's count holds |");
    println!("|---|---|---|---|---|");
    for (prov, fabric, lf) in [("shm", None, "shm"), ("ofi", Some("tcp"), "tcp")] {
        let mut x = Command::new(&xpu);
        x.args(["-n", "2", "-p", prov, "-T", &t, "-i", "1"]);
        if let Some(f) = fabric {
            x.args(["-f", f]);
        }
        let a = instructions_per_token(&mut x, "moe_phase_dispatch_send", 2, dir);
        let b = instructions_per_token(
            Command::new(&host).args([lf, "-n", "2", "-T", &t, "-i", "1"]),
            "moe_host_dispatch",
            2,
            dir,
        );
        // On ofi the kernel only fills ring entries; the proxy thread's
        // libfabric calls (what the baseline counts) are outside the phase.
        let holds = if fabric.is_some() {
            "ring posts only, not the proxy's fi_writemsg"
        } else {
            "the whole transfer (the device copies the data)"
        };
        println!(
            "| {prov}{} vs libfabric {lf} | {} | {} | {} | {holds} |",
            fabric.map_or(String::new(), |f| format!("/{f}")),
            cell(a, 0),
            cell(b, 0),
            ratio(a, b)
        );
    }
    Ok(())
}
