//! Debian's hipcc (ROCm 5.2, driving its clang 15) on the example kernel as
//! a HIP user writes it: <hip/hip_runtime.h> first, then the device API.
//! Device code for gfx90a (MI200) and gfx940 (MI300: clang 15 predates the
//! gfx942 id, which the clang-19 part of the matrix covers), emitted as a
//! kernel (its descriptor in the code object); the host half compiled too.
//! Warnings are errors throughout.
use super::common::scratch;
use super::vendor::{clean_kept, hipcc_or_skip};
use super::{compat_flag, example, include_flags, includes_of, stable_source, upstream_kernel};
use std::process::Command;

pub const ARCHS: &[&str] = &["gfx90a", "gfx940"];

fn hipcc() -> Command {
    let mut cmd = Command::new("hipcc");
    cmd.args(["-Wall", "-Wextra", "-Werror", "-O2"])
        .args(include_flags());
    cmd
}

#[test]
fn hipcc_builds_the_example_kernel() {
    if !hipcc_or_skip() {
        return;
    }
    let dir = scratch("hipcc");
    let src = stable_source(
        "example.hip",
        &format!(
            "#include <hip/hip_runtime.h>\n{}",
            includes_of(&[example()])
        ),
    );
    std::thread::scope(|s| {
        for &arch in ARCHS {
            let (src, dir) = (&src, &dir);
            s.spawn(move || {
                // A code object in an offload bundle: hipcc does not take
                // -S as a compile-only flag and would add its link options.
                let obj = dir.join(format!("{arch}.o"));
                clean_kept(
                    hipcc()
                        .arg(format!("--offload-arch={arch}"))
                        .args(["--cuda-device-only", "-c"])
                        .arg(src),
                    &obj,
                    &format!("hipcc {arch}"),
                );
                let bin = std::fs::read(&obj).unwrap();
                let has = |s: &str| bin.windows(s.len()).any(|w| w == s.as_bytes());
                assert!(
                    has(&format!("amdgcn-amd-amdhsa--{arch}")) && has("device_all_ops.kd"),
                    "hipcc {arch}: no device_all_ops kernel descriptor for {arch}"
                );
            });
        }
        s.spawn(|| {
            clean_kept(
                hipcc().arg("--offload-arch=gfx90a").arg("-c").arg(&src),
                &dir.join("example.o"),
                "hipcc host+device",
            )
        });
    });
}

/// The kernel written only from libfabric's documented device API, with
/// our device flags (the compatibility directory), as HIP device code.
#[test]
fn hipcc_builds_the_upstream_kernel() {
    if !hipcc_or_skip() {
        return;
    }
    let dir = scratch("hipcc-upstream");
    let src = stable_source(
        "upstream.hip",
        &format!(
            "#include <hip/hip_runtime.h>\n{}",
            includes_of(&[upstream_kernel()])
        ),
    );
    let obj = dir.join("upstream.o");
    clean_kept(
        hipcc()
            .arg(compat_flag())
            .args(["--offload-arch=gfx90a", "--cuda-device-only", "-c"])
            .arg(&src),
        &obj,
        "hipcc upstream kernel",
    );
    let bin = std::fs::read(&obj).unwrap();
    assert!(
        bin.windows(b"upstream_kernel.kd".len())
            .any(|w| w == b"upstream_kernel.kd"),
        "hipcc: no upstream_kernel kernel descriptor"
    );
}
