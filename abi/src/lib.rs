//! C ABI types of fi_xpu, shared by the core library, its provider plugins and
//! the generated public headers.
//!
//! Nothing here has behaviour but [`error`]: `#[repr(C)]` layouts and
//! constants, and the one error type every crate returns (`Error`).
//! `libfabric` mirrors the few libfabric types the headers take from
//! `<rdma/fabric.h>` (they are never emitted by cbindgen), `public` is what
//! `fi_xpu.h` declares, and `provider` is the plugin ABI of
//! `fi_xpu/provider.h`. `version` holds the constants device code reads
//! (`fi_xpu/version.h`), `wr` the prepared work request (`fi_xpu/wr.h`).

pub mod error;
pub mod launcher;
pub mod libfabric;
pub mod provider;
pub mod public;
pub mod version;
pub mod world;
pub mod wr;

pub use error::Error;
pub use launcher::*;
pub use libfabric::*;
pub use provider::*;
pub use public::*;
pub use version::*;
pub use world::*;
pub use wr::*;
