//! The bad-input table of tests/c/bad_input.c, run against every provider
//! (the C test provider, shm, and ofi over libfabric's tcp): plainly, under
//! AddressSanitizer and under valgrind's memcheck. The same bad input gets
//! the same code from each.
use crate::common;

use std::path::PathBuf;
use std::process::Command;

fn prepare(extra: &[&str], tag: &str) -> (PathBuf, PathBuf) {
    let dir = common::scratch(&format!("bad-input-{tag}"));
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    common::test_provider(&plugins, "libfi_xpu-test.so", &[]);
    let exe = dir.join("bad_input");
    common::cc(&[&common::root().join("tests/c/bad_input.c")], &exe, extra);
    (exe, plugins)
}

/// The environment that selects `prov`: the test provider from its scratch
/// directory, shm and ofi (over tcp on loopback) from beside libfi_xpu.so.
fn select(cmd: &mut Command, plugins: &PathBuf, prov: &str) {
    cmd.env("FI_XPU_PROVIDER", prov)
        .env("FI_XPU_LOG_LEVEL", "none");
    match prov {
        "test" => cmd.env("FI_XPU_PROVIDER_PATH", plugins),
        _ => cmd.env_remove("FI_XPU_PROVIDER_PATH"),
    };
    if prov == "ofi" {
        cmd.env("FI_XPU_OFI_PROVIDER", "tcp")
            .env("FI_TCP_IFACE", "lo");
    }
}

fn command(exe: &PathBuf, plugins: &PathBuf) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("test");
    select(&mut cmd, plugins, "test");
    cmd
}

fn check(out: std::process::Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

fn plain(prov: &str) {
    let (exe, plugins) = prepare(&[], &format!("plain-{prov}"));
    let mut cmd = Command::new(&exe);
    cmd.arg(prov);
    select(&mut cmd, &plugins, prov);
    check(common::run_ok(&mut cmd));
}

fn asan(prov: &str) {
    if !common::asan_works() {
        eprintln!("skipped: the C compiler cannot link with AddressSanitizer here");
        return;
    }
    let (exe, plugins) = prepare(
        &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"],
        &format!("asan-{prov}"),
    );
    let mut cmd = Command::new(&exe);
    cmd.arg(prov)
        .env("ASAN_OPTIONS", "detect_leaks=1")
        .env("UBSAN_OPTIONS", "halt_on_error=1");
    select(&mut cmd, &plugins, prov);
    check(common::run_ok(&mut cmd));
}

fn valgrind(prov: &str) {
    if common::asan_all() {
        eprintln!("skipped: the program is built with AddressSanitizer, which valgrind cannot run");
        return;
    }
    assert!(
        common::have("valgrind"),
        "valgrind is missing: install it (.ci/run does)"
    );
    let (exe, plugins) = prepare(&[], &format!("valgrind-{prov}"));
    let mut vg = Command::new("valgrind");
    vg.args([
        "--error-exitcode=99",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "-q",
    ])
    .arg(&exe)
    .arg(prov);
    select(&mut vg, &plugins, prov);
    check(common::run_ok(&mut vg));
}

#[test]
fn bad_input_table() {
    plain("test");
}

#[test]
fn bad_input_table_on_shm() {
    plain("shm");
}

#[test]
fn bad_input_table_on_ofi_over_tcp() {
    plain("ofi");
}

#[test]
fn bad_input_table_under_asan() {
    asan("test");
}

#[test]
fn bad_input_table_on_shm_under_asan() {
    asan("shm");
}

#[test]
fn bad_input_table_on_ofi_over_tcp_under_asan() {
    asan("ofi");
}

#[test]
fn bad_input_table_under_valgrind() {
    valgrind("test");
}

#[test]
fn bad_input_table_on_shm_under_valgrind() {
    valgrind("shm");
}

#[test]
fn log_lines_follow_fi_xpu_log_level() {
    let (exe, plugins) = prepare(&[], "log");
    let quiet = common::run_ok(&mut command(&exe, &plugins));
    assert!(
        quiet.stderr.is_empty(),
        "FI_XPU_LOG_LEVEL=none must be silent"
    );

    let loud = common::run_ok(command(&exe, &plugins).env("FI_XPU_LOG_LEVEL", "warn"));
    let stderr = String::from_utf8_lossy(&loud.stderr);
    // Every line carries pid, host and time (common::log_body checks them).
    let lines: Vec<String> = stderr
        .lines()
        .map(|l| common::log_body(l).unwrap_or_else(|| panic!("not a log line: {l}")))
        .collect();
    // The provider's own name labels what it logs; the core labels its own.
    assert!(
        lines
            .iter()
            .any(|l| l == "fi_xpu:test:warn: does not serve iface neuron"),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("fi_xpu:core:warn: struct fi_xpu_mem_ops: size 1")),
        "{stderr}"
    );
    assert!(!lines.iter().any(|l| l.contains(":debug:")), "{stderr}");

    let debug = common::run_ok(command(&exe, &plugins).env("FI_XPU_LOG_LEVEL", "debug"));
    let stderr = String::from_utf8_lossy(&debug.stderr);
    assert!(
        stderr.lines().count() > lines.len(),
        "debug adds lines:\n{stderr}"
    );
}
