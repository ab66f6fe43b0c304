//! The `extern "C"` surface: argument checks, conversions, and calls into safe
//! Rust. Every function runs inside `guard`, so no panic crosses into C.
pub mod info;
mod launcher;
mod memory;
mod objects;
mod services;
mod world;
mod wr;

use crate::error::{Error, Result};
use fi_xpu_abi::errno::FI_ENOSYS;
use fi_xpu_abi::*;
use std::ffi::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs `f`, turning an error into its negative code and a panic into
/// `-FI_EOTHER` (with a log line).
pub fn guard(f: impl FnOnce() -> Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.code(),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            crate::warn!("internal error caught at the C boundary: {what}");
            Error::OTHER.code()
        }
    }
}

/// `guard` for functions returning `ssize_t`.
pub fn guard_ssize(f: impl FnOnce() -> Result<isize>) -> isize {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => e.code() as isize,
        Err(_) => {
            crate::warn!("internal error caught at the C boundary");
            Error::OTHER.code() as isize
        }
    }
}

/// Writes `v` through an out-pointer.
///
/// # Safety
/// `out` is non-NULL, aligned and valid for writing a `T` (an out-parameter
/// of an exported function, checked non-NULL, which the API requires valid).
unsafe fn put<T>(out: *mut T, v: T) {
    // SAFETY: per the function contract.
    unsafe { out.write(v) }
}

fn non_null<T>(p: *const T) -> Result<()> {
    if p.is_null() {
        Err(Error::INVAL)
    } else {
        Ok(())
    }
}

/// An attribute struct's `.size` against this library's: a mismatch
/// (an application built against another `fi_xpu.h`, or `.size` left
/// unset) is refused with `-FI_EINVAL` and said in a log line.
fn attr_size<T>(call: &str, name: &str, size: usize) -> Result<()> {
    let want = std::mem::size_of::<T>();
    if size == want {
        return Ok(());
    }
    crate::warn!(
        "{call}: struct {name}: .size is {size}, this library's is {want}: set it to sizeof(struct {name}) (-FI_EINVAL)"
    );
    Err(Error::INVAL)
}

/// Reads an input struct the application passed, if it is not NULL.
///
/// # Safety
/// `p` is NULL or points to a valid `T` that nothing changes for `'a` (an
/// attribute argument of an exported function, for the call).
unsafe fn read_opt<'a, T>(p: *const T) -> Option<&'a T> {
    // SAFETY: per the function contract.
    unsafe { p.as_ref() }
}

unsafe extern "C" fn fid_close(fid: *mut fid) -> c_int {
    guard(|| crate::object::close(fid as *const c_void).map(|_| 0))
}

unsafe extern "C" fn fid_bind(fid: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: forwarding the application's handles unchanged; they are looked up before use.
    unsafe { objects::fi_xpu_ep_bind(fid as *mut fid_xpu_host_ep, bfid, flags) }
}

unsafe extern "C" fn fid_control(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: TODO
    unsafe { wr::control(fid, command, arg) }
}

unsafe extern "C" fn fid_ops_open(
    _fid: *mut fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut *mut c_void,
    _context: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn fid_tostr(_fid: *const fid, _buf: *mut c_char, _len: usize) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn fid_ops_set(
    _fid: *mut fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut c_void,
    _context: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

/// The `fi_ops` every fi_xpu object's fid points to, so that libfabric's
/// `fi_close(&obj->fid)` works.
pub static FID_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(fid_close),
    bind: Some(fid_bind),
    control: Some(fid_control),
    ops_open: Some(fid_ops_open),
    tostr: Some(fid_tostr),
    ops_set: Some(fid_ops_set),
};
