//! NVRTC, the runtime compiler JIT users call from their programs, on the
//! device headers: there are no C library headers under NVRTC, only the
//! include paths the program passes. A small C program linked against the
//! toolkit's libnvrtc (tests/c/nvrtc_compile.c) compiles each header, a
//! kernel that also includes CCCL's <cuda/std/cstdint> (before and after
//! ours), the kernel written from upstream's prototypes and the example
//! kernel to a cubin; no GPU is involved.
use super::common::{cache, root, scratch};
use super::vendor::cuda_or_skip;
use super::{compat_flag, device_headers, example, include_flags, stable_source, upstream_kernel};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds tests/c/nvrtc_compile.c against the toolkit's NVRTC.
fn nvrtc_driver(cuda: &Path, dir: &Path) -> Nvrtc {
    let exe = dir.join("nvrtc_compile");
    let lib = cuda.join("lib");
    // Built once per content (tests/common/cache.rs).
    cache::compile(
        Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{}", cuda.join("include").display()))
            .arg(root().join("tests/c/nvrtc_compile.c"))
            .arg(format!("-L{}", lib.display()))
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-l:libnvrtc.so.13"),
        &exe,
    );
    Nvrtc {
        exe,
        cuda: cuda.to_path_buf(),
    }
}

/// The NVRTC driver and the toolkit it was built against.
struct Nvrtc {
    exe: PathBuf,
    cuda: PathBuf,
}

/// Compiles `src` with NVRTC for `arch` (`extra`: more options); panics
/// with NVRTC's log on an error or a warning. Returns the cubin. Kept by
/// content in the compile cache, the hash taken as for a compile by the
/// toolkit's nvcc of the driver's source with these arguments.
fn nvrtc_with(d: &Nvrtc, src: &Path, arch: &str, out: &Path, extra: &[&str]) -> Vec<u8> {
    let args = |cmd: &mut Command| {
        cmd.arg(format!("--gpu-architecture={arch}"))
            .arg("--std=c++17")
            .args(include_flags())
            .args(extra);
    };
    let mut what = Command::new(d.cuda.join("bin/nvcc"));
    what.arg(root().join("tests/c/nvrtc_compile.c")).arg(src);
    args(&mut what);
    cache::kept(&mut what, "nvrtc", out, |_, to| {
        let mut cmd = Command::new(&d.exe);
        cmd.arg(src).arg(to);
        args(&mut cmd);
        let o = super::jobs::output(&mut cmd).unwrap();
        assert!(
            o.status.success(),
            "NVRTC {arch} on {}:\n{}{}",
            src.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::new()
    });
    std::fs::read(out).unwrap()
}

/// Compiles `src` for sm_75 under NVRTC with `extra` options.
pub fn compile_one(cuda: &Path, dir: &Path, src: &Path, extra: &[&str]) {
    let driver = nvrtc_driver(cuda, dir);
    nvrtc_with(&driver, src, "sm_75", &dir.join("one.cubin"), extra);
}

#[test]
fn nvrtc_compiles_every_device_header_and_the_example() {
    let Some(cuda) = cuda_or_skip("NVRTC") else {
        return;
    };
    let dir = scratch("nvrtc");
    let driver = nvrtc_driver(&cuda, &dir);
    // (source, architecture, extra options), compiled side by side.
    let mut jobs: Vec<(PathBuf, &str, Vec<String>)> = Vec::new();
    for h in device_headers() {
        for (suffix, n) in [("once", 1), ("twice", 2)] {
            let src = stable_source(
                &format!("{}.{suffix}.cu", h.replace('/', "_")),
                &format!("#include <{h}>\n").repeat(n),
            );
            jobs.push((src, "sm_75", Vec::new()));
        }
    }
    // With CCCL's integer types, included before or after ours: both define
    // uint64_t and friends under NVRTC, identically.
    let cccl = format!("-I{}", cuda.join("include/cccl").display());
    let kernel = "extern \"C\" __global__ void k(uint64_t *p)\n\
                  { *p = cuda::std::uint64_t(1) + (uintptr_t)p; }\n";
    for (name, includes) in [
        ("cccl-first", ["<cuda/std/cstdint>", "<fi_xpu/device.h>"]),
        ("cccl-last", ["<fi_xpu/device.h>", "<cuda/std/cstdint>"]),
    ] {
        let text: String = includes.iter().map(|i| format!("#include {i}\n")).collect();
        let src = stable_source(&format!("{name}.cu"), &(text + kernel));
        jobs.push((src, "sm_75", vec![cccl.clone()]));
    }
    // The kernel written only from libfabric's documented device API.
    jobs.push((upstream_kernel(), "sm_75", vec![compat_flag()]));
    // The example to SASS once: nvcc covers the architectures.
    jobs.push((example(), "sm_90", Vec::new()));
    let example_cubin = dir.join(format!("out{}.cubin", jobs.len() - 1));
    super::jobs::each(&jobs, |i, (src, arch, extra)| {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        nvrtc_with(
            &driver,
            src,
            arch,
            &dir.join(format!("out{i}.cubin")),
            &extra,
        );
    });
    let cubin = std::fs::read(&example_cubin).unwrap();
    assert!(
        cubin.starts_with(b"\x7fELF")
            && cubin
                .windows(b".text.device_all_ops".len())
                .any(|w| w == b".text.device_all_ops"),
        "NVRTC's cubin has no device_all_ops kernel"
    );
}
