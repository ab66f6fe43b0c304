//! `cargo xtask unsafe-count`: how much `unsafe` the workspace holds, per
//! crate, so that a change's before and after can be stated exactly.
//!
//! Every Rust file git tracks is lexed just enough to skip comments, string
//! and character literals, then each `unsafe` keyword is classified by what
//! follows it: a block (`unsafe {`), a function (`unsafe fn`, `unsafe
//! extern "C" fn`), an impl (`unsafe impl`, with `Send`/`Sync` impls counted
//! apart), a trait, or an attribute (`#[unsafe(no_mangle)]`).
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// What one `unsafe` keyword introduces.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Block,
    Fn,
    Impl,
    /// `unsafe impl Send` / `unsafe impl Sync` (also counted in `Impl`).
    SendSync,
    Trait,
    Other,
}

#[derive(Default, Clone, Copy)]
struct Counts {
    blocks: usize,
    fns: usize,
    impls: usize,
    send_sync: usize,
    traits: usize,
    other: usize,
}

impl Counts {
    fn add(&mut self, k: Kind) {
        match k {
            Kind::Block => self.blocks += 1,
            Kind::Fn => self.fns += 1,
            Kind::Impl => self.impls += 1,
            Kind::SendSync => {
                self.impls += 1;
                self.send_sync += 1
            }
            Kind::Trait => self.traits += 1,
            Kind::Other => self.other += 1,
        }
    }

    fn sum(&mut self, o: &Counts) {
        self.blocks += o.blocks;
        self.fns += o.fns;
        self.impls += o.impls;
        self.send_sync += o.send_sync;
        self.traits += o.traits;
        self.other += o.other;
    }

    fn row(&self, name: &str) -> String {
        format!(
            "{name:<16} {:>6} {:>5} {:>6} {:>10} {:>6} {:>6}",
            self.blocks, self.fns, self.impls, self.send_sync, self.traits, self.other
        )
    }
}

/// The tokens of Rust source that matter here: identifiers and single
/// punctuation characters, with comments and literals dropped (a string
/// literal becomes `"`).
fn tokens(src: &str) -> Vec<String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if let Some(end) = raw_string_end(b, i) {
            out.push("\"".into());
            i = end;
        } else if c == b'"' || (c == b'b' || c == b'c') && b.get(i + 1) == Some(&b'"') {
            i += if c == b'"' { 1 } else { 2 };
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push("\"".into());
        } else if c == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let rest = &b[i + 1..];
            let len = if rest.first() == Some(&b'\\') {
                rest.iter().skip(1).position(|&x| x == b'\'').map(|p| p + 2)
            } else {
                let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                (rest.get(ch) == Some(&b'\'')).then_some(ch)
            };
            i += 1 + len.map_or(0, |l| l + 1);
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let s = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(src[s..i].to_string());
        } else {
            let ch = src[i..].chars().next().map_or(1, char::len_utf8);
            out.push(src[i..i + ch].to_string());
            i += ch;
        }
    }
    out
}

/// The end of a raw string literal (`r"…"`, `r#"…"#`, `br#"…"#`, `cr"…"`)
/// starting at `i`, if one starts there.
fn raw_string_end(b: &[u8], i: usize) -> Option<usize> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    let mut j = i;
    if matches!(b.get(j), Some(b'b' | b'c')) {
        j += 1;
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&x| x == b'#').count();
    j += hashes;
    if b.get(j) != Some(&b'"') {
        return None;
    }
    j += 1;
    let close: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    while j < b.len() {
        if b[j..].starts_with(&close) {
            return Some(j + close.len());
        }
        j += 1;
    }
    Some(b.len())
}

/// Classifies every `unsafe` keyword of one file.
fn classify(src: &str) -> Vec<Kind> {
    let t = tokens(src);
    let mut kinds = Vec::new();
    for (i, tok) in t.iter().enumerate() {
        if tok != "unsafe" {
            continue;
        }
        let next = |k: usize| t.get(i + k).map(String::as_str);
        let kind = match next(1) {
            Some("{") => Kind::Block,
            Some("fn") => Kind::Fn,
            Some("extern") => {
                // `unsafe extern "C" fn` (an ABI string may be left out).
                let after = if next(2) == Some("\"") { 3 } else { 2 };
                if next(after) == Some("fn") {
                    Kind::Fn
                } else {
                    Kind::Other
                }
            }
            Some("impl") => {
                // `unsafe impl<T> Send for …`: skip generic parameters.
                let mut k = 2;
                if next(k) == Some("<") {
                    let mut depth = 0;
                    while let Some(x) = next(k) {
                        k += 1;
                        match x {
                            "<" => depth += 1,
                            ">" => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                    }
                }
                match next(k) {
                    Some("Send" | "Sync") => Kind::SendSync,
                    _ => Kind::Impl,
                }
            }
            Some("trait") => Kind::Trait,
            _ => Kind::Other,
        };
        kinds.push(kind);
    }
    kinds
}

/// The crate (or test area) a tracked file belongs to.
fn area(path: &str) -> &'static str {
    const AREAS: [(&str, &str); 9] = [
        ("abi/", "abi"),
        ("os/", "os"),
        ("providers/sdk/", "sdk"),
        ("providers/shm/", "shm"),
        ("providers/ofi/", "ofi"),
        ("xtask/", "xtask"),
        ("src/", "core"),
        ("tests/", "tests"),
        ("build.rs", "core"),
    ];
    AREAS
        .iter()
        .find(|(p, _)| path.starts_with(p))
        .map_or("other", |(_, a)| a)
}

/// The Rust files git tracks under `root`, with their text.
fn sources(root: &Path) -> crate::Result<Vec<(String, String)>> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["ls-files", "-z", "--", "*.rs"])
        .output()
        .map_err(|e| format!("git ls-files: {e}"))?;
    if !out.status.success() {
        return Err("git ls-files failed".into());
    }
    String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|p| !p.is_empty())
        .map(|p| {
            std::fs::read_to_string(root.join(p))
                .map(|s| (p.to_string(), s))
                .map_err(|e| format!("reading {p}: {e}"))
        })
        .collect()
}

pub fn run(root: &Path) -> crate::Result {
    let mut per: BTreeMap<&str, Counts> = BTreeMap::new();
    for (path, src) in sources(root)? {
        let c = per.entry(area(&path)).or_default();
        for k in classify(&src) {
            c.add(k);
        }
    }
    println!(
        "{:<16} {:>6} {:>5} {:>6} {:>10} {:>6} {:>6}",
        "crate", "blocks", "fns", "impls", "Send/Sync", "traits", "other"
    );
    let (mut lib, mut all) = (Counts::default(), Counts::default());
    for (name, c) in &per {
        println!("{}", c.row(name));
        if !matches!(*name, "tests" | "xtask" | "other") {
            lib.sum(c);
        }
        all.sum(c);
    }
    println!("{}", lib.row("library total"));
    println!("{}", all.row("total"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Providers get `Send`/`Sync` from the SDK's types (the context
    /// handle, `Arc`s of their own objects), not by asserting it: the only
    /// ones left are libfabric's handles.
    #[test]
    fn providers_assert_send_and_sync_only_for_libfabric_handles() {
        for (path, src) in sources(&crate::root()).unwrap() {
            if !matches!(area(&path), "shm" | "ofi") {
                continue;
            }
            let n = classify(&src)
                .iter()
                .filter(|k| **k == Kind::SendSync)
                .count();
            let allowed = if path == "providers/ofi/src/fabric.rs" {
                4
            } else {
                0
            };
            assert!(n <= allowed, "{path}: {n} unsafe impls of Send/Sync");
        }
    }

    /// The workspace denies undocumented unsafe code, and every crate
    /// takes the workspace's lints.
    #[test]
    fn every_crate_inherits_the_unsafe_lints() {
        let root = crate::root();
        let top = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        assert!(top.contains("undocumented_unsafe_blocks = \"deny\""));
        assert!(top.contains("unsafe_op_in_unsafe_fn = \"deny\""));
        let members = top
            .split_once("members = [")
            .and_then(|(_, r)| r.split_once(']'))
            .unwrap()
            .0;
        for m in members.split(',').map(|m| m.trim().trim_matches('"')) {
            if m.is_empty() {
                continue;
            }
            let toml = std::fs::read_to_string(root.join(m).join("Cargo.toml")).unwrap();
            assert!(
                toml.contains("[lints]\nworkspace = true"),
                "{m}/Cargo.toml does not inherit the workspace lints"
            );
        }
    }

    #[test]
    fn kinds_are_told_apart() {
        let src = r##"
            // unsafe { in a comment }
            /* unsafe fn /* nested */ unsafe impl */
            const S: &str = "unsafe { }";
            const R: &str = r#"unsafe fn "quoted" "#;
            const C: char = '"';
            fn f<'a>(x: &'a u8) -> u8 { unsafe { *(x as *const u8) } }
            unsafe fn g() {}
            pub unsafe extern "C" fn h() {}
            unsafe impl Send for X {}
            unsafe impl<T: Copy> Sync for Y<T> {}
            unsafe impl GlobalAlloc for Z {}
            unsafe trait T {}
            #[unsafe(no_mangle)]
            fn i() {}
        "##;
        use Kind::*;
        assert_eq!(
            classify(src),
            [Block, Fn, Fn, SendSync, SendSync, Impl, Trait, Other]
        );
    }
}
