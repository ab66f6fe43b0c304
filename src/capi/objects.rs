//! Host objects: domain, XPU context, AV, MR, CQ, counter, endpoint, export
//! and close.
use super::info::provider_of;
use super::{attr_size, guard, guard_ssize, non_null, put, read_opt, FID_OPS};
use crate::error::{Error, Result};
use crate::flags::{self, AbortFlags, DomainFlags, XpuFormFlags};
use crate::memory::UserOps;
use crate::object::{self, lookup, lookup_any, Kind, Use};
use crate::ops::objects as ops;
use crate::prov_call;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// The body of a call that answers through an out-parameter: checks that
/// `out` is not NULL, runs `f` and writes what it returns there; 0 or the
/// error's code.
///
/// # Safety
/// `out` is NULL or valid for writing a `T` (the API's contract for
/// out-parameters).
unsafe fn answer<T>(out: *mut T, f: impl FnOnce() -> Result<T>) -> c_int {
    guard(|| {
        non_null(out)?;
        let v = f()?;
        // SAFETY: checked non-NULL; valid for writing per the function contract.
        unsafe { put(out, v) };
        Ok(0)
    })
}

/// The body of an object's open call in `domain` with a required attribute
/// (NULL: `-FI_EINVAL`): `open` makes the object, whose fid goes to `out`.
///
/// # Safety
/// `attr` is NULL or a valid struct, unchanged during the call; `out` is
/// NULL or a valid out-pointer (the API's contract).
unsafe fn open_in<A, T>(
    domain: *mut fid_xpu_domain,
    attr: *const A,
    out: *mut *mut T,
    open: impl FnOnce(&Use, &A) -> Result<*mut fid>,
) -> c_int {
    // SAFETY: per the function contract.
    unsafe {
        answer(out, || {
            let dom = lookup(domain as *const c_void, Kind::Domain)?;
            let attr = read_opt(attr).ok_or(Error::INVAL)?;
            open(&dom, attr).map(|fid| fid.cast())
        })
    }
}

/// Opens a domain on the provider `info` names.
///
/// # Safety
/// `info` comes from `fi_xpu_getinfo`; `attr` is NULL or valid; `domain` is a
/// valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_domain(
    info: *const fi_xpu_info,
    attr: *const fi_xpu_domain_attr,
    domain: *mut *mut fid_xpu_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `attr` is NULL or a valid struct, unchanged during the call;
    // `domain` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        answer(domain, || {
            let prov = provider_of(info)?;
            let defaults = fi_xpu_domain_attr {
                size: std::mem::size_of::<fi_xpu_domain_attr>(),
                fabric_prov: std::ptr::null(),
                progress_threads: 0,
                reserved: 0,
                flags: 0,
            };
            let attr = match read_opt(attr) {
                None => &defaults,
                Some(a) => {
                    attr_size::<fi_xpu_domain_attr>("fi_xpu_domain", "fi_xpu_domain_attr", a.size)?;
                    flags::accept::<DomainFlags>(a.flags)?;
                    a
                }
            };
            ops::domain(prov, attr, context, &FID_OPS).map(|fid| fid.cast())
        })
    }
}

/// Creates the XPU context of one device.
///
/// # Safety
/// `attr` points to a valid `fi_xpu_ctx_open_attr` whose `ops`, if set, points to a
/// struct of at least its `size` bytes; `ctx` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_ctx_open(
    domain: *mut fid_xpu_domain,
    attr: *const fi_xpu_ctx_open_attr,
    ctx: *mut *mut fid_xpu_host_ctx,
    context: *mut c_void,
) -> c_int {
    // SAFETY: `attr` is NULL or a valid struct, unchanged during the call,
    // whose `ops` is NULL or points to a struct of `size` bytes; `ctx` is NULL
    // or a valid out-pointer (the API's contract).
    unsafe {
        open_in(domain, attr, ctx, |dom, attr| {
            let user = if attr.ops.is_null() {
                None
            } else {
                Some(UserOps::from_raw(attr.ops, attr.device)?)
            };
            ops::ctx_open(dom, attr.iface, attr.device, user, context, &FID_OPS)
        })
    }
}

/// Capabilities and raw sizes of a context.
///
/// # Safety
/// `attr` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_ctx_getinfo(
    ctx: *mut fid_xpu_host_ctx,
    attr: *mut fi_xpu_ctx_info,
) -> c_int {
    // SAFETY: `attr` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        answer(attr, || {
            ops::ctx_query(&*lookup(ctx as *const c_void, Kind::Ctx)?)
        })
    }
}

/// Raises the context's abort word (lowers it with `FI_XPU_ABORT_CLEAR`):
/// every device wait on an object of the context ends with `-FI_ECANCELED`
/// while it is raised.
#[no_mangle]
pub extern "C" fn fi_xpu_ctx_abort(ctx: *mut fid_xpu_host_ctx, flags: u64) -> c_int {
    guard(|| {
        let c = lookup(ctx as *const c_void, Kind::Ctx)?;
        flags::accept::<AbortFlags>(flags)?;
        c.memory
            .as_ref()
            .ok_or(Error::INVAL)?
            .set_abort(flags & FI_XPU_ABORT_CLEAR == 0)?;
        Ok(0)
    })
}

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
    // SAFETY: `attr` is NULL or a valid struct, unchanged during the call;
    // `av` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        answer(av, || {
            let dom = lookup(domain as *const c_void, Kind::Domain)?;
            let defaults = fi_xpu_av_attr { count: 0, flags: 0 };
            let attr = read_opt(attr).unwrap_or(&defaults);
            ops::av_open(&dom, attr, context, &FID_OPS).map(|fid| fid.cast())
        })
    }
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
    guard(|| {
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
        // SAFETY: `addr` holds `count` addresses of `addrlen` bytes (the
        // API's contract), checked non-NULL; the product does not overflow.
        let addrs = unsafe { std::slice::from_raw_parts(addr as *const u8, count * addrlen) };
        let out = if fi_addr.is_null() {
            None
        } else {
            // SAFETY: `fi_addr` was checked non-NULL and has `count` slots
            // (the API's contract).
            Some(unsafe { std::slice::from_raw_parts_mut(fi_addr, count) })
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
    guard(|| {
        let a = lookup(av as *const c_void, Kind::Av)?;
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        if count == 0 {
            return Ok(0);
        }
        non_null(fi_addr)?;
        for i in 0..count {
            // SAFETY: the caller guarantees `count` readable entries.
            let addr = unsafe { *fi_addr.add(i) };
            Error::check(prov_call!(a.prov, av_remove(a.handle(), addr, 0)))?;
        }
        Ok(0)
    })
}

/// Checks a `(buf, len)` pair for a size query and returns `*len`.
///
/// # Safety
/// `len` is NULL or valid for reading (the API's contract).
unsafe fn size_query(buf: *mut c_void, len: *mut usize) -> Result<usize> {
    non_null(len)?;
    // SAFETY: checked non-NULL; valid per the function contract.
    let n = unsafe { *len };
    if buf.is_null() && n != 0 {
        return Err(Error::INVAL);
    }
    Ok(n)
}

/// The checks of a raw-bytes query for a kernel (AV address, MR descriptor):
/// the object and the context are live and share a domain, no flag but
/// `FI_XPU`, and a valid `(buf, len)` size query. Returns the object and the context.
///
/// # Safety
/// `len` is NULL or valid for reading (the API's contract).
unsafe fn raw_query(
    obj: *const c_void,
    kind: Kind,
    ctx: *mut fid_xpu_host_ctx,
    buf: *mut c_void,
    len: *mut usize,
    flags: u64,
) -> Result<(Use, Use)> {
    let o = lookup(obj, kind)?;
    let c = lookup(ctx as *const c_void, Kind::Ctx)?;
    if !o.same_domain(&c) {
        return Err(Error::INVAL);
    }
    // FI_XPU is what libfabric's callers pass to ask for the XPU form.
    flags::accept::<XpuFormFlags>(flags)?;
    // SAFETY: per the function contract.
    unsafe { size_query(buf, len) }?;
    Ok((o, c))
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
    guard(|| {
        // SAFETY: `len` is NULL or valid (the API's contract).
        let (a, c) = unsafe { raw_query(av as *const c_void, Kind::Av, ctx, buf, len, flags) }?;
        Error::check(prov_call!(
            a.prov,
            av_lookup(a.handle(), fi_addr, c.handle(), buf, len, 0)
        ))?;
        Ok(0)
    })
}

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
    // SAFETY: `mr` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        answer(mr, || {
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
            ops::mr_reg(&dom, c, &r, context, &FID_OPS).map(|fid| fid.cast())
        })
    }
}

/// The remote key of a registration.
///
/// # Safety
/// `key` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_mr_key(mr: *mut fid_xpu_mr, key: *mut u64) -> c_int {
    // SAFETY: `key` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        answer(key, || {
            ops::mr_key(&*lookup(mr as *const c_void, Kind::Mr)?)
        })
    }
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
    guard(|| {
        // SAFETY: `len` is NULL or valid (the API's contract).
        let (m, c) = unsafe { raw_query(mr as *const c_void, Kind::Mr, ctx, buf, len, flags) }?;
        Error::check(prov_call!(
            m.prov,
            mr_desc(m.handle(), c.handle(), buf, len, 0)
        ))?;
        Ok(0)
    })
}

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
    // SAFETY: `attr` is NULL or a valid struct, unchanged during the call;
    // `cq` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        open_in(domain, attr, cq, |dom, attr| {
            ops::cq_open(dom, attr, context, &FID_OPS)
        })
    }
}
/// A CQ or counter the host reads: `-FI_EOPNOTSUPP` for an XPU one.
fn host_side(obj: *const c_void, kind: Kind) -> Result<Use> {
    let o = lookup(obj, kind)?;
    if o.xpu {
        return Err(Error::OPNOTSUPP);
    }
    Ok(o)
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
    guard_ssize(|| {
        let q = host_cq(cq)?;
        if count == 0 {
            return Ok(0);
        }
        non_null(buf)?;
        Ok(prov_call!(
            q.prov,
            cq_host_read(q.handle(), buf, count, src_addr)
        ))
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
    guard_ssize(|| {
        let q = host_cq(cq)?;
        non_null(buf)?;
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        Ok(prov_call!(q.prov, cq_host_readerr(q.handle(), buf, 0)))
    })
}

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
    // SAFETY: `attr` is NULL or a valid struct, unchanged during the call;
    // `cntr` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        open_in(domain, attr, cntr, |dom, attr| {
            ops::cntr_open(dom, attr, context, &FID_OPS)
        })
    }
}
fn host_cntr(cntr: *mut fid_xpu_host_cntr) -> Result<Use> {
    host_side(cntr as *const c_void, Kind::Cntr)
}

/// Reads a host counter's value or error count into `*out`.
///
/// # Safety
/// `out` is NULL or valid for writing (the exported readers' contract).
unsafe fn cntr_read(cntr: *mut fid_xpu_host_cntr, out: *mut u64, err: bool) -> c_int {
    guard(|| {
        non_null(out)?;
        let c = host_cntr(cntr)?;
        let (mut v, mut e) = (0u64, 0u64);
        Error::check(prov_call!(
            c.prov,
            cntr_host_read(c.handle(), &mut v, &mut e)
        ))?;
        // SAFETY: checked non-NULL; valid per the function contract.
        unsafe { put(out, if err { e } else { v }) };
        Ok(0)
    })
}

fn cntr_update(cntr: *mut fid_xpu_host_cntr, how: u32, value: u64) -> c_int {
    guard(|| {
        let c = host_cntr(cntr)?;
        Error::check(prov_call!(c.prov, cntr_host_update(c.handle(), how, value)))?;
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
    // SAFETY: `value` is NULL or valid for writing (the API's contract).
    unsafe { cntr_read(cntr, value, false) }
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
    // SAFETY: `value` is NULL or valid for writing (the API's contract).
    unsafe { cntr_read(cntr, value, true) }
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
    // SAFETY: `attr` is NULL or a valid struct, unchanged during the call;
    // `ep` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        open_in(domain, attr, ep, |dom, attr| {
            ops::endpoint(dom, attr, context, &FID_OPS)
        })
    }
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
    guard(|| {
        let e = lookup(ep as *const c_void, Kind::Ep)?;
        let b = lookup_any(bfid as *const c_void)?;
        ops::ep_bind(&e, &b, flags)?;
        Ok(0)
    })
}

/// Enables an endpoint once its AV and CQs are bound.
#[no_mangle]
pub extern "C" fn fi_xpu_enable(ep: *mut fid_xpu_host_ep) -> c_int {
    guard(|| {
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
    guard(|| {
        let e = lookup(ep as *const c_void, Kind::Ep)?;
        // SAFETY: the length pointer is NULL or valid (the API's contract).
        unsafe { size_query(addr, addrlen) }?;
        Error::check(prov_call!(e.prov, ep_getname(e.handle(), addr, addrlen)))?;
        Ok(0)
    })
}

/// Fills the device handle of an endpoint, XPU CQ or XPU counter.
///
/// # Safety
/// `out` is a valid `struct fid_xpu` (or larger typed wrapper).
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_export(obj: *mut fid, flags: u64, out: *mut fid_xpu) -> c_int {
    // SAFETY: `out` is NULL or a valid out-pointer (the API's contract).
    unsafe {
        answer(out, || {
            ops::export(&*lookup_any(obj as *const c_void)?, flags)
        })
    }
}

/// Closes any fi_xpu object (as `fi_close(fid)` does).
#[no_mangle]
pub extern "C" fn fi_xpu_close(obj: *mut fid) -> c_int {
    guard(|| object::close(obj as *const c_void).map(|_| 0))
}
