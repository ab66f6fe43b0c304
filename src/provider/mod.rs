//! Provider plugins: where they are searched, how each is checked, and the
//! handle the rest of the core uses to call one.
mod elf;
pub(crate) mod loader;
pub(crate) mod plugin_file;

pub use loader::{check_descriptor, providers, Provider, Providers, Skipped, DEFAULT_PROVIDER};

/// Calls a provider entry point that the loader has checked is present.
/// Expands to the call's return value. Callers pass plain values (handles,
/// pointers to locals, lengths), never expressions that need `unsafe` of
/// their own; that is why clippy's `macro_metavars_in_unsafe` is allowed for
/// the crate.
#[macro_export]
macro_rules! prov_call {
    ($prov:expr, $entry:ident ( $($arg:expr),* $(,)? )) => {{
        let f = $prov.desc().$entry.expect(concat!("loader checked ", stringify!($entry)));
        // SAFETY: the loader checked that this entry point is set; the
        // arguments are handles this provider returned and buffers the core
        // validated, as the plugin ABI requires.
        unsafe { f($($arg),*) }
    }};
}
