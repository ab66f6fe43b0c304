//! The shm provider between real processes: the C programs in tests/c fork
//! their peers, run every device operation on the host XPU and check the
//! results against values they compute themselves.
use crate::common;

use std::path::PathBuf;
use std::process::Command;

/// Compiles `src` into a scratch directory of its own: tests run in
/// parallel, and `scratch` empties the directory it hands out.
fn program(src: &str, test: &str) -> PathBuf {
    let dir = common::scratch(&format!("shm-{test}"));
    let out = dir.join("prog");
    common::cc(&[&common::root().join(src)], &out, &[]);
    out
}

fn run(prog: &PathBuf, args: &[&str]) -> String {
    let o = common::run_ok(
        Command::new(prog)
            .args(args)
            .env("FI_XPU_PROVIDER", "shm")
            .env("FI_XPU_LOG_LEVEL", "none"),
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn hello_example_runs() {
    let p = program("examples/hello.c", "hello");
    let out = run(&p, &[]);
    assert!(out.contains("hello: ok"), "{out}");
    assert!(out.contains("cq data 0x2a"), "{out}");
    assert!(out.contains("atomic counter in my heap: 1"), "{out}");
    assert!(out.contains("received from fi_addr 0 ("), "{out}");
    assert!(out.contains("bytes): \"a message from pid"), "{out}");
}

/// On `FI_HMEM_SYSTEM` contexts, what kernels write into a peer is
/// written at system scope (fi_xpu_shm(7), MEMORY PLACEMENT).
#[test]
fn host_memory_peers_get_system_scope() {
    let p = program("examples/hello.c", "hello-scope");
    let o = common::run_ok(
        Command::new(&p)
            .env("FI_XPU_PROVIDER", "shm")
            .env("FI_XPU_LOG_LEVEL", "debug"),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    let lookups: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("fi_xpu_av_lookup: peer"))
        .collect();
    assert!(!lookups.is_empty(), "{err}");
    assert!(
        lookups
            .iter()
            .all(|l| l.contains("is not on this context's device: system scope")),
        "{err}"
    );
}

#[test]
fn pingpong_example_prints_its_table() {
    let p = program("examples/pingpong.c", "pingpong");
    let out = run(&p, &["-n", "50", "-S", "65536"]);
    let rows: Vec<&str> = out.lines().collect();
    assert!(rows[0].starts_with("bytes"), "{out}");
    let sizes: Vec<&str> = rows[1..]
        .iter()
        .map(|r| r.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(sizes, ["1", "8", "64", "512", "4096", "65536"], "{out}");
}

#[test]
fn every_operation_two_processes_every_format() {
    let p = program("tests/c/shm_ops.c", "ops2");
    for format in 1..=4 {
        let out = run(&p, &["2", &format.to_string()]);
        assert!(
            out.contains(&format!("shm_ops n=2 format={format}: ok")),
            "{out}"
        );
    }
}

#[test]
fn every_operation_four_processes() {
    let p = program("tests/c/shm_ops.c", "ops4");
    for format in [1, 4] {
        let out = run(&p, &["4", &format.to_string()]);
        assert!(
            out.contains(&format!("shm_ops n=4 format={format}: ok")),
            "{out}"
        );
    }
}

#[test]
fn refusals_and_a_peer_that_dies() {
    let p = program("tests/c/shm_peer.c", "peer");
    let out = run(&p, &[]);
    assert!(out.contains("shm_peer: ok"), "{out}");
}

#[test]
fn device_header_compiles_as_cxx17() {
    if !common::have("c++") {
        return;
    }
    let dir = common::scratch("shm-cxx");
    let src = dir.join("t.cpp");
    std::fs::write(
        &src,
        "#include <fi_xpu/device.h>\n\
         int post(struct fid_xpu_ep *ep, void *a) {\n\
         return fi_xpu_write(ep, a, 8, nullptr, 0, a, 0, 0, nullptr, 0, FI_XPU_WORK_GROUP);\n}\n",
    )
    .unwrap();
    let o = Command::new("c++")
        .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-c"])
        .arg(format!("-I{}", common::root().display()))
        .arg(format!("-I{}", common::root().join("include").display()))
        .arg(&src)
        .arg("-o")
        .arg(dir.join("t.o"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn large_unregistered_directed_and_overrun_two_and_four_processes() {
    let p = program("tests/c/shm_msg.c", "msg");
    for n in ["2", "4"] {
        let out = run(&p, &[n]);
        assert!(out.contains(&format!("shm_msg n={n}: ok")), "{out}");
    }
}

#[test]
fn more_peers_over_a_domain_life_than_connections() {
    let p = program("tests/c/shm_conn.c", "conn");
    let out = run(&p, &[]);
    assert!(out.contains("shm_conn: ok"), "{out}");
}

#[test]
fn silent_connections_and_forged_regions() {
    let p = program("tests/c/shm_control.c", "control");
    let out = run(&p, &[]);
    assert!(out.contains("shm_control: ok"), "{out}");
    eprintln!("{}", out.lines().next().unwrap_or(""));
}

#[test]
fn a_put_after_the_peer_closes_or_renews_its_registration_is_refused() {
    let p = program("tests/c/shm_revoke.c", "revoke");
    let out = run(&p, &[]);
    assert!(out.contains("shm_revoke: ok"), "{out}");
}

#[test]
fn peers_map_the_registration_table_read_only() {
    let p = program("tests/c/shm_readonly.c", "readonly");
    let out = run(&p, &[]);
    assert!(out.contains("shm_readonly: ok"), "{out}");
}

#[test]
fn a_hostile_peer_leaves_the_victim_whole() {
    let p = program("tests/c/shm_hostile.c", "hostile");
    let out = run(&p, &[]);
    assert!(out.contains("shm_hostile: ok"), "{out}");
    eprintln!("{}", out.lines().next().unwrap_or(""));
}

#[test]
fn a_peer_cannot_claim_another_peers_source() {
    let p = program("tests/c/shm_source.c", "source");
    let out = run(&p, &[]);
    assert!(out.contains("0 attributed to A"), "{out}");
    assert!(out.contains("shm_source: ok"), "{out}");
}

/// A peer alters another's messages in the victim's inbox: tag, bytes,
/// length. None is received as the honest peer's message.
#[test]
fn a_peer_cannot_alter_messages_in_flight() {
    let p = program("tests/c/shm_source.c", "source");
    let out = run(&p, &["tamper"]);
    assert!(out.contains("shm_source: ok"), "{out}");
}

#[test]
fn crashed_peers_release_their_memory() {
    let p = program("tests/c/shm_departed.c", "departed");
    let out = run(&p, &[]);
    assert!(out.contains("shm_departed: ok"), "{out}");
    eprintln!("{}", out.lines().next().unwrap_or(""));
}

/// Counters bound only for local events are out of peers' reach: their
/// words survive a peer rewriting the whole heap; counters bound for
/// remote events count local and remote events, and read back what was set.
#[test]
fn a_peer_cannot_rewrite_counters_it_was_not_granted() {
    let p = program("tests/c/shm_cntr.c", "cntr");
    let out = run(&p, &[]);
    assert!(out.contains("shm_cntr: ok"), "{out}");
}

/// A peer in another pid namespace (same uid and network namespace, as
/// containers of one pod) gets no pid from `SO_PEERCRED`, and shm ties a
/// peer's connections together by pid: both ways, `fi_xpu_av_insert` is
/// refused with `-FI_EOPNOTSUPP` and a log line saying why
/// (tests/c/shm_pidns.c, one process under `unshare --pid --fork`).
#[test]
fn a_peer_in_another_pid_namespace_is_refused_with_a_reason() {
    let works = Command::new("unshare")
        .args(["--pid", "--fork", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !works {
        eprintln!(
            "skipped: `unshare --pid --fork` is not available here (needs root or user namespaces)"
        );
        return;
    }
    let p = program("tests/c/shm_pidns.c", "pidns");
    let dir = p.parent().unwrap().to_path_buf();
    let spawn = |role: &str, pidns: bool| {
        let mut c = if pidns {
            let mut c = Command::new("unshare");
            c.args(["--pid", "--fork"]).arg(&p);
            c
        } else {
            Command::new(&p)
        };
        c.args([role, dir.to_str().unwrap()])
            .env("FI_XPU_PROVIDER", "shm")
            .env("FI_XPU_LOG_LEVEL", "warn")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("a", false), spawn("b", true));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    for (role, o) in [("a", &a), ("b", &b)] {
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{role}: {}\n{out}{err}", o.status);
        assert_eq!(out, format!("shm_pidns {role}: av_insert = -95\n"), "{err}");
    }
    let b_err = String::from_utf8_lossy(&b.stderr);
    assert!(
        b_err.contains("the peer runs in another pid namespace"),
        "the namespaced side says why: {b_err}"
    );
    let a_err = String::from_utf8_lossy(&a.stderr);
    assert!(
        a_err.contains("refused the connection: ") && a_err.contains("Operation not supported"),
        "the other side hears the refusal: {a_err}"
    );
}
