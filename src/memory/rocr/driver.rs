//! The subset of the ROCm runtime (`libhsa-runtime64.so.1`) the ROCr memory
//! backend calls, resolved at run time: types, constants and entry points
//! as `hsa.h` and `hsa_ext_amd.h` declare them (checked against Debian's
//! ROCm 5.2 headers by `layout_matches_hsa_h` below), and the mapping of
//! `hsa_status_t` to libfabric error numbers. DMA-BUF export
//! (`hsa_amd_portable_export_dmabuf`) came after ROCm 5.2: it is looked up
//! on its own, and its absence only disables export.
#![allow(non_camel_case_types)]
use crate::dl::entry_points;
use crate::error::Error;
use crate::memory::vendor::{self, Once, Vendor};
use fi_xpu_abi::errno::*;
use std::ffi::{c_int, c_void};

pub type hsa_status_t = u32;

/// `hsa_agent_t` and `hsa_amd_memory_pool_t`: one opaque 64-bit handle.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Handle {
    pub handle: u64,
}

pub const HSA_STATUS_SUCCESS: hsa_status_t = 0;
pub const HSA_STATUS_INFO_BREAK: hsa_status_t = 0x1;
pub const HSA_STATUS_ERROR: hsa_status_t = 0x1000;
pub const HSA_STATUS_ERROR_INVALID_ARGUMENT: hsa_status_t = 0x1001;
pub const HSA_STATUS_ERROR_INVALID_ALLOCATION: hsa_status_t = 0x1003;
pub const HSA_STATUS_ERROR_INVALID_AGENT: hsa_status_t = 0x1004;
pub const HSA_STATUS_ERROR_OUT_OF_RESOURCES: hsa_status_t = 0x1008;
pub const HSA_STATUS_ERROR_NOT_INITIALIZED: hsa_status_t = 0x100B;

pub const HSA_AGENT_INFO_DEVICE: u32 = 17;
pub const HSA_DEVICE_TYPE_GPU: u32 = 1;
pub const HSA_AMD_SEGMENT_GLOBAL: u32 = 0;
pub const HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED: u32 = 4;
pub const HSA_AMD_MEMORY_POOL_INFO_SEGMENT: u32 = 0;
pub const HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS: u32 = 1;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED: u32 = 5;
pub const HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE: u32 = 6;

pub type IterateAgentsCb = unsafe extern "C" fn(Handle, *mut c_void) -> hsa_status_t;

/// The soname the backend opens.
pub const LIBRARY: &str = "libhsa-runtime64.so.1";

entry_points! {
    /// Entry points of the runtime in every ROCm release the backend supports.
    pub struct Api -> hsa_status_t {
        init = "hsa_init": fn();
        iterate_agents = "hsa_iterate_agents": fn(IterateAgentsCb, *mut c_void);
        agent_get_info = "hsa_agent_get_info": fn(Handle, u32, *mut c_void);
        iterate_memory_pools = "hsa_amd_agent_iterate_memory_pools":
            fn(Handle, IterateAgentsCb, *mut c_void);
        memory_pool_get_info = "hsa_amd_memory_pool_get_info": fn(Handle, u32, *mut c_void);
        memory_pool_allocate = "hsa_amd_memory_pool_allocate":
            fn(Handle, usize, u32, *mut *mut c_void);
        memory_pool_free = "hsa_amd_memory_pool_free": fn(*mut c_void);
        memory_lock = "hsa_amd_memory_lock":
            fn(*mut c_void, usize, *mut Handle, c_int, *mut *mut c_void);
        memory_unlock = "hsa_amd_memory_unlock": fn(*mut c_void);
        interop_map_buffer = "hsa_amd_interop_map_buffer":
            fn(u32, *mut Handle, c_int, u32, *mut usize, *mut *mut c_void, *mut usize, *mut *const c_void);
        interop_unmap_buffer = "hsa_amd_interop_unmap_buffer": fn(*mut c_void);
    }
}

pub type ExportDmabuf =
    unsafe extern "C" fn(*const c_void, usize, *mut c_int, *mut u64) -> hsa_status_t;

/// The ROCm runtime, as the vendor backends' shared code opens it.
pub enum Lib {}

pub type Driver = vendor::Driver<Lib>;

impl Vendor for Lib {
    type Status = hsa_status_t;
    type Api = Api;
    const SUCCESS: hsa_status_t = HSA_STATUS_SUCCESS;
    const LIBRARY: &'static str = LIBRARY;
    const IFACE: &'static str = "FI_HMEM_ROCR";
    const KIND: &'static str = "ROCm runtime";
    const TAG: &'static str = "rocr";
    const DESCRIBE: Option<&'static str> = Some("hsa_status_string");
    const INIT: &'static str = "hsa_init";
    const INIT_HINT: &'static str = " (no GPU or no /dev/kfd?)";

    fn once() -> &'static Once<Lib> {
        static DRIVER: Once<Lib> = Once::new();
        &DRIVER
    }

    fn init(api: &Api) -> hsa_status_t {
        // SAFETY: hsa_init takes no arguments.
        unsafe { (api.init)() }
    }

    fn error(r: hsa_status_t) -> Error {
        Error::new(match r {
            HSA_STATUS_ERROR_INVALID_ARGUMENT | HSA_STATUS_ERROR_INVALID_ALLOCATION => FI_EINVAL,
            HSA_STATUS_ERROR_OUT_OF_RESOURCES => FI_ENOMEM,
            HSA_STATUS_ERROR_NOT_INITIALIZED | HSA_STATUS_ERROR_INVALID_AGENT => FI_ENODEV,
            _ => FI_EIO,
        })
    }

    /// `hsa_init` reports a machine without a usable GPU as out of
    /// resources.
    fn init_error(r: hsa_status_t) -> Error {
        match r {
            HSA_STATUS_ERROR_OUT_OF_RESOURCES | HSA_STATUS_ERROR => Error::NODEV,
            r => Lib::error(r),
        }
    }

    /// `0x1008 (HSA_STATUS_ERROR_OUT_OF_RESOURCES: ...)`, or the number alone.
    fn name(r: hsa_status_t, described: Option<&str>) -> String {
        match described {
            Some(n) => format!("{r:#x} ({n})"),
            None => format!("hsa_status_t {r:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::header_check::{consts, missing, sizes};

    /// Every constant and entry-point prototype above, as Debian's ROCm
    /// headers (`hsa.h`, `hsa_ext_amd.h`) have them; the export entry
    /// point, newer than those headers, is checked by the driver test
    /// double's declaration of upstream's prototype.
    #[test]
    fn layout_matches_hsa_h() {
        if missing("/usr/include/hsa/hsa_ext_amd.h", "libhsa-runtime-dev") {
            return;
        }
        let consts = [
            &consts![
                HSA_STATUS_INFO_BREAK,
                HSA_STATUS_ERROR,
                HSA_STATUS_ERROR_INVALID_ARGUMENT,
                HSA_STATUS_ERROR_INVALID_ALLOCATION,
                HSA_STATUS_ERROR_INVALID_AGENT,
                HSA_STATUS_ERROR_OUT_OF_RESOURCES,
                HSA_STATUS_ERROR_NOT_INITIALIZED,
                HSA_AGENT_INFO_DEVICE,
                HSA_DEVICE_TYPE_GPU,
                HSA_AMD_SEGMENT_GLOBAL,
                HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED,
                HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
                HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
                HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE
            ][..],
            &sizes![hsa_status_t],
            &[
                ("sizeof(hsa_agent_t)", std::mem::size_of::<Handle>() as i64),
                (
                    "sizeof(hsa_amd_memory_pool_t)",
                    std::mem::size_of::<Handle>() as i64,
                ),
            ],
        ]
        .concat();
        let protos = r#"
typedef hsa_status_t (*AgentCb)(hsa_agent_t, void *);
typedef hsa_status_t (*PoolCb)(hsa_amd_memory_pool_t, void *);
#define P(fn, ...) _Static_assert(__builtin_types_compatible_p(__typeof__(&fn), hsa_status_t (*)(__VA_ARGS__)), #fn)
P(hsa_init, void);
P(hsa_iterate_agents, AgentCb, void *);
P(hsa_agent_get_info, hsa_agent_t, hsa_agent_info_t, void *);
P(hsa_amd_agent_iterate_memory_pools, hsa_agent_t, PoolCb, void *);
P(hsa_amd_memory_pool_get_info, hsa_amd_memory_pool_t, hsa_amd_memory_pool_info_t, void *);
P(hsa_amd_memory_pool_allocate, hsa_amd_memory_pool_t, size_t, uint32_t, void **);
P(hsa_amd_memory_pool_free, void *);
P(hsa_amd_memory_lock, void *, size_t, hsa_agent_t *, int, void **);
P(hsa_amd_memory_unlock, void *);
P(hsa_amd_interop_map_buffer, uint32_t, hsa_agent_t *, int, uint32_t, size_t *, void **, size_t *, const void **);
P(hsa_amd_interop_unmap_buffer, void *);
P(hsa_status_string, hsa_status_t, const char **);
_Static_assert(sizeof(hsa_agent_info_t) == 4 && sizeof(hsa_amd_memory_pool_info_t) == 4, "enums are 32-bit");
"#;
        let rest = crate::memory::header_check::check_against_header(
            "hsa.h",
            "#include <hsa/hsa.h>\n#include <hsa/hsa_ext_amd.h>\n#include <stdio.h>\n",
            protos,
            &consts,
            "",
            &[],
        );
        assert!(rest.is_empty(), "{rest:?}");
    }
}
