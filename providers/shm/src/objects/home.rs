//! Where a CQ's or counter's words live (context memory or host memory),
//! and how an exported block ends its life.
use super::ctx::XpuCtx;
use crate::core;
use crate::domain::store;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::sync::Arc;

/// Host memory for host CQs and counters (no context to allocate from).
pub(super) struct HostBuf(Vec<u64>);

impl HostBuf {
    /// `bytes` zeroed, or `-FI_ENOMEM` when the process has not that much.
    pub(super) fn new(bytes: usize) -> Result<HostBuf> {
        let words = bytes.div_ceil(8);
        let mut v = Vec::new();
        v.try_reserve_exact(words).map_err(|_| {
            core::warn(&format!(
                "shm: no memory for {bytes} bytes of a host object"
            ));
            Error::NOMEM
        })?;
        v.resize(words, 0);
        Ok(HostBuf(v))
    }
    pub(super) fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }
}

/// Memory a CQ or counter lives in.
pub(super) enum Home {
    /// Device memory private to this process (see `local_alloc`).
    Local { ctx: Arc<XpuCtx>, addr: usize },
    /// Owns the memory; only its address is used.
    Host(#[allow(dead_code)] HostBuf),
}

pub(super) fn release(h: &Home) {
    match h {
        Home::Local { ctx, addr } => ctx.local_free(*addr),
        Home::Host(_) => {}
    }
}

/// Ends the life of an exported device block: its validity word at `word`
/// becomes the tombstone and the memory stays mapped (and out of reuse)
/// until the context closes, so a stale handle reads the tombstone, never
/// freed or reused memory.
pub(super) fn retire(h: &Home, word: usize) {
    match h {
        Home::Local { ctx, addr } => {
            // SAFETY: `word` is the validity word of the block, still
            // mapped (retired, not freed, just below).
            unsafe { store(word, fi_xpu_handle_word(0, FI_XPU_HANDLE_DEAD)) };
            ctx.retire_local(*addr);
        }
        Home::Host(_) => {}
    }
}
