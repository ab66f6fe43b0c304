//! The installed libraries' symbol policy, applied to cargo's static library.
//!
//! Cargo's `libfi_xpu.a` exports every global symbol of the core, of std and
//! of its dependencies: two Rust static libraries in one program clash, and
//! nothing but `fi_xpu_*` is ours to export. Its `libfi_xpu.so` cannot carry
//! symbol versions (rustc adds its own, anonymous, version script). Both
//! installed libraries are therefore made here from one object:
//!
//! 1. `ld -r` links the members of `libfi_xpu.a` that the exported functions
//!    need into one relocatable object (references inside it are resolved
//!    there, so hiding a symbol afterwards breaks nothing);
//! 2. `objcopy --keep-global-symbols` makes every defined symbol but the
//!    exported ones local; LLVM's embedded bitcode is dropped (binutils' nm
//!    chokes on it through the LLVM plugin, and no linker uses it);
//! 3. the static library is that object alone; the shared library is that
//!    object linked with the version script `libfi_xpu.map`.
//!
//! The exported names are the version script's: one list, kept equal to the
//! core's `#[no_mangle]` functions by tests/install.rs.
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{describe, Result};

/// The names the version script exports (`global:` entries, no patterns).
pub fn map_exports(map: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut global = false;
    for line in map.lines() {
        let line = line.split("/*").next().unwrap_or("").trim();
        match line {
            "global:" => global = true,
            "local:" => global = false,
            _ if line.starts_with('}') || line.ends_with('{') => global = false,
            _ if global => {
                if let Some(name) = line.strip_suffix(';') {
                    out.push(name.trim().to_string());
                }
            }
            _ => {}
        }
    }
    out
}

fn tool(name: &str, args: &[&std::ffi::OsStr]) -> Result {
    let mut cmd = Command::new(name);
    cmd.args(args);
    let o = cmd
        .output()
        .map_err(|e| format!("`{}`: {e}", describe(&cmd)))?;
    if !o.status.success() {
        return Err(format!(
            "`{}` failed ({}): {}",
            describe(&cmd),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(())
}

/// What the toolchain says a program must link besides a Rust static
/// library (`rustc --print native-static-libs`), e.g. `-lgcc_s -lutil ...`.
pub fn native_static_libs(work: &Path) -> Result<Vec<String>> {
    crate::mkdir(work)?;
    let src = work.join("probe.rs");
    std::fs::write(&src, "").map_err(|e| format!("{}: {e}", src.display()))?;
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.args(["--crate-type", "staticlib", "--crate-name", "probe"])
        .args(["--print", "native-static-libs", "-o"])
        .arg(work.join("libprobe.a"))
        .arg(&src);
    let o = cmd
        .output()
        .map_err(|e| format!("`{}`: {e}", describe(&cmd)))?;
    let text = String::from_utf8_lossy(&o.stderr);
    let line = text
        .lines()
        .find_map(|l| l.split_once("native-static-libs:").map(|(_, r)| r))
        .ok_or(format!(
            "`{}` printed no native-static-libs: {text}",
            describe(&cmd)
        ))?;
    Ok(line.split_whitespace().map(String::from).collect())
}

/// The two installable libraries built from cargo's static library.
pub struct Libraries {
    pub static_lib: PathBuf,
    pub shared_lib: PathBuf,
}

/// Builds `work/libfi_xpu.a` and `work/<real>` (soname `soname`) from
/// cargo's `libfi_xpu.a` as described at the top of this file.
pub fn build(
    cargo_a: &Path,
    map: &Path,
    native: &[String],
    work: &Path,
    real: &str,
    soname: &str,
) -> Result<Libraries> {
    crate::mkdir(work)?;
    let text = std::fs::read_to_string(map).map_err(|e| format!("{}: {e}", map.display()))?;
    let exports = map_exports(&text);
    if exports.is_empty() {
        return Err(format!("{}: no exported names", map.display()));
    }
    let list = work.join("exports.txt");
    std::fs::write(&list, exports.join("\n") + "\n")
        .map_err(|e| format!("{}: {e}", list.display()))?;

    let linked = work.join("fi_xpu-linked.o");
    let mut args: Vec<std::ffi::OsString> = vec!["-r".into(), "-o".into(), linked.clone().into()];
    for name in &exports {
        args.push("-u".into());
        args.push(name.into());
    }
    args.push(cargo_a.into());
    tool(
        "ld",
        &args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>(),
    )?;

    let object = work.join("fi_xpu.o");
    let keep = format!("--keep-global-symbols={}", list.display());
    tool(
        "objcopy",
        &[
            keep.as_ref(),
            "--remove-section=.llvmbc".as_ref(),
            "--remove-section=.llvmcmd".as_ref(),
            linked.as_os_str(),
            object.as_os_str(),
        ],
    )?;

    let static_lib = work.join("libfi_xpu.a");
    let _ = std::fs::remove_file(&static_lib);
    tool(
        "ar",
        &["crs".as_ref(), static_lib.as_os_str(), object.as_os_str()],
    )?;

    let shared_lib = work.join(real);
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(cc);
    cmd.args(["-shared", "-o"])
        .arg(&shared_lib)
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(format!("-Wl,--version-script={}", map.display()))
        .args([
            "-Wl,--no-undefined",
            "-Wl,--no-undefined-version",
            "-Wl,--gc-sections",
            "-Wl,--eh-frame-hdr",
            "-Wl,-z,relro,-z,now",
            "-Wl,-z,noexecstack",
        ])
        .arg(&object)
        .args(native);
    let st = cmd
        .status()
        .map_err(|e| format!("`{}`: {e}", describe(&cmd)))?;
    if !st.success() {
        return Err(format!("`{}` failed ({st})", describe(&cmd)));
    }
    Ok(Libraries {
        static_lib,
        shared_lib,
    })
}

/// Splits `file`'s debug information into `debug` and strips `file`, which
/// keeps a `.gnu_debuglink` to it (gdb looks for it in `.debug/` beside the
/// file).
pub fn split_debug(file: &Path, debug: &Path) -> Result {
    tool(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            file.as_os_str(),
            debug.as_os_str(),
        ],
    )?;
    tool("strip", &["--strip-unneeded".as_ref(), file.as_os_str()])?;
    let link = format!("--add-gnu-debuglink={}", debug.display());
    tool("objcopy", &[link.as_ref(), file.as_os_str()])
}

/// Drops the debug information of a static library, keeping its symbols
/// (its global symbols are its interface).
pub fn strip_archive(file: &Path) -> Result {
    tool("strip", &["--strip-debug".as_ref(), file.as_os_str()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_exports_reads_global_names_only() {
        let map =
            "/* c */\nFI_XPU_0.1 {\n  global:\n    a; /* x */\n    b;\n  local:\n    *;\n};\n";
        assert_eq!(map_exports(map), ["a", "b"]);
        let shipped = std::fs::read_to_string(crate::root().join("libfi_xpu.map")).unwrap();
        let names = map_exports(&shipped);
        assert!(names.contains(&"fi_xpu_getinfo".to_string()), "{names:?}");
        assert!(names.iter().all(|n| n.starts_with("fi_xpu_")), "{names:?}");
    }
}
