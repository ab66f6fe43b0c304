//! The counter: `fi_xpu_cntr_open` and the host counter's readers and
//! updates.
use super::args::{host_side, open_in};
use super::fid::FID_OPS;
use crate::error::{Error, Result};
use crate::object::{Kind, Use};
use crate::ops::objects as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// Opens a counter: an XPU counter when `attr->xpu_ctx` is set, a host one
/// otherwise.
///
/// # Safety
/// `attr` is valid; `cntr` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_cntr_open(
    domain: *mut fid_xpu_domain,
    attr: *const fi_xpu_cntr_attr,
    cntr: *mut *mut fid_xpu_host_cntr,
    context: *mut c_void,
) -> c_int {
    boundary!(open_in(
        domain,
        borrowed_opt!(attr),
        out!(cntr)?,
        |dom, attr| { ops::cntr_open(dom, attr, context, &FID_OPS) }
    ))
}

fn host_cntr(cntr: *mut fid_xpu_host_cntr) -> Result<Use> {
    host_side(cntr as *const c_void, Kind::Cntr)
}

/// Reads a host counter's value or error count.
fn cntr_read(cntr: *mut fid_xpu_host_cntr, err: bool) -> Result<u64> {
    let c = host_cntr(cntr)?;
    let (mut v, mut e) = (0u64, 0u64);
    Error::check(c.prov.cntr_host_read(c.handle(), &mut v, &mut e))?;
    Ok(if err { e } else { v })
}

fn cntr_update(cntr: *mut fid_xpu_host_cntr, how: u32, value: u64) -> c_int {
    boundary!({
        let c = host_cntr(cntr)?;
        Error::check(c.prov.cntr_host_update(c.handle(), how, value))?;
        Ok(0)
    })
}

/// Reads a host counter's value.
///
/// # Safety
/// `value` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_cntr_host_read(
    cntr: *mut fid_xpu_host_cntr,
    value: *mut u64,
) -> c_int {
    boundary!({
        let out = out!(value)?;
        out.put(cntr_read(cntr, false)?);
        Ok(0)
    })
}

/// Reads a host counter's error count.
///
/// # Safety
/// `value` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_cntr_host_readerr(
    cntr: *mut fid_xpu_host_cntr,
    value: *mut u64,
) -> c_int {
    boundary!({
        let out = out!(value)?;
        out.put(cntr_read(cntr, true)?);
        Ok(0)
    })
}

/// Adds to a host counter.
#[no_mangle]
pub extern "C" fn fi_xpu_cntr_host_add(cntr: *mut fid_xpu_host_cntr, value: u64) -> c_int {
    cntr_update(cntr, FI_XPU_CNTR_ADD, value)
}

/// Sets a host counter.
#[no_mangle]
pub extern "C" fn fi_xpu_cntr_host_set(cntr: *mut fid_xpu_host_cntr, value: u64) -> c_int {
    cntr_update(cntr, FI_XPU_CNTR_SET, value)
}

/// Adds to a host counter's error count.
#[no_mangle]
pub extern "C" fn fi_xpu_cntr_host_adderr(cntr: *mut fid_xpu_host_cntr, value: u64) -> c_int {
    cntr_update(cntr, FI_XPU_CNTR_ADD | FI_XPU_CNTR_ERR, value)
}

/// Sets a host counter's error count.
#[no_mangle]
pub extern "C" fn fi_xpu_cntr_host_seterr(cntr: *mut fid_xpu_host_cntr, value: u64) -> c_int {
    cntr_update(cntr, FI_XPU_CNTR_SET | FI_XPU_CNTR_ERR, value)
}
