//! Drives `tests/c/object_model.c`: the whole host object model through the
//! C API and the C test provider plugin, plainly and under AddressSanitizer.
mod common;
mod plugins;

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
    // Nothing logged: in particular no context closed with the provider's
    // device state still allocated.
    assert!(stderr.is_empty(), "unexpected log output:\n{stderr}");
}

#[test]
fn object_model() {
    run(false);
}

/// A forked child starts with none of the library's process-wide locks
/// held, even when another thread of the parent was inside a call that
/// holds one as it forked (tests/c/fork_objects.c, 300 forks).
#[test]
fn fork_while_another_thread_opens_and_closes_objects() {
    let dir = common::scratch("fork-objects");
    plugins::chmod(&dir, 0o755);
    plugins::build_plugin(&dir, PROV, &plugins::named(PROV, PROV_ID));
    let exe = dir.join("fork_objects");
    let src = common::root().join("tests/c/fork_objects.c");
    common::cc(&[Path::new(&src)], &exe, &[]);
    let out = common::run_ok(
        Command::new(&exe)
            .arg("300")
            .env("FI_XPU_PROVIDER_PATH", &dir)
            .env("FI_XPU_PROVIDER", PROV)
            .env_remove("FI_XPU_LOG_LEVEL"),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "fork_objects: ok\n",
        "stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
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
