//! The XPU counter: one `Cntr` block that the progress threads and the
//! host add to and kernels read.
use super::block::{tombstone, Block};
use super::word::at64;
use crate::core::{self, Ctx};
use crate::layout::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A counter: one `Cntr` block.
pub struct CntrShared {
    mem: Block,
}

impl CntrShared {
    pub fn open(ctx: Option<Ctx>) -> Result<Arc<CntrShared>> {
        let mem = Block::new(ctx, std::mem::size_of::<Cntr>())?;
        // SAFETY: fresh zeroed block of a Cntr, not shared yet.
        unsafe {
            let k = mem.addr as *mut Cntr;
            (*k).magic = fi_xpu_handle_word(FI_XPU_HANDLE_CNTR, FI_XPU_HANDLE_LIVE);
            (*k).abort = ctx.map_or(0, core::ctx_abort_word);
        };
        Ok(Arc::new(CntrShared { mem }))
    }

    pub fn dev(&self) -> *mut Cntr {
        self.mem.addr as *mut Cntr
    }

    fn c(&self) -> &Cntr {
        // SAFETY: the block lives as long as self.
        unsafe { &*self.dev() }
    }

    pub fn add(&self, v: u64) {
        at64(&self.c().value).fetch_add(v, Ordering::AcqRel);
    }

    pub fn add_err(&self, v: u64) {
        at64(&self.c().err).fetch_add(v, Ordering::AcqRel);
    }

    pub fn read(&self) -> (u64, u64) {
        (
            at64(&self.c().value).load(Ordering::Acquire),
            at64(&self.c().err).load(Ordering::Acquire),
        )
    }

    pub fn update(&self, how: u32, v: u64) -> Result<()> {
        let target = if how & FI_XPU_CNTR_ERR != 0 {
            &self.c().err
        } else {
            &self.c().value
        };
        match how & !FI_XPU_CNTR_ERR {
            FI_XPU_CNTR_ADD => {
                at64(target).fetch_add(v, Ordering::AcqRel);
            }
            FI_XPU_CNTR_SET => at64(target).store(v, Ordering::Release),
            _ => return Err(Error::INVAL),
        }
        Ok(())
    }
}

impl CntrShared {
    /// Device code refuses the counter's handle from now on.
    pub fn tombstone(&self) {
        tombstone(&self.c().magic);
    }
}

impl Drop for CntrShared {
    fn drop(&mut self) {
        self.tombstone();
    }
}
