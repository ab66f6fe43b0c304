//! `fi_xpu_alloc`, `fi_xpu_import`, `fi_xpu_unimport`, `fi_xpu_free`.
use super::boundary::Out;
use crate::error::{Error, Result};
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
    boundary!({
        f(&*ctx_of(ctx)?)?;
        Ok(0)
    })
}

/// Where `fi_xpu_alloc` writes what it made: the address, and (may be
/// NULL without `FI_XPU_ALLOC_DMABUF`) the fd and offset.
pub(crate) struct AllocOut<'a> {
    pub addr: Result<Out<'a, *mut c_void>>,
    pub fd: Result<Out<'a, c_int>>,
    pub offset: Result<Out<'a, u64>>,
}

/// `fi_xpu_alloc` on the context `c`, for `owner`.
pub(crate) fn alloc(
    c: &Object,
    owner: Owner,
    size: u64,
    alignment: u64,
    flags: u64,
    out: AllocOut,
) -> Result<c_int> {
    let AllocOut { addr, fd, offset } = out;
    let addr = addr?;
    if flags & FI_XPU_ALLOC_DMABUF != 0 && fd.is_err() {
        return Err(Error::INVAL);
    }
    let a = ops::alloc(c, size, alignment, flags, owner)?;
    addr.put(a.addr as *mut c_void);
    if let Ok(fd) = fd {
        fd.put(a.fd.map_or(-1, |f| f.into_raw_fd()));
    }
    if let Ok(offset) = offset {
        offset.put(a.offset);
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
    boundary!({
        let c = ctx_of(ctx)?;
        let out = AllocOut {
            addr: out!(addr),
            fd: out!(fd),
            offset: out!(offset),
        };
        alloc(&c, Owner::App, size, alignment, flags, out)
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
    boundary!({
        let c = ctx_of(ctx)?;
        let out = out!(dev_addr)?;
        // An application's import: see `memory::Import::exportable`.
        let dev = ops::import(&c, host_addr as usize, fd, offset, size, flags, Owner::App)?;
        out.put(dev as *mut c_void);
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
