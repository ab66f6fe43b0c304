//! The address vector: `fi_xpu_av_open`, `fi_xpu_av_insert`,
//! `fi_xpu_av_remove`, `fi_xpu_av_lookup`.
use super::args::{non_null, raw_query};
use super::fid::FID_OPS;
use crate::error::Error;
use crate::object::{lookup, Kind};
use crate::ops::objects as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// Opens an address vector.
///
/// # Safety
/// `attr` is NULL or valid; `av` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_av_open(
    domain: *mut fid_xpu_domain,
    attr: *const fi_xpu_av_attr,
    av: *mut *mut fid_xpu_av,
    context: *mut c_void,
) -> c_int {
    boundary!({
        let out = out!(av)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        let defaults = fi_xpu_av_attr { count: 0, flags: 0 };
        let attr = borrowed_opt!(attr).unwrap_or(&defaults);
        out.put(ops::av_open(&dom, attr, context, &FID_OPS)?.cast());
        Ok(0)
    })
}

/// Inserts `count` addresses (each `fi_xpu_info.addrlen` bytes, packed).
/// Returns the number inserted; failed entries get `FI_ADDR_UNSPEC`.
///
/// # Safety
/// `addr` holds `count` addresses; `fi_addr` is NULL or holds `count` entries.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_av_insert(
    av: *mut fid_xpu_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut fi_addr_t,
    flags: u64,
    _context: *mut c_void,
) -> c_int {
    boundary!({
        let a = lookup(av as *const c_void, Kind::Av)?;
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        if count == 0 {
            return Ok(0);
        }
        non_null(addr)?;
        let addrlen = a.prov.desc().addrlen;
        if count > c_int::MAX as usize || count.checked_mul(addrlen).is_none() {
            return Err(Error::OVERFLOW);
        }
        // `addr` holds `count` addresses of `addrlen` bytes; the product
        // does not overflow.
        let addrs = slice!(addr as *const u8, count * addrlen)?;
        let out = if fi_addr.is_null() {
            None
        } else {
            Some(slice_mut!(fi_addr, count)?)
        };
        ops::av_insert(&a, addrs, count, out)
    })
}

/// Removes `count` addresses.
///
/// # Safety
/// `fi_addr` holds `count` entries.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_av_remove(
    av: *mut fid_xpu_av,
    fi_addr: *const fi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    boundary!({
        let a = lookup(av as *const c_void, Kind::Av)?;
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        for &addr in slice!(fi_addr, count)? {
            Error::check(a.prov.av_remove(a.handle(), addr, 0))?;
        }
        Ok(0)
    })
}

/// The raw address a kernel on `ctx` uses to reach `fi_addr`.
///
/// # Safety
/// `buf` holds `*len` bytes; `len` is valid.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_av_lookup(
    av: *mut fid_xpu_av,
    fi_addr: fi_addr_t,
    buf: *mut c_void,
    len: *mut usize,
    flags: u64,
    ctx: *mut fid_xpu_host_ctx,
) -> c_int {
    boundary!({
        let (a, c) = raw_query(
            av as *const c_void,
            Kind::Av,
            ctx,
            buf,
            borrowed_opt!(len),
            flags,
        )?;
        // SAFETY: `len` is valid and `buf` holds `*len` bytes (the API's
        // contract); `raw_query` refused a NULL `len`, and a NULL `buf`
        // with a length.
        Error::check(unsafe {
            a.prov
                .av_lookup(a.handle(), fi_addr, c.handle(), buf, len, 0)
        })?;
        Ok(0)
    })
}
