//! Memory shared with device code: the blocks of CQs and counters (in the
//! XPU context for device objects, on the heap for host ones), the
//! context's list of retired blocks (closed objects' memory, kept mapped
//! until the context closes), and the tombstone that makes device code
//! refuse a closed object's handle.
use super::word::at64;
use crate::core::{self, Ctx};
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// Memory of a CQ or counter: in the XPU context for device objects, on the
/// heap for host ones.
pub struct Block {
    pub addr: usize,
    ctx: Option<Ctx>,
    layout: std::alloc::Layout,
}

impl Block {
    pub fn new(ctx: Option<Ctx>, size: usize) -> Result<Block> {
        let layout = std::alloc::Layout::from_size_align(size, 4096).map_err(|_| Error::INVAL)?;
        let addr = match ctx {
            Some(c) => core::alloc_host(c, size as u64)?,
            None => {
                // SAFETY: non-zero size.
                let p = unsafe { std::alloc::alloc_zeroed(layout) };
                if p.is_null() {
                    return Err(Error::NOMEM);
                }
                p as usize
            }
        };
        Ok(Block { addr, ctx, layout })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        match self.ctx {
            // An exported block: its validity word (the first word of a
            // CqDev, the third of a Cntr) was tombstoned by its owner; it
            // stays mapped until the context closes.
            Some(c) => retire(c, self.addr),
            // SAFETY: allocated above with this layout.
            None => unsafe { std::alloc::dealloc(self.addr as *mut u8, self.layout) },
        }
    }
}

/// Device memory of closed objects, per context: kept mapped, tombstoned,
/// until the context closes.
static RETIRED: Mutex<Vec<(Ctx, Vec<usize>)>> = Mutex::new(Vec::new());

pub fn retire(ctx: Ctx, addr: usize) {
    let mut r = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
    match r.iter_mut().find(|(c, _)| *c == ctx) {
        Some((_, v)) => v.push(addr),
        None => core::free(ctx, addr),
    }
}

/// Device code refuses the handle whose validity word is `word` from now on.
pub fn tombstone(word: &u64) {
    at64(word).store(fi_xpu_handle_word(0, FI_XPU_HANDLE_DEAD), Ordering::Release);
}

/// A context was opened: the blocks of its objects are retired, not freed,
/// until `free_retired`.
pub fn keep_retired(ctx: Ctx) {
    RETIRED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((ctx, Vec::new()));
}

/// The context closes: frees its retired blocks.
pub fn free_retired(ctx: Ctx) {
    let mut r = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = r.iter().position(|(c, _)| *c == ctx) {
        for a in r.swap_remove(i).1 {
            core::free(ctx, a);
        }
    }
}
