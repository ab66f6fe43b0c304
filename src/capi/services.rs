//! The table of core services handed to every provider's `init`: the C
//! face plugins see of the core.
use super::memory as m;
use crate::error::Error;
use crate::memory::Owner;
use crate::object::{lookup_for_provider, Kind};
use crate::ops::memory as ops;
use fi_xpu_abi::*;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::IntoRawFd;

unsafe extern "C" fn log(level: c_int, prov: *const c_char, msg: *const c_char) {
    boundary!({
        // Providers pass NUL-terminated strings (plugin ABI).
        if let (Some(prov), Some(msg)) = (borrowed_cstr!(prov), borrowed_cstr!(msg)) {
            crate::log::write(level, &prov.to_string_lossy(), &msg.to_string_lossy());
        }
        Ok(())
    })
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
    boundary!({
        let c = ctx_of(ctx)?;
        let out = m::AllocOut {
            addr: out!(addr),
            fd: out!(fd),
            offset: out!(offset),
        };
        m::alloc(&c, Owner::Provider, size, alignment, flags, out)
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
    boundary!({
        let out = out!(dev_addr)?;
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
        out.put(dev as *mut c_void);
        Ok(0)
    })
}

/// The context a provider names in a memory call.
fn ctx_of(ctx: *mut fid_xpu_host_ctx) -> crate::Result<std::sync::Arc<crate::object::Object>> {
    lookup_for_provider(ctx as *const c_void, Kind::Ctx)
}

unsafe extern "C" fn mem_unimport(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int {
    boundary!({
        ops::unimport(&*ctx_of(ctx)?, dev_addr as usize, Owner::Provider)?;
        Ok(0)
    })
}

unsafe extern "C" fn mem_retire(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int {
    boundary!({
        ops::of(&*ctx_of(ctx)?)?.retire(dev_addr as usize)?;
        Ok(0)
    })
}

unsafe extern "C" fn mem_free(ctx: *mut fid_xpu_host_ctx, addr: *mut c_void) -> c_int {
    boundary!({
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
    boundary!({
        let (fd, offset) = (out!(fd)?, out!(offset)?);
        let (f, off) = ops::of(&*ctx_of(ctx)?)?.export(addr as usize, size)?;
        fd.put(f.into_raw_fd());
        offset.put(off);
        Ok(0)
    })
}

/// A C string argument (as `borrowed_cstr!` read it), or `-FI_EINVAL` when
/// NULL or not UTF-8.
fn text_arg(p: Option<&CStr>) -> crate::Result<&str> {
    p.ok_or(Error::INVAL)?.to_str().map_err(|_| Error::INVAL)
}

unsafe extern "C" fn param_define(
    prov: *const c_char,
    name: *const c_char,
    default_value: *const c_char,
    help: *const c_char,
) -> c_int {
    boundary!({
        // Providers pass NUL-terminated strings or NULL (plugin ABI).
        let prov = text_arg(borrowed_cstr!(prov))?;
        let name = text_arg(borrowed_cstr!(name))?;
        let default = text_arg(borrowed_cstr!(default_value))?;
        let help = text_arg(borrowed_cstr!(help))?;
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
    boundary!({
        let len = borrowed_mut!(len)?;
        // Providers pass NUL-terminated strings or NULL (plugin ABI).
        let prov = text_arg(borrowed_cstr!(prov))?;
        let name = text_arg(borrowed_cstr!(name))?;
        let value = crate::param::get(prov, name)?.ok_or(Error::NODATA)?;
        let need = value.len() + 1;
        let have = std::mem::replace(len, need);
        if buf.is_null() || have < need {
            return Err(Error::TOOSMALL);
        }
        // `buf` holds `have >= need` bytes (plugin ABI); the value has no
        // NUL inside (it came from the environment).
        let out = slice_mut!(buf.cast::<u8>(), need)?;
        out[..value.len()].copy_from_slice(value.as_bytes());
        out[value.len()] = 0;
        Ok(0)
    })
}

unsafe extern "C" fn mem_known(
    ctx: *mut fid_xpu_host_ctx,
    addr: *const c_void,
    size: u64,
) -> c_int {
    boundary!({
        let known = ops::of(&*ctx_of(ctx)?)?.contains(addr as usize, size);
        if known {
            Ok(0)
        } else {
            Err(Error::NOENT)
        }
    })
}

unsafe extern "C" fn ctx_abort_word(ctx: *mut fid_xpu_host_ctx) -> *mut u64 {
    // A bad context reads as "no abort word": NULL.
    boundary!(ctx_of(ctx)?
        .memory
        .as_ref()
        .and_then(|m| m.abort_word())
        .map(|w| w as *mut u64)
        .ok_or(Error::NOSYS))
}

unsafe extern "C" fn mem_access(
    ctx: *mut fid_xpu_host_ctx,
    op: c_int,
    dev_addr: *mut c_void,
    host: *mut c_void,
    size: u64,
    value: u64,
) -> c_int {
    boundary!({
        let c = ctx_of(ctx)?;
        let mem = ops::of(&c)?;
        let dev = dev_addr as usize;
        let len = usize::try_from(size).map_err(|_| Error::INVAL)?;
        let access = match op {
            _ if size == 0 => return mem.access(crate::memory::Access::Probe).map(|_| 0),
            FI_XPU_MEM_ACCESS_WRITE | FI_XPU_MEM_ACCESS_READ if host.is_null() => {
                return Err(Error::INVAL)
            }
            // The provider passes `size` readable (writable) bytes at `host`
            // (the contract of fi_xpu_core.mem_access).
            FI_XPU_MEM_ACCESS_WRITE => crate::memory::Access::Write {
                dev,
                src: slice!(host as *const u8, len)?,
            },
            FI_XPU_MEM_ACCESS_READ => crate::memory::Access::Read {
                dev,
                dst: slice_mut!(host as *mut u8, len)?,
            },
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
    boundary!({
        // The provider passes 16 writable bytes (the contract of
        // fi_xpu_core.ctx_device_uuid).
        let out = out!(uuid as *mut [u8; 16])?;
        out.put(ops::of(&*ctx_of(ctx)?)?.device_uuid()?);
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
    boundary!({
        // The provider passes FI_XPU_IPC_HANDLE_SIZE writable bytes and a
        // writable offset (the contract of fi_xpu_core.mem_export_ipc).
        let (handle, offset) = (
            out!(handle as *mut [u8; FI_XPU_IPC_HANDLE_SIZE])?,
            out!(offset)?,
        );
        let (h, off) = ops::of(&*ctx_of(ctx)?)?.export_ipc(addr as usize, size)?;
        handle.put(h);
        offset.put(off);
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
    boundary!({
        // The provider passes FI_XPU_IPC_HANDLE_SIZE readable bytes and a
        // writable out-pointer (the contract of fi_xpu_core.mem_import_ipc).
        let handle = borrowed!(handle as *const [u8; FI_XPU_IPC_HANDLE_SIZE]);
        let out = out!(dev_addr);
        let (h, out) = (*handle?, out?);
        let d = ops::of(&*ctx_of(ctx)?)?.import_ipc(&h, offset, size)?;
        out.put(d as *mut c_void);
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
