//! NVRTC, the runtime compiler JIT users call from their programs, on the
//! device headers: there are no C library headers under NVRTC, only the
//! include paths the program passes. A small C program linked against the
//! toolkit's libnvrtc (tests/c/nvrtc_compile.c) compiles each header, a
//! kernel that also includes CCCL's <cuda/std/cstdint> (before and after
//! ours), the kernel written from upstream's prototypes and the example
//! kernel to a cubin; no GPU is involved.
use super::common::{root, run_ok, scratch};
use super::vendor::cuda_or_skip;
use super::{compat_flag, device_headers, example, include_flags, upstream_kernel};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds tests/c/nvrtc_compile.c against the toolkit's NVRTC.
fn nvrtc_driver(cuda: &Path, dir: &Path) -> PathBuf {
    let exe = dir.join("nvrtc_compile");
    let lib = cuda.join("lib");
    run_ok(
        Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(format!("-I{}", cuda.join("include").display()))
            .arg(root().join("tests/c/nvrtc_compile.c"))
            .arg("-o")
            .arg(&exe)
            .arg(format!("-L{}", lib.display()))
            .arg(format!("-Wl,-rpath,{}", lib.display()))
            .arg("-l:libnvrtc.so.13"),
    );
    exe
}

fn nvrtc(driver: &Path, src: &Path, arch: &str, out: &Path) -> Vec<u8> {
    nvrtc_with(driver, src, arch, out, &[])
}

/// Compiles `src` with NVRTC for `arch` (`extra`: more options); panics
/// with NVRTC's log on an error or a warning. Returns the cubin.
fn nvrtc_with(driver: &Path, src: &Path, arch: &str, out: &Path, extra: &[&str]) -> Vec<u8> {
    let o = Command::new(driver)
        .arg(src)
        .arg(out)
        .arg(format!("--gpu-architecture={arch}"))
        .arg("--std=c++17")
        .args(include_flags())
        .args(extra)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "NVRTC {arch} on {}:\n{}{}",
        src.display(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
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
    for h in device_headers() {
        for (suffix, n) in [("once", 1), ("twice", 2)] {
            let src = dir.join(format!("{}.{suffix}.cu", h.replace('/', "_")));
            std::fs::write(&src, format!("#include <{h}>\n").repeat(n)).unwrap();
            nvrtc(&driver, &src, "sm_75", &dir.join("h.cubin"));
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
        let src = dir.join(format!("{name}.cu"));
        let text: String = includes.iter().map(|i| format!("#include {i}\n")).collect();
        std::fs::write(&src, text + kernel).unwrap();
        nvrtc_with(&driver, &src, "sm_75", &dir.join("c.cubin"), &[&cccl]);
    }
    // The kernel written only from libfabric's documented device API.
    nvrtc_with(
        &driver,
        &upstream_kernel(),
        "sm_75",
        &dir.join("upstream.cubin"),
        &[&compat_flag()],
    );
    // The example to SASS once: nvcc covers the architectures.
    let cubin = nvrtc(&driver, &example(), "sm_90", &dir.join("example.cubin"));
    assert!(
        cubin.starts_with(b"\x7fELF")
            && cubin
                .windows(b".text.device_all_ops".len())
                .any(|w| w == b".text.device_all_ops"),
        "NVRTC's cubin has no device_all_ops kernel"
    );
}
