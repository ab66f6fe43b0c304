//! Compile matrix of the header-only device API, warnings as errors
//! throughout:
//! - clang-19: every device header, alone and included twice, for nvptx
//!   (sm_70, sm_90), amdgcn (gfx90a, gfx942), SYCL device mode, and host
//!   gcc/clang as C11 and C++17; the example kernel that calls every device
//!   operation, checked to be emitted for the device; the arch layer's scoped
//!   operations, checked to map to the target's system- and device-scope
//!   instructions;
//! - NVIDIA's nvcc 13 to SASS for sm_75, sm_80, sm_90 and sm_100 (`nvcc`),
//!   and NVRTC, where no C library headers exist (`nvrtc`);
//! - Debian's hipcc (ROCm) for gfx90a and gfx940 (`hipcc`);
//! - the checking mode (FI_XPU_DEVICE_DEBUG) on GPU targets
//!   (`checking_mode`);
//! - the SASS of the device code and the examples' kernels for every nvcc
//!   architecture: every publish fenced at system scope, 16-byte copies
//!   (`sass`, cuobjdump from the CUDA wheels);
//! - device passes include no host header, read from the compilers'
//!   include trees (`host_headers`).
//!
//! Needs clang-19 and hipcc (Debian packages) and the CUDA toolkit that
//! .ci/install-cuda installs from PyPI wheels (`vendor`). Without one of
//! them its part fails unless FI_XPU_SKIP_DEVICE_MATRIX=1.
#[path = "device_matrix/checking_mode.rs"]
mod checking_mode;
mod common;
#[path = "device_matrix/hipcc.rs"]
mod hipcc;
#[path = "device_matrix/host_headers.rs"]
mod host_headers;
#[path = "device_matrix/jobs.rs"]
mod jobs;
#[path = "device_matrix/nvcc.rs"]
mod nvcc;
#[path = "device_matrix/nvrtc.rs"]
mod nvrtc;
#[path = "device_matrix/sass.rs"]
mod sass;
#[path = "device_matrix/sass_loops.rs"]
mod sass_loops;
#[path = "device_matrix/vendor.rs"]
mod vendor;

use common::{have, root, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

const CLANG: &str = "clang-19";
const WARN: &[&str] = &["-Wall", "-Wextra", "-Werror", "-O2"];

fn clang_or_skip() -> bool {
    vendor::require(have(CLANG), CLANG, "apt install clang-19")
}

/// The include directories of every compile: the host header at the top,
/// the device headers, and the test provider's device header.
fn include_flags() -> Vec<String> {
    ["", "include", "tests/c"]
        .iter()
        .map(|d| format!("-I{}", root().join(d).display()))
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Target {
    Nvptx(&'static str),
    Amdgcn(&'static str),
    Sycl,
    Host {
        compiler: &'static str,
        cxx: bool,
    },
    /// The host half of a CUDA translation unit (device functions parsed,
    /// not generated).
    CudaHostPass,
}

use Target::*;

const DEVICE_TARGETS: &[Target] = &[
    Nvptx("sm_70"),
    Nvptx("sm_90"),
    Amdgcn("gfx90a"),
    Amdgcn("gfx942"),
    Sycl,
];

fn host_targets() -> Vec<Target> {
    let mut v = Vec::new();
    for compiler in ["gcc", CLANG] {
        if have(compiler) {
            v.push(Host {
                compiler,
                cxx: false,
            });
            v.push(Host {
                compiler,
                cxx: true,
            });
        }
    }
    v.push(CudaHostPass);
    v
}

/// How SYCL device code is compiled here. Debian's clang-19 has no `-fsycl`
/// driver mode, but its front end has SYCL device compilation
/// (`-fsycl-is-device`, which defines __SYCL_DEVICE_ONLY__) for spir64.
fn sycl_flags() -> &'static Vec<String> {
    static FLAGS: OnceLock<Vec<String>> = OnceLock::new();
    FLAGS.get_or_init(|| {
        let dir = scratch("sycl-probe");
        let src = dir.join("p.cpp");
        std::fs::write(&src, "int f(void) { return 1; }\n").unwrap();
        let driver = Command::new(CLANG)
            .args(["-fsycl", "-fsycl-device-only", "-c", "-o"])
            .arg(dir.join("p.bc"))
            .arg(&src)
            .output()
            .is_ok_and(|o| o.status.success());
        if driver {
            return ["-fsycl", "-fsycl-device-only", "-S", "-emit-llvm"]
                .map(String::from)
                .to_vec();
        }
        eprintln!(
            "note: {CLANG} has no `-fsycl` driver mode; compiling SYCL device code with \
             its front end's -fsycl-is-device for spir64 instead"
        );
        let multiarch = Command::new("cc")
            .arg("-print-multiarch")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let mut f: Vec<String> = [
            "-target",
            "spir64",
            "-x",
            "c++",
            "-std=c++17",
            "-Xclang",
            "-fsycl-is-device",
            "-Xclang",
            "-aux-triple",
            "-Xclang",
            "x86_64-pc-linux-gnu",
            "-S",
            "-emit-llvm",
        ]
        .map(String::from)
        .to_vec();
        if !multiarch.is_empty() {
            f.push(format!("-isystem/usr/include/{multiarch}"));
        }
        f
    })
}

/// Compiles `src` for `target`; returns the generated code (PTX, AMDGPU
/// assembly or LLVM IR; empty for host targets). Panics with the compiler's
/// output on failure.
fn compile(target: Target, src: &Path, extra: &[&str], out: &Path) -> String {
    let mut cmd;
    match target {
        Nvptx(_) | Amdgcn(_) | Sycl => cmd = clang_device(target),
        Host { compiler, cxx } => {
            cmd = Command::new(compiler);
            if cxx {
                cmd.args(["-x", "c++", "-std=c++17"]);
            } else {
                cmd.args(["-std=c11", "-pedantic"]);
            }
            cmd.arg("-c");
        }
        CudaHostPass => {
            cmd = Command::new(CLANG);
            cmd.args([
                "-x",
                "cuda",
                "-nocudainc",
                "-nocudalib",
                "--cuda-host-only",
                "-c",
            ]);
        }
    }
    cmd.args(WARN).args(include_flags()).args(extra).arg(src);
    common::cache::kept(&mut cmd, "", out, |cmd, to| {
        cmd.arg("-o").arg(to);
        let o = jobs::output(cmd).unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        assert!(
            o.status.success(),
            "{target:?}: {cmd:?} failed\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::new()
    });
    match target {
        Host { .. } | CudaHostPass => String::new(),
        _ => std::fs::read_to_string(out).unwrap(),
    }
}

/// clang set to compile the device pass of a CUDA, HIP or SYCL source for
/// a device target, to assembly or LLVM IR (not a host target).
fn clang_device(target: Target) -> Command {
    let mut cmd = Command::new(CLANG);
    match target {
        Nvptx(arch) => cmd
            .args(["-x", "cuda", "-nocudainc", "-nocudalib"])
            .arg(format!("--cuda-gpu-arch={arch}")),
        Amdgcn(arch) => cmd
            .args(["-x", "hip", "-nogpuinc", "-nogpulib"])
            .arg(format!("--offload-arch={arch}")),
        Sycl => {
            cmd.args(sycl_flags());
            return cmd;
        }
        _ => panic!("{target:?} is not a device target"),
    };
    cmd.args(["--cuda-device-only", "-S"]);
    cmd
}

/// `#include` lines for `files` (by path), after a comment with a hash of
/// their content: a source made of them is then a new source, for the
/// compile cache, whenever one of them changes.
pub fn includes_of(files: &[PathBuf]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut lines = String::new();
    for f in files {
        std::fs::read(f).unwrap().hash(&mut h);
        lines += &format!("#include \"{}\"\n", f.display());
    }
    format!("/* content {:016x} */\n{lines}", h.finish())
}

/// A source file holding `text`, at a path that depends on its content
/// only (below the build's scratch directory), so that a compile of it is
/// found in the compile cache by a later run (the cache's hash covers the
/// arguments, so the path too).
pub fn stable_source(name: &str, text: &str) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (name, text).hash(&mut h);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("device-matrix-src")
        .join(format!("{:016x}", h.finish()));
    let path = dir.join(name);
    if std::fs::read_to_string(&path).is_ok_and(|t| t == text) {
        return path;
    }
    std::fs::create_dir_all(&dir).unwrap();
    // Written beside and renamed: threads and runs may write it at once.
    let tmp = dir.join(format!(
        ".{name}.{}.{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// Every device header, as a kernel names it in `#include <...>`.
fn device_headers() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root().join("include/fi_xpu"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("device") && n.ends_with(".h"))
        .map(|n| format!("fi_xpu/{n}"))
        .collect();
    v.sort();
    assert!(v.len() >= 3, "device headers missing: {v:?}");
    v
}

#[test]
fn every_device_header_alone_and_twice() {
    if !clang_or_skip() {
        return;
    }
    let dir = scratch("device-matrix-headers");
    let mut targets = DEVICE_TARGETS.to_vec();
    targets.extend(host_targets());
    let mut jobs = Vec::new();
    for h in device_headers() {
        for (suffix, text) in [
            ("once", format!("#include <{h}>\n")),
            ("twice", format!("#include <{h}>\n#include <{h}>\n")),
        ] {
            let src = stable_source(&format!("{}.{suffix}.c", h.replace('/', "_")), &text);
            for &t in &targets {
                jobs.push((t, src.clone()));
            }
        }
    }
    jobs::each(&jobs, |i, (t, src)| {
        compile(*t, src, &[], &dir.join(format!("out{i}")));
    });
}

/// Warnings strict C and C++ projects turn on in their own builds (MPI and
/// collective libraries, NCCL-style kernels), which every file that
/// includes the headers then gets: on top of `WARN`, for both languages.
/// Not here: -Wold-style-cast and -Wuseless-cast (the headers are C, with
/// C casts).
pub const STRICT: &[&str] = &[
    "-Wpedantic",
    "-Wshadow",
    "-Wundef",
    "-Wcast-qual",
    "-Wcast-align",
    "-Wconversion",
    "-Wsign-conversion",
    "-Wfloat-equal",
    "-Wdouble-promotion",
    "-Wredundant-decls",
];
/// C++ only.
pub const STRICT_CXX: &[&str] = &["-Wzero-as-null-pointer-constant", "-Wextra-semi"];
/// C only (not -Wmissing-prototypes: it is about the user's own functions).
const STRICT_C: &[&str] = &[
    "-Wstrict-prototypes",
    "-Wold-style-definition",
    "-Wnested-externs",
];

/// One translation unit as a strict user's file: the host header, every
/// device header, the example kernel and the kernel written from
/// libfabric's device API alone (through the compatibility directory).
pub fn strict_user_file() -> PathBuf {
    let mut text = String::from("#include <fi_xpu.h>\n");
    for h in device_headers() {
        text += &format!("#include <{h}>\n");
    }
    text += &includes_of(&[example(), upstream_kernel()]);
    stable_source("strict.c", &text)
}

/// That file compiles without a warning under `STRICT` (and `STRICT_CXX`
/// in C++, `STRICT_C` in C) for every device target, and on the host as C99, C11 and C17
/// and as C++11, C++17 and C++20, with gcc and clang.
#[test]
fn headers_compile_under_strict_user_warnings() {
    if !clang_or_skip() {
        return;
    }
    let dir = scratch("device-matrix-strict");
    let src = strict_user_file();
    let compat = compat_flag();
    let cxx: Vec<&str> = STRICT.iter().chain(STRICT_CXX).copied().collect();
    let c: Vec<&str> = STRICT.iter().chain(STRICT_C).copied().collect();
    let mut jobs = Vec::new();
    for &t in DEVICE_TARGETS.iter().chain(&[CudaHostPass]) {
        let mut extra = cxx.clone();
        extra.push(&compat);
        jobs.push((t, extra));
    }
    for t in host_targets() {
        let Host { cxx: is_cxx, .. } = t else {
            continue;
        };
        let (stds, flags) = if is_cxx {
            (&["-std=c++11", "-std=c++17", "-std=c++20"][..], &cxx[..])
        } else {
            (&["-std=c99", "-std=c11", "-std=c17"][..], &c[..])
        };
        for std in stds {
            let mut extra = flags.to_vec();
            extra.extend([*std, compat.as_str()]);
            jobs.push((t, extra));
        }
    }
    jobs::each(&jobs, |i, (t, extra)| {
        compile(*t, &src, extra, &dir.join(format!("out{i}")));
    });
}

const TESTPROV: &[&str] = &[
    "-DFI_XPU_DEVICE_EXTRA_HEADER=<testprov/fi_xpu_device_testprov.h>",
    "-DFI_XPU_DEVICE_PROVIDERS(P)=P(testprov)",
];

fn example() -> PathBuf {
    root().join("examples/device_all_ops.c")
}

/// The example kernel, with the default provider list and with the test
/// provider alone, is emitted as a kernel of each device target.
#[test]
fn example_kernel_is_emitted_for_every_target() {
    if !clang_or_skip() {
        return;
    }
    let dir = scratch("device-matrix-example");
    let mut jobs: Vec<(&str, &[&str], Target)> = Vec::new();
    for (variant, extra) in [("default", &[][..]), ("testprov", TESTPROV)] {
        for &t in DEVICE_TARGETS.iter() {
            jobs.push((variant, extra, t));
        }
        for t in host_targets() {
            jobs.push((variant, extra, t));
        }
    }
    jobs::each(&jobs, |i, &(variant, extra, t)| {
        let code = compile(
            t,
            &example(),
            extra,
            &dir.join(format!("{variant}.{i}.out")),
        );
        let ok = match t {
            Nvptx(_) => code.contains(".entry device_all_ops("),
            Amdgcn(_) => code.contains(".amdhsa_kernel device_all_ops"),
            Sycl => code.lines().any(|l| {
                l.starts_with("define") && l.contains("spir_func") && l.contains("@device_all_ops(")
            }),
            // Host targets: compiled, nothing emitted to check.
            Host { .. } | CudaHostPass => return,
        };
        assert!(
            ok,
            "{t:?} ({variant}): device_all_ops not emitted as device code"
        );
        if variant == "testprov" {
            // One provider: no jump table in the device code either.
            assert!(
                !code.contains("brx.idx"),
                "{t:?}: PTX jump table in one-provider build"
            );
            match t {
                Nvptx(_) => assert!(code.contains(".sys."), "{t:?}: no system-scope op"),
                Sycl => assert!(code.contains("__spirv_Atomic"), "{t:?}: no SPIR-V atomics"),
                _ => {}
            }
        }
    });
}

/// System-scope operations become the targets' system-scope instructions,
/// device-scope ones the device-scope forms.
#[test]
fn memory_scopes_map_to_scoped_instructions() {
    if !clang_or_skip() {
        return;
    }
    let dir = scratch("device-matrix-scopes");
    let src = root().join("tests/c/device_arch_kernel.c");
    for arch in ["sm_70", "sm_90"] {
        let ptx = compile(Nvptx(arch), &src, &[], &dir.join(format!("{arch}.ptx")));
        assert!(ptx.contains(".entry arch_probe("), "{arch}: kernel missing");
        for want in [
            "atom.relaxed.sys.add.u64",
            "atom.acq_rel.sys.cas.b64",
            "atom.relaxed.sys.exch.b32",
            "ld.acquire.sys.b64",
            "st.release.sys.b64",
            "fence.sc.sys",
            "atom.relaxed.gpu.add.u64",
            "atom.release.gpu.or.b64",
            "atom.acquire.gpu.and.b32",
            "ld.acquire.gpu.b32",
            "st.release.gpu.b32",
            "fence.acq_rel.gpu",
            "bar.sync",
            "shfl.sync.idx.b32",
            "bar.warp.sync",
        ] {
            assert!(ptx.contains(want), "{arch}: `{want}` missing from PTX");
        }
    }
    for arch in ["gfx90a", "gfx942"] {
        let asm = compile(Amdgcn(arch), &src, &[], &dir.join(format!("{arch}.s")));
        assert!(
            asm.contains(".amdhsa_kernel arch_probe"),
            "{arch}: kernel missing"
        );
        assert!(asm.contains("s_barrier"), "{arch}: no work-group barrier");
        // The IR keeps the scopes by name: "one-as" is system, "agent-one-as" the GPU.
        let ir = compile(
            Amdgcn(arch),
            &src,
            &["-emit-llvm"],
            &dir.join(format!("{arch}.ll")),
        );
        let sys = ir
            .lines()
            .filter(|l| {
                (l.contains("atomicrmw") || l.contains("cmpxchg") || l.contains("atomic"))
                    && l.contains("syncscope(\"one-as\")")
            })
            .count();
        let dev = ir
            .lines()
            .filter(|l| l.contains("syncscope(\"agent-one-as\")"))
            .count();
        assert!(
            sys >= 5 && dev >= 5,
            "{arch}: system {sys}, agent {dev} scoped atomics"
        );
    }
    let ir = compile(Sycl, &src, &[], &dir.join("sycl.ll"));
    // SPIR-V scopes: 0 = CrossDevice (system), 1 = Device.
    assert!(
        ir.contains("__spirv_AtomicIAdd")
            && ir.contains("i32 noundef 0")
            && ir.contains("i32 noundef 1"),
        "SYCL: scoped SPIR-V atomics missing"
    );
}

/// A kernel written only from libfabric's documented device API, including
/// `<rdma/fi_xpu_device.h>`, builds unchanged with fi_xpu's device flags
/// (the compatibility directory) for every device target and as host C and
/// C++, warnings as errors.
#[test]
fn upstream_kernel_builds_with_device_flags() {
    if !clang_or_skip() {
        return;
    }
    let dir = scratch("device-matrix-upstream");
    let compat = compat_flag();
    let src = upstream_kernel();
    let mut targets = DEVICE_TARGETS.to_vec();
    targets.extend(host_targets());
    jobs::each(&targets, |i, &t| {
        compile(t, &src, &[&compat], &dir.join(format!("out{i}")));
    });
}

/// The device flag that makes `<rdma/fi_xpu_device.h>` ours.
fn compat_flag() -> String {
    format!("-I{}", root().join("include/fi_xpu/compat").display())
}

/// The kernel written only from libfabric's documented device API.
fn upstream_kernel() -> PathBuf {
    root().join("tests/c/upstream_kernel.c")
}
