//! A provider's handle for one of its objects, as the core keeps it: the
//! loader gives the provider's own, the registry its objects'.
use fi_xpu_abi::fi_xpu_prov_handle;

/// A provider's handle for one of its objects (`fi_xpu_prov_handle`), or
/// NULL where the plugin ABI allows none (no context). Only a provider
/// makes one (through an out-argument of an open call, or `init`); the
/// core keeps it and passes it back unchanged.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(pub(super) fi_xpu_prov_handle);

impl Handle {
    /// No object (a host CQ's or counter's context, host memory's).
    pub const NULL: Handle = Handle(std::ptr::null_mut());

    /// The handle a provider wrote, as the registry stored it.
    pub(crate) fn from_raw(raw: fi_xpu_prov_handle) -> Handle {
        Handle(raw)
    }

    pub fn as_ptr(self) -> fi_xpu_prov_handle {
        self.0
    }
}
