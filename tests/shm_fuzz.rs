//! Fuzzes what a peer process can write into the shm provider's shared
//! memory (inbox slots and staging lanes, registration table, CQ rings)
//! while the device operations read it: tests/c/shm_fuzz.c, under
//! AddressSanitizer and UBSan where the toolchain has them.
mod common;

use std::path::PathBuf;
use std::process::Command;

fn program(test: &str) -> PathBuf {
    let dir = common::scratch(&format!("shm-fuzz-{test}"));
    let out = dir.join("prog");
    let src = common::root().join("tests/c/shm_fuzz.c");
    if common::asan_works() {
        common::cc(
            &[&src],
            &out,
            &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"],
        );
    } else {
        common::cc(&[&src], &out, &[]);
    }
    out
}

fn fuzz(test: &str, args: &[&str]) -> String {
    let p = program(test);
    let o = common::run_ok(
        Command::new(&p)
            .args(args)
            .env("FI_XPU_PROVIDER", "shm")
            .env("FI_XPU_LOG_LEVEL", "none")
            // UBSan only prints by default; a finding must fail the test.
            .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
            .env("ASAN_OPTIONS", "detect_leaks=0"),
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn corrupted_peer_memory_is_refused_not_followed() {
    let out = fuzz("main", &[]);
    assert!(out.contains("shm_fuzz rounds=3000: ok"), "{out}");
}

/// Heap headers whose `mr_off` is unaligned or would wrap a bounds check
/// around to the bytes before the heap, fed often: refused, not followed.
#[test]
fn unaligned_or_wrapping_mr_off() {
    let out = fuzz("known", &["known"]);
    assert!(out.contains("shm_fuzz rounds=3000: ok"), "{out}");
}
