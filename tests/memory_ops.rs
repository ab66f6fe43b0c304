//! Memory operations through the C API: exportable memory allocated in one
//! process and imported with FI_XPU_IMPORT_DMABUF in another, with the
//! built-in backend and with application callbacks (current and first
//! struct version), run plainly and under AddressSanitizer; and a hostile
//! exporter whose descriptors can shrink is refused, so that its
//! `ftruncate` never makes the importer take SIGBUS.
mod common;

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
