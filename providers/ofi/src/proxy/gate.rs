//! The gate around a progress thread's libfabric calls, and a closer's
//! view of it: how a closer tells a thread stuck inside libfabric from a
//! busy one, and takes the endpoints from it.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Whether a progress thread is inside a libfabric call, and whether a
/// closer gave up on it there.
///
/// A libfabric call may never return: libfabric 1.17's `shm` provider
/// guards each endpoint's receive queue with a spinlock that lives in
/// shared memory, and a peer killed while it holds that lock (pushing a
/// command into our queue) leaves it held for good, so every progress
/// call on our endpoint spins forever. A closer cannot wait for such a
/// thread, and cannot free what the thread references while the thread
/// might still touch it. The gate settles it: the thread touches the
/// endpoints' memory only while it owns the gate (`OUT`); a closer that
/// saw the thread inside the same call (`IN`, same call number) for the
/// whole close limit takes the gate (`LOST`) and may then release
/// everything; the thread, should its call ever return, sees `LOST` and
/// parks for good without touching anything.
///
/// The word holds the call number above the two state bits, so that a
/// closer can tell one long call from many short ones.
pub struct Gate(pub(super) AtomicU64);

pub(super) const GATE_OUT: u64 = 0;
pub(super) const GATE_IN: u64 = 1;
pub(super) const GATE_LOST: u64 = 2;
pub(super) const GATE_STATE: u64 = 3;

impl Gate {
    pub fn new() -> Gate {
        Gate(AtomicU64::new(GATE_OUT))
    }

    /// Runs one libfabric call with the gate open to closers.
    pub fn call<T>(&self, f: impl FnOnce() -> T) -> T {
        // Only this thread changes the word while it is OUT.
        let inside = (self.0.load(Ordering::Relaxed) & !GATE_STATE).wrapping_add(4) | GATE_IN;
        // Release: what the thread wrote before the call is visible to a
        // closer that takes the gate.
        self.0.store(inside, Ordering::Release);
        let r = f();
        if self
            .0
            .compare_exchange(
                inside,
                inside & !GATE_STATE,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // Given up while inside the call: what this thread references
            // may be gone. It holds its endpoints (and their locks) until
            // the process ends.
            loop {
                std::thread::park();
            }
        }
        r
    }

    pub fn lost(&self) -> bool {
        self.0.load(Ordering::Acquire) & GATE_STATE == GATE_LOST
    }
}

/// A closer's view of a progress thread: the gate word it last saw and
/// since when.
pub struct Watch {
    pub(super) seen: u64,
    pub(super) since: Instant,
}

impl Watch {
    pub fn new() -> Watch {
        Watch {
            seen: u64::MAX,
            since: Instant::now(),
        }
    }
}
