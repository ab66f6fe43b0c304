//! The plugin's `extern "C"` entry points, generic over the provider.
//!
//! Each one catches panics, turns the core's handles into references (see
//! the crate documentation for what the core guarantees), calls the
//! provider and writes out-parameters only on success. A handle is a
//! `Box` of the provider's object, leaked at open and dropped by a close
//! that succeeds.
//!
//! # Safety
//! Every function here is only for the core to call, through the
//! descriptor, with arguments that follow the plugin ABI.
use crate::services;
use crate::{Bind, Error, HostCqBuf, Provider, Result};
use fi_xpu_abi::class::*;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};

type H = fi_xpu_prov_handle;

fn internal_error<P: Provider>() {
    services::warn(&format!(
        "internal error in the {} provider",
        P::NAME.to_string_lossy()
    ));
}

fn guard<P: Provider>(f: impl FnOnce() -> Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.code(),
        Err(_) => {
            internal_error::<P>();
            Error::OTHER.code()
        }
    }
}

fn guard_count<P: Provider>(f: impl FnOnce() -> Result<usize>) -> isize {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(n)) => n as isize,
        Ok(Err(e)) => e.code() as isize,
        Err(_) => {
            internal_error::<P>();
            Error::OTHER.code() as isize
        }
    }
}

/// Hands the object of a successful open to the core through `out`.
///
/// # Safety
/// `out` is valid for writing (the core passes a valid out-pointer).
unsafe fn open<T>(r: Result<T>, out: *mut H) -> Result<c_int> {
    let v = r?;
    // SAFETY: per the function contract.
    unsafe { *out = Box::into_raw(Box::new(v)) as H };
    Ok(0)
}

/// # Safety
/// `h` is a live handle this provider returned for a `T`.
unsafe fn obj<'a, T>(h: H) -> &'a T {
    // SAFETY: per the function contract.
    unsafe { &*(h as *const T) }
}

/// # Safety
/// `h` is NULL or as for `obj`.
unsafe fn opt_obj<'a, T>(h: H) -> Option<&'a T> {
    // SAFETY: per the function contract.
    unsafe { (h as *const T).as_ref() }
}

/// Runs the provider's close on the object behind `h` and frees it when
/// the close succeeds; a refused close leaves it as it was.
///
/// # Safety
/// As `obj`, and nothing else uses the object (the core closes once,
/// after every object that holds this one).
unsafe fn close<T>(h: H, f: impl FnOnce(&mut T) -> Result<()>) -> Result<c_int> {
    // SAFETY: per the function contract, this is the only reference.
    f(unsafe { &mut *(h as *mut T) })?;
    // SAFETY: the Box leaked by `open`; the core never uses `h` again.
    drop(unsafe { Box::from_raw(h as *mut T) });
    Ok(0)
}

/// Writes `bytes` into a size-queried buffer, libfabric style.
///
/// # Safety
/// `len` is valid and `buf` is valid for `*len` bytes (the core checked
/// `buf` non-NULL whenever `*len` is non-zero).
unsafe fn put_sized(buf: *mut c_void, len: *mut usize, bytes: &[u8]) -> Result<c_int> {
    // SAFETY: per the function contract.
    unsafe {
        let room = *len;
        *len = bytes.len();
        if room < bytes.len() {
            return Err(Error::TOOSMALL);
        }
        if !bytes.is_empty() {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf as *mut u8, bytes.len());
        }
    }
    Ok(0)
}

/// Answers a buffer smaller than `need` before the provider is asked, so
/// that a size query has no side effect.
///
/// # Safety
/// `len` is valid.
unsafe fn need(len: *mut usize, need: usize) -> Result<()> {
    // SAFETY: per the function contract.
    unsafe {
        if *len < need {
            *len = need;
            return Err(Error::TOOSMALL);
        }
    }
    Ok(())
}

/// The body of `ctx_open` and `av_open`: an object on a domain.
///
/// # Safety
/// `dom` live (a domain of this provider), `attr` and `out` valid.
unsafe fn open_in<P: Provider, A, T>(
    dom: H,
    attr: *const A,
    out: *mut H,
    f: fn(&P::Domain, &A) -> Result<T>,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: per the function contract.
        let (d, a) = unsafe { (obj::<P::Domain>(dom), &*attr) };
        // SAFETY: `out` is the core's valid out-pointer (this entry point's contract).
        unsafe { open(f(d, a), out) }
    })
}

type OpenOn<P, A, T> = fn(&<P as Provider>::Domain, Option<&<P as Provider>::Ctx>, &A) -> Result<T>;

/// The body of `cq_open`, `cntr_open` and `mr_reg`: an object on a domain
/// and, unless `ctx` is NULL, on an XPU context.
///
/// # Safety
/// `dom` live, `ctx` NULL or live (handles of this provider), `attr` and
/// `out` valid.
unsafe fn open_on<P: Provider, A, T>(
    dom: H,
    ctx: H,
    attr: *const A,
    out: *mut H,
    f: OpenOn<P, A, T>,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: per the function contract.
        let (d, c, a) = unsafe { (obj::<P::Domain>(dom), opt_obj::<P::Ctx>(ctx), &*attr) };
        // SAFETY: `out` is the core's valid out-pointer (this entry point's contract).
        unsafe { open(f(d, c, a), out) }
    })
}

/// The body of the three exports: the provider gives `prov_ctx`, the SDK
/// the rest of the device handle.
///
/// # Safety
/// `h` live and of type `T`; `out` valid.
unsafe fn export<P: Provider, T>(
    h: H,
    flags: u64,
    out: *mut fid_xpu,
    fclass: usize,
    f: fn(&T, u64) -> Result<u64>,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: per the function contract.
        let prov_ctx = f(unsafe { obj::<T>(h) }, flags)?;
        // SAFETY: per the function contract.
        unsafe {
            *out = fid_xpu {
                fclass: fclass as u32,
                prov_id: P::PROV_ID,
                prov_ctx,
            }
        };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn init<P: Provider>(core: *const fi_xpu_core, prov: *mut H) -> c_int {
    guard::<P>(|| {
        // SAFETY: the core passes its static table; size is read first.
        if unsafe { (*core).size } < std::mem::size_of::<fi_xpu_core>() {
            return Err(Error::NOSYS);
        }
        services::set(core, P::NAME);
        P::init()?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *prov = std::ptr::null_mut() };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn fini<P: Provider>(_prov: H) {}

pub(crate) unsafe extern "C" fn domain_open<P: Provider>(
    _prov: H,
    attr: *const fi_xpu_domain_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: the core passes its attributes (its defaults when the
    // application gave none) and a valid out-pointer.
    guard::<P>(|| unsafe { open(P::domain_open(&*attr), out) })
}

pub(crate) unsafe extern "C" fn domain_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live domain once, after all its children.
    guard::<P>(|| unsafe { close(h, P::domain_close) })
}

pub(crate) unsafe extern "C" fn ctx_open<P: Provider>(
    dom: H,
    args: *const fi_xpu_prov_ctx_args,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; args and out from the core.
    unsafe { open_in::<P, _, _>(dom, args, out, P::ctx_open) }
}

pub(crate) unsafe extern "C" fn ctx_query<P: Provider>(
    ctx: H,
    attr: *mut fi_xpu_ctx_info,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live context.
        let a = P::ctx_query(unsafe { obj::<P::Ctx>(ctx) })?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *attr = a };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn ctx_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live context once, after objects on it.
    guard::<P>(|| unsafe { close(h, P::ctx_close) })
}

pub(crate) unsafe extern "C" fn av_open<P: Provider>(
    dom: H,
    attr: *const fi_xpu_av_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; attributes (the core's defaults when the
    // application gave none) and out from the core.
    unsafe { open_in::<P, _, _>(dom, attr, out, P::av_open) }
}

pub(crate) unsafe extern "C" fn av_insert<P: Provider>(
    av: H,
    addr: *const c_void,
    fi_addr: *mut fi_addr_t,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: the core passes `addrlen` readable bytes.
        let raw = unsafe { std::slice::from_raw_parts(addr as *const u8, P::ADDRLEN) };
        // SAFETY: live AV.
        let a = P::av_insert(unsafe { obj::<P::Av>(av) }, raw, flags)?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *fi_addr = a };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn av_remove<P: Provider>(
    av: H,
    fi_addr: fi_addr_t,
    flags: u64,
) -> c_int {
    // SAFETY: live AV.
    guard::<P>(|| P::av_remove(unsafe { obj::<P::Av>(av) }, fi_addr, flags).map(|_| 0))
}

pub(crate) unsafe extern "C" fn av_lookup<P: Provider>(
    av: H,
    fi_addr: fi_addr_t,
    ctx: H,
    buf: *mut c_void,
    len: *mut usize,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live AV and context.
        let (a, c) = unsafe { (obj::<P::Av>(av), obj::<P::Ctx>(ctx)) };
        // SAFETY: len is valid (checked by the core).
        unsafe { need(len, P::ctx_query(c)?.av_addr_size)? };
        let bytes = P::av_lookup(a, fi_addr, c, flags)?;
        // SAFETY: buf holds *len bytes (checked by the core).
        unsafe { put_sized(buf, len, &bytes) }
    })
}

pub(crate) unsafe extern "C" fn av_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live AV once, when nothing is bound to it.
    guard::<P>(|| unsafe { close(h, P::av_close) })
}

pub(crate) unsafe extern "C" fn mr_reg<P: Provider>(
    dom: H,
    ctx: H,
    args: *const fi_xpu_prov_mr_args,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; ctx NULL or live; args and out from the core.
    unsafe { open_on::<P, _, _>(dom, ctx, args, out, P::mr_reg) }
}

pub(crate) unsafe extern "C" fn mr_key<P: Provider>(mr: H, key: *mut u64) -> c_int {
    guard::<P>(|| {
        // SAFETY: live MR.
        let k = P::mr_key(unsafe { obj::<P::Mr>(mr) })?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *key = k };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn mr_desc<P: Provider>(
    mr: H,
    ctx: H,
    buf: *mut c_void,
    len: *mut usize,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live MR and context.
        let (m, c) = unsafe { (obj::<P::Mr>(mr), obj::<P::Ctx>(ctx)) };
        // SAFETY: len is valid (checked by the core).
        unsafe { need(len, P::ctx_query(c)?.mr_desc_size)? };
        let bytes = P::mr_desc(m, c, flags)?;
        // SAFETY: buf holds *len bytes (checked by the core).
        unsafe { put_sized(buf, len, &bytes) }
    })
}

pub(crate) unsafe extern "C" fn mr_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live MR once.
    guard::<P>(|| unsafe { close(h, P::mr_close) })
}

pub(crate) unsafe extern "C" fn cq_open<P: Provider>(
    dom: H,
    ctx: H,
    attr: *const fi_xpu_cq_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; ctx NULL or live; attr and out from the core.
    unsafe { open_on::<P, _, _>(dom, ctx, attr, out, P::cq_open) }
}

pub(crate) unsafe extern "C" fn cq_export<P: Provider>(
    cq: H,
    flags: u64,
    out: *mut fid_xpu,
) -> c_int {
    // SAFETY: live CQ; valid out-pointer from the core.
    unsafe { export::<P, P::Cq>(cq, flags, out, FI_CLASS_CQ, P::cq_export) }
}

pub(crate) unsafe extern "C" fn cq_host_read<P: Provider>(
    cq: H,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
) -> isize {
    guard_count::<P>(|| {
        let out = HostCqBuf {
            buf: buf as *mut u8,
            count,
            src,
            _app: PhantomData,
        };
        // SAFETY: live CQ.
        P::cq_host_read(unsafe { obj::<P::Cq>(cq) }, out)
    })
}

pub(crate) unsafe extern "C" fn cq_host_readerr<P: Provider>(
    cq: H,
    buf: *mut fi_cq_err_entry,
    flags: u64,
) -> isize {
    // SAFETY: live CQ; valid entry pointer from the core.
    guard_count::<P>(|| unsafe { P::cq_host_readerr(obj::<P::Cq>(cq), &mut *buf, flags) })
}

pub(crate) unsafe extern "C" fn cq_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live CQ once, when nothing is bound to it.
    guard::<P>(|| unsafe { close(h, P::cq_close) })
}

pub(crate) unsafe extern "C" fn cntr_open<P: Provider>(
    dom: H,
    ctx: H,
    attr: *const fi_xpu_cntr_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; ctx NULL or live; attr and out from the core.
    unsafe { open_on::<P, _, _>(dom, ctx, attr, out, P::cntr_open) }
}

pub(crate) unsafe extern "C" fn cntr_export<P: Provider>(
    c: H,
    flags: u64,
    out: *mut fid_xpu,
) -> c_int {
    // SAFETY: live counter; valid out-pointer from the core.
    unsafe { export::<P, P::Cntr>(c, flags, out, FI_CLASS_CNTR, P::cntr_export) }
}

pub(crate) unsafe extern "C" fn cntr_host_read<P: Provider>(
    c: H,
    value: *mut u64,
    err: *mut u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live counter.
        let (v, e) = P::cntr_host_read(unsafe { obj::<P::Cntr>(c) })?;
        // SAFETY: valid out-pointers from the core.
        unsafe {
            *value = v;
            *err = e;
        }
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn cntr_host_update<P: Provider>(c: H, how: u32, value: u64) -> c_int {
    // SAFETY: live counter.
    guard::<P>(|| P::cntr_host_update(unsafe { obj::<P::Cntr>(c) }, how, value).map(|_| 0))
}

pub(crate) unsafe extern "C" fn cntr_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live counter once, when nothing is bound to it.
    guard::<P>(|| unsafe { close(h, P::cntr_close) })
}

pub(crate) unsafe extern "C" fn ep_open<P: Provider>(
    dom: H,
    ctx: H,
    attr: *const fi_xpu_ep_attr,
    out: *mut H,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live domain and context (always set for an EP); attr from
        // the core.
        let (d, c, a) = unsafe { (obj::<P::Domain>(dom), obj::<P::Ctx>(ctx), &*attr) };
        // SAFETY: `out` is the core's valid out-pointer (this entry point's contract).
        unsafe { open(P::ep_open(d, c, a), out) }
    })
}

pub(crate) unsafe extern "C" fn ep_bind<P: Provider>(
    ep: H,
    fclass: usize,
    o: H,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live handles; `fclass` says what `o` is.
        let (e, b) = unsafe {
            let b = match fclass {
                FI_CLASS_AV => Bind::Av(obj::<P::Av>(o)),
                FI_CLASS_CQ => Bind::Cq(obj::<P::Cq>(o)),
                FI_CLASS_CNTR => Bind::Cntr(obj::<P::Cntr>(o)),
                _ => return Err(Error::INVAL),
            };
            (obj::<P::Ep>(ep), b)
        };
        P::ep_bind(e, b, flags).map(|_| 0)
    })
}

pub(crate) unsafe extern "C" fn ep_enable<P: Provider>(ep: H) -> c_int {
    // SAFETY: live EP.
    guard::<P>(|| P::ep_enable(unsafe { obj::<P::Ep>(ep) }).map(|_| 0))
}

pub(crate) unsafe extern "C" fn ep_getname<P: Provider>(
    ep: H,
    addr: *mut c_void,
    len: *mut usize,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live EP.
        let name = P::ep_getname(unsafe { obj::<P::Ep>(ep) })?;
        // SAFETY: addr holds *len bytes (checked by the core).
        unsafe { put_sized(addr, len, &name) }
    })
}

pub(crate) unsafe extern "C" fn ep_export<P: Provider>(
    ep: H,
    flags: u64,
    out: *mut fid_xpu,
) -> c_int {
    // SAFETY: live EP; valid out-pointer from the core.
    unsafe { export::<P, P::Ep>(ep, flags, out, FI_CLASS_EP, P::ep_export) }
}

pub(crate) unsafe extern "C" fn ep_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live EP once.
    guard::<P>(|| unsafe { close(h, P::ep_close) })
}

/// The descriptor of provider `P`: its identity and the functions above.
pub(crate) const fn descriptor<P: Provider>() -> fi_xpu_prov_desc {
    fi_xpu_prov_desc {
        abi_major: FI_XPU_PROV_ABI_MAJOR,
        abi_minor: FI_XPU_PROV_ABI_MINOR,
        size: std::mem::size_of::<fi_xpu_prov_desc>(),
        name: P::NAME.as_ptr(),
        version: P::VERSION,
        prov_id: P::PROV_ID,
        caps: P::CAPS,
        ifaces: P::IFACES,
        addrlen: P::ADDRLEN,
        init: Some(init::<P>),
        fini: Some(fini::<P>),
        domain_open: Some(domain_open::<P>),
        domain_close: Some(domain_close::<P>),
        ctx_open: Some(ctx_open::<P>),
        ctx_query: Some(ctx_query::<P>),
        ctx_close: Some(ctx_close::<P>),
        av_open: Some(av_open::<P>),
        av_insert: Some(av_insert::<P>),
        av_remove: Some(av_remove::<P>),
        av_lookup: Some(av_lookup::<P>),
        av_close: Some(av_close::<P>),
        mr_reg: Some(mr_reg::<P>),
        mr_key: Some(mr_key::<P>),
        mr_desc: Some(mr_desc::<P>),
        mr_close: Some(mr_close::<P>),
        cq_open: Some(cq_open::<P>),
        cq_export: Some(cq_export::<P>),
        cq_host_read: Some(cq_host_read::<P>),
        cq_host_readerr: Some(cq_host_readerr::<P>),
        cq_close: Some(cq_close::<P>),
        cntr_open: Some(cntr_open::<P>),
        cntr_export: Some(cntr_export::<P>),
        cntr_host_read: Some(cntr_host_read::<P>),
        cntr_host_update: Some(cntr_host_update::<P>),
        cntr_close: Some(cntr_close::<P>),
        ep_open: Some(ep_open::<P>),
        ep_bind: Some(ep_bind::<P>),
        ep_enable: Some(ep_enable::<P>),
        ep_getname: Some(ep_getname::<P>),
        ep_export: Some(ep_export::<P>),
        ep_close: Some(ep_close::<P>),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fi_xpu_abi::errno::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    /// A provider whose objects record what the glue did to them.
    struct Mock;

    #[derive(Default)]
    struct Obj {
        /// A close returns this while it is non-zero.
        refuse: std::sync::atomic::AtomicI32,
        calls: AtomicUsize,
        dropped: Arc<AtomicBool>,
        panic: AtomicBool,
        bound: Mutex<Vec<&'static str>>,
    }

    impl Drop for Obj {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::Release);
        }
    }

    impl Obj {
        fn call(&self) {
            self.calls.fetch_add(1, Ordering::AcqRel);
            if self.panic.load(Ordering::Acquire) {
                panic!("provider bug");
            }
        }
        fn close(&mut self) -> Result<()> {
            match self.refuse.load(Ordering::Acquire) {
                0 => Ok(()),
                e => Err(Error::from_code(e)),
            }
        }
    }

    impl Provider for Mock {
        const NAME: &'static std::ffi::CStr = c"mock";
        const VERSION: u32 = 3;
        const PROV_ID: u32 = FI_XPU_PROV_USER_BASE + 9;
        const CAPS: u64 = FI_XPU_CAP_EP;
        const IFACES: u64 = 1 << FI_HMEM_SYSTEM;
        const ADDRLEN: usize = 4;
        type Domain = Obj;
        type Ctx = Obj;
        type Av = Obj;
        type Mr = Obj;
        type Cq = Obj;
        type Cntr = Obj;
        type Ep = Obj;

        fn domain_open(_: &fi_xpu_domain_attr) -> Result<Obj> {
            Ok(Obj::default())
        }
        fn domain_close(d: &mut Obj) -> Result<()> {
            d.close()
        }
        fn ctx_open(d: &Obj, _: &fi_xpu_prov_ctx_args) -> Result<Obj> {
            d.call();
            Ok(Obj::default())
        }
        fn ctx_query(c: &Obj) -> Result<fi_xpu_ctx_info> {
            c.call();
            Ok(fi_xpu_ctx_info {
                caps: Self::CAPS,
                av_addr_size: 8,
                mr_desc_size: 16,
                max_tx_wr_desc_size: 0,
                max_rx_wr_desc_size: 0,
            })
        }
        fn ctx_close(c: &mut Obj) -> Result<()> {
            c.close()
        }
        fn av_open(_: &Obj, _: &fi_xpu_av_attr) -> Result<Obj> {
            Ok(Obj::default())
        }
        fn av_insert(av: &Obj, addr: &[u8], _: u64) -> Result<fi_addr_t> {
            av.call();
            match addr {
                [1, 2, 3, 4] => Ok(7),
                _ => Err(Error::INVAL),
            }
        }
        fn av_remove(av: &Obj, a: fi_addr_t, _: u64) -> Result<()> {
            av.call();
            if a == 7 {
                Ok(())
            } else {
                Err(Error::INVAL)
            }
        }
        fn av_lookup(av: &Obj, a: fi_addr_t, _: &Obj, _: u64) -> Result<Vec<u8>> {
            av.call();
            Ok(a.to_ne_bytes().to_vec())
        }
        fn mr_reg(_: &Obj, _: Option<&Obj>, _: &fi_xpu_prov_mr_args) -> Result<Obj> {
            Ok(Obj::default())
        }
        fn mr_key(_: &Obj) -> Result<u64> {
            Ok(42)
        }
        fn mr_desc(mr: &Obj, _: &Obj, _: u64) -> Result<Vec<u8>> {
            mr.call();
            Ok(vec![9; 16])
        }
        fn cq_open(_: &Obj, ctx: Option<&Obj>, a: &fi_xpu_cq_attr) -> Result<Obj> {
            match (ctx, a.size) {
                (_, 7) => Err(Error::INVAL),
                (Some(c), _) => {
                    c.call();
                    Ok(Obj::default())
                }
                (None, _) => Ok(Obj::default()),
            }
        }
        fn cq_export(_: &Obj, _: u64) -> Result<u64> {
            Ok(0x1000)
        }
        fn cq_host_read(cq: &Obj, mut out: HostCqBuf<'_>) -> Result<usize> {
            cq.call();
            let n = out.count().min(2);
            // SAFETY: the test passes room for `count` u64 entries.
            unsafe { std::ptr::write_bytes(out.as_mut_ptr(), 0xab, n * 8) };
            if n == 0 {
                Err(Error::AGAIN)
            } else {
                Ok(n)
            }
        }
        fn cq_host_readerr(cq: &Obj, e: &mut fi_cq_err_entry, _: u64) -> Result<usize> {
            cq.call();
            e.err = FI_EIO;
            Ok(1)
        }
        fn cntr_open(_: &Obj, _: Option<&Obj>, _: &fi_xpu_cntr_attr) -> Result<Obj> {
            Ok(Obj::default())
        }
        fn cntr_export(_: &Obj, _: u64) -> Result<u64> {
            Err(Error::OPNOTSUPP)
        }
        fn cntr_host_read(c: &Obj) -> Result<(u64, u64)> {
            c.call();
            Ok((5, 6))
        }
        fn cntr_host_update(_: &Obj, how: u32, _: u64) -> Result<()> {
            if how == FI_XPU_CNTR_ADD {
                Ok(())
            } else {
                Err(Error::INVAL)
            }
        }
        fn ep_open(_: &Obj, _: &Obj, _: &fi_xpu_ep_attr) -> Result<Obj> {
            Ok(Obj::default())
        }
        fn ep_bind(ep: &Obj, obj: Bind<'_, Self>, _: u64) -> Result<()> {
            let what = match obj {
                Bind::Av(_) => "av",
                Bind::Cq(_) => "cq",
                Bind::Cntr(_) => "cntr",
            };
            ep.bound.lock().unwrap().push(what);
            Ok(())
        }
        fn ep_enable(ep: &Obj) -> Result<()> {
            ep.call();
            Ok(())
        }
        fn ep_getname(ep: &Obj) -> Result<Vec<u8>> {
            ep.call();
            Ok(vec![1, 2, 3, 4])
        }
        fn ep_export(_: &Obj, _: u64) -> Result<u64> {
            Ok(0x2000)
        }
        fn ep_close(ep: &mut Obj) -> Result<()> {
            ep.close()
        }
    }

    fn new() -> H {
        Box::into_raw(Box::new(Obj::default())) as H
    }

    fn calls(h: H) -> usize {
        // SAFETY: a live test object.
        unsafe { obj::<Obj>(h) }.calls.load(Ordering::Acquire)
    }

    #[test]
    fn descriptor_carries_identity_and_every_entry_point() {
        let d = descriptor::<Mock>();
        assert_eq!((d.abi_major, d.abi_minor), (1, 4));
        assert_eq!(d.size, std::mem::size_of::<fi_xpu_prov_desc>());
        // SAFETY: the name is a static C string.
        assert_eq!(unsafe { std::ffi::CStr::from_ptr(d.name) }, c"mock");
        assert_eq!(
            (d.version, d.prov_id, d.addrlen),
            (3, FI_XPU_PROV_USER_BASE + 9, 4)
        );
        assert_eq!((d.caps, d.ifaces), (FI_XPU_CAP_EP, 1));
        assert!(d.init.is_some() && d.ep_close.is_some() && d.cq_host_readerr.is_some());
    }

    #[test]
    fn init_refuses_a_short_core_table() {
        // The SDK keeps the table for the life of the process, as the
        // core's own is.
        let core = Box::leak(Box::new(fi_xpu_core {
            abi_major: 1,
            abi_minor: 0,
            size: 8,
            log: None,
            log_enabled: None,
            mem_alloc: None,
            mem_import: None,
            mem_unimport: None,
            mem_free: None,
            mem_export: None,
            param_define: None,
            param_get: None,
            mem_known: None,
            ctx_abort_word: None,
            mem_retire: None,
            mem_access: None,
            ctx_device_uuid: None,
            mem_export_ipc: None,
            mem_import_ipc: None,
        }));
        let mut prov: H = 1 as H;
        // SAFETY: a valid table and out-pointer.
        assert_eq!(unsafe { init::<Mock>(core, &mut prov) }, -FI_ENOSYS);
        assert_eq!(prov, 1 as H);
        core.size = std::mem::size_of::<fi_xpu_core>();
        // SAFETY: as above.
        assert_eq!(unsafe { init::<Mock>(core, &mut prov) }, 0);
        assert!(prov.is_null());
        assert_eq!(
            services::mem_alloc(services::CoreCtx::NONE, 64, 64, 0).unwrap_err(),
            Error::NOSYS
        );
        // Without the core's registry: nothing defined, nothing read.
        assert_eq!(services::param_define("x", "1", "x"), Err(Error::NOSYS));
        assert_eq!(services::param("x"), None);
    }

    #[test]
    fn size_queries_answer_too_small_before_asking_the_provider() {
        let (av, ctx) = (new(), new());
        let mut buf = [0xffu8; 16];
        let mut len = 4usize;
        // SAFETY: live handles; buf holds 16 >= len bytes.
        let r = unsafe { av_lookup::<Mock>(av, 7, ctx, buf.as_mut_ptr().cast(), &mut len, 0) };
        assert_eq!((r, len, calls(av)), (-FI_ETOOSMALL, 8, 0));
        assert_eq!(buf, [0xff; 16]);
        len = 16;
        // SAFETY: as above.
        let r = unsafe { av_lookup::<Mock>(av, 7, ctx, buf.as_mut_ptr().cast(), &mut len, 0) };
        assert_eq!((r, len, calls(av)), (0, 8, 1));
        assert_eq!(buf[..8], 7u64.to_ne_bytes());

        let mr = new();
        len = 15;
        // SAFETY: as above.
        let r = unsafe { mr_desc::<Mock>(mr, ctx, buf.as_mut_ptr().cast(), &mut len, 0) };
        assert_eq!((r, len, calls(mr)), (-FI_ETOOSMALL, 16, 0));

        // ep_getname has no announced size: the provider answers, the SDK
        // compares.
        let ep = new();
        let mut name = [0u8; 4];
        len = 3;
        // SAFETY: as above.
        let r = unsafe { ep_getname::<Mock>(ep, name.as_mut_ptr().cast(), &mut len) };
        assert_eq!((r, len, name), (-FI_ETOOSMALL, 4, [0; 4]));
        len = 0;
        // SAFETY: *len is 0, so buf is not touched (the core allows NULL).
        let r = unsafe { ep_getname::<Mock>(ep, std::ptr::null_mut(), &mut len) };
        assert_eq!((r, len), (-FI_ETOOSMALL, 4));
        len = 4;
        // SAFETY: as above.
        let r = unsafe { ep_getname::<Mock>(ep, name.as_mut_ptr().cast(), &mut len) };
        assert_eq!((r, len, name), (0, 4, [1, 2, 3, 4]));
    }

    #[test]
    fn a_refused_close_keeps_the_object() {
        let ctx = new();
        // SAFETY: a live test object.
        let o = unsafe { obj::<Obj>(ctx) };
        let dropped = o.dropped.clone();
        o.refuse.store(-FI_EBUSY, Ordering::Release);
        // SAFETY: a live handle, used by nothing else.
        assert_eq!(unsafe { ctx_close::<Mock>(ctx) }, -FI_EBUSY);
        assert!(!dropped.load(Ordering::Acquire));
        let mut attr = std::mem::MaybeUninit::<fi_xpu_ctx_info>::zeroed();
        // SAFETY: still live; valid out-pointer.
        assert_eq!(unsafe { ctx_query::<Mock>(ctx, attr.as_mut_ptr()) }, 0);
        // SAFETY: ctx_query succeeded and wrote the struct.
        assert_eq!(unsafe { attr.assume_init() }.mr_desc_size, 16);
        o.refuse.store(0, Ordering::Release);
        // SAFETY: as above.
        assert_eq!(unsafe { ctx_close::<Mock>(ctx) }, 0);
        assert!(dropped.load(Ordering::Acquire));
    }

    #[test]
    fn panics_become_fi_eother() {
        let (cq, ep) = (new(), new());
        for h in [cq, ep] {
            // SAFETY: live test objects.
            unsafe { obj::<Obj>(h) }
                .panic
                .store(true, Ordering::Release);
        }
        let mut buf = [0u64; 4];
        // SAFETY: live handle; room for 4 entries.
        let n =
            unsafe { cq_host_read::<Mock>(cq, buf.as_mut_ptr().cast(), 4, std::ptr::null_mut()) };
        assert_eq!(n, -FI_EOTHER as isize);
        // SAFETY: live handle.
        assert_eq!(unsafe { ep_enable::<Mock>(ep) }, -FI_EOTHER);
    }

    #[test]
    fn counts_errors_and_out_parameters() {
        let (av, cq, cntr) = (new(), new(), new());
        let mut fa: fi_addr_t = 99;
        let bad = [0u8; 4];
        // SAFETY: live handle; ADDRLEN readable bytes; valid out-pointer.
        let r = unsafe { av_insert::<Mock>(av, bad.as_ptr().cast(), &mut fa, 0) };
        assert_eq!(r, -FI_EINVAL);
        assert_eq!(fa, 99);
        let good = [1u8, 2, 3, 4];
        // SAFETY: as above.
        let r = unsafe { av_insert::<Mock>(av, good.as_ptr().cast(), &mut fa, 0) };
        assert_eq!(r, 0);
        assert_eq!(fa, 7);
        // SAFETY: live handle.
        assert_eq!(unsafe { av_remove::<Mock>(av, 8, 0) }, -FI_EINVAL);

        let mut buf = [0u64; 4];
        // SAFETY: live handle; room for 4 entries.
        let n =
            unsafe { cq_host_read::<Mock>(cq, buf.as_mut_ptr().cast(), 4, std::ptr::null_mut()) };
        assert_eq!((n, buf[1], buf[2]), (2, u64::from_ne_bytes([0xab; 8]), 0));
        let mut e = std::mem::MaybeUninit::<fi_cq_err_entry>::zeroed();
        // SAFETY: live handle; valid entry.
        assert_eq!(unsafe { cq_host_readerr::<Mock>(cq, e.as_mut_ptr(), 0) }, 1);

        let (mut v, mut err) = (0u64, 0u64);
        // SAFETY: live handle; valid out-pointers.
        assert_eq!(unsafe { cntr_host_read::<Mock>(cntr, &mut v, &mut err) }, 0);
        assert_eq!((v, err), (5, 6));
        // SAFETY: live handle.
        let r = unsafe { cntr_host_update::<Mock>(cntr, FI_XPU_CNTR_SET, 1) };
        assert_eq!(r, -FI_EINVAL);
    }

    #[test]
    fn exports_carry_class_and_prov_id() {
        let (cq, cntr, ep) = (new(), new(), new());
        let mut f = fid_xpu::default();
        // SAFETY: live handles; valid out-pointer.
        assert_eq!(unsafe { cq_export::<Mock>(cq, 0, &mut f) }, 0);
        assert_eq!(
            f,
            fid_xpu {
                fclass: FI_CLASS_CQ as u32,
                prov_id: FI_XPU_PROV_USER_BASE + 9,
                prov_ctx: 0x1000
            }
        );
        // SAFETY: as above.
        assert_eq!(unsafe { ep_export::<Mock>(ep, 0, &mut f) }, 0);
        assert_eq!(
            f,
            fid_xpu {
                fclass: FI_CLASS_EP as u32,
                prov_id: FI_XPU_PROV_USER_BASE + 9,
                prov_ctx: 0x2000
            }
        );
        // A failed export leaves the handle as it was.
        // SAFETY: as above.
        let r = unsafe { cntr_export::<Mock>(cntr, 0, &mut f) };
        assert_eq!(r, -FI_EOPNOTSUPP);
        assert_eq!(f.fclass, FI_CLASS_EP as u32);
    }

    #[test]
    fn opens_hand_out_objects_and_pass_the_context() {
        let (dom, ctx) = (new(), new());
        let mut attr = fi_xpu_cq_attr {
            size: 7,
            flags: 0,
            format: 0,
            timeout: 0,
            xpu_ctx: std::ptr::null_mut(),
        };
        let mut out: H = 1 as H;
        // SAFETY: live handles, valid attributes and out-pointer.
        let r = unsafe { cq_open::<Mock>(dom, ctx, &attr, &mut out) };
        assert_eq!(r, -FI_EINVAL);
        assert_eq!(out, 1 as H);
        attr.size = 8;
        // SAFETY: as above; a NULL context is a host CQ.
        let r = unsafe { cq_open::<Mock>(dom, std::ptr::null_mut(), &attr, &mut out) };
        assert_eq!(r, 0);
        assert_eq!(calls(ctx), 0);
        // SAFETY: out is the CQ just opened, used by nothing else.
        assert_eq!(unsafe { cq_close::<Mock>(out) }, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { cq_open::<Mock>(dom, ctx, &attr, &mut out) }, 0);
        assert_eq!(calls(ctx), 1);
        // SAFETY: as above.
        assert_eq!(unsafe { cq_close::<Mock>(out) }, 0);
    }

    #[test]
    fn bind_dispatches_on_the_class() {
        let (ep, av, cq, cntr) = (new(), new(), new(), new());
        // SAFETY: live handles of the classes named.
        unsafe {
            assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_CQ, cq, 0), 0);
            assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_AV, av, 0), 0);
            assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_CNTR, cntr, 0), 0);
            assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_MR, cntr, 0), -FI_EINVAL);
            let bound = obj::<Obj>(ep).bound.lock().unwrap().clone();
            assert_eq!(bound, ["cq", "av", "cntr"]);
        }
    }
}
