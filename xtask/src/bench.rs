//! `cargo xtask bench`: the RMA benchmarks of fi_xpu beside their baselines,
//! all measured in the same run on this machine, printed as a Markdown table
//! with ratios (the form BENCHMARKS.md keeps).
//!
//! - `benches/xpu_rma.c`: 8-byte write latency (ping-pong), message rate from
//!   one posting thread, bandwidth at 64 KiB, 1 MiB, 16 MiB, issued by device
//!   code on CPU threads; also single-thread memcpy bandwidth.
//! - `benches/libfabric_rma.c`: the same figures with `fi_write` issued from
//!   the host directly on a libfabric provider.
//! - `fi_pingpong -p shm`: libfabric's own ping-pong, for reference.
//! - callgrind: instructions of one `fi_xpu_write` post (`post_one`).
//! - `benches/ofi_proxy.c`: the ofi provider's proxy alone (see `proxy`).
//! - `benches/launch.c`: what a host launch costs, beside a pthread per
//!   work item created and joined (see `launch`).
//! - MoE dispatch+combine (`examples/moe`) beside the same exchange driven
//!   from the host with libfabric (`benches/moe_host.c`), see `moe`.
use crate::{mkdir, root, Result};

mod launch;
mod moe;
mod proxy;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub(crate) type Figures = BTreeMap<String, f64>;

pub(crate) fn cc(src: &str, out: &Path, lib: &Path, libs: &[&str]) -> Result {
    cc_with(src, out, lib, libs, &[])
}

/// Builds a benchmark program against the library in `lib`, with `extra`
/// compiler flags (such as `-D` settings of the device headers).
pub(crate) fn cc_with(src: &str, out: &Path, lib: &Path, libs: &[&str], extra: &[&str]) -> Result {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    crate::run(
        Command::new(cc)
            .args([
                "-std=c11",
                "-O2",
                "-g",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-D_GNU_SOURCE",
            ])
            .arg(format!("-I{}", root().display()))
            .arg(format!("-I{}", root().join("include").display()))
            .args(extra)
            .arg(root().join(src))
            .arg("-o")
            .arg(out)
            .arg(format!("-L{}", lib.display()))
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .args(libs),
    )
}

/// Runs a benchmark program and reads its `name value unit` lines.
pub(crate) fn figures(cmd: &mut Command, what: &str) -> Figures {
    let out = match timed_output(cmd, Duration::from_secs(120)) {
        Some(o) if o.status.success() => o,
        Some(o) => {
            eprintln!(
                "bench: {what} failed ({}):\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
            return Figures::new();
        }
        None => {
            eprintln!("bench: {what} did not finish within 120 s");
            return Figures::new();
        }
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_string(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// `cmd`'s output, or None if it ran past `limit` (it is then killed).
fn timed_output(cmd: &mut Command, limit: Duration) -> Option<std::process::Output> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().ok()?.is_some() {
            return child.wait_with_output().ok();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One-way latency of libfabric's own `fi_pingpong` over its shm provider.
fn fi_pingpong(iters: u32) -> Option<f64> {
    let port = "47931";
    let n = iters.to_string();
    let args = ["-p", "shm", "-e", "rdm", "-S", "8", "-I", &n];
    let mut server = Command::new("fi_pingpong")
        .args(args)
        .args(["-B", port])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    std::thread::sleep(Duration::from_millis(300));
    let client = timed_output(
        Command::new("fi_pingpong")
            .args(args)
            .args(["-P", port, "127.0.0.1"]),
        Duration::from_secs(120),
    );
    let _ = server.kill();
    let _ = server.wait();
    let text = String::from_utf8(client?.stdout).ok()?;
    // Columns: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    let row = text.lines().find(|l| l.starts_with("8 "))?;
    row.split_whitespace().nth(6)?.parse().ok()
}

/// The instructions callgrind counted in `func` while `exe` ran with
/// `args` and `env`, summed over every process of the run (callgrind
/// follows forks, one profile each); `None` when the run or a profile
/// failed. The profiles go to `dir` (`callgrind.<pid>`) and are removed.
pub(crate) fn callgrind<S: AsRef<std::ffi::OsStr>>(
    exe: &Path,
    args: &[S],
    env: &[(&str, &str)],
    func: &str,
    dir: &Path,
) -> Option<f64> {
    let pattern = dir.join("callgrind.%p");
    let ok = Command::new("valgrind")
        // Fair scheduling lets a helper thread (the ofi proxy) run while the
        // poster spins.
        .args(["--tool=callgrind", "--fair-sched=yes", "-q"])
        .arg(format!("--toggle-collect={func}"))
        .arg(format!("--callgrind-out-file={}", pattern.display()))
        .arg(exe)
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut total = 0f64;
    for entry in std::fs::read_dir(dir).ok()? {
        let path = entry.ok()?.path();
        if !path.file_name()?.to_str()?.starts_with("callgrind.") {
            continue;
        }
        let text = std::fs::read_to_string(&path).ok()?;
        let _ = std::fs::remove_file(&path);
        if let Some(v) = text
            .lines()
            .find_map(|l| l.strip_prefix("summary: ").or(l.strip_prefix("totals: ")))
        {
            total += v.split_whitespace().next()?.parse::<f64>().ok()?;
        }
    }
    ok.then_some(total)
}

/// Instructions of one `post_one` call (an 8-byte `fi_xpu_write`), counted by
/// callgrind over `posts` calls.
fn instructions_per_post(exe: &Path, env: &[(&str, &str)], dir: &Path, posts: u32) -> Option<f64> {
    let args = ["--post".to_string(), posts.to_string()];
    callgrind(exe, &args, env, "post_one", dir).map(|t| t / f64::from(posts))
}

pub(crate) fn cell(v: Option<f64>, digits: usize) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.digits$}"))
}

/// The middle value (the upper one of an even count); `None` when empty.
pub(crate) fn median(v: &mut [f64]) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

pub(crate) fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "n/a".into(),
    }
}

/// Puts `lib` first in the library path of the benchmark programs.
/// `cargo run` puts the debug target directory first, which beats the
/// programs' runpath: without this they would load the debug libfi_xpu.so
/// and whatever plugins were staged beside it.
pub(crate) fn library_path_first(lib: &Path) -> Result {
    let mut paths = vec![lib.to_path_buf()];
    paths.extend(
        std::env::var_os("LD_LIBRARY_PATH")
            .map_or_else(Vec::new, |v| std::env::split_paths(&v).collect()),
    );
    let paths = std::env::join_paths(paths).map_err(|e| format!("LD_LIBRARY_PATH: {e}"))?;
    std::env::set_var("LD_LIBRARY_PATH", paths);
    Ok(())
}

pub fn run(
    lib: PathBuf,
    quick: bool,
    only_proxy: bool,
    only_moe: bool,
    only_launch: bool,
) -> Result {
    library_path_first(&lib)?;
    let dir = lib.join("bench");
    mkdir(&dir)?;
    if only_launch {
        return launch::run(&lib, &dir, quick);
    }
    if only_proxy {
        return proxy::run(&lib, &dir, quick);
    }
    if only_moe {
        return moe::run(&lib, &dir, quick);
    }
    let xpu = dir.join("xpu_rma");
    let lf = dir.join("libfabric_rma");
    cc("benches/xpu_rma.c", &xpu, &lib, &["-lfi_xpu", "-lpthread"])?;
    cc("benches/libfabric_rma.c", &lf, &lib, &["-lfabric"])?;
    let iters: u32 = if quick { 2000 } else { 20000 };
    let n = iters.to_string();

    println!("measuring (iterations: {iters}) ...");
    let xpu_shm = figures(
        Command::new(&xpu).arg(&n).env("FI_XPU_PROVIDER", "shm"),
        "xpu_rma on shm",
    );
    let lf_shm = figures(Command::new(&lf).args(["shm", &n]), "libfabric_rma on shm");
    let pingpong = fi_pingpong(iters.min(5000));
    let mut ofi = Vec::new();
    for fabric in ["tcp", "shm"] {
        let x = figures(
            Command::new(&xpu)
                .arg(&n)
                .env("FI_XPU_PROVIDER", "ofi")
                .env("FI_XPU_OFI_PROVIDER", fabric),
            &format!("xpu_rma on ofi/{fabric}"),
        );
        let h = figures(
            Command::new(&lf).args([fabric, &n]),
            &format!("libfabric_rma on {fabric}"),
        );
        ofi.push((fabric, x, h));
    }
    let posts = if quick { 200 } else { 2000 };
    let ir_shm = instructions_per_post(&xpu, &[("FI_XPU_PROVIDER", "shm")], &dir, posts);
    let ir_ofi = instructions_per_post(
        &xpu,
        &[("FI_XPU_PROVIDER", "ofi"), ("FI_XPU_OFI_PROVIDER", "shm")],
        &dir,
        posts,
    );

    let g = |f: &Figures, k: &str| f.get(k).copied();
    println!("\n### shm provider: 8-byte RMA writes between two processes\n");
    println!("| figure | fi_xpu shm (device code) | baseline | baseline value | ratio | target |");
    println!("|---|---|---|---|---|---|");
    let lat = g(&xpu_shm, "latency_8B_us");
    println!(
        "| one-way latency (µs) | {} | libfabric shm, fi_write from the host | {} | {} | ≤ 0.5× |",
        cell(lat, 3),
        cell(g(&lf_shm, "latency_8B_us"), 3),
        ratio(lat, g(&lf_shm, "latency_8B_us"))
    );
    println!(
        "| one-way latency (µs) | {} | fi_pingpong -p shm (usec/xfer) | {} | {} | ≤ 0.5× |",
        cell(lat, 3),
        cell(pingpong, 3),
        ratio(lat, pingpong)
    );
    let rate = g(&xpu_shm, "rate_8B_mps");
    println!(
        "| message rate (Mmsg/s) | {} | libfabric shm, fi_write from the host | {} | {} | ≥ 5× |",
        cell(rate, 2),
        cell(g(&lf_shm, "rate_8B_mps"), 2),
        ratio(rate, g(&lf_shm, "rate_8B_mps"))
    );
    for size in ["64KiB", "1MiB", "16MiB"] {
        let bw = g(&xpu_shm, &format!("bw_{size}_MBps"));
        let mc = g(&xpu_shm, &format!("memcpy_{size}_MBps"));
        println!(
            "| bandwidth {size} (MB/s) | {} | memcpy, one thread | {} | {} | ≥ 0.9× |",
            cell(bw, 0),
            cell(mc, 0),
            ratio(bw, mc)
        );
        println!(
            "| bandwidth {size} (MB/s) | {} | libfabric shm, fi_write from the host | {} | {} | |",
            cell(bw, 0),
            cell(g(&lf_shm, &format!("bw_{size}_MBps")), 0),
            ratio(bw, g(&lf_shm, &format!("bw_{size}_MBps")))
        );
    }
    println!("\n### ofi provider: the proxy's cost over the same libfabric provider\n");
    println!("| libfabric provider | figure | fi_xpu ofi (device code) | host-direct fi_write | ratio / difference | target |");
    println!("|---|---|---|---|---|---|");
    for (fabric, x, h) in &ofi {
        let (xl, hl) = (g(x, "latency_8B_us"), g(h, "latency_8B_us"));
        let diff = match (xl, hl) {
            (Some(a), Some(b)) => format!("+{:.2} µs", a - b),
            _ => "n/a".into(),
        };
        println!(
            "| {fabric} | one-way latency (µs) | {} | {} | {diff} | ≤ host + 1.5 µs |",
            cell(xl, 2),
            cell(hl, 2)
        );
        let (xr, hr) = (g(x, "rate_8B_mps"), g(h, "rate_8B_mps"));
        println!(
            "| {fabric} | message rate (Mmsg/s) | {} | {} | {} | ≥ 0.8× |",
            cell(xr, 3),
            cell(hr, 3),
            ratio(xr, hr)
        );
        for size in ["64KiB", "1MiB", "16MiB"] {
            let k = format!("bw_{size}_MBps");
            println!(
                "| {fabric} | bandwidth {size} (MB/s) | {} | {} | {} | |",
                cell(g(x, &k), 0),
                cell(g(h, &k), 0),
                ratio(g(x, &k), g(h, &k))
            );
        }
    }
    println!("\n### Instructions of one 8-byte fi_xpu_write post (callgrind, host build)\n");
    println!("| provider | instructions per post |");
    println!("|---|---|");
    println!("| shm | {} |", cell(ir_shm, 0));
    println!("| ofi (over libfabric shm) | {} |", cell(ir_ofi, 0));
    proxy::run(&lib, &dir, quick)?;
    launch::run(&lib, &dir, quick)?;
    moe::run(&lib, &dir, quick)
}
