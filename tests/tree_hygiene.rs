//! Tests leave the source tree as they found it: no crash dump is committed,
//! and a test program that crashes after loading libfabric (whose PSM layer
//! writes `*.btr` backtraces into the current directory) writes nothing
//! into the tree, and no build output (an executable, a shared library, an
//! object file or archive) is tracked.
use crate::common;

use std::io::Read;
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

/// What a build writes, told by its first bytes: ELF (executables, shared
/// libraries, relocatable objects) and `ar` archives (static libraries).
fn build_output_kind(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x7fELF") {
        Some("ELF")
    } else if head.starts_with(b"!<arch>\n") {
        Some("ar archive")
    } else {
        None
    }
}

#[test]
fn no_build_output_is_tracked() {
    let o = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(common::root())
        .output()
        .expect("run git ls-files");
    assert!(o.status.success(), "git ls-files failed");
    let mut found = Vec::new();
    for name in o.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let path = common::root().join(&name);
        // A tracked file deleted in the work tree has nothing to read.
        let Ok(mut f) = std::fs::File::open(&path) else {
            continue;
        };
        let mut head = [0u8; 8];
        let n = f.read(&mut head).unwrap_or(0);
        if let Some(kind) = build_output_kind(&head[..n]) {
            found.push(format!("{name} ({kind})"));
        } else if [".o", ".obj", ".a", ".so"]
            .iter()
            .any(|x| name.ends_with(x))
        {
            found.push(format!("{name} (by its name)"));
        }
    }
    assert!(found.is_empty(), "build output is tracked: {found:?}");
}

#[test]
fn build_output_is_told_by_its_magic_bytes() {
    assert_eq!(build_output_kind(b"\x7fELF\x02\x01\x01\0"), Some("ELF"));
    assert_eq!(build_output_kind(b"!<arch>\nx"), Some("ar archive"));
    assert_eq!(build_output_kind(b"#!/bin/sh"), None);
    assert_eq!(build_output_kind(b"\x7fEL"), None);
}

#[test]
fn a_crashing_test_program_writes_nothing_into_the_tree() {
    let dir = common::scratch("crash-after-libfabric");
    let exe = dir.join("crash_after_libfabric");
    let src = common::root().join("tests/c/crash_after_libfabric.c");
    // Needs libfabric-dev (a CI package).
    common::run_ok(
        Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .arg("-lfabric"),
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
