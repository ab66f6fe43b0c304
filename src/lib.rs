//! fi_xpu: accelerator-initiated communication behind a stable C ABI.
//!
//! The crate is organised as the C API sees it: `capi` is the thin
//! `extern "C"` layer; everything it calls is safe Rust in `object`
//! (the registry of live host objects), `memory` (alloc/import backends),
//! `provider` (the plugin loader) and `launcher` (the host XPU).

pub mod bootstrap;
pub mod capi;
mod dl;
pub(crate) mod env;
pub mod error;
pub(crate) mod filter;
pub mod flags;
mod fork;
pub mod launcher;
pub mod log;
pub mod memory;
pub mod object;
pub mod ops;
pub mod param;
pub mod provider;
pub mod shell;
pub mod world;

pub use error::{Error, Result};
pub use fi_xpu_abi as abi;
