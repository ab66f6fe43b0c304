//! Logging to stderr, one line per event, filtered by `FI_XPU_LOG_LEVEL`
//! (`warn` (default), `info`, `debug`, or `none`).
use crate::provider::env;
use fi_xpu_abi::{FI_XPU_LOG_DEBUG, FI_XPU_LOG_INFO, FI_XPU_LOG_WARN};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

fn threshold() -> i32 {
    static LEVEL: OnceLock<i32> = OnceLock::new();
    *LEVEL.get_or_init(|| match env::var("FI_XPU_LOG_LEVEL").as_deref() {
        Some("none") | Some("0") => 0,
        Some("info") | Some("2") => FI_XPU_LOG_INFO,
        Some("debug") | Some("trace") | Some("3") => FI_XPU_LOG_DEBUG,
        _ => FI_XPU_LOG_WARN,
    })
}

pub fn enabled(level: i32) -> bool {
    level <= threshold()
}

/// Messages of info level and above kept while `capture` runs, as
/// (source, message).
static CAPTURED: Mutex<Option<Vec<(String, String)>>> = Mutex::new(None);
static CAPTURING: AtomicBool = AtomicBool::new(false);

/// Runs `f` and returns, with its result, the messages of info level and
/// above logged meanwhile, whatever `FI_XPU_LOG_LEVEL` prints (for
/// `fi_xpu_info`, which shows what providers say when they open a domain).
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

/// Writes `fi_xpu:<source>:<level>: <msg>` as one line.
pub fn write(level: i32, source: &str, msg: &str) {
    if level <= FI_XPU_LOG_INFO && CAPTURING.load(Ordering::Acquire) {
        if let Some(v) = CAPTURED.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            v.push((source.to_string(), msg.trim_end().to_string()));
        }
    }
    if !enabled(level) {
        return;
    }
    let name = match level {
        FI_XPU_LOG_WARN => "warn",
        FI_XPU_LOG_INFO => "info",
        _ => "debug",
    };
    let line = format!("fi_xpu:{source}:{name}: {}\n", msg.trim_end());
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
