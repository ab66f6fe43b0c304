//! The completion queue: `fi_xpu_cq_open` and the host CQ's readers.
use super::args::{host_side, non_null, open_in};
use super::fid::FID_OPS;
use crate::error::{Error, Result};
use crate::object::{Kind, Use};
use crate::ops::objects as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// Opens a completion queue: an XPU CQ when `attr->xpu_ctx` is set, a host CQ
/// otherwise.
///
/// # Safety
/// `attr` is valid; `cq` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_cq_open(
    domain: *mut fid_xpu_domain,
    attr: *const fi_xpu_cq_attr,
    cq: *mut *mut fid_xpu_host_cq,
    context: *mut c_void,
) -> c_int {
    boundary!(open_in(
        domain,
        borrowed_opt!(attr),
        out!(cq)?,
        |dom, attr| { ops::cq_open(dom, attr, context, &FID_OPS) }
    ))
}

fn host_cq(cq: *mut fid_xpu_host_cq) -> Result<Use> {
    host_side(cq as *const c_void, Kind::Cq)
}

/// Reads up to `count` entries of a host CQ (format of the CQ). Returns the
/// number read, `-FI_EAGAIN` when empty, `-FI_EAVAIL` when an error entry is
/// pending, `-FI_EOPNOTSUPP` on an XPU CQ.
///
/// # Safety
/// `buf` has room for `count` entries of the CQ's format.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_cq_host_read(
    cq: *mut fid_xpu_host_cq,
    buf: *mut c_void,
    count: usize,
) -> isize {
    // SAFETY: same contract, no source addresses wanted.
    unsafe { fi_xpu_cq_host_readfrom(cq, buf, count, std::ptr::null_mut()) }
}

/// As `fi_xpu_cq_host_read`, also giving each entry's source address.
///
/// # Safety
/// `buf` has room for `count` entries; `src_addr` is NULL or has `count` slots.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_cq_host_readfrom(
    cq: *mut fid_xpu_host_cq,
    buf: *mut c_void,
    count: usize,
    src_addr: *mut fi_addr_t,
) -> isize {
    boundary!({
        let q = host_cq(cq)?;
        if count == 0 {
            return Ok(0);
        }
        non_null(buf)?;
        // SAFETY: `buf` has room for `count` entries and `src_addr` is NULL
        // or has `count` slots (the API's contract).
        Ok(unsafe { q.prov.cq_host_read(q.handle(), buf, count, src_addr) })
    })
}

/// Reads one error entry of a host CQ.
///
/// # Safety
/// `buf` is a valid `fi_cq_err_entry`.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_cq_host_readerr(
    cq: *mut fid_xpu_host_cq,
    buf: *mut fi_cq_err_entry,
    flags: u64,
) -> isize {
    boundary!({
        let q = host_cq(cq)?;
        let buf = borrowed_mut!(buf)?;
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        Ok(q.prov.cq_host_readerr(q.handle(), buf, 0))
    })
}
