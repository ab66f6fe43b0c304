//! The library's operations in safe Rust, below the C API: what an
//! `extern "C"` function does once its arguments are checked and
//! converted. `capi` and `world` both call here, so the library never
//! calls its own C functions.
pub mod memory;
