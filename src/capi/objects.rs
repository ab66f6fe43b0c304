//! Host objects: domain, XPU context, AV, MR, CQ, counter, endpoint, export
//! and close.
use super::info::provider_of;
use super::{attr_size, guard, guard_ssize, non_null, put, read_opt, FID_OPS};
use crate::error::{Error, Result};
use crate::flags::{
    self, AbortFlags, CntrBind, CqBind, DomainFlags, EpCaps, MrAccess, XpuFormFlags,
};
use crate::memory::{Memory, UserOps};
use crate::object::{self, acquire, lookup, lookup_any, register, release, Kind, New, Object, Use};
use crate::prov_call;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Opens a child of `dom`, on the context `ctx` if any: `open` receives the
/// provider's domain and context handles and the out-pointer for the new
/// handle. Registers the child, or gives back the uses it took if the
/// provider refuses.
fn open_in_domain(
    kind: Kind,
    dom: &Arc<Object>,
    ctx: Option<Arc<Object>>,
    xpu: bool,
    range: Option<(usize, usize)>,
    context: *mut c_void,
    open: impl FnOnce(*mut c_void, *mut c_void, &mut *mut c_void) -> c_int,
) -> Result<*mut fid> {
    let ctx_h = ctx.as_ref().map_or(std::ptr::null_mut(), |c| c.handle());
    let mut holds = vec![dom.clone()];
    holds.extend(ctx);
    acquire(&holds.iter().collect::<Vec<_>>())?;
    let mut handle = std::ptr::null_mut();
    if let Err(e) = Error::check(open(dom.handle(), ctx_h, &mut handle)) {
        release(&holds);
        return Err(e);
    }
    Ok(register(New {
        kind,
        prov: dom.prov.clone(),
        handle,
        holds,
        memory: None,
        xpu,
        range,
        context,
        ops: &FID_OPS,
    }))
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
    guard(|| {
        non_null(domain)?;
        let prov = provider_of(info)?;
        let defaults = fi_xpu_domain_attr {
            size: std::mem::size_of::<fi_xpu_domain_attr>(),
            fabric_prov: std::ptr::null(),
            progress_threads: 0,
            reserved: 0,
            flags: 0,
        };
        // SAFETY: `attr` is NULL or a valid struct, unchanged during the call (the API's contract).
        let attr = match unsafe { read_opt(attr) } {
            None => &defaults,
            Some(a) => {
                attr_size::<fi_xpu_domain_attr>("fi_xpu_domain", "fi_xpu_domain_attr", a.size)?;
                flags::accept::<DomainFlags>(a.flags)?;
                a
            }
        };
        let mut handle = std::ptr::null_mut();
        Error::check(prov_call!(
            prov,
            domain_open(prov.handle(), attr, &mut handle)
        ))?;
        let fid = register(New {
            kind: Kind::Domain,
            prov,
            handle,
            holds: vec![],
            memory: None,
            xpu: false,
            range: None,
            context,
            ops: &FID_OPS,
        });
        // SAFETY: `domain` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(domain, fid as *mut fid_xpu_domain) };
        Ok(0)
    })
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
    guard(|| {
        non_null(ctx)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        // SAFETY: `attr` is NULL or a valid struct, unchanged during the call (the API's contract).
        let attr = unsafe { read_opt(attr) }.ok_or(Error::INVAL)?;
        let ops = if attr.ops.is_null() {
            None
        } else {
            // SAFETY: the caller guarantees `ops` points to a struct of `size` bytes.
            Some(unsafe { UserOps::from_raw(attr.ops, attr.device) }?)
        };
        if attr.iface < 0 || attr.iface >= 64 {
            return Err(Error::INVAL);
        }
        if dom.prov.desc().ifaces & (1u64 << attr.iface) == 0 {
            dom.prov.log(
                FI_XPU_LOG_WARN,
                &format!(
                    "does not serve iface {}",
                    crate::memory::iface_name(attr.iface)
                ),
            );
            return Err(Error::OPNOTSUPP);
        }
        let memory = Memory::new(attr.iface, attr.device, ops)?;
        // The provider gets the application's handle before it exists as a
        // registered object, so it is registered first and its provider handle
        // filled in by a second registration step.
        let prov = dom.prov.clone();
        let shell = object::register_pending(
            Kind::Ctx,
            prov.clone(),
            vec![dom.clone()],
            memory,
            context,
            &FID_OPS,
        )?;
        let args = fi_xpu_prov_ctx_args {
            iface: attr.iface,
            device: attr.device,
            core_ctx: shell as *mut fid_xpu_host_ctx,
        };
        let mut h = std::ptr::null_mut();
        let ret = prov_call!(prov, ctx_open(dom.handle(), &args, &mut h));
        object::finish_pending(shell, Error::check(ret).map(|_| h))?;
        // SAFETY: `ctx` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(ctx, shell as *mut fid_xpu_host_ctx) };
        Ok(0)
    })
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
    guard(|| {
        non_null(attr)?;
        let c = lookup(ctx as *const c_void, Kind::Ctx)?;
        let mut out = fi_xpu_ctx_info::default();
        Error::check(prov_call!(c.prov, ctx_query(c.handle(), &mut out)))?;
        // SAFETY: `attr` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(attr, out) };
        Ok(0)
    })
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
    guard(|| {
        non_null(av)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        let defaults = fi_xpu_av_attr { count: 0, flags: 0 };
        // SAFETY: `attr` is NULL or a valid struct, unchanged during the call (the API's contract).
        let attr = unsafe { read_opt(attr) }.unwrap_or(&defaults);
        if attr.flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let fid = open_in_domain(Kind::Av, &dom, None, false, None, context, |d, _, h| {
            prov_call!(dom.prov, av_open(d, attr, h))
        })?;
        // SAFETY: `av` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(av, fid as *mut fid_xpu_av) };
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
        let mut inserted = 0;
        let mut first_err = None;
        for i in 0..count {
            let one = (addr as usize + i * addrlen) as *const c_void;
            let mut out: fi_addr_t = FI_ADDR_UNSPEC;
            match Error::check(prov_call!(a.prov, av_insert(a.handle(), one, &mut out, 0))) {
                Ok(()) => {
                    inserted += 1;
                    crate::debug!("{}: inserted fi_addr {out}", a.describe());
                }
                Err(e) => {
                    out = FI_ADDR_UNSPEC;
                    first_err.get_or_insert(e);
                    crate::warn!(
                        "fi_xpu_av_insert: {}: address {i} of {count} refused by provider {}: -{e:?} ({e}){}",
                        a.describe(),
                        a.prov.name,
                        if e == Error::INVAL {
                            ": not an address this provider's fi_xpu_getname gave (garbage, or another provider's)"
                        } else {
                            ""
                        }
                    );
                }
            }
            if !fi_addr.is_null() {
                // SAFETY: `fi_addr` was checked non-NULL and has `count`
                // slots (the API's contract), `i` < `count`.
                unsafe { put(fi_addr.wrapping_add(i), out) };
            }
        }
        match (inserted, first_err) {
            (0, Some(e)) => Err(e),
            (n, _) => Ok(n),
        }
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
    guard(|| {
        non_null(mr)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        let c = attr_ctx(&dom, ctx)?;
        non_null(buf)?;
        if len == 0 || access == 0 {
            return Err(Error::INVAL);
        }
        flags::accept::<MrAccess>(access)?;
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        if (buf as usize).checked_add(len).is_none() {
            return Err(Error::OVERFLOW);
        }
        let (iface, device, core_ctx) = match &c {
            Some(c) => (
                c.memory_iface(),
                c.memory_device(),
                c.shell() as *mut fid_xpu_host_ctx,
            ),
            None => (FI_HMEM_SYSTEM, 0, std::ptr::null_mut()),
        };
        let args = fi_xpu_prov_mr_args {
            buf,
            len,
            access,
            offset,
            requested_key,
            flags,
            iface,
            device,
            core_ctx,
        };
        let fid = open_in_domain(
            Kind::Mr,
            &dom,
            c,
            false,
            Some((buf as usize, len)),
            context,
            |d, x, h| prov_call!(dom.prov, mr_reg(d, x, &args, h)),
        )?;
        crate::debug!(
            "mr {fid:p}: registered [{buf:p}, +{len:#x}) access {access:#x} on {}",
            dom.describe()
        );
        // SAFETY: `mr` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(mr, fid as *mut fid_xpu_mr) };
        Ok(0)
    })
}

/// The remote key of a registration.
///
/// # Safety
/// `key` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_mr_key(mr: *mut fid_xpu_mr, key: *mut u64) -> c_int {
    guard(|| {
        non_null(key)?;
        let m = lookup(mr as *const c_void, Kind::Mr)?;
        let mut k = 0u64;
        Error::check(prov_call!(m.prov, mr_key(m.handle(), &mut k)))?;
        // SAFETY: `key` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(key, k) };
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

/// The context named by an attribute, which must be in `dom`.
/// The new object takes a use on it (`open_in_domain`), which keeps it open
/// from there on.
fn attr_ctx(dom: &Arc<Object>, ctx: *mut fid_xpu_host_ctx) -> Result<Option<Arc<Object>>> {
    if ctx.is_null() {
        return Ok(None);
    }
    let c = lookup(ctx as *const c_void, Kind::Ctx)?;
    if !c.domain().is_some_and(|d| Arc::ptr_eq(&d, dom)) {
        return Err(Error::INVAL);
    }
    Ok(Some(Arc::clone(&c)))
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
    guard(|| {
        non_null(cq)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        // SAFETY: `attr` is NULL or a valid struct, unchanged during the call (the API's contract).
        let attr = unsafe { read_opt(attr) }.ok_or(Error::INVAL)?;
        if attr.flags != 0 {
            return Err(Error::BADFLAGS);
        }
        if !(FI_CQ_FORMAT_UNSPEC..=FI_CQ_FORMAT_TAGGED).contains(&attr.format) {
            return Err(Error::INVAL);
        }
        if attr.size > u32::MAX as usize {
            return Err(Error::OVERFLOW);
        }
        let c = attr_ctx(&dom, attr.xpu_ctx)?;
        let xpu = c.is_some();
        let fid = open_in_domain(Kind::Cq, &dom, c, xpu, None, context, |d, x, h| {
            prov_call!(dom.prov, cq_open(d, x, attr, h))
        })?;
        // SAFETY: `cq` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(cq, fid as *mut fid_xpu_host_cq) };
        Ok(0)
    })
}

fn host_cq(cq: *mut fid_xpu_host_cq) -> Result<Use> {
    let q = lookup(cq as *const c_void, Kind::Cq)?;
    if q.xpu {
        return Err(Error::OPNOTSUPP);
    }
    Ok(q)
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
    guard(|| {
        non_null(cntr)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        // SAFETY: `attr` is NULL or a valid struct, unchanged during the call (the API's contract).
        let attr = unsafe { read_opt(attr) }.ok_or(Error::INVAL)?;
        if attr.flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let c = attr_ctx(&dom, attr.xpu_ctx)?;
        let xpu = c.is_some();
        let fid = open_in_domain(Kind::Cntr, &dom, c, xpu, None, context, |d, x, h| {
            prov_call!(dom.prov, cntr_open(d, x, attr, h))
        })?;
        // SAFETY: `cntr` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(cntr, fid as *mut fid_xpu_host_cntr) };
        Ok(0)
    })
}

fn host_cntr(cntr: *mut fid_xpu_host_cntr) -> Result<Use> {
    let c = lookup(cntr as *const c_void, Kind::Cntr)?;
    if c.xpu {
        return Err(Error::OPNOTSUPP);
    }
    Ok(c)
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
    guard(|| {
        non_null(ep)?;
        let dom = lookup(domain as *const c_void, Kind::Domain)?;
        // SAFETY: `attr` is NULL or a valid struct, unchanged during the call (the API's contract).
        let attr = unsafe { read_opt(attr) }.ok_or(Error::INVAL)?;
        if attr.flags != 0 {
            return Err(Error::BADFLAGS);
        }
        flags::accept::<EpCaps>(attr.caps)?;
        let c = attr_ctx(&dom, attr.xpu_ctx)?.ok_or(Error::INVAL)?;
        let fid = open_in_domain(Kind::Ep, &dom, Some(c), true, None, context, |d, x, h| {
            prov_call!(dom.prov, ep_open(d, x, attr, h))
        })?;
        // SAFETY: `ep` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(ep, fid as *mut fid_xpu_host_ep) };
        Ok(0)
    })
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
        if !e.same_domain(&b) {
            return Err(Error::INVAL);
        }
        if e.flag.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        match b.kind {
            Kind::Av if flags != 0 => return Err(Error::BADFLAGS),
            Kind::Av if !object::holds(&e, Kind::Av).is_empty() => return Err(Error::INVAL),
            Kind::Cq => {
                flags::accept_some::<CqBind>(flags)?;
            }
            Kind::Cntr => {
                flags::accept_some::<CntrBind>(flags)?;
            }
            Kind::Av => {}
            _ => return Err(Error::INVAL),
        }
        if let (Some(bc), Some(ec)) = (b.ctx(), e.ctx()) {
            if !Arc::ptr_eq(&bc, &ec) {
                return Err(Error::INVAL);
            }
        }
        acquire(&[&b])?;
        if let Err(err) = Error::check(prov_call!(
            e.prov,
            ep_bind(e.handle(), b.kind.fclass(), b.handle(), flags)
        )) {
            release(&[Arc::clone(&b)]);
            return Err(err);
        }
        if b.kind == Kind::Cq {
            e.cq_bound.fetch_or(
                flags & (fi_xpu_abi::flags::FI_TRANSMIT | fi_xpu_abi::flags::FI_RECV),
                Ordering::AcqRel,
            );
        }
        object::add_hold(&e, Arc::clone(&b));
        crate::debug!(
            "bound {} to {} (flags {flags:#x})",
            b.describe(),
            e.describe()
        );
        Ok(0)
    })
}

/// Enables an endpoint once its AV and CQs are bound.
#[no_mangle]
pub extern "C" fn fi_xpu_enable(ep: *mut fid_xpu_host_ep) -> c_int {
    guard(|| {
        let e = lookup(ep as *const c_void, Kind::Ep)?;
        if e.flag.load(Ordering::Acquire) {
            return Err(Error::OPBADSTATE);
        }
        // Without a CQ nothing the endpoint does could report, not even
        // an error: libfabric's -FI_ENOCQ. Whether an AV is needed is the
        // provider's to say (-FI_ENOAV), logged here alike.
        if e.cq_bound.load(Ordering::Acquire) == 0 {
            crate::warn!(
                "fi_xpu_enable: {}: no CQ bound (-FI_ENOCQ): bind one with FI_TRANSMIT and/or FI_RECV first",
                e.describe()
            );
            return Err(Error::NOCQ);
        }
        if let Err(err) = Error::check(prov_call!(e.prov, ep_enable(e.handle()))) {
            match err {
                Error::NOAV => crate::warn!(
                    "fi_xpu_enable: {}: no AV bound (-FI_ENOAV): provider {} addresses peers through it; bind one first",
                    e.describe(),
                    e.prov.name
                ),
                Error::NOCQ => crate::warn!(
                    "fi_xpu_enable: {}: provider {} needs another CQ bound (-FI_ENOCQ)",
                    e.describe(),
                    e.prov.name
                ),
                _ => {}
            }
            return Err(err);
        }
        e.flag.store(true, Ordering::Release);
        crate::debug!("enabled {}", e.describe());
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
    guard(|| {
        non_null(out)?;
        let o = lookup_any(obj as *const c_void)?;
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let mut handle = fid_xpu::default();
        let ret = match o.kind {
            Kind::Ep if !o.flag.load(Ordering::Acquire) => return Err(Error::OPBADSTATE),
            Kind::Ep => prov_call!(o.prov, ep_export(o.handle(), 0, &mut handle)),
            Kind::Cq | Kind::Cntr if !o.xpu => return Err(Error::OPNOTSUPP),
            Kind::Cq => prov_call!(o.prov, cq_export(o.handle(), 0, &mut handle)),
            Kind::Cntr => prov_call!(o.prov, cntr_export(o.handle(), 0, &mut handle)),
            _ => return Err(Error::INVAL),
        };
        Error::check(ret)?;
        if o.kind != Kind::Ep {
            o.flag.store(true, Ordering::Release);
        }
        // SAFETY: `out` was checked non-NULL and is valid for writing (the API's contract for out-parameters).
        unsafe { put(out, handle) };
        Ok(0)
    })
}

/// Closes any fi_xpu object (as `fi_close(fid)` does).
#[no_mangle]
pub extern "C" fn fi_xpu_close(obj: *mut fid) -> c_int {
    guard(|| object::close(obj as *const c_void).map(|_| 0))
}
