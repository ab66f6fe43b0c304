//! Every C test program under valgrind's memcheck, on request:
//! `FI_XPU_TEST_VALGRIND=1 cargo test ...` (or `cargo xtask valgrind`).
//! A program the tests run through `common::run` (and the ofi helpers) that
//! was compiled into the target's scratch directories, without
//! AddressSanitizer or ThreadSanitizer, runs as `valgrind <program>`, its children traced
//! (fork and exec), each process logging to its own file; after the run
//! every log is read and the test fails on any memcheck error, showing the
//! log. A `timeout N` in front of the program gets N times
//! `FI_XPU_TEST_VALGRIND_SLOWDOWN` (default 10), and the program sees the
//! factor in `FI_XPU_TEST_SLOWDOWN` to scale the limits it keeps itself.
//! Programs started inside a network namespace (`ip netns exec NS ...`)
//! run under valgrind inside it. Leaks are not errors here (test programs
//! exit without freeing); the suppressions in `tests/valgrind.supp` cover
//! libc and libfabric internals only.
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

/// Whether the run asked for memcheck.
pub fn requested() -> bool {
    std::env::var_os("FI_XPU_TEST_VALGRIND").is_some_and(|v| !v.is_empty() && v != "0")
}

/// How many times slower a program runs under memcheck than on its own:
/// 1 when memcheck was not asked for. Time limits of programs the tests
/// run scale by it.
pub fn slowdown() -> u32 {
    if requested() {
        factor()
    } else {
        1
    }
}

/// FI_XPU_TEST_VALGRIND_SLOWDOWN, default 10.
fn factor() -> u32 {
    std::env::var("FI_XPU_TEST_VALGRIND_SLOWDOWN")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(10)
}

/// A test program of ours: built into the target's temporary directory,
/// and not linked with a sanitizer runtime. AddressSanitizer and
/// ThreadSanitizer both reserve terabytes of shadow memory at fixed
/// addresses, which valgrind cannot give them: under memcheck such a
/// program is killed or never starts (device_host's ThreadSanitizer run
/// was SIGKILLed), and they check the same things anyway.
fn is_test_program(p: &Path) -> bool {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    if !p.starts_with(tmp) {
        return false;
    }
    const SANITIZERS: [&[u8]; 2] = [b"libasan.so", b"libtsan.so"];
    match std::fs::read(p) {
        Ok(bytes) => !SANITIZERS
            .iter()
            .any(|lib| bytes.windows(lib.len()).any(|w| w == *lib)),
        Err(_) => false,
    }
}

/// `cmd` rewritten to run its test program under memcheck, and the
/// directory its logs go to; `None` when memcheck was not asked for or
/// the command runs no test program.
fn wrap(cmd: &Command, force: bool) -> Option<(Command, PathBuf)> {
    if !force && !requested() {
        return None;
    }
    let mut words: Vec<OsString> = std::iter::once(cmd.get_program().to_owned())
        .chain(cmd.get_args().map(|a| a.to_owned()))
        .collect();
    let named = |w: &[OsString], name: &str| {
        w.first()
            .is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == name))
    };
    // `[ip netns exec NAME] [timeout N] program args...`: the namespace and
    // the (scaled) time limit stay in front of valgrind.
    let mut prefix: Vec<OsString> = Vec::new();
    let is = |w: &[OsString], i: usize, word: &str| w.get(i).is_some_and(|a| a == word);
    if named(&words, "ip") && is(&words, 1, "netns") && is(&words, 2, "exec") {
        words.get(4)?;
        prefix.extend(words.drain(..4));
    }
    if named(&words, "timeout") {
        let i = words
            .iter()
            .position(|a| a.to_str().is_some_and(|s| s.parse::<u64>().is_ok()))?;
        let n: u64 = words[i].to_str()?.parse().ok()?;
        prefix.extend(words.drain(..i));
        words.remove(0);
        prefix.push((n * u64::from(factor())).to_string().into());
    }
    if words.is_empty() {
        return None;
    }
    let exe = PathBuf::from(words.remove(0));
    let rest = words;
    if !is_test_program(&exe) {
        return None;
    }
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let logs = super::scratch(&format!(
        "memcheck-{}",
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let supp = super::root().join("tests/valgrind.supp");
    let vg = [
        "valgrind".into(),
        "--tool=memcheck".into(),
        "--trace-children=yes".into(),
        // System tools a program starts (sh, ip, timeout) are not ours.
        "--trace-children-skip=/usr/*,/bin/*,/sbin/*".into(),
        // close_in_use: the default lock starves a closing thread.
        "--fair-sched=yes".into(),
        "--num-callers=30".into(),
        format!("--suppressions={}", supp.display()).into(),
        format!("--log-file={}/vg.%p", logs.display()).into(),
    ];
    prefix.extend(vg);
    prefix.push(exe.into_os_string());
    prefix.extend(rest);
    let mut out = Command::new(&prefix[0]);
    out.args(&prefix[1..]);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => out.env(k, v),
            None => out.env_remove(k),
        };
    }
    // Limits the program keeps itself (completion waits, alarms) scale too.
    out.env("FI_XPU_TEST_SLOWDOWN", factor().to_string());
    if let Some(d) = cmd.get_current_dir() {
        out.current_dir(d);
    }
    Some((out, logs))
}

/// The memcheck errors in the logs of one run: (log, text) of each process
/// that reported any.
fn errors(logs: &Path) -> Vec<(PathBuf, String)> {
    let mut bad = Vec::new();
    for e in std::fs::read_dir(logs).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let n = text
            .lines()
            .filter_map(|l| l.split("ERROR SUMMARY: ").nth(1))
            .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        if n > 0 {
            bad.push((e.path(), text));
        }
    }
    bad
}

/// Panics with the logs of every process of the run `what` that reported
/// memcheck errors.
fn check(what: &Command, logs: &Path) {
    let bad = errors(logs);
    if !bad.is_empty() {
        let mut msg = format!("memcheck found errors in {what:?}:\n");
        for (p, t) in &bad {
            msg.push_str(&format!("--- {}\n", p.display()));
            msg.extend(t.lines().take(200).map(|l| format!("{l}\n")));
        }
        panic!("{msg}");
    }
}

/// Runs `cmd` under memcheck when asked for and it runs a test program;
/// `None` otherwise. Panics on memcheck errors.
pub fn run(cmd: &Command) -> Option<Output> {
    run_with(cmd, false)
}

/// As `run`, whether asked for or not (the suite's own memcheck tests).
pub fn run_with(cmd: &Command, force: bool) -> Option<Output> {
    let (mut vg, logs) = wrap(cmd, force)?;
    let out = vg
        .output()
        .unwrap_or_else(|e| panic!("cannot run {vg:?}: {e}"));
    check(&vg, &logs);
    Some(out)
}

/// A program started by `spawn`, and the memcheck run it is part of.
pub struct Child {
    child: std::process::Child,
    vg: Option<(Command, PathBuf)>,
}

/// Starts `cmd` with its stdout and stderr piped, under memcheck when
/// asked for and it runs a test program (as `run` does), for the tests
/// that run several processes at once (a world's ranks).
pub fn spawn(cmd: &mut Command) -> Child {
    spawn_with(cmd, |_| {})
}

/// As `spawn`, with `setup` applied to the command that is started (the
/// valgrind one under memcheck): what `Command` cannot copy, such as a
/// `pre_exec` hook, goes there.
pub fn spawn_with(cmd: &mut Command, setup: impl FnOnce(&mut Command)) -> Child {
    use std::process::Stdio;
    let mut vg = wrap(cmd, false);
    let run = match vg.as_mut() {
        Some((w, _)) => w,
        None => cmd,
    };
    setup(run);
    let c = run.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    Child {
        child: c.unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}")),
        vg,
    }
}

impl Child {
    /// The process id (valgrind runs the program in its own process, so
    /// this is the program's id either way).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the program and returns its output; panics on memcheck
    /// errors.
    pub fn wait_with_output(self) -> Output {
        let out = self.child.wait_with_output().unwrap();
        if let Some((vg, logs)) = &self.vg {
            check(vg, logs);
        }
        out
    }
}
