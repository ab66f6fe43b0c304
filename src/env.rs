//! Environment access through `secure_getenv`, so that set-uid programs do not
//! take plugin paths or log settings from an untrusted environment.
use std::ffi::{c_char, CStr, CString};

extern "C" {
    fn secure_getenv(name: *const c_char) -> *mut c_char;
}

pub fn var(name: &str) -> Option<String> {
    let cname = CString::new(name).ok()?;
    // SAFETY: `cname` is a valid NUL-terminated string; the result is either
    // NULL or a pointer into the environment that we copy at once.
    let ptr = unsafe { secure_getenv(cname.as_ptr()) };
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-NULL results of getenv point to NUL-terminated strings.
    let value = unsafe { CStr::from_ptr(ptr) };
    Some(value.to_string_lossy().into_owned())
}
