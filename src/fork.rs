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
static LOCKS: [OnceLock<&'static dyn ForkLock>; RANKS] = [const { OnceLock::new() }; RANKS];

/// Registers `lock` at `rank` (one lock per rank), and installs the fork
/// handlers at the first call. Not from inside a fork handler.
pub(crate) fn register(rank: Rank, lock: &'static dyn ForkLock) {
    hold_locks_across_fork();
    let first = LOCKS[rank as usize].set(lock).is_ok();
    debug_assert!(first, "two locks registered at one rank");
}

/// A process-wide lock that the forking thread holds across `fork`,
/// registered at its rank when it is made: by its owner at load
/// (`at_load!`), or by `lock` at its first use otherwise.
pub(crate) struct ForkSafe<T> {
    lock: OnceLock<Mutex<T>>,
    rank: Rank,
    in_child: Option<fn(&mut T)>,
}

impl<T: Send + 'static> ForkSafe<T> {
    pub const fn new(rank: Rank) -> Self {
        ForkSafe {
            lock: OnceLock::new(),
            rank,
            in_child: None,
        }
    }

    /// A lock whose value `in_child` amends in a forked child, while the
    /// forking thread's hold still keeps it.
    pub const fn with_child_hook(rank: Rank, in_child: fn(&mut T)) -> Self {
        ForkSafe {
            lock: OnceLock::new(),
            rank,
            in_child: Some(in_child),
        }
    }

    /// Locks it, making it with `make` at the first use (which registers
    /// it).
    pub fn lock(&'static self, make: impl FnOnce() -> T) -> MutexGuard<'static, T> {
        self.lock
            .get_or_init(|| {
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

/// The value in `cell`, made by `make` at the first call. Made outside the
/// cell, which is then only set: a thread that forks while another is
/// making it (a `OnceLock::get_or_init` running its closure) would leave
/// the child waiting for it for ever. Two threads may both make it; the
/// first value set is kept.
pub fn made_once<T>(cell: &OnceLock<T>, make: impl FnOnce() -> T) -> &T {
    if let Some(v) = cell.get() {
        return v;
    }
    let _ = cell.set(make());
    cell.get().expect("set above")
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
        let _ = LOCKS[Rank::Stderr as usize].set(&STDERR);
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

    /// Every rank has its lock by the time any thread can call the
    /// library: their owners register them at load.
    #[test]
    fn every_rank_is_registered_at_load() {
        let missing: Vec<usize> = (0..RANKS).filter(|&r| LOCKS[r].get().is_none()).collect();
        assert!(missing.is_empty(), "ranks without a lock: {missing:?}");
    }
}
