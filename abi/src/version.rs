//! The constants device code reads (`fi_xpu/version.h`, generated): the
//! library version and the validity words of exported handles. The device
//! headers include that file, never the host header `fi_xpu.h`.

pub const FI_XPU_MAJOR_VERSION: u32 = 0;
pub const FI_XPU_MINOR_VERSION: u32 = 1;
pub const FI_XPU_PATCH_VERSION: u32 = 0;
/// `FI_XPU_VERSION(FI_XPU_MAJOR_VERSION, FI_XPU_MINOR_VERSION)`, what a caller
/// passes to `fi_xpu_getinfo`.
pub const FI_XPU_API_VERSION: u32 = (FI_XPU_MAJOR_VERSION << 16) | FI_XPU_MINOR_VERSION;

/// Validity word of an exported handle's device block (see
/// `fi_xpu/device_handle.h`): magic, class, state, and the exporting
/// library's `FI_XPU_API_VERSION` in the low 32 bits. Device code accepts
/// only the live word of the class it expects, from its own version.
pub const FI_XPU_HANDLE_MAGIC: u64 = 0x4658_0000_0000_0000;
pub const FI_XPU_HANDLE_EP: u64 = 0x0100_0000_0000;
pub const FI_XPU_HANDLE_CQ: u64 = 0x0200_0000_0000;
pub const FI_XPU_HANDLE_CNTR: u64 = 0x0300_0000_0000;
pub const FI_XPU_HANDLE_LIVE: u64 = 0x4c_0000_0000;
/// A closed object's block: kept mapped, never accepted again.
pub const FI_XPU_HANDLE_DEAD: u64 = 0x44_0000_0000;

/// The validity word this library writes for `class` in `state`.
pub const fn fi_xpu_handle_word(class: u64, state: u64) -> u64 {
    FI_XPU_HANDLE_MAGIC | class | state | FI_XPU_API_VERSION as u64
}
