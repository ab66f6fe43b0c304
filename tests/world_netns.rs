//! A world across two network namespaces standing in for two nodes, two
//! ranks in each (tests/c/world.c): pairs in the same namespace use shm,
//! pairs across use ofi over libfabric's tcp on a veth pair, and every
//! atomic goes through ofi. The routes each rank printed are checked pair
//! by pair, and the link's byte counters must show the cross traffic.
//! The MoE and allreduce examples (examples/moe) run across the same
//! set-up, one process per rank started in its namespace.
//! Needs root and `ip`; skipped with a message otherwise.
use crate::common;

use common::netns::Netns;
use std::path::Path;
use std::process::{Command, Output};

/// The namespaces, or None (with the reason printed) where they cannot be
/// made here.
fn namespaces(tag: &str) -> Option<Netns> {
    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: skipping the netns test");
        return None;
    }
    if !common::have("ip") {
        eprintln!("`ip` (iproute2) is not installed: skipping the netns test");
        return None;
    }
    match Netns::new(tag) {
        Ok(n) => Some(n),
        Err(e) => {
            eprintln!("cannot set up network namespaces ({e}): skipping the netns test");
            None
        }
    }
}

/// Runs `exe args` as 4 ranks, 0 and 1 in the first namespace, 2 and 3 in
/// the second, joined by the library's tcp bootstrap at rank 0 (`port`);
/// shm between ranks of one namespace, ofi over tcp across.
fn four_ranks(net: &Netns, exe: &Path, args: &[&str], port: u16) -> Vec<Output> {
    let addr = format!("{}:{port}", net.ip(0));
    let kids: Vec<_> = (0..4)
        .map(|rank| {
            let side = rank / 2;
            let mut cmd = Command::new("ip");
            cmd.args(["netns", "exec", &net.ns[side], "timeout", "120"])
                .arg(exe)
                .args(args)
                .current_dir(exe.parent().unwrap())
                .env("FI_XPU_PROVIDER", "shm,ofi")
                .env("FI_XPU_OFI_PROVIDER", "tcp")
                .env("FI_TCP_IFACE", &net.dev[side])
                .env("FI_XPU_OFI_DOMAIN", &net.dev[side])
                .env("FI_XPU_BOOTSTRAP_ADDR", &addr)
                .env("FI_XPU_BOOTSTRAP_RANK", rank.to_string())
                .env("FI_XPU_BOOTSTRAP_SIZE", "4")
                .env_remove("FI_XPU_WORLD_NODE");
            // Under memcheck when asked for (valgrind inside the namespace).
            common::memcheck::spawn(&mut cmd)
        })
        .collect();
    kids.into_iter().map(|k| k.wait_with_output()).collect()
}

/// Asserts that the link carried at least `min` bytes each way since
/// `before`.
fn link_moved(net: &Netns, before: [(u64, u64); 2], min: u64) {
    let after = [net.bytes(0), net.bytes(1)];
    for i in 0..2 {
        let rx = after[i].0 - before[i].0;
        let tx = after[i].1 - before[i].1;
        assert!(
            rx >= min && tx >= min,
            "{} moved only rx {rx} / tx {tx} bytes",
            net.dev[i]
        );
        eprintln!("{}: rx {rx} bytes, tx {tx} bytes", net.dev[i]);
    }
}

#[test]
fn two_namespaces_two_ranks_each() {
    let Some(net) = namespaces("fxw") else {
        return;
    };
    let exe = common::ofi::program("world", &[]);
    let before = [net.bytes(0), net.bytes(1)];
    let outs = four_ranks(&net, &exe, &["ops"], 47701);
    let texts: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .collect();
    for (rank, o) in outs.iter().enumerate() {
        assert!(
            o.status.success() && texts[rank].contains(&format!("world rank {rank} ops: ok")),
            "rank {rank} in {} failed with {}\n--- stdout\n{}\n--- stderr\n{}",
            net.ns[rank / 2],
            o.status,
            texts[rank],
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            texts[rank].contains(&format!("world rank {rank} of 4 on node {} of 2", rank / 2)),
            "{}",
            texts[rank]
        );
    }
    let mut pairs = 0;
    for (rank, t) in texts.iter().enumerate() {
        for p in 0..4 {
            let same = rank / 2 == p / 2;
            let want = format!(
                "world rank {rank} route {p} rma={} amo=ofi",
                if same { "shm" } else { "ofi" }
            );
            assert!(t.contains(&want), "missing `{want}` in\n{t}");
            pairs += 1;
        }
    }
    assert_eq!(pairs, 16);
    // The cross pairs' writes, reads, atomics and barriers went over the
    // link: many kilobytes each way (ARP alone is under 100 bytes).
    link_moved(&net, before, 4096);
}

/// Builds examples/moe/`name`.c once into a scratch directory.
fn example(name: &str) -> std::path::PathBuf {
    let exe = common::scratch(&format!("netns-{name}")).join(name);
    common::cc(
        &[&common::root().join(format!("examples/moe/{name}.c"))],
        &exe,
        &["-O2"],
    );
    exe
}

/// Panics with every rank's output unless each exited 0 and rank 0
/// printed every one of `wants`.
fn examples_ok(what: &str, outs: &[Output], wants: &[&str]) {
    let text0 = String::from_utf8_lossy(&outs[0].stdout);
    let ok = outs.iter().all(|o| o.status.success()) && wants.iter().all(|w| text0.contains(w));
    if !ok {
        let mut msg = String::new();
        for (r, o) in outs.iter().enumerate() {
            msg += &format!(
                "--- rank {r}: {}\n{}{}",
                o.status,
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        panic!("{what} across two namespaces failed\n{msg}");
    }
}

/// MoE dispatch and combine (BF16 and FP8 tokens of 7168 elements, every
/// byte checked on every rank) with two ranks on each of two "nodes".
#[test]
fn moe_across_two_namespaces() {
    let Some(net) = namespaces("fxm") else {
        return;
    };
    let exe = example("moe");
    for (port, fp8) in [(47711, false), (47712, true)] {
        let before = [net.bytes(0), net.bytes(1)];
        let mut args = vec![
            "-p", "shm,ofi", "-f", "tcp", "-n", "4", "-T", "8", "-i", "1",
        ];
        if fp8 {
            args.push("-8");
        }
        let outs = four_ranks(&net, &exe, &args, port);
        let dtype = if fp8 { "fp8" } else { "bf16" };
        examples_ok(
            "moe",
            &outs,
            &[&format!(
                "moe n=4 prov=shm,ofi/tcp dtype={dtype} T=8 H=7168 E=4 K=3: ok"
            )],
        );
        // Tokens of 7168 elements cross the link both ways.
        link_moved(&net, before, 7168);
    }
}

/// The ring allreduce: every step's put crosses the link twice per ring.
#[test]
fn allreduce_across_two_namespaces() {
    let Some(net) = namespaces("fxr") else {
        return;
    };
    let exe = example("allreduce");
    let before = [net.bytes(0), net.bytes(1)];
    let outs = four_ranks(
        &net,
        &exe,
        &[
            "-p", "shm,ofi", "-f", "tcp", "-n", "4", "-c", "65537", "-i", "2",
        ],
        47721,
    );
    examples_ok(
        "allreduce",
        &outs,
        &["allreduce n=4 prov=shm,ofi/tcp floats=65537: ok"],
    );
    link_moved(&net, before, 65536);
}
