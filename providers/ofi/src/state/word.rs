//! The words of blocks shared with device code, read and written as
//! atomics: once a block is shared, every access to it is atomic.
use std::sync::atomic::{AtomicU32, AtomicU64};

/// The word `p` of a shared block as an atomic.
pub fn at64(p: &u64) -> &AtomicU64 {
    // SAFETY: every u64 of the shared blocks is 8-aligned and only ever
    // accessed atomically once the block is shared.
    unsafe { AtomicU64::from_ptr(p as *const u64 as *mut u64) }
}

/// The word at `p` as an atomic.
///
/// # Safety
/// `p` is an aligned word of a device block that stays mapped for `'a`
/// (the endpoint is kept alive by the worker's Arc) and is only accessed
/// atomically meanwhile.
pub unsafe fn at64_ptr<'a>(p: *mut u64) -> &'a AtomicU64 {
    // SAFETY: per the function contract.
    unsafe { AtomicU64::from_ptr(p) }
}

/// As `at64_ptr`, for a 32-bit word.
///
/// # Safety
/// As `at64_ptr`.
pub unsafe fn at32_ptr<'a>(p: *mut u32) -> &'a AtomicU32 {
    // SAFETY: per the function contract.
    unsafe { AtomicU32::from_ptr(p) }
}
