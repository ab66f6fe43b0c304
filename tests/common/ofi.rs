//! Helpers of the ofi provider's tests: whether libfabric is there, running
//! a multi-process C program of tests/c over one libfabric provider, and
//! removing what libfabric's shm provider leaves behind for processes that
//! could not clean up.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

pub fn have_libfabric() -> bool {
    Command::new("pkg-config")
        .args(["--exists", "libfabric"])
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `test` with the environment of the ofi provider over `fabric`
/// (`over`), or says that `what` is skipped when libfabric is not
/// installed.
/// Runs `tests/c/<name>.c` (built plain) with `env` and no arguments, for
/// at most 240 s: its output, once it said it passed.
pub fn run_program(name: &str, env: &[(&'static str, String)]) -> String {
    run_ok(&program(name, &[]), &[], env, 240, name)
}

/// The environment of a test program run on fi_xpu's shm provider (with
/// libfabric's shm under the C side's host objects where it opens any),
/// plus `extra`.
pub fn shm_env(extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("FI_XPU_PROVIDER", "shm".into()),
        ("OFI_COMMON_PROV", "shm".into()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    env
}

pub fn on_fabric(what: &str, fabric: &str, test: impl FnOnce(Vec<(&'static str, String)>)) {
    if !have_libfabric() {
        eprintln!("libfabric is not installed: skipping {what} over ofi/{fabric}");
        return;
    }
    test(over(fabric));
}

/// Removes the files libfabric's shm provider leaves in /dev/shm for
/// processes that could not clean up (killed, or failed): `<pid>:...`.
pub struct ShmLeftovers(pub Vec<u32>);

impl Drop for ShmLeftovers {
    fn drop(&mut self) {
        let Ok(dir) = std::fs::read_dir("/dev/shm") else {
            return;
        };
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if self.0.iter().any(|p| name.starts_with(&format!("{p}:"))) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// The pids a program printed on a line `<prefix> pids P1 P2 ...`.
pub fn pids(stdout: &str, prefix: &str) -> Vec<u32> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{prefix} pids ")))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Builds tests/c/`name`.c into a scratch directory of its own, once per
/// test binary (the tests of one binary run in parallel and share it).
pub fn program(name: &str, extra: &[&str]) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let key = format!("{name} {extra:?}");
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(k, _)| *k == key) {
        return p.clone();
    }
    let exe = super::scratch(&format!("ofi-{name}-{}", built.len())).join(name);
    super::cc(
        &[&super::root().join(format!("tests/c/{name}.c"))],
        &exe,
        extra,
    );
    built.push((key, exe.clone()));
    exe
}

/// The environment that runs a program on the ofi provider over
/// libfabric's `fabric`.
pub fn over(fabric: &str) -> Vec<(&'static str, String)> {
    vec![
        ("FI_XPU_PROVIDER", "ofi".into()),
        ("FI_XPU_OFI_PROVIDER", fabric.into()),
        ("FI_TCP_IFACE", "lo".into()),
    ]
}

/// Runs `exe` with `args` and `env`, in the program's own directory
/// (libfabric writes crash dumps into the working directory), within
/// `limit_s` seconds; returns its output, whatever the status, after
/// removing what the processes named on the `<prefix> pids` line left in
/// /dev/shm.
pub fn run(
    exe: &Path,
    args: &[&str],
    env: &[(&'static str, String)],
    limit_s: u32,
    prefix: &str,
) -> Output {
    let out = super::run(
        Command::new("timeout")
            .current_dir(exe.parent().unwrap())
            .arg(limit_s.to_string())
            .arg(exe)
            .args(args)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str()))),
    );
    drop(ShmLeftovers(pids(
        &String::from_utf8_lossy(&out.stdout),
        prefix,
    )));
    out
}

/// As `run`, and panics with the output unless it exited 0 and printed
/// `<prefix>: ok` (or `<prefix> <first arg>: ok`).
pub fn run_ok(
    exe: &Path,
    args: &[&str],
    env: &[(&'static str, String)],
    limit_s: u32,
    prefix: &str,
) -> String {
    let out = run(exe, args, env, limit_s, prefix);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let ok = match args.first() {
        Some(a) => format!("{prefix} {a}: ok"),
        None => format!("{prefix}: ok"),
    };
    assert!(
        out.status.success() && stdout.contains(&ok),
        "{} {args:?} {env:?} failed with {}\n--- stdout\n{stdout}\n--- stderr\n{}",
        exe.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
