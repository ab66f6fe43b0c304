//! The plugin loader, seen from outside: C plugins built from
//! `tests/plugins/test_provider.c` in scratch directories, and `fi_xpu_info`
//! run against them. The loader reads its environment once per process, so
//! every scenario is a separate run of the tool.
use crate::plugins;

use fi_xpu::abi::*;
use plugins::*;
use std::path::{Path, PathBuf};

/// A fresh directory unique to this call (tests run as threads of one
/// process, beside other runs).
fn scratch(name: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("loader-{name}-{}-{n}", std::process::id()));
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
        "{FI_XPU_PROV_ABI_MAJOR}.{FI_XPU_PROV_ABI_MINOR} (descriptor {} bytes)",
        std::mem::size_of::<fi_xpu_prov_desc>()
    );
    assert_eq!(f("abi"), abi);
    // The descriptor's limits, as fi_xpu_info.limits reports them.
    assert_eq!(f("max_cq_size"), "4096");
    assert_eq!(f("max_tx_depth"), "none of its own");
    assert_eq!(f("max_rx_depth"), "32");
    assert_eq!(f("max_msg_size"), "none of its own");
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

/// A plugin built against the ABI 1.4 header (its descriptor ends at
/// `ep_close`) loads, and reports no limits: the core reads nothing past
/// the size the plugin gives, though this build fills `limits` beyond it.
#[test]
fn an_older_minor_plugin_loads_and_reports_no_limits() {
    let dir = scratch("abi-1-4");
    build_plugin(
        &dir,
        "test",
        &["-DTP_ABI_14".into(), "-DTP_ABI_MINOR=4".into()],
    );
    let run = info(Some(path_str(&dir)), None, &["-v"]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["test"], "{}", run.dump());
    assert_eq!(
        run.field("test", "abi"),
        Some(
            format!("{FI_XPU_PROV_ABI_MAJOR}.4 (descriptor {FI_XPU_PROV_MIN_SIZE} bytes)").as_str()
        ),
        "{}",
        run.dump()
    );
    for k in [
        "max_cq_size",
        "max_tx_depth",
        "max_rx_depth",
        "max_msg_size",
    ] {
        assert_eq!(
            run.field("test", k),
            Some("none of its own"),
            "{k}: {}",
            run.dump()
        );
    }
    assert!(run.stderr.is_empty(), "{}", run.dump());
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
            "its fi_xpu note names provider 'other' but the file is for 'misnamed'".into(),
        ),
        (
            "initfail",
            with(
                named("initfail", 210),
                &["-DTP_INIT_FAIL", "-DTP_INIT_ERR=FI_EIO"],
            ),
            format!(
                "initialisation failed: {} ({})",
                fi_xpu::error::strerror(-errno::FI_EIO),
                -errno::FI_EIO
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
    assert_eq!(
        run.reason(&junk),
        Some("not an ELF file (18 bytes, shorter than an ELF header)"),
        "{}",
        run.dump()
    );
    assert_eq!(run.skipped().len(), cases.len() + 1, "{}", run.dump());
    // What the files' ELF notes refuse is refused before dlopen: none of
    // those plugins' constructors ran.
    let ran = opened(&mark);
    for name in ["major", "minor", "other", "zero", "samepid"] {
        assert!(!ran.iter().any(|n| n == name), "{name} was loaded: {ran:?}");
    }
    assert!(ran.iter().any(|n| n == "good"), "{ran:?}");
}

/// A plugin whose init says -FI_ENODEV (nothing to serve here, as the ofi
/// plugin built without libfabric) is no warning unless FI_XPU_PROVIDER
/// names it: its own lines and the loader's come at info level; asked for,
/// both are warnings. Another init failure always warns.
#[test]
fn a_plugin_with_nothing_to_serve_warns_only_when_asked_for() {
    let dir = scratch("absent");
    build_plugin(&dir, "good", &named("good", 215));
    let so = build_plugin(
        &dir,
        "initfail",
        &with(named("initfail", 216), &["-DTP_INIT_FAIL"]),
    );
    let reason = format!(
        "initialisation failed: {} ({})",
        fi_xpu::error::strerror(-errno::FI_ENODEV),
        -errno::FI_ENODEV
    );
    let own = |level: &str| {
        format!("fi_xpu:initfail:{level}: refusing to initialise (built with TP_INIT_FAIL)")
    };
    let core = |level: &str| {
        format!(
            "fi_xpu:core:{level}: {}: plugin refused: {reason}",
            so.display()
        )
    };
    let (tool, cwd) = (info_tool(), info_tool_dir());
    let p = path_str(&dir);

    // Not asked for: nothing at the default level, the reason still listed.
    for filter in [None, Some("^ofi")] {
        let run = info_env(cwd, tool, Some(p), filter, &["-v"], &[]);
        assert_eq!(run.code, 0, "{}", run.dump());
        assert_eq!(run.providers(), ["good"], "{}", run.dump());
        assert_eq!(
            run.log(),
            Vec::<String>::new(),
            "{filter:?}: {}",
            run.dump()
        );
        assert_eq!(run.reason(&so), Some(reason.as_str()), "{}", run.dump());
    }
    let run = info_env(
        cwd,
        tool,
        Some(p),
        None,
        &[],
        &[("FI_XPU_LOG_LEVEL", "info")],
    );
    assert!(run.logged(&own("info")), "{}", run.dump());
    assert!(run.logged(&core("info")), "{}", run.dump());
    assert!(
        !run.log().iter().any(|l| l.contains(":warn: ")),
        "{}",
        run.dump()
    );

    // Asked for by name: both lines are warnings, in the plugin's order.
    for filter in ["initfail", "good,initfail"] {
        let run = info_env(cwd, tool, Some(p), Some(filter), &[], &[]);
        let log = run.log();
        assert_eq!(log, [own("warn"), core("warn")], "{filter}: {}", run.dump());
    }

    // A failure other than -FI_ENODEV is a warning, asked for or not.
    let other = scratch("absent-other");
    let so = build_plugin(
        &other,
        "initfail",
        &with(
            named("initfail", 217),
            &["-DTP_INIT_FAIL", "-DTP_INIT_ERR=FI_EIO"],
        ),
    );
    let run = info_env(cwd, tool, Some(path_str(&other)), None, &[], &[]);
    let line = format!(
        "fi_xpu:core:warn: {}: plugin refused: initialisation failed: {} ({})",
        so.display(),
        fi_xpu::error::strerror(-errno::FI_EIO),
        -errno::FI_EIO
    );
    assert!(run.logged(&own("warn")), "{}", run.dump());
    assert!(run.logged(&line), "{}", run.dump());
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

/// A plugin whose ELF note gives a loaded provider's prov_id is refused
/// before dlopen, so its constructors never run; a plugin without the note
/// (built before it) is refused only after they ran; a note that the
/// descriptor contradicts is refused.
#[test]
fn duplicate_prov_id_is_refused_before_its_constructors_run() {
    let root = scratch("dup-id");
    let dir = private_dir(&root, "plugins");
    let mark = root.join("opened");
    let m = mark_define(&mark);
    build_plugin(&dir, "aaa", &with(named("aaa", 230), &[&m]));
    let noted = build_plugin(&dir, "bbb", &with(named("bbb", 230), &[&m]));
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.providers(), ["aaa"], "{}", run.dump());
    let reason = "duplicate prov_id 230 (already used by 'aaa')";
    assert_eq!(run.reason(&noted), Some(reason), "{}", run.dump());
    assert!(run.logged_plugin_refusal(&noted, reason), "{}", run.dump());
    assert_eq!(opened(&mark), ["aaa"]);

    std::fs::remove_file(&mark).unwrap();
    build_plugin(&dir, "bbb", &with(named("bbb", 230), &[&m, "-DTP_NO_NOTE"]));
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.reason(&noted), Some(reason), "{}", run.dump());
    assert_eq!(opened(&mark), ["aaa", "bbb"], "without the note it ran");

    std::fs::remove_file(&noted).unwrap();
    let liar = build_plugin(
        &dir,
        "ccc",
        &with(named("ccc", 232), &["-DTP_NOTE_PROV_ID=231"]),
    );
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(
        run.reason(&liar),
        Some("descriptor's prov_id 232 differs from its fi_xpu note's 231"),
        "{}",
        run.dump()
    );
}

/// A second copy of a loaded plugin (a moved prefix whose original is still
/// in place) is skipped with one debug line, not refused with a warning.
#[test]
fn a_copy_of_a_loaded_plugin_is_skipped_quietly() {
    let root = scratch("copy");
    let first = private_dir(&root, "first");
    let second = private_dir(&root, "second");
    let a = build_plugin(&first, "cp", &named("cp", 222));
    let b = second.join("libfi_xpu-cp.so");
    std::fs::copy(&a, &b).unwrap();
    let path = format!("{}:{}", path_str(&first), path_str(&second));

    let run = info(Some(&path), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["cp"], "{}", run.dump());
    assert_eq!(run.field("cp", "path"), Some(path_str(&a)));
    assert!(run.skipped().is_empty(), "{}", run.dump());
    assert!(run.stderr.is_empty(), "{}", run.dump());

    let cwd = info_tool_dir();
    let run = info_env(
        cwd,
        info_tool(),
        Some(&path),
        None,
        &[],
        &[("FI_XPU_LOG_LEVEL", "debug")],
    );
    let want = format!(
        "fi_xpu:core:debug: {}: the same file as the loaded {}: skipped",
        b.display(),
        a.display()
    );
    assert!(
        run.log().contains(&want),
        "no line\n  {want}\n{}",
        run.dump()
    );
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
        assert!(run.logged(&line), "{}", run.dump());
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
    // The loader says where it looked, and how to point it elsewhere.
    let searched: Vec<&str> = run
        .searched()
        .into_iter()
        .map(|d| d.trim_end_matches(" (not found)"))
        .collect();
    let searched = searched.join(", ");
    let want = format!(
        "fi_xpu:core:warn: no provider plugin (libfi_xpu-<name>.so) found in {searched}: set FI_XPU_PROVIDER_PATH to the directory that holds them"
    );
    assert!(
        run.stderr.lines().filter_map(log_body).any(|l| l == want),
        "no line\n  {want}\n{}",
        run.dump()
    );

    // Every plugin refused is the same as none.
    build_plugin(&dir, "bad", &with(named("bad", 270), &["-DTP_INIT_FAIL"]));
    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 1, "{}", run.dump());
    assert_eq!(run.skipped(), [path_str(&dir.join("libfi_xpu-bad.so"))]);
}

/// A provider defines and reads its parameters through the core's registry
/// only: the variable is `FI_XPU_<PROVIDER>_<NAME>`, `fi_xpu_info -e` lists
/// it with its default and description beside the core's and the in-tree
/// providers' own, and the value set reaches the provider.
#[test]
fn provider_parameters_go_through_the_core() {
    let dir = scratch("param");
    build_plugin(&dir, "tparam", &with(named("tparam", 286), &["-DTP_PARAM"]));
    let p = path_str(&dir);
    let tool = info_tool();
    let cwd = info_tool_dir();
    let warn = [("FI_XPU_LOG_LEVEL", "warn")];

    let run = info_env(cwd, tool, Some(p), None, &[], &warn);
    assert_eq!(run.providers(), ["tparam"], "{}", run.dump());
    assert!(
        run.logged("fi_xpu:tparam:warn: depth: unset"),
        "{}",
        run.dump()
    );

    let set = [("FI_XPU_LOG_LEVEL", "warn"), ("FI_XPU_TPARAM_DEPTH", "12")];
    let run = info_env(cwd, tool, Some(p), None, &[], &set);
    assert_eq!(run.providers(), ["tparam"], "{}", run.dump());
    assert!(
        run.logged("fi_xpu:tparam:warn: depth: 12"),
        "{}",
        run.dump()
    );

    let run = info_env(cwd, tool, Some(p), None, &["-e"], &set);
    assert_eq!(run.code, 0, "{}", run.dump());
    let block = |var: &str| -> Vec<String> {
        run.block(&format!("env: {var}"))
            .map(|l| l.trim_start().to_string())
            .collect()
    };
    assert_eq!(
        block("FI_XPU_TPARAM_DEPTH"),
        [
            "owner: tparam",
            "default: 4",
            "value: 12",
            "description: queue depth of the test provider"
        ],
        "{}",
        run.dump()
    );
    assert_eq!(
        block("FI_XPU_LOG_LEVEL"),
        [
            "owner: core",
            "default: warn",
            "value: warn",
            "description: least severe message logged: none, warn, info or debug"
        ],
        "{}",
        run.dump()
    );
    for var in ["FI_XPU_PROVIDER_PATH", "FI_XPU_PROVIDER", "FI_XPU_LOG_PROV"] {
        assert_eq!(
            block(var).first().map(String::as_str),
            Some("owner: core"),
            "{var}"
        );
    }
}

/// No provider reads the environment itself: the in-tree providers' sources
/// (Rust and C) never call getenv or std::env, only the core's registry.
#[test]
fn providers_read_no_environment() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("providers");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.file_name().is_some_and(|f| f != "build.rs")
                && p.extension()
                    .is_some_and(|x| x == "rs" || x == "c" || x == "h")
            {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 10, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for needle in ["getenv", "env::var", "var_os("] {
            assert!(
                !text.contains(needle),
                "{} reads the environment ({needle}); define a parameter instead",
                f.display()
            );
        }
    }
}

/// Every log line carries the pid, the host and the time; FI_XPU_LOG_PROV
/// keeps or drops sources as FI_XPU_PROVIDER does providers.
#[test]
fn log_lines_carry_pid_host_time_and_filter_by_source() {
    let dir = scratch("logprov");
    build_plugin(
        &dir,
        "initfail",
        &with(named("initfail", 287), &["-DTP_INIT_FAIL"]),
    );
    std::fs::write(dir.join("libfi_xpu-junk.so"), b"not a plugin").unwrap();
    chmod(&dir.join("libfi_xpu-junk.so"), 0o644);
    let p = path_str(&dir);
    let (tool, cwd) = (info_tool(), info_tool_dir());
    let core_line = |run: &Run| {
        run.log()
            .iter()
            .any(|l| l.starts_with("fi_xpu:core:warn: "))
    };
    let prov_line = "fi_xpu:initfail:warn: refusing to initialise (built with TP_INIT_FAIL)";

    // Named in FI_XPU_PROVIDER, so that its failure is a warning.
    let asked = Some("initfail");
    let run = info_env(
        cwd,
        tool,
        Some(p),
        asked,
        &[],
        &[("FI_XPU_LOG_LEVEL", "warn")],
    );
    assert!(core_line(&run) && run.logged(prov_line), "{}", run.dump());
    let host = {
        let o = std::process::Command::new("hostname").output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // (fi_xpu_info's own message about no usable provider is not a log line.)
    for line in run.stderr.lines().filter(|l| l.starts_with("fi_xpu:")) {
        assert!(plugins::log_body(line).is_some(), "{line}");
        let f: Vec<&str> = line.splitn(5, ':').collect();
        assert!(f[1].parse::<u32>().unwrap() > 1, "{line}");
        assert_eq!(f[2], host, "{line}");
        let secs: u64 = f[3].split('.').next().unwrap().parse().unwrap();
        assert!(secs.abs_diff(now) < 600, "{line}");
    }

    let only = [
        ("FI_XPU_LOG_LEVEL", "warn"),
        ("FI_XPU_LOG_PROV", "initfail"),
    ];
    let run = info_env(cwd, tool, Some(p), asked, &[], &only);
    assert!(!core_line(&run) && run.logged(prov_line), "{}", run.dump());
    assert_eq!(run.log().len(), 1, "{}", run.dump());

    let drop = [
        ("FI_XPU_LOG_LEVEL", "warn"),
        ("FI_XPU_LOG_PROV", "^initfail"),
    ];
    let run = info_env(cwd, tool, Some(p), asked, &[], &drop);
    assert!(core_line(&run) && !run.logged(prov_line), "{}", run.dump());
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

/// Reads the fields of a little ELF64 file the truncation test needs:
/// (e_phoff, e_phnum, [(p_type, p_offset, p_filesz)]).
fn program_headers(image: &[u8]) -> (u64, u16, Vec<(u32, u64, u64)>) {
    let u16_at = |at: usize| u16::from_ne_bytes(image[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_ne_bytes(image[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_ne_bytes(image[at..at + 8].try_into().unwrap());
    let (phoff, phnum) = (u64_at(32), u16_at(56));
    let phdrs = (0..phnum as usize)
        .map(|i| {
            let p = phoff as usize + i * 56;
            (u32_at(p), u64_at(p + 8), u64_at(p + 32))
        })
        .collect();
    (phoff, phnum, phdrs)
}

/// A plugin cut short is refused before `dlopen` maps it (which would kill
/// the process with SIGBUS when the loader touches the missing pages).
#[test]
fn truncated_plugins_are_refused_before_dlopen() {
    let dir = scratch("truncated");
    let mark = dir.join("opened");
    let m = mark_define(&mark);
    build_plugin(&dir, "whole", &with(named("whole", 290), &[&m]));
    let segs = build_plugin(&dir, "tseg", &with(named("tseg", 291), &[&m]));
    let phdr = build_plugin(&dir, "tphdr", &with(named("tphdr", 292), &[&m]));

    let image = std::fs::read(&segs).unwrap();
    let (phoff, phnum, phdrs) = program_headers(&image);
    // Keep the headers, cut into the first loadable segment's contents.
    let table_end = phoff + phnum as u64 * 56;
    let cut = table_end + 16;
    let (i, (_, offset, filesz)) = phdrs
        .iter()
        .enumerate()
        .find(|(_, (t, o, f))| *t == 1 && o + f > cut)
        .expect("a PT_LOAD segment past the cut");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segs)
        .unwrap()
        .set_len(cut)
        .unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&phdr)
        .unwrap()
        .set_len(100)
        .unwrap();

    let run = info(Some(path_str(&dir)), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["whole"], "{}", run.dump());
    let seg_reason = format!(
        "truncated: segment {i} ends at byte {}, past the end of the file ({cut} bytes)",
        offset + filesz
    );
    assert_eq!(
        run.reason(&segs),
        Some(seg_reason.as_str()),
        "{}",
        run.dump()
    );
    assert!(
        run.logged_plugin_refusal(&segs, &seg_reason),
        "{}",
        run.dump()
    );
    let phdr_reason = format!(
        "truncated: program headers end at byte {table_end}, past the end of the file (100 bytes)"
    );
    assert_eq!(
        run.reason(&phdr),
        Some(phdr_reason.as_str()),
        "{}",
        run.dump()
    );
    assert_eq!(opened(&mark), ["whole"]);
}

/// A symlinked plugin is checked where it points: a link in a trusted
/// directory to a file in a directory others can write is refused unopened;
/// a link to a trusted file loads.
#[test]
fn symlinks_are_checked_at_their_target() {
    let root = scratch("symlink");
    let mark = root.join("opened");
    let m = mark_define(&mark);
    let links = private_dir(&root, "links");
    let good = private_dir(&root, "good");
    let open = private_dir(&root, "open");
    let target_ok = build_plugin(&good, "lok", &with(named("lok", 300), &[&m]));
    let target_bad = build_plugin(&open, "lbad", &with(named("lbad", 301), &[&m]));
    chmod(&open, 0o777);
    let link_ok = links.join("libfi_xpu-lok.so");
    let link_bad = links.join("libfi_xpu-lbad.so");
    std::os::unix::fs::symlink(&target_ok, &link_ok).unwrap();
    std::os::unix::fs::symlink(&target_bad, &link_bad).unwrap();

    let run = info(Some(path_str(&links)), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["lok"], "{}", run.dump());
    let reason = format!("{} is writable by other users (mode 777)", open.display());
    assert_eq!(
        run.reason(&link_bad),
        Some(reason.as_str()),
        "{}",
        run.dump()
    );
    assert!(
        run.logged_plugin_refusal(&link_bad, &reason),
        "{}",
        run.dump()
    );
    assert_eq!(opened(&mark), ["lok"]);
}

/// A symlink flipped between a trusted plugin and an untrusted one while
/// the library loads: whatever the timing, the untrusted file's code never
/// runs, and each run either loads the trusted plugin or refuses the
/// untrusted one with its reason.
#[test]
fn a_symlink_swapped_while_loading_never_loads_what_was_not_checked() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let root = scratch("swap");
    let good_mark = root.join("good-opened");
    let evil_mark = root.join("evil-opened");
    let links = private_dir(&root, "links");
    let good = private_dir(&root, "good");
    let evil = private_dir(&root, "evil");
    let good_so = build_plugin(
        &good,
        "swap",
        &with(named("swap", 310), &[&mark_define(&good_mark)]),
    );
    let evil_so = build_plugin(
        &evil,
        "swap",
        &with(named("swap", 311), &[&mark_define(&evil_mark)]),
    );
    chmod(&evil_so, 0o666 | 0o111);
    let link = links.join("libfi_xpu-swap.so");
    std::os::unix::fs::symlink(&good_so, &link).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (stop, link, links) = (stop.clone(), link.clone(), links.clone());
        let targets = [good_so.clone(), evil_so.clone()];
        std::thread::spawn(move || {
            let tmp = links.join(".swap.tmp");
            let mut n = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(&targets[n % 2], &tmp).unwrap();
                std::fs::rename(&tmp, &link).unwrap();
                n += 1;
            }
        })
    };
    let evil_reason = format!("writable by other users (mode {:o})", 0o777);
    let mut loaded = 0;
    let mut refused = 0;
    for _ in 0..40 {
        let run = info(Some(path_str(&links)), None, &[]);
        match run.providers().as_slice() {
            ["swap"] => {
                assert_eq!(run.field("swap", "prov_id"), Some("310"), "{}", run.dump());
                loaded += 1;
            }
            [] => {
                assert_eq!(
                    run.reason(&link),
                    Some(evil_reason.as_str()),
                    "{}",
                    run.dump()
                );
                refused += 1;
            }
            other => panic!("unexpected providers {other:?}: {}", run.dump()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(
        opened(&evil_mark),
        Vec::<String>::new(),
        "the unchecked plugin ran"
    );
    assert_eq!(loaded + refused, 40);
    assert_eq!(opened(&good_mark).len(), loaded);
}

/// A directory above a search directory that others can write lets them
/// replace the whole subtree: the search directory is refused.
#[test]
fn a_writable_ancestor_refuses_the_directory() {
    let root = scratch("ancestor");
    let mark = root.join("opened");
    let m = mark_define(&mark);
    let shared = private_dir(&root, "shared");
    let plugins = private_dir(&shared, "plugins");
    let ok = private_dir(&root, "ok");
    build_plugin(&plugins, "anc", &with(named("anc", 320), &[&m]));
    build_plugin(&ok, "aok", &with(named("aok", 321), &[&m]));
    chmod(&shared, 0o775);

    let path = format!("{}:{}", path_str(&plugins), path_str(&ok));
    let run = info(Some(&path), None, &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["aok"], "{}", run.dump());
    let reason = format!(
        "directory refused: {} is writable by other users (mode 775)",
        shared.display()
    );
    assert_eq!(
        run.reason(&plugins),
        Some(reason.as_str()),
        "{}",
        run.dump()
    );
    assert_eq!(opened(&mark), ["aok"]);
}

/// A relative entry in `FI_XPU_PROVIDER_PATH` would load whatever the
/// working directory holds: it is refused, the absolute ones still work.
#[test]
fn relative_search_path_entries_are_refused() {
    let root = scratch("relative");
    let mark = root.join("opened");
    let m = mark_define(&mark);
    let rel = private_dir(&root, "rel");
    let abs = private_dir(&root, "abs");
    build_plugin(&rel, "rel", &with(named("rel", 330), &[&m]));
    build_plugin(&abs, "abs", &with(named("abs", 331), &[&m]));

    let path = format!("rel:./rel:{}", path_str(&abs));
    let run = info_env(&root, info_tool(), Some(&path), None, &[], &[]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(run.providers(), ["abs"], "{}", run.dump());
    for entry in ["rel", "./rel"] {
        let reason = "relative directory in FI_XPU_PROVIDER_PATH refused";
        assert_eq!(run.reason(Path::new(entry)), Some(reason), "{}", run.dump());
        let line = format!("fi_xpu:core:warn: {entry}: {reason}");
        assert!(run.logged(&line), "{}", run.dump());
    }
    let searched = run.searched();
    assert_eq!(searched.first(), Some(&path_str(&abs)), "{}", run.dump());
    assert!(
        !searched.iter().any(|d| d.ends_with("rel")),
        "{}",
        run.dump()
    );
    assert_eq!(opened(&mark), ["abs"]);
}

/// Plugins are loaded through the descriptor that was checked,
/// `/proc/self/fd/N`. In a mount namespace whose /proc is an empty tmpfs
/// (a container that does not mount it), every plugin is refused with that
/// reason; `dlopen` alone said the plugin file did not exist. Needs root
/// (or user namespaces) for `unshare`; skipped without.
#[test]
fn plugins_without_proc_are_refused_saying_so() {
    let dir = scratch("noproc");
    build_plugin(&dir, "nop", &named("nop", 271));
    let tool = info_tool();
    let script = format!("mount -t tmpfs none /proc && exec {} -v", path_str(tool));
    let out = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .current_dir(tool.parent().unwrap())
        .env("FI_XPU_PROVIDER_PATH", path_str(&dir))
        .env("FI_XPU_PROVIDER", "nop")
        .env_remove("FI_XPU_LOG_LEVEL")
        .output();
    let Ok(out) = out else {
        eprintln!("skipped: no unshare");
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("unshare failed") || stderr.contains("mount:") {
        eprintln!("skipped: cannot make a mount namespace here: {stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("plugin refused: cannot reach it through /proc/self/fd/")
            && stderr.contains("which needs /proc mounted"),
        "{stderr}"
    );
}
