//! The table of core services handed to every provider's `init`.
use crate::capi::{guard, memory_services as m};
use crate::error::Error;
use crate::object::{lookup_for_provider, Kind};
use fi_xpu_abi::*;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::IntoRawFd;

unsafe extern "C" fn log(level: c_int, prov: *const c_char, msg: *const c_char) {
    if prov.is_null() || msg.is_null() {
        return;
    }
    // SAFETY: providers pass NUL-terminated strings (plugin ABI).
    let (prov, msg) = unsafe { (CStr::from_ptr(prov), CStr::from_ptr(msg)) };
    crate::log::write(level, &prov.to_string_lossy(), &msg.to_string_lossy());
}

unsafe extern "C" fn log_enabled(level: c_int) -> c_int {
    crate::log::enabled(level) as c_int
}

unsafe extern "C" fn mem_alloc(
    ctx: *mut fid_xpu_host_ctx,
    size: u64,
    alignment: u64,
    flags: u64,
    addr: *mut *mut c_void,
    fd: *mut c_int,
    offset: *mut u64,
) -> c_int {
    guard(|| {
        let c = memory_of(ctx)?;
        m::alloc(&c, size, alignment, flags, addr, fd, offset)
    })
}

unsafe extern "C" fn mem_import(
    ctx: *mut fid_xpu_host_ctx,
    host_addr: *mut c_void,
    fd: c_int,
    offset: u64,
    size: u64,
    flags: u64,
    dev_addr: *mut *mut c_void,
) -> c_int {
    guard(|| {
        let c = memory_of(ctx)?;
        m::import(&c, host_addr, fd, offset, size, flags, dev_addr)
    })
}

fn memory_of(ctx: *mut fid_xpu_host_ctx) -> crate::Result<std::sync::Arc<crate::object::Object>> {
    lookup_for_provider(ctx as *const c_void, Kind::Ctx)
}

unsafe extern "C" fn mem_unimport(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int {
    guard(|| {
        memory_of(ctx)?
            .memory
            .as_ref()
            .ok_or(Error::INVAL)?
            .unimport(dev_addr as usize)?;
        Ok(0)
    })
}

unsafe extern "C" fn mem_free(ctx: *mut fid_xpu_host_ctx, addr: *mut c_void) -> c_int {
    guard(|| {
        memory_of(ctx)?
            .memory
            .as_ref()
            .ok_or(Error::INVAL)?
            .free(addr as usize)?;
        Ok(0)
    })
}

unsafe extern "C" fn mem_export(
    ctx: *mut fid_xpu_host_ctx,
    addr: *mut c_void,
    size: u64,
    fd: *mut c_int,
    offset: *mut u64,
) -> c_int {
    guard(|| {
        if fd.is_null() || offset.is_null() {
            return Err(Error::INVAL);
        }
        let (f, off) = memory_of(ctx)?
            .memory
            .as_ref()
            .ok_or(Error::INVAL)?
            .export(addr as usize, size)?;
        // SAFETY: both out-pointers were checked non-NULL.
        unsafe {
            fd.write(f.into_raw_fd());
            offset.write(off);
        }
        Ok(0)
    })
}

pub static CORE_SERVICES: fi_xpu_core = fi_xpu_core {
    abi_major: FI_XPU_PROV_ABI_MAJOR,
    abi_minor: FI_XPU_PROV_ABI_MINOR,
    size: std::mem::size_of::<fi_xpu_core>(),
    log: Some(log),
    log_enabled: Some(log_enabled),
    mem_alloc: Some(mem_alloc),
    mem_import: Some(mem_import),
    mem_unimport: Some(mem_unimport),
    mem_free: Some(mem_free),
    mem_export: Some(mem_export),
};
