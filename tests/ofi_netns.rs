//! The ofi provider across a real network link: the two sides of the ops
//! test (tests/c/ofi_ops.c) run in two network namespaces joined by a veth
//! pair, over libfabric's tcp provider, and the link's byte counters must
//! show the traffic. Needs root and `ip`; skipped with a message otherwise.
//! Only the two addresses assigned here, inside the namespaces, are used.
use crate::common;

use common::netns::Netns;
use common::ofi::have_libfabric;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

#[test]
fn ops_across_veth_over_tcp() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping the ofi netns test");
        return;
    }
    if !common::have("ip") {
        eprintln!("`ip` (iproute2) is not installed: skipping the ofi netns test");
        return;
    }
    let net = match Netns::new("fxo") {
        Ok(n) => n,
        Err(e) => {
            eprintln!("cannot set up network namespaces ({e}): skipping the ofi netns test");
            return;
        }
    };
    let dir = common::scratch("ofi-netns");
    let exe = dir.join("ofi_ops");
    common::cc(&[&common::root().join("tests/c/ofi_ops.c")], &exe, &[]);
    let before = [net.bytes(0), net.bytes(1)];

    let (s0, s1) = UnixStream::pair().unwrap();
    let mut kids = Vec::new();
    for (rank, sock) in [s0, s1].into_iter().enumerate() {
        let fd = sock.as_raw_fd();
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &net.ns[rank], "timeout", "120"])
            .arg(&exe)
            .env("FI_XPU_PROVIDER", "ofi")
            .env("FI_XPU_OFI_PROVIDER", "tcp")
            .env("FI_TCP_IFACE", &net.dev[rank])
            // Refuse any other interface rather than fall back to it.
            .env("FI_XPU_OFI_DOMAIN", &net.dev[rank])
            .env("OFI_OPS_FD", "3")
            .env("OFI_OPS_RANK", rank.to_string());
        // SAFETY: dup2 and fcntl are async-signal-safe and touch only the
        // child's descriptor table. The descriptor at 3 ends up without
        // close-on-exec (dup2 onto itself would keep the flag, hence fcntl),
        // so the program inherits its end of the socket pair there.
        // Under memcheck when asked for (valgrind inside the namespace,
        // the descriptor passed on through it).
        let kid = common::memcheck::spawn_with(&mut cmd, |c| unsafe {
            c.pre_exec(move || {
                let r = if fd == 3 {
                    libc::fcntl(3, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, 3)
                };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        });
        kids.push(kid);
        drop(sock);
    }
    let outs: Vec<Output> = kids.into_iter().map(|k| k.wait_with_output()).collect();
    for (rank, o) in outs.iter().enumerate() {
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && stdout.contains(&format!("ofi_ops rank {rank}: ok")),
            "rank {rank} in {} failed with {}\n--- stdout\n{stdout}\n--- stderr\n{}",
            net.ns[rank],
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // The operations crossed the link: TCP's handshakes, libfabric's
    // connection messages and headers and the payloads come to about a
    // kilobyte each way; ARP alone is under 100 bytes.
    let after = [net.bytes(0), net.bytes(1)];
    for i in 0..2 {
        let rx = after[i].0 - before[i].0;
        let tx = after[i].1 - before[i].1;
        assert!(
            rx >= 500 && tx >= 500,
            "{} moved only rx {rx} / tx {tx} bytes",
            net.dev[i]
        );
        eprintln!("{}: rx {rx} bytes, tx {tx} bytes", net.dev[i]);
    }
}
