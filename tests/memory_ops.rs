//! Memory operations through the C API: exportable memory allocated in one
//! process and imported with FI_XPU_IMPORT_DMABUF in another, with the
//! built-in backend and with application callbacks (current and first
//! struct version), run plainly and under AddressSanitizer; and a hostile
//! exporter whose descriptors can shrink is refused, so that its
//! `ftruncate` never makes the importer take SIGBUS.
use crate::common;

use std::process::Command;

fn run(extra: &[&str], tag: &str) {
    let dir = common::scratch(&format!("dmabuf-{tag}"));
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    common::test_provider(&plugins, "libfi_xpu-test.so", &[]);
    let exe = dir.join("dmabuf_share");
    common::cc(
        &[&common::root().join("tests/c/dmabuf_share.c")],
        &exe,
        extra,
    );
    let o = common::run_ok(
        Command::new(&exe)
            .arg("test")
            .env("FI_XPU_PROVIDER_PATH", &plugins)
            .env("FI_XPU_PROVIDER", "test")
            .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    for what in [
        "built-in system memory",
        "application callbacks",
        "first struct version",
        "hostile exporter: every resize refused, the importer survived",
    ] {
        assert!(out.contains(what), "missing '{what}' in:\n{out}");
    }
}

#[test]
fn dmabuf_shared_between_processes() {
    run(&[], "plain");
}

#[test]
fn dmabuf_shared_between_processes_under_asan() {
    if !common::asan_works() {
        eprintln!("skipped: the C compiler cannot link with AddressSanitizer here");
        return;
    }
    run(&["-fsanitize=address", "-fno-omit-frame-pointer"], "asan");
}

/// Which memory interfaces each provider serves, met as a GPU user meets
/// it (tests/c/iface_support.c): an `FI_HMEM_CUDA` context with
/// application callbacks over host memory (no driver needed). shm serves
/// `FI_HMEM_CUDA` only through the built-in backend (callbacks give the
/// host no way into device memory); ofi serves device memory only where its
/// libfabric provider offers `FI_HMEM`, which Debian's libfabric 1.17 does
/// not. Each refusal is `-FI_EOPNOTSUPP` with one log line naming what is
/// missing, and so is a system context whose callbacks cannot map a file
/// descriptor, which shm needs.
#[test]
fn providers_refuse_memory_they_cannot_serve_and_say_why() {
    let exe = common::ofi::program("iface_support", &[]);
    let run = |prov: &str, env: &[(&str, &str)]| {
        let mut cmd = Command::new(&exe);
        cmd.arg(prov)
            .env("FI_XPU_LOG_LEVEL", "warn")
            .env("FI_XPU_PROVIDER", prov);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = common::run_ok(&mut cmd);
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (out, log) = run("shm", &[]);
    assert_eq!(out, "shm system=-95 cuda=-95\n", "{log}");
    assert!(
        log.contains("shm:warn: fi_xpu_ctx_open: shm serves iface cuda through the library's built-in memory backend only"),
        "{log}"
    );
    assert!(
        log.contains("the application's import callback must map an fd"),
        "{log}"
    );
    if !common::ofi::have_libfabric() {
        eprintln!("skipped the ofi half: libfabric is not installed");
        return;
    }
    let (out, log) = run(
        "ofi",
        &[("FI_XPU_OFI_PROVIDER", "tcp"), ("FI_TCP_IFACE", "lo")],
    );
    assert_eq!(out, "ofi system=0 cuda=-95\n", "{log}");
    assert!(
        log.contains("does not offer FI_HMEM: cannot serve iface cuda"),
        "{log}"
    );
}

/// The library's own memory is not the application's: every page a shm
/// context's opening mapped (its root, its heap, the import of its table)
/// is refused by `fi_xpu_free` and `fi_xpu_unimport` with `-FI_EINVAL`,
/// and the context works on (tests/c/internal_memory.c).
#[test]
fn the_librarys_own_memory_is_refused_by_the_public_calls() {
    let exe = common::ofi::program("internal_memory", &[]);
    let o = common::run_ok(
        Command::new(&exe)
            .arg("shm")
            .env("FI_XPU_PROVIDER", "shm")
            .env("FI_XPU_LOG_LEVEL", "none"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("internal_memory shm: ") && out.ends_with(" pages refused\n"),
        "{out}"
    );
}
