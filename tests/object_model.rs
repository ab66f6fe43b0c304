//! Drives `tests/c/object_model.c`: the whole host object model through the
//! C API and the C test provider plugin, plainly and under AddressSanitizer.
use crate::common;
use crate::plugins;

use std::path::Path;
use std::process::Command;

/// The C program expects this name and prov_id.
const PROV: &str = "objtest";
const PROV_ID: u32 = 150;

fn run(asan: bool) {
    let tag = if asan {
        "object-model-asan"
    } else {
        "object-model"
    };
    let dir = common::scratch(tag);
    plugins::chmod(&dir, 0o755);
    let san: &[&str] = if asan {
        &["-fsanitize=address", "-fno-omit-frame-pointer"]
    } else {
        &[]
    };
    let mut defines = plugins::named(PROV, PROV_ID);
    defines.extend(san.iter().map(|s| s.to_string()));
    plugins::build_plugin(&dir, PROV, &defines);

    let exe = dir.join("object_model");
    let src = common::root().join("tests/c/object_model.c");
    let include = format!("-I{}", common::root().join("tests/plugins").display());
    let mut extra = vec![include.as_str()];
    extra.extend(san);
    common::cc(&[Path::new(&src)], &exe, &extra);

    let mut cmd = Command::new(&exe);
    cmd.env("FI_XPU_PROVIDER_PATH", &dir)
        // Only this plugin: the in-tree ones beside libfi_xpu.so stay closed.
        .env("FI_XPU_PROVIDER", PROV)
        .env_remove("FI_XPU_LOG_LEVEL");
    if asan {
        cmd.env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0");
    }
    let out = common::run_ok(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stdout, "object_model: ok\n", "stderr:\n{stderr}");
    // Nothing logged but the misuse the program makes on purpose (an
    // endpoint enabled with no CQ, objects closed while in use): in
    // particular no context closed with the provider's device state still
    // allocated.
    let on_purpose = |l: &str| {
        common::log_body(l).is_some_and(|b| {
            b.starts_with("fi_xpu:core:warn: fi_xpu_enable: ") && b.contains("(-FI_ENOCQ)")
                || b.starts_with("fi_xpu:core:warn: fi_xpu_close: ") && b.contains(" still ")
        })
    };
    assert!(
        stderr.lines().all(on_purpose),
        "unexpected log output:\n{stderr}"
    );
}

#[test]
fn object_model() {
    run(false);
}

/// Builds tests/c/`program`.c and the test plugin (with `defines` besides
/// its name) into a scratch directory `tag`, runs the program with `args`
/// on that plugin alone, and returns its standard output and error.
fn run_fork_program(
    tag: &str,
    program: &str,
    args: &[&str],
    defines: &[String],
) -> (String, String) {
    let dir = common::scratch(tag);
    plugins::chmod(&dir, 0o755);
    let mut all = plugins::named(PROV, PROV_ID);
    all.extend_from_slice(defines);
    plugins::build_plugin(&dir, PROV, &all);
    let exe = dir.join(program);
    let src = common::root().join(format!("tests/c/{program}.c"));
    common::cc(&[Path::new(&src)], &exe, &[]);
    let out = common::run_ok(
        Command::new(&exe)
            .args(args)
            .env("FI_XPU_PROVIDER_PATH", &dir)
            .env("FI_XPU_PROVIDER", PROV)
            .env_remove("FI_XPU_LOG_LEVEL"),
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A forked child starts with none of the library's process-wide locks
/// held, even when another thread of the parent was inside a call that
/// holds one as it forked (tests/c/fork_objects.c, 300 forks).
#[test]
fn fork_while_another_thread_opens_and_closes_objects() {
    let (stdout, stderr) = run_fork_program("fork-objects", "fork_objects", &["300"], &[]);
    assert_eq!(stdout, "fork_objects: ok\n", "stderr:\n{stderr}");
}

/// A child forked while another thread of its parent makes the process's
/// first call (which loads the plugins) loads them itself, instead of
/// waiting for ever for a load its parent's thread was making
/// (tests/c/fork_first_call.c: 200 fresh processes, forking until their
/// first call returns).
#[test]
fn fork_while_another_thread_loads_the_providers() {
    let (stdout, stderr) =
        run_fork_program("fork-first-call", "fork_first_call", &["200", "5"], &[]);
    assert_eq!(stdout, "fork_first_call: ok\n", "stderr:\n{stderr}");
}

/// Forks 100 ms after another thread started the process's first call,
/// while that thread is inside the `dlopen` of a plugin whose constructor
/// sleeps `ctor_ms`, then registers fork handlers; returns the program's
/// standard output and error.
fn fork_in_dlopen(ctor_ms: u32) -> (String, String) {
    run_fork_program(
        &format!("fork-in-dlopen-{ctor_ms}"),
        "fork_in_dlopen",
        &["100"],
        &[format!("-DTP_CTOR_ATFORK_MS={ctor_ms}")],
    )
}

/// A fork while another thread is inside a plugin's `dlopen` waits for
/// it to end, so that the child's dynamic loader is whole: its own first
/// call loads the plugin.
#[test]
fn fork_waits_for_a_plugins_dlopen() {
    let (stdout, stderr) = fork_in_dlopen(400);
    assert_eq!(
        stdout,
        format!("child: fi_xpu_getinfo 0\nparent: found {PROV}\n"),
        "stderr:\n{stderr}"
    );
}

/// ... for one second at most (a constructor may wait for the fork): a
/// child forked in the middle of a longer `dlopen` gets an error and the
/// reason from its first call, instead of the dynamic loader's assertion.
#[test]
fn fork_in_a_long_dlopen_leaves_the_child_an_error() {
    let (stdout, stderr) = fork_in_dlopen(1500);
    assert_eq!(
        stdout,
        format!(
            "child: fi_xpu_getinfo -{}\nparent: found {PROV}\n",
            fi_xpu_abi::errno::FI_ENODATA
        ),
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains(
            "plugin refused: dlopen refused: this process was forked while another thread \
             of its parent was inside dlopen"
        ),
        "{stderr}"
    );
}

#[test]
fn object_model_under_asan() {
    if !common::asan_works() {
        eprintln!("skipping: the C compiler cannot link with -fsanitize=address here");
        return;
    }
    run(true);
}
