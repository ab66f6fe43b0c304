//! The C-visible shells of host objects, recycled with a generation in the
//! handle's address.
//!
//! A handle is the address of a `struct fid` that libfabric's inline
//! `fi_close` dereferences, so a stale handle must stay readable and keep
//! pointing at the core's `fi_ops`. Shells live in slots of one memfd, and
//! the memfd is mapped `VIEWS` times side by side: the same slot read through
//! view `g` is the same memory at another address. A slot's generation picks
//! the view its handle points into, so when a closed slot is reused the new
//! handle differs from every stale one of the last `VIEWS` generations, while
//! memory stays one shell per live object. Freed slots are reused first in,
//! first out, so a stale address comes back only after `VIEWS` reuses of its
//! slot. Past `SLOTS` live objects, or where the mapping cannot be made,
//! shells are allocated singly and kept for the rest of the process (never
//! reused), as before.
use crate::fork::{self, ForkSafe, Rank};
use fi_xpu_abi::fid;
use fi_xpu_os::rustix::fs::{ftruncate, MemfdFlags};
use fi_xpu_os::rustix::mm::{self, MapFlags, ProtFlags};
use std::collections::VecDeque;
use std::ffi::c_void;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::MutexGuard;

const SHELL: usize = std::mem::size_of::<fid>();
/// Live objects the arena holds at once.
const SLOTS: usize = 1 << 20;
/// Generations told apart by address.
const VIEWS: usize = 64;
const VIEW_BYTES: usize = SLOTS * SHELL;

struct Arena {
    /// Start of view 0 (0: no arena).
    base: usize,
    /// Slots ever handed out from the arena: `[0, next)`.
    next: usize,
    /// Closed slots with the view their next handle points into.
    free: VecDeque<(u32, u32)>,
    /// Shells outside the arena, kept for the rest of the process.
    kept: Vec<usize>,
}

/// For the fork handler, which must not take the lock.
static BASE: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);

static ARENA: ForkSafe<Arena> = ForkSafe::new(Rank::Shells);

fn arena() -> MutexGuard<'static, Arena> {
    ARENA.lock(|| {
        let base = map_views().unwrap_or(0);
        BASE.store(base, Ordering::Release);
        Arena {
            base,
            next: 0,
            free: VecDeque::new(),
            kept: Vec::new(),
        }
    })
}

/// Made at load (`crate::fork`).
fn make() {
    drop(arena());
}
fork::at_load!(make);

/// A new memfd of `VIEW_BYTES` (sparse: pages appear as slots are written).
fn new_fd() -> Option<OwnedFd> {
    let fd = fi_xpu_os::file::memfd(c"fi_xpu-shells", MemfdFlags::empty()).ok()?;
    ftruncate(&fd, VIEW_BYTES as u64).ok()?;
    Some(fd)
}

/// Maps `fd` over every view at `base` (fixed) or anywhere (`base` 0, the
/// views then placed in one reservation). Returns the start of view 0.
fn map_fd(fd: BorrowedFd, base: usize) -> Option<usize> {
    let base = if base == 0 {
        // SAFETY: a fresh anonymous reservation; no memory is touched.
        let r = unsafe {
            mm::mmap_anonymous(
                std::ptr::null_mut(),
                VIEWS * VIEW_BYTES,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .ok()?;
        r as usize
    } else {
        base
    };
    for v in 0..VIEWS {
        // SAFETY: the target lies inside the reservation made above (or, in a
        // forked child, inside the arena's own views), which nothing else uses.
        unsafe {
            mm::mmap(
                (base + v * VIEW_BYTES) as *mut c_void,
                VIEW_BYTES,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                fd,
                0,
            )
        }
        .ok()?;
    }
    Some(base)
}

fn map_views() -> Option<usize> {
    // The descriptor is closed here; the mappings keep the memory.
    let base = map_fd(new_fd()?.as_fd(), 0)?;
    // SAFETY: registered once, from the arena's initialisation.
    unsafe { libc::pthread_atfork(None, None, Some(after_fork)) };
    Some(base)
}

/// A forked child gets its own copy of the shells: the views are shared
/// mappings, and the two processes' registries differ from here on.
extern "C" fn after_fork() {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return;
    }
    let used = NEXT.load(Ordering::Acquire) * SHELL;
    let Some(fd) = new_fd() else { return };
    // SAFETY: `[base, base + used)` is mapped (view 0) and fd is ours.
    let wrote = unsafe { libc::pwrite(fd.as_raw_fd(), base as *const c_void, used, 0) };
    if wrote == used as isize {
        map_fd(fd.as_fd(), base);
    }
    // fd is closed here; the mappings keep the memory.
}

/// A new shell holding `value`; its address is the object's handle.
pub fn alloc(value: fid) -> *mut fid {
    let mut a = arena();
    let (slot, view) = if a.base == 0 {
        None
    } else if let Some(s) = a.free.pop_front() {
        Some(s)
    } else if a.next < SLOTS {
        a.next += 1;
        NEXT.store(a.next, Ordering::Release);
        Some(((a.next - 1) as u32, 0))
    } else {
        None
    }
    .map_or((usize::MAX, 0), |(s, v)| (s as usize, v as usize));
    if slot == usize::MAX {
        let p = Box::into_raw(Box::new(value));
        a.kept.push(p as usize);
        return p;
    }
    let p = (a.base + view * VIEW_BYTES + slot * SHELL) as *mut fid;
    // SAFETY: the slot is inside a mapped view and free: no live object uses
    // it, and stale handles only read it.
    unsafe { p.write(value) };
    p
}

/// Gives back the shell of a closed object: its slot is reused under the next
/// generation. The memory stays mapped and keeps the core's `fi_ops`, so a
/// stale handle still reaches the core, which refuses it.
pub fn free(shell: *mut fid) {
    let mut a = arena();
    let addr = shell as usize;
    if a.base == 0 || addr < a.base || addr >= a.base + VIEWS * VIEW_BYTES {
        return; // kept
    }
    let off = addr - a.base;
    let (view, slot) = (off / VIEW_BYTES, off % VIEW_BYTES / SHELL);
    a.free.push_back((slot as u32, ((view + 1) % VIEWS) as u32));
}

/// Shells in use or kept: slots handed out from the arena plus shells
/// allocated singly (for tests: this stays bounded by the peak of live
/// objects when objects are opened and closed).
pub fn footprint() -> usize {
    let a = arena();
    a.next + a.kept.len()
}
