//! The core's services as the rest of the provider uses them: the SDK's,
//! plus the shape of ofi's own allocations.
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::services::mem_alloc;
pub use fi_xpu_prov_sdk::services::{
    ctx_abort_word, info, mem_free as free, mem_known, warn, CoreCtx as Ctx,
};
use fi_xpu_prov_sdk::Result;

/// Host-visible memory of the context `ctx`, zeroed.
pub fn alloc_host(ctx: Ctx, size: u64) -> Result<usize> {
    let a = mem_alloc(ctx, size, 4096, FI_XPU_ALLOC_HOST)?.addr;
    // SAFETY: a fresh allocation of `size` bytes that the host can reach;
    // zero is the empty state of every structure placed there.
    unsafe { std::ptr::write_bytes(a as *mut u8, 0, size as usize) };
    Ok(a)
}
