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

/// The MPI bootstrap module (`libfi_xpu_bootstrap_mpi.so`).
pub fn mpi() -> Result<Box<dyn Bootstrap>> {
    crate::warn!("fi_xpu_world_open: the mpi bootstrap module is not built");
    Err(Error::NOSYS)
}
