//! Device passes include no host header. Every compiler of the matrix that
//! prints its include tree (`-H`: clang for nvptx, amdgcn and SYCL, nvcc
//! through its preprocessor, Debian's hipcc) compiles the device API with
//! the default providers, plain and in the checking mode, and every header
//! one of ours includes in a device pass must be ours or a freestanding C
//! header (`stddef.h`, `stdint.h`). NVRTC, which has no host headers at all,
//! is the `nvrtc` part of the matrix. The same check on a CPU-thread build
//! must find the host header, so a tree it cannot read fails the test.
use super::common::{have, root, scratch};
use super::vendor::cuda_home;
use super::Target::{Amdgcn, Nvptx, Sycl};
use super::{clang_device, include_flags};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Top-level markers: which pass the entries after them belong to (nvcc
/// preprocesses the host pass and then the device pass into one output).
const DEVICE_MARKER: &str = "fi_xpu_device_pass_marker.h";
const HOST_MARKER: &str = "fi_xpu_host_pass_marker.h";
/// What our headers may include besides themselves: the C headers every
/// freestanding implementation has (fi_xpu/freestanding.h).
const FREESTANDING: &[&str] = &["stddef.h", "stdint.h"];

fn is_ours(path: &str) -> bool {
    let ours = root().join("include/fi_xpu");
    Path::new(path)
        .canonicalize()
        .is_ok_and(|p| p.starts_with(&ours))
}

/// Parses `-H` output: every (includer, included) pair where the includer
/// is one of our headers and the included file is neither ours nor
/// freestanding, for the passes `device` selects. Also says whether a
/// marker of that kind was seen.
pub fn foreign_includes(h_output: &str, device: bool) -> (Vec<(String, String)>, bool) {
    let mut in_pass = false;
    let mut seen = false;
    let mut stack: Vec<String> = Vec::new();
    let mut bad = Vec::new();
    for line in h_output.lines() {
        let depth = line.chars().take_while(|&c| c == '.').count();
        if depth == 0 || !line[depth..].starts_with(' ') {
            continue;
        }
        let path = line[depth + 1..].trim().to_string();
        stack.truncate(depth - 1);
        if depth == 1 && path.ends_with(DEVICE_MARKER) {
            in_pass = device;
        } else if depth == 1 && path.ends_with(HOST_MARKER) {
            in_pass = !device;
        }
        if in_pass {
            seen = true;
            if let Some(parent) = stack.last() {
                let base = path.rsplit('/').next().unwrap_or(&path);
                if is_ours(parent) && !is_ours(&path) && !FREESTANDING.contains(&base) {
                    bad.push((parent.clone(), path.clone()));
                }
            }
        }
        stack.push(path);
    }
    (bad, seen)
}

/// A translation unit that marks its pass, then includes the device API.
fn source(dir: &Path) -> PathBuf {
    std::fs::write(dir.join(DEVICE_MARKER), "").unwrap();
    std::fs::write(dir.join(HOST_MARKER), "").unwrap();
    let src = dir.join("layering.cpp");
    std::fs::write(
        &src,
        format!(
            "#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__) || \
             defined(__SYCL_DEVICE_ONLY__)\n#include \"{DEVICE_MARKER}\"\n#else\n\
             #include \"{HOST_MARKER}\"\n#endif\n#include <fi_xpu/device.h>\n"
        ),
    )
    .unwrap();
    src
}

/// Runs `cmd` (which must succeed) and returns its `-H` tree.
fn tree(cmd: &mut Command, what: &str) -> String {
    let o = super::jobs::output(cmd).unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{what}: {cmd:?} failed\n{text}");
    text
}

fn assert_clean(text: &str, what: &str) {
    let (bad, seen) = foreign_includes(text, true);
    assert!(seen, "{what}: no device pass in the include tree\n{text}");
    assert!(
        bad.is_empty(),
        "{what}: the device pass includes host headers (includer -> included):\n{}",
        bad.iter()
            .map(|(a, b)| format!("  {a} -> {b}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_parser_attributes_includes_to_their_includer() {
    let inc = root().join("include/fi_xpu");
    let arch = inc.join("device_arch.h").display().to_string();
    let free = inc.join("freestanding.h").display().to_string();
    let text = format!(
        ". /x/{HOST_MARKER}\n. {arch}\n.. /usr/include/unistd.h\n\
         . /x/{DEVICE_MARKER}\n. /opt/cuda/cuda_runtime.h\n.. /usr/include/stdio.h\n\
         . {arch}\n.. {free}\n... /usr/lib/clang/19/include/stdint.h\n\
         .... /usr/include/stdint.h\n.. /usr/include/unistd.h\nMultiple include guards\n"
    );
    let (bad, seen) = foreign_includes(&text, true);
    assert!(seen);
    assert_eq!(
        bad,
        vec![(arch.clone(), "/usr/include/unistd.h".to_string())]
    );
    let (bad, seen) = foreign_includes(&text, false);
    assert!(seen);
    assert_eq!(bad, vec![(arch, "/usr/include/unistd.h".to_string())]);
}

#[test]
fn device_passes_include_no_host_header() {
    if !super::clang_or_skip() {
        return;
    }
    let dir = scratch("device-layering");
    let src = source(&dir);
    let out = dir.join("out");
    for debug in [false, true] {
        let extra: &[&str] = if debug {
            &["-DFI_XPU_DEVICE_DEBUG"]
        } else {
            &[]
        };
        let mut runs: Vec<(String, Command)> = Vec::new();
        for arch in ["sm_70", "sm_90"] {
            runs.push((format!("clang CUDA {arch}"), clang_device(Nvptx(arch))));
        }
        for arch in ["gfx90a", "gfx942"] {
            runs.push((format!("clang HIP {arch}"), clang_device(Amdgcn(arch))));
        }
        runs.push(("clang SYCL device".into(), clang_device(Sycl)));
        if let Some(cuda) = cuda_home() {
            let mut c = Command::new(cuda.join("bin/nvcc"));
            c.args([
                "-x",
                "cu",
                "-std=c++17",
                "-arch=sm_90",
                "-c",
                "-Xcompiler",
                "-H",
            ]);
            runs.push(("nvcc sm_90 (host and device passes)".into(), c));
        }
        if have("hipcc") {
            let mut c = Command::new("hipcc");
            c.args([
                "-x",
                "hip",
                "--offload-arch=gfx90a",
                "--cuda-device-only",
                "-c",
            ]);
            runs.push(("hipcc gfx90a".into(), c));
        }
        for (what, mut c) in runs {
            if !what.starts_with("nvcc") {
                c.arg("-H");
            }
            let text = tree(
                c.args(include_flags())
                    .args(extra)
                    .arg(&src)
                    .arg("-o")
                    .arg(&out),
                &what,
            );
            let what = format!("{what}{}", if debug { " (debug)" } else { "" });
            assert_clean(&text, &what);
            eprintln!("{what}: no host header");
        }
    }
}

/// The CPU-thread build may include the host header, and does: the check
/// reads real trees.
#[test]
fn the_host_build_is_seen_including_the_host_header() {
    let dir = scratch("host-layering");
    let src = source(&dir);
    let text = tree(
        Command::new("cc")
            .args(["-x", "c", "-std=c11", "-H", "-c"])
            .args(include_flags())
            .arg(&src)
            .arg("-o")
            .arg(dir.join("out.o")),
        "cc host build",
    );
    let (bad, seen) = foreign_includes(&text, false);
    assert!(seen, "no host pass in the include tree\n{text}");
    assert!(
        bad.iter().any(|(_, h)| h.ends_with("/fi_xpu.h")),
        "the host build's tree does not show the host header: {bad:?}"
    );
}
