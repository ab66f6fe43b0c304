//! Staging of a build directory so programs run from it: each provider cdylib
//! `libfi_xpu_<name>.so` (cargo's name) is copied to `libfi_xpu-<name>.so`
//! (the name the plugin loader accepts), and the soname `libfi_xpu.so.0`
//! links to the library. Shared by xtask and the integration tests.
//!
//! Every file is written beside its final name and renamed over it, so a
//! program that has the old plugin mapped keeps its pages (rewriting the file
//! in place would change code under running programs).
use std::io;
use std::path::{Path, PathBuf};

/// `(name, path)` of every provider cdylib cargo left in `dir`.
pub fn provider_artifacts(dir: &Path) -> io::Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file = entry.file_name().to_string_lossy().into_owned();
        if let Some(name) = file
            .strip_prefix("libfi_xpu_")
            .and_then(|f| f.strip_suffix(".so"))
        {
            out.push((name.to_string(), entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// Stages `dir`; returns the staged plugin paths.
pub fn stage(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let part = |name: &str| dir.join(format!(".{name}.{}.part", std::process::id()));
    let link = part("libfi_xpu.so.0");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("libfi_xpu.so", &link)?;
    std::fs::rename(&link, dir.join("libfi_xpu.so.0"))?;
    let mut staged = Vec::new();
    for (name, path) in provider_artifacts(dir)? {
        let file = format!("libfi_xpu-{name}.so");
        let tmp = part(&file);
        std::fs::copy(&path, &tmp)?;
        std::fs::rename(&tmp, dir.join(&file))?;
        staged.push(dir.join(file));
    }
    Ok(staged)
}

/// File name of the MPI bootstrap module (not `libfi_xpu-<name>.so`: the
/// plugin loader never takes it for a provider).
pub const MPI_MODULE: &str = "fi_xpu_bootstrap_mpi.so";

/// Builds the MPI bootstrap module (`modules/bootstrap_mpi.c` under
/// `root`) into `dir` with MPI's compiler wrapper, when `mpicc` is there;
/// `None` without MPI. Rebuilt only when its source or `fi_xpu.h` is newer.
pub fn mpi_module(root: &Path, dir: &Path) -> io::Result<Option<PathBuf>> {
    let have = std::process::Command::new("mpicc")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        return Ok(None);
    }
    let src = root.join("modules/bootstrap_mpi.c");
    let out = dir.join(MPI_MODULE);
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let newest = [mtime(&src), mtime(&root.join("fi_xpu.h"))]
        .into_iter()
        .flatten()
        .max();
    if matches!((mtime(&out), newest), (Some(o), Some(n)) if o >= n) {
        return Ok(Some(out));
    }
    let tmp = dir.join(format!(".{MPI_MODULE}.{}.part", std::process::id()));
    let o = std::process::Command::new("mpicc")
        .args([
            "-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
        ])
        .arg(format!("-I{}", root.display()))
        .arg(format!("-I{}", root.join("include").display()))
        .arg(&src)
        .arg("-o")
        .arg(&tmp)
        .output()?;
    if !o.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(io::Error::other(format!(
            "mpicc {}: {}",
            src.display(),
            String::from_utf8_lossy(&o.stderr)
        )));
    }
    std::fs::rename(&tmp, &out)?;
    Ok(Some(out))
}
