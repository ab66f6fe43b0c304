//! Which libfabric provider the ofi provider runs on: the default when
//! none is named (one that works, never `udp;ofi_rxd`, whose fetching
//! atomics crash inside libfabric 1.17), what `fi_xpu_info` shows of the
//! choice, and endpoints that are never enabled (closing one crashed
//! libfabric 1.17's `tcp;ofi_rxm`).
use crate::common;

use std::path::PathBuf;
use std::process::Command;

use common::ofi::have_libfabric;

/// Builds one of the C programs of tests/c.
fn program(name: &str) -> PathBuf {
    common::ofi::program(name, &[])
}

/// The directory a program runs in: libfabric writes crash dumps into the
/// working directory, which must not be the source tree.
fn scratch(name: &str) -> PathBuf {
    common::scratch(&format!("ofi-transport-{name}"))
}

/// A command with no libfabric provider named anywhere.
fn unnamed(exe: &std::path::Path) -> Command {
    let mut c = Command::new("timeout");
    c.current_dir(exe.parent().unwrap())
        .arg("120")
        .arg(exe)
        .env("FI_XPU_PROVIDER", "ofi")
        .env_remove("FI_XPU_OFI_PROVIDER")
        .env_remove("FI_PROVIDER")
        .env("FI_TCP_IFACE", "lo");
    c
}

/// With no provider named, the chosen one runs every operation of
/// tests/c/ofi_ops.c, fetching and compare atomics included.
#[test]
fn default_transport_runs_atomics() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let out = common::run_ok(unnamed(&program("ofi_ops")).env("FI_XPU_LOG_LEVEL", "info"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stdout.contains("ofi_ops: ok"), "{stdout}");
    assert!(!stderr.contains("ofi_rxd"), "{stderr}");
    assert!(
        stderr.contains("transport: libfabric provider ")
            && stderr.contains("the first of cxi, efa, verbs, opx, tcp, shm that works"),
        "{stderr}"
    );
}

#[test]
fn fi_xpu_info_shows_the_transport() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    common::build();
    let run = |named: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_fi_xpu_info"));
        c.current_dir(scratch("info"))
            .args(["-p", "ofi"])
            .env("FI_XPU_PROVIDER_PATH", common::lib_dir())
            .env_remove("FI_PROVIDER")
            .env("FI_TCP_IFACE", "lo");
        match named {
            Some(p) => c.env("FI_XPU_OFI_PROVIDER", p),
            None => c.env_remove("FI_XPU_OFI_PROVIDER"),
        };
        let o = common::run_ok(&mut c);
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let dflt = run(None);
    let line = dflt
        .lines()
        .find(|l| l.trim_start().starts_with("transport: "))
        .unwrap_or_else(|| panic!("no transport line in\n{dflt}"));
    assert!(
        line.contains("the first of cxi, efa, verbs, opx, tcp, shm that works"),
        "{line}"
    );
    assert!(!line.contains("ofi_rxd"), "{line}");
    let shm = run(Some("shm"));
    assert!(
        shm.contains("    transport: libfabric provider shm (shm), named 'shm'"),
        "{shm}"
    );
    // Named explicitly, udp;ofi_rxd is used, without the atomics that crash.
    let udp = run(Some("udp"));
    assert!(
        udp.contains("transport: libfabric provider udp;ofi_rxd") && udp.contains("no atomics"),
        "{udp}"
    );
}

fn never_enabled(fabric: &str) {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let exe = program("ofi_lifecycle");
    let out = common::run_ok(
        Command::new("timeout")
            .current_dir(exe.parent().unwrap())
            .arg("60")
            .arg(&exe)
            .env("FI_XPU_PROVIDER", "ofi")
            .env("FI_XPU_OFI_PROVIDER", fabric)
            .env("FI_TCP_IFACE", "lo"),
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("ofi_lifecycle: ok"));
}

#[test]
fn never_enabled_endpoint_over_tcp_rxm() {
    never_enabled("tcp;ofi_rxm");
}

#[test]
fn never_enabled_endpoint_over_shm() {
    never_enabled("shm");
}

/// Over libfabric's shm, what a process that died with an endpoint open
/// leaves in /dev/shm does not stop a later process of the same pid
/// (tests/c/ofi_shm_names.c "pid": the endpoints are named after the pid
/// and the process's start time, not the pid alone); and when `fi_enable`
/// does fail ("ours": files at this process's own names), it is
/// `-FI_EBUSY`, and the endpoint closes before the AV, so that everything
/// closes without a `fi_close failed`.
#[test]
fn shm_leftovers_of_a_dead_process() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let exe = program("ofi_shm_names");
    for mode in ["pid", "ours"] {
        let out = common::run_ok(
            Command::new("timeout")
                .current_dir(exe.parent().unwrap())
                .arg("60")
                .arg(&exe)
                .arg(mode)
                .env("FI_XPU_PROVIDER", "ofi")
                .env("FI_XPU_OFI_PROVIDER", "shm")
                .env("FI_XPU_LOG_LEVEL", "warn"),
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stdout.contains(&format!("ofi_shm_names {mode}: ok")),
            "{stdout}{stderr}"
        );
        assert!(!stderr.contains("fi_close failed"), "{mode}: {stderr}");
    }
}

/// An ofi domain open removes what libfabric's shm left in /dev/shm for
/// this user's endpoints whose process is gone: a pid no process can have
/// (above pid_max), and this process's pid with another start time (a
/// reused pid). This process's own name, another uid's, and libfabric's
/// default names stay. The info line says what was removed.
///
/// The domain is opened by `fi_xpu_info` under a uid of this run's own, so
/// that no other process's sweep (the other tests', another run's) takes
/// the files first; that needs root.
#[test]
fn stale_shm_files_are_swept_at_domain_open() {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: opening the domain under another uid needs root");
        return;
    }
    common::build();
    let me = std::process::id();
    let uid = 200_000 + me % 100_000;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let start = rest.split_whitespace().nth(19).unwrap().to_string();
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stale = [
        format!("fi_xpu-{}-{start}:{uid}:0", pid_max + 1),
        format!("fi_xpu-{me}-1:{uid}:0"),
    ];
    let kept = [
        format!("fi_xpu-{me}-{start}:{uid}:0"),
        // A uid no run of this test takes.
        format!("fi_xpu-{}-1:{}:0", pid_max + 1, uid + 100_000),
        format!("{}:{uid}:0", pid_max + 1),
    ];
    let shm = std::path::Path::new("/dev/shm");
    for n in stale.iter().chain(&kept) {
        let p = shm.join(n);
        std::fs::write(&p, b"left behind").unwrap();
        std::os::unix::fs::chown(&p, Some(uid), Some(uid)).unwrap();
    }
    let dir = scratch("sweep");
    std::os::unix::fs::chown(&dir, Some(uid), Some(uid)).unwrap();
    let out = {
        use std::os::unix::process::CommandExt;
        common::run_ok(
            Command::new(env!("CARGO_BIN_EXE_fi_xpu_info"))
                .current_dir(&dir)
                .uid(uid)
                .gid(uid)
                .args(["-p", "ofi"])
                .env("FI_XPU_PROVIDER_PATH", common::lib_dir())
                .env("FI_XPU_OFI_PROVIDER", "tcp")
                .env("FI_TCP_IFACE", "lo")
                .env("FI_XPU_LOG_LEVEL", "info"),
        )
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let left: Vec<bool> = stale.iter().map(|n| shm.join(n).exists()).collect();
    let still: Vec<bool> = kept.iter().map(|n| shm.join(n).exists()).collect();
    for n in stale.iter().chain(&kept) {
        let _ = std::fs::remove_file(shm.join(n));
    }
    assert_eq!(left, [false, false], "{stderr}");
    assert_eq!(still, [true, true, true], "{stderr}");
    for n in &stale {
        let line = format!("ofi:info: removed /dev/shm/{n}: left by a process that is gone");
        assert!(stderr.contains(&line), "{line}\n{stderr}");
    }
}
