//! The built-in FI_HMEM_CUDA memory backend over a test double of the CUDA
//! driver (tests/c/fake_cuda/libcuda.c, built against the real <cuda.h>
//! from the CUDA wheels and found through LD_LIBRARY_PATH, the same
//! dlopen("libcuda.so.1") search a real driver is found by): every memory
//! operation, driver errors mapped to exact fi errors with one log line,
//! a missing driver and a missing entry point, and device memory shared
//! between processes and written by a peer through the shm provider.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The CUDA headers: $FI_XPU_CUDA_HOME/include, else the newest toolkit
/// .ci/install-cuda put in the cache.
fn cuda_include() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FI_XPU_CUDA_HOME") {
        return Some(PathBuf::from(d).join("include"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
        .join("fi_xpu");
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("include/cuda.h").is_file())
        .collect();
    found.sort();
    found.pop().map(|p| p.join("include"))
}

/// Builds the driver double into `dir/libcuda.so.1`.
fn fake_driver(dir: &Path, defines: &[&str]) -> Option<PathBuf> {
    let Some(inc) = cuda_include() else {
        eprintln!("skipped: no cuda.h (run .ci/install-cuda or set FI_XPU_CUDA_HOME)");
        return None;
    };
    std::fs::create_dir_all(dir).unwrap();
    let out = dir.join("libcuda.so.1");
    let o = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args([
            "-std=c11", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .args(["-D_GNU_SOURCE", "-Wl,-soname,libcuda.so.1"])
        .arg(format!("-I{}", inc.display()))
        .args(defines)
        .arg(common::root().join("tests/c/fake_cuda/libcuda.c"))
        .arg("-o")
        .arg(&out)
        .arg("-lpthread")
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "building the driver double failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(dir.to_path_buf())
}

struct Setup {
    prog: PathBuf,
    plugins: PathBuf,
    driver: Option<PathBuf>,
    old_driver: Option<PathBuf>,
    no_driver: PathBuf,
}

fn setup() -> &'static Setup {
    static S: OnceLock<Setup> = OnceLock::new();
    S.get_or_init(|| {
        let dir = common::scratch("cuda-memory");
        let plugins = dir.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        common::test_provider(
            &plugins,
            "libfi_xpu-test.so",
            &["-DTP_IFACES=((1ULL << FI_HMEM_SYSTEM) | (1ULL << FI_HMEM_CUDA))"],
        );
        let prog = dir.join("cuda_memory");
        common::cc(
            &[&common::root().join("tests/c/cuda_memory.c")],
            &prog,
            &["-ldl"],
        );
        let no_driver = dir.join("no-driver");
        std::fs::create_dir_all(&no_driver).unwrap();
        Setup {
            prog,
            plugins,
            driver: fake_driver(&dir.join("driver"), &[]),
            old_driver: fake_driver(&dir.join("old-driver"), &["-DFAKE_CUDA_NO_VMM"]),
            no_driver,
        }
    })
}

/// Runs the program with the driver found in `lib_dir`; returns stdout and
/// the log lines (without pid, host and time).
fn run(lib_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (String, Vec<String>) {
    let s = setup();
    let mut cmd = Command::new(&s.prog);
    cmd.args(args)
        .env("LD_LIBRARY_PATH", lib_dir)
        .env("FI_XPU_PROVIDER_PATH", &s.plugins)
        .env("FI_XPU_LOG_LEVEL", "warn")
        .env_remove("FAKE_CUDA_FAIL")
        .env_remove("FAKE_CUDA_DEVICES");
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

#[test]
fn every_operation_over_the_driver() {
    let Some(drv) = &setup().driver else { return };
    let (out, logs) = run(drv, &["ops"], &[]);
    assert_eq!(
        out, "open=0 alloc=0 dmabuf=0 host=0 import=0 reimport=0 thread=0 live=0",
        "{logs:#?}"
    );
    // The allocation left to the context's close is released, with a warning.
    has_line(&logs, "still live; releasing them");
}

#[test]
fn no_driver_is_enodev_with_one_log_line() {
    let s = setup();
    let (out, logs) = run(&s.no_driver, &["ops"], &[]);
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
    let Some(old) = &setup().old_driver else {
        return;
    };
    let (out, logs) = run(old, &["ops"], &[]);
    assert_eq!(out, "open=-38");
    has_line(&logs, "libcuda.so.1 has no cuMemCreate");
}

#[test]
fn no_device_and_bad_ordinal_are_enodev() {
    let Some(drv) = &setup().driver else { return };
    let (out, logs) = run(drv, &["ops"], &[("FAKE_CUDA_DEVICES", "0")]);
    assert_eq!(out, "open=-19");
    has_line(&logs, "cuInit failed: CUDA_ERROR_NO_DEVICE (100)");
    let (out, logs) = run(drv, &["ops", "1"], &[]);
    assert_eq!(out, "open=-19");
    has_line(
        &logs,
        "cuDeviceGet(1) failed: CUDA_ERROR_INVALID_DEVICE (101)",
    );
    let (out, _) = run(drv, &["ops", "0x100000000"], &[]);
    assert_eq!(out, "open=-19");
}

/// Each driver error, injected into one entry point, reaches the caller as
/// the mapped fi error, logged, and leaves nothing behind in the driver.
#[test]
fn driver_errors_map_to_fi_errors() {
    let Some(drv) = &setup().driver else { return };
    let cases: &[(&str, &str, &str)] = &[
        // (FAKE_CUDA_FAIL, expected line, expected log text)
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
    ];
    for (fail, want, log) in cases {
        let (out, logs) = run(drv, &["ops"], &[("FAKE_CUDA_FAIL", fail)]);
        assert_eq!(&out, want, "FAKE_CUDA_FAIL={fail}: {logs:#?}");
        has_line(&logs, log);
    }
}

#[test]
fn device_memory_shared_between_processes_and_written_through_shm() {
    let Some(drv) = &setup().driver else { return };
    let (out, logs) = run(drv, &["share"], &[("FI_XPU_LOG_LEVEL", "none")]);
    assert!(out.contains("cuda_memory share: ok"), "{out}\n{logs:#?}");
}
