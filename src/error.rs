//! Error values: the one error type shared with the provider SDK and the
//! providers (`fi_xpu_abi::error`), re-exported under the core's names.
pub use fi_xpu_abi::error::{strerror, strerror_c, Error, Result};
