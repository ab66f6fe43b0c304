//! The plugin loader, seen from outside: C plugins built from
//! `tests/plugins/test_provider.c` in scratch directories, and `fi_xpu_info`
//! run against them. The loader reads its environment once per process, so
//! every scenario is a separate run of the tool.
mod plugins;

use fi_xpu::abi::*;
use plugins::*;
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loader-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    chmod(&dir, 0o755);
    dir
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn with(mut defines: Vec<String>, extra: &[&str]) -> Vec<String> {
    defines.extend(extra.iter().map(|s| s.to_string()));
    defines
}

fn mark_define(mark: &Path) -> String {
    format!("-DTP_MARK=\"{}\"", mark.display())
}

/// Names the plugins' constructors wrote: who was actually opened.
fn opened(mark: &Path) -> Vec<String> {
    std::fs::read_to_string(mark)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn lists_a_good_provider() {
    let dir = scratch("good");
    let so = build_plugin(&dir, "test", &[]);
    let run = info(Some(path_str(&dir)), None, &["-v"]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["test"], "{}", run.dump());
    let f = |k| {
        run.field("test", k)
            .unwrap_or_else(|| panic!("{k}: {}", run.dump()))
    };
    assert_eq!(f("version"), "1.2");
    assert_eq!(f("prov_id"), "200");
    assert_eq!(f("caps"), "FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR");
    assert_eq!(f("ifaces"), "system");
    assert_eq!(f("addrlen"), "16");
    assert_eq!(f("path"), path_str(&so));
    let abi = format!(
        "{FI_XPU_PROV_ABI_MAJOR}.{FI_XPU_PROV_ABI_MINOR} (descriptor {FI_XPU_PROV_MIN_SIZE} bytes)"
    );
    assert_eq!(f("abi"), abi);
    // These come from the plugin's ctx_query through a real domain and context.
    assert_eq!(
        f("system ctx caps"),
        "FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR"
    );
    assert_eq!(f("system ctx av_addr_size"), "16");
    assert_eq!(f("system ctx mr_desc_size"), "24");
    assert_eq!(f("system ctx max_tx_wr_desc_size"), "0");
    assert!(run.skipped().is_empty(), "{}", run.dump());
    let searched = run.searched();
    assert_eq!(searched.first(), Some(&path_str(&dir)));
    assert_eq!(
        searched.last(),
        Some(&path_str(info_tool_dir())),
        "the tool's own directory is searched last: {}",
        run.dump()
    );
    assert!(run.stderr.is_empty(), "{}", run.dump());

    // Without -v the detail is left out.
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.field("test", "prov_id"), Some("200"));
    assert_eq!(run.field("test", "abi"), None);
}

/// Every refusal of a plugin file, each with its exact reason and log line,
/// in one directory: none of them stops the good provider from working.
#[test]
fn refusals_are_recorded_logged_and_not_fatal() {
    let dir = scratch("refusals");
    let mark = dir.join("opened");
    let m = mark_define(&mark);
    build_plugin(&dir, "good", &with(named("good", 201), &[&m]));
    let newer_minor = FI_XPU_PROV_ABI_MINOR + 1;
    let short = FI_XPU_PROV_MIN_SIZE - std::mem::size_of::<usize>();
    let cases: Vec<(&str, Vec<String>, String)> = vec![
        (
            "major",
            with(named("major", 202), &["-DTP_ABI_MAJOR=2"]),
            format!("plugin ABI 2.{FI_XPU_PROV_ABI_MINOR} is not major version {FI_XPU_PROV_ABI_MAJOR}"),
        ),
        (
            "minor",
            with(named("minor", 203), &[&format!("-DTP_ABI_MINOR={newer_minor}")]),
            format!(
                "plugin ABI {FI_XPU_PROV_ABI_MAJOR}.{newer_minor} is newer than this library's {FI_XPU_PROV_ABI_MAJOR}.{FI_XPU_PROV_ABI_MINOR}"
            ),
        ),
        (
            "short",
            with(named("short", 204), &["-DTP_SHORT"]),
            format!("short descriptor: {short} bytes, at least {FI_XPU_PROV_MIN_SIZE} needed"),
        ),
        (
            "nosym",
            with(named("nosym", 205), &["-DTP_NO_INI"]),
            "missing symbol fi_xpu_prov_ini".into(),
        ),
        (
            "nulldesc",
            with(named("nulldesc", 206), &["-DTP_NULL_DESC"]),
            "fi_xpu_prov_ini returned NULL".into(),
        ),
        (
            "nullentry",
            with(named("nullentry", 207), &["-DTP_NULL_ENTRY=cq_host_readerr"]),
            "missing entry point cq_host_readerr".into(),
        ),
        (
            "nullinit",
            with(named("nullinit", 208), &["-DTP_NULL_ENTRY=init"]),
            "missing entry point init".into(),
        ),
        (
            "zero",
            named("zero", 0),
            "prov_id 0 is reserved".into(),
        ),
        (
            "misnamed",
            named("other", 209),
            "descriptor names provider 'other' but the file is for 'misnamed'".into(),
        ),
        (
            "initfail",
            with(named("initfail", 210), &["-DTP_INIT_FAIL"]),
            format!(
                "initialisation failed: {} ({})",
                fi_xpu::error::strerror(-errno::FI_ENODEV),
                -errno::FI_ENODEV
            ),
        ),
        // Same prov_id as "good", which sorts first and is loaded first.
        (
            "samepid",
            named("samepid", 201),
            "duplicate prov_id 201 (already used by 'good')".into(),
        ),
    ];
    for (file, defines, _) in &cases {
        build_plugin(&dir, file, &with(defines.clone(), &[&m]));
    }
    let junk = dir.join("libfi_xpu-junk.so");
    std::fs::write(&junk, b"not an ELF object\n").unwrap();

    let run = info(Some(path_str(&dir)), None, &["-v"]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["good"], "{}", run.dump());
    // The good provider still works: a domain and context were opened on it.
    assert_eq!(run.field("good", "system ctx av_addr_size"), Some("16"));
    for (file, _, reason) in &cases {
        let path = dir.join(format!("libfi_xpu-{file}.so"));
        assert_eq!(
            run.reason(&path),
            Some(reason.as_str()),
            "{file}: {}",
            run.dump()
        );
        assert!(
            run.logged_plugin_refusal(&path, reason),
            "{file}: no log line: {}",
            run.dump()
        );
    }
    let junk_reason = run
        .reason(&junk)
        .unwrap_or_else(|| panic!("{}", run.dump()));
    assert!(
        junk_reason.starts_with("dlopen failed: ") && junk_reason.contains(path_str(&junk)),
        "{junk_reason}"
    );
    assert_eq!(run.skipped().len(), cases.len() + 1, "{}", run.dump());
    // A plugin that fails to initialise says why through the core's log.
    assert!(
        run.stderr
            .lines()
            .any(|l| l == "fi_xpu:initfail:warn: refusing to initialise (built with TP_INIT_FAIL)"),
        "{}",
        run.dump()
    );
}

/// A plugin name found twice: the first in search order is used, the later
/// one refused, whichever directory the later one is in.
#[test]
fn search_order_and_duplicate_names() {
    let root = scratch("order");
    let first = private_dir(&root, "first");
    let second = private_dir(&root, "second");
    let mark = root.join("opened");
    let m = mark_define(&mark);
    let a = build_plugin(
        &first,
        "dup",
        &with(named("dup", 220), &[&m, "-DTP_MARK_ID"]),
    );
    let b = build_plugin(
        &second,
        "dup",
        &with(named("dup", 221), &[&m, "-DTP_MARK_ID"]),
    );

    let run = info(
        Some(&format!("{}:{}", path_str(&first), path_str(&second))),
        None,
        &[],
    );
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["dup"], "{}", run.dump());
    assert_eq!(run.field("dup", "prov_id"), Some("220"));
    assert_eq!(run.field("dup", "path"), Some(path_str(&a)));
    let reason = format!(
        "duplicate provider name 'dup' (already loaded from {})",
        a.display()
    );
    assert_eq!(run.reason(&b), Some(reason.as_str()), "{}", run.dump());
    assert!(run.logged_plugin_refusal(&b, &reason), "{}", run.dump());
    assert_eq!(&run.searched()[..2], [path_str(&first), path_str(&second)]);
    // The name is known from the file name: the later file is never opened.
    assert_eq!(opened(&mark), ["dup 220"]);
    std::fs::remove_file(&mark).unwrap();

    let run = info(
        Some(&format!("{}:{}", path_str(&second), path_str(&first))),
        None,
        &[],
    );
    assert_eq!(run.field("dup", "prov_id"), Some("221"), "{}", run.dump());
    assert_eq!(run.field("dup", "path"), Some(path_str(&b)));
    let reason = format!(
        "duplicate provider name 'dup' (already loaded from {})",
        b.display()
    );
    assert_eq!(run.reason(&a), Some(reason.as_str()), "{}", run.dump());
    assert_eq!(opened(&mark), ["dup 221"]);
}

/// `FI_XPU_PROVIDER_PATH` comes before the directory of the library itself.
#[test]
fn provider_path_wins_over_own_directory() {
    let root = scratch("own-dir");
    let dir = private_dir(&root, "path");
    let tool_dir = private_dir(&root, "bin");
    let tool = copy_info_tool(&tool_dir);
    let from_path = build_plugin(&dir, "owndup", &named("owndup", 225));
    let own = build_plugin(&tool_dir, "owndup", &named("owndup", 226));

    let run = info_with(&tool, Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.field("owndup", "path"), Some(path_str(&from_path)));
    let reason = format!(
        "duplicate provider name 'owndup' (already loaded from {})",
        from_path.display()
    );
    assert_eq!(run.reason(&own), Some(reason.as_str()), "{}", run.dump());
    assert_eq!(run.searched().last(), Some(&path_str(&tool_dir)));

    // Without the path variable the library's own directory supplies it.
    let run = info_with(&tool, None, None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.field("owndup", "path"), Some(path_str(&own)));
    assert_eq!(run.field("owndup", "prov_id"), Some("226"));
}

#[test]
fn filters_select_and_exclude_without_opening() {
    let dir = scratch("filters");
    let mark = dir.join("opened");
    let m = mark_define(&mark);
    for (name, id) in [("fa", 230), ("fb", 231), ("fc", 232)] {
        build_plugin(&dir, name, &with(named(name, id), &[&m]));
    }
    let p = path_str(&dir);

    let run = info(Some(p), Some("fa,fc"), &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["fa", "fc"], "{}", run.dump());
    assert!(run.skipped().is_empty(), "{}", run.dump());
    assert_eq!(
        opened(&mark),
        ["fa", "fc"],
        "a filtered-out plugin was opened"
    );
    std::fs::remove_file(&mark).unwrap();

    let run = info(Some(p), Some("^fa"), &[]);
    assert_eq!(run.providers(), ["fb", "fc"], "{}", run.dump());
    assert_eq!(opened(&mark), ["fb", "fc"]);
    std::fs::remove_file(&mark).unwrap();

    let run = info(Some(p), Some("^fa,fc"), &[]);
    assert_eq!(run.providers(), ["fb"], "{}", run.dump());

    let run = info(Some(p), Some("nosuch"), &[]);
    assert_eq!(run.code, 1, "{}", run.dump());
    assert!(run.providers().is_empty());
}

/// Only `libfi_xpu-<name>.so` with a name of `[a-z0-9_]` is ever opened.
#[test]
fn only_plugin_file_names_are_opened() {
    let dir = scratch("names");
    let mark = dir.join("opened");
    let m = mark_define(&mark);
    let decoy = with(named("decoy", 240), &[&m]);
    for file in [
        "libfi_xpu_decoy.so",
        "libfi_xpu-Decoy.so",
        "libfi_xpu-decoy.so.1",
        "libfi_xpu-decoy.so.bak",
        "libfi_xpu-.so",
        "libfi_xpu-de-coy.so",
        "fi_xpu-decoy.so",
        "libdecoy.so",
    ] {
        build_plugin_to(&dir.join(file), &decoy);
    }
    build_plugin(&dir, "real", &with(named("real", 241), &[&m]));

    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["real"], "{}", run.dump());
    assert!(run.skipped().is_empty(), "{}", run.dump());
    assert_eq!(opened(&mark), ["real"]);
}

/// A plugin file that another user could have written is never opened.
#[test]
fn writable_plugin_files_are_refused_unopened() {
    let dir = scratch("perm-file");
    let mark = dir.join("opened");
    let m = mark_define(&mark);
    let good = build_plugin(&dir, "pgood", &with(named("pgood", 250), &[&m]));
    let world = build_plugin(&dir, "pworld", &with(named("pworld", 251), &[&m]));
    let group = build_plugin(&dir, "pgroup", &with(named("pgroup", 252), &[&m]));
    chmod(&good, 0o755);
    chmod(&world, 0o777);
    chmod(&group, 0o775);

    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["pgood"], "{}", run.dump());
    for (path, mode) in [(&world, "777"), (&group, "775")] {
        let reason = format!("writable by other users (mode {mode})");
        assert_eq!(run.reason(path), Some(reason.as_str()), "{}", run.dump());
        assert!(run.logged_plugin_refusal(path, &reason), "{}", run.dump());
    }
    assert_eq!(opened(&mark), ["pgood"], "a writable plugin was opened");
}

/// A directory that another user could write to is skipped whole.
#[test]
fn writable_directories_are_refused() {
    let root = scratch("perm-dir");
    let mark = root.join("opened");
    let m = mark_define(&mark);
    let ok = private_dir(&root, "ok");
    let world = private_dir(&root, "world");
    let group = private_dir(&root, "group");
    build_plugin(&ok, "dok", &with(named("dok", 260), &[&m]));
    build_plugin(&world, "dworld", &with(named("dworld", 261), &[&m]));
    build_plugin(&group, "dgroup", &with(named("dgroup", 262), &[&m]));
    chmod(&world, 0o777);
    chmod(&group, 0o775);

    let path = [&ok, &world, &group].map(|d| path_str(d)).join(":");
    let run = info(Some(&path), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["dok"], "{}", run.dump());
    for (dir, mode) in [(&world, "777"), (&group, "775")] {
        let reason = format!("directory refused: writable by other users (mode {mode})");
        assert_eq!(run.reason(dir), Some(reason.as_str()), "{}", run.dump());
        let line = format!("fi_xpu:core:warn: {}: {reason}", dir.display());
        assert!(run.stderr.lines().any(|l| l == line), "{}", run.dump());
    }
    assert_eq!(opened(&mark), ["dok"]);
}

#[test]
fn exit_status_without_usable_provider() {
    let dir = scratch("none");
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 1, "{}", run.dump());
    assert!(run.providers().is_empty());
    assert!(
        run.stderr.contains("fi_xpu_info: no usable provider"),
        "{}",
        run.dump()
    );

    // Every plugin refused is the same as none.
    build_plugin(&dir, "bad", &with(named("bad", 270), &["-DTP_INIT_FAIL"]));
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 1, "{}", run.dump());
    assert_eq!(run.skipped(), [path_str(&dir.join("libfi_xpu-bad.so"))]);
}

/// `fi_xpu_getinfo` lists the default provider first, whatever the order
/// the plugin files were loaded in.
#[test]
fn default_provider_is_listed_first() {
    let dir = scratch("default-first");
    build_plugin(&dir, "aa", &named("aa", 283));
    build_plugin(&dir, "shm", &named("shm", 284));
    build_plugin(&dir, "zz", &named("zz", 285));
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["shm", "aa", "zz"], "{}", run.dump());
}

#[test]
fn select_one_provider_and_usage() {
    let dir = scratch("select");
    build_plugin(&dir, "sa", &named("sa", 280));
    build_plugin(&dir, "sb", &named("sb", 281));
    build_plugin(&dir, "sbad", &with(named("sbad", 282), &["-DTP_SHORT"]));
    let p = path_str(&dir);

    let run = info(Some(p), None, &["-p", "sb"]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["sb"], "{}", run.dump());
    assert!(run.skipped().is_empty(), "{}", run.dump());

    let run = info(Some(p), None, &["-p", "sbad"]);
    assert_eq!(run.code, 1, "{}", run.dump());
    assert_eq!(run.skipped(), [path_str(&dir.join("libfi_xpu-sbad.so"))]);
    assert!(
        run.stderr
            .contains("fi_xpu_info: provider 'sbad' is not usable"),
        "{}",
        run.dump()
    );

    let run = info(Some(p), None, &["-h"]);
    assert_eq!(run.code, 0);
    assert!(
        run.stdout.starts_with("usage: fi_xpu_info"),
        "{}",
        run.dump()
    );

    for flag in ["-V", "--version"] {
        let run = info(Some(p), None, &[flag]);
        assert_eq!(run.code, 0, "{}", run.dump());
        assert_eq!(
            run.stdout,
            format!(
                "fi_xpu_info {} (fi_xpu API {}.{}, plugin ABI {FI_XPU_PROV_ABI_MAJOR}.{FI_XPU_PROV_ABI_MINOR})\n",
                env!("CARGO_PKG_VERSION"),
                FI_XPU_MAJOR_VERSION,
                FI_XPU_MINOR_VERSION
            ),
            "{}",
            run.dump()
        );
    }

    let run = info(Some(p), None, &["--bogus"]);
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(run.stderr.contains("unknown argument '--bogus'"));

    let run = info(Some(p), None, &["-p"]);
    assert_eq!(run.code, 2, "{}", run.dump());
}

/// The plugin compiles against the header's own stand-ins for libfabric's
/// types too, and loads the same way.
#[test]
fn plugin_built_without_libfabric_headers() {
    let dir = scratch("nolibfabric");
    build_plugin(
        &dir,
        "bare",
        &with(named("bare", 290), &["-DFI_XPU_NO_LIBFABRIC_HEADERS"]),
    );
    let run = info(Some(path_str(&dir)), None, &["-v"]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.field("bare", "system ctx mr_desc_size"), Some("24"));
}
