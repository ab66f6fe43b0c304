//! The parameters the shm provider defines and how it reads them.
use crate::core;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const DEFAULT_HEAP: u64 = 8 << 20;

/// The parameters shm defines (name, default, description); `init`
/// registers them with the core.
pub const PARAMS: [(&str, &str, &str); 4] = [
    (
        "heap_size",
        "8388608",
        "bytes of shared memory per XPU context for registrations, CQs, counters and inboxes (at least 1048576)",
    ),
    (
        "test_delay_us",
        "0",
        "TESTING ONLY: microseconds between the 64-byte pieces of a put-with-signal's data, placed last piece first, so that ordering tests can fail (0: off)",
    ),
    (
        "host_progress",
        "0",
        "1: every domain runs a host progress agent, so that streamed and rendezvous sends complete while no kernel runs",
    ),
    (
        "scope",
        "auto",
        "sys: device code uses system scope for every shared object; auto: device scope for what a kernel writes into a peer on its own device, with both heaps in that device's memory",
    ),
];

/// Whether `FI_XPU_SHM_SCOPE=sys` forces system scope everywhere; any
/// other value than `sys` and `auto` is logged and taken as `auto`.
pub fn scope_forced_sys() -> bool {
    let v = fi_xpu_prov_sdk::services::param("scope").unwrap_or_default();
    let v = v.trim();
    if v.eq_ignore_ascii_case("sys") {
        return true;
    }
    // A flag, not a `Once`: a fork while another thread said it leaves no
    // "running" state for the child to wait on.
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !v.is_empty() && !v.eq_ignore_ascii_case("auto") && !WARNED.swap(true, Ordering::Relaxed) {
        core::warn(&format!(
            "FI_XPU_SHM_SCOPE={v}: neither sys nor auto; using auto"
        ));
    }
    false
}

/// Whether `FI_XPU_SHM_HOST_PROGRESS` asks every domain for an agent.
pub fn host_progress() -> bool {
    fi_xpu_prov_sdk::services::param("host_progress").is_some_and(|s| s.trim() == "1")
}

/// The testing-only delay of put-with-signal data (`test_delay_us`), read
/// once per process, in nanoseconds; at most one second per piece.
pub(super) fn test_delay_ns() -> u64 {
    // An atomic, not a `OnceLock`, for the reason `scope_forced_sys` gives;
    // u64::MAX: not read yet.
    static DELAY: AtomicU64 = AtomicU64::new(u64::MAX);
    let ns = DELAY.load(Ordering::Relaxed);
    if ns != u64::MAX {
        return ns;
    }
    let ns = fi_xpu_prov_sdk::services::param("test_delay_us")
        .and_then(|s| s.trim().parse::<u64>().ok())
        .map_or(0, |us| us.min(1_000_000) * 1000);
    DELAY.store(ns, Ordering::Relaxed);
    ns
}

pub(super) fn heap_size() -> u64 {
    let v =
        fi_xpu_prov_sdk::services::param("heap_size").and_then(|s| s.trim().parse::<u64>().ok());
    v.filter(|&v| v >= 1 << 20).unwrap_or(DEFAULT_HEAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_default_is_the_one_used() {
        assert_eq!(PARAMS[0].1, DEFAULT_HEAP.to_string());
    }
}
