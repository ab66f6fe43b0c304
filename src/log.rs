//! Logging to stderr, one line per event, filtered by `FI_XPU_LOG_LEVEL`
//! (`warn` (default), `info`, `debug`, or `none`).
use crate::provider::env;
use fi_xpu_abi::{FI_XPU_LOG_DEBUG, FI_XPU_LOG_INFO, FI_XPU_LOG_WARN};
use std::io::Write;
use std::sync::OnceLock;

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

/// Writes `fi_xpu:<source>:<level>: <msg>` as one line.
pub fn write(level: i32, source: &str, msg: &str) {
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
