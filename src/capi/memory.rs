//! `fi_xpu_alloc`, `fi_xpu_import`, `fi_xpu_unimport`, `fi_xpu_free`.
use super::{guard, non_null, put};
use crate::error::Result;
use crate::object::{lookup, Kind, Object};
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::os::fd::IntoRawFd;
use std::sync::Arc;

fn ctx_of(ctx: *mut fid_xpu_ctx) -> Result<Arc<Object>> {
    lookup(ctx as *const c_void, Kind::Ctx)
}

pub(crate) fn alloc(
    c: &Object,
    size: u64,
    alignment: u64,
    flags: u64,
    addr: *mut *mut c_void,
    fd: *mut c_int,
    offset: *mut u64,
) -> Result<c_int> {
    non_null(addr)?;
    if flags & FI_XPU_ALLOC_DMABUF != 0 {
        non_null(fd)?;
    }
    let mem = c.memory.as_ref().expect("contexts have memory");
    let a = mem.alloc(size, alignment, flags)?;
    put(addr, a.addr as *mut c_void);
    if !fd.is_null() {
        put(fd, a.fd.map_or(-1, |f| f.into_raw_fd()));
    }
    if !offset.is_null() {
        put(offset, a.offset);
    }
    Ok(0)
}

pub(crate) fn import(
    c: &Object,
    host_addr: *mut c_void,
    fd: c_int,
    offset: u64,
    size: u64,
    flags: u64,
    dev_addr: *mut *mut c_void,
) -> Result<c_int> {
    non_null(dev_addr)?;
    let mem = c.memory.as_ref().expect("contexts have memory");
    let dev = mem.import(host_addr as usize, fd, offset, size, flags)?;
    put(dev_addr, dev as *mut c_void);
    Ok(0)
}

/// Allocates device-accessible memory. With `FI_XPU_ALLOC_DMABUF`, `*fd` and
/// `*offset` describe it as a DMA-BUF (the caller owns the fd).
///
/// # Safety
/// Out-pointers are valid (`fd`/`offset` may be NULL without the flag).
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_alloc(
    ctx: *mut fid_xpu_ctx,
    size: u64,
    alignment: u64,
    flags: u64,
    addr: *mut *mut c_void,
    fd: *mut c_int,
    offset: *mut u64,
) -> c_int {
    guard(|| {
        let c = ctx_of(ctx)?;
        alloc(&c, size, alignment, flags, addr, fd, offset)
    })
}

/// Maps a host address, MMIO range or DMA-BUF into the device's address space.
///
/// # Safety
/// `dev_addr` is a valid out-pointer; `host_addr`, when used, is mapped.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_import(
    ctx: *mut fid_xpu_ctx,
    host_addr: *mut c_void,
    fd: c_int,
    offset: u64,
    size: u64,
    flags: u64,
    dev_addr: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let c = ctx_of(ctx)?;
        import(&c, host_addr, fd, offset, size, flags, dev_addr)
    })
}

/// Undoes one `fi_xpu_import`.
#[no_mangle]
pub extern "C" fn fi_xpu_unimport(ctx: *mut fid_xpu_ctx, dev_addr: *mut c_void) -> c_int {
    guard(|| {
        let c = ctx_of(ctx)?;
        c.memory
            .as_ref()
            .expect("contexts have memory")
            .unimport(dev_addr as usize)?;
        Ok(0)
    })
}

/// Frees memory from `fi_xpu_alloc`.
#[no_mangle]
pub extern "C" fn fi_xpu_free(ctx: *mut fid_xpu_ctx, addr: *mut c_void) -> c_int {
    guard(|| {
        let c = ctx_of(ctx)?;
        c.memory
            .as_ref()
            .expect("contexts have memory")
            .free(addr as usize)?;
        Ok(0)
    })
}
