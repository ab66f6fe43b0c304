//! The shm provider: intra-node and device-direct. The device moves data
//! itself through peers' memory mapped into its address space; the host side
//! here only sets up, shares and maps memory (see fi_xpu_shm(7)).
//!
//! This file is the plugin's `extern "C"` surface: it converts handles and
//! calls the safe code in the other modules.
mod core;
mod domain;
#[cfg(test)]
mod fuzz;
mod layout;
mod objects;
mod wire;

use domain::{Domain, ADDR_LEN};
use fi_xpu_abi::class::*;
use fi_xpu_abi::errno::*;
use fi_xpu_abi::*;
use objects::{Av, Counter, Cq, Ep, Mr, XpuCtx};
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

type H = fi_xpu_prov_handle;

fn guard(f: impl FnOnce() -> Result<c_int, i32>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e,
        Err(_) => {
            core::warn("internal error in the shm provider");
            -FI_EOTHER
        }
    }
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

unsafe extern "C" fn init(core_services: *const fi_xpu_core, prov: *mut H) -> c_int {
    guard(|| {
        // SAFETY: the core passes its static table; size is read first.
        let c = unsafe { &*core_services };
        if c.size < std::mem::size_of::<fi_xpu_core>() {
            return Err(-FI_ENOSYS);
        }
        core::set(core_services);
        // SAFETY: valid out-pointer from the core.
        unsafe { *prov = std::ptr::null_mut() };
        Ok(0)
    })
}

unsafe extern "C" fn fini(_prov: H) {}

unsafe extern "C" fn domain_open(_p: H, _attr: *const fi_xpu_domain_attr, out: *mut H) -> c_int {
    guard(|| boxed(Domain::open()?, out))
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
        boxed(XpuCtx::open(&d.inner, a.core_ctx)?, out)
    })
}

unsafe extern "C" fn ctx_query(_ctx: H, attr: *mut fi_xpu_ctx_attr) -> c_int {
    guard(|| {
        // SAFETY: valid out-pointer from the core.
        let a = unsafe { &mut *attr };
        a.caps = FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR;
        a.av_addr_size = 8;
        a.mr_desc_size = 32;
        a.max_tx_wr_desc_size = 0;
        a.max_rx_wr_desc_size = 0;
        Ok(0)
    })
}

unsafe extern "C" fn ctx_close(h: H) -> c_int {
    guard(|| {
        // SAFETY: closing a live context handle.
        let r = unsafe { obj::<XpuCtx>(h) }.close();
        if r == 0 {
            // SAFETY: as above.
            unsafe { drop_obj::<XpuCtx>(h) };
        }
        Ok(r)
    })
}

unsafe extern "C" fn av_open(dom: H, _attr: *const fi_xpu_av_attr, out: *mut H) -> c_int {
    guard(|| {
        // SAFETY: live domain handle.
        let d = unsafe { obj::<Domain>(dom) };
        let id = d.inner.next_obj();
        boxed(
            Av {
                dom: d.inner.clone(),
                id,
                entries: Mutex::new(Vec::new()),
                tables: Mutex::new(Vec::new()),
            },
            out,
        )
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
        let i = unsafe { obj::<Av>(av) }.insert(raw)?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *fi_addr = i };
        Ok(0)
    })
}

unsafe extern "C" fn av_remove(av: H, fi_addr: fi_addr_t, _f: u64) -> c_int {
    // SAFETY: live AV handle.
    guard(|| Ok(unsafe { obj::<Av>(av) }.remove(fi_addr)))
}

/// Writes `bytes` into a size-queried buffer, libfabric style.
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

unsafe extern "C" fn av_lookup(
    av: H,
    fi_addr: fi_addr_t,
    ctx: H,
    buf: *mut c_void,
    len: *mut usize,
    _f: u64,
) -> c_int {
    guard(|| {
        // SAFETY: live handles.
        let (a, c) = unsafe { (obj::<Av>(av), obj::<XpuCtx>(ctx)) };
        // SAFETY: len was checked by the core.
        if unsafe { *len } < 8 {
            return put_sized(buf, len, &[0u8; 8]);
        }
        let p = a.lookup(fi_addr, c)?;
        put_sized(buf, len, &p.to_ne_bytes())
    })
}

unsafe extern "C" fn av_close(h: H) -> c_int {
    guard(|| {
        // SAFETY: closing a live AV.
        unsafe { obj::<Av>(h) }.close();
        // SAFETY: as above.
        unsafe { drop_obj::<Av>(h) };
        Ok(0)
    })
}

unsafe extern "C" fn mr_reg(
    dom: H,
    ctx: H,
    args: *const fi_xpu_prov_mr_args,
    out: *mut H,
) -> c_int {
    guard(|| {
        if ctx.is_null() {
            core::warn("fi_xpu_mr_reg: shm needs the XPU context the memory was allocated on");
            return Err(-FI_EOPNOTSUPP);
        }
        // SAFETY: live handles and args from the core.
        let (d, c, a) = unsafe { (obj::<Domain>(dom), obj::<XpuCtx>(ctx), &*args) };
        boxed(Mr::reg(&d.inner, c, a)?, out)
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
        for (i, w) in d.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        put_sized(buf, len, &b)
    })
}

unsafe extern "C" fn mr_close(h: H) -> c_int {
    guard(|| {
        // SAFETY: closing a live MR.
        unsafe { obj::<Mr>(h) }.close();
        // SAFETY: as above.
        unsafe { drop_obj::<Mr>(h) };
        Ok(0)
    })
}

unsafe extern "C" fn cq_open(_dom: H, ctx: H, attr: *const fi_xpu_cq_attr, out: *mut H) -> c_int {
    // SAFETY: attr from the core; ctx NULL or live.
    guard(|| boxed(Cq::open(ctx as *const XpuCtx, unsafe { &*attr })?, out))
}

unsafe extern "C" fn cq_export(cq: H, _f: u64, out: *mut fid_xpu) -> c_int {
    guard(|| {
        // SAFETY: live CQ; valid out-pointer.
        unsafe {
            *out = fid_xpu {
                fclass: FI_CLASS_CQ as u32,
                prov_id: FI_XPU_PROV_SHM,
                prov_ctx: obj::<Cq>(cq).dev as u64,
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
    match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: live CQ; the core checked buf for count entries.
        unsafe { obj::<Cq>(cq) }.host_read(buf as *mut u8, count, src)
    })) {
        Ok(v) => v,
        Err(_) => -FI_EOTHER as isize,
    }
}

unsafe extern "C" fn cq_host_readerr(cq: H, buf: *mut fi_cq_err_entry, _f: u64) -> isize {
    match catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: live CQ; valid entry pointer from the core.
        unsafe { obj::<Cq>(cq).host_readerr(&mut *buf) }
    })) {
        Ok(v) => v,
        Err(_) => -FI_EOTHER as isize,
    }
}

unsafe extern "C" fn cq_close(h: H) -> c_int {
    // SAFETY: closing a live CQ.
    guard(|| unsafe {
        drop_obj::<Cq>(h);
        Ok(0)
    })
}

unsafe extern "C" fn cntr_open(
    _dom: H,
    ctx: H,
    _attr: *const fi_xpu_cntr_attr,
    out: *mut H,
) -> c_int {
    guard(|| boxed(Counter::open(ctx as *const XpuCtx)?, out))
}

unsafe extern "C" fn cntr_export(c: H, _f: u64, out: *mut fid_xpu) -> c_int {
    guard(|| {
        // SAFETY: live counter; valid out-pointer.
        unsafe {
            *out = fid_xpu {
                fclass: FI_CLASS_CNTR as u32,
                prov_id: FI_XPU_PROV_SHM,
                prov_ctx: obj::<Counter>(c).addr as u64,
            }
        };
        Ok(0)
    })
}

unsafe extern "C" fn cntr_host_read(c: H, value: *mut u64, err: *mut u64) -> c_int {
    guard(|| {
        // SAFETY: live counter; valid out-pointers.
        unsafe {
            let (v, e) = obj::<Counter>(c).read();
            *value = v;
            *err = e;
        }
        Ok(0)
    })
}

unsafe extern "C" fn cntr_host_update(c: H, how: u32, v: u64) -> c_int {
    // SAFETY: live counter.
    guard(|| Ok(unsafe { obj::<Counter>(c) }.update(how, v)))
}

unsafe extern "C" fn cntr_close(h: H) -> c_int {
    // SAFETY: closing a live counter.
    guard(|| unsafe {
        drop_obj::<Counter>(h);
        Ok(0)
    })
}

unsafe extern "C" fn ep_open(_dom: H, ctx: H, attr: *const fi_xpu_ep_attr, out: *mut H) -> c_int {
    guard(|| {
        // SAFETY: the core passes a valid attribute struct.
        let caps = unsafe { (*attr).caps };
        boxed(Ep::open(ctx as *const XpuCtx, caps)?, out)
    })
}

unsafe extern "C" fn ep_bind(ep: H, fclass: usize, o: H, flags: u64) -> c_int {
    guard(|| {
        // SAFETY: live handles; `fclass` tells what `o` is.
        let e = unsafe { obj::<Ep>(ep) };
        match fclass {
            FI_CLASS_AV => {
                e.bind_av(o as *const Av);
                Ok(0)
            }
            FI_CLASS_CQ => e.bind_cq(o as *const Cq, flags).map(|_| 0),
            // SAFETY: as above.
            FI_CLASS_CNTR => e.bind_cntr(unsafe { obj::<Counter>(o) }, flags).map(|_| 0),
            _ => Err(-FI_EINVAL),
        }
    })
}

unsafe extern "C" fn ep_enable(ep: H) -> c_int {
    guard(|| {
        // SAFETY: live EP.
        unsafe { obj::<Ep>(ep) }.enabled = true;
        Ok(0)
    })
}

unsafe extern "C" fn ep_getname(ep: H, addr: *mut c_void, len: *mut usize) -> c_int {
    // SAFETY: live EP.
    guard(|| put_sized(addr, len, &unsafe { obj::<Ep>(ep) }.name()))
}

unsafe extern "C" fn ep_export(ep: H, _f: u64, out: *mut fid_xpu) -> c_int {
    guard(|| {
        // SAFETY: live EP; valid out-pointer.
        unsafe {
            *out = fid_xpu {
                fclass: FI_CLASS_EP as u32,
                prov_id: FI_XPU_PROV_SHM,
                prov_ctx: obj::<Ep>(ep).dev as u64,
            }
        };
        Ok(0)
    })
}

unsafe extern "C" fn ep_close(h: H) -> c_int {
    guard(|| {
        // SAFETY: closing a live EP.
        unsafe { obj::<Ep>(h) }.close();
        // SAFETY: as above.
        unsafe { drop_obj::<Ep>(h) };
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
    name: c"shm".as_ptr(),
    version: 1,
    prov_id: FI_XPU_PROV_SHM,
    caps: FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR,
    ifaces: 1 << FI_HMEM_SYSTEM,
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
