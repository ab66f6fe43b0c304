//! The core's services as the rest of the provider uses them: the SDK's,
//! plus the shape of shm's own allocations and the host's way into a
//! context's device memory.
//!
//! Where things live (fi_xpu_shm(7) MEMORY PLACEMENT): a context's heap,
//! which peers write (inboxes, remote CQ rings, remote counter words), is
//! the context's device memory; what only its own process follows
//! pointers through is private. On an `FI_HMEM_SYSTEM` context both are
//! host memory and the host reaches them with plain loads and stores. On a
//! device context (`FI_HMEM_CUDA` through the built-in backend) the heap is
//! device memory the host reaches only through `heap_*` below (the core's
//! `mem_access`: the backend's own non-blocking stream), and private blocks
//! are pinned host memory (`FI_XPU_ALLOC_HOST`) the host writes directly.
use fi_xpu_abi::*;
pub use fi_xpu_prov_sdk::services::{
    ctx_abort_word, ctx_device_uuid, debug, import_dmabuf as import, mem_export as export,
    mem_export_ipc as export_ipc, mem_free as free, mem_import_ipc as import_ipc,
    mem_known as known, mem_retire as retire, mem_unimport as unimport, warn, CoreCtx as Ctx,
};
use fi_xpu_prov_sdk::services::{mem_access, mem_alloc};
use fi_xpu_prov_sdk::Result;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of a legacy IPC handle.
pub const IPC_HANDLE: usize = FI_XPU_IPC_HANDLE_SIZE;

/// Whether the context's memory is device memory the host must reach
/// through the core (`mem_access` answers its probe), rather than host
/// memory it loads from and stores to.
pub fn device_memory(ctx: Ctx) -> bool {
    // SAFETY: a probe (size 0) touches no memory.
    unsafe { mem_access(ctx, FI_XPU_MEM_ACCESS_READ, 0, std::ptr::null_mut(), 0, 0) }.is_ok()
}

/// Allocates memory of the context, zeroed. `shared` asks for an
/// exportable one (an fd peers map): the heap, device memory on a device
/// context. Otherwise private memory, which the host initialises through
/// pointers: pinned host memory on a device context.
pub fn alloc(ctx: Ctx, size: u64, shared: bool) -> Result<(usize, Option<OwnedFd>)> {
    let device = device_memory(ctx);
    let flags = match (shared, device) {
        (true, _) => FI_XPU_ALLOC_DMABUF,
        (false, true) => FI_XPU_ALLOC_HOST,
        (false, false) => 0,
    };
    let a = mem_alloc(ctx, size, 64, flags)?;
    if shared && device {
        if let Err(e) = heap_zero(ctx, a.addr, size) {
            free(ctx, a.addr);
            return Err(e);
        }
    } else {
        // SAFETY: a fresh allocation of `size` bytes in host memory (an
        // `FI_HMEM_SYSTEM` context's, or pinned); zeroing makes every
        // structure start in its empty state.
        unsafe { std::ptr::write_bytes(a.addr as *mut u8, 0, size as usize) };
    }
    Ok((a.addr, a.fd))
}

/// Allocates `size` bytes, zeroed, that only the context's kernels touch
/// once the host has zeroed them (the resolve table): device memory,
/// which no peer maps, on a device context; host memory of the context
/// otherwise.
pub fn alloc_device_only(ctx: Ctx, size: u64) -> Result<usize> {
    if !device_memory(ctx) {
        return alloc(ctx, size, false).map(|(a, _)| a);
    }
    let a = mem_alloc(ctx, size, 64, 0)?;
    if let Err(e) = heap_zero(ctx, a.addr, size) {
        free(ctx, a.addr);
        return Err(e);
    }
    Ok(a.addr)
}

/// Zeroes `[addr, addr + len)` of the context's heap.
pub fn heap_zero(ctx: Ctx, addr: usize, len: u64) -> Result<()> {
    if device_memory(ctx) {
        // SAFETY: SET reads no host memory; the core checks the range.
        return unsafe {
            mem_access(
                ctx,
                FI_XPU_MEM_ACCESS_SET,
                addr,
                std::ptr::null_mut(),
                len,
                0,
            )
        };
    }
    // SAFETY: host memory of the context's heap (the caller's range).
    unsafe { std::ptr::write_bytes(addr as *mut u8, 0, len as usize) };
    Ok(())
}

/// Copies `bytes` to `addr` in the context's heap.
pub fn heap_write(ctx: Ctx, addr: usize, bytes: &[u8]) -> Result<()> {
    if device_memory(ctx) {
        // SAFETY: `bytes` is readable for its length; the core checks the
        // device range.
        return unsafe {
            mem_access(
                ctx,
                FI_XPU_MEM_ACCESS_WRITE,
                addr,
                bytes.as_ptr() as *mut _,
                bytes.len() as u64,
                0,
            )
        };
    }
    // SAFETY: host memory of the context's heap, `bytes.len()` long (the
    // caller's range); the source is a distinct Rust buffer.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
    Ok(())
}

/// Stores a word device code reads at the 8-byte aligned `addr` of the
/// context's heap (release: what was written before is seen first).
pub fn heap_store(ctx: Ctx, addr: usize, v: u64) -> Result<()> {
    if device_memory(ctx) {
        // SAFETY: STORE64 reads no host memory; the core checks the range.
        return unsafe {
            mem_access(
                ctx,
                FI_XPU_MEM_ACCESS_STORE64,
                addr,
                std::ptr::null_mut(),
                8,
                v,
            )
        };
    }
    // SAFETY: a live, aligned word of the context's heap (the caller's).
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }.store(v, Ordering::Release);
    Ok(())
}

/// Reads a word peers or device code write at the 8-byte aligned `addr`
/// of the context's heap; 0 when the device memory cannot be read (logged
/// by the core).
pub fn heap_load(ctx: Ctx, addr: usize) -> u64 {
    if device_memory(ctx) {
        let mut v = [0u8; 8];
        // SAFETY: `v` is 8 writable bytes; the core checks the range.
        let r = unsafe {
            mem_access(
                ctx,
                FI_XPU_MEM_ACCESS_READ,
                addr,
                v.as_mut_ptr().cast(),
                8,
                0,
            )
        };
        return if r.is_ok() { u64::from_ne_bytes(v) } else { 0 };
    }
    // SAFETY: a live, aligned word of the context's heap (the caller's).
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }.load(Ordering::Acquire)
}
