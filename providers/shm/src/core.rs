//! The core's services as the rest of the provider uses them: the SDK's,
//! plus the shape of shm's own allocations.
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::services::mem_alloc;
pub use fi_xpu_prov_sdk::services::{
    ctx_abort_word, debug, import_dmabuf as import, mem_export as export, mem_free as free,
    mem_retire as retire, mem_unimport as unimport, warn, CoreCtx as Ctx,
};
use fi_xpu_prov_sdk::Result;
use std::os::fd::OwnedFd;

/// Allocates device memory, zeroed; `shared` asks for an exportable
/// (memfd) one.
pub fn alloc(ctx: Ctx, size: u64, shared: bool) -> Result<(usize, Option<OwnedFd>)> {
    let flags = if shared { FI_XPU_ALLOC_DMABUF } else { 0 };
    let a = mem_alloc(ctx, size, 64, flags)?;
    // SAFETY: a fresh allocation of `size` bytes, in host memory since shm
    // serves FI_HMEM_SYSTEM only; zeroing makes every shared structure start
    // in its empty state.
    unsafe { std::ptr::write_bytes(a.addr as *mut u8, 0, size as usize) };
    Ok((a.addr, a.fd))
}
