//! The subset of the Level Zero API (`libze_loader.so.1`) the ZE memory
//! backend calls, resolved at run time: types, constants and entry points
//! as `ze_api.h` declares them (checked against it by
//! `layout_matches_ze_api_h` below), and the mapping of `ze_result_t` to
//! libfabric error numbers.
#![allow(non_camel_case_types, non_snake_case)]
use crate::dl::entry_points;
use crate::error::Error;
use crate::memory::vendor::{self, Once, Vendor};
use fi_xpu_abi::errno::*;
use std::ffi::{c_int, c_void};

pub type ze_result_t = u32;
pub type Handle = *mut c_void;

pub const ZE_RESULT_SUCCESS: ze_result_t = 0;
pub const ZE_RESULT_ERROR_DEVICE_LOST: ze_result_t = 0x7000_0001;
pub const ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY: ze_result_t = 0x7000_0002;
pub const ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY: ze_result_t = 0x7000_0003;
pub const ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS: ze_result_t = 0x7001_0000;
pub const ZE_RESULT_ERROR_UNINITIALIZED: ze_result_t = 0x7800_0001;
pub const ZE_RESULT_ERROR_UNSUPPORTED_VERSION: ze_result_t = 0x7800_0002;
pub const ZE_RESULT_ERROR_UNSUPPORTED_FEATURE: ze_result_t = 0x7800_0003;
pub const ZE_RESULT_ERROR_INVALID_ARGUMENT: ze_result_t = 0x7800_0004;
pub const ZE_RESULT_ERROR_INVALID_NULL_HANDLE: ze_result_t = 0x7800_0005;
pub const ZE_RESULT_ERROR_INVALID_NULL_POINTER: ze_result_t = 0x7800_0007;
pub const ZE_RESULT_ERROR_INVALID_SIZE: ze_result_t = 0x7800_0008;
pub const ZE_RESULT_ERROR_UNSUPPORTED_SIZE: ze_result_t = 0x7800_0009;
pub const ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT: ze_result_t = 0x7800_000a;

pub const ZE_INIT_FLAG_GPU_ONLY: u32 = 1;
pub const ZE_STRUCTURE_TYPE_CONTEXT_DESC: u32 = 0xd;
pub const ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC: u32 = 0x15;
pub const ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC: u32 = 0x16;
pub const ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES: u32 = 0x17;
pub const ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC: u32 = 0x18;
pub const ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD: u32 = 0x19;
pub const ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD: u32 = 0x1a;
pub const ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF: u32 = 1 << 1;

#[repr(C)]
pub struct ze_context_desc_t {
    pub stype: u32,
    pub pNext: *const c_void,
    pub flags: u32,
}

#[repr(C)]
pub struct ze_device_mem_alloc_desc_t {
    pub stype: u32,
    pub pNext: *const c_void,
    pub flags: u32,
    pub ordinal: u32,
}

#[repr(C)]
pub struct ze_host_mem_alloc_desc_t {
    pub stype: u32,
    pub pNext: *const c_void,
    pub flags: u32,
}

#[repr(C)]
pub struct ze_memory_allocation_properties_t {
    pub stype: u32,
    pub pNext: *mut c_void,
    pub type_: u32,
    pub id: u64,
    pub pageSize: u64,
}

/// `ze_external_memory_export_desc_t`.
#[repr(C)]
pub struct ze_external_memory_export_desc_t {
    pub stype: u32,
    pub pNext: *const c_void,
    pub flags: u32,
}

/// `ze_external_memory_import_fd_t` and `ze_external_memory_export_fd_t`
/// (one layout).
#[repr(C)]
pub struct ze_external_memory_fd_t {
    pub stype: u32,
    pub pNext: *const c_void,
    pub flags: u32,
    pub fd: c_int,
}

/// The soname the backend opens.
pub const LIBRARY: &str = "libze_loader.so.1";

entry_points! {
    /// Entry points of the loader.
    pub struct Api -> ze_result_t {
        init = "zeInit": fn(u32);
        driver_get = "zeDriverGet": fn(*mut u32, *mut Handle);
        device_get = "zeDeviceGet": fn(Handle, *mut u32, *mut Handle);
        context_create = "zeContextCreate": fn(Handle, *const ze_context_desc_t, *mut Handle);
        context_destroy = "zeContextDestroy": fn(Handle);
        mem_alloc_device = "zeMemAllocDevice":
            fn(Handle, *const ze_device_mem_alloc_desc_t, usize, usize, Handle, *mut *mut c_void);
        mem_alloc_host = "zeMemAllocHost":
            fn(Handle, *const ze_host_mem_alloc_desc_t, usize, usize, *mut *mut c_void);
        mem_free = "zeMemFree": fn(Handle, *mut c_void);
        mem_get_alloc_properties = "zeMemGetAllocProperties":
            fn(Handle, *const c_void, *mut ze_memory_allocation_properties_t, *mut Handle);
        mem_get_address_range = "zeMemGetAddressRange":
            fn(Handle, *const c_void, *mut *mut c_void, *mut usize);
    }
}

/// The Level Zero loader, as the vendor backends' shared code opens it.
pub enum Lib {}

pub type Driver = vendor::Driver<Lib>;

impl Vendor for Lib {
    type Status = ze_result_t;
    type Api = Api;
    const SUCCESS: ze_result_t = ZE_RESULT_SUCCESS;
    const LIBRARY: &'static str = LIBRARY;
    const IFACE: &'static str = "FI_HMEM_ZE";
    const KIND: &'static str = "Level Zero loader";
    const TAG: &'static str = "ze";
    const INIT: &'static str = "zeInit";
    const INIT_HINT: &'static str = " (no GPU driver?)";

    fn once() -> &'static Once<Lib> {
        static DRIVER: Once<Lib> = Once::new();
        &DRIVER
    }

    fn init(api: &Api) -> ze_result_t {
        // SAFETY: zeInit takes flags.
        unsafe { (api.init)(ZE_INIT_FLAG_GPU_ONLY) }
    }

    fn error(r: ze_result_t) -> Error {
        Error::new(match r {
            ZE_RESULT_ERROR_INVALID_ARGUMENT
            | ZE_RESULT_ERROR_INVALID_NULL_HANDLE
            | ZE_RESULT_ERROR_INVALID_NULL_POINTER
            | ZE_RESULT_ERROR_INVALID_SIZE
            | ZE_RESULT_ERROR_UNSUPPORTED_SIZE
            | ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT => FI_EINVAL,
            ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY | ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY => FI_ENOMEM,
            ZE_RESULT_ERROR_UNINITIALIZED | ZE_RESULT_ERROR_DEVICE_LOST => FI_ENODEV,
            ZE_RESULT_ERROR_UNSUPPORTED_VERSION => FI_ENOSYS,
            ZE_RESULT_ERROR_UNSUPPORTED_FEATURE => FI_EOPNOTSUPP,
            ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS => FI_EPERM,
            _ => FI_EIO,
        })
    }

    /// `ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY (0x70000003)`, or the number
    /// alone (the loader names no status).
    fn name(r: ze_result_t, _: Option<&str>) -> String {
        let n = match r {
            ZE_RESULT_ERROR_DEVICE_LOST => "ZE_RESULT_ERROR_DEVICE_LOST",
            ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY => "ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY",
            ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY => "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
            ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS => "ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS",
            ZE_RESULT_ERROR_UNINITIALIZED => "ZE_RESULT_ERROR_UNINITIALIZED",
            ZE_RESULT_ERROR_UNSUPPORTED_VERSION => "ZE_RESULT_ERROR_UNSUPPORTED_VERSION",
            ZE_RESULT_ERROR_UNSUPPORTED_FEATURE => "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
            ZE_RESULT_ERROR_INVALID_ARGUMENT => "ZE_RESULT_ERROR_INVALID_ARGUMENT",
            ZE_RESULT_ERROR_INVALID_NULL_HANDLE => "ZE_RESULT_ERROR_INVALID_NULL_HANDLE",
            ZE_RESULT_ERROR_INVALID_NULL_POINTER => "ZE_RESULT_ERROR_INVALID_NULL_POINTER",
            ZE_RESULT_ERROR_INVALID_SIZE => "ZE_RESULT_ERROR_INVALID_SIZE",
            ZE_RESULT_ERROR_UNSUPPORTED_SIZE => "ZE_RESULT_ERROR_UNSUPPORTED_SIZE",
            ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT => "ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT",
            _ => return format!("ze_result_t {r:#x}"),
        };
        format!("{n} ({r:#x})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::header_check::{consts, missing, offsets, sizes};
    use std::mem::{offset_of, size_of};

    /// Every constant, layout and entry-point prototype above, as
    /// `ze_api.h` (libze-dev) has it.
    #[test]
    fn layout_matches_ze_api_h() {
        if missing("/usr/include/level_zero/ze_api.h", "libze-dev") {
            return;
        }
        let consts = [
            &consts![
                ZE_RESULT_ERROR_DEVICE_LOST,
                ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY,
                ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY,
                ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS,
                ZE_RESULT_ERROR_UNINITIALIZED,
                ZE_RESULT_ERROR_UNSUPPORTED_VERSION,
                ZE_RESULT_ERROR_UNSUPPORTED_FEATURE,
                ZE_RESULT_ERROR_INVALID_ARGUMENT,
                ZE_RESULT_ERROR_INVALID_NULL_HANDLE,
                ZE_RESULT_ERROR_INVALID_NULL_POINTER,
                ZE_RESULT_ERROR_INVALID_SIZE,
                ZE_RESULT_ERROR_UNSUPPORTED_SIZE,
                ZE_RESULT_ERROR_UNSUPPORTED_ALIGNMENT,
                ZE_INIT_FLAG_GPU_ONLY,
                ZE_STRUCTURE_TYPE_CONTEXT_DESC,
                ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC,
                ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC,
                ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES,
                ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC,
                ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD,
                ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD,
                ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF
            ][..],
            &sizes![
                ze_result_t,
                ze_context_desc_t,
                ze_device_mem_alloc_desc_t,
                ze_host_mem_alloc_desc_t,
                ze_memory_allocation_properties_t,
                ze_external_memory_export_desc_t
            ],
            &offsets![
                ze_context_desc_t.flags,
                ze_device_mem_alloc_desc_t.ordinal,
                ze_memory_allocation_properties_t.id,
                ze_memory_allocation_properties_t.pageSize,
                ze_external_memory_export_desc_t.flags
            ],
            &[
                (
                    "sizeof(ze_external_memory_import_fd_t)",
                    size_of::<ze_external_memory_fd_t>() as i64,
                ),
                (
                    "offsetof(ze_external_memory_import_fd_t, fd)",
                    offset_of!(ze_external_memory_fd_t, fd) as i64,
                ),
                (
                    "sizeof(ze_external_memory_export_fd_t)",
                    size_of::<ze_external_memory_fd_t>() as i64,
                ),
                (
                    "offsetof(ze_external_memory_export_fd_t, fd)",
                    offset_of!(ze_external_memory_fd_t, fd) as i64,
                ),
            ],
        ]
        .concat();
        let protos = r#"
typedef void *H; typedef uint32_t U;
#define P(fn, ...) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), ze_result_t (*)(__VA_ARGS__)), #fn)
P(zeInit, ze_init_flags_t);
P(zeDriverGet, U *, ze_driver_handle_t *);
P(zeDeviceGet, ze_driver_handle_t, U *, ze_device_handle_t *);
P(zeContextCreate, ze_driver_handle_t, const ze_context_desc_t *, ze_context_handle_t *);
P(zeContextDestroy, ze_context_handle_t);
P(zeMemAllocDevice, ze_context_handle_t, const ze_device_mem_alloc_desc_t *, size_t, size_t, ze_device_handle_t, void **);
P(zeMemAllocHost, ze_context_handle_t, const ze_host_mem_alloc_desc_t *, size_t, size_t, void **);
P(zeMemFree, ze_context_handle_t, void *);
P(zeMemGetAllocProperties, ze_context_handle_t, const void *, ze_memory_allocation_properties_t *, ze_device_handle_t *);
P(zeMemGetAddressRange, ze_context_handle_t, const void *, void **, size_t *);
_Static_assert(sizeof(ze_driver_handle_t) == sizeof(H), "handles are pointers");
_Static_assert(sizeof(ze_init_flags_t) == sizeof(U) && sizeof(ze_structure_type_t) == sizeof(U), "flags and stype are 32-bit");
"#;
        let rest = crate::memory::header_check::check_against_header(
            "ze_api.h",
            "#include <level_zero/ze_api.h>\n#include <stddef.h>\n#include <stdio.h>\n",
            protos,
            &consts,
            "",
            &[],
        );
        assert!(rest.is_empty(), "{rest:?}");
    }
}
