//! The launcher's time: the monotonic clock device code reads (and the
//! GPU-like mode stamps its states with), and how long a waiting thread
//! spins before it sleeps.
use crate::fork::Made;
use std::time::{Duration, Instant};

/// How long a work item waiting at a barrier, a kept thread waiting for
/// its next work item, and a launch waiting for its work items look for
/// the change (letting other threads run between looks) before they sleep.
/// A sleep and its wake-up cost tens of microseconds on a virtual machine;
/// the launches and barriers of a kernel usually follow each other closer
/// than that.
pub(super) const SPIN: Duration = Duration::from_micros(50);

/// Nanoseconds on a monotonic clock (its origin is the first call).
pub fn clock_ns() -> u64 {
    static EPOCH: Made<Instant> = Made::new();
    let ns = EPOCH.get_or_make(Instant::now).elapsed().as_nanos();
    u64::try_from(ns).unwrap_or(u64::MAX)
}
