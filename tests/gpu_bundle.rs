//! The GPU check, ready for a short visit to a GPU machine: the GPU probe
//! and the CUDA examples build with nvcc (warnings as errors, down to SASS,
//! the examples linked against libfi_xpu) and their HIP versions with
//! hipcc; `cargo xtask gpu-bundle` packs a self-contained tree under 64 MiB whose libraries
//! resolve inside it and whose script builds the examples with nothing but
//! the bundle and nvcc; and `cargo xtask gpu-check` skips with one line
//! where there is no GPU. Nothing here runs a kernel: there is no GPU in CI.
use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MAX_BUNDLE_BYTES: u64 = 64 << 20;

/// The CUDA toolkit: $FI_XPU_CUDA_HOME, else the newest one that
/// .ci/install-cuda unpacked into the cache; `None` (with a line saying so)
/// when there is none.
fn cuda_home() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FI_XPU_CUDA_HOME") {
        return Some(PathBuf::from(d));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let found = std::fs::read_dir(cache.join("fi_xpu"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("cuda-"))
                && p.join("bin/nvcc").is_file()
        })
        .max();
    if found.is_none() {
        eprintln!("gpu_bundle: no CUDA toolkit (run .ci/install-cuda or set FI_XPU_CUDA_HOME)");
    }
    found
}

fn xtask(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(common::root())
        .args(["run", "--quiet", "-p", "xtask", "--"])
        .args(args)
        .envs(env.iter().copied());
    common::run(&mut cmd)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Compiles with `cmd` (every argument but `-o`) into `out`, which must
/// succeed; returns the compiler's messages. Kept by content in the
/// compile cache (tests/common/cache.rs): a rerun of the same compile
/// takes the kept object and messages.
fn compiled(cmd: &mut Command, out: &Path) -> String {
    common::cache::kept(cmd, "", out, |cmd, to| {
        let o = common::run(cmd.arg("-o").arg(to));
        assert!(o.status.success(), "{cmd:?}\n{}", text(&o));
        text(&o)
    })
}

/// The CUDA examples (hello, pingpong, the MoE dispatch/combine): nvcc's
/// front end, cicc, ptxas (SASS for sm_90) and the host compiler with
/// warnings as errors; then linked with libfi_xpu and the static CUDA
/// runtime, so every host call resolves.
/// Links `obj` with libfi_xpu (in `lib`) into `out` by `linker`, which must
/// succeed.
fn link(mut linker: Command, obj: &Path, lib: &Path, out: &Path) {
    linker
        .arg(obj)
        .arg(format!("-L{}", lib.display()))
        .arg("-lfi_xpu")
        .arg("-o")
        .arg(out);
    let o = common::run(&mut linker);
    assert!(o.status.success(), "{linker:?}\n{}", text(&o));
}

#[test]
fn cuda_examples_build_with_nvcc() {
    let Some(cuda) = cuda_home() else {
        return;
    };
    let lib = common::build();
    let dir = common::scratch("gpu-examples");
    std::thread::scope(|s| {
        for (ex, src) in [
            ("hello", "examples/cuda/hello.cu"),
            ("pingpong", "examples/cuda/pingpong.cu"),
            ("world", "examples/cuda/world.cu"),
            ("moe", "examples/moe/moe.cu"),
        ] {
            let (cuda, dir) = (&cuda, &dir);
            s.spawn(move || {
                let obj = dir.join(format!("{ex}.o"));
                let mut cc = Command::new(cuda.join("bin/nvcc"));
                cc.args(["-x", "cu", "-std=c++17", "-O2", "-arch=sm_90", "-c"])
                    .args(["-Werror", "all-warnings"])
                    // #550 (set but never used) comes from the shm
                    // provider's scope prologue (FI_XPU_GROUP_ENTER_RANK),
                    // not from the examples.
                    .args(["-diag-suppress", "550"])
                    .args(["-Xcompiler", "-Wall,-Wextra,-Werror"])
                    .arg(format!("-I{}", common::root().display()))
                    .arg(format!("-I{}", common::root().join("include").display()))
                    // moe checks every result byte against host
                    // arithmetic: no fused multiply-adds.
                    .args(["-fmad=false"])
                    .arg(common::root().join(src));
                let t = compiled(&mut cc, &obj);
                assert!(!t.contains("warning"), "{t}");
                let mut nvcc = Command::new(cuda.join("bin/nvcc"));
                nvcc.args(["-cudart", "static"]);
                link(nvcc, &obj, lib, &dir.join(ex));
            });
        }
    });
}

/// The GPU probe and the NVSHMEM MoE exchange the check carries as sources
/// (xtask/src/gpu/): standalone CUDA programs (no fi_xpu), built as the
/// bundle builds the probe: sm_90, warnings as errors, the static CUDA
/// runtime and nothing else (the driver API comes through the runtime's
/// entry-point query, so no libcuda is needed to link).
#[test]
fn gpu_probe_builds_with_nvcc() {
    let Some(cuda) = cuda_home() else {
        return;
    };
    let dir = common::scratch("gpu-probe");
    let exe = dir.join("fi_xpu_gpu_probe");
    let mut cc = Command::new(cuda.join("bin/nvcc"));
    cc.args(["-std=c++17", "-O2", "-arch=sm_90", "-cudart", "static"])
        .args([
            "-Werror",
            "all-warnings",
            "-Xcompiler",
            "-Wall,-Wextra,-Werror",
        ])
        .arg(common::root().join("xtask/src/gpu/probe.cu"))
        .arg("-o")
        .arg(&exe);
    let o = common::run(&mut cc);
    assert!(o.status.success(), "{cc:?}\n{}", text(&o));
    assert!(!text(&o).contains("warning"), "{}", text(&o));
    // Links no libcuda: it runs (and says there is no device) here.
    let ldd = common::run_ok(Command::new("ldd").arg(&exe));
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("libcuda.so"),
        "{}",
        String::from_utf8_lossy(&ldd.stdout)
    );
    let sass = common::run_ok(
        Command::new(cuda.join("bin/cuobjdump"))
            .arg("-lelf")
            .arg(&exe),
    );
    assert!(
        String::from_utf8_lossy(&sass.stdout).contains("sm_90"),
        "no sm_90 code: {}",
        String::from_utf8_lossy(&sass.stdout)
    );
    if !common::have("nvidia-smi") {
        // No device: one key=value line for it, exit 1, no peer left.
        let o = common::run(Command::new(&exe).args(["env", "floor"]));
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("error=no-cuda-device"),
            "{}",
            text(&o)
        );
    }
    let o = common::run(Command::new(&exe).arg("bogus"));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));

    // The NVSHMEM exchange, where NVSHMEM's headers and libraries are here
    // ($FI_XPU_NVSHMEM_HOME: the wheel's nvidia/nvshmem directory).
    let Some(nvshmem) = std::env::var_os("FI_XPU_NVSHMEM_HOME").map(PathBuf::from) else {
        eprintln!("gpu_bundle: FI_XPU_NVSHMEM_HOME unset: moe_nvshmem.cu not compiled");
        return;
    };
    let mut cc = Command::new(cuda.join("bin/nvcc"));
    cc.args([
        "-std=c++17",
        "-O2",
        "-arch=sm_90",
        "-rdc=true",
        "-fmad=false",
    ])
    .args(["-Werror", "all-warnings", "-diag-suppress", "550"])
    .args(["-Xcompiler", "-Wall,-Wextra,-Werror"])
    .arg("-I")
    .arg(nvshmem.join("include"))
    .arg("-I")
    .arg(common::root())
    .arg("-I")
    .arg(common::root().join("include"))
    .arg("-I")
    .arg(common::root().join("examples/moe"))
    .arg(common::root().join("xtask/src/gpu/moe_nvshmem.cu"))
    .arg("-L")
    .arg(nvshmem.join("lib"))
    .args(["-l:libnvshmem_host.so.3", "-lnvshmem_device", "-o"])
    .arg(dir.join("moe_nvshmem"));
    let o = common::run(&mut cc);
    assert!(o.status.success(), "{cc:?}\n{}", text(&o));
    assert!(!text(&o).contains("warning"), "{}", text(&o));
}

/// The HIP versions of the examples (examples/hip: hello, pingpong, world,
/// MoE, the every-operation kernel; the CUDA sources with the runtime's
/// names mapped to HIP) build with Debian's hipcc for gfx90a, host and
/// device, warnings as errors, and link against libfi_xpu and the HIP
/// runtime.
#[test]
fn hip_examples_build_with_hipcc() {
    if !common::have("hipcc") {
        eprintln!("gpu_bundle: no hipcc (apt install hipcc libamdhip64-dev rocm-device-libs)");
        return;
    }
    let lib = common::build();
    let dir = common::scratch("hip-examples");
    std::thread::scope(|s| {
        for ex in ["hello", "pingpong", "world", "moe", "device_all_ops"] {
            let dir = &dir;
            s.spawn(move || {
                let obj = dir.join(format!("{ex}.o"));
                let mut cc = Command::new("hipcc");
                cc.args(["-std=c++17", "-O2", "--offload-arch=gfx90a", "-c"])
                    .args(["-Wall", "-Wextra", "-Werror"])
                    // moe checks every result byte against host
                    // arithmetic: no fused multiply-adds.
                    .arg("-ffp-contract=off")
                    .arg(format!("-I{}", common::root().display()))
                    .arg(format!("-I{}", common::root().join("include").display()))
                    .arg(common::root().join(format!("examples/hip/{ex}.hip")));
                let t = compiled(&mut cc, &obj);
                assert!(!t.contains("warning"), "{t}");
                let bin = std::fs::read(&obj).unwrap();
                assert!(
                    bin.windows(b"amdgcn-amd-amdhsa--gfx90a".len())
                        .any(|w| w == b"amdgcn-amd-amdhsa--gfx90a"),
                    "{ex}: no gfx90a code object"
                );
                if ex == "device_all_ops" {
                    return; // a kernel, no program
                }
                link(Command::new("hipcc"), &obj, lib, &dir.join(ex));
            });
        }
    });
}

#[test]
fn gpu_check_script_is_valid_bash() {
    let script = common::root().join("xtask/src/gpu/gpu-check.sh");
    common::run_ok(Command::new("bash").arg("-n").arg(&script));
}

fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().flatten().fold(0, |sum, e| {
        let m = std::fs::symlink_metadata(e.path()).unwrap();
        sum + if m.is_dir() {
            bytes_under(&e.path())
        } else {
            m.len()
        }
    })
}

/// The bundle holds what the script needs, fits in 64 MiB packed and
/// unpacked, and every shared object in it finds its libraries inside the
/// bundle or in glibc/the GCC runtime; with nvcc here the probe is in it,
/// prebuilt and stripped. Without nvidia-smi the script says so in one line
/// and exits 0; with a stand-in nvidia-smi and the real nvcc it runs the
/// probe first, builds the examples from the bundle alone, streams its
/// lines into the output directory, and prints a RESULT line for every
/// measurement (here: not measured).
#[test]
fn gpu_bundle_is_complete_and_small() {
    let out = common::scratch("gpu-bundle");
    let o = xtask(
        &["gpu-bundle", "--debug", "--out", out.to_str().unwrap()],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    let b = out.join("fi_xpu-gpu");
    for f in [
        "gpu-check.sh",
        "lib/libfi_xpu.so",
        "lib/libfi_xpu.so.0",
        "lib/fi_xpu/libfi_xpu-shm.so",
        "lib/fi_xpu/libfi_xpu-ofi.so",
        "lib/libfabric.so.1",
        "include/fi_xpu.h",
        "include/fi_xpu/device.h",
        "include/fi_xpu/device_shm.h",
        "include/fi_xpu/shm/shm__types.h",
        "include/fi_xpu/device_ofi.h",
        "examples/hello.c",
        "examples/pingpong.c",
        "examples/cuda/hello.cu",
        "examples/cuda/pingpong.cu",
        "examples/cuda/world.cu",
        "examples/cuda/peer.h",
        "examples/cuda/cuda_mem.h",
        "examples/moe/moe.cu",
        "examples/moe/moe.h",
        "examples/moe/world.h",
        "bin/fi_xpu_info",
        "gpu/probe.cu",
        "gpu/moe_nvshmem.cu",
    ] {
        assert!(b.join(f).is_file(), "{f} missing from the bundle");
    }
    let mode = std::fs::metadata(b.join("gpu-check.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111, "gpu-check.sh is not executable");
    let unpacked = bytes_under(&b);
    let tarball = out.join("fi_xpu-gpu.tar.gz");
    let packed = std::fs::metadata(&tarball).unwrap().len();
    eprintln!("bundle: {unpacked} bytes unpacked, {packed} packed");
    assert!(unpacked < MAX_BUNDLE_BYTES && packed < MAX_BUNDLE_BYTES);
    let list = common::run_ok(Command::new("tar").arg("-tzf").arg(&tarball));
    let list = String::from_utf8_lossy(&list.stdout);
    for f in [
        "fi_xpu-gpu/gpu-check.sh",
        "fi_xpu-gpu/lib/libfabric.so.1",
        "fi_xpu-gpu/examples/cuda/pingpong.cu",
    ] {
        assert!(list.lines().any(|l| l == f), "{f} not in the tarball");
    }
    // Stripped: no symbol table beyond the dynamic one.
    let syms = common::run_ok(
        Command::new("readelf")
            .arg("-SW")
            .arg(b.join("lib/libfi_xpu.so")),
    );
    assert!(!String::from_utf8_lossy(&syms.stdout).contains(".symtab"));

    // Every library resolves; nothing outside the bundle but the system set.
    let system = [
        "libc.so.6",
        "libm.so.6",
        "libgcc_s.so.1",
        "ld-linux-x86-64.so.2",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "linux-vdso.so.1",
    ];
    let lib = b.join("lib");
    let mut objects = vec![lib.join("libfi_xpu.so"), lib.join("libfabric.so.1")];
    objects.extend(
        std::fs::read_dir(lib.join("fi_xpu"))
            .unwrap()
            .flatten()
            .map(|e| e.path()),
    );
    for obj in objects {
        let o = common::run_ok(Command::new("ldd").arg(&obj).env("LD_LIBRARY_PATH", &lib));
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let mut w = line.split_whitespace();
            let (Some(name), Some("=>"), Some(path)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            assert_ne!(path, "not", "{}: {name} not found", obj.display());
            assert!(
                Path::new(path).starts_with(&lib) || system.contains(&name),
                "{}: {name} resolved outside the bundle ({path})",
                obj.display()
            );
        }
    }

    // No nvidia-smi on PATH: one line, exit 0.
    let bin = out.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    if !common::have("nvidia-smi") {
        let o = common::run(
            Command::new("bash")
                .arg(b.join("gpu-check.sh"))
                .env("PATH", "/usr/bin:/bin"),
        );
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(
            text(&o),
            "gpu-check: skipped: nvidia-smi not found (no NVIDIA driver)\n"
        );
    }

    // A stand-in nvidia-smi: the script gets past the capability check and
    // builds the examples with nvcc from the bundle's headers and library.
    let Some(cuda) = cuda_home() else {
        return;
    };
    // With nvcc here the probe comes prebuilt for sm_90, stripped.
    let probe = b.join("bin/fi_xpu_gpu_probe");
    assert!(probe.is_file(), "no prebuilt probe in the bundle");
    let syms = common::run_ok(Command::new("readelf").arg("-SW").arg(&probe));
    assert!(!String::from_utf8_lossy(&syms.stdout).contains(".symtab"));
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        "#!/bin/sh\ncase \"$*\" in *compute_cap*) echo 9.0;; *) echo 'GPU 0: stand-in';; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let results = out.join("check-out");
    let o = common::run(
        Command::new("bash")
            .arg(b.join("gpu-check.sh"))
            .env("PATH", path)
            .env("NVCC", cuda.join("bin/nvcc"))
            .env("GPU_CHECK_MPS", "0")
            // nvcc on a loaded CI machine: no build cut short.
            .env("GPU_CHECK_LIMIT_S", "3000")
            .env("GPU_CHECK_BUILD_S", "1500")
            .env("GPU_CHECK_OUT", &results)
            .env("GPU_CHECK_ITERS", "10"),
    );
    let t = text(&o);
    // The probe ran first (and found no device), its lines kept.
    let probe_out = std::fs::read_to_string(results.join("probe.txt")).unwrap_or_default();
    assert!(
        probe_out.contains("error=no-cuda-device"),
        "{probe_out}\n{t}"
    );
    // Everything shown was also streamed into check.log.
    let log = std::fs::read_to_string(results.join("check.log")).unwrap();
    assert!(log.contains("build hello.cu"), "{log}");
    // One RESULT line per measurement, each saying it was not measured.
    for name in [
        "shm_put_signal_8B_oneway_p50",
        "shm_put_signal_8B_oneway_p99",
        "shm_put_16MiB",
        "shm_put_256MiB",
        "shm_moe_dispatch",
        "shm_moe_combine",
        "shm_moe_dispatch_combine",
        "ofi_tcp_write_8B_oneway_p50",
        "ofi_shm_put_16MiB",
    ] {
        assert!(
            t.lines().any(
                |l| l.starts_with(&format!("RESULT {name} - ")) && l.ends_with(" not-measured")
            ),
            "no RESULT line for {name}:\n{t}"
        );
    }
    for row in [
        "build hello.cu",
        "build pingpong.cu",
        "build world.cu",
        "build moe.cu",
    ] {
        assert!(
            t.lines()
                .any(|l| l.starts_with(row) && l.split_whitespace().nth(3) == Some("ok")),
            "{row} did not build:\n{t}"
        );
    }
    // Without a GPU the runs fail, each in its own row (a GPU machine with
    // the stand-in script's PATH would pass them).
    for prov in ["shm", "ofi-tcp", "ofi-shm"] {
        for ex in ["hello ", "pingpong "] {
            assert!(
                t.lines().any(|l| l.starts_with(ex) && l.contains(prov)),
                "no {ex}row for {prov}:\n{t}"
            );
        }
    }
}

/// Without a GPU, `cargo xtask gpu-check` prints one line saying why and
/// exits 0, before building anything.
#[test]
fn gpu_check_skips_without_gpu() {
    let out = common::scratch("gpu-check-skip");
    let missing = out.join("no-such-nvidia-smi");
    let o = xtask(
        &["gpu-check", "--out", out.join("bundle").to_str().unwrap()],
        &[("FI_XPU_NVIDIA_SMI", missing.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!(
            "gpu-check: skipped: {} not found (no NVIDIA driver)\n",
            missing.display()
        )
    );
    // nvidia-smi present but without a device (its exit status 6).
    let smi = out.join("nvidia-smi");
    std::fs::write(&smi, "#!/bin/sh\necho 'No devices were found'\nexit 6\n").unwrap();
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = xtask(
        &["gpu-check", "--out", out.join("bundle").to_str().unwrap()],
        &[("FI_XPU_NVIDIA_SMI", smi.to_str().unwrap())],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        stdout.starts_with("gpu-check: skipped: ")
            && stdout.contains("-L failed (exit status: 6): no usable NVIDIA GPU"),
        "{stdout}"
    );
    assert!(
        !out.join("bundle").exists(),
        "a skipped check built the bundle"
    );
}
