//! NVIDIA's nvcc (CUDA 13, from .ci/install-cuda) on the device headers and
//! the example kernel: every architecture from sm_75 to sm_100 compiled down
//! to SASS (a cubin, so ptxas runs too), warnings as errors in nvcc, ptxas
//! and the host compiler; the kernel's registers, stack and spills reported
//! per architecture (the table in BENCHMARKS.md).
use super::common::scratch;
use super::vendor::{clean_kept, cuda_or_skip, run_clean};
use super::{
    compat_flag, device_headers, example, include_flags, jobs, stable_source, strict_user_file,
    upstream_kernel, STRICT, STRICT_CXX, TESTPROV,
};
use std::path::Path;
use std::process::Command;

pub const ARCHS: &[&str] = &["sm_75", "sm_80", "sm_90", "sm_100"];

/// nvcc's flags throughout the matrix: CUDA C++17, warnings as errors in
/// nvcc and the host compiler.
pub const NVCC_FLAGS: &[&str] = &[
    "-x",
    "cu",
    "-std=c++17",
    "-O2",
    "-Werror",
    "all-warnings",
    "-Xcompiler",
    "-Wall,-Wextra,-Werror",
];

fn nvcc(cuda: &Path) -> Command {
    let mut cmd = Command::new(cuda.join("bin/nvcc"));
    cmd.args(NVCC_FLAGS).args(include_flags());
    cmd
}

/// What ptxas reports for one kernel.
#[derive(Debug, Default, PartialEq)]
pub struct Resources {
    pub registers: u32,
    pub stack: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
}

/// The number before `unit` in `line` ("70 registers", "8 bytes stack frame").
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let head = &line[..line.find(unit)?];
    head.split(|c: char| !c.is_ascii_digit())
        .rfind(|w| !w.is_empty())?
        .parse()
        .ok()
}

/// Parses `ptxas -v` for `entry` on `arch`.
pub fn ptxas_resources(log: &str, entry: &str, arch: &str) -> Option<Resources> {
    let start = format!("Compiling entry function '{entry}' for '{arch}'");
    let mut lines = log.lines().skip_while(|l| !l.contains(&start)).skip(1);
    let mut r = Resources::default();
    let mut seen = (false, false);
    for l in lines.by_ref() {
        if l.contains("Compiling entry function") {
            break;
        }
        if l.contains("bytes stack frame") {
            r.stack = number_before(l, "bytes stack frame")?;
            r.spill_stores = number_before(l, "bytes spill stores")?;
            r.spill_loads = number_before(l, "bytes spill loads")?;
            seen.0 = true;
        }
        if l.contains("Used ") && l.contains(" registers") {
            r.registers = number_before(l, " registers")?;
            seen.1 = true;
        }
    }
    (seen == (true, true)).then_some(r)
}

#[test]
fn ptxas_report_is_parsed() {
    let log = "ptxas info    : 0 bytes gmem\n\
        ptxas info    : Compiling entry function 'k' for 'sm_90'\n\
        ptxas info    : Function properties for k\n    \
        16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n\
        ptxas info    : Used 70 registers, used 1 barriers, 16 bytes cumulative stack size\n";
    assert_eq!(
        ptxas_resources(log, "k", "sm_90"),
        Some(Resources {
            registers: 70,
            stack: 16,
            spill_stores: 4,
            spill_loads: 8
        })
    );
    assert_eq!(ptxas_resources(log, "k", "sm_80"), None);
    assert_eq!(ptxas_resources(log, "other", "sm_90"), None);
}

/// Every device header, each included twice, in one CUDA translation unit
/// compiled for host and device (nvcc's front end, cicc, ptxas and the host
/// gcc all with warnings as errors).
#[test]
fn nvcc_compiles_every_device_header() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let dir = scratch("nvcc-headers");
    let text: String = device_headers()
        .iter()
        .map(|h| format!("#include <{h}>\n#include <{h}>\n"))
        .collect();
    let src = stable_source("headers.cu", &text);
    clean_kept(
        nvcc(&cuda).args(["-arch=sm_75", "-c"]).arg(&src),
        &dir.join("headers.o"),
        "nvcc headers",
    );
}

/// The strict user's file of the clang part through nvcc, its host half
/// through gcc with the same warnings, less those CUDA's own headers do
/// not pass (`-Wpedantic`, `-Wundef`, `-Wredundant-decls`,
/// `-Wzero-as-null-pointer-constant`: a user with them cannot include
/// `cuda_runtime.h` either). The device half goes to PTX (cicc, which
/// gives nvcc's device-side diagnostics), not through ptxas: its code is
/// the example kernel's and the upstream kernel's, which the tests below
/// take down to SASS.
#[test]
fn nvcc_compiles_the_headers_under_strict_user_warnings() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let dir = scratch("nvcc-strict");
    let src = strict_user_file();
    let cuda_passes = [
        "-Wpedantic",
        "-Wundef",
        "-Wredundant-decls",
        "-Wzero-as-null-pointer-constant",
    ];
    let host: Vec<&str> = STRICT
        .iter()
        .chain(STRICT_CXX)
        .filter(|f| !cuda_passes.contains(f))
        .copied()
        .collect();
    clean_kept(
        nvcc(&cuda)
            .args([
                "-gencode",
                "arch=compute_90,code=compute_90",
                "-c",
                "-Xcompiler",
            ])
            .arg(host.join(","))
            .arg(compat_flag())
            .arg(&src),
        &dir.join("strict.o"),
        "nvcc strict",
    );
}

/// `-gencode` for the SASS of `arch` (`sm_90`) from its own PTX.
pub fn gencode(arch: &str) -> String {
    format!(
        "arch=compute_{},code={arch}",
        arch.trim_start_matches("sm_")
    )
}

/// The example kernel for every architecture down to SASS: for the first
/// one (sm_75) host half and device half in one nvcc run (the host half
/// through gcc with warnings as errors, the cubin in the object), for the
/// others to a cubin, and with the test provider alone for sm_90; its
/// resources per architecture are printed in the form of the
/// BENCHMARKS.md table, and it must not spill.
#[test]
fn nvcc_builds_the_example_kernel_to_sass_for_every_arch() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let dir = scratch("nvcc-example");
    // (arch, variant, extra flags); the one-provider build once: the
    // clang part covers it per target.
    let mut builds: Vec<(&str, &str, &[&str])> =
        ARCHS.iter().map(|&a| (a, "default", &[][..])).collect();
    builds.push(("sm_90", "testprov", TESTPROV));
    let reports = std::sync::Mutex::new(Vec::new());
    jobs::each(&builds, |i, &(arch, variant, extra)| {
        let what = format!("nvcc {arch} {variant}");
        let mut cmd = nvcc(&cuda);
        cmd.args(["-Xptxas", "-v"]).args(extra);
        let log = if i == 0 {
            // The host half of the same translation unit, through gcc.
            let obj = dir.join("example.o");
            cmd.arg("-gencode")
                .arg(gencode(arch))
                .arg("-c")
                .arg(example());
            let log = clean_kept(&mut cmd, &obj, &what);
            let elves = run_clean(
                Command::new(cuda.join("bin/cuobjdump"))
                    .arg("-lelf")
                    .arg(&obj),
                "cuobjdump -lelf",
            );
            assert!(
                elves
                    .lines()
                    .any(|l| l.ends_with(&format!(".{arch}.cubin"))),
                "{arch}: no cubin in the object:\n{elves}"
            );
            log
        } else {
            let cubin = dir.join(format!("{arch}-{variant}.cubin"));
            cmd.arg(format!("-arch={arch}"))
                .arg("-cubin")
                .arg(example());
            let log = clean_kept(&mut cmd, &cubin, &what);
            let bin = std::fs::read(&cubin).unwrap();
            assert!(bin.starts_with(b"\x7fELF"), "{arch}: cubin is not ELF");
            log
        };
        let r = ptxas_resources(&log, "device_all_ops", arch)
            .unwrap_or_else(|| panic!("{arch} {variant}: no ptxas report\n{log}"));
        if variant == "default" {
            reports.lock().unwrap().push((arch, r));
        }
    });
    let mut reports = reports.into_inner().unwrap();
    reports.sort_by_key(|(arch, _)| ARCHS.iter().position(|a| a == arch));
    eprintln!(
        "device_all_ops (default providers), nvcc {}:",
        cuda.display()
    );
    eprintln!("| arch | registers | stack (bytes) | spill stores | spill loads |");
    for (arch, r) in &reports {
        eprintln!(
            "| {arch} | {} | {} | {} | {} |",
            r.registers, r.stack, r.spill_stores, r.spill_loads
        );
        assert_eq!(
            (r.spill_stores, r.spill_loads),
            (0, 0),
            "{arch}: the example kernel spills registers"
        );
    }
}

/// The kernel written only from libfabric's documented device API, with
/// our device flags (the compatibility directory), to a cubin.
#[test]
fn nvcc_builds_the_upstream_kernel() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let dir = scratch("nvcc-upstream");
    let cubin = dir.join("upstream.cubin");
    clean_kept(
        nvcc(&cuda)
            .args(["-arch=sm_90", "-cubin"])
            .arg(compat_flag())
            .arg(upstream_kernel()),
        &cubin,
        "nvcc upstream kernel",
    );
    let bin = std::fs::read(&cubin).unwrap();
    assert!(
        bin.windows(b".text.upstream_kernel".len())
            .any(|w| w == b".text.upstream_kernel"),
        "nvcc: upstream_kernel not in the cubin"
    );
}
