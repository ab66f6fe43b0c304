//! Where the vendors' device compilers are, and what happens when one is
//! missing: NVIDIA's toolkit (nvcc, ptxas, NVRTC) from the PyPI wheels that
//! `.ci/install-cuda` unpacks into a cache directory, Debian's `hipcc`.
use super::common::{cache, have, root};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to 1, a missing compiler skips its part of the matrix instead of
/// failing it.
pub const SKIP_VAR: &str = "FI_XPU_SKIP_DEVICE_MATRIX";

/// `true` when `found`; otherwise `false` if the matrix may be skipped
/// (FI_XPU_SKIP_DEVICE_MATRIX=1), else a panic that says how to install it.
pub fn require(found: bool, what: &str, install: &str) -> bool {
    if found {
        return true;
    }
    if std::env::var(SKIP_VAR).as_deref() == Ok("1") {
        eprintln!("device matrix: {what} skipped (not found, {SKIP_VAR}=1)");
        return false;
    }
    panic!(
        "{what} is needed for the device compile matrix ({install}); set {SKIP_VAR}=1 to skip it"
    );
}

/// The nvcc version pinned in .ci/cuda-wheels.txt.
fn pinned_cuda_version() -> String {
    let pins = std::fs::read_to_string(root().join(".ci/cuda-wheels.txt")).unwrap();
    pins.lines()
        .find_map(|l| l.strip_prefix("nvidia-cuda-nvcc=="))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("nvidia-cuda-nvcc pin in .ci/cuda-wheels.txt")
        .to_string()
}

/// The CUDA toolkit: $FI_XPU_CUDA_HOME, else the directory .ci/install-cuda
/// installs the pinned version into.
pub fn cuda_home() -> Option<PathBuf> {
    let dir = match std::env::var_os("FI_XPU_CUDA_HOME") {
        Some(d) => PathBuf::from(d),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
            cache.join(format!("fi_xpu/cuda-{}", pinned_cuda_version()))
        }
    };
    dir.join("bin/nvcc").is_file().then_some(dir)
}

/// The toolkit, or `None` after `require` allowed skipping it.
pub fn cuda_or_skip(what: &str) -> Option<PathBuf> {
    let home = cuda_home();
    require(
        home.is_some(),
        what,
        "run .ci/install-cuda, or point FI_XPU_CUDA_HOME at a CUDA 13 toolkit",
    )
    .then(|| home.unwrap())
}

/// Debian's hipcc (ROCm 5.2, driving clang 15), or `false` after `require`.
pub fn hipcc_or_skip() -> bool {
    require(
        have("hipcc"),
        "hipcc",
        "apt install hipcc libamdhip64-dev rocm-device-libs",
    )
}

/// Output of a compiler run that must succeed without a diagnostic.
pub fn run_clean(cmd: &mut Command, what: &str) -> String {
    let o = super::jobs::output(cmd).unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{what}: {cmd:?} failed\n{text}");
    let diag = text
        .lines()
        .find(|l| l.contains("warning") || l.contains("error"));
    assert!(diag.is_none(), "{what}: diagnostic from {cmd:?}\n{text}");
    text
}

/// `run_clean` of a compile (`cmd`, without its `-o`) into `out`, kept by
/// content in the build directory's compile cache (tests/common/cache.rs):
/// a later run of the same compile, here or in another run of the matrix,
/// takes the kept output and messages instead of compiling again. Only
/// clean compiles are kept. Returns the compiler's messages.
pub fn clean_kept(cmd: &mut Command, out: &Path, what: &str) -> String {
    cache::kept(cmd, "", out, |cmd, to| {
        run_clean(cmd.arg("-o").arg(to), what)
    })
}
