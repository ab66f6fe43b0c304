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
