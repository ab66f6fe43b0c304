//! On GPUs a subgroup-scope call's group is the lanes converged at the
//! call: the arch layer takes the active mask (PTX `activemask`, AMD EXEC)
//! and ranks the lanes among it. Compiled with clang-19 as CUDA (with a
//! CUDA version defined, as a CUDA installation does) and HIP device code.
use crate::common;

use common::{root, run_ok, scratch};
use std::process::Command;

fn device_asm(lang: &str, arch: &str, extra: &[&str]) -> Option<String> {
    if !common::have("clang-19") {
        // As the device compile matrix: CI installs clang-19.
        assert_eq!(
            std::env::var("FI_XPU_SKIP_DEVICE_MATRIX").as_deref(),
            Ok("1"),
            "clang-19 is needed (apt install clang-19); set FI_XPU_SKIP_DEVICE_MATRIX=1 to skip"
        );
        return None;
    }
    let out = scratch("device-converged").join(format!("{lang}-{arch}.s"));
    let offload = if lang == "cuda" {
        format!("--cuda-gpu-arch={arch}")
    } else {
        format!("--offload-arch={arch}")
    };
    run_ok(
        Command::new("clang-19")
            .args(["-x", lang, &offload, "--cuda-device-only", "-S", "-O2"])
            .args(["-nocudainc", "-nocudalib", "-Wall", "-Wextra", "-Werror"])
            .args(extra)
            .arg(format!("-I{}", root().display()))
            .arg(format!("-I{}", root().join("include").display()))
            .arg(root().join("tests/c/device_converged_kernel.c"))
            .arg("-o")
            .arg(&out),
    );
    Some(std::fs::read_to_string(&out).unwrap())
}

#[test]
fn nvptx_subgroup_is_the_active_mask() {
    let Some(ptx) = device_asm("cuda", "sm_80", &["-DCUDA_VERSION=12000"]) else {
        return;
    };
    for insn in ["activemask.b32", "%lanemask_lt", "popc.b32", "bfind.u32"] {
        assert!(ptx.contains(insn), "{insn} missing:\n{ptx}");
    }
    // The broadcast's source lane and the warp barrier's mask are the
    // active mask's, not constants.
    assert!(!ptx.contains("shfl.sync.idx.b32 %r1, %r1, 0,"), "{ptx}");
}

#[test]
fn amdgcn_subgroup_is_the_exec_mask() {
    let Some(asm) = device_asm("hip", "gfx942", &["-nogpuinc", "-nogpulib"]) else {
        return;
    };
    // Rank: a count of the active lanes below (mbcnt over EXEC); size: a
    // population count of EXEC.
    assert!(asm.contains("v_mbcnt_lo_u32_b32"), "{asm}");
    assert!(asm.contains("s_bcnt1_i32_b64"), "{asm}");
}
