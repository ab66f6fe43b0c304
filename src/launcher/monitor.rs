//! A value guarded by the C library's mutex, with a condition variable.
//!
//! The pool hands work items to its threads and hears back from them
//! through these rather than through `std::sync`, whose futex-based locks
//! are invisible to tools that follow pthread calls (ThreadSanitizer,
//! helgrind): through a pthread mutex they see a launch's writes ordered
//! before its work items and the work items' writes before the launch
//! returns, as they did when every work item was a thread created and
//! joined for its launch.
use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::time::Duration;

/// Lives where it was first used (in a static, or behind an `Arc`): the C
/// library's mutex and condition variable must not move.
pub(super) struct Monitor<T> {
    mutex: UnsafeCell<libc::pthread_mutex_t>,
    cond: UnsafeCell<libc::pthread_cond_t>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Guard`, with the mutex held;
// the mutex and condition variable are made for use from many threads.
unsafe impl<T: Send> Send for Monitor<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Monitor<T> {}

impl<T> Monitor<T> {
    pub(super) const fn new(value: T) -> Monitor<T> {
        Monitor {
            mutex: UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER),
            cond: UnsafeCell::new(libc::PTHREAD_COND_INITIALIZER),
            value: UnsafeCell::new(value),
        }
    }

    pub(super) fn lock(&self) -> Guard<'_, T> {
        // SAFETY: the mutex is initialised and stays in place while borrowed;
        // a default mutex only fails to lock on a deadlock by its owner,
        // which `Guard` (one per lock) rules out.
        unsafe { libc::pthread_mutex_lock(self.mutex.get()) };
        Guard {
            m: self,
            _locking_thread: PhantomData,
        }
    }

    /// Unlocks a mutex whose guard was forgotten (`std::mem::forget`).
    ///
    /// # Safety
    /// The calling thread locked it, through a guard it forgot since.
    pub(super) unsafe fn unlock_forgotten(&self) {
        // SAFETY: the caller holds the lock (the contract above).
        unsafe { libc::pthread_mutex_unlock(self.mutex.get()) };
    }

    /// Wakes every thread waiting in `Guard::wait` or `wait_for`.
    pub(super) fn notify_all(&self) {
        // SAFETY: the condition variable is initialised and in place.
        unsafe { libc::pthread_cond_broadcast(self.cond.get()) };
    }
}

impl<T> Drop for Monitor<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: nobody holds the mutex or waits.
        unsafe {
            libc::pthread_cond_destroy(self.cond.get());
            libc::pthread_mutex_destroy(self.mutex.get());
        }
    }
}

/// The monitor's value, with its mutex held until the guard is dropped.
/// Not `Send`: the thread that locked the mutex unlocks it.
pub(super) struct Guard<'a, T> {
    m: &'a Monitor<T>,
    _locking_thread: PhantomData<*const ()>,
}

impl<T> Guard<'_, T> {
    /// Releases the mutex until `notify_all` (or a spurious wake-up).
    pub(super) fn wait(&mut self) {
        // SAFETY: this thread holds the mutex (the guard), both are in place.
        unsafe { libc::pthread_cond_wait(self.m.cond.get(), self.m.mutex.get()) };
    }

    /// As `wait`, for at most `limit` (on the real-time clock, the
    /// condition variable's default). True when the time ran out.
    pub(super) fn wait_for(&mut self, limit: Duration) -> bool {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `now` is a valid timespec to fill.
        unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) };
        let at = Duration::new(now.tv_sec as u64, now.tv_nsec as u32).saturating_add(limit);
        let deadline = libc::timespec {
            tv_sec: at.as_secs() as libc::time_t,
            tv_nsec: at.subsec_nanos() as _,
        };
        // SAFETY: as in `wait`; `deadline` is a valid timespec.
        let rc = unsafe {
            libc::pthread_cond_timedwait(self.m.cond.get(), self.m.mutex.get(), &deadline)
        };
        rc == libc::ETIMEDOUT
    }
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the mutex is held: nobody else reaches the value.
        unsafe { &*self.m.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and the guard is borrowed mutably.
        unsafe { &mut *self.m.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        // SAFETY: this thread locked the mutex when it made the guard.
        unsafe { libc::pthread_mutex_unlock(self.m.mutex.get()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn waits_until_notified_or_the_time_runs_out() {
        let m = Arc::new(Monitor::new(0u32));
        let t = {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                let mut g = m.lock();
                while *g == 0 {
                    g.wait();
                }
                *g
            })
        };
        std::thread::sleep(Duration::from_millis(10));
        *m.lock() = 7;
        m.notify_all();
        assert_eq!(t.join().unwrap(), 7);

        let start = Instant::now();
        let mut g = m.lock();
        while !g.wait_for(Duration::from_millis(30)) {}
        assert!(start.elapsed() >= Duration::from_millis(30));
        assert_eq!(*g, 7);
    }
}
