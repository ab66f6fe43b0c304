//! Owned libfabric handles.
use crate::ffi;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::c_void;

/// A libfabric object (`struct fid *`), closed on drop.
pub struct Fid(pub *mut c_void);

// SAFETY: the domain is opened FI_THREAD_SAFE, so libfabric objects may be
// used from any thread; the pointer itself is only closed once, on drop.
unsafe impl Send for Fid {}
// SAFETY: as above.
unsafe impl Sync for Fid {}

impl Fid {
    pub fn ptr(&self) -> *mut c_void {
        self.0
    }
}

impl Drop for Fid {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a live handle that nothing uses any more.
            let r = unsafe { ffi::xo_close(self.0) };
            if r != 0 {
                crate::core::warn(&format!("fi_close failed: {}", ffi::strerror(r)));
            }
        }
    }
}

/// The `struct fi_info` a domain was opened with.
pub struct Info(pub *mut c_void);

// SAFETY: only read after creation; freed once on drop.
unsafe impl Send for Info {}
// SAFETY: as above.
unsafe impl Sync for Info {}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: the info came from fi_getinfo and is freed once.
        unsafe { ffi::xo_freeinfo(self.0) };
    }
}

/// Converts a libfabric return value (negative errno, long) to ours.
pub fn check(r: i64) -> Result<()> {
    if r < 0 {
        Err(Error::from_code(r.max(i32::MIN as i64) as i32))
    } else {
        Ok(())
    }
}
