// Compiles the C shim over libfabric's inline calls. Without libfabric's
// headers (or with FI_XPU_OFI_NO_LIBFABRIC=1) the shim is built in its
// fallback form and the plugin refuses to initialise with -FI_ENODEV.
//
// What the probe looked at is handed to cargo as rerun conditions, so that
// installing libfabric after a first build (or moving it) rebuilds the
// plugin with it: found, the exact headers and .pc file used; not found,
// the compiler's include directories and pkg-config's search directories
// (installing a package changes them); always, the environment variables
// that steer the compiler and pkg-config.
//
// The `cc` crate finds and configures the C compiler (CC, CFLAGS, the
// target's flags) and archives the shim; the `pkg-config` crate asks
// pkg-config (PKG_CONFIG, PKG_CONFIG_PATH, ...) about libfabric.
use std::path::{Path, PathBuf};
use std::process::Command;

/// Variables that change what the probe finds.
const PROBE_ENV: &[&str] = &[
    "FI_XPU_OFI_NO_LIBFABRIC",
    "CC",
    "CPATH",
    "C_INCLUDE_PATH",
    "LIBRARY_PATH",
    "PKG_CONFIG",
    "PKG_CONFIG_PATH",
    "PKG_CONFIG_LIBDIR",
    "PKG_CONFIG_SYSROOT_DIR",
];

/// The C compiler as `cc` configures it for the target.
fn compiler() -> Command {
    cc::Build::new().get_compiler().to_command()
}

/// Whether libfabric's headers and library work; on success also the
/// libfabric headers the probe read (from the compiler's dependency file).
fn probe(out: &Path) -> Option<Vec<PathBuf>> {
    if std::env::var_os("FI_XPU_OFI_NO_LIBFABRIC").is_some_and(|v| v == "1") {
        return None;
    }
    let probe = out.join("probe.c");
    let deps = out.join("probe.d");
    std::fs::write(
        &probe,
        "#include <rdma/fabric.h>\n#include <rdma/fi_atomic.h>\nint main(void){return (int)fi_version() - 1 < 0;}\n",
    )
    .unwrap();
    let ok = compiler()
        .arg(&probe)
        .args(cflags())
        .arg("-MD")
        .arg("-MF")
        .arg(&deps)
        .arg("-o")
        .arg(out.join("probe"))
        .args(libs())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return None;
    }
    let text = std::fs::read_to_string(&deps).unwrap_or_default();
    Some(libfabric_headers(&text))
}

/// The `rdma/` headers named in a make-style dependency file.
fn libfabric_headers(deps: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = deps
        .split_whitespace()
        .filter(|w| w.contains("/rdma/") && w.ends_with(".h"))
        .map(PathBuf::from)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The directories `#include <...>` searches, as the compiler reports them.
fn include_dirs() -> Vec<PathBuf> {
    let Ok(o) = compiler()
        .args(["-xc", "-E", "-v", "/dev/null"])
        .args(cflags())
        .output()
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&o.stderr);
    text.lines()
        .skip_while(|l| !l.starts_with("#include <...>"))
        .skip(1)
        .take_while(|l| !l.starts_with("End of search list"))
        .map(|l| PathBuf::from(l.trim().trim_end_matches(" (framework directory)")))
        .collect()
}

/// pkg-config's search directories: `PKG_CONFIG_PATH` then its default
/// path (or `PKG_CONFIG_LIBDIR`, which replaces it).
fn pkg_config_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(p) = std::env::var_os("PKG_CONFIG_PATH") {
        dirs.extend(std::env::split_paths(&p));
    }
    match std::env::var_os("PKG_CONFIG_LIBDIR") {
        Some(p) => dirs.extend(std::env::split_paths(&p)),
        None => {
            if let Ok(s) = pkg_config::get_variable("pkg-config", "pc_path") {
                dirs.extend(std::env::split_paths(&s));
            }
        }
    }
    dirs
}

/// libfabric as pkg-config describes it; nothing is printed for cargo
/// here (the link lines follow the probe's verdict).
fn libfabric() -> Option<pkg_config::Library> {
    pkg_config::Config::new()
        .cargo_metadata(false)
        .env_metadata(false)
        .print_system_cflags(true)
        .print_system_libs(true)
        .probe("libfabric")
        .ok()
}

fn cflags() -> Vec<String> {
    let Some(l) = libfabric() else {
        return Vec::new();
    };
    let mut out: Vec<String> = l
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()))
        .collect();
    for (k, v) in &l.defines {
        out.push(match v {
            Some(v) => format!("-D{k}={v}"),
            None => format!("-D{k}"),
        });
    }
    out
}

fn libs() -> Vec<String> {
    match libfabric() {
        Some(l) => l
            .link_paths
            .iter()
            .map(|p| format!("-L{}", p.display()))
            .chain(l.libs.iter().map(|n| format!("-l{n}")))
            .collect(),
        None => vec!["-lfabric".into()],
    }
}

fn rerun_if_changed(path: &Path) {
    println!("cargo:rerun-if-changed={}", path.display());
}

/// Rerun conditions for what the probe saw (see the top of this file).
/// Only existing paths: cargo reruns a script on every build while a path
/// it watches is missing.
fn watch(found: Option<&[PathBuf]>) {
    for var in PROBE_ENV {
        println!("cargo:rerun-if-env-changed={var}");
    }
    match found {
        Some(headers) => {
            for h in headers {
                rerun_if_changed(h);
            }
            if let Ok(dir) = pkg_config::get_variable("libfabric", "pcfiledir") {
                let pc = Path::new(&dir).join("libfabric.pc");
                if pc.is_file() {
                    rerun_if_changed(&pc);
                }
            }
        }
        None => {
            for dir in include_dirs().iter().chain(&pkg_config_dirs()) {
                if dir.is_dir() {
                    rerun_if_changed(dir);
                }
            }
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo::rustc-check-cfg=cfg(ofi_libfabric)");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let headers = probe(&out);
    watch(headers.as_deref());
    let found = headers.is_some();
    let mut shim = cc::Build::new();
    shim.file("shim/shim.c")
        .std("c11")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true);
    if found {
        for f in cflags() {
            shim.flag(&f);
        }
    } else {
        shim.define("XO_NO_LIBFABRIC", None);
        println!("cargo:warning=libfabric headers not found: the ofi provider is built without it and will refuse to initialise");
    }
    shim.compile("xo_shim");
    if found {
        println!("cargo:rustc-cfg=ofi_libfabric");
        for l in libs() {
            if let Some(name) = l.strip_prefix("-l") {
                println!("cargo:rustc-link-lib=dylib={name}");
            } else if let Some(dir) = l.strip_prefix("-L") {
                println!("cargo:rustc-link-search=native={dir}");
            }
        }
    }
}
