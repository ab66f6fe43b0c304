//! The library's process-wide locks are held by the forking thread across
//! `fork`, so that a child never starts with one of them locked by a
//! thread it does not have (its first call would wait forever).
//!
//! The locks are taken in the order the library nests them: a world's
//! handle registry before the handle arena; the object registry before
//! the close hand-off; then the provider load's state and the parameter
//! registry (each held for moments, around no other lock); standard error
//! (logging happens under the others). Last the forking thread waits for
//! the library's `dlopen` calls to end (`crate::dl`). The launcher's idle
//! list has a handler of its own.
use std::any::Any;
use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard, Once, OnceLock};

/// A process-wide lock that the forking thread holds across `fork`. The
/// library's own are made when it is loaded (`AT_LOAD`); `lock` makes one
/// at its first use otherwise.
pub struct ForkSafe<T>(OnceLock<Mutex<T>>);

impl<T> ForkSafe<T> {
    pub const fn new() -> Self {
        ForkSafe(OnceLock::new())
    }

    /// Locks it, making it with `make` at the first use (which installs
    /// the fork handlers).
    pub fn lock(&self, make: impl FnOnce() -> T) -> MutexGuard<'_, T> {
        self.0
            .get_or_init(|| {
                hold_locks_across_fork();
                Mutex::new(make())
            })
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Locks it for the fork handler; nothing before its first use (making
    /// it may register a fork handler, which cannot be done inside one).
    pub fn lock_if_made(&self) -> Option<MutexGuard<'_, T>> {
        self.0
            .get()
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

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

thread_local! {
    static HELD: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
    static LOAD_HELD: RefCell<Option<MutexGuard<'static, crate::provider::loader::Loading>>> =
        const { RefCell::new(None) };
    static DL_HELD: RefCell<Option<MutexGuard<'static, crate::dl::Opening>>> = const { RefCell::new(None) };
}

/// When the library is loaded, before any thread can be inside one of its
/// calls: the fork handlers, and the tables they hold. A table still being
/// made by one thread when another forks would stay half made in the
/// child, and its first call would wait for it forever; made here, none
/// is made later.
#[used]
#[link_section = ".init_array"]
static AT_LOAD: extern "C" fn() = at_load;

extern "C" fn at_load() {
    crate::world::handles::make();
    crate::object::make();
    crate::shell::make();
    crate::provider::loader::make();
    crate::param::make();
}

/// Installs the fork handlers, once per process; cheap after the first
/// call.
fn hold_locks_across_fork() {
    static ONCE: Once = Once::new();
    // SAFETY: the handlers only take and release the library's own locks.
    ONCE.call_once(|| unsafe {
        libc::pthread_atfork(
            Some(before_fork),
            Some(after_fork),
            Some(after_fork_in_child),
        );
    });
}

extern "C" fn before_fork() {
    let held: Vec<Box<dyn Any>> = vec![
        Box::new(crate::world::handles::lock_for_fork()),
        Box::new(crate::object::lock_for_fork()),
        Box::new(crate::shell::lock_for_fork()),
        Box::new(crate::object::drained_for_fork()),
    ];
    HELD.with(|h| *h.borrow_mut() = held);
    // Kept apart: the child changes it (`after_fork_in_child`).
    LOAD_HELD.with(|h| *h.borrow_mut() = crate::provider::loader::lock_for_fork());
    HELD.with(|h| {
        h.borrow_mut().extend([
            Box::new(crate::param::lock_for_fork()) as Box<dyn Any>,
            Box::new(std::io::stderr().lock()),
        ])
    });
    // Last: a thread may load a library while it holds one of the locks
    // above, never the other way round.
    DL_HELD.with(|h| *h.borrow_mut() = Some(crate::dl::settle_for_fork()));
}

/// In the parent: the forking thread lets go.
extern "C" fn after_fork() {
    HELD.with(|h| {
        let mut held = h.borrow_mut();
        while let Some(g) = held.pop() {
            drop(g);
        }
    });
    LOAD_HELD.with(|h| drop(h.borrow_mut().take()));
    DL_HELD.with(|h| drop(h.borrow_mut().take()));
}

/// In the child: as in the parent, once a provider load that another
/// thread of the parent was making is forgotten (that thread is not here).
extern "C" fn after_fork_in_child() {
    LOAD_HELD.with(|h| {
        if let Some(st) = h.borrow_mut().as_mut() {
            crate::provider::loader::forget_load_in_child(st);
        }
    });
    DL_HELD.with(|h| {
        if let Some(st) = h.borrow_mut().as_mut() {
            crate::dl::forget_opening_in_child(st);
        }
    });
    after_fork();
}
