//! The man pages: every page under man/ is well formed and renders cleanly,
//! every function libfi_xpu.so exports is documented, and every function a
//! page documents exists in the public headers.
use crate::common;

use crate::man;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

struct Source {
    file: String,
    page: man::Page,
    md: String,
}

fn pages() -> Vec<Source> {
    let dir = common::root().join("man");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no man pages under {}", dir.display());
    files
        .into_iter()
        .map(|p| {
            let file = p.file_name().unwrap().to_string_lossy().into_owned();
            let page = man::Page::from_file_name(&file)
                .unwrap_or_else(|| panic!("{file}: not named <name>.<section>.md"));
            Source {
                md: std::fs::read_to_string(&p).unwrap(),
                file,
                page,
            }
        })
        .collect()
}

/// Functions named in the NAME sections of the section 3 pages.
fn documented() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in pages().iter().filter(|s| s.page.section.starts_with('3')) {
        let names = man::check(&s.page, &s.md).unwrap_or_else(|e| panic!("{}: {e}", s.file));
        out.extend(names);
    }
    out
}

#[test]
fn every_page_is_well_formed() {
    let mut errors = Vec::new();
    for s in pages() {
        if let Err(e) = man::check(&s.page, &s.md) {
            errors.push(format!("{}: {e}", s.file));
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The roff only uses the macros the renderer emits, so a line of page text
/// can never turn into a request; groff, where installed, reports no
/// problem with it either.
#[test]
fn every_page_renders() {
    const MACROS: &[&str] = &[
        ".TH", ".SH", ".SS", ".PP", ".IP", ".RS", ".RE", ".nf", ".fi", ".TS", ".TE",
    ];
    let out = common::scratch("man-render");
    for s in pages() {
        let roff = man::render(&s.page, env!("CARGO_PKG_VERSION"), &s.md);
        let th = format!(
            ".TH \"{}\" \"{}\"",
            s.page.name.to_uppercase(),
            s.page.section
        );
        let first = roff.lines().find(|l| !l.starts_with("'\\\" t")).unwrap();
        assert!(first.starts_with(&th), "{}: first line {first:?}", s.file);
        assert!(roff.contains("\n.SH \"NAME\"\n"), "{}: no NAME", s.file);
        for (n, line) in roff.lines().enumerate() {
            if n == 0 && line == "'\\\" t" {
                continue;
            }
            if line.starts_with('\'') {
                panic!("{}: line {} begins a request: {line:?}", s.file, n + 1);
            }
            if let Some(rest) = line.strip_prefix('.') {
                let mac = format!(".{}", rest.split(' ').next().unwrap());
                assert!(
                    MACROS.contains(&mac.as_str()),
                    "{}: line {}: unexpected request {line:?}",
                    s.file,
                    n + 1
                );
            }
        }
        if common::have("groff") {
            let path = out.join(s.page.install_path().replace('/', "_"));
            std::fs::write(&path, &roff).unwrap();
            // `break` warnings only say that a long identifier could not be
            // justified in a narrow column; everything else is a defect.
            let o = common::run_ok(
                Command::new("groff")
                    .args(["-t", "-man", "-Tutf8", "-ww", "-Wbreak", "-z"])
                    .arg(&path),
            );
            let stderr = String::from_utf8_lossy(&o.stderr);
            assert!(
                stderr.trim().is_empty(),
                "{}: groff says:\n{stderr}",
                s.file
            );
        } else {
            eprintln!("groff not installed: rendering checked without it");
        }
    }
}

#[test]
fn every_exported_function_is_documented() {
    let lib = common::build().join("libfi_xpu.so");
    let o = common::run_ok(Command::new("nm").args(["-D", "--defined-only"]).arg(&lib));
    let exported: BTreeSet<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let (name, kind) = (f.next()?, f.next()?);
            (kind == "T" && name.starts_with("fi_xpu_")).then(|| name.to_string())
        })
        .collect();
    // A broken symbol scan would pass vacuously.
    for known in [
        "fi_xpu_getinfo",
        "fi_xpu_alloc",
        "fi_xpu_export",
        "fi_xpu_close",
    ] {
        assert!(
            exported.contains(known),
            "{known} not found in nm output of {}",
            lib.display()
        );
    }
    let documented = documented();
    let missing: Vec<&String> = exported.difference(&documented).collect();
    assert!(
        missing.is_empty(),
        "exported but in no section 3 page's NAME and SYNOPSIS: {missing:?}"
    );
}

#[test]
fn documented_functions_exist() {
    let mut declared = BTreeSet::new();
    for (p, _) in common::public_headers() {
        let text = std::fs::read_to_string(&p).unwrap();
        declared.extend(man::called_names(&text, "fi_xpu_"));
    }
    let stale: Vec<String> = documented()
        .into_iter()
        .filter(|f| !declared.contains(f))
        .collect();
    assert!(
        stale.is_empty(),
        "documented but declared in no public header: {stale:?}"
    );
}

#[test]
fn links_between_pages_resolve() {
    let names: BTreeSet<String> = pages().into_iter().map(|s| s.file).collect();
    let mut broken = Vec::new();
    for s in pages() {
        for (i, _) in s.md.match_indices("](") {
            let target: String = s.md[i + 2..].chars().take_while(|&c| c != ')').collect();
            if target.ends_with(".md") && !target.contains('/') && !names.contains(&target) {
                broken.push(format!("{} -> {target}", s.file));
            }
        }
    }
    assert!(broken.is_empty(), "links to missing pages: {broken:?}");
}
