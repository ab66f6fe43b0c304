//! Host objects, as the C API's functions make and use them once their
//! pointer arguments are checked: open, bind, enable, export, the queries
//! worlds make, close. Each opening takes the `fi_ops` the new object's
//! shell points at from its caller (the C API's).
use crate::error::{Error, Result};
use crate::flags::{self, CntrBind, CqBind, EpCaps, MrAccess};
use crate::memory::{Memory, UserOps};
use crate::object::{self, acquire, lookup, register, release, Kind, New, Object};
use crate::provider::{Handle, Provider};
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Opens a child of `dom`, on the context `ctx` if any: `open` receives the
/// provider's domain and context handles and the out-pointer for the new
/// handle. Registers the child, or gives back the uses it took if the
/// provider refuses.
#[allow(clippy::too_many_arguments)]
fn open_in_domain(
    kind: Kind,
    dom: &Arc<Object>,
    ctx: Option<Arc<Object>>,
    xpu: bool,
    range: Option<(usize, usize)>,
    context: *mut c_void,
    ops: &'static fi_ops,
    open: impl FnOnce(Handle, Handle, &mut Handle) -> c_int,
) -> Result<*mut fid> {
    let ctx_h = ctx.as_ref().map_or(Handle::NULL, |c| c.handle());
    let mut holds = vec![dom.clone()];
    holds.extend(ctx);
    acquire(&holds.iter().collect::<Vec<_>>())?;
    let mut handle = Handle::NULL;
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
        ops,
    }))
}

/// The context named by an attribute, which must be in `dom`.
/// The new object takes a use on it (`open_in_domain`), which keeps it open
/// from there on.
pub fn attr_ctx(dom: &Arc<Object>, ctx: *mut fid_xpu_host_ctx) -> Result<Option<Arc<Object>>> {
    if ctx.is_null() {
        return Ok(None);
    }
    let c = lookup(ctx as *const c_void, Kind::Ctx)?;
    if !c.domain().is_some_and(|d| Arc::ptr_eq(&d, dom)) {
        return Err(Error::INVAL);
    }
    Ok(Some(Arc::clone(&c)))
}

/// A domain on `prov`, with checked attributes.
pub fn domain(
    prov: Arc<Provider>,
    attr: &fi_xpu_domain_attr,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    let mut handle = Handle::NULL;
    Error::check(prov.domain_open(prov.handle(), attr, &mut handle))?;
    Ok(register(New {
        kind: Kind::Domain,
        prov,
        handle,
        holds: vec![],
        memory: None,
        xpu: false,
        range: None,
        context,
        ops,
    }))
}

/// The XPU context of device `device` of `iface`, its memory through the
/// application's callbacks `user` if any.
pub fn ctx_open(
    dom: &Arc<Object>,
    iface: fi_hmem_iface,
    device: u64,
    user: Option<UserOps>,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    if !(0..64).contains(&iface) {
        return Err(Error::INVAL);
    }
    if dom.prov.desc().ifaces & (1u64 << iface) == 0 {
        dom.prov.log(
            FI_XPU_LOG_WARN,
            &format!("does not serve iface {}", crate::memory::iface_name(iface)),
        );
        return Err(Error::OPNOTSUPP);
    }
    let memory = Memory::new(iface, device, user)?;
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
        ops,
    )?;
    let args = fi_xpu_prov_ctx_args {
        iface,
        device,
        core_ctx: shell as *mut fid_xpu_host_ctx,
    };
    let mut h = Handle::NULL;
    let ret = prov.ctx_open(dom.handle(), &args, &mut h);
    object::finish_pending(shell, Error::check(ret).map(|_| h))?;
    Ok(shell)
}

/// Capabilities and raw sizes of a context.
pub fn ctx_query(c: &Object) -> Result<fi_xpu_ctx_info> {
    let mut out = fi_xpu_ctx_info::default();
    Error::check(c.prov.ctx_query(c.handle(), &mut out))?;
    Ok(out)
}

/// An address vector.
pub fn av_open(
    dom: &Arc<Object>,
    attr: &fi_xpu_av_attr,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    if attr.flags != 0 {
        return Err(Error::BADFLAGS);
    }
    open_in_domain(Kind::Av, dom, None, false, None, context, ops, |d, _, h| {
        dom.prov.av_open(d, attr, h)
    })
}

/// Inserts the `count` addresses packed in `addr` (each the provider's
/// `addrlen` bytes); `fi_addr`, if given, receives each one's address or
/// `FI_ADDR_UNSPEC`. Returns the number inserted.
pub fn av_insert(
    a: &Object,
    addr: &[u8],
    count: usize,
    mut fi_addr: Option<&mut [fi_addr_t]>,
) -> Result<c_int> {
    let addrlen = a.prov.desc().addrlen;
    if count.checked_mul(addrlen) != Some(addr.len())
        || fi_addr.as_ref().is_some_and(|f| f.len() < count)
    {
        return Err(Error::INVAL);
    }
    let mut inserted = 0;
    let mut first_err = None;
    for i in 0..count {
        let mut out: fi_addr_t = FI_ADDR_UNSPEC;
        let one = addr[i * addrlen..].as_ptr() as *const c_void;
        // SAFETY: `addr` was checked to hold `count` addresses of `addrlen`
        // bytes, so `one` holds `addrlen` bytes.
        let ret = unsafe { a.prov.av_insert(a.handle(), one, &mut out, 0) };
        match Error::check(ret) {
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
        if let Some(f) = fi_addr.as_mut() {
            f[i] = out;
        }
    }
    match (inserted, first_err) {
        (0, Some(e)) => Err(e),
        (n, _) => Ok(n),
    }
}

/// The raw address a kernel on `c` uses to reach `fi_addr` of `a`, into
/// `buf`; returns its length.
pub fn av_lookup(a: &Object, c: &Object, fi_addr: fi_addr_t, buf: &mut [u8]) -> Result<usize> {
    raw_query(a, c)?;
    let mut len = buf.len();
    let p = buf.as_mut_ptr() as *mut c_void;
    // SAFETY: `buf` holds `len` bytes.
    Error::check(unsafe {
        a.prov
            .av_lookup(a.handle(), fi_addr, c.handle(), p, &mut len, 0)
    })?;
    Ok(len)
}

/// The raw descriptor a kernel on `c` passes for `m`, into `buf`; returns
/// its length.
pub fn mr_desc(m: &Object, c: &Object, buf: &mut [u8]) -> Result<usize> {
    raw_query(m, c)?;
    let mut len = buf.len();
    let p = buf.as_mut_ptr() as *mut c_void;
    // SAFETY: `buf` holds `len` bytes.
    Error::check(unsafe { m.prov.mr_desc(m.handle(), c.handle(), p, &mut len, 0) })?;
    Ok(len)
}

/// A raw-bytes query for a kernel is about an object and a context of
/// one domain.
pub fn raw_query(o: &Object, c: &Object) -> Result<()> {
    if !o.same_domain(c) {
        return Err(Error::INVAL);
    }
    Ok(())
}

/// The checked arguments of a registration.
pub struct MrReg {
    pub buf: usize,
    pub len: usize,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub flags: u64,
}

/// Registers `[r.buf, r.buf + r.len)` for access by peers, on the context
/// `ctx` (the device the memory belongs to) or as host memory.
pub fn mr_reg(
    dom: &Arc<Object>,
    c: Option<Arc<Object>>,
    r: &MrReg,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    let MrReg {
        buf,
        len,
        access,
        offset,
        requested_key,
        flags,
    } = *r;
    if buf == 0 {
        return Err(Error::INVAL);
    }
    if len == 0 || access == 0 {
        return Err(Error::INVAL);
    }
    flags::accept::<MrAccess>(access)?;
    if flags != 0 {
        return Err(Error::BADFLAGS);
    }
    if buf.checked_add(len).is_none() {
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
        buf: buf as *const c_void,
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
        dom,
        c,
        false,
        Some((buf, len)),
        context,
        ops,
        |d, x, h| dom.prov.mr_reg(d, x, &args, h),
    )?;
    crate::debug!(
        "mr {fid:p}: registered [{:p}, +{len:#x}) access {access:#x} on {}",
        buf as *const c_void,
        dom.describe()
    );
    Ok(fid)
}

/// The remote key of a registration.
pub fn mr_key(m: &Object) -> Result<u64> {
    let mut k = 0u64;
    Error::check(m.prov.mr_key(m.handle(), &mut k))?;
    Ok(k)
}

/// A completion queue: an XPU CQ when `attr.xpu_ctx` is set, a host CQ
/// otherwise.
pub fn cq_open(
    dom: &Arc<Object>,
    attr: &fi_xpu_cq_attr,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    if attr.flags != 0 {
        return Err(Error::BADFLAGS);
    }
    if !(FI_CQ_FORMAT_UNSPEC..=FI_CQ_FORMAT_TAGGED).contains(&attr.format) {
        return Err(Error::INVAL);
    }
    if attr.size > u32::MAX as usize {
        return Err(Error::OVERFLOW);
    }
    let c = attr_ctx(dom, attr.xpu_ctx)?;
    let xpu = c.is_some();
    open_in_domain(Kind::Cq, dom, c, xpu, None, context, ops, |d, x, h| {
        dom.prov.cq_open(d, x, attr, h)
    })
}

/// A counter: an XPU counter when `attr.xpu_ctx` is set, a host one
/// otherwise.
pub fn cntr_open(
    dom: &Arc<Object>,
    attr: &fi_xpu_cntr_attr,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    if attr.flags != 0 {
        return Err(Error::BADFLAGS);
    }
    let c = attr_ctx(dom, attr.xpu_ctx)?;
    let xpu = c.is_some();
    open_in_domain(Kind::Cntr, dom, c, xpu, None, context, ops, |d, x, h| {
        dom.prov.cntr_open(d, x, attr, h)
    })
}

/// An endpoint for the device `attr.xpu_ctx`.
pub fn endpoint(
    dom: &Arc<Object>,
    attr: &fi_xpu_ep_attr,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    if attr.flags != 0 {
        return Err(Error::BADFLAGS);
    }
    flags::accept::<EpCaps>(attr.caps)?;
    let c = attr_ctx(dom, attr.xpu_ctx)?.ok_or(Error::INVAL)?;
    open_in_domain(
        Kind::Ep,
        dom,
        Some(c),
        true,
        None,
        context,
        ops,
        |d, x, h| dom.prov.ep_open(d, x, attr, h),
    )
}

/// Binds the AV, CQ or counter `b` to the endpoint `e`.
pub fn ep_bind(e: &Arc<Object>, b: &Arc<Object>, flags: u64) -> Result<()> {
    if !e.same_domain(b) {
        return Err(Error::INVAL);
    }
    if e.enabled.load(Ordering::Acquire) {
        return Err(Error::OPBADSTATE);
    }
    match b.kind {
        Kind::Av if flags != 0 => return Err(Error::BADFLAGS),
        Kind::Av if !object::holds(e, Kind::Av).is_empty() => return Err(Error::INVAL),
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
    acquire(&[b])?;
    if let Err(err) = Error::check(
        e.prov
            .ep_bind(e.handle(), b.kind.fclass(), b.handle(), flags),
    ) {
        release(&[Arc::clone(b)]);
        return Err(err);
    }
    if b.kind == Kind::Cq {
        e.cq_bound.fetch_or(
            flags & (fi_xpu_abi::flags::FI_TRANSMIT | fi_xpu_abi::flags::FI_RECV),
            Ordering::AcqRel,
        );
    }
    object::add_hold(e, Arc::clone(b));
    crate::debug!(
        "bound {} to {} (flags {flags:#x})",
        b.describe(),
        e.describe()
    );
    Ok(())
}

/// Enables an endpoint once its AV and CQs are bound.
pub fn enable(e: &Object) -> Result<()> {
    if e.enabled.load(Ordering::Acquire) {
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
    if let Err(err) = Error::check(e.prov.ep_enable(e.handle())) {
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
    e.enabled.store(true, Ordering::Release);
    crate::debug!("enabled {}", e.describe());
    Ok(())
}

/// The device handle of an endpoint, XPU CQ or XPU counter.
pub fn export(o: &Object, flags: u64) -> Result<fid_xpu> {
    if flags != 0 {
        return Err(Error::BADFLAGS);
    }
    let mut handle = fid_xpu::default();
    let ret = match o.kind {
        Kind::Ep if !o.enabled.load(Ordering::Acquire) => return Err(Error::OPBADSTATE),
        Kind::Ep => o.prov.ep_export(o.handle(), 0, &mut handle),
        Kind::Cq | Kind::Cntr if !o.xpu => return Err(Error::OPNOTSUPP),
        Kind::Cq => o.prov.cq_export(o.handle(), 0, &mut handle),
        Kind::Cntr => o.prov.cntr_export(o.handle(), 0, &mut handle),
        _ => return Err(Error::INVAL),
    };
    Error::check(ret)?;
    Ok(handle)
}

/// The endpoint's address into `buf`: its length, or `Err((-FI_ETOOSMALL,
/// the length needed))` and the like.
pub fn getname(e: &Object, buf: &mut [u8]) -> std::result::Result<usize, (Error, usize)> {
    let mut len = buf.len();
    let p = buf.as_mut_ptr() as *mut c_void;
    // SAFETY: `buf` holds `len` bytes.
    match Error::check(unsafe { e.prov.ep_getname(e.handle(), p, &mut len) }) {
        Ok(()) => Ok(len),
        Err(err) => Err((err, len)),
    }
}

/// Closes an object (`fi_close`).
pub fn close(obj: *mut fid) -> Result<()> {
    object::close(obj as *const c_void).map(|_| ())
}
