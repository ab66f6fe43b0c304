//! The library's process-wide locks are held by the forking thread across
//! `fork`, so that a child never starts with one of them locked by a
//! thread it does not have (its first call would wait forever).
//!
//! The locks are taken in the order the library nests them: a world's
//! handle registry before the handle arena; the object registry before
//! the close hand-off; standard error last (logging happens under the
//! others). The parameter registry and the launcher's idle list have
//! handlers of their own.
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

thread_local! {
    static HELD: RefCell<Vec<Box<dyn Any>>> = const { RefCell::new(Vec::new()) };
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
}

/// Installs the fork handlers, once per process; cheap after the first
/// call.
fn hold_locks_across_fork() {
    static ONCE: Once = Once::new();
    // SAFETY: the handlers only take and release the library's own locks.
    ONCE.call_once(|| unsafe {
        libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork));
    });
}

extern "C" fn before_fork() {
    let held: Vec<Box<dyn Any>> = vec![
        Box::new(crate::world::handles::lock_for_fork()),
        Box::new(crate::object::lock_for_fork()),
        Box::new(crate::shell::lock_for_fork()),
        Box::new(crate::object::drained_for_fork()),
        Box::new(std::io::stderr().lock()),
    ];
    HELD.with(|h| *h.borrow_mut() = held);
}

/// In the parent and in the child: the forking thread lets go, in the
/// reverse order.
extern "C" fn after_fork() {
    HELD.with(|h| {
        let mut held = h.borrow_mut();
        while let Some(g) = held.pop() {
            drop(g);
        }
    });
}
