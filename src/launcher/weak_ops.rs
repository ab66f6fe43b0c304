//! The device memory calls of code compiled for the weak-ordering mode
//! (`FI_XPU_HOST_WEAK_ORDER`): loads, stores, RMWs, fences and copies go
//! through the caller's launch's overlay (`weak`), or straight to memory
//! outside a launch in that mode.
use super::item::{current_item, LAUNCH};
use super::weak;

/// Runs `f` with the weak-ordering mode's state of the caller's launch
/// and the caller's global id; `None` outside a launch in that mode.
fn with_weak<T>(f: impl FnOnce(&weak::Device, u32) -> T) -> Option<T> {
    LAUNCH.with(|l| {
        let l = l.borrow();
        let d = l.as_ref()?.weak.as_ref()?;
        let it = current_item();
        Some(f(d, it.group_id * it.group_size + it.local_id))
    })
}

/// Writes everything the caller's launch holds back to memory (a
/// system-scope release by the caller); nothing outside the mode.
pub(super) fn weak_sync() {
    // SAFETY: what is held back was stored by `weak_copy`, whose caller
    // named each destination writable (and keeps it so for the kernel).
    with_weak(|d, me| unsafe { d.release(me, weak::MS_SYSTEM) });
}

/// An atomic load of `size` (4 or 8) bytes of device code compiled for
/// the weak-ordering mode (`weak`); the plain load elsewhere.
///
/// # Safety
/// `p` is aligned and valid for an atomic load of `size` bytes.
pub unsafe fn weak_load(p: usize, size: usize, order: i32) -> u64 {
    // SAFETY: the caller's contract.
    with_weak(|d, _| unsafe { d.load(p, size, order) })
        .unwrap_or_else(|| unsafe { weak::plain_load(p, size, order) })
}

/// An atomic store, as `weak_load`.
///
/// # Safety
/// `p` is aligned and valid for an atomic store of `size` bytes.
pub unsafe fn weak_store(p: usize, size: usize, v: u64, order: i32, mscope: i32) {
    // SAFETY: the caller's contract; held-back stores as in `weak_sync`.
    with_weak(|d, me| unsafe { d.store(me, p, size, v, order, mscope) })
        .unwrap_or_else(|| unsafe { weak::plain_store(p, size, v, order) });
}

/// An atomic read-modify-write (`FI_XPU_HOST_WEAK_*`), as `weak_load`;
/// returns the old value.
///
/// # Safety
/// `p` is aligned and valid for an atomic RMW of `size` bytes.
pub unsafe fn weak_rmw(
    p: usize,
    size: usize,
    op: i32,
    v: (u64, u64),
    order: i32,
    mscope: i32,
) -> u64 {
    // SAFETY: the caller's contract; held-back stores as in `weak_sync`.
    with_weak(|d, me| unsafe { d.rmw(me, p, size, op, v.0, v.1, order, mscope) })
        .unwrap_or_else(|| unsafe { weak::plain_rmw(p, size, op, v.0, v.1, order) })
}

/// A fence, as `weak_load`.
pub fn weak_fence(order: i32, mscope: i32) {
    if weak::releases(order, false) {
        // SAFETY: held-back stores as in `weak_sync`.
        with_weak(|d, me| unsafe { d.release(me, mscope) });
    }
    weak::plain_fence(order);
}

/// A data copy of `n` bytes, as `weak_load`.
///
/// # Safety
/// `src` is valid for reading and `dst` for writing `n` bytes until the
/// caller's work item ends, and they do not overlap.
pub unsafe fn weak_copy(dst: usize, src: usize, n: usize) {
    // SAFETY: the caller's contract.
    with_weak(|d, me| unsafe { d.copy(me, dst, src, n) }).unwrap_or_else(|| unsafe {
        std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, n)
    });
}
