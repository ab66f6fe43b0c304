//! The endpoint: `fi_xpu_endpoint`, `fi_xpu_ep_bind`, `fi_xpu_enable`,
//! `fi_xpu_getname`.
use super::args::{open_in, size_query};
use super::fid::{ep_bind, FID_OPS};
use crate::error::Error;
use crate::object::{lookup, Kind};
use crate::ops::objects as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// Opens an endpoint for the device `attr->xpu_ctx`.
///
/// # Safety
/// `attr` is valid; `ep` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_endpoint(
    domain: *mut fid_xpu_domain,
    attr: *const fi_xpu_ep_attr,
    ep: *mut *mut fid_xpu_host_ep,
    context: *mut c_void,
) -> c_int {
    boundary!(open_in(
        domain,
        borrowed_opt!(attr),
        out!(ep)?,
        |dom, attr| { ops::endpoint(dom, attr, context, &FID_OPS) }
    ))
}

/// Binds an AV, CQ or counter to an endpoint (also reached through
/// libfabric's `fi_ep_bind`, i.e. the fid's `bind`).
///
/// # Safety
/// Handles are looked up before use; any pointer value is accepted.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_ep_bind(
    ep: *mut fid_xpu_host_ep,
    bfid: *mut fid,
    flags: u64,
) -> c_int {
    ep_bind(ep, bfid, flags)
}

/// Enables an endpoint once its AV and CQs are bound.
#[no_mangle]
pub extern "C" fn fi_xpu_enable(ep: *mut fid_xpu_host_ep) -> c_int {
    boundary!({
        let e = lookup(ep as *const c_void, Kind::Ep)?;
        ops::enable(&e)?;
        Ok(0)
    })
}

/// The endpoint's address, to be inserted into peers' AVs.
///
/// # Safety
/// `addr` holds `*addrlen` bytes; `addrlen` is valid.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_getname(
    ep: *mut fid_xpu_host_ep,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    boundary!({
        let e = lookup(ep as *const c_void, Kind::Ep)?;
        size_query(addr, borrowed_opt!(addrlen))?;
        // SAFETY: `addrlen` is valid and `addr` holds `*addrlen` bytes (the
        // API's contract); `size_query` refused a NULL length, and a NULL
        // `addr` with a length.
        Error::check(unsafe { e.prov.ep_getname(e.handle(), addr, addrlen) })?;
        Ok(0)
    })
}
