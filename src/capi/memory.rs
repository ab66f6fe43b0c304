//! `fi_xpu_alloc`, `fi_xpu_import`, `fi_xpu_unimport`, `fi_xpu_free`.
use super::{guard, non_null, put};
use crate::error::Result;
use crate::memory::Owner;
use crate::object::{lookup, Kind, Object, Use};
use crate::ops::memory as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::os::fd::IntoRawFd;

fn ctx_of(ctx: *mut fid_xpu_host_ctx) -> Result<Use> {
    lookup(ctx as *const c_void, Kind::Ctx)
}

/// The body of a call that only acts on the context `ctx`: 0 or the
/// error's code.
fn on_ctx(ctx: *mut fid_xpu_host_ctx, f: impl FnOnce(&Object) -> Result<()>) -> c_int {
    guard(|| {
        f(&*ctx_of(ctx)?)?;
        Ok(0)
    })
}

/// Where `fi_xpu_alloc` writes what it made: the address, and (may be
/// NULL without `FI_XPU_ALLOC_DMABUF`) the fd and offset.
pub(crate) struct AllocOut {
    pub addr: *mut *mut c_void,
    pub fd: *mut c_int,
    pub offset: *mut u64,
}

/// `fi_xpu_alloc` on the context `c`, for `owner`.
///
/// # Safety
/// `out.addr` is NULL or valid for writing; so are `out.fd` and
/// `out.offset` (`fi_xpu_alloc`'s contract).
pub(crate) unsafe fn alloc(
    c: &Object,
    owner: Owner,
    size: u64,
    alignment: u64,
    flags: u64,
    out: AllocOut,
) -> Result<c_int> {
    let AllocOut { addr, fd, offset } = out;
    non_null(addr)?;
    if flags & FI_XPU_ALLOC_DMABUF != 0 {
        non_null(fd)?;
    }
    let a = ops::alloc(c, size, alignment, flags, owner)?;
    // SAFETY: checked non-NULL; valid for writing (function contract).
    unsafe { put(addr, a.addr as *mut c_void) };
    if !fd.is_null() {
        // SAFETY: as above.
        unsafe { put(fd, a.fd.map_or(-1, |f| f.into_raw_fd())) };
    }
    if !offset.is_null() {
        // SAFETY: as above.
        unsafe { put(offset, a.offset) };
    }
    Ok(0)
}

/// Allocates device-accessible memory. With `FI_XPU_ALLOC_DMABUF`, `*fd` and
/// `*offset` describe it as a DMA-BUF (the caller owns the fd).
///
/// # Safety
/// Out-pointers are valid (`fd`/`offset` may be NULL without the flag).
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_alloc(
    ctx: *mut fid_xpu_host_ctx,
    size: u64,
    alignment: u64,
    flags: u64,
    addr: *mut *mut c_void,
    fd: *mut c_int,
    offset: *mut u64,
) -> c_int {
    guard(|| {
        let c = ctx_of(ctx)?;
        // SAFETY: the out-pointers are NULL or valid for writing (`fi_xpu_alloc`'s contract).
        unsafe {
            alloc(
                &c,
                Owner::App,
                size,
                alignment,
                flags,
                AllocOut { addr, fd, offset },
            )
        }
    })
}

/// Maps a host address, MMIO range or DMA-BUF into the device's address space.
///
/// # Safety
/// `dev_addr` is a valid out-pointer; `host_addr`, when used, is mapped.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_import(
    ctx: *mut fid_xpu_host_ctx,
    host_addr: *mut c_void,
    fd: c_int,
    offset: u64,
    size: u64,
    flags: u64,
    dev_addr: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let c = ctx_of(ctx)?;
        non_null(dev_addr)?;
        // An application's import: see `memory::Import::exportable`.
        let dev = ops::import(&c, host_addr as usize, fd, offset, size, flags, Owner::App)?;
        // SAFETY: checked non-NULL; valid for writing (`fi_xpu_import`'s contract).
        unsafe { put(dev_addr, dev as *mut c_void) };
        Ok(0)
    })
}

/// Undoes one `fi_xpu_import` of the application's (a provider's own
/// imports are unknown here: `FI_EINVAL`); `FI_EBUSY` while a registration overlaps
/// the memory and this is the last import at that address.
#[no_mangle]
pub extern "C" fn fi_xpu_unimport(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int {
    on_ctx(ctx, |c| ops::unimport(c, dev_addr as usize, Owner::App))
}

/// Frees memory from `fi_xpu_alloc` (the library's own allocations in the
/// same context are unknown here: `FI_EINVAL`); `FI_EBUSY` while a registration
/// overlaps it.
#[no_mangle]
pub extern "C" fn fi_xpu_free(ctx: *mut fid_xpu_host_ctx, addr: *mut c_void) -> c_int {
    on_ctx(ctx, |c| ops::free(c, addr as usize, Owner::App))
}
