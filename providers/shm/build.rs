// Compiles the host progress agent's step (agent/agent.c) from the device
// header, so that the agent and device code share one implementation.
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../..");
    for f in ["providers/shm/agent/agent.c", "include/fi_xpu", "fi_xpu.h"] {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    // `cc` honours CC/CFLAGS (and reruns when they change), adds -fPIC,
    // archives the object and tells cargo to link it.
    cc::Build::new()
        .file(root.join("providers/shm/agent/agent.c"))
        .include(&root)
        .include(root.join("include"))
        .std("c11")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("xs_agent");
}
