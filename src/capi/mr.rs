//! Memory registration: `fi_xpu_mr_reg`, `fi_xpu_mr_key`, `fi_xpu_mr_desc`.
use super::args::raw_query;
use super::fid::FID_OPS;
use crate::error::Error;
use crate::object::{lookup, Kind};
use crate::ops::objects as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// Registers `[buf, buf + len)` for access by peers. `ctx` names the device
/// the memory belongs to, or is NULL for host memory.
///
/// # Safety
/// `mr` is a valid out-pointer; the memory stays valid while registered.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_mr_reg(
    domain: *mut fid_xpu_domain,
    ctx: *mut fid_xpu_host_ctx,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut fid_xpu_mr,
    context: *mut c_void,
) -> c_int {
    boundary!({
        let out = out!(mr)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        let c = ops::attr_ctx(&dom, ctx)?;
        let r = ops::MrReg {
            buf: buf as usize,
            len,
            access,
            offset,
            requested_key,
            flags,
        };
        out.put(ops::mr_reg(&dom, c, &r, context, &FID_OPS)?.cast());
        Ok(0)
    })
}

/// The remote key of a registration.
///
/// # Safety
/// `key` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_mr_key(mr: *mut fid_xpu_mr, key: *mut u64) -> c_int {
    boundary!({
        let out = out!(key)?;
        out.put(ops::mr_key(&*lookup(mr as *const c_void, Kind::Mr)?)?);
        Ok(0)
    })
}

/// The raw descriptor a kernel on `ctx` passes as `desc` for this memory.
///
/// # Safety
/// `buf` holds `*len` bytes; `len` is valid.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_mr_desc(
    mr: *mut fid_xpu_mr,
    buf: *mut c_void,
    len: *mut usize,
    flags: u64,
    ctx: *mut fid_xpu_host_ctx,
) -> c_int {
    boundary!({
        let (m, c) = raw_query(
            mr as *const c_void,
            Kind::Mr,
            ctx,
            buf,
            borrowed_opt!(len),
            flags,
        )?;
        // SAFETY: `len` is valid and `buf` holds `*len` bytes (the API's
        // contract); `raw_query` refused a NULL `len`, and a NULL `buf`
        // with a length.
        Error::check(unsafe { m.prov.mr_desc(m.handle(), c.handle(), buf, len, 0) })?;
        Ok(0)
    })
}
