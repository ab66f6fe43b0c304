//! The C boundary's vocabulary, used by every `extern "C"` body in `capi/`.
//!
//! - `boundary!(body)`: runs `body` (a `Result` of the C return type) with
//!   panics caught; an error or a panic becomes the value the return type
//!   gives for it (`CReturn`): `c_int` and `ssize_t` the error's negative
//!   code, a pointer NULL, `()` nothing. A panic is logged.
//! - Pointer arguments, named by ownership, each one checked for NULL
//!   (`-FI_EINVAL`) before it is used:
//!   - `borrowed!(p)`: `&T` lent for the call; `borrowed_opt!(p)` where NULL
//!     means "none"; `borrowed_mut!(p)`: `&mut T` lent for the call;
//!     `borrowed_cstr!(p)`: a NUL-terminated string, or none;
//!   - `slice!(p, n)` / `slice_mut!(p, n)`: `n` elements lent for the call
//!     (NULL only with `n == 0`);
//!   - `out!(p)`: an out-parameter, written once with `Out::put`;
//!   - owned: `owned!(p)` takes back a `Box` this library gave the
//!     application; registry handles (objects, worlds) are looked up by
//!     value in their registry and never dereferenced here.
//!
//! The pointer macros are for an `extern "C"` function's own pointer arguments,
//! which its documented contract (`# Safety`) requires to be NULL or valid
//! as named, for the duration of the call. That contract is what their one
//! `unsafe` each relies on.
use crate::error::{Error, Result};
use std::ffi::c_int;
use std::mem::MaybeUninit;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What an exported function returns when its body fails.
pub trait CReturn {
    fn from_error(e: Error) -> Self;
}

impl CReturn for c_int {
    fn from_error(e: Error) -> Self {
        e.code()
    }
}

impl CReturn for isize {
    fn from_error(e: Error) -> Self {
        e.code() as isize
    }
}

impl<T> CReturn for *mut T {
    fn from_error(_: Error) -> Self {
        std::ptr::null_mut()
    }
}

impl<T> CReturn for *const T {
    fn from_error(_: Error) -> Self {
        std::ptr::null()
    }
}

impl CReturn for () {
    fn from_error(_: Error) -> Self {}
}

/// `boundary!`'s body: runs `f`, turning an error into the return type's
/// value for it and a panic into `Error::OTHER`'s (with a log line).
pub fn run<R: CReturn>(f: impl FnOnce() -> Result<R>) -> R {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => R::from_error(e),
        Err(p) => {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            crate::warn!("internal error caught at the C boundary: {what}");
            R::from_error(Error::OTHER)
        }
    }
}

/// The body of an exported function: `boundary!(expr)`, where `expr` is a
/// `Result` of the function's return type (usually a block using `?`).
macro_rules! boundary {
    ($body:expr $(,)?) => {
        $crate::capi::boundary::run(|| $body)
    };
}

/// An out-parameter as the place it names, not yet written.
pub fn uninit<T>(p: *mut T) -> *mut MaybeUninit<T> {
    p.cast()
}

/// An out-parameter, checked non-NULL, written at most once.
pub struct Out<'a, T>(pub &'a mut MaybeUninit<T>);

impl<T> Out<'_, T> {
    pub fn put(self, v: T) {
        self.0.write(v);
    }
}

/// `Result<&T>` from a pointer argument the application lends for the call.
macro_rules! borrowed {
    ($p:expr) => {{
        let p = $p;
        // SAFETY: an `extern "C"` function's pointer argument, NULL or valid
        // for the call (its documented contract).
        unsafe { p.as_ref() }.ok_or($crate::Error::INVAL)
    }};
}

/// `Option<&T>` from a pointer argument that may be NULL ("none").
macro_rules! borrowed_opt {
    ($p:expr) => {{
        let p = $p;
        // SAFETY: an `extern "C"` function's pointer argument, NULL or valid
        // for the call (its documented contract).
        unsafe { p.as_ref() }
    }};
}

/// `Option<&CStr>` from a string argument (NUL-terminated) that may be NULL.
macro_rules! borrowed_cstr {
    ($p:expr) => {{
        let p: *const std::ffi::c_char = $p;
        // SAFETY: an `extern "C"` function's string argument, NULL or
        // NUL-terminated and unchanged for the call (its documented contract).
        (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) })
    }};
}

/// `Result<&mut T>` from a pointer argument lent for reading and writing.
macro_rules! borrowed_mut {
    ($p:expr) => {{
        let p = $p;
        // SAFETY: an `extern "C"` function's pointer argument, NULL or valid
        // for the call (its documented contract), reached by nothing else.
        unsafe { p.as_mut() }.ok_or($crate::Error::INVAL)
    }};
}

/// `Result<Out<T>>` from an out-parameter.
macro_rules! out {
    ($p:expr) => {{
        let p = $p;
        // SAFETY: an `extern "C"` function's out-parameter, NULL or aligned and
        // valid for writing for the call (its documented contract);
        // `MaybeUninit<T>` has `T`'s layout and never reads it.
        unsafe { $crate::capi::boundary::uninit(p).as_mut() }
            .map($crate::capi::boundary::Out)
            .ok_or($crate::Error::INVAL)
    }};
}

/// `Result<&[T]>` from a pointer and a count the application lends.
macro_rules! slice {
    ($p:expr, $n:expr) => {{
        let (p, n) = ($p, $n);
        if n == 0 {
            Ok(&[][..])
        } else if p.is_null() {
            Err($crate::Error::INVAL)
        } else {
            // SAFETY: an `extern "C"` function's array argument, valid for `n`
            // elements for the call (its documented contract), not NULL.
            Ok(unsafe { std::slice::from_raw_parts(p, n) })
        }
    }};
}

/// `Result<&mut [T]>` from a pointer and a count the application lends.
macro_rules! slice_mut {
    ($p:expr, $n:expr) => {{
        let (p, n) = ($p, $n);
        if n == 0 {
            Ok(&mut [][..])
        } else if p.is_null() {
            Err($crate::Error::INVAL)
        } else {
            // SAFETY: an `extern "C"` function's array argument, valid for `n`
            // elements for the call (its documented contract), not NULL,
            // reached by nothing else.
            Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
        }
    }};
}

/// `Option<Box<T>>` from a pointer this library gave out with
/// `Box::into_raw`, handed back to be freed.
macro_rules! owned {
    ($p:expr) => {{
        let p = $p;
        // SAFETY: an `extern "C"` function's argument that its contract says
        // came from this library's `Box::into_raw` and is handed back once.
        (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
    }};
}
