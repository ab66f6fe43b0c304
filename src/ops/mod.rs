//! The library's operations in safe Rust, below the C API: what an
//! `extern "C"` function does once its arguments are checked and
//! converted. `capi` and `world` both call here, so the library never
//! calls its own C functions.
pub mod memory;
pub mod objects;

use crate::provider::Providers;
use fi_xpu_abi::fi_ops;

/// What the C API hands to code that makes objects on its behalf (a
/// world's lanes): the `fi_ops` their shells point at, and its way to the
/// loaded providers.
#[derive(Clone, Copy)]
pub struct Face {
    pub fid_ops: &'static fi_ops,
    pub providers: fn() -> &'static Providers,
}
