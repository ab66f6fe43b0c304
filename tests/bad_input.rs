//! The bad-input table of tests/c/bad_input.c, run against every provider
//! (the C test provider, shm, and ofi over libfabric's tcp): plainly, under
//! AddressSanitizer and under valgrind's memcheck. The same bad input gets
//! the same code from each. And the C-API fuzz driver (tests/c/capi_fuzz.c),
//! a bounded number of random calls with fixed seeds on each provider,
//! under AddressSanitizer and UBSan where the toolchain has them.
use crate::common;

use std::path::PathBuf;
use std::process::Command;

fn prepare(extra: &[&str], tag: &str) -> (PathBuf, PathBuf) {
    let dir = common::scratch(&format!("bad-input-{tag}"));
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    common::test_provider(&plugins, "libfi_xpu-test.so", &[]);
    let exe = dir.join("bad_input");
    common::cc(&[&common::root().join("tests/c/bad_input.c")], &exe, extra);
    (exe, plugins)
}

/// The environment that selects `prov`: the test provider from its scratch
/// directory, shm and ofi (over tcp on loopback) from beside libfi_xpu.so.
fn select(cmd: &mut Command, plugins: &PathBuf, prov: &str) {
    cmd.env("FI_XPU_PROVIDER", prov)
        .env("FI_XPU_LOG_LEVEL", "none");
    match prov {
        "test" => cmd.env("FI_XPU_PROVIDER_PATH", plugins),
        _ => cmd.env_remove("FI_XPU_PROVIDER_PATH"),
    };
    if prov == "ofi" {
        cmd.env("FI_XPU_OFI_PROVIDER", "tcp")
            .env("FI_TCP_IFACE", "lo");
    }
}

fn command(exe: &PathBuf, plugins: &PathBuf) -> Command {
    let mut cmd = Command::new(exe);
    cmd.arg("test");
    select(&mut cmd, plugins, "test");
    cmd
}

fn check(out: std::process::Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("all checks passed"), "{stdout}");
}

fn plain(prov: &str) {
    let (exe, plugins) = prepare(&[], &format!("plain-{prov}"));
    let mut cmd = Command::new(&exe);
    cmd.arg(prov);
    select(&mut cmd, &plugins, prov);
    check(common::run_ok(&mut cmd));
}

fn asan(prov: &str) {
    if !common::asan_works() {
        eprintln!("skipped: the C compiler cannot link with AddressSanitizer here");
        return;
    }
    let (exe, plugins) = prepare(
        &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"],
        &format!("asan-{prov}"),
    );
    let mut cmd = Command::new(&exe);
    cmd.arg(prov)
        .env("ASAN_OPTIONS", "detect_leaks=1")
        .env("UBSAN_OPTIONS", "halt_on_error=1");
    select(&mut cmd, &plugins, prov);
    check(common::run_ok(&mut cmd));
}

fn valgrind(prov: &str) {
    if !common::valgrind_usable() {
        return;
    }
    let (exe, plugins) = prepare(&[], &format!("valgrind-{prov}"));
    let mut vg = Command::new("valgrind");
    vg.args([
        "--error-exitcode=99",
        "--leak-check=full",
        "--errors-for-leak-kinds=definite",
        "-q",
    ])
    .arg(&exe)
    .arg(prov);
    select(&mut vg, &plugins, prov);
    check(common::run_ok(&mut vg));
}

#[test]
fn bad_input_table() {
    plain("test");
}

#[test]
fn bad_input_table_on_shm() {
    plain("shm");
}

#[test]
fn bad_input_table_on_ofi_over_tcp() {
    plain("ofi");
}

#[test]
fn bad_input_table_under_asan() {
    asan("test");
}

#[test]
fn bad_input_table_on_shm_under_asan() {
    asan("shm");
}

#[test]
fn bad_input_table_on_ofi_over_tcp_under_asan() {
    asan("ofi");
}

#[test]
fn bad_input_table_under_valgrind() {
    valgrind("test");
}

#[test]
fn bad_input_table_on_shm_under_valgrind() {
    valgrind("shm");
}

#[test]
fn log_lines_follow_fi_xpu_log_level() {
    let (exe, plugins) = prepare(&[], "log");
    let quiet = common::run_ok(&mut command(&exe, &plugins));
    assert!(
        quiet.stderr.is_empty(),
        "FI_XPU_LOG_LEVEL=none must be silent"
    );

    let loud = common::run_ok(command(&exe, &plugins).env("FI_XPU_LOG_LEVEL", "warn"));
    let stderr = String::from_utf8_lossy(&loud.stderr);
    // Every line carries pid, host and time (common::log_body checks them).
    let lines: Vec<String> = stderr
        .lines()
        .map(|l| common::log_body(l).unwrap_or_else(|| panic!("not a log line: {l}")))
        .collect();
    // The provider's own name labels what it logs; the core labels its own.
    assert!(
        lines
            .iter()
            .any(|l| l == "fi_xpu:test:warn: does not serve iface neuron"),
        "{stderr}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("fi_xpu:core:warn: struct fi_xpu_mem_ops: size 1")),
        "{stderr}"
    );
    assert!(!lines.iter().any(|l| l.contains(":debug:")), "{stderr}");

    let debug = common::run_ok(command(&exe, &plugins).env("FI_XPU_LOG_LEVEL", "debug"));
    let stderr = String::from_utf8_lossy(&debug.stderr);
    assert!(
        stderr.lines().count() > lines.len(),
        "debug adds lines:\n{stderr}"
    );
}

/// The misuse program (tests/c/misuse.c), built into a scratch directory
/// of its own, with the test provider beside it.
fn misuse_program(tag: &str) -> (PathBuf, PathBuf) {
    let dir = common::scratch(&format!("misuse-{tag}"));
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    common::test_provider(&plugins, "libfi_xpu-test.so", &[]);
    let exe = dir.join("misuse");
    common::cc(&[&common::root().join("tests/c/misuse.c")], &exe, &[]);
    (exe, plugins)
}

/// What one misuse case printed: its `name=value` lines and its log lines
/// (without pid, host and time).
struct Said {
    values: Vec<(String, String)>,
    log: Vec<String>,
    stderr: String,
}

impl Said {
    fn value(&self, name: &str) -> &str {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("the program printed no {name}"))
    }

    fn has(&self, line: &str) {
        assert!(
            self.log.iter().any(|l| l == line),
            "no log line\n  {line}\nin:\n{}",
            self.stderr
        );
    }
}

/// Runs `case` on `prov` (the test provider's directory searched first)
/// with `env` added; the program must pass its own checks.
fn misuse(tag: &str, prov: &str, case: &str, env: &[(&str, &str)]) -> Said {
    let (exe, plugins) = misuse_program(tag);
    let mut cmd = Command::new(&exe);
    cmd.args([prov, case])
        .env("FI_XPU_LOG_LEVEL", "warn")
        .env_remove("FI_XPU_PROVIDER")
        .env("FI_XPU_PROVIDER_PATH", &plugins)
        .env("FI_XPU_OFI_PROVIDER", "tcp")
        .env("FI_TCP_IFACE", "lo");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = common::run_ok(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if case != "discover" {
        assert!(
            stdout.contains("misuse: all checks passed"),
            "{stdout}\n{stderr}"
        );
    }
    Said {
        values: stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect(),
        log: stderr.lines().filter_map(common::log_body).collect(),
        stderr,
    }
}

#[test]
fn enable_without_a_cq_is_enocq_and_says_so() {
    let s = misuse("enable-nocq", "shm", "enable-nocq", &[]);
    s.has(&format!(
        "fi_xpu:core:warn: fi_xpu_enable: ep {}: no CQ bound (-FI_ENOCQ): bind one with FI_TRANSMIT and/or FI_RECV first",
        s.value("ep")
    ));
}

#[test]
fn enable_without_an_av_on_ofi_is_enoav_and_says_so() {
    let s = misuse("enable-noav", "ofi", "enable-noav", &[]);
    s.has(&format!(
        "fi_xpu:core:warn: fi_xpu_enable: ep {}: no AV bound (-FI_ENOAV): provider ofi addresses peers through it; bind one first",
        s.value("ep")
    ));
}

#[test]
fn a_write_asking_for_a_completion_with_no_cq_is_refused() {
    for prov in ["shm", "ofi"] {
        let s = misuse(&format!("write-nocq-{prov}"), prov, "write-nocq", &[]);
        s.has(&format!(
            "fi_xpu:core:warn: fi_xpu_prepare_wr: ep {}: FI_COMPLETION asked, but no CQ is bound with FI_TRANSMIT (-FI_ENOCQ)",
            s.value("ep")
        ));
    }
}

#[test]
fn an_attribute_of_another_size_is_refused_and_said() {
    let s = misuse("attr-size", "shm", "attr-size", &[]);
    s.has(&format!(
        "fi_xpu:core:warn: fi_xpu_domain: struct fi_xpu_domain_attr: .size is 3, this library's is {}: set it to sizeof(struct fi_xpu_domain_attr) (-FI_EINVAL)",
        s.value("sizeof")
    ));
}

#[test]
fn garbage_and_foreign_addresses_in_av_insert_are_said() {
    let s = misuse("av-insert", "shm", "av-insert", &[]);
    let av = s.value("av");
    for (what, code, name) in [
        ("garbage", "-22", "-FI_EINVAL (Invalid argument)"),
        ("foreign", "-22", "-FI_EINVAL (Invalid argument)"),
    ] {
        assert_eq!(s.value(what), code, "{what}");
        s.has(&format!(
            "fi_xpu:core:warn: fi_xpu_av_insert: av {av}: address 0 of 1 refused by provider shm: {name}: not an address this provider's fi_xpu_getname gave (garbage, or another provider's)"
        ));
    }
}

#[test]
fn close_says_what_still_holds_the_object() {
    let s = misuse("close-busy", "shm", "close-busy", &[]);
    s.has(&format!(
        "fi_xpu:core:warn: fi_xpu_close: cq {} still bound to 2 endpoints",
        s.value("cq")
    ));
    s.has(&format!(
        "fi_xpu:core:warn: fi_xpu_close: domain {} still in use by 5 objects (1 ctx, 1 av, 1 cq, 2 ep): close those first",
        s.value("dom")
    ));
}

#[test]
fn the_debug_level_logs_objects_bindings_and_registrations() {
    // Any case of the level's name.
    let s = misuse(
        "debug",
        "shm",
        "lifecycle",
        &[("FI_XPU_LOG_LEVEL", "DeBuG")],
    );
    let (ep, ctx, cq, av) = (s.value("ep"), s.value("ctx"), s.value("cq"), s.value("av"));
    s.has(&format!(
        "fi_xpu:core:debug: opened ep {ep} on ctx {ctx}, provider shm"
    ));
    s.has(&format!(
        "fi_xpu:core:debug: opened ctx {ctx}, provider shm"
    ));
    s.has(&format!(
        "fi_xpu:core:debug: bound cq {cq} to ep {ep} (flags {:#x})",
        (1u64 << 11) | (1 << 10)
    ));
    s.has(&format!("fi_xpu:core:debug: enabled ep {ep}"));
    s.has(&format!(
        "fi_xpu:core:debug: av {av}: inserted fi_addr {}",
        s.value("fi_addr")
    ));
    s.has(&format!(
        "fi_xpu:core:debug: mr {}: registered [{}, +0x1000) access {:#x} on domain {}",
        s.value("mr"),
        s.value("mem"),
        1u64 << 13,
        s.value("dom")
    ));
    s.has(&format!("fi_xpu:core:debug: closed ep {ep}"));
    // Nothing of this at the default level.
    let quiet = misuse("debug-quiet", "shm", "lifecycle", &[]);
    assert!(!quiet.stderr.contains(":debug:"), "{}", quiet.stderr);
}

#[test]
fn an_unknown_log_level_is_warned_about() {
    let s = misuse(
        "log-level",
        "shm",
        "discover",
        &[("FI_XPU_LOG_LEVEL", "loud")],
    );
    s.has(
        "fi_xpu:core:warn: FI_XPU_LOG_LEVEL=\"loud\" is not a level (none, warn, info or debug, in any case): logging warnings",
    );
    let s = misuse(
        "log-level-none",
        "shm",
        "discover",
        &[("FI_XPU_LOG_LEVEL", "NONE")],
    );
    assert!(s.stderr.is_empty(), "{}", s.stderr);
}

#[test]
fn a_provider_filter_that_matches_nothing_lists_what_exists() {
    let s = misuse(
        "filter",
        "shm",
        "discover",
        &[("FI_XPU_PROVIDER", "nosuch")],
    );
    assert_eq!(s.value("getinfo"), "-61", "FI_ENODATA");
    let line = s
        .log
        .iter()
        .find(|l| {
            l.starts_with(
                "fi_xpu:core:warn: FI_XPU_PROVIDER=\"nosuch\": no provider named nosuch; found: ",
            )
        })
        .unwrap_or_else(|| panic!("no warning in:\n{}", s.stderr));
    let found = line.rsplit("found: ").next().unwrap();
    let found: Vec<&str> = found.split(", ").collect();
    assert!(found.contains(&"test") && found.contains(&"shm"), "{line}");
    // A drop-list that drops everything found says so too.
    let s = misuse(
        "filter-all",
        "shm",
        "discover",
        &[("FI_XPU_PROVIDER", "^test,shm,ofi")],
    );
    assert_eq!(s.value("getinfo"), "-61", "FI_ENODATA");
    assert!(
        s.log.iter().any(|l| l.starts_with(
            "fi_xpu:core:warn: FI_XPU_PROVIDER=\"^test,shm,ofi\" leaves no provider; found: "
        )),
        "{}",
        s.stderr
    );
}

/// Seeds and calls of the C-API fuzz driver: fixed, so that a failure
/// reproduces; `FI_XPU_TEST_FUZZ_SEEDS` (`first..end`) and
/// `FI_XPU_TEST_FUZZ_CALLS` run it longer by hand.
fn fuzz_plan(default_calls: u32) -> (std::ops::Range<u64>, u32) {
    let seeds = std::env::var("FI_XPU_TEST_FUZZ_SEEDS")
        .ok()
        .and_then(|v| {
            let (a, b) = v.split_once("..")?;
            Some(a.parse().ok()?..b.parse().ok()?)
        })
        .unwrap_or(6..9);
    let calls = std::env::var("FI_XPU_TEST_FUZZ_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_calls);
    (seeds, calls)
}

fn capi_fuzz(prov: &str, default_calls: u32) {
    let dir = common::scratch(&format!("capi-fuzz-{prov}"));
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    common::test_provider(&plugins, "libfi_xpu-test.so", &[]);
    let exe = dir.join("capi_fuzz");
    let sanitize: &[&str] = if common::asan_works() {
        &["-fsanitize=address,undefined", "-fno-omit-frame-pointer"]
    } else {
        &[]
    };
    common::cc(
        &[&common::root().join("tests/c/capi_fuzz.c")],
        &exe,
        sanitize,
    );
    let (seeds, calls) = fuzz_plan(default_calls);
    for seed in seeds {
        let mut cmd = Command::new("timeout");
        cmd.arg("300")
            .arg(&exe)
            .args([prov, &seed.to_string(), &calls.to_string()])
            .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0");
        select(&mut cmd, &plugins, prov);
        let out = common::run_ok(&mut cmd);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.starts_with(&format!("capi_fuzz {prov}: {calls} calls, seed {seed}: ok")),
            "{stdout}"
        );
    }
}

#[test]
fn capi_fuzz_on_the_test_provider() {
    capi_fuzz("test", 20000);
}

#[test]
fn capi_fuzz_on_shm() {
    capi_fuzz("shm", 5000);
}

#[test]
fn capi_fuzz_on_ofi_over_tcp() {
    capi_fuzz("ofi", 5000);
}
