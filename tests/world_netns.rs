//! A world across two network namespaces standing in for two nodes, two
//! ranks in each (tests/c/world.c): pairs in the same namespace use shm,
//! pairs across use ofi over libfabric's tcp on a veth pair, and every
//! atomic goes through ofi. The routes each rank printed are checked pair
//! by pair, and the link's byte counters must show the cross traffic.
//! Needs root and `ip`; skipped with a message otherwise.
mod common;

use common::netns::Netns;
use std::process::{Command, Output, Stdio};

#[test]
fn two_namespaces_two_ranks_each() {
    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: skipping the world netns test");
        return;
    }
    if !common::have("ip") {
        eprintln!("`ip` (iproute2) is not installed: skipping the world netns test");
        return;
    }
    let net = match Netns::new("fxw") {
        Ok(n) => n,
        Err(e) => {
            eprintln!("cannot set up network namespaces ({e}): skipping the world netns test");
            return;
        }
    };
    let exe = common::ofi::program("world", &[]);
    let before = [net.bytes(0), net.bytes(1)];
    // Rank 0 listens on side 0's address; ranks 0, 1 on side 0, 2, 3 on side 1.
    let addr = format!("{}:47701", net.ip(0));
    let kids: Vec<_> = (0..4)
        .map(|rank| {
            let side = rank / 2;
            Command::new("ip")
                .args(["netns", "exec", &net.ns[side], "timeout", "120"])
                .arg(&exe)
                .arg("ops")
                .current_dir(exe.parent().unwrap())
                .env("FI_XPU_PROVIDER", "shm,ofi")
                .env("FI_XPU_OFI_PROVIDER", "tcp")
                .env("FI_TCP_IFACE", &net.dev[side])
                .env("FI_XPU_OFI_DOMAIN", &net.dev[side])
                .env("FI_XPU_BOOTSTRAP_ADDR", &addr)
                .env("FI_XPU_BOOTSTRAP_RANK", rank.to_string())
                .env("FI_XPU_BOOTSTRAP_SIZE", "4")
                .env_remove("FI_XPU_WORLD_NODE")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start a rank")
        })
        .collect();
    let outs: Vec<Output> = kids
        .into_iter()
        .map(|k| k.wait_with_output().unwrap())
        .collect();
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
    let after = [net.bytes(0), net.bytes(1)];
    for i in 0..2 {
        let rx = after[i].0 - before[i].0;
        let tx = after[i].1 - before[i].1;
        assert!(
            rx >= 4096 && tx >= 4096,
            "{} moved only rx {rx} / tx {tx} bytes",
            net.dev[i]
        );
        eprintln!("{}: rx {rx} bytes, tx {tx} bytes", net.dev[i]);
    }
}
