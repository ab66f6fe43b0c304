//! Test support: where the CUDA headers are, for the tests that compile
//! against `cuda.h` (the CUDA backend's layout check, and the driver test
//! double of tests/vendor_memory.rs, which includes this file).
use std::path::PathBuf;

/// $FI_XPU_CUDA_HOME/include, else the newest toolkit .ci/install-cuda put
/// in the cache.
pub fn cuda_include() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("FI_XPU_CUDA_HOME") {
        return Some(PathBuf::from(d).join("include"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?
        .join("fi_xpu");
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("include/cuda.h").is_file())
        .collect();
    found.sort();
    found.pop().map(|p| p.join("include"))
}
