//! Tests leave the source tree as they found it: no crash dump is committed,
//! and a test program that crashes after loading libfabric (whose PSM layer
//! writes `*.btr` backtraces into the current directory) writes nothing
//! into the tree.
mod common;

use std::path::Path;
use std::process::Command;

/// Files directly in `dir` whose name ends in `.btr`.
fn crash_dumps(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".btr"))
        .collect()
}

#[test]
fn no_crash_dumps_in_the_tree() {
    let dumps = crash_dumps(&common::root());
    assert!(dumps.is_empty(), "crash dumps in the tree: {dumps:?}");
}

#[test]
fn a_crashing_test_program_writes_nothing_into_the_tree() {
    let dir = common::scratch("crash-after-libfabric");
    let exe = dir.join("crash_after_libfabric");
    let src = common::root().join("tests/c/crash_after_libfabric.c");
    let o = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-lfabric")
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "cc failed (libfabric-dev is a CI package):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let before = crash_dumps(&common::root());
    let out = common::run(&mut Command::new(&exe));
    assert!(!out.status.success(), "the program was meant to crash");
    let after = crash_dumps(&common::root());
    let new: Vec<_> = after.iter().filter(|n| !before.contains(n)).collect();
    assert!(new.is_empty(), "the crash wrote {new:?} into the tree");
    let in_cwd = crash_dumps(common::program_cwd());
    assert!(
        in_cwd.is_empty(),
        "the PSM backtrace handler is not switched off (IPATH_NO_BACKTRACE): {in_cwd:?}"
    );
}
