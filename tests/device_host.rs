//! The device API on the host XPU: C programs built against the public
//! headers and libfi_xpu.so, run on threads started by `fi_xpu_host_launch`.
use crate::common;

use common::ofi::have_libfabric;
use common::{build, cc, root, run_ok, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

fn c_src(name: &str) -> PathBuf {
    root().join("tests/c").join(name)
}

fn build_c(test: &str, src: &str, extra: &[&str]) -> PathBuf {
    let dir = scratch(test);
    let exe = dir.join(test);
    let inc = format!("-I{}", root().join("tests/c").display());
    let mut flags = vec![inc.as_str()];
    flags.extend_from_slice(extra);
    cc(&[&c_src(src)], &exe, &flags);
    exe
}

fn stdout(exe: &Path, args: &[&str]) -> String {
    let o = run_ok(Command::new(exe).args(args));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn launcher_errors_ids_and_barriers() {
    let exe = build_c("device_launch", "device_launch.c", &[]);
    assert!(stdout(&exe, &[]).contains("launch ok"));
}

#[test]
fn coop_reserve_and_copy_every_scope() {
    let exe = build_c("device_coop", "device_coop.c", &[]);
    assert!(stdout(&exe, &["150"]).contains("coop ok: 150 iterations"));
}

/// The shm completion ring under contention (tests/c/shm_cq_ring.c, 2 s
/// per phase). Threads that push and take entries at once, never holding
/// more than half of it: a push must never find it full (reading the head
/// before the tail let it look full, which lost a completion; that failed
/// within milliseconds). Pushers that overflow it in bursts while readers
/// report the losses: the FI_EOVERRUN entries must count exactly the
/// losses (reading the count before what was reported let a reader report
/// 2^64 - 1 losses; that failed in 2 of 5 one-second runs).
#[test]
fn shm_cq_ring_never_looks_full_with_room_and_reports_losses_exactly() {
    let exe = build_c("shm_cq_ring", "shm_cq_ring.c", &[]);
    assert!(stdout(&exe, &["2"]).contains("losses reported exactly"));
}

/// The GPU form of the cooperative copy (16-byte words between a bytewise
/// head and tail, lanes interleaved) compiled for the host and run lane by
/// lane: every alignment of source and destination modulo 16, lengths
/// across the unit boundaries, 1 to 64 lanes; exact bytes, untouched
/// guards, and every byte written by exactly one lane.
#[test]
fn coop_copy_lanes_every_alignment() {
    let exe = build_c("coop_copy_lanes", "coop_copy_lanes.c", &[]);
    assert!(stdout(&exe, &[]).contains("copy lanes ok"));
}

/// Large host copies stream their stores past the cache
/// (fi_xpu_arch_bulk_copy): with the threshold lowered to one byte, every
/// cooperative copy of the test above, of every length, alignment and
/// share, takes that path and must still write exactly its bytes.
#[test]
fn coop_copy_with_streaming_stores() {
    let exe = build_c(
        "device_coop_nt",
        "device_coop.c",
        &["-DFI_XPU_HOST_NT_COPY_MIN=1"],
    );
    assert!(stdout(&exe, &["150"]).contains("coop ok: 150 iterations"));
    if cfg!(target_arch = "x86_64") {
        let o = run_ok(Command::new("objdump").arg("-d").arg(&exe));
        let asm = String::from_utf8_lossy(&o.stdout);
        assert!(
            asm.contains("movntdq"),
            "no non-temporal stores in the streaming build"
        );
        let plain = build_c(
            "device_coop_plain",
            "device_coop.c",
            &["-DFI_XPU_HOST_NT_COPY_MIN=0"],
        );
        let o = run_ok(Command::new("objdump").arg("-d").arg(&plain));
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("movntdq"),
            "FI_XPU_HOST_NT_COPY_MIN=0 still streams"
        );
    }
}

/// `src` built with ThreadSanitizer, after checking that the C compiler can
/// build and run such programs here.
fn build_tsan(test: &str, src: &str) -> PathBuf {
    assert!(
        common::sanitizer_works("-fsanitize=thread", &format!("{test}-probe"), true),
        "the C compiler cannot build and run ThreadSanitizer programs here"
    );
    build_c(test, src, &["-fsanitize=thread"])
}

/// Runs a ThreadSanitizer build; its stdout, after checking it reported
/// nothing.
fn run_tsan(exe: &Path, args: &[&str]) -> String {
    let o = run_ok(
        Command::new(exe)
            .args(args)
            .env("TSAN_OPTIONS", "halt_on_error=1 exitcode=66"),
    );
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("ThreadSanitizer"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// ThreadSanitizer sees the C side (the kernel, the arch layer and the
/// cooperative helpers); the launcher's hand-offs and the arch layer's
/// TSan hooks give it the ordering that libfi_xpu's barriers provide.
#[test]
fn coop_under_thread_sanitizer() {
    let exe = build_tsan("device_coop_tsan", "device_coop.c");
    assert!(run_tsan(&exe, &["4"]).contains("coop ok"));
}

/// The launcher keeps its threads between launches (work item 0 runs on
/// the launching thread, the others on the same threads each time), ends
/// them when idle for about 2 s, and a forked child starts without them,
/// even when another thread was launching as it forked (the child's first
/// launch hung on the parameter registry's lock, held across the fork,
/// before the registry and the idle list were held by the forking thread)
/// (tests/c/launch_pool.c). Before threads were kept, a launch of 4 work
/// items created and joined 4 threads.
#[test]
fn launch_threads_are_kept_between_launches_and_released_when_idle() {
    let exe = build_c("launch_pool", "launch_pool.c", &[]);
    assert!(stdout(&exe, &["all"]).contains("pool ok"));
}

/// What the launching thread wrote before a launch is seen by its work
/// items, and what they wrote by the launching thread after, for
/// ThreadSanitizer too: the hand-off to kept threads and their completion
/// go through pthread mutexes it follows.
#[test]
fn launch_hand_off_under_thread_sanitizer() {
    let exe = build_tsan("launch_pool_tsan", "launch_pool.c");
    assert!(run_tsan(&exe, &["order", "300"]).contains("order ok"));
}

#[test]
fn dispatch_with_test_provider() {
    let exe = build_c("device_dispatch", "device_dispatch.c", &[]);
    assert!(stdout(&exe, &[]).contains("dispatch ok"));
}

#[test]
fn dispatch_with_no_provider() {
    let exe = build_c(
        "device_dispatch_none",
        "device_dispatch.c",
        &["-DNO_PROVIDERS"],
    );
    assert!(stdout(&exe, &[]).contains("dispatch ok"));
}

/// The body of function `name` in GNU assembler output.
fn function_body<'a>(asm: &'a str, name: &str) -> &'a str {
    let start = asm
        .find(&format!("\n{name}:"))
        .unwrap_or_else(|| panic!("{name} not in assembly"));
    let rest = &asm[start..];
    let end = rest.find(".cfi_endproc").unwrap_or(rest.len());
    &rest[..end]
}

/// With one provider compiled in, each operation is a check of prov_id and
/// a direct call (or tail jump) to the provider's function: no jump table,
/// no indirect branch.
#[test]
fn one_provider_dispatch_is_a_direct_call() {
    build();
    let dir = scratch("device_onecall");
    for compiler in ["cc", "clang-19"] {
        if !common::have(compiler) {
            continue;
        }
        let out = dir.join(format!("onecall-{compiler}.s"));
        run_ok(
            Command::new(compiler)
                .args(["-std=c11", "-O2", "-S", "-Wall", "-Wextra", "-Werror"])
                .arg(format!("-I{}", root().display()))
                .arg(format!("-I{}", root().join("include").display()))
                .arg(format!("-I{}", root().join("tests/c").display()))
                .arg(c_src("device_onecall.c"))
                .arg("-o")
                .arg(&out),
        );
        let asm = std::fs::read_to_string(&out).unwrap();
        for (func, callee) in [
            ("post_write", "fi_xpu_write_testprov"),
            ("poll_cq", "fi_xpu_cq_read_testprov"),
        ] {
            let body = function_body(&asm, func);
            assert!(
                body.lines().any(|l| {
                    // call, jmp, or a conditional tail call (je) with a symbol operand
                    let l = l.trim_start();
                    (l.starts_with("call") || l.starts_with('j')) && l.contains(callee)
                }),
                "{compiler}: {func} does not call {callee} directly:\n{body}"
            );
            assert!(
                !body.contains("jmp\t*") && !body.contains("jmp *") && !body.contains("notrack"),
                "{compiler}: {func} branches indirectly:\n{body}"
            );
            // Exactly one comparison against the provider id.
            let id = format!("${}", fi_xpu_abi::FI_XPU_PROV_USER_BASE + 7);
            assert_eq!(
                body.matches(id.as_str()).count(),
                1,
                "{compiler}: {func}:\n{body}"
            );
        }
    }
}

/// Runs a device_scope program (tests/c/device_scope.h): every work item
/// of every scope issues its own operations, with its own arguments, on an
/// endpoint that talks to itself.
fn device_scope(prov: &str, fabric: Option<&str>) {
    let exe = build_c(
        &format!("device_scope_{prov}_{}", fabric.unwrap_or("direct")),
        &format!("device_scope_{prov}.c"),
        &[],
    );
    let mut cmd = Command::new(&exe);
    cmd.env("FI_XPU_PROVIDER", prov)
        .env("FI_XPU_LOG_LEVEL", "none")
        .env("FI_TCP_IFACE", "lo");
    if let Some(f) = fabric {
        cmd.env("FI_XPU_OFI_PROVIDER", f);
    }
    let child = common::memcheck::spawn(&mut cmd);
    let pid = child.id();
    let out = child.wait_with_output();
    // libfabric's shm provider leaves files named "<pid>:..." behind a
    // process that could not clean up.
    if let Ok(dir) = std::fs::read_dir("/dev/shm") {
        for e in dir.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{pid}:"))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(&format!("device_scope {prov}: ok")),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_work_item_issues_its_own_operation_shm() {
    device_scope("shm", None);
}

#[test]
fn every_work_item_issues_its_own_operation_ofi_over_tcp() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    device_scope("ofi", Some("tcp"));
}

#[test]
fn every_work_item_issues_its_own_operation_ofi_over_shm() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    device_scope("ofi", Some("shm"));
}

/// The checking mode: a group call one member never reaches is reported
/// (call, scope, group) and ends with -FI_ETIMEDOUT after a bounded wait;
/// without it the same program would hang.
#[test]
fn checking_mode_reports_a_member_that_never_arrives() {
    let exe = build_c(
        "device_scope_debug",
        "device_scope_debug.c",
        &[
            "-DFI_XPU_DEVICE_DEBUG",
            "-DFI_XPU_DEVICE_DEBUG_TIMEOUT_MS=1000",
        ],
    );
    let out = run_ok(
        Command::new("timeout")
            .arg("60")
            .arg(&exe)
            .env("FI_XPU_PROVIDER", "shm")
            .env("FI_XPU_LOG_LEVEL", "none"),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("device_scope_debug: ok"));
    let err = String::from_utf8_lossy(&out.stderr);
    // Members that gave up stop counting as arrived, so how many a report
    // names depends on the order they came in.
    let write = regex_free_count(
        &err,
        "fi_xpu: FI_XPU_DEVICE_DEBUG: fi_xpu_write at FI_XPU_WORK_GROUP scope: only ",
        " of the 4 members of the group (work group 1, subgroup ",
    );
    assert_eq!(write, 3, "{err}");
    let wait = "fi_xpu: FI_XPU_DEVICE_DEBUG: fi_xpu_cntr_wait at FI_XPU_SUBGROUP scope: \
                only 1 of the 2 members of the group (work group 1, subgroup 0) reached \
                the call within 1000 ms; this is work item 0 (rank 0); returning -FI_ETIMEDOUT";
    assert_eq!(err.matches(wait).count(), 1, "{err}");
    assert_eq!(err.matches("FI_XPU_DEVICE_DEBUG").count(), 4, "{err}");
}

/// Lines of `text` made of `head`, a count from 1 to 3, then `tail`.
fn regex_free_count(text: &str, head: &str, tail: &str) -> usize {
    text.lines()
        .filter(|l| {
            l.strip_prefix(head)
                .and_then(|r| r.split_once(tail))
                .is_some_and(|(n, _)| matches!(n, "1" | "2" | "3"))
        })
        .count()
}
