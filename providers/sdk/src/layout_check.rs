//! Field-by-field check of the layouts a provider shares with its C device
//! header: every struct both sides read has one definition in Rust, and the
//! C mirror in `include/fi_xpu/device_<prov>.h` is compared with it, offset
//! by offset, by compiling a C program against the header (for the
//! providers' unit tests).
use std::path::{Path, PathBuf};
use std::process::Command;

/// One checked item: a C struct and one of its fields (`None`: its size),
/// with the value Rust computes for it (`offset_of!` / `size_of`).
pub struct Item {
    pub rust_struct: &'static str,
    pub c_struct: &'static str,
    pub c_field: Option<&'static str>,
    pub rust: usize,
}

/// `(Rust struct = "C struct" { field, ... })...`: the size and every named
/// field's offset, as `Item`s. Field names are the same on both sides.
#[macro_export]
macro_rules! layout_items {
    ($($rs:ident = $cs:literal { $($f:ident),* $(,)? })*) => {{
        let mut v: Vec<$crate::layout_check::Item> = Vec::new();
        $(
            v.push($crate::layout_check::Item {
                rust_struct: stringify!($rs),
                c_struct: $cs,
                c_field: None,
                rust: std::mem::size_of::<$rs>(),
            });
            $(
                v.push($crate::layout_check::Item {
                    rust_struct: stringify!($rs),
                    c_struct: $cs,
                    c_field: Some(stringify!($f)),
                    rust: std::mem::offset_of!($rs, $f),
                });
            )*
        )*
        v
    }};
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Compiles and runs a C program that includes `header` (relative to
/// `include/`) and prints what C says for each item; returns the items
/// where C and Rust disagree, as readable lines (empty: identical).
pub fn mismatches(header: &str, items: &[Item], scratch: &Path) -> Vec<String> {
    let mut src = format!(
        "#include <stddef.h>\n#include <stdio.h>\n#include <{header}>\nint main(void)\n{{\n"
    );
    for it in items {
        let expr = match it.c_field {
            Some(f) => format!("offsetof(struct {}, {f})", it.c_struct),
            None => format!("sizeof(struct {})", it.c_struct),
        };
        src += &format!("\tprintf(\"%zu\\n\", (size_t){expr});\n");
    }
    src += "\treturn 0;\n}\n";
    std::fs::create_dir_all(scratch).unwrap();
    let c = scratch.join("layout.c");
    let exe = scratch.join("layout");
    std::fs::write(&c, src).unwrap();
    let o = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", root().display()))
        .arg(format!("-I{}", root().join("include").display()))
        .arg(&c)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run cc");
    assert!(
        o.status.success(),
        "cc: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(&exe).output().expect("run layout program");
    let out = String::from_utf8(o.stdout).unwrap();
    let c_vals: Vec<usize> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(c_vals.len(), items.len());
    items
        .iter()
        .zip(c_vals)
        .filter(|(it, c)| it.rust != *c)
        .map(|(it, c)| {
            format!(
                "struct {}{}: C {c}, Rust {}",
                it.c_struct,
                it.c_field.map(|f| format!(".{f}")).unwrap_or_default(),
                it.rust
            )
        })
        .collect()
}

/// The named (not `_`-prefixed) fields of every `pub struct` in a Rust
/// source, so that a field added on the Rust side without its C mirror
/// (or a check) is noticed.
pub fn rust_fields(source: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for l in source.lines() {
        let t = l.trim();
        if let Some(rest) = t.strip_prefix("pub struct ") {
            cur = rest
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .map(String::from)
                .filter(|_| t.ends_with('{'));
        } else if t == "}" {
            cur = None;
        } else if let (Some(s), Some(rest)) = (&cur, t.strip_prefix("pub ")) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.starts_with('_') && rest[name.len()..].starts_with(':') {
                out.push((s.clone(), name));
            }
        }
    }
    out
}

/// The checks of one provider: C agrees with Rust on every item, and every
/// named field of every `pub struct` of `rust_source` is an item. Panics
/// with the differences.
pub fn check(header: &str, rust_source: &str, items: &[Item]) {
    let dir = std::env::temp_dir().join(format!(
        "fi_xpu-layout-{}-{}",
        header.replace('/', "_"),
        std::process::id()
    ));
    let bad = mismatches(header, items, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        bad.is_empty(),
        "{header} disagrees with the Rust layout: {bad:#?}"
    );
    let unchecked: Vec<String> = rust_fields(rust_source)
        .into_iter()
        .filter(|(s, f)| {
            !items
                .iter()
                .any(|it| it.rust_struct == s && it.c_field == Some(f.as_str()))
        })
        .map(|(s, f)| format!("{s}.{f}"))
        .collect();
    assert!(
        unchecked.is_empty(),
        "fields shared with {header} but not checked against it: {unchecked:?}"
    );
}
