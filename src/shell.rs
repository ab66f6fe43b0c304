//! The C-visible shells of host objects, recycled with a generation in the
//! handle's address.
//!
//! A handle is the address of a `struct fid` that libfabric's inline
//! `fi_close` dereferences, so a stale handle must stay readable and keep
//! pointing at the core's `fi_ops`. Shells live in slots of one memfd, and
//! the memfd is mapped `VIEWS` times side by side: the same slot read through
//! view `g` is the same memory at another address. A slot's generation picks
//! the view its handle points into, so when a closed slot is reused the new
//! handle differs from every stale one of the last `VIEWS` generations.
//!
//! Closed slots wait in a quarantine, first in, first out, and one is taken
//! again only while at least `QUARANTINE` wait (a fresh slot is taken
//! otherwise). A slot therefore comes back only after `QUARANTINE - 1`
//! other objects closed since it did, and an address only after `VIEWS`
//! such rounds: a stale handle is refused until at least
//! `VIEWS * (QUARANTINE - 1)` (4,194,240) other objects have been closed
//! after it (`STALE_BOUND`). Memory is one shell per live object plus the
//! quarantine (1.5 MiB at most); the resident size the kernel reports
//! counts a page once per view it was touched through (96 MiB at most),
//! its proportional size (`Pss`) counts it once. Past `SLOTS` slots in use, or where the
//! mapping cannot be made, shells are allocated singly and kept for the rest
//! of the process (never reused), so the bound holds there too.
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
/// Closed slots that wait before one is reused.
const QUARANTINE: usize = 1 << 16;
/// Other objects that close after a handle's before its address can name
/// another object.
pub const STALE_BOUND: usize = VIEWS * (QUARANTINE - 1);

/// Which slot, under which view, the next shell takes.
struct Slots {
    slots: usize,
    views: usize,
    quarantine: usize,
    /// Slots ever handed out: `[0, next)`.
    next: usize,
    /// Closed slots with the view their next handle points into.
    free: VecDeque<(u32, u32)>,
}

impl Slots {
    const fn new(slots: usize, views: usize, quarantine: usize) -> Slots {
        Slots {
            slots,
            views,
            quarantine,
            next: 0,
            free: VecDeque::new(),
        }
    }

    /// A quarantined slot when enough wait, else a fresh one, else none.
    fn take(&mut self) -> Option<(usize, usize)> {
        if self.free.len() >= self.quarantine {
            return self.free.pop_front().map(|(s, v)| (s as usize, v as usize));
        }
        if self.next < self.slots {
            self.next += 1;
            return Some((self.next - 1, 0));
        }
        None
    }

    /// A closed slot, last handed out under `view`.
    fn give(&mut self, slot: usize, view: usize) {
        self.free
            .push_back((slot as u32, ((view + 1) % self.views) as u32));
    }
}

struct Arena {
    /// Start of view 0 (0: no arena).
    base: usize,
    slots: Slots,
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
            slots: Slots::new(SLOTS, VIEWS, QUARANTINE),
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
    let taken = if a.base == 0 { None } else { a.slots.take() };
    NEXT.store(a.slots.next, Ordering::Release);
    let Some((slot, view)) = taken else {
        let p = Box::into_raw(Box::new(value));
        a.kept.push(p as usize);
        return p;
    };
    let p = (a.base + view * VIEW_BYTES + slot * SHELL) as *mut fid;
    // SAFETY: the slot is inside a mapped view and free: no live object uses
    // it, and stale handles only read it.
    unsafe { p.write(value) };
    p
}

/// Gives back the shell of a closed object: its slot is quarantined, then
/// reused under the next generation. The memory stays mapped and keeps the core's `fi_ops`, so a
/// stale handle still reaches the core, which refuses it.
pub fn free(shell: *mut fid) {
    let mut a = arena();
    let addr = shell as usize;
    if a.base == 0 || addr < a.base || addr >= a.base + VIEWS * VIEW_BYTES {
        return; // kept
    }
    let off = addr - a.base;
    let (view, slot) = (off / VIEW_BYTES, off % VIEW_BYTES / SHELL);
    a.slots.give(slot, view);
}

/// Shells in use or kept: slots handed out from the arena plus shells
/// allocated singly (for tests: this stays bounded by the peak of live
/// objects plus the quarantine when objects are opened and closed).
pub fn footprint() -> usize {
    let a = arena();
    a.slots.next + a.kept.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bound, checked exactly on a small arena: with one object kept
    /// open and one churned, the churned handle's address names another
    /// object again only after `views * (quarantine - 1)` other closes.
    #[test]
    fn a_closed_address_returns_only_after_the_bound() {
        let (views, q) = (3, 5);
        let mut s = Slots::new(64, views, q);
        let _live = s.take().unwrap();
        let stale = s.take().unwrap();
        s.give(stale.0, stale.1);
        let mut closes = 0;
        loop {
            let t = s.take().unwrap();
            if t == stale {
                break;
            }
            s.give(t.0, t.1);
            closes += 1;
            assert!(closes <= 10 * views * q, "never came back");
        }
        assert!(closes >= views * (q - 1), "back after {closes} closes");
        assert!(s.next <= 2 + q, "memory: {} slots", s.next);
    }

    /// Past the slots, nothing is reused early: `take` says none.
    #[test]
    fn a_full_arena_hands_out_nothing_early() {
        let mut s = Slots::new(4, 2, 3);
        let all: Vec<_> = (0..4).map(|_| s.take().unwrap()).collect();
        s.give(all[0].0, all[0].1);
        assert_eq!(s.take(), None, "one slot waits, three must");
        s.give(all[1].0, all[1].1);
        s.give(all[2].0, all[2].1);
        assert_eq!(s.take(), Some((all[0].0, 1)));
    }

    #[test]
    fn the_stated_bound() {
        assert_eq!(STALE_BOUND, 4_194_240);
    }
}
