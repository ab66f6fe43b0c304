//! Bootstraps behind `struct fi_xpu_bootstrap_ops`: the application's own
//! (`fi_xpu_world_attr.bootstrap_ops`) or a bootstrap module's.
use super::Bootstrap;
use crate::error::{Error, Result};
use fi_xpu_abi::*;
use std::ffi::c_void;

pub struct Ops {
    ops: fi_xpu_bootstrap_ops,
    rank: usize,
    size: usize,
    failed: Option<Error>,
}

// SAFETY: the ops contract: the world calls them from one thread at a time,
// which need not be the thread that made them.
unsafe impl Send for Ops {}

/// Fields of `fi_xpu_bootstrap_ops` up to and including `finalize`.
const OPS_V1: usize = std::mem::size_of::<fi_xpu_bootstrap_ops>();

impl Ops {
    /// Takes a copy of the application's or module's ops, checked.
    ///
    /// # Safety
    /// `p` is NULL or points to a struct of at least its `size` field's
    /// bytes whose functions may be called as documented.
    pub unsafe fn from_raw(p: *const fi_xpu_bootstrap_ops) -> Result<Ops> {
        // SAFETY: the caller's contract.
        let o = unsafe { p.as_ref() }.ok_or(Error::INVAL)?;
        if o.size < OPS_V1
            || o.allgather.is_none()
            || o.nranks <= 0
            || o.rank < 0
            || o.rank >= o.nranks
        {
            crate::warn!(
                "world: bootstrap ops refused (size {}, rank {} of {}, allgather {})",
                o.size,
                o.rank,
                o.nranks,
                if o.allgather.is_some() {
                    "set"
                } else {
                    "missing"
                }
            );
            return Err(Error::INVAL);
        }
        Ok(Ops {
            ops: fi_xpu_bootstrap_ops {
                size: OPS_V1,
                rank: o.rank,
                nranks: o.nranks,
                context: o.context,
                allgather: o.allgather,
                finalize: o.finalize,
            },
            rank: o.rank as usize,
            size: o.nranks as usize,
            failed: None,
        })
    }
}

impl Bootstrap for Ops {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<u8>> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let mut all = vec![0u8; mine.len() * self.size];
        let f = self.ops.allgather.expect("checked in from_raw");
        // SAFETY: the ops' contract; `mine` and `all` are valid for the
        // lengths passed.
        let rc = unsafe {
            f(
                self.ops.context,
                mine.as_ptr() as *const c_void,
                all.as_mut_ptr() as *mut c_void,
                mine.len(),
            )
        };
        if let Err(e) = Error::check(rc) {
            self.failed = Some(e);
            return Err(e);
        }
        Ok(all)
    }
}

impl Drop for Ops {
    fn drop(&mut self) {
        if let Some(f) = self.ops.finalize {
            // SAFETY: the ops' contract: called once, at the end.
            unsafe { f(self.ops.context) }
        }
    }
}

/// File name of the MPI bootstrap module. Not `libfi_xpu-<name>.so`, so the
/// provider loader never takes it for a plugin.
pub const MPI_MODULE: &str = "fi_xpu_bootstrap_mpi.so";

/// The MPI bootstrap module, found in the provider search directories and
/// opened with the plugins' checks (one open, trusted file and
/// directories, ELF validated, loaded through the same descriptor).
/// `RTLD_GLOBAL`: Open MPI loads components of its own that resolve
/// libmpi's symbols globally.
pub fn mpi() -> Result<Box<dyn Bootstrap>> {
    let (dirs, _) = crate::provider::loader::search_dirs();
    let Some(path) = dirs.iter().map(|d| d.join(MPI_MODULE)).find(|p| p.exists()) else {
        crate::warn!(
            "fi_xpu_world_open: the mpi bootstrap needs {MPI_MODULE}, found in no provider directory (built where MPI is installed)"
        );
        return Err(Error::NOSYS);
    };
    let refuse = |why: String| {
        crate::warn!("{}: {why}", path.display());
        Error::NOSYS
    };
    if let Some(dir) = path.parent() {
        crate::provider::plugin_file::check_dir(dir)
            .map_err(|e| refuse(format!("directory refused: {e}")))?;
    }
    let file = crate::provider::plugin_file::PluginFile::open(&path).map_err(refuse)?;
    let lib = crate::dl::Library::open_global(&file.load_path())
        .map_err(|why| refuse(format!("cannot load: {why}")))?;
    file.keep_open();
    type Init = unsafe extern "C" fn(*mut fi_xpu_bootstrap_ops) -> std::ffi::c_int;
    // SAFETY: the module's documented entry point has this type.
    let init = unsafe { lib.function::<Init>("fi_xpu_bootstrap_mpi_init") }
        .ok_or_else(|| refuse("no symbol fi_xpu_bootstrap_mpi_init".into()))?;
    lib.keep();
    let mut ops = fi_xpu_bootstrap_ops {
        size: OPS_V1,
        rank: 0,
        nranks: 0,
        context: std::ptr::null_mut(),
        allgather: None,
        finalize: None,
    };
    // SAFETY: `ops` is a valid struct of the size it says.
    Error::check(unsafe { init(&mut ops) })?;
    // SAFETY: filled in by the module, which stays loaded.
    Ok(Box::new(unsafe { Ops::from_raw(&ops) }?))
}
