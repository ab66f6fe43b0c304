//! The built-in vendor memory backends over test doubles of the drivers
//! (tests/c/fake_cuda/libcuda.c built against the real <cuda.h> from the
//! CUDA wheels, tests/c/fake_ze/libze_loader.c against libze-dev's
//! <level_zero/ze_api.h>, tests/c/fake_hsa/libhsa-runtime64.c against
//! Debian's ROCm <hsa/hsa.h>), found through LD_LIBRARY_PATH: the same
//! dlopen-by-soname search a real driver is found by. Every memory
//! operation, driver errors mapped to exact fi errors with one log line, a
//! missing driver and a missing entry point, and device memory shared
//! between processes and written by a peer through the shm provider.
use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

#[path = "../src/memory/cuda_include.rs"]
mod cuda_include;
use cuda_include::cuda_include;

/// Builds a driver double from `src` into `dir/soname`.
fn fake_driver(src: &str, soname: &str, dir: &Path, flags: &[String]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    common::run_ok(
        Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args([
                "-std=c11", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
            ])
            .arg("-D_GNU_SOURCE")
            .arg(format!("-Wl,-soname,{soname}"))
            .args(flags)
            .arg(common::root().join(src))
            .arg("-o")
            .arg(dir.join(soname))
            .arg("-lpthread"),
    );
    dir.to_path_buf()
}

struct Setup {
    prog: PathBuf,
    plugins: PathBuf,
    dir: PathBuf,
}

fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let dir = common::scratch("vendor-memory");
        let plugins = dir.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        common::test_provider(
            &plugins,
            "libfi_xpu-test.so",
            &["-DTP_IFACES=((1ULL << FI_HMEM_SYSTEM) | (1ULL << FI_HMEM_CUDA) | (1ULL << FI_HMEM_ZE) | (1ULL << FI_HMEM_ROCR))"],
        );
        let prog = dir.join("vendor_memory");
        common::cc(
            &[&common::root().join("tests/c/vendor_memory.c")],
            &prog,
            &["-ldl"],
        );
        std::fs::create_dir_all(dir.join("no-driver")).unwrap();
        Setup { prog, plugins, dir }
    })
}

/// Runs the program with the drivers found in `lib_dir`; returns stdout and
/// the log lines (without pid, host and time).
fn run(lib_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, Vec<String>) {
    let s = setup();
    let mut cmd = Command::new(&s.prog);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", lib_dir)
        .env("FI_XPU_PROVIDER_PATH", &s.plugins)
        .env("FI_XPU_LOG_LEVEL", "warn");
    for v in [
        "FAKE_CUDA_FAIL",
        "FAKE_CUDA_DEVICES",
        "FAKE_ZE_FAIL",
        "FAKE_ZE_DEVICES",
        "FAKE_HSA_FAIL",
        "FAKE_HSA_GPUS",
    ] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = common::run_ok(&mut cmd);
    let logs = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter_map(common::log_body)
        .collect();
    (String::from_utf8_lossy(&o.stdout).trim().to_string(), logs)
}

fn has_line(logs: &[String], needle: &str) {
    assert!(
        logs.iter().any(|l| l.contains(needle)),
        "no log line with '{needle}' in {logs:#?}"
    );
}

/// Runs `ops` once per injected failure and checks the line and the log.
fn check_errors(drv: &Path, iface: &str, var: &str, cases: &[(&str, &str, &str)]) {
    for (fail, want, log) in cases {
        let (out, logs) = run(drv, &[iface, "ops"], &[(var, fail)]);
        assert_eq!(&out, want, "{var}={fail}: {logs:#?}");
        has_line(&logs, log);
    }
}

mod cuda {
    use super::*;

    fn driver() -> Option<&'static Path> {
        static D: OnceLock<Option<PathBuf>> = OnceLock::new();
        D.get_or_init(|| {
            let Some(inc) = cuda_include() else {
                eprintln!("skipped: no cuda.h (run .ci/install-cuda or set FI_XPU_CUDA_HOME)");
                return None;
            };
            Some(fake_driver(
                "tests/c/fake_cuda/libcuda.c",
                "libcuda.so.1",
                &setup().dir.join("cuda"),
                &[format!("-I{}", inc.display())],
            ))
        })
        .as_deref()
    }

    #[test]
    fn every_operation_over_the_driver() {
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["cuda", "ops"], &[]);
        assert_eq!(
            out, "open=0 alloc=0 dmabuf=0 host=0 import=0 reimport=0 thread=0 live=0",
            "{logs:#?}"
        );
        // The allocation left to the context's close is released, with a warning.
        has_line(&logs, "still live; releasing them");
    }

    #[test]
    fn no_driver_is_enodev_with_one_log_line() {
        let (out, logs) = run(&setup().dir.join("no-driver"), &["cuda", "ops"], &[]);
        assert_eq!(out, "open=-19");
        let lines: Vec<_> = logs.iter().filter(|l| l.contains("CUDA")).collect();
        assert_eq!(lines.len(), 1, "{logs:#?}");
        assert!(
            lines[0].contains("FI_HMEM_CUDA: no CUDA driver: libcuda.so.1: dlopen failed"),
            "{logs:#?}"
        );
    }

    #[test]
    fn driver_without_an_entry_point_is_enosys() {
        let Some(inc) = cuda_include() else { return };
        let old = fake_driver(
            "tests/c/fake_cuda/libcuda.c",
            "libcuda.so.1",
            &setup().dir.join("cuda-old"),
            &[format!("-I{}", inc.display()), "-DFAKE_CUDA_NO_VMM".into()],
        );
        let (out, logs) = run(&old, &["cuda", "ops"], &[]);
        assert_eq!(out, "open=-38");
        has_line(&logs, "libcuda.so.1 has no cuMemCreate");
    }

    #[test]
    fn no_device_and_bad_ordinal_are_enodev() {
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["cuda", "ops"], &[("FAKE_CUDA_DEVICES", "0")]);
        assert_eq!(out, "open=-19");
        has_line(&logs, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)");
        let (out, logs) = run(drv, &["cuda", "ops", "1"], &[]);
        assert_eq!(out, "open=-19");
        has_line(
            &logs,
            "cuDeviceGet(1) failed: CUDA_ERROR_INVALID_DEVICE (101)",
        );
        let (out, _) = run(drv, &["cuda", "ops", "0x100000000"], &[]);
        assert_eq!(out, "open=-19");
    }

    /// Each driver error, injected into one entry point, reaches the caller
    /// as the mapped fi error, logged, and leaves nothing behind in the driver.
    #[test]
    fn driver_errors_map_to_fi_errors() {
        let Some(drv) = driver() else { return };
        check_errors(
            drv,
            "cuda",
            "FAKE_CUDA_FAIL",
            &[
                (
                    "cuMemCreate:2",
                    "open=0 alloc=-12 dmabuf=-12 host=0 import=0 reimport=0 thread=-12 live=0",
                    "cuMemCreate failed: CUDA_ERROR_OUT_OF_MEMORY (2)",
                ),
                (
                    "cuMemCreate:801",
                    "open=0 alloc=-95 dmabuf=-95 host=0 import=0 reimport=0 thread=-95 live=0",
                    "cuMemCreate failed: CUDA_ERROR_NOT_SUPPORTED (801)",
                ),
                (
                    "cuMemSetAccess:1",
                    "open=0 alloc=-22 dmabuf=-22 host=0 import=0 reimport=0 thread=-22 live=0",
                    "cuMemSetAccess failed: CUDA_ERROR_INVALID_VALUE (1)",
                ),
                (
                    "cuMemExportToShareableHandle:999",
                    "open=0 alloc=0 dmabuf=-5 host=0 import=0 reimport=0 thread=0 live=0",
                    "cuMemExportToShareableHandle failed: CUresult 999",
                ),
                (
                    "cuMemHostRegister:800",
                    "open=0 alloc=0 dmabuf=0 host=-1 import=-1 reimport=-1 thread=0 live=0",
                    "cuMemHostRegister failed: CUDA_ERROR_NOT_PERMITTED (800)",
                ),
                (
                    "cuMemHostGetDevicePointer:1",
                    "open=0 alloc=0 dmabuf=0 host=-22 import=-22 reimport=-22 thread=0 live=0",
                    "cuMemHostGetDevicePointer failed: CUDA_ERROR_INVALID_VALUE (1)",
                ),
                (
                    "cuDevicePrimaryCtxRetain:3",
                    "open=-19",
                    "cuDevicePrimaryCtxRetain failed: CUDA_ERROR_NOT_INITIALIZED (3)",
                ),
                (
                    "cuMemGetAllocationGranularity:201",
                    "open=-5",
                    "cuMemGetAllocationGranularity failed: CUDA_ERROR_INVALID_CONTEXT (201)",
                ),
            ],
        );
    }

    #[test]
    fn device_memory_shared_between_processes_and_written_through_shm() {
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["cuda", "share"], &[("FI_XPU_LOG_LEVEL", "none")]);
        assert!(out.contains("vendor_memory share: ok"), "{out}\n{logs:#?}");
    }

    /// shm on an `FI_HMEM_CUDA` context without callbacks, over the double
    /// in strict mode (device memory out of the host's reach, opened only
    /// while a kernel runs; tests/c/device_on_cuda.h brackets every launch
    /// and every device call of a program with it).
    mod shm_device_heap {
        use super::*;
        use std::os::unix::process::ExitStatusExt;
        use std::process::Output;

        /// `src` compiled to run on a CUDA context (device_on_cuda.h);
        /// `None` (the test skipped) without the double.
        fn program(src: &str, name: &str) -> Option<PathBuf> {
            driver()?;
            let inc = cuda_include()?;
            let dir = common::scratch(&format!("shm-device-heap-{name}"));
            let out = dir.join(name);
            let include = common::root().join("tests/c/device_on_cuda.h");
            common::cc(
                &[&common::root().join(src)],
                &out,
                &[
                    "-include",
                    include.to_str().unwrap(),
                    &format!("-I{}", inc.display()),
                    "-ldl",
                ],
            );
            Some(out)
        }

        fn run_strict(prog: &Path, args: &[&str]) -> Output {
            run_strict_with(prog, args, &[])
        }

        /// Runs `prog` over the strict double (under memcheck when the
        /// suite asks for it).
        fn run_strict_with(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
            common::run(&mut strict_command(prog, args, env))
        }

        /// The program over the strict double, never under memcheck: it
        /// is meant to fault.
        fn run_faulting(prog: &Path, args: &[&str]) -> Output {
            strict_command(prog, args, &[])
                .current_dir(common::program_cwd())
                .output()
                .expect("run the program")
        }

        fn strict_command(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
            let drv = driver().expect("the double was built");
            let mut cmd = Command::new(prog);
            cmd.args(args)
                .env("LD_LIBRARY_PATH", drv)
                .env("FAKE_CUDA_STRICT", "1")
                .env("FI_XPU_PROVIDER", "shm")
                .env("FI_XPU_LOG_LEVEL", "warn")
                .env_remove("FI_XPU_PROVIDER_PATH")
                .env_remove("FAKE_CUDA_FAIL")
                .env_remove("FAKE_CUDA_DEVICES")
                .env_remove("FI_XPU_SHM_HOST_PROGRESS")
                .env_remove("FAKE_CUDA_GPU_ID");
            for (k, v) in env {
                cmd.env(k, v);
            }
            cmd
        }

        /// The log lines of a run's stderr.
        fn logs(o: &Output) -> Vec<String> {
            let stderr = String::from_utf8_lossy(&o.stderr);
            stderr.lines().filter_map(common::log_body).collect()
        }

        /// How many of a run's `fi_xpu_av_lookup` lines about a peer say
        /// `what`.
        fn peer_lines(o: &Output, what: &str) -> usize {
            let stderr = String::from_utf8_lossy(&o.stderr);
            (stderr.lines())
                .filter(|l| l.contains("fi_xpu_av_lookup: peer") && l.contains(what))
                .count()
        }

        fn show(o: &Output) -> String {
            format!(
                "{}\n--- stdout\n{}\n--- stderr\n{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        }

        fn run_ok(prog: &Path, args: &[&str], want: &str) {
            run_ok_with(prog, args, &[], want)
        }

        fn run_ok_with(prog: &Path, args: &[&str], env: &[(&str, &str)], want: &str) {
            let o = run_strict_with(prog, args, env);
            assert!(
                o.status.success() && String::from_utf8_lossy(&o.stdout).contains(want),
                "{}",
                show(&o)
            );
        }

        #[test]
        fn peer_writable_structures_are_device_memory_and_carry_data_between_processes() {
            let Some(p) = program("tests/c/shm_device_heap.c", "placement") else {
                return;
            };
            run_ok(&p, &["placement"], "shm_device_heap placement: ok");
            // A device without stream memory operations: the host's flag
            // stores become 8-byte copies on the same stream.
            let env = [("FAKE_CUDA_FAIL", "cuStreamWriteValue64:801")];
            run_ok_with(&p, &["placement"], &env, "shm_device_heap placement: ok");
        }

        /// Each context decides per peer pair whether the peer's context
        /// is on its own device: yes for itself and for a peer on the same
        /// GPU, no for a peer on another.
        #[test]
        fn the_same_device_is_decided_per_peer_pair() {
            let Some(p) = program("tests/c/shm_device_heap.c", "same-device") else {
                return;
            };
            for (mode, on, not_on) in [("placement", 4, 0), ("placement-two-gpus", 2, 2)] {
                let o = run_strict_with(&p, &[mode], &[("FI_XPU_LOG_LEVEL", "debug")]);
                assert!(o.status.success(), "{}", show(&o));
                let count = |what: &str| peer_lines(&o, what);
                assert_eq!(
                    (count("is on this"), count("is not on this")),
                    (on, not_on),
                    "{mode}: {}",
                    show(&o)
                );
            }
        }

        /// What kernels write into a peer is written at device scope only
        /// for a peer on the same GPU, and at system scope for one on
        /// another GPU or under `FI_XPU_SHM_SCOPE=sys`; the data still
        /// moves either way (the program checks it).
        #[test]
        fn the_scope_is_chosen_per_peer_pair_and_sys_forces_system_scope() {
            let Some(p) = program("tests/c/shm_device_heap.c", "scope") else {
                return;
            };
            for (mode, env, dev, sys, forced) in [
                ("placement", &[][..], 4, 0, 0),
                ("placement-two-gpus", &[][..], 2, 2, 0),
                ("placement", &[("FI_XPU_SHM_SCOPE", "sys")][..], 0, 4, 4),
            ] {
                let mut env = env.to_vec();
                env.push(("FI_XPU_LOG_LEVEL", "debug"));
                let o = run_strict_with(&p, &[mode], &env);
                assert!(o.status.success(), "{}", show(&o));
                let count = |what: &str| peer_lines(&o, what);
                assert_eq!(
                    (
                        count(": device scope"),
                        count(": system scope"),
                        count("(FI_XPU_SHM_SCOPE=sys)")
                    ),
                    (dev, sys, forced),
                    "{mode} {env:?}: {}",
                    show(&o)
                );
            }
        }

        /// A departed peer's heap leaves the peer map at once but stays
        /// mapped, and readable by kernels, until the context closes.
        #[test]
        fn a_departed_peers_device_memory_stays_mapped_until_the_context_closes() {
            let Some(p) = program("tests/c/shm_device_heap.c", "departed") else {
                return;
            };
            run_ok(&p, &["departed"], "shm_device_heap departed: ok");
        }

        /// The shm device tests, unchanged, on the CUDA context: scopes on
        /// the host launcher (loopback), every operation between two
        /// processes in every CQ format and between four, and large,
        /// directed and overrun messages between two processes. (The
        /// hostile-peer tests write into peers' heaps from the host on
        /// purpose, and so do not apply.)
        #[test]
        fn the_device_suite_runs_without_host_access_to_device_memory() {
            let Some(scope) = program("tests/c/device_scope_shm.c", "scope") else {
                return;
            };
            run_ok(&scope, &[], "device_scope shm: ok");
            let ops = program("tests/c/shm_ops.c", "ops").unwrap();
            for (n, format) in [("2", "1"), ("2", "2"), ("2", "3"), ("2", "4"), ("4", "1")] {
                run_ok(
                    &ops,
                    &[n, format],
                    &format!("shm_ops n={n} format={format}: ok"),
                );
            }
            let msg = program("tests/c/shm_msg.c", "msg").unwrap();
            run_ok(&msg, &["2"], "shm_msg n=2: ok");
        }

        /// What examples/moe/moe.cu does on a GPU, on the double: a world
        /// of two processes on `FI_HMEM_CUDA` contexts without callbacks,
        /// its window device memory; the host copies inputs in and results
        /// out, and every phase and the reset run as kernels. Every byte
        /// of two rounds is checked on both ranks.
        #[test]
        fn moe_on_a_device_memory_window_as_the_cuda_example_runs_it() {
            let Some(p) = program("tests/c/moe_on_cuda.c", "moe") else {
                return;
            };
            run_ok(&p, &[], "moe_on_cuda: ok");
        }

        /// What makes the suite above mean something: the double fails a
        /// program that stores to device memory from the host, and one
        /// that copies on the legacy stream while a kernel runs.
        #[test]
        fn the_double_fails_host_access_and_legacy_stream_copies() {
            let Some(p) = program("tests/c/shm_device_heap.c", "double") else {
                return;
            };
            let o = run_faulting(&p, &["host-store"]);
            // Under AddressSanitizer its handler reports the fault and exits.
            let asan = String::from_utf8_lossy(&o.stderr).contains("SEGV on unknown address");
            assert!(
                o.status.signal() == Some(libc::SIGSEGV) || (asan && !o.status.success()),
                "{}",
                show(&o)
            );
            assert!(!String::from_utf8_lossy(&o.stdout).contains("survived"));
            let o = run_faulting(&p, &["legacy-copy"]);
            assert_eq!(o.status.signal(), Some(libc::SIGABRT), "{}", show(&o));
            assert!(
                String::from_utf8_lossy(&o.stderr)
                    .contains("fake_cuda: cuMemcpyHtoD on the legacy stream while a kernel runs"),
                "{}",
                show(&o)
            );
        }

        /// cudaMalloc memory registers through a legacy IPC handle, and
        /// is refused with the reason where the driver gives none.
        #[test]
        fn cumemalloc_memory_registers_through_ipc_or_is_refused_with_the_reason() {
            let Some(p) = program("tests/c/shm_device_heap.c", "register") else {
                return;
            };
            let o = run_strict(&p, &["register"]);
            assert!(o.status.success(), "{}", show(&o));
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                "vmm=0 host=0 cumemalloc=0",
                "{}",
                show(&o)
            );
            let o = run_strict_with(
                &p,
                &["register"],
                &[("FAKE_CUDA_FAIL", "cuIpcGetMemHandle:801")],
            );
            assert!(o.status.success(), "{}", show(&o));
            assert_eq!(
                String::from_utf8_lossy(&o.stdout).trim(),
                "vmm=0 host=0 cumemalloc=-95",
                "{}",
                show(&o)
            );
            let logs = logs(&o);
            has_line(
                &logs,
                "memory from cudaMalloc/cuMemAlloc through a legacy IPC handle where the driver gives one",
            );
            has_line(
                &logs,
                "cuIpcGetMemHandle failed: CUDA_ERROR_NOT_SUPPORTED (801)",
            );
        }

        /// A peer writes into cudaMalloc memory shared by its IPC handle.
        #[test]
        fn a_peer_writes_into_cumemalloc_memory_through_its_ipc_handle() {
            let Some(p) = program("tests/c/shm_device_heap.c", "ipc") else {
                return;
            };
            run_ok(&p, &["ipc"], "shm_device_heap ipc: ok");
        }

        #[test]
        fn host_progress_is_refused_with_device_heaps() {
            let Some(p) = program("tests/c/shm_device_heap.c", "progress") else {
                return;
            };
            let o = run_strict(&p, &["host-progress"]);
            assert!(o.status.success(), "{}", show(&o));
            assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "ctx=-95");
            let logs = logs(&o);
            has_line(
                &logs,
                "shm cannot run a host progress agent (FI_XPU_DOMAIN_HOST_PROGRESS, FI_XPU_SHM_HOST_PROGRESS) over a context whose heap is device memory",
            );
        }
    }
}

mod ze {
    use super::*;

    fn driver() -> Option<&'static Path> {
        static D: OnceLock<Option<PathBuf>> = OnceLock::new();
        D.get_or_init(|| {
            if !Path::new("/usr/include/level_zero/ze_api.h").is_file() {
                eprintln!("skipped: no level_zero/ze_api.h (install libze-dev)");
                return None;
            }
            Some(fake_driver(
                "tests/c/fake_ze/libze_loader.c",
                "libze_loader.so.1",
                &setup().dir.join("ze"),
                &[],
            ))
        })
        .as_deref()
    }

    #[test]
    fn every_operation_over_the_loader() {
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["ze", "ops"], &[]);
        // Level Zero registers no foreign host memory: both imports are
        // refused, with a log line saying what works instead.
        assert_eq!(
            out, "open=0 alloc=0 dmabuf=0 host=0 import=-95 reimport=-95 thread=0 live=0",
            "{logs:#?}"
        );
        has_line(&logs, "FI_HMEM_ZE maps host memory only as a DMA-BUF fd");
    }

    /// The loader and its test double both in a directory of their own
    /// would hide the system's; without either, and with the real loader
    /// (libze1) but no GPU driver, the error is -FI_ENODEV.
    #[test]
    fn no_loader_or_no_driver_is_enodev() {
        let (out, logs) = run(&setup().dir.join("no-driver"), &["ze", "ops"], &[]);
        if Path::new("/usr/lib/x86_64-linux-gnu/libze_loader.so.1").exists()
            || Path::new("/lib/x86_64-linux-gnu/libze_loader.so.1").exists()
        {
            // The real loader, found in the system directories.
            assert_eq!(out, "open=-19", "{logs:#?}");
            has_line(
                &logs,
                "FI_HMEM_ZE: zeInit failed: ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)",
            );
        } else {
            assert_eq!(out, "open=-19", "{logs:#?}");
            has_line(&logs, "FI_HMEM_ZE: no Level Zero loader: libze_loader.so.1");
        }
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["ze", "ops"], &[("FAKE_ZE_DEVICES", "0")]);
        assert_eq!(out, "open=-19");
        has_line(
            &logs,
            "zeInit failed: ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)",
        );
        let (out, logs) = run(drv, &["ze", "ops", "1"], &[]);
        assert_eq!(out, "open=-19");
        has_line(&logs, "FI_HMEM_ZE: no device 1 (1 found)");
    }

    #[test]
    fn loader_errors_map_to_fi_errors() {
        let Some(drv) = driver() else { return };
        check_errors(
            drv,
            "ze",
            "FAKE_ZE_FAIL",
            &[
                (
                    "zeMemAllocDevice:70000003",
                    "open=0 alloc=-12 dmabuf=-12 host=0 import=-95 reimport=-95 thread=-12 live=0",
                    "zeMemAllocDevice failed: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000003)",
                ),
                (
                    "zeMemGetAllocProperties:78000003",
                    "open=0 alloc=0 dmabuf=-95 host=-95 import=-95 reimport=-95 thread=0 live=0",
                    "zeMemGetAllocProperties failed: ZE_RESULT_ERROR_UNSUPPORTED_FEATURE (0x78000003)",
                ),
                (
                    "zeMemAllocHost:78000004",
                    "open=0 alloc=0 dmabuf=0 host=-22 import=-95 reimport=-95 thread=0 live=0",
                    "zeMemAllocHost failed: ZE_RESULT_ERROR_INVALID_ARGUMENT (0x78000004)",
                ),
                (
                    "zeContextCreate:70000002",
                    "open=-12",
                    "zeContextCreate failed: ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY (0x70000002)",
                ),
                (
                    "zeDriverGet:7ffffffe",
                    "open=-5",
                    "zeDriverGet failed: ze_result_t 0x7ffffffe",
                ),
            ],
        );
    }

    #[test]
    fn device_memory_shared_between_processes_and_written_through_shm() {
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["ze", "share"], &[("FI_XPU_LOG_LEVEL", "none")]);
        assert!(out.contains("vendor_memory share: ok"), "{out}\n{logs:#?}");
    }
}

mod rocr {
    use super::*;

    fn runtime(name: &str, flags: &[String]) -> Option<PathBuf> {
        if !Path::new("/usr/include/hsa/hsa_ext_amd.h").is_file() {
            eprintln!("skipped: no hsa/hsa_ext_amd.h (install libhsa-runtime-dev)");
            return None;
        }
        Some(fake_driver(
            "tests/c/fake_hsa/libhsa-runtime64.c",
            "libhsa-runtime64.so.1",
            &setup().dir.join(name),
            flags,
        ))
    }

    fn driver() -> Option<&'static Path> {
        static D: OnceLock<Option<PathBuf>> = OnceLock::new();
        D.get_or_init(|| runtime("rocr", &[])).as_deref()
    }

    #[test]
    fn every_operation_over_the_runtime() {
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["rocr", "ops"], &[]);
        assert_eq!(
            out, "open=0 alloc=0 dmabuf=0 host=0 import=0 reimport=0 thread=0 live=0",
            "{logs:#?}"
        );
    }

    /// Debian's runtime (ROCm 5.2) on a machine without a GPU, and the
    /// double without GPUs: -FI_ENODEV; a GPU ordinal past the last: the same.
    #[test]
    fn no_runtime_or_no_gpu_is_enodev() {
        let (out, logs) = run(&setup().dir.join("no-driver"), &["rocr", "ops"], &[]);
        assert_eq!(out, "open=-19", "{logs:#?}");
        let system = ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]
            .iter()
            .any(|d| Path::new(d).join("libhsa-runtime64.so.1").exists());
        if system {
            has_line(&logs, "FI_HMEM_ROCR: hsa_init failed: 0x1008");
        } else {
            has_line(
                &logs,
                "FI_HMEM_ROCR: no ROCm runtime: libhsa-runtime64.so.1",
            );
        }
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["rocr", "ops"], &[("FAKE_HSA_GPUS", "0")]);
        assert_eq!(out, "open=-19");
        has_line(
            &logs,
            "hsa_init failed: 0x1008 (HSA_STATUS_ERROR_OUT_OF_RESOURCES",
        );
        let (out, logs) = run(drv, &["rocr", "ops", "2"], &[("FAKE_HSA_GPUS", "2")]);
        assert_eq!(out, "open=-19");
        has_line(&logs, "FI_HMEM_ROCR: no GPU 2 (2 found)");
    }

    /// A runtime without DMA-BUF export (ROCm 5.2): everything but
    /// exportable device memory works; that is -FI_ENOSYS, named in the log.
    #[test]
    fn runtime_without_dmabuf_export() {
        let Some(old) = runtime("rocr-5.2", &["-DFAKE_HSA_NO_EXPORT".into()]) else {
            return;
        };
        let (out, logs) = run(&old, &["rocr", "ops"], &[]);
        assert_eq!(
            out, "open=0 alloc=0 dmabuf=-38 host=0 import=0 reimport=0 thread=0 live=0",
            "{logs:#?}"
        );
        has_line(
            &logs,
            "libhsa-runtime64.so.1 has no hsa_amd_portable_export_dmabuf",
        );
    }

    #[test]
    fn runtime_errors_map_to_fi_errors() {
        let Some(drv) = driver() else { return };
        check_errors(
            drv,
            "rocr",
            "FAKE_HSA_FAIL",
            &[
                (
                    "hsa_amd_memory_pool_allocate:1008",
                    "open=0 alloc=-12 dmabuf=-12 host=0 import=0 reimport=0 thread=-12 live=0",
                    "hsa_amd_memory_pool_allocate failed: 0x1008 (HSA_STATUS_ERROR_OUT_OF_RESOURCES",
                ),
                (
                    "hsa_amd_portable_export_dmabuf:1003",
                    "open=0 alloc=0 dmabuf=-22 host=0 import=0 reimport=0 thread=0 live=0",
                    "hsa_amd_portable_export_dmabuf failed: 0x1003 (HSA_STATUS_ERROR_INVALID_ALLOCATION",
                ),
                (
                    "hsa_amd_memory_lock:1001",
                    "open=0 alloc=0 dmabuf=0 host=-22 import=-22 reimport=-22 thread=0 live=0",
                    "hsa_amd_memory_lock failed: 0x1001 (HSA_STATUS_ERROR_INVALID_ARGUMENT",
                ),
                (
                    "hsa_iterate_agents:100b",
                    "open=-19",
                    "hsa_iterate_agents failed: 0x100b (HSA_STATUS_ERROR_NOT_INITIALIZED",
                ),
                (
                    "hsa_amd_memory_pool_get_info:1000",
                    "open=-5",
                    "hsa_amd_agent_iterate_memory_pools failed: hsa_status_t 0x1000",
                ),
            ],
        );
    }

    #[test]
    fn device_memory_shared_between_processes_and_written_through_shm() {
        let Some(drv) = driver() else { return };
        let (out, logs) = run(drv, &["rocr", "share"], &[("FI_XPU_LOG_LEVEL", "none")]);
        assert!(out.contains("vendor_memory share: ok"), "{out}\n{logs:#?}");
    }
}
