//! Opening a plugin file so that what is checked is what is loaded.
//!
//! The path is resolved once (symlinks included) and the resolved file is
//! opened once, with `O_NOFOLLOW`. Every check runs on that descriptor
//! (`fstat`, the ELF headers) and on each directory from the file's up to
//! `/`, and `dlopen` loads the very same descriptor through
//! `/proc/self/fd/N`. Swapping a symlink or a file between the checks and
//! the load therefore changes nothing: the swap either happens before the
//! open (and the swapped-in file is what gets checked) or after it (and the
//! checked file is what gets loaded).
//!
//! A file or directory is trusted when it is owned by root or by the
//! effective user and nobody else can write it. A directory that others may
//! write but that has the sticky bit (`/tmp`) is trusted when root owns it:
//! others cannot rename or remove what is in it.
use super::elf;
use std::fs::{File, Metadata};
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// An open, checked plugin file.
pub struct PluginFile {
    file: File,
    /// Its `fi_xpu` ELF note, read from the same descriptor.
    note: Option<elf::Note>,
}

impl PluginFile {
    /// Opens and checks `path`. The refusal says exactly why.
    pub fn open(path: &Path) -> Result<PluginFile, String> {
        let real = std::fs::canonicalize(path).map_err(|e| format!("cannot resolve: {e}"))?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&real)
            .map_err(|e| format!("cannot open {}: {e}", real.display()))?;
        let meta = file.metadata().map_err(|e| format!("cannot stat: {e}"))?;
        if !meta.is_file() {
            return Err("not a regular file".into());
        }
        trusted(&meta)?;
        if let Some(dir) = real.parent() {
            check_ancestors(dir)?;
        }
        let size = meta.len();
        let read = |offset, len| {
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, offset)?;
            Ok(buf)
        };
        elf::check(size, read)?;
        let note = elf::provider_note(size, read)?;
        let plugin = PluginFile { file, note };
        // Without /proc (a container that does not mount it) `dlopen`
        // would say only that the file does not exist.
        let via = plugin.load_path();
        if let Err(e) = std::fs::metadata(&via) {
            return Err(format!(
                "cannot reach it through {} ({e}): plugins are loaded through the \
                 descriptor that was checked, which needs /proc mounted",
                via.display()
            ));
        }
        Ok(plugin)
    }

    /// What the file's `fi_xpu` ELF note says, if it has one.
    pub fn note(&self) -> Option<&elf::Note> {
        self.note.as_ref()
    }

    /// The path through which `dlopen` loads this very descriptor.
    pub fn load_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    /// Keeps the descriptor open for the rest of the process once `dlopen`
    /// has seen it. The dynamic loader knows an object by the name it was
    /// opened under, `/proc/self/fd/N`; were N reused for the next plugin,
    /// `dlopen` would hand back the earlier object instead of loading it.
    ///
    /// The descriptor is let go of, not kept in a table: a table's lock,
    /// taken by a loading thread just after its `dlopen` (when a fork
    /// waiting for that `dlopen` goes ahead), would be inherited held by the
    /// child, whose own load would then wait for it forever.
    pub fn keep_open(self) {
        let _kept_for_the_process: RawFd = self.file.into_raw_fd();
    }
}

/// Owned by root or the effective user, writable by nobody else.
fn trusted(meta: &Metadata) -> Result<(), String> {
    let euid = fi_xpu_os::rustix::process::geteuid().as_raw();
    if meta.uid() != 0 && meta.uid() != euid {
        return Err(format!(
            "owned by uid {}, neither root nor the current user",
            meta.uid()
        ));
    }
    let sticky_root_dir = meta.is_dir() && meta.uid() == 0 && meta.mode() & libc::S_ISVTX != 0;
    if meta.mode() & 0o022 != 0 && !sticky_root_dir {
        return Err(format!(
            "writable by other users (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// A search directory: it and every directory above it are trusted.
pub fn check_dir(dir: &Path) -> Result<(), String> {
    let real = std::fs::canonicalize(dir).map_err(|e| format!("cannot resolve: {e}"))?;
    let meta = std::fs::metadata(&real).map_err(|e| format!("cannot stat: {e}"))?;
    trusted(&meta)?;
    match real.parent() {
        Some(parent) => check_ancestors(parent),
        None => Ok(()),
    }
}

/// `dir` (already resolved) and each directory above it up to `/`.
fn check_ancestors(dir: &Path) -> Result<(), String> {
    for d in dir.ancestors() {
        let meta = std::fs::symlink_metadata(d)
            .map_err(|e| format!("cannot stat {}: {e}", d.display()))?;
        if !meta.is_dir() {
            return Err(format!("{} is not a directory", d.display()));
        }
        trusted(&meta).map_err(|why| format!("{} is {why}", d.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_file_that_is_not_elf() {
        // The test binary's own directory is trusted in any sane checkout;
        // a source file in it is not a shared object.
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        match PluginFile::open(&src) {
            Err(e) => assert!(
                e == "not an ELF file (bad magic)" || e.starts_with("directory "),
                "{e}"
            ),
            Ok(_) => panic!("Cargo.toml accepted as a plugin"),
        }
    }
}
