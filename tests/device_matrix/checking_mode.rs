//! The checking mode (FI_XPU_DEVICE_DEBUG) on GPU targets: a kernel whose
//! work group posts together is compiled with and without it, and only the
//! checking build waits on the device clock (PTX %globaltimer, AMD
//! s_memrealtime) for members that may never arrive, and, where the
//! compiler has a device printf (nvcc, NVRTC, HIP after its runtime
//! header), carries the report. Run on
//! clang-19 (nvptx, amdgcn, warnings as errors), nvcc to a cubin
//! (`-Werror all-warnings`), NVRTC and Debian's hipcc.
use super::common::scratch;
use super::vendor::{clean_kept, cuda_or_skip, hipcc_or_skip};
use super::{compile, include_flags, stable_source, Target};
use std::path::PathBuf;
use std::process::Command;

const KERNEL: &str = r#"#include <fi_xpu/device.h>
extern "C" __attribute__((global)) void group_write(struct fid_xpu_ep *ep, void *peer,
						     uint64_t *buf, uint64_t key, int *rc)
{
	rc[fi_xpu_arch_local_id()] = fi_xpu_write(ep, buf + fi_xpu_arch_local_id(), 8, NULL, 0,
						  peer, 8 * fi_xpu_arch_local_id(), key, NULL, 0,
						  FI_XPU_WORK_GROUP);
}
"#;
const REPORT: &str = "FI_XPU_DEVICE_DEBUG: %s at %s scope";

fn source(ext: &str) -> PathBuf {
    // HIP's device printf comes with its runtime header, which HIP code
    // includes first.
    let prefix = if ext == "hip" {
        "#include <hip/hip_runtime.h>\n"
    } else {
        ""
    };
    stable_source(&format!("group_write.{ext}"), &format!("{prefix}{KERNEL}"))
}

#[test]
fn clang_gpu_targets_wait_on_the_device_clock() {
    if !super::clang_or_skip() {
        return;
    }
    let dir = scratch("checking-mode-clang");
    let src = source("cu");
    for (target, clock, lang) in [
        (Target::Nvptx("sm_90"), "%globaltimer", "cuda"),
        (Target::Amdgcn("gfx942"), "s_memrealtime", "hip"),
    ] {
        let plain = compile(target, &src, &["-x", lang], &dir.join("plain.s"));
        let debug = compile(
            target,
            &src,
            &["-x", lang, "-DFI_XPU_DEVICE_DEBUG"],
            &dir.join("debug.s"),
        );
        assert!(
            !plain.contains(clock),
            "{target:?}: the plain build already reads {clock}"
        );
        assert!(
            debug.contains(clock),
            "{target:?}: the checking build never reads the device clock ({clock})"
        );
    }
}

#[test]
fn nvcc_and_nvrtc_build_the_checking_mode_with_its_report() {
    let Some(cuda) = cuda_or_skip("nvcc (checking mode)") else {
        return;
    };
    let dir = scratch("checking-mode-nvcc");
    let src = source("cu");
    let cubin = dir.join("debug.cubin");
    clean_kept(
        Command::new(cuda.join("bin/nvcc"))
            .args(["-x", "cu", "-std=c++17", "-O2", "-Werror", "all-warnings"])
            .args(["-arch=sm_90", "-cubin", "-DFI_XPU_DEVICE_DEBUG"])
            .args(include_flags())
            .arg(&src),
        &cubin,
        "nvcc checking mode",
    );
    let bin = std::fs::read(&cubin).unwrap();
    let has = |s: &str| bin.windows(s.len()).any(|w| w == s.as_bytes());
    assert!(
        has("vprintf") && has(REPORT),
        "nvcc: no report in the cubin"
    );
    super::nvrtc::compile_one(&cuda, &dir, &src, &["-DFI_XPU_DEVICE_DEBUG"]);
}

#[test]
fn hipcc_builds_the_checking_mode_with_its_report() {
    if !hipcc_or_skip() {
        return;
    }
    let dir = scratch("checking-mode-hipcc");
    let src = source("hip");
    let obj = dir.join("debug.o");
    clean_kept(
        Command::new("hipcc")
            .args(["-Wall", "-Wextra", "-Werror", "-O2", "-x", "hip"])
            .args(["--offload-arch=gfx90a", "--cuda-device-only", "-c"])
            .arg("-DFI_XPU_DEVICE_DEBUG")
            .args(include_flags())
            .arg(&src),
        &obj,
        "hipcc checking mode",
    );
    let bin = std::fs::read(&obj).unwrap();
    assert!(
        bin.windows(REPORT.len()).any(|w| w == REPORT.as_bytes()),
        "hipcc: no report in the code object"
    );
}
