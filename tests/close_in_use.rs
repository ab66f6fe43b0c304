//! Drives `tests/c/close_in_use.c`: closing a host CQ or counter while other
//! threads are inside host reads of it, plainly, under AddressSanitizer and
//! under valgrind. The test provider is built to linger inside its host
//! reads, so a close that does not wait for calls in flight frees the object
//! under them (and the provider aborts on such a close).
use crate::common;

use std::path::PathBuf;
use std::process::Command;

fn prepare(extra: &[&str], tag: &str) -> (PathBuf, PathBuf) {
    let dir = common::scratch(&format!("close-in-use-{tag}"));
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    common::test_provider(&plugins, "libfi_xpu-test.so", &["-DTP_SLOW_HOST_CALLS"]);
    let exe = dir.join("close_in_use");
    common::cc(
        &[&common::root().join("tests/c/close_in_use.c")],
        &exe,
        extra,
    );
    (exe, plugins)
}

fn envs(cmd: &mut Command, plugins: &PathBuf) {
    cmd.env("FI_XPU_PROVIDER_PATH", plugins)
        .env("FI_XPU_PROVIDER", "test")
        .env("FI_XPU_LOG_LEVEL", "none");
}

fn check(out: std::process::Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "close_in_use: ok\n");
}

#[test]
fn close_waits_for_host_calls_in_flight() {
    let (exe, plugins) = prepare(&[], "plain");
    let mut cmd = Command::new(&exe);
    cmd.args(["test", "50"]);
    envs(&mut cmd, &plugins);
    check(common::run_ok(&mut cmd));
}

#[test]
fn close_waits_for_host_calls_in_flight_under_asan() {
    if !common::asan_works() {
        eprintln!("skipped: the C compiler cannot link with AddressSanitizer here");
        return;
    }
    let (exe, plugins) = prepare(
        &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"],
        "asan",
    );
    let mut cmd = Command::new(&exe);
    cmd.args(["test", "50"])
        .env("ASAN_OPTIONS", "detect_leaks=1")
        .env("UBSAN_OPTIONS", "halt_on_error=1");
    envs(&mut cmd, &plugins);
    check(common::run_ok(&mut cmd));
}

#[test]
fn close_waits_for_host_calls_in_flight_under_valgrind() {
    if !common::valgrind_usable() {
        return;
    }
    let (exe, plugins) = prepare(&[], "valgrind");
    let mut cmd = Command::new("valgrind");
    // Fair scheduling: under valgrind's default lock, the readers'
    // tight loop can starve the closing thread for minutes.
    cmd.args(["--error-exitcode=99", "-q", "--fair-sched=yes"])
        .arg(&exe)
        .args(["test", "20"]);
    envs(&mut cmd, &plugins);
    check(common::run_ok(&mut cmd));
}
