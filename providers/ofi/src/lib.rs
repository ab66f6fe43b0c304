//! The ofi provider: kernels post work requests into a ring in host-visible
//! memory; progress threads issue them on a libfabric endpoint and write
//! completions and counters back (see fi_xpu_ofi(7)).
//!
//! This file is the plugin's `extern "C"` surface: it converts handles and
//! calls the safe code in the other modules.
mod core;
mod fabric;
pub mod ffi;
pub mod layout;
mod objects;
mod proxy;
pub mod ring;

use fi_xpu_abi::class::*;
use fi_xpu_abi::errno::*;
use fi_xpu_abi::*;
use objects::{Av, CntrShared, CqShared, Domain, Ep, Mr, XpuCtx, ADDR_LEN};
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

type H = fi_xpu_prov_handle;

fn guard(f: impl FnOnce() -> Result<c_int, i32>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e,
        Err(_) => {
            core::warn("internal error in the ofi provider");
            -FI_EOTHER
        }
    }
}

fn guard_ssize(f: impl FnOnce() -> isize) -> isize {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        core::warn("internal error in the ofi provider");
        -FI_EOTHER as isize
    })
}

fn boxed<T>(v: T, out: *mut H) -> Result<c_int, i32> {
    // SAFETY: the core passes a valid out-pointer.
    unsafe { *out = Box::into_raw(Box::new(v)) as H };
    Ok(0)
}

/// # Safety
/// `h` is a handle this provider returned for a `T` and not yet closed.
unsafe fn obj<'a, T>(h: H) -> &'a mut T {
    // SAFETY: per the function contract.
    unsafe { &mut *(h as *mut T) }
}

/// # Safety
/// As `obj`; the handle is dead afterwards.
unsafe fn drop_obj<T>(h: H) {
    // SAFETY: per the function contract.
    drop(unsafe { Box::from_raw(h as *mut T) });
}

fn put_sized(buf: *mut c_void, len: *mut usize, bytes: &[u8]) -> Result<c_int, i32> {
    // SAFETY: the core checked len non-NULL and buf valid for *len bytes.
    unsafe {
        if *len < bytes.len() {
            *len = bytes.len();
            return Err(-FI_ETOOSMALL);
        }
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len());
        *len = bytes.len();
    }
    Ok(0)
}

unsafe extern "C" fn init(core_services: *const fi_xpu_core, prov: *mut H) -> c_int {
    guard(|| {
        // SAFETY: the core passes its static table; size is read first.
        let c = unsafe { &*core_services };
        if c.size < std::mem::size_of::<fi_xpu_core>() {
            return Err(-FI_ENOSYS);
        }
        core::set(core_services);
        if !ffi::available() {
            core::warn("built without libfabric (its headers were not found at build time)");
            return Err(-FI_ENODEV);
        }
        // SAFETY: valid out-pointer from the core.
        unsafe { *prov = std::ptr::null_mut() };
        Ok(0)
    })
}

unsafe extern "C" fn fini(_prov: H) {}

unsafe extern "C" fn domain_open(_p: H, attr: *const fi_xpu_domain_attr, out: *mut H) -> c_int {
    // SAFETY: attr is NULL or valid (checked by the core).
    guard(|| boxed(Domain::open(unsafe { attr.as_ref() })?, out))
}

unsafe extern "C" fn domain_close(h: H) -> c_int {
    // SAFETY: the core closes a handle once, after all its children.
    guard(|| unsafe {
        drop_obj::<Domain>(h);
        Ok(0)
    })
}

unsafe extern "C" fn ctx_open(dom: H, args: *const fi_xpu_prov_ctx_args, out: *mut H) -> c_int {
    guard(|| {
        // SAFETY: handles and args come from the core.
        let (d, a) = unsafe { (obj::<Domain>(dom), &*args) };
        boxed(XpuCtx::open(&d.inner, a)?, out)
    })
}

unsafe extern "C" fn ctx_query(_ctx: H, attr: *mut fi_xpu_ctx_attr) -> c_int {
    guard(|| {
        // SAFETY: valid out-pointer from the core.
        let a = unsafe { &mut *attr };
        a.caps = FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR;
        a.av_addr_size = 8;
        a.mr_desc_size = std::mem::size_of::<layout::MrDesc>();
        a.max_tx_wr_desc_size = std::mem::size_of::<layout::Wqe>();
        a.max_rx_wr_desc_size = std::mem::size_of::<layout::Wqe>();
        Ok(0)
    })
}

unsafe extern "C" fn ctx_close(h: H) -> c_int {
    // SAFETY: closing a live context handle.
    guard(|| unsafe {
        drop_obj::<XpuCtx>(h);
        Ok(0)
    })
}

unsafe extern "C" fn av_open(dom: H, attr: *const fi_xpu_av_attr, out: *mut H) -> c_int {
    guard(|| {
        // SAFETY: live domain; attr NULL or valid.
        let (d, count) = unsafe { (obj::<Domain>(dom), attr.as_ref().map_or(0, |a| a.count)) };
        boxed(Av::open(&d.inner, count)?, out)
    })
}

unsafe extern "C" fn av_insert(
    av: H,
    addr: *const c_void,
    fi_addr: *mut fi_addr_t,
    _f: u64,
) -> c_int {
    guard(|| {
        // SAFETY: the core passes `addrlen` readable bytes.
        let raw = unsafe { std::slice::from_raw_parts(addr as *const u8, ADDR_LEN) };
        // SAFETY: live AV handle.
        let a = unsafe { obj::<Av>(av) }.insert(raw)?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *fi_addr = a };
        Ok(0)
    })
}

unsafe extern "C" fn av_remove(av: H, fi_addr: fi_addr_t, _f: u64) -> c_int {
    // SAFETY: live AV handle.
    guard(|| unsafe { obj::<Av>(av) }.remove(fi_addr).map(|_| 0))
}

unsafe extern "C" fn av_lookup(
    av: H,
    fi_addr: fi_addr_t,
    _ctx: H,
    buf: *mut c_void,
    len: *mut usize,
    _f: u64,
) -> c_int {
    guard(|| {
        // SAFETY: live AV; len checked by the core.
        let a = unsafe { obj::<Av>(av) };
        if unsafe { *len } < 8 {
            return put_sized(buf, len, &[0u8; 8]);
        }
        put_sized(buf, len, &a.lookup(fi_addr)?.to_ne_bytes())
    })
}

unsafe extern "C" fn av_close(h: H) -> c_int {
    // SAFETY: closing a live AV.
    guard(|| unsafe {
        drop_obj::<Av>(h);
        Ok(0)
    })
}

unsafe extern "C" fn mr_reg(
    dom: H,
    _ctx: H,
    args: *const fi_xpu_prov_mr_args,
    out: *mut H,
) -> c_int {
    guard(|| {
        // SAFETY: live handles and args from the core.
        let (d, a) = unsafe { (obj::<Domain>(dom), &*args) };
        boxed(Mr::reg(&d.inner, a)?, out)
    })
}

unsafe extern "C" fn mr_key(mr: H, key: *mut u64) -> c_int {
    guard(|| {
        // SAFETY: live MR; valid out-pointer.
        unsafe { *key = obj::<Mr>(mr).key };
        Ok(0)
    })
}

unsafe extern "C" fn mr_desc(mr: H, _ctx: H, buf: *mut c_void, len: *mut usize, _f: u64) -> c_int {
    guard(|| {
        // SAFETY: live MR.
        let d = unsafe { obj::<Mr>(mr) }.desc();
        let mut b = [0u8; 32];
        for (i, w) in [d.id, d.key, d.base, d.len].iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        put_sized(buf, len, &b)
    })
}

unsafe extern "C" fn mr_close(h: H) -> c_int {
    // SAFETY: closing a live MR.
    guard(|| unsafe {
        drop_obj::<Mr>(h);
        Ok(0)
    })
}

unsafe extern "C" fn cq_open(_dom: H, ctx: H, attr: *const fi_xpu_cq_attr, out: *mut H) -> c_int {
    guard(|| {
        // SAFETY: ctx NULL or live; attr from the core.
        let c = unsafe { (ctx as *const XpuCtx).as_ref() }.map(|c| c.core_ctx);
        boxed(CqShared::open(c, unsafe { &*attr })?, out)
    })
}

unsafe extern "C" fn cq_export(cq: H, _f: u64, out: *mut fid_xpu) -> c_int {
    guard(|| {
        // SAFETY: live CQ; valid out-pointer.
        unsafe {
            *out = fid_xpu {
                fclass: FI_CLASS_CQ as u32,
                prov_id: FI_XPU_PROV_OFI,
                prov_ctx: obj::<Arc<CqShared>>(cq).dev() as u64,
            }
        };
        Ok(0)
    })
}

unsafe extern "C" fn cq_host_read(
    cq: H,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
) -> isize {
    // SAFETY: live CQ; the core checked buf for count entries.
    guard_ssize(|| unsafe { obj::<Arc<CqShared>>(cq) }.host_read(buf as *mut u8, count, src))
}

unsafe extern "C" fn cq_host_readerr(cq: H, buf: *mut fi_cq_err_entry, _f: u64) -> isize {
    // SAFETY: live CQ; valid entry pointer from the core.
    guard_ssize(|| unsafe { obj::<Arc<CqShared>>(cq).host_readerr(&mut *buf) })
}

unsafe extern "C" fn cq_close(h: H) -> c_int {
    // SAFETY: closing a live CQ.
    guard(|| unsafe {
        drop_obj::<Arc<CqShared>>(h);
        Ok(0)
    })
}

unsafe extern "C" fn cntr_open(
    _dom: H,
    ctx: H,
    _attr: *const fi_xpu_cntr_attr,
    out: *mut H,
) -> c_int {
    guard(|| {
        // SAFETY: ctx NULL or live.
        let c = unsafe { (ctx as *const XpuCtx).as_ref() }.map(|c| c.core_ctx);
        boxed(CntrShared::open(c)?, out)
    })
}

unsafe extern "C" fn cntr_export(c: H, _f: u64, out: *mut fid_xpu) -> c_int {
    guard(|| {
        // SAFETY: live counter; valid out-pointer.
        unsafe {
            *out = fid_xpu {
                fclass: FI_CLASS_CNTR as u32,
                prov_id: FI_XPU_PROV_OFI,
                prov_ctx: obj::<Arc<CntrShared>>(c).dev() as u64,
            }
        };
        Ok(0)
    })
}

unsafe extern "C" fn cntr_host_read(c: H, value: *mut u64, err: *mut u64) -> c_int {
    guard(|| {
        // SAFETY: live counter; valid out-pointers.
        unsafe {
            let (v, e) = obj::<Arc<CntrShared>>(c).read();
            *value = v;
            *err = e;
        }
        Ok(0)
    })
}

unsafe extern "C" fn cntr_host_update(c: H, how: u32, v: u64) -> c_int {
    // SAFETY: live counter.
    guard(|| Ok(unsafe { obj::<Arc<CntrShared>>(c) }.update(how, v)))
}

unsafe extern "C" fn cntr_close(h: H) -> c_int {
    // SAFETY: closing a live counter.
    guard(|| unsafe {
        drop_obj::<Arc<CntrShared>>(h);
        Ok(0)
    })
}

unsafe extern "C" fn ep_open(_dom: H, ctx: H, attr: *const fi_xpu_ep_attr, out: *mut H) -> c_int {
    // SAFETY: live context; attr from the core.
    guard(|| {
        boxed(
            Ep::open(unsafe { obj::<XpuCtx>(ctx) }, unsafe { &*attr })?,
            out,
        )
    })
}

unsafe extern "C" fn ep_bind(ep: H, fclass: usize, o: H, flags: u64) -> c_int {
    guard(|| {
        // SAFETY: live handles; `fclass` tells what `o` is.
        let e = unsafe { obj::<Ep>(ep) };
        match fclass {
            FI_CLASS_AV => e.bind_av(unsafe { obj::<Av>(o) }),
            FI_CLASS_CQ => e.bind_cq(unsafe { obj::<Arc<CqShared>>(o) }, flags),
            FI_CLASS_CNTR => e.bind_cntr(unsafe { obj::<Arc<CntrShared>>(o) }, flags),
            _ => Err(-FI_EINVAL),
        }
        .map(|_| 0)
    })
}

unsafe extern "C" fn ep_enable(ep: H) -> c_int {
    // SAFETY: live EP.
    guard(|| unsafe { obj::<Ep>(ep) }.enable().map(|_| 0))
}

unsafe extern "C" fn ep_getname(ep: H, addr: *mut c_void, len: *mut usize) -> c_int {
    // SAFETY: live EP.
    guard(|| put_sized(addr, len, &unsafe { obj::<Ep>(ep) }.name()?))
}

unsafe extern "C" fn ep_export(ep: H, _f: u64, out: *mut fid_xpu) -> c_int {
    guard(|| {
        // SAFETY: live EP; valid out-pointer.
        unsafe {
            *out = fid_xpu {
                fclass: FI_CLASS_EP as u32,
                prov_id: FI_XPU_PROV_OFI,
                prov_ctx: obj::<Ep>(ep).inner.dev() as u64,
            }
        };
        Ok(0)
    })
}

unsafe extern "C" fn ep_close(h: H) -> c_int {
    // SAFETY: closing a live EP.
    guard(|| unsafe {
        drop_obj::<Ep>(h);
        Ok(0)
    })
}

struct Desc(fi_xpu_provider);
// SAFETY: the descriptor is immutable static data (pointers to static
// strings and functions).
unsafe impl Sync for Desc {}

static PROVIDER: Desc = Desc(fi_xpu_provider {
    abi_major: FI_XPU_PROV_ABI_MAJOR,
    abi_minor: FI_XPU_PROV_ABI_MINOR,
    size: std::mem::size_of::<fi_xpu_provider>(),
    name: c"ofi".as_ptr(),
    version: 1,
    prov_id: FI_XPU_PROV_OFI,
    caps: FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR,
    ifaces: 1 << FI_HMEM_SYSTEM | 1 << FI_HMEM_CUDA | 1 << FI_HMEM_ROCR | 1 << FI_HMEM_ZE,
    addrlen: ADDR_LEN,
    init: Some(init),
    fini: Some(fini),
    domain_open: Some(domain_open),
    domain_close: Some(domain_close),
    ctx_open: Some(ctx_open),
    ctx_query: Some(ctx_query),
    ctx_close: Some(ctx_close),
    av_open: Some(av_open),
    av_insert: Some(av_insert),
    av_remove: Some(av_remove),
    av_lookup: Some(av_lookup),
    av_close: Some(av_close),
    mr_reg: Some(mr_reg),
    mr_key: Some(mr_key),
    mr_desc: Some(mr_desc),
    mr_close: Some(mr_close),
    cq_open: Some(cq_open),
    cq_export: Some(cq_export),
    cq_host_read: Some(cq_host_read),
    cq_host_readerr: Some(cq_host_readerr),
    cq_close: Some(cq_close),
    cntr_open: Some(cntr_open),
    cntr_export: Some(cntr_export),
    cntr_host_read: Some(cntr_host_read),
    cntr_host_update: Some(cntr_host_update),
    cntr_close: Some(cntr_close),
    ep_open: Some(ep_open),
    ep_bind: Some(ep_bind),
    ep_enable: Some(ep_enable),
    ep_getname: Some(ep_getname),
    ep_export: Some(ep_export),
    ep_close: Some(ep_close),
});

/// The plugin's entry point.
#[no_mangle]
pub extern "C" fn fi_xpu_prov_ini() -> *const fi_xpu_provider {
    &PROVIDER.0
}
