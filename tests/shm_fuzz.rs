//! Fuzzes what a peer process can write into the shm provider's shared
//! memory (inbox slots with the flow-control words of streamed sends,
//! staging lanes, registration table, endpoint block, the rings that take
//! remote completions) while the device operations read it:
//! tests/c/shm_fuzz.c, under AddressSanitizer and UBSan where the toolchain
//! has them.
use crate::common;

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
            // The smallest heap the provider takes: every round restores
            // both heaps from a snapshot and checks them, which at the
            // default 8 MiB was most of the time under AddressSanitizer
            // (76 s for all modes against 15 s, the same rounds).
            .env("FI_XPU_SHM_HEAP_SIZE", (1u32 << 20).to_string())
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
    assert!(out.contains("shm_fuzz known rounds=3000: ok"), "{out}");
}

/// Up to one streamed send per staging lane; between the endpoints' turns
/// the flow-control words (consumed, produced, their stamps) and lengths
/// are rewound, advanced, replayed or set near 2^64, and a third peer's
/// hidden overwrite is tried (consumed advanced so that the sender refills
/// over bytes not yet taken, then produced put back). The sender never
/// writes outside its lanes, every receive that succeeds holds exactly the
/// bytes sent, and in clean rounds every byte arrives.
#[test]
fn streamed_sends_with_hostile_flow_control() {
    let out = fuzz("stream", &["stream"]);
    assert!(out.contains("shm_fuzz stream rounds=300: ok"), "{out}");
}

/// Offsets of the target's remote counters and remote-completion ring near
/// 2^64 (and aimed at private memory): refused, never an update outside the
/// peer heap.
#[test]
fn endpoint_offsets_near_2_pow_64() {
    let out = fuzz("offsets", &["offsets"]);
    assert!(out.contains("shm_fuzz offsets rounds=600: ok"), "{out}");
}

/// A second thread corrupts inbox slots, the endpoint block, the remote
/// ring and the registration table while operations run.
#[test]
fn corruption_racing_operations() {
    let out = fuzz("race", &["race"]);
    assert!(out.contains("shm_fuzz race rounds=400: ok"), "{out}");
}

/// A peer publishes send completions with a context of its choosing in
/// every completion ring of the victim it can reach: a CQ that takes no
/// remote events has none, and the ring of the one that does yields remote
/// completions only.
#[test]
fn forged_completions_are_refused() {
    let out = fuzz("forge", &["forge"]);
    assert!(out.contains("shm_fuzz forge rounds=50: ok"), "{out}");
}
