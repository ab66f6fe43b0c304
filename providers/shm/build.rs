// Compiles the host progress agent's step (agent/agent.c) from the device
// header, so that the agent and device code share one implementation.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    for f in ["providers/shm/agent/agent.c", "include/fi_xpu", "fi_xpu.h"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    println!("cargo:rerun-if-env-changed=CC");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    let obj = out.join("agent.o");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(cc)
        .args([
            "-c", "-O2", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror",
        ])
        .arg("-I")
        .arg(&root)
        .arg("-I")
        .arg(root.join("include"))
        .arg(root.join("providers/shm/agent/agent.c"))
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("run the C compiler");
    assert!(st.success(), "compiling agent/agent.c failed");
    let lib = out.join("libxs_agent.a");
    let _ = std::fs::remove_file(&lib);
    let st = Command::new("ar")
        .arg("crs")
        .arg(&lib)
        .arg(&obj)
        .status()
        .expect("run ar");
    assert!(st.success(), "ar failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=xs_agent");
}
