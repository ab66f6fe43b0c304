//! Host XPU launcher entry points (see `crate::launcher`).
use crate::error::Error;
use crate::launcher;
use fi_xpu_abi::errno::FI_ETIMEDOUT;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::time::Duration;

/// Runs `kernel(arg)` as `attr->num_groups` groups of `attr->group_size`
/// work items, one CPU thread each, and returns when every one has
/// returned. Inside the kernel the device header's arch layer sees each
/// thread's ids and its subgroup, work-group and device barriers.
/// With `FI_XPU_HOST_LAUNCH_GPU` (or `FI_XPU_HOST_GPU` set) it runs in the
/// GPU-like mode of fi_xpu_host_launch(3).
/// Returns 0, `-FI_EINVAL` (NULL attr or kernel, zero groups or items),
/// `-FI_EBADFLAGS`, `-FI_E2BIG` (more than `FI_XPU_HOST_MAX_ITEMS` threads),
/// `-FI_EAGAIN` (threads could not be created; the kernel ran nowhere) or,
/// in the GPU-like mode, `-FI_ETIMEDOUT` (the kernel waited on groups that
/// could not become resident; reported, and it finished after).
///
/// # Safety
/// `attr` is NULL or valid; `kernel` may be called concurrently with `arg`.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_host_launch(
    attr: *const fi_xpu_host_launch_attr,
    kernel: Option<unsafe extern "C" fn(arg: *mut c_void)>,
    arg: *mut c_void,
) -> c_int {
    boundary!({
        let attr = borrowed!(attr)?;
        let kernel = kernel.ok_or(Error::INVAL)?;
        let shape = launcher::Shape::new(attr)?;
        // Carried as an address so the closure is Sync; the kernel gets it back unchanged.
        let arg = arg as usize;
        launcher::launch(&shape, || {
            // SAFETY: the caller promised `kernel` accepts `arg` from many threads at once.
            unsafe { kernel(arg as *mut c_void) }
        })?;
        Ok(0)
    })
}

/// The calling thread's position in the current launch (a single work item
/// outside any launch). Valid for the life of the thread.
#[no_mangle]
pub extern "C" fn fi_xpu_host_item() -> *const fi_xpu_host_item {
    launcher::current_item_ptr()
}

/// Waits for every work item of the caller's `scope` instance. 0, or
/// `-FI_EINVAL` for an unknown scope.
#[no_mangle]
pub extern "C" fn fi_xpu_host_barrier(scope: c_int) -> c_int {
    boundary!(launcher::barrier(scope).map(|_| 0))
}

/// As `fi_xpu_host_barrier`, for at most `timeout_ns` nanoseconds: 0 when
/// every work item of the caller's `scope` instance arrived, `-FI_ETIMEDOUT`
/// when the time ran out (then `*arrived`, if not NULL, is how many had
/// arrived, the caller included, and nobody waits for the caller any more),
/// `-FI_EINVAL` for an unknown scope.
///
/// # Safety
/// `arrived` is NULL or valid for writing.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_host_barrier_timeout(
    scope: c_int,
    timeout_ns: u64,
    arrived: *mut u32,
) -> c_int {
    boundary!(
        match launcher::barrier_for(scope, Duration::from_nanos(timeout_ns))? {
            Ok(()) => Ok(0),
            Err(n) => {
                if let Ok(out) = out!(arrived) {
                    out.put(n);
                }
                Ok(-FI_ETIMEDOUT)
            }
        },
    )
}

/// Every work item of the caller's `scope` instance calls it; afterwards
/// `*value` is the leader's (rank 0's) value in all of them. 0, or
/// `-FI_EINVAL` for an unknown scope or NULL `value`.
///
/// # Safety
/// `value` is NULL or valid for reading and writing.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_host_broadcast(scope: c_int, value: *mut u64) -> c_int {
    boundary!({
        let value = borrowed_mut!(value)?;
        *value = launcher::broadcast(scope, *value)?;
        Ok(0)
    })
}

/// Nanoseconds on a monotonic clock, for device-side timeouts.
#[no_mangle]
pub extern "C" fn fi_xpu_host_clock_ns() -> u64 {
    launcher::clock_ns()
}

/// Back-off inside a host work item's spin loop: yields the CPU.
#[no_mangle]
pub extern "C" fn fi_xpu_host_pause() {
    launcher::pause()
}

/// Weak-ordering mode (fi_xpu_host_launch(3)): the atomic load of `size`
/// (4 or 8) bytes at `p` that device code built with
/// `FI_XPU_HOST_WEAK_ORDER` defined makes (`order` an `__ATOMIC_*` order,
/// `mscope` a `FI_XPU_ARCH_MS_*` scope). In a launch in the mode it sees
/// the work item's own held-back stores and those released to the launch;
/// elsewhere it is the plain load.
///
/// # Safety
/// `p` is aligned and valid for an atomic access of `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_host_weak_load(
    p: *const c_void,
    size: usize,
    order: c_int,
    mscope: c_int,
) -> u64 {
    let _ = mscope;
    // SAFETY: the caller's contract.
    unsafe { launcher::weak_load(p as usize, atomic_size(size), order) }
}

/// Weak-ordering mode: an atomic store of `v` (its low `size` bytes). A
/// release at `mscope` first when `order` releases.
///
/// # Safety
/// As `fi_xpu_host_weak_load`.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_host_weak_store(
    p: *mut c_void,
    size: usize,
    v: u64,
    order: c_int,
    mscope: c_int,
) {
    // SAFETY: the caller's contract.
    unsafe { launcher::weak_store(p as usize, atomic_size(size), v, order, mscope) }
}

/// Weak-ordering mode: an atomic read-modify-write `op`
/// (`FI_XPU_HOST_WEAK_XCHG`, `_ADD`, `_OR`, `_AND` with `v`;
/// `FI_XPU_HOST_WEAK_CAS` from `v` to `desired`). Returns the old value.
///
/// # Safety
/// As `fi_xpu_host_weak_load`.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_host_weak_rmw(
    p: *mut c_void,
    size: usize,
    op: c_int,
    v: u64,
    desired: u64,
    order: c_int,
    mscope: c_int,
) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        launcher::weak_rmw(
            p as usize,
            atomic_size(size),
            op,
            (v, desired),
            order,
            mscope,
        )
    }
}

/// Weak-ordering mode: a fence; one that releases makes what the work item
/// stored visible at `mscope`.
#[no_mangle]
pub extern "C" fn fi_xpu_host_weak_fence(order: c_int, mscope: c_int) {
    launcher::weak_fence(order, mscope)
}

/// Weak-ordering mode: a data copy of `n` bytes, held back in the work
/// item's buffer until a release.
///
/// # Safety
/// `src` is valid for reading and `dst` for writing `n` bytes until the
/// work item returns; they do not overlap.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_host_weak_copy(dst: *mut c_void, src: *const c_void, n: usize) {
    if n == 0 {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe { launcher::weak_copy(dst as usize, src as usize, n) }
}

/// The width of an atomic: 4, or 8 for anything else.
fn atomic_size(size: usize) -> usize {
    if size == 4 {
        4
    } else {
        8
    }
}
