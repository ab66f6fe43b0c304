// Compiles the C shim over libfabric's inline calls. Without libfabric's
// headers (or with FI_XPU_OFI_NO_LIBFABRIC=1) the shim is built in its
// fallback form and the plugin refuses to initialise with -FI_ENODEV.
use std::path::PathBuf;
use std::process::Command;

fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".into())
}

fn have_libfabric(out: &std::path::Path) -> bool {
    if std::env::var_os("FI_XPU_OFI_NO_LIBFABRIC").is_some_and(|v| v == "1") {
        return false;
    }
    let probe = out.join("probe.c");
    std::fs::write(
        &probe,
        "#include <rdma/fabric.h>\n#include <rdma/fi_atomic.h>\nint main(void){return (int)fi_version() - 1 < 0;}\n",
    )
    .unwrap();
    Command::new(compiler())
        .arg(&probe)
        .args(cflags())
        .arg("-o")
        .arg(out.join("probe"))
        .args(libs())
        .status()
        .is_ok_and(|s| s.success())
}

fn pkg_config(arg: &str) -> Vec<String> {
    Command::new("pkg-config")
        .args([arg, "libfabric"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn cflags() -> Vec<String> {
    pkg_config("--cflags")
}

fn libs() -> Vec<String> {
    let l = pkg_config("--libs");
    if l.is_empty() {
        vec!["-lfabric".into()]
    } else {
        l
    }
}

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.c");
    println!("cargo:rerun-if-env-changed=FI_XPU_OFI_NO_LIBFABRIC");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo::rustc-check-cfg=cfg(ofi_libfabric)");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let found = have_libfabric(&out);
    let obj = out.join("shim.o");
    let mut cc = Command::new(compiler());
    cc.args([
        "-c", "-O2", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror",
    ])
    .arg("shim/shim.c")
    .arg("-o")
    .arg(&obj);
    if found {
        cc.args(cflags());
    } else {
        cc.arg("-DXO_NO_LIBFABRIC");
        println!("cargo:warning=libfabric headers not found: the ofi provider is built without it and will refuse to initialise");
    }
    let st = cc.status().expect("run the C compiler");
    assert!(st.success(), "compiling shim/shim.c failed");
    let lib = out.join("libxo_shim.a");
    let _ = std::fs::remove_file(&lib);
    let st = Command::new("ar")
        .arg("crs")
        .arg(&lib)
        .arg(&obj)
        .status()
        .expect("run ar");
    assert!(st.success(), "ar failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=xo_shim");
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
