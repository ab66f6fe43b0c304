//! Logging to stderr, one line per event:
//!
//! ```text
//! fi_xpu:<pid>:<host>:<seconds.microseconds>:<source>:<level>: <message>
//! ```
//!
//! The pid, host and wall-clock time tell apart the ranks of one job that
//! share a terminal; `<source>` is `core` or the provider's name. Filtered
//! by `FI_XPU_LOG_LEVEL` (`warn` (default), `info`, `debug`, or `none`, in
//! any case; another value is warned about once) and
//! `FI_XPU_LOG_PROV` (`shm,core` keeps only those sources, `^ofi` drops
//! those).
use crate::filter::Filter;
use crate::fork::Made;
use crate::param;
use fi_xpu_abi::{FI_XPU_LOG_DEBUG, FI_XPU_LOG_INFO, FI_XPU_LOG_WARN};
use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// A `FI_XPU_LOG_LEVEL` value as a level, whatever its case; `None` for
/// a value that names no level.
fn parse_level(value: &str) -> Option<i32> {
    match value.trim().to_ascii_lowercase().as_str() {
        "none" | "0" => Some(0),
        "" | "warn" | "warning" | "1" => Some(FI_XPU_LOG_WARN),
        "info" | "2" => Some(FI_XPU_LOG_INFO),
        "debug" | "trace" | "3" => Some(FI_XPU_LOG_DEBUG),
        _ => None,
    }
}

fn threshold() -> i32 {
    static LEVEL: Made<(i32, Option<String>)> = Made::new();
    let (level, unknown) = LEVEL.get_or_make(|| {
        let value = param::core(param::LOG_LEVEL);
        match value.as_deref().map(parse_level) {
            None => (FI_XPU_LOG_WARN, None),
            Some(Some(level)) => (level, None),
            Some(None) => (FI_XPU_LOG_WARN, value),
        }
    });
    // Said once the level is set: the warning itself asks for the level.
    static SAID: AtomicBool = AtomicBool::new(false);
    if let Some(v) = unknown {
        if !SAID.swap(true, Ordering::AcqRel) {
            crate::warn!(
                "{}={v:?} is not a level (none, warn, info or debug, in any case): logging warnings",
                param::LOG_LEVEL
            );
        }
    }
    *level
}

fn source_filter() -> Option<&'static Filter> {
    static FILTER: Made<Option<Filter>> = Made::new();
    FILTER
        .get_or_make(|| Filter::parse(&param::core(param::LOG_PROV)?))
        .as_ref()
}

/// The host name, once per process.
fn host() -> &'static str {
    static HOST: Made<String> = Made::new();
    HOST.get_or_make(|| {
        // gethostname(2) is uname's nodename on Linux.
        let name = fi_xpu_os::rustix::system::uname();
        let name = name.nodename().to_bytes();
        if name.is_empty() {
            return String::from("?");
        }
        String::from_utf8_lossy(name).into_owned()
    })
    .as_str()
}

pub fn enabled(level: i32) -> bool {
    level <= threshold()
}

/// One log line for `source` at `level`, without the final newline.
pub fn format_line(level: i32, source: &str, msg: &str, now: SystemTime) -> String {
    let name = match level {
        FI_XPU_LOG_WARN => "warn",
        FI_XPU_LOG_INFO => "info",
        _ => "debug",
    };
    let t = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    format!(
        "fi_xpu:{}:{}:{}.{:06}:{source}:{name}: {}",
        std::process::id(),
        host(),
        t.as_secs(),
        t.subsec_micros(),
        msg.trim_end()
    )
}

/// Messages of info level and above kept while `capture` runs, as
/// (source, message).
static CAPTURED: Mutex<Option<Vec<(String, String)>>> = Mutex::new(None);
static CAPTURING: AtomicBool = AtomicBool::new(false);

/// Runs `f` and returns, with its result, the messages of info level and
/// above logged meanwhile, whatever `FI_XPU_LOG_LEVEL` and
/// `FI_XPU_LOG_PROV` print (for `fi_xpu_info`, which shows what providers
/// say when they open a domain).
pub fn capture<R>(f: impl FnOnce() -> R) -> (R, Vec<(String, String)>) {
    *CAPTURED.lock().unwrap_or_else(|e| e.into_inner()) = Some(Vec::new());
    CAPTURING.store(true, Ordering::Release);
    let r = f();
    CAPTURING.store(false, Ordering::Release);
    let got = CAPTURED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_default();
    (r, got)
}

/// Lines `source` logged on this thread while `hold` ran, not yet written.
#[must_use = "held lines are lost unless released"]
pub struct Held {
    source: String,
    lines: Vec<(i32, String)>,
}

thread_local! {
    /// The lines this thread holds back, and whose.
    static HELD: RefCell<Option<Held>> = const { RefCell::new(None) };
}

impl Held {
    /// Writes the held lines, warnings as info lines when `demote` (what a
    /// provider says about a machine it has nothing to serve on is no
    /// warning unless the user asked for that provider).
    pub fn release(self, demote: bool) {
        for (level, msg) in self.lines {
            let level = if demote {
                level.max(FI_XPU_LOG_INFO)
            } else {
                level
            };
            write(level, &self.source, &msg);
        }
    }
}

/// Runs `f`, holding back the lines `source` logs on this thread meanwhile
/// (a plugin's `init`), so the caller can decide their level from `f`'s
/// outcome.
pub fn hold<R>(source: &str, f: impl FnOnce() -> R) -> (R, Held) {
    let fresh = Held {
        source: source.to_string(),
        lines: Vec::new(),
    };
    HELD.with(|h| *h.borrow_mut() = Some(fresh));
    let r = f();
    let held = HELD.with(|h| h.borrow_mut().take()).unwrap_or(Held {
        source: source.to_string(),
        lines: Vec::new(),
    });
    (r, held)
}

/// Whether this thread holds `source`'s lines; if so, `msg` is kept.
fn held(level: i32, source: &str, msg: &str) -> bool {
    HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(held) if held.source == source => {
            held.lines.push((level, msg.to_string()));
            true
        }
        _ => false,
    })
}

/// Writes one line, if `level` and `source` pass the filters.
pub fn write(level: i32, source: &str, msg: &str) {
    if held(level, source, msg) {
        return;
    }
    if level <= FI_XPU_LOG_INFO && CAPTURING.load(Ordering::Acquire) {
        if let Some(v) = CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            v.push((source.to_string(), msg.trim_end().to_string()));
        }
    }
    if !enabled(level) || source_filter().is_some_and(|f| !f.allows(source)) {
        return;
    }
    let line = format_line(level, source, msg, SystemTime::now()) + "\n";
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::write(fi_xpu_abi::FI_XPU_LOG_WARN, "core", &format!($($arg)*)) };
}
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::write(fi_xpu_abi::FI_XPU_LOG_INFO, "core", &format!($($arg)*)) };
}
#[macro_export]
macro_rules! debug {
    ($($arg:tt)*) => { $crate::log::write(fi_xpu_abi::FI_XPU_LOG_DEBUG, "core", &format!($($arg)*)) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn levels_in_any_case() {
        assert_eq!(parse_level("DEBUG"), Some(FI_XPU_LOG_DEBUG));
        assert_eq!(parse_level(" Info "), Some(FI_XPU_LOG_INFO));
        assert_eq!(parse_level("Warn"), Some(FI_XPU_LOG_WARN));
        assert_eq!(parse_level("NONE"), Some(0));
        assert_eq!(parse_level("loud"), None);
        assert_eq!(parse_level("4"), None);
    }

    #[test]
    fn line_carries_pid_host_and_time() {
        let t = UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_042);
        let line = format_line(FI_XPU_LOG_WARN, "shm", "no peer\n", t);
        assert_eq!(
            line,
            format!(
                "fi_xpu:{}:{}:1700000000.000042:shm:warn: no peer",
                std::process::id(),
                host()
            )
        );
        assert!(!host().is_empty());
    }

    #[test]
    fn held_lines_are_kept_for_their_source_only() {
        let ((), held) = hold("plug", || {
            write(FI_XPU_LOG_WARN, "plug", "no device");
            write(FI_XPU_LOG_DEBUG, "plug", "probe");
        });
        assert_eq!(held.source, "plug");
        assert_eq!(
            held.lines,
            [
                (FI_XPU_LOG_WARN, "no device".to_string()),
                (FI_XPU_LOG_DEBUG, "probe".to_string())
            ]
        );
        // Nothing is held once `hold` returned.
        assert!(!super::held(FI_XPU_LOG_WARN, "plug", "later"));
        held.release(true);
    }
}
