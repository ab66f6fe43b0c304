//! The weak-ordering mode (`FI_XPU_HOST_WEAK_ORDER=1`): device stores held
//! back the way a GPU may hold them, so that a missing or too narrow
//! release in device code shows on a CPU, whose TSO order and strong C
//! atomics hide it otherwise.
//!
//! Only device code compiled with `FI_XPU_HOST_WEAK_ORDER` defined is
//! instrumented: its atomics, fences and data copies
//! (`fi_xpu_arch_bulk_copy`, which the cooperative copies of the host arch
//! use) call the `fi_xpu_host_weak_*` functions instead of the compiler's
//! builtins. Those act as follows for a work item of a launch in the mode,
//! and as the plain operation anywhere else.
//!
//! The model has two kinds of agents: the work items of this launch (the
//! "device"), and everybody else (the "host": the application's threads,
//! the library's provider threads, other processes and their kernels),
//! which only ever sees real memory.
//!
//! - A data copy goes into the work item's own buffer, not into memory.
//! - A relaxed atomic store, and an RMW without release order, goes to
//!   memory at once: it overtakes every copy still buffered, the reorder a
//!   weak GPU may make and the one that breaks a publish made without a
//!   release.
//! - A release (fence, store or RMW with release, acq_rel or seq_cst order)
//!   at device scope moves the work item's buffer into the launch's device
//!   overlay, which the instrumented loads of every work item of the launch
//!   consult; at system scope it writes the overlay and the buffer to memory,
//!   in the order the stores were made. Then the store or RMW itself goes to
//!   memory: a flag released at device scope reaches the host before the
//!   data it was meant to cover.
//! - A barrier or broadcast of any scope, and the end of a work item, write
//!   everything to memory, because device code reads what a barrier
//!   publishes with plain loads (group-shared memory on a GPU).
//! - The work item's instrumented loads (atomic loads, the source of a
//!   copy) see memory overlaid with the device overlay, then its own buffer
//!   (store forwarding). Stores and RMWs take their bytes out of both
//!   first (an RMW writes them to memory before it operates), so no older
//!   store can land over a newer one.
//! - When a store or RMW reaches memory while stores the work item made
//!   before it are still hidden from the host (in its buffer, or in the
//!   overlay), the work item stops for the window
//!   (`FI_XPU_HOST_WEAK_WINDOW_MS`): an observer waiting for the word has
//!   time to see it without the data, as it may on a GPU.
//!
//! Limits: plain C loads and stores are not instrumented: a plain store is
//! written at once, and a plain load sees memory only, so data released at
//! device scope alone (in the overlay) is invisible to plain loads of other
//! work items until the next system-scope release, barrier or the end of a
//! work item; device code must read such data with instrumented loads. The
//! library publishes everything at system scope, so it never relies on
//! that. Loads are never stale: a missing acquire is not caught; atomic
//! stores are never held back: a missing seq_cst fence between a store and
//! a later load (store buffering) is not caught either. Copies
//! through `FI_XPU_ARCH_MEMCPY` (the compiler's memcpy, used for locals
//! too) are not buffered.
use std::cell::RefCell;
use std::sync::atomic::{self, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use fi_xpu_abi::*;

/// Memory orders as the device arch layer passes them (`__ATOMIC_*`).
const RELAXED: i32 = 0;
const ACQUIRE: i32 = 2;
const RELEASE: i32 = 3;
/// `FI_XPU_ARCH_MS_DEVICE`; any other scope is system scope.
const MS_DEVICE: i32 = 0;
/// `FI_XPU_ARCH_MS_SYSTEM`.
pub const MS_SYSTEM: i32 = 1;

/// The window when the environment gives none.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(20);

/// Bytes stored at `addr`, not yet in memory.
#[derive(Debug)]
struct Entry {
    addr: usize,
    bytes: Vec<u8>,
    /// The work item (global id) that stored them.
    owner: u32,
}

impl Entry {
    fn end(&self) -> usize {
        self.addr + self.bytes.len()
    }
}

/// The state of one launch in the mode: its device overlay.
#[derive(Debug)]
pub struct Device {
    overlay: Mutex<Vec<Entry>>,
    /// `overlay.len()`, read without the lock by loads that find it empty.
    held: AtomicUsize,
    window: Duration,
    /// Stores and RMWs that reached memory ahead of hidden stores.
    stalls: AtomicU64,
}

thread_local! {
    /// The calling work item's buffer, oldest store first.
    static BUFFER: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// Whether `order` releases: everything but relaxed and acquire (a store
/// given acquire order is treated as seq_cst, as the arch layer does).
pub fn releases(order: i32, store: bool) -> bool {
    order != RELAXED && (store || order != ACQUIRE)
}

fn ordering(order: i32, load: bool, store: bool) -> Ordering {
    match order {
        RELAXED => Ordering::Relaxed,
        ACQUIRE if load && !store => Ordering::Acquire,
        ACQUIRE => Ordering::AcqRel,
        RELEASE if store && !load => Ordering::Release,
        RELEASE => Ordering::AcqRel,
        4 if load && store => Ordering::AcqRel,
        _ => Ordering::SeqCst,
    }
}

/// Lays the bytes of `entries` that fall in `[addr, addr + out.len())`
/// over `out`, oldest first.
fn overlay(entries: &[Entry], addr: usize, out: &mut [u8]) {
    let end = addr + out.len();
    for e in entries {
        let (lo, hi) = (e.addr.max(addr), e.end().min(end));
        if lo < hi {
            out[lo - addr..hi - addr].copy_from_slice(&e.bytes[lo - e.addr..hi - e.addr]);
        }
    }
}

/// Takes `[lo, hi)` out of `entries` (an entry across it keeps its two
/// ends); returns the bytes taken, oldest first.
fn punch(entries: &mut Vec<Entry>, lo: usize, hi: usize) -> Vec<Entry> {
    let mut taken = Vec::new();
    let mut kept = Vec::with_capacity(entries.len());
    for e in entries.drain(..) {
        let (a, b) = (e.addr.max(lo), e.end().min(hi));
        if a >= b {
            kept.push(e);
            continue;
        }
        if e.addr < a {
            kept.push(Entry {
                addr: e.addr,
                bytes: e.bytes[..a - e.addr].to_vec(),
                owner: e.owner,
            });
        }
        taken.push(Entry {
            addr: a,
            bytes: e.bytes[a - e.addr..b - e.addr].to_vec(),
            owner: e.owner,
        });
        if b < e.end() {
            kept.push(Entry {
                addr: b,
                bytes: e.bytes[b - e.addr..].to_vec(),
                owner: e.owner,
            });
        }
    }
    *entries = kept;
    taken
}

/// Writes stored bytes to memory, oldest first.
///
/// # Safety
/// Every entry was stored by device code to memory it may write.
unsafe fn write_out(entries: &[Entry]) {
    for e in entries {
        // SAFETY: the device code that made the copy named `addr` as a
        // writable destination of `bytes.len()` bytes (the caller's
        // contract); the bytes are plain data, written as its memcpy would.
        unsafe {
            std::ptr::copy_nonoverlapping(e.bytes.as_ptr(), e.addr as *mut u8, e.bytes.len())
        };
    }
}

impl Device {
    pub fn new(window: Duration) -> Device {
        Device {
            overlay: Mutex::new(Vec::new()),
            held: AtomicUsize::new(0),
            window,
            stalls: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.overlay.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_held(&self, ov: &[Entry]) {
        self.held.store(ov.len(), Ordering::Release);
    }

    /// Stores and RMWs that overtook hidden stores in this launch.
    pub fn stalls(&self) -> u64 {
        self.stalls.load(Ordering::Relaxed)
    }

    /// The release of work item `me` at `mscope`: its buffer into the
    /// overlay (device scope), or the overlay and the buffer into memory.
    ///
    /// # Safety
    /// As `write_out`.
    pub unsafe fn release(&self, me: u32, mscope: i32) {
        let mine = BUFFER.with(|b| std::mem::take(&mut *b.borrow_mut()));
        if mscope == MS_DEVICE {
            if !mine.is_empty() {
                let mut ov = self.lock();
                ov.extend(mine.into_iter().map(|e| Entry { owner: me, ..e }));
                self.set_held(&ov);
            }
            return;
        }
        if mine.is_empty() && self.held.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut ov = self.lock();
        // SAFETY: the caller's contract.
        unsafe {
            write_out(&ov);
            write_out(&mine);
        }
        ov.clear();
        self.set_held(&ov);
        atomic::fence(Ordering::Release);
    }

    /// Whether stores of `me` are hidden from the host.
    fn hiding(&self, me: u32) -> bool {
        BUFFER.with(|b| !b.borrow().is_empty())
            || (self.held.load(Ordering::Acquire) != 0 && self.lock().iter().any(|e| e.owner == me))
    }

    /// Takes `[p, p + size)` out of the overlay and the buffer before a
    /// store or RMW there; with `keep` the bytes taken go to memory first
    /// (an RMW reads them).
    ///
    /// # Safety
    /// As `write_out`.
    unsafe fn claim(&self, p: usize, size: usize, keep: bool) {
        let mine = BUFFER.with(|b| punch(&mut b.borrow_mut(), p, p + size));
        let theirs = if self.held.load(Ordering::Acquire) != 0 {
            let mut ov = self.lock();
            let t = punch(&mut ov, p, p + size);
            self.set_held(&ov);
            t
        } else {
            Vec::new()
        };
        if keep {
            // SAFETY: the caller's contract.
            unsafe {
                write_out(&theirs);
                write_out(&mine);
            }
        }
    }

    /// After a store or RMW reached memory: the window, when older stores
    /// of `me` are still hidden from the host.
    fn after_publish(&self, me: u32) {
        if self.hiding(me) {
            self.stalls.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(self.window);
        }
    }

    /// What work item `me` sees in `out` at `addr`, memory already in it.
    fn seen(&self, addr: usize, out: &mut [u8]) {
        if self.held.load(Ordering::Acquire) != 0 {
            overlay(&self.lock(), addr, out);
        }
        BUFFER.with(|b| overlay(&b.borrow(), addr, out));
    }

    /// An instrumented load.
    ///
    /// # Safety
    /// `p` is valid for an atomic load of `size` (4 or 8) bytes.
    pub unsafe fn load(&self, p: usize, size: usize, order: i32) -> u64 {
        // SAFETY: the caller's contract.
        let v = unsafe { plain_load(p, size, order) };
        let mut bytes = v.to_ne_bytes();
        self.seen(p, &mut bytes[..size]);
        if size == 4 {
            u64::from(u32::from_ne_bytes(
                bytes[..4].try_into().unwrap_or_default(),
            ))
        } else {
            u64::from_ne_bytes(bytes)
        }
    }

    /// An instrumented store.
    ///
    /// # Safety
    /// `p` is valid for an atomic store of `size` (4 or 8) bytes; the
    /// buffered stores are as `write_out` requires.
    pub unsafe fn store(&self, me: u32, p: usize, size: usize, v: u64, order: i32, mscope: i32) {
        // SAFETY: the caller's contract.
        unsafe {
            if releases(order, true) {
                self.release(me, mscope);
            }
            self.claim(p, size, false);
            plain_store(p, size, v, order);
        }
        self.after_publish(me);
    }

    /// An instrumented RMW (`op`: `FI_XPU_HOST_WEAK_*`); returns the old
    /// value.
    ///
    /// # Safety
    /// As `store`.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn rmw(
        &self,
        me: u32,
        p: usize,
        size: usize,
        op: i32,
        v: u64,
        desired: u64,
        order: i32,
        mscope: i32,
    ) -> u64 {
        // SAFETY: the caller's contract.
        let old = unsafe {
            if releases(order, false) {
                self.release(me, mscope);
            }
            self.claim(p, size, true);
            plain_rmw(p, size, op, v, desired, order)
        };
        self.after_publish(me);
        old
    }

    /// An instrumented copy: the bytes as `me` sees them, into its buffer.
    ///
    /// # Safety
    /// `src` is valid for reading and `dst` for writing `n` bytes.
    pub unsafe fn copy(&self, me: u32, dst: usize, src: usize, n: usize) {
        if n == 0 {
            return;
        }
        let mut bytes = vec![0u8; n];
        // SAFETY: the caller's contract; plain data, read as memcpy would.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, bytes.as_mut_ptr(), n) };
        self.seen(src, &mut bytes);
        BUFFER.with(|b| {
            b.borrow_mut().push(Entry {
                addr: dst,
                bytes,
                owner: me,
            })
        });
    }
}

/// The operation itself on memory, outside the mode.
///
/// # Safety
/// `p` is valid for an atomic load of `size` (4 or 8) bytes, aligned.
pub unsafe fn plain_load(p: usize, size: usize, order: i32) -> u64 {
    let o = ordering(order, true, false);
    // SAFETY: the caller's contract (the device API's for atomics).
    unsafe {
        if size == 4 {
            u64::from(AtomicU32::from_ptr(p as *mut u32).load(o))
        } else {
            AtomicU64::from_ptr(p as *mut u64).load(o)
        }
    }
}

/// # Safety
/// `p` is valid for an atomic store of `size` (4 or 8) bytes, aligned.
pub unsafe fn plain_store(p: usize, size: usize, v: u64, order: i32) {
    let o = ordering(order, false, true);
    // SAFETY: the caller's contract (the device API's for atomics).
    unsafe {
        if size == 4 {
            AtomicU32::from_ptr(p as *mut u32).store(v as u32, o);
        } else {
            AtomicU64::from_ptr(p as *mut u64).store(v, o);
        }
    }
}

/// # Safety
/// `p` is valid for an atomic RMW of `size` (4 or 8) bytes, aligned.
pub unsafe fn plain_rmw(p: usize, size: usize, op: i32, v: u64, desired: u64, order: i32) -> u64 {
    let o = ordering(order, true, true);
    let fail = match o {
        Ordering::AcqRel => Ordering::Acquire,
        Ordering::Release => Ordering::Relaxed,
        other => other,
    };
    macro_rules! on {
        ($a:expr, $t:ty) => {{
            let a = $a;
            let (v, d) = (v as $t, desired as $t);
            u64::from(match op {
                FI_XPU_HOST_WEAK_XCHG => a.swap(v, o),
                FI_XPU_HOST_WEAK_ADD => a.fetch_add(v, o),
                FI_XPU_HOST_WEAK_OR => a.fetch_or(v, o),
                FI_XPU_HOST_WEAK_AND => a.fetch_and(v, o),
                _ => a.compare_exchange(v, d, o, fail).unwrap_or_else(|x| x),
            })
        }};
    }
    // SAFETY: the caller's contract (the device API's for atomics).
    unsafe {
        if size == 4 {
            on!(AtomicU32::from_ptr(p as *mut u32), u32)
        } else {
            on!(AtomicU64::from_ptr(p as *mut u64), u64)
        }
    }
}

/// A fence outside the mode: the host's.
pub fn plain_fence(order: i32) {
    if order != RELAXED {
        atomic::fence(ordering(order, true, true));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(addr: usize, bytes: &[u8]) -> Entry {
        Entry {
            addr,
            bytes: bytes.to_vec(),
            owner: 0,
        }
    }

    #[test]
    fn overlay_lays_newer_bytes_last() {
        let mut out = [0u8; 6];
        overlay(
            &[entry(98, &[1, 1, 1, 1]), entry(103, &[2, 2, 2, 2])],
            100,
            &mut out,
        );
        assert_eq!(out, [1, 1, 0, 2, 2, 2]);
    }

    #[test]
    fn punch_keeps_both_ends() {
        let mut v = vec![entry(10, &[1, 2, 3, 4, 5, 6]), entry(30, &[9])];
        let taken = punch(&mut v, 12, 14);
        assert_eq!(taken.len(), 1);
        assert_eq!((taken[0].addr, taken[0].bytes.clone()), (12, vec![3, 4]));
        let kept: Vec<_> = v.iter().map(|e| (e.addr, e.bytes.clone())).collect();
        assert_eq!(
            kept,
            vec![(10, vec![1, 2]), (14, vec![5, 6]), (30, vec![9])]
        );
    }

    #[test]
    fn orders_that_release() {
        assert!(!releases(RELAXED, true));
        assert!(releases(ACQUIRE, true));
        assert!(!releases(ACQUIRE, false));
        assert!(releases(RELEASE, false));
        assert!(releases(5, false));
    }
}
