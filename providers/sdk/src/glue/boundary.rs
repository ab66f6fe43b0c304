//! What every entry point shares at the boundary: the panic guards (a
//! panic becomes `-FI_EOTHER` and a log line), handles turned into
//! references and back, size-queried buffers, and the bodies of opens and
//! exports.
use crate::services;
use crate::{Error, Provider, Result};
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub(super) type H = fi_xpu_prov_handle;

pub(super) fn internal_error<P: Provider>() {
    services::warn(&format!(
        "internal error in the {} provider",
        P::NAME.to_string_lossy()
    ));
}

pub(super) fn guard<P: Provider>(f: impl FnOnce() -> Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.code(),
        Err(_) => {
            internal_error::<P>();
            Error::OTHER.code()
        }
    }
}

pub(super) fn guard_count<P: Provider>(f: impl FnOnce() -> Result<usize>) -> isize {
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
pub(super) unsafe fn open<T>(r: Result<T>, out: *mut H) -> Result<c_int> {
    let v = r?;
    // SAFETY: per the function contract.
    unsafe { *out = Box::into_raw(Box::new(v)) as H };
    Ok(0)
}

/// # Safety
/// `h` is a live handle this provider returned for a `T`.
pub(super) unsafe fn obj<'a, T>(h: H) -> &'a T {
    // SAFETY: per the function contract.
    unsafe { &*(h as *const T) }
}

/// # Safety
/// `h` is NULL or as for `obj`.
pub(super) unsafe fn opt_obj<'a, T>(h: H) -> Option<&'a T> {
    // SAFETY: per the function contract.
    unsafe { (h as *const T).as_ref() }
}

/// Runs the provider's close on the object behind `h` and frees it when
/// the close succeeds; a refused close leaves it as it was.
///
/// # Safety
/// As `obj`, and nothing else uses the object (the core closes once,
/// after every object that holds this one).
pub(super) unsafe fn close<T>(h: H, f: impl FnOnce(&mut T) -> Result<()>) -> Result<c_int> {
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
pub(super) unsafe fn put_sized(buf: *mut c_void, len: *mut usize, bytes: &[u8]) -> Result<c_int> {
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
pub(super) unsafe fn need(len: *mut usize, need: usize) -> Result<()> {
    // SAFETY: per the function contract.
    unsafe {
        if *len < need {
            *len = need;
            return Err(Error::TOOSMALL);
        }
    }
    Ok(())
}

/// The body of `av_lookup` and `mr_desc`: the bytes `bytes` makes for
/// context `ctx`, at most `size` of its information says, copied out to
/// (`buf`, `*len`).
///
/// # Safety
/// `ctx` is a live context of `P`; `len` is valid and `buf` holds `*len`
/// bytes (the core checks both).
pub(super) unsafe fn put_ctx_bytes<P: Provider>(
    ctx: H,
    buf: *mut c_void,
    len: *mut usize,
    size: fn(&fi_xpu_ctx_info) -> usize,
    bytes: impl FnOnce(&P::Ctx) -> Result<Vec<u8>>,
) -> Result<c_int> {
    // SAFETY: per the function contract.
    unsafe {
        let c = obj::<P::Ctx>(ctx);
        need(len, size(&P::ctx_query(c)?))?;
        put_sized(buf, len, &bytes(c)?)
    }
}

/// The body of `ctx_open` and `av_open`: an object on a domain.
///
/// # Safety
/// `dom` live (a domain of this provider), `attr` and `out` valid.
pub(super) unsafe fn open_in<P: Provider, A, T>(
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
pub(super) unsafe fn open_on<P: Provider, A, T>(
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
pub(super) unsafe fn export<P: Provider, T>(
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
