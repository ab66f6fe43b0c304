//! The table of core services handed to every provider's `init`: the C
//! face plugins see of the core.
use super::{guard, memory as m};
use crate::error::Error;
use crate::memory::Owner;
use crate::object::{lookup_for_provider, Kind};
use crate::ops::memory as ops;
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
        let c = ctx_of(ctx)?;
        // SAFETY: the provider's out-pointers are NULL or valid for writing
        // (the contract of fi_xpu_core.mem_alloc).
        unsafe {
            m::alloc(
                &c,
                Owner::Provider,
                size,
                alignment,
                flags,
                m::AllocOut { addr, fd, offset },
            )
        }
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
        if dev_addr.is_null() {
            return Err(Error::INVAL);
        }
        let c = ctx_of(ctx)?;
        let dev = ops::import(
            &c,
            host_addr as usize,
            fd,
            offset,
            size,
            flags,
            Owner::Provider,
        )?;
        // SAFETY: checked non-NULL; the plugin ABI requires it valid.
        unsafe { dev_addr.write(dev as *mut c_void) };
        Ok(0)
    })
}

/// The context a provider names in a memory call.
fn ctx_of(ctx: *mut fid_xpu_host_ctx) -> crate::Result<std::sync::Arc<crate::object::Object>> {
    lookup_for_provider(ctx as *const c_void, Kind::Ctx)
}

unsafe extern "C" fn mem_unimport(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int {
    guard(|| {
        ops::unimport(&*ctx_of(ctx)?, dev_addr as usize, Owner::Provider)?;
        Ok(0)
    })
}

unsafe extern "C" fn mem_retire(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int {
    guard(|| {
        ops::of(&*ctx_of(ctx)?)?.retire(dev_addr as usize)?;
        Ok(0)
    })
}

unsafe extern "C" fn mem_free(ctx: *mut fid_xpu_host_ctx, addr: *mut c_void) -> c_int {
    guard(|| {
        ops::free(&*ctx_of(ctx)?, addr as usize, Owner::Provider)?;
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
        let (f, off) = ops::of(&*ctx_of(ctx)?)?.export(addr as usize, size)?;
        // SAFETY: both out-pointers were checked non-NULL.
        unsafe {
            fd.write(f.into_raw_fd());
            offset.write(off);
        }
        Ok(0)
    })
}

/// A C string argument, or `-FI_EINVAL` when NULL or not UTF-8.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string live for the call.
unsafe fn text_arg<'a>(p: *const c_char) -> crate::Result<&'a str> {
    if p.is_null() {
        return Err(Error::INVAL);
    }
    // SAFETY: non-NULL, NUL-terminated (caller's contract).
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::INVAL)
}

unsafe extern "C" fn param_define(
    prov: *const c_char,
    name: *const c_char,
    default_value: *const c_char,
    help: *const c_char,
) -> c_int {
    guard(|| {
        // SAFETY: providers pass NUL-terminated strings or NULL (plugin ABI).
        let (prov, name, default, help) = unsafe {
            (
                text_arg(prov)?,
                text_arg(name)?,
                text_arg(default_value)?,
                text_arg(help)?,
            )
        };
        crate::param::define(prov, name, default, help)?;
        Ok(0)
    })
}

unsafe extern "C" fn param_get(
    prov: *const c_char,
    name: *const c_char,
    buf: *mut c_char,
    len: *mut usize,
) -> c_int {
    guard(|| {
        if len.is_null() {
            return Err(Error::INVAL);
        }
        // SAFETY: providers pass NUL-terminated strings or NULL (plugin ABI).
        let (prov, name) = unsafe { (text_arg(prov)?, text_arg(name)?) };
        let value = crate::param::get(prov, name)?.ok_or(Error::NODATA)?;
        let need = value.len() + 1;
        // SAFETY: `len` was checked non-NULL; the provider owns it.
        let have = unsafe { len.read() };
        // SAFETY: as above.
        unsafe { len.write(need) };
        if buf.is_null() || have < need {
            return Err(Error::TOOSMALL);
        }
        // SAFETY: `buf` holds `have >= need` bytes (plugin ABI); the value
        // has no NUL inside (it came from the environment).
        unsafe {
            std::ptr::copy_nonoverlapping(value.as_ptr(), buf.cast::<u8>(), value.len());
            buf.add(value.len()).write(0);
        }
        Ok(0)
    })
}

unsafe extern "C" fn mem_known(
    ctx: *mut fid_xpu_host_ctx,
    addr: *const c_void,
    size: u64,
) -> c_int {
    guard(|| {
        let known = ops::of(&*ctx_of(ctx)?)?.contains(addr as usize, size);
        if known {
            Ok(0)
        } else {
            Err(Error::NOENT)
        }
    })
}

unsafe extern "C" fn ctx_abort_word(ctx: *mut fid_xpu_host_ctx) -> *mut u64 {
    let word = || -> crate::Result<usize> {
        ctx_of(ctx)?
            .memory
            .as_ref()
            .and_then(|m| m.abort_word())
            .ok_or(Error::NOSYS)
    };
    // A panic or a bad context reads as "no abort word": NULL.
    std::panic::catch_unwind(word)
        .ok()
        .and_then(|w| w.ok())
        .map_or(std::ptr::null_mut(), |w| w as *mut u64)
}

unsafe extern "C" fn mem_access(
    ctx: *mut fid_xpu_host_ctx,
    op: c_int,
    dev_addr: *mut c_void,
    host: *mut c_void,
    size: u64,
    value: u64,
) -> c_int {
    guard(|| {
        let c = ctx_of(ctx)?;
        let mem = ops::of(&c)?;
        let dev = dev_addr as usize;
        let len = usize::try_from(size).map_err(|_| Error::INVAL)?;
        let access = match op {
            _ if size == 0 => return mem.access(crate::memory::Access::Probe).map(|_| 0),
            FI_XPU_MEM_ACCESS_WRITE | FI_XPU_MEM_ACCESS_READ if host.is_null() => {
                return Err(Error::INVAL)
            }
            FI_XPU_MEM_ACCESS_WRITE => {
                // SAFETY: the provider passes `size` readable bytes at `host`
                // (the contract of fi_xpu_core.mem_access).
                let src = unsafe { std::slice::from_raw_parts(host as *const u8, len) };
                crate::memory::Access::Write { dev, src }
            }
            FI_XPU_MEM_ACCESS_READ => {
                // SAFETY: as above, `size` writable bytes.
                let dst = unsafe { std::slice::from_raw_parts_mut(host as *mut u8, len) };
                crate::memory::Access::Read { dev, dst }
            }
            FI_XPU_MEM_ACCESS_SET => crate::memory::Access::Set {
                dev,
                len,
                byte: u8::try_from(value).map_err(|_| Error::INVAL)?,
            },
            FI_XPU_MEM_ACCESS_STORE64 if size == 8 => crate::memory::Access::Store64 { dev, value },
            _ => return Err(Error::INVAL),
        };
        mem.access(access)?;
        Ok(0)
    })
}

unsafe extern "C" fn ctx_device_uuid(ctx: *mut fid_xpu_host_ctx, uuid: *mut u8) -> c_int {
    guard(|| {
        if uuid.is_null() {
            return Err(Error::INVAL);
        }
        let u = ops::of(&*ctx_of(ctx)?)?.device_uuid()?;
        // SAFETY: the provider passes 16 writable bytes (the contract of
        // fi_xpu_core.ctx_device_uuid).
        unsafe { std::ptr::copy_nonoverlapping(u.as_ptr(), uuid, 16) };
        Ok(0)
    })
}

unsafe extern "C" fn mem_export_ipc(
    ctx: *mut fid_xpu_host_ctx,
    addr: *mut c_void,
    size: u64,
    handle: *mut u8,
    offset: *mut u64,
) -> c_int {
    guard(|| {
        if handle.is_null() || offset.is_null() {
            return Err(Error::INVAL);
        }
        let (h, off) = ops::of(&*ctx_of(ctx)?)?.export_ipc(addr as usize, size)?;
        // SAFETY: the provider passes FI_XPU_IPC_HANDLE_SIZE writable bytes
        // and a writable offset (the contract of fi_xpu_core.mem_export_ipc).
        unsafe {
            std::ptr::copy_nonoverlapping(h.as_ptr(), handle, h.len());
            *offset = off;
        }
        Ok(0)
    })
}

unsafe extern "C" fn mem_import_ipc(
    ctx: *mut fid_xpu_host_ctx,
    handle: *const u8,
    offset: u64,
    size: u64,
    dev_addr: *mut *mut c_void,
) -> c_int {
    guard(|| {
        if handle.is_null() || dev_addr.is_null() {
            return Err(Error::INVAL);
        }
        let mut h = [0u8; FI_XPU_IPC_HANDLE_SIZE];
        // SAFETY: the provider passes FI_XPU_IPC_HANDLE_SIZE readable bytes.
        unsafe { std::ptr::copy_nonoverlapping(handle, h.as_mut_ptr(), h.len()) };
        let d = ops::of(&*ctx_of(ctx)?)?.import_ipc(&h, offset, size)?;
        // SAFETY: a writable out-pointer (the contract).
        unsafe { *dev_addr = d as *mut c_void };
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
    param_define: Some(param_define),
    param_get: Some(param_get),
    mem_known: Some(mem_known),
    ctx_abort_word: Some(ctx_abort_word),
    mem_retire: Some(mem_retire),
    mem_access: Some(mem_access),
    ctx_device_uuid: Some(ctx_device_uuid),
    mem_export_ipc: Some(mem_export_ipc),
    mem_import_ipc: Some(mem_import_ipc),
};
