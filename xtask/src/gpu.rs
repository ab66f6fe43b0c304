//! `cargo xtask gpu-bundle` and `cargo xtask gpu-check`: what a machine with
//! an NVIDIA GPU, nvcc and no Rust or network needs to prove fi_xpu there,
//! and the local run of that check.
//!
//! The bundle (`<out>/fi_xpu-gpu/` and `<out>/fi_xpu-gpu.tar.gz`):
//!   lib/libfi_xpu.so*, lib/fi_xpu/libfi_xpu-*.so   installed and stripped
//!   lib/libfabric.so.1 and the libraries it needs beyond glibc's
//!   include/                                       the public headers
//!   examples/*.[ch], examples/{cuda,moe}/*         example sources
//!   bin/fi_xpu_info, gpu-check.sh                  the check (gpu/gpu-check.sh)
//!   gpu/probe.cu, bin/fi_xpu_gpu_probe             the GPU probe (gpu/probe.cu), its
//!                                                  source and, where nvcc is found
//!                                                  here, its sm_90 build (stripped)
//!   gpu/moe_nvshmem.cu                             the MoE exchange over NVSHMEM, built
//!                                                  there against the nvidia-nvshmem wheel
use super::{install, install_file, mkdir, root, run, target_dir, write_file, Opts, Result};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bundle must fit what a GPU visit can carry.
pub const MAX_BUNDLE_BYTES: u64 = 64 << 20;

const SCRIPT: &str = include_str!("gpu/gpu-check.sh");

/// Sources the check builds or rebuilds on the GPU machine, under `gpu/`.
const GPU_SOURCES: &[&str] = &["probe.cu", "moe_nvshmem.cu"];

/// The CUDA compiler: `$NVCC`, `$FI_XPU_CUDA_HOME/bin/nvcc`, the newest
/// toolkit .ci/install-cuda unpacked into the cache, `nvcc` on PATH, or
/// /usr/local/cuda's.
pub fn find_nvcc() -> Option<PathBuf> {
    if let Some(n) = std::env::var_os("NVCC") {
        return Some(PathBuf::from(n));
    }
    if let Some(h) = std::env::var_os("FI_XPU_CUDA_HOME") {
        return Some(PathBuf::from(h).join("bin/nvcc"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    let cached = cache.and_then(|c| {
        fs::read_dir(c.join("fi_xpu"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin/nvcc"))
            .filter(|p| {
                p.is_file()
                    && p.parent()
                        .and_then(Path::parent)
                        .and_then(Path::file_name)
                        .is_some_and(|n| n.to_string_lossy().starts_with("cuda-"))
            })
            .max()
    });
    cached.or_else(|| {
        std::env::var_os("PATH")
            .into_iter()
            .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .map(|d| d.join("nvcc"))
            .chain([PathBuf::from("/usr/local/cuda/bin/nvcc")])
            .find(|p| p.is_file())
    })
}

/// The probe for sm_90 (H100, H200), warnings as errors, static CUDA
/// runtime, stripped; the check rebuilds it from gpu/probe.cu where this
/// one cannot run.
fn build_probe(nvcc: &Path, src: &Path, out: &Path) -> Result {
    run(Command::new(nvcc)
        .args(["-std=c++17", "-O2", "-arch=sm_90", "-cudart", "static"])
        .args([
            "-Werror",
            "all-warnings",
            "-Xcompiler",
            "-Wall,-Wextra,-Werror",
        ])
        .arg(src)
        .arg("-o")
        .arg(out))?;
    run(Command::new("strip").arg(out))
}

/// Libraries every Linux machine with a GPU driver has (glibc, the GCC
/// runtime); everything else the libraries in the bundle need is copied.
const SYSTEM_LIBS: &[&str] = &[
    "linux-vdso.so.1",
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
];

/// `soname => path` for every library `ldd` resolves for `file`.
fn needed(file: &Path) -> Result<BTreeMap<String, PathBuf>> {
    let out = Command::new("ldd")
        .arg(file)
        .output()
        .map_err(|e| format!("cannot run ldd: {e}"))?;
    if !out.status.success() {
        return Err(format!("ldd {} failed", file.display()));
    }
    let mut libs = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let mut words = line.split_whitespace();
        let (Some(name), Some("=>"), Some(path)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        if path == "not" {
            return Err(format!("{}: {name} not found", file.display()));
        }
        libs.insert(name.to_string(), PathBuf::from(path));
    }
    Ok(libs)
}

/// Copies into `lib` the non-system libraries that the bundle's shared
/// objects need, under their sonames; returns their names.
fn copy_runtime(lib: &Path, objects: &[PathBuf]) -> Result<Vec<String>> {
    let mut all = BTreeMap::new();
    for o in objects {
        all.extend(needed(o)?);
    }
    let mut copied = Vec::new();
    for (name, path) in all {
        let base = Path::new(&name).file_name().unwrap().to_string_lossy();
        if SYSTEM_LIBS.contains(&base.as_ref()) || name.starts_with("libfi_xpu") {
            continue;
        }
        install_file(&path, &lib.join(&name), 0o755)?;
        copied.push(name);
    }
    Ok(copied)
}

fn copy_dir(from: &Path, to: &Path, exts: &[&str]) -> Result<usize> {
    let mut n = 0;
    for entry in fs::read_dir(from).map_err(|e| format!("{}: {e}", from.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let ext = path.extension().map(|e| e.to_string_lossy().into_owned());
        if path.is_file() && ext.is_some_and(|e| exts.contains(&e.as_str())) {
            install_file(&path, &to.join(path.file_name().unwrap()), 0o644)?;
            n += 1;
        }
    }
    Ok(n)
}

fn tree_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .fold(0, |sum, e| {
            let meta = fs::symlink_metadata(e.path()).ok();
            sum + match meta {
                Some(m) if m.is_dir() => tree_bytes(&e.path()),
                Some(m) => m.len(),
                None => 0,
            }
        })
}

/// Builds the bundle; returns its directory.
pub fn bundle(o: &Opts) -> Result<PathBuf> {
    let out = o
        .value("--out")
        .map_or_else(|| target_dir().join("gpu-bundle"), super::abs);
    let dir = out.join("fi_xpu-gpu");
    let _ = fs::remove_dir_all(&dir);
    mkdir(&dir)?;
    let mut flags = Vec::new();
    if !o.flag("--debug") {
        flags.push("--release".to_string());
    }
    install::install(Opts {
        flags,
        values: vec![("--prefix".into(), dir.to_string_lossy().into_owned())],
    })?;
    // Not needed to build or run the examples.
    for extra in ["lib/libfi_xpu.a", "lib/cmake", "share"] {
        let p = dir.join(extra);
        let _ = fs::remove_file(&p).or_else(|_| fs::remove_dir_all(&p));
    }
    let lib = dir.join("lib");
    let mut objects = vec![lib.join("libfi_xpu.so")];
    for entry in fs::read_dir(lib.join("fi_xpu")).map_err(|e| e.to_string())? {
        objects.push(entry.map_err(|e| e.to_string())?.path());
    }
    let runtime = copy_runtime(&lib, &objects)?;
    let examples = copy_dir(&root().join("examples"), &dir.join("examples"), &["c", "h"])?
        + copy_dir(
            &root().join("examples/cuda"),
            &dir.join("examples/cuda"),
            &["cu", "h"],
        )?
        + copy_dir(
            &root().join("examples/moe"),
            &dir.join("examples/moe"),
            &["cu", "h"],
        )?;
    write_file(&dir.join("gpu-check.sh"), SCRIPT.as_bytes(), 0o755)?;
    mkdir(&dir.join("gpu"))?;
    for src in GPU_SOURCES {
        let from = root().join("xtask/src/gpu").join(src);
        install_file(&from, &dir.join("gpu").join(src), 0o644)?;
    }
    let probe = match find_nvcc() {
        Some(nvcc) if nvcc.is_file() => {
            build_probe(
                &nvcc,
                &dir.join("gpu/probe.cu"),
                &dir.join("bin/fi_xpu_gpu_probe"),
            )?;
            "prebuilt for sm_90"
        }
        _ => "source only (no nvcc here)",
    };

    let tarball = out.join("fi_xpu-gpu.tar.gz");
    run(Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&out)
        .arg("fi_xpu-gpu"))?;
    let (tree, packed) = (
        tree_bytes(&dir),
        fs::metadata(&tarball).map_or(0, |m| m.len()),
    );
    if tree > MAX_BUNDLE_BYTES || packed > MAX_BUNDLE_BYTES {
        return Err(format!(
            "bundle too large: {tree} bytes unpacked, {packed} packed (limit {MAX_BUNDLE_BYTES})"
        ));
    }
    println!(
        "gpu bundle: {} ({:.1} MiB; {} {:.1} MiB): {examples} example file(s), probe {probe}, runtime {}",
        dir.display(),
        tree as f64 / 1048576.0,
        tarball.display(),
        packed as f64 / 1048576.0,
        runtime.join(" ")
    );
    Ok(dir)
}

/// Why this machine cannot run the GPU check, or None if it has a GPU.
/// `FI_XPU_NVIDIA_SMI` names the nvidia-smi to ask (tests use it).
fn no_gpu_reason() -> Option<String> {
    let smi = std::env::var("FI_XPU_NVIDIA_SMI").unwrap_or_else(|_| "nvidia-smi".into());
    match Command::new(&smi).arg("-L").output() {
        Err(_) => Some(format!("{smi} not found (no NVIDIA driver)")),
        Ok(o) if !o.status.success() => Some(format!(
            "{smi} -L failed ({}): no usable NVIDIA GPU",
            o.status
        )),
        Ok(o) if !String::from_utf8_lossy(&o.stdout).contains("GPU ") => {
            Some(format!("{smi} -L lists no GPU"))
        }
        Ok(_) => None,
    }
}

/// Runs the bundle's check here if there is a GPU; otherwise says why not.
pub fn check(o: &Opts) -> Result {
    if let Some(why) = no_gpu_reason() {
        println!("gpu-check: skipped: {why}");
        return Ok(());
    }
    let dir = bundle(o)?;
    run(Command::new("bash").arg(dir.join("gpu-check.sh")))
}
