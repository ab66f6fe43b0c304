//! Provider plugins: where they are searched, how each is checked, and the
//! handle the rest of the core uses to call one.
mod calls;
mod elf;
mod handle;
pub(crate) mod loader;
pub(crate) mod plugin_file;

pub use handle::Handle;
pub use loader::{check_descriptor, providers, Provider, Providers, Skipped, DEFAULT_PROVIDER};
