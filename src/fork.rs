//! The library's process-wide locks are held by the forking thread across
//! `fork`, so that a child never starts with one of them locked by a
//! thread it does not have (its first call would wait forever).
//!
//! A lock registers itself here when it is made, with its `Rank`, and
//! optionally a hook that runs in the child while the lock is still held.
//! The forking thread takes the registered locks in rank order and lets
//! them go in the reverse order; `Rank` is the one place the order is
//! written. This module names no other module of the library: the ones
//! above it come to it.
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock};

/// The process-wide locks in the order the library nests them, which is
/// the order a forking thread takes them in.
#[derive(Clone, Copy)]
pub(crate) enum Rank {
    /// The registry of live handles (objects, worlds, windows), taken
    /// before the shells and the close hand-off.
    Objects,
    /// The arena of C-visible shells.
    Shells,
    /// Where `close` waits for the calls in flight on an object.
    CloseHandOff,
    /// Whether a thread is loading the providers; held for moments, around
    /// no other lock.
    ProviderLoad,
    /// The parameter registry; a leaf lock.
    Params,
    /// Standard error: logging happens under the locks above. Held by this
    /// module itself.
    Stderr,
    /// Last: the library's `dlopen` calls, which the forking thread waits
    /// for. A thread may load a library while it holds one of the locks
    /// above, never the other way round.
    Dlopen,
}

const RANKS: usize = Rank::Dlopen as usize + 1;

/// A lock a forking thread holds across `fork`.
pub(crate) trait ForkLock: Sync {
    /// Takes it, for the fork; `None` when there is nothing to hold yet.
    fn hold(&'static self) -> Option<Box<dyn Held>>;
}

/// A lock held across `fork`.
pub(crate) trait Held {
    /// In the child, before the lock is let go.
    fn in_child(&mut self) {}
}

/// The registered locks, by rank.
static LOCKS: [Made<&'static dyn ForkLock>; RANKS] = [const { Made::new() }; RANKS];

/// Registers `lock` at `rank` (one lock per rank; again is harmless), and
/// installs the fork handlers at the first call. Not from inside a fork
/// handler.
pub(crate) fn register(rank: Rank, lock: &'static dyn ForkLock) {
    hold_locks_across_fork();
    let held = LOCKS[rank as usize].get_or_make(|| lock);
    debug_assert!(
        ptr::addr_eq(*held, lock),
        "two locks registered at one rank"
    );
}

/// A process-wide lock that the forking thread holds across `fork`,
/// registered at its rank when it is made: by its owner at load
/// (`at_load!`), or by `lock` at its first use otherwise.
pub(crate) struct ForkSafe<T> {
    lock: Made<Mutex<T>>,
    rank: Rank,
    in_child: Option<fn(&mut T)>,
}

impl<T: Send + 'static> ForkSafe<T> {
    pub const fn new(rank: Rank) -> Self {
        ForkSafe {
            lock: Made::new(),
            rank,
            in_child: None,
        }
    }

    /// A lock whose value `in_child` amends in a forked child, while the
    /// forking thread's hold still keeps it.
    pub const fn with_child_hook(rank: Rank, in_child: fn(&mut T)) -> Self {
        ForkSafe {
            lock: Made::new(),
            rank,
            in_child: Some(in_child),
        }
    }

    /// Locks it, making it with `make` at the first use (which registers
    /// it; two threads' first uses may both make and register it).
    pub fn lock(&'static self, make: impl FnOnce() -> T) -> MutexGuard<'static, T> {
        self.lock
            .get_or_make(|| {
                register(self.rank, self);
                Mutex::new(make())
            })
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Send + 'static> ForkLock for ForkSafe<T> {
    /// Nothing before its first use: making it may install the fork
    /// handlers, which cannot be done inside one.
    fn hold(&'static self) -> Option<Box<dyn Held>> {
        let guard = self.lock.get()?.lock().unwrap_or_else(|e| e.into_inner());
        Some(Box::new(Guard {
            guard,
            in_child: self.in_child,
        }))
    }
}

/// A plain `static` mutex, made at compile time.
impl<T: Send + 'static> ForkLock for Mutex<T> {
    fn hold(&'static self) -> Option<Box<dyn Held>> {
        let guard = self.lock().unwrap_or_else(|e| e.into_inner());
        Some(Box::new(Guard {
            guard,
            in_child: None,
        }))
    }
}

struct Guard<T: 'static> {
    guard: MutexGuard<'static, T>,
    in_child: Option<fn(&mut T)>,
}

impl<T> Held for Guard<T> {
    fn in_child(&mut self) {
        if let Some(f) = self.in_child {
            f(&mut self.guard);
        }
    }
}

struct Stderr;

impl ForkLock for Stderr {
    fn hold(&'static self) -> Option<Box<dyn Held>> {
        Some(Box::new(std::io::stderr().lock()))
    }
}

impl Held for std::io::StderrLock<'static> {}

/// A value made at its first use, which a `fork` at any moment leaves made
/// or not made, never half made. A `OnceLock` being set (or initialised)
/// by one thread while another forks stays "running" in the child, whose
/// first use then waits for a thread it does not have, for ever. Here the
/// value is made outside the cell and published by one compare-and-swap
/// of a pointer. Two threads may both make it; the first value published
/// is kept and the other dropped, so `make` must have no effect beyond
/// its value.
pub struct Made<T> {
    value: AtomicPtr<T>,
    /// Sent and shared as a `OnceLock<T>` is.
    _like: PhantomData<OnceLock<T>>,
}

impl<T> Made<T> {
    pub const fn new() -> Self {
        Made {
            value: AtomicPtr::new(ptr::null_mut()),
            _like: PhantomData,
        }
    }

    /// The value, once made.
    pub fn get(&self) -> Option<&T> {
        // SAFETY: a non-null pointer here came from `Box::into_raw` in
        // `get_or_make` and is freed only when the cell drops, which
        // `&self` outlives.
        unsafe { self.value.load(Ordering::Acquire).as_ref() }
    }

    /// The value, made by `make` at the first call.
    pub fn get_or_make(&self, make: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        let mine = Box::into_raw(Box::new(make()));
        match self.value.compare_exchange(
            ptr::null_mut(),
            mine,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // SAFETY: published just now; the cell owns it from here on.
            Ok(_) => unsafe { &*mine },
            Err(first) => {
                // SAFETY: `mine` was never published: it is still ours.
                drop(unsafe { Box::from_raw(mine) });
                // SAFETY: as in `get`.
                unsafe { &*first }
            }
        }
    }
}

impl<T> Default for Made<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Drop for Made<T> {
    fn drop(&mut self) {
        let p = *self.value.get_mut();
        if !p.is_null() {
            // SAFETY: published by `get_or_make` from `Box::into_raw`, and
            // no reference to it outlives the cell.
            drop(unsafe { Box::from_raw(p) });
        }
    }
}

/// Runs `$make` when the library is loaded, before any thread can be
/// inside one of its calls. The owner of a process-wide table makes it
/// there: a table still being made by one thread when another forks would
/// stay half made in the child, and its first call would wait for it
/// forever; made at load, none is made later.
macro_rules! at_load {
    ($make:path) => {
        const _: () = {
            extern "C" fn at_load() {
                $make();
            }
            #[used]
            #[link_section = ".init_array"]
            static AT_LOAD: extern "C" fn() = at_load;
        };
    };
}
pub(crate) use at_load;

thread_local! {
    /// The locks the forking thread holds, in rank order.
    static HELD: RefCell<Vec<Box<dyn Held>>> = const { RefCell::new(Vec::new()) };
}

/// Installs the fork handlers, once per process; cheap after the first
/// call.
fn hold_locks_across_fork() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        static STDERR: Stderr = Stderr;
        LOCKS[Rank::Stderr as usize].get_or_make(|| &STDERR);
        // SAFETY: the handlers only take and release the library's own
        // locks.
        unsafe {
            libc::pthread_atfork(
                Some(before_fork),
                Some(after_fork),
                Some(after_fork_in_child),
            );
        }
    });
}

extern "C" fn before_fork() {
    let held: Vec<Box<dyn Held>> = LOCKS.iter().filter_map(|lock| lock.get()?.hold()).collect();
    HELD.with(|h| *h.borrow_mut() = held);
}

/// In the parent: the forking thread lets go.
extern "C" fn after_fork() {
    HELD.with(|h| {
        let mut held = h.borrow_mut();
        while let Some(g) = held.pop() {
            drop(g);
        }
    });
}

/// In the child: as in the parent, once each lock's child hook has run
/// (a provider load or a `dlopen` that another thread of the parent was
/// making is forgotten: that thread is not here).
extern "C" fn after_fork_in_child() {
    HELD.with(|h| {
        for g in h.borrow_mut().iter_mut() {
            g.in_child();
        }
    });
    after_fork();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads that make a value at once all get the first one published;
    /// the others are dropped at once, the kept one with the cell.
    #[test]
    fn made_keeps_the_first_value_and_drops_the_others() {
        use std::sync::atomic::AtomicUsize;
        use std::sync::Barrier;
        static MADE: AtomicUsize = AtomicUsize::new(0);
        static DROPPED: AtomicUsize = AtomicUsize::new(0);
        struct Counted(usize);
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
        const THREADS: usize = 8;
        let cell = Made::new();
        let start = Barrier::new(THREADS);
        let seen: Vec<usize> = std::thread::scope(|s| {
            let made: Vec<_> = (0..THREADS)
                .map(|i| {
                    let (cell, start) = (&cell, &start);
                    s.spawn(move || {
                        start.wait();
                        let make = || {
                            MADE.fetch_add(1, Ordering::Relaxed);
                            Counted(i)
                        };
                        cell.get_or_make(make).0
                    })
                })
                .collect();
            made.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let kept = cell.get().expect("made").0;
        assert!(seen.iter().all(|&i| i == kept), "{seen:?} against {kept}");
        let made = MADE.load(Ordering::Relaxed);
        assert!((1..=THREADS).contains(&made), "{made} made");
        assert_eq!(DROPPED.load(Ordering::Relaxed), made - 1);
        drop(cell);
        assert_eq!(DROPPED.load(Ordering::Relaxed), made);
    }

    /// Every rank has its lock by the time any thread can call the
    /// library: their owners register them at load.
    #[test]
    fn every_rank_is_registered_at_load() {
        let missing: Vec<usize> = (0..RANKS).filter(|&r| LOCKS[r].get().is_none()).collect();
        assert!(missing.is_empty(), "ranks without a lock: {missing:?}");
    }
}
