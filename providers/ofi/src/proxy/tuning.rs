//! The progress threads' settings: how an idle thread waits, how long
//! closes wait for it, and the time limits of ring entries and operations,
//! read from the environment.
use std::time::Duration;

/// Spin after activity where the process may use `SPIN_MIN_CPUS` CPUs or
/// more. With fewer, a communicating process's threads (application and
/// progress, on both sides) outnumber the cores, and a spinning thread only
/// delays the ones that would produce its work (measured: milliseconds per
/// ping-pong instead of tens of microseconds on two cores); a sleeper is
/// scheduled at once when woken.
const DEFAULT_SPIN_US: u64 = 100;
const SPIN_MIN_CPUS: usize = 4;
const DEFAULT_POLL_US: u64 = 200;
const MAX_TUNING_US: u64 = 1_000_000;
const DEFAULT_STALL_MS: u64 = 1000;
const MAX_STALL_MS: u64 = 3_600_000;
const DEFAULT_CLOSE_MS: u64 = 5000;
const MAX_CLOSE_MS: u64 = 3_600_000;
const DEFAULT_OP_TIMEOUT_MS: u64 = 10_000;
const MAX_OP_TIMEOUT_MS: u64 = 3_600_000;
const MAX_TEST_DELAY_MS: u64 = 60_000;

/// How an idle progress thread waits, and how long closes wait for it.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Polling continues this long after the last activity.
    pub spin: Duration,
    /// Longest sleep while something can only be noticed by polling.
    pub poll: Duration,
    /// How long the entry at the consumer position may stay unpublished
    /// while a later one is published before it is failed and skipped.
    pub stall: Duration,
    /// How long a close waits for a progress thread that is inside a
    /// libfabric call before it gives the thread up (see `Gate`).
    pub close: Duration,
    /// How long an RMA or atomic operation may stay without a completion
    /// from libfabric before it is failed with `-FI_ETIMEDOUT`; `None`:
    /// no limit.
    pub op_timeout: Option<Duration>,
    /// Testing only (`FI_XPU_OFI_TEST_DELAY_MS`): RMA write data (of
    /// writes and put-with-signal) reaches libfabric only this long after
    /// the entry was taken, as on a transport that places data late; other
    /// operations are not held. `None`: off.
    pub test_delay: Option<Duration>,
}

impl Tuning {
    /// `FI_XPU_OFI_SPIN_US`, `FI_XPU_OFI_POLL_US` (microseconds),
    /// `FI_XPU_OFI_STALL_MS` and `FI_XPU_OFI_CLOSE_MS` (milliseconds), read
    /// through `param`; out-of-range or malformed values keep the defaults.
    pub fn from_params(param: impl Fn(&str) -> Option<String>) -> Tuning {
        Self::from_params_cpus(param, usable_cpus())
    }

    fn from_params_cpus(param: impl Fn(&str) -> Option<String>, cpus: usize) -> Tuning {
        let default_spin = if cpus >= SPIN_MIN_CPUS {
            DEFAULT_SPIN_US
        } else {
            0
        };
        let get = |name: &str, default: u64, range: std::ops::RangeInclusive<u64>| match param(name)
        {
            None => default,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if range.contains(&n) => n,
                _ => {
                    crate::core::warn(&format!(
                        "{name}={v} is not a number in {}..={}; using {default}",
                        range.start(),
                        range.end()
                    ));
                    default
                }
            },
        };
        Tuning {
            spin: Duration::from_micros(get("FI_XPU_OFI_SPIN_US", default_spin, 0..=MAX_TUNING_US)),
            poll: Duration::from_micros(get(
                "FI_XPU_OFI_POLL_US",
                DEFAULT_POLL_US,
                1..=MAX_TUNING_US,
            )),
            stall: Duration::from_millis(get(
                "FI_XPU_OFI_STALL_MS",
                DEFAULT_STALL_MS,
                1..=MAX_STALL_MS,
            )),
            close: Duration::from_millis(get(
                "FI_XPU_OFI_CLOSE_MS",
                DEFAULT_CLOSE_MS,
                1..=MAX_CLOSE_MS,
            )),
            op_timeout: match get(
                "FI_XPU_OFI_OP_TIMEOUT_MS",
                DEFAULT_OP_TIMEOUT_MS,
                0..=MAX_OP_TIMEOUT_MS,
            ) {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
            test_delay: match get("FI_XPU_OFI_TEST_DELAY_MS", 0, 0..=MAX_TEST_DELAY_MS) {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        }
    }
}

/// CPUs this process may run on.
fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `fi_xpu_info -e` lists is what is used.
    #[test]
    fn listed_defaults_are_the_ones_used() {
        let listed = |name: &str| {
            crate::params::PARAMS
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, d, _)| d.parse::<u64>().unwrap())
                .unwrap()
        };
        assert_eq!(listed("spin_us"), DEFAULT_SPIN_US);
        assert_eq!(listed("poll_us"), DEFAULT_POLL_US);
        assert_eq!(listed("stall_ms"), DEFAULT_STALL_MS);
        assert_eq!(listed("close_ms"), DEFAULT_CLOSE_MS);
        assert_eq!(listed("op_timeout_ms"), DEFAULT_OP_TIMEOUT_MS);
        assert_eq!(listed("test_delay_ms"), 0);
        assert_eq!(
            listed("progress_threads"),
            u64::from(crate::params::DEFAULT_THREADS)
        );
    }

    fn tuning(vars: &[(&str, &str)]) -> Tuning {
        Tuning::from_params_cpus(
            |n| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            },
            16,
        )
    }

    #[test]
    fn tuning_from_params() {
        let d = tuning(&[]);
        assert_eq!(d.spin, Duration::from_micros(DEFAULT_SPIN_US));
        assert_eq!(d.poll, Duration::from_micros(DEFAULT_POLL_US));
        assert_eq!(d.stall, Duration::from_millis(DEFAULT_STALL_MS));
        assert_eq!(d.close, Duration::from_millis(DEFAULT_CLOSE_MS));
        assert_eq!(
            d.op_timeout,
            Some(Duration::from_millis(DEFAULT_OP_TIMEOUT_MS))
        );
        assert_eq!(
            tuning(&[("FI_XPU_OFI_OP_TIMEOUT_MS", "0")]).op_timeout,
            None
        );
        assert_eq!(
            tuning(&[("FI_XPU_OFI_OP_TIMEOUT_MS", "250")]).op_timeout,
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            tuning(&[("FI_XPU_OFI_OP_TIMEOUT_MS", "x")]).op_timeout,
            d.op_timeout
        );
        assert_eq!(d.test_delay, None);
        assert_eq!(
            tuning(&[("FI_XPU_OFI_TEST_DELAY_MS", "40")]).test_delay,
            Some(Duration::from_millis(40))
        );
        let t = tuning(&[
            ("FI_XPU_OFI_SPIN_US", "0"),
            ("FI_XPU_OFI_POLL_US", " 50 "),
            ("FI_XPU_OFI_STALL_MS", "20"),
            ("FI_XPU_OFI_CLOSE_MS", "300"),
        ]);
        assert_eq!(t.spin, Duration::ZERO);
        assert_eq!(t.poll, Duration::from_micros(50));
        assert_eq!(t.stall, Duration::from_millis(20));
        assert_eq!(t.close, Duration::from_millis(300));
        // A zero poll period would busy-wait; junk and out-of-range values
        // keep the defaults.
        let bad = tuning(&[
            ("FI_XPU_OFI_SPIN_US", "2000000"),
            ("FI_XPU_OFI_POLL_US", "0"),
            ("FI_XPU_OFI_STALL_MS", "-5"),
            ("FI_XPU_OFI_CLOSE_MS", "0"),
        ]);
        assert_eq!(bad.spin, d.spin);
        assert_eq!(bad.poll, d.poll);
        assert_eq!(bad.stall, d.stall);
        assert_eq!(bad.close, d.close);
        // Too few CPUs for the threads of a communicating process: no spin
        // unless asked for.
        let few = |vars: &[(&str, &str)]| {
            Tuning::from_params_cpus(
                |n| {
                    vars.iter()
                        .find(|(k, _)| *k == n)
                        .map(|(_, v)| v.to_string())
                },
                2,
            )
        };
        assert_eq!(few(&[]).spin, Duration::ZERO);
        assert_eq!(
            few(&[("FI_XPU_OFI_SPIN_US", "30")]).spin,
            Duration::from_micros(30)
        );
    }
}
