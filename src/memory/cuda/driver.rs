//! The subset of the CUDA driver API (`libcuda.so.1`) the CUDA memory
//! backend calls, resolved with `dlopen`/`dlsym` at run time: its types,
//! constants and entry points as `cuda.h` declares them (checked against
//! `cuda.h` by `layout_matches_cuda_h` below), and the mapping of `CUresult`
//! to libfabric error numbers (`Vendor`).
#![allow(non_camel_case_types, non_snake_case)]
use crate::dl::entry_points;
use crate::error::Error;
use crate::memory::vendor::{self, Once, Vendor};
use fi_xpu_abi::errno::*;
use std::ffi::{c_int, c_uint, c_ulonglong, c_void};

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUcontext = *mut c_void;
pub type CUdeviceptr = c_ulonglong;
pub type CUmemGenericAllocationHandle = c_ulonglong;
pub type CUstream = *mut c_void;

pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_INVALID_VALUE: CUresult = 1;
pub const CUDA_ERROR_OUT_OF_MEMORY: CUresult = 2;
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
pub const CUDA_ERROR_DEINITIALIZED: CUresult = 4;
pub const CUDA_ERROR_STUB_LIBRARY: CUresult = 34;
pub const CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER: CUresult = 36;
pub const CUDA_ERROR_DEVICE_UNAVAILABLE: CUresult = 46;
pub const CUDA_ERROR_NO_DEVICE: CUresult = 100;
pub const CUDA_ERROR_INVALID_DEVICE: CUresult = 101;
pub const CUDA_ERROR_INVALID_HANDLE: CUresult = 400;
pub const CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: CUresult = 712;
pub const CUDA_ERROR_NOT_PERMITTED: CUresult = 800;
pub const CUDA_ERROR_NOT_SUPPORTED: CUresult = 801;

pub const CU_MEMHOSTREGISTER_PORTABLE: c_uint = 0x01;
pub const CU_MEMHOSTREGISTER_DEVICEMAP: c_uint = 0x02;
pub const CU_MEMHOSTREGISTER_IOMEMORY: c_uint = 0x04;
pub const CU_MEMHOSTREGISTER_READ_ONLY: c_uint = 0x08;
pub const CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: c_int = 0x1;
pub const CU_MEM_ACCESS_FLAGS_PROT_READWRITE: c_int = 0x3;
pub const CU_MEM_LOCATION_TYPE_DEVICE: c_int = 0x1;
pub const CU_MEM_ALLOCATION_TYPE_PINNED: c_int = 0x1;
pub const CU_MEM_ALLOC_GRANULARITY_MINIMUM: c_int = 0x0;
pub const CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 0x1;
pub const CU_STREAM_NON_BLOCKING: c_uint = 0x1;
pub const CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: c_uint = 0x1;
pub const CU_IPC_HANDLE_SIZE: usize = 64;
pub const CU_STREAM_WRITE_VALUE_DEFAULT: c_uint = 0x0;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CUmemLocation {
    pub type_: c_int,
    pub id: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CUmemAllocFlags {
    pub compressionType: u8,
    pub gpuDirectRDMACapable: u8,
    pub usage: u16,
    pub reserved: [u8; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUmemAllocationProp {
    pub type_: c_int,
    pub requestedHandleTypes: c_int,
    pub location: CUmemLocation,
    pub win32HandleMetaData: *mut c_void,
    pub allocFlags: CUmemAllocFlags,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CUmemAccessDesc {
    pub location: CUmemLocation,
    pub flags: c_int,
}

/// A legacy IPC handle of device memory (`cuIpcGetMemHandle`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUipcMemHandle {
    pub reserved: [u8; CU_IPC_HANDLE_SIZE],
}

/// The soname the backend opens; the dynamic linker's search finds it.
pub const LIBRARY: &str = "libcuda.so.1";

entry_points! {
    /// Entry points of the driver, by the symbol `cuda.h` binds each name
    /// to (`cuMemHostRegister` is `cuMemHostRegister_v2`, ...).
    pub struct Api -> CUresult {
        init = "cuInit": fn(c_uint);
        device_get = "cuDeviceGet": fn(*mut CUdevice, c_int);
        primary_ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut CUcontext, CUdevice);
        primary_ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(CUdevice);
        ctx_set_current = "cuCtxSetCurrent": fn(CUcontext);
        mem_get_allocation_granularity = "cuMemGetAllocationGranularity":
            fn(*mut usize, *const CUmemAllocationProp, c_int);
        mem_create = "cuMemCreate":
            fn(*mut CUmemGenericAllocationHandle, usize, *const CUmemAllocationProp, c_ulonglong);
        mem_release = "cuMemRelease": fn(CUmemGenericAllocationHandle);
        mem_address_reserve = "cuMemAddressReserve":
            fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, c_ulonglong);
        mem_address_free = "cuMemAddressFree": fn(CUdeviceptr, usize);
        mem_map = "cuMemMap":
            fn(CUdeviceptr, usize, usize, CUmemGenericAllocationHandle, c_ulonglong);
        mem_unmap = "cuMemUnmap": fn(CUdeviceptr, usize);
        mem_set_access = "cuMemSetAccess": fn(CUdeviceptr, usize, *const CUmemAccessDesc, usize);
        mem_export_to_shareable_handle = "cuMemExportToShareableHandle":
            fn(*mut c_void, CUmemGenericAllocationHandle, c_int, c_ulonglong);
        mem_import_from_shareable_handle = "cuMemImportFromShareableHandle":
            fn(*mut CUmemGenericAllocationHandle, *mut c_void, c_int);
        mem_get_handle_for_address_range = "cuMemGetHandleForAddressRange":
            fn(*mut c_void, CUdeviceptr, usize, c_int, c_ulonglong);
        mem_get_address_range = "cuMemGetAddressRange_v2":
            fn(*mut CUdeviceptr, *mut usize, CUdeviceptr);
        mem_host_register = "cuMemHostRegister_v2": fn(*mut c_void, usize, c_uint);
        mem_host_unregister = "cuMemHostUnregister": fn(*mut c_void);
        mem_host_get_device_pointer = "cuMemHostGetDevicePointer_v2":
            fn(*mut CUdeviceptr, *mut c_void, c_uint);
        device_get_uuid = "cuDeviceGetUuid_v2": fn(*mut [u8; 16], CUdevice);
        ipc_get_mem_handle = "cuIpcGetMemHandle": fn(*mut CUipcMemHandle, CUdeviceptr);
        ipc_open_mem_handle = "cuIpcOpenMemHandle_v2":
            fn(*mut CUdeviceptr, CUipcMemHandle, c_uint);
        ipc_close_mem_handle = "cuIpcCloseMemHandle": fn(CUdeviceptr);
        stream_create = "cuStreamCreate": fn(*mut CUstream, c_uint);
        stream_destroy = "cuStreamDestroy_v2": fn(CUstream);
        stream_synchronize = "cuStreamSynchronize": fn(CUstream);
        memcpy_htod_async = "cuMemcpyHtoDAsync_v2":
            fn(CUdeviceptr, *const c_void, usize, CUstream);
        memcpy_dtoh_async = "cuMemcpyDtoHAsync_v2":
            fn(*mut c_void, CUdeviceptr, usize, CUstream);
        memset_d8_async = "cuMemsetD8Async": fn(CUdeviceptr, u8, usize, CUstream);
        stream_write_value64 = "cuStreamWriteValue64_v2":
            fn(CUstream, CUdeviceptr, u64, c_uint);
    }
}

/// The CUDA driver, as the vendor backends' shared code opens it.
pub enum Lib {}

pub type Driver = vendor::Driver<Lib>;

impl Vendor for Lib {
    type Status = CUresult;
    type Api = Api;
    const SUCCESS: CUresult = CUDA_SUCCESS;
    const LIBRARY: &'static str = LIBRARY;
    const IFACE: &'static str = "FI_HMEM_CUDA";
    const KIND: &'static str = "CUDA driver";
    const TAG: &'static str = "cuda";
    const MISSING_HINT: &'static str = " (a driver older than CUDA 12?)";
    const DESCRIBE: Option<&'static str> = Some("cuGetErrorName");
    const INIT: &'static str = "cuInit";

    fn once() -> &'static Once<Lib> {
        static DRIVER: Once<Lib> = Once::new();
        &DRIVER
    }

    fn init(api: &Api) -> CUresult {
        // SAFETY: cuInit takes flags 0.
        unsafe { (api.init)(0) }
    }

    fn error(r: CUresult) -> Error {
        Error::new(match r {
            CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_INVALID_HANDLE => FI_EINVAL,
            CUDA_ERROR_OUT_OF_MEMORY => FI_ENOMEM,
            CUDA_ERROR_NOT_INITIALIZED
            | CUDA_ERROR_DEINITIALIZED
            | CUDA_ERROR_STUB_LIBRARY
            | CUDA_ERROR_NO_DEVICE
            | CUDA_ERROR_INVALID_DEVICE => FI_ENODEV,
            CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED | CUDA_ERROR_DEVICE_UNAVAILABLE => FI_EBUSY,
            CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER => FI_ENOSYS,
            CUDA_ERROR_NOT_PERMITTED => FI_EPERM,
            CUDA_ERROR_NOT_SUPPORTED => FI_EOPNOTSUPP,
            _ => FI_EIO,
        })
    }

    /// `CUDA_ERROR_OUT_OF_MEMORY (2)`, or the number alone.
    fn name(r: CUresult, described: Option<&str>) -> String {
        match described {
            Some(n) => format!("{n} ({r})"),
            None => format!("CUresult {r}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::cuda_include::cuda_include;
    use crate::memory::header_check::{consts, offsets, sizes};
    use std::mem::offset_of;

    /// Every constant, layout and entry-point prototype above, as `cuda.h`
    /// has it: a C program prints the header's values, and assigns each
    /// entry point's type against the prototype declared here (a static
    /// assertion).
    #[test]
    fn layout_matches_cuda_h() {
        let Some(inc) = cuda_include() else {
            eprintln!("skipped: no cuda.h (run .ci/install-cuda or set FI_XPU_CUDA_HOME)");
            return;
        };
        let consts = [
            &consts![
                CUDA_ERROR_INVALID_VALUE,
                CUDA_ERROR_OUT_OF_MEMORY,
                CUDA_ERROR_NOT_INITIALIZED,
                CUDA_ERROR_DEINITIALIZED,
                CUDA_ERROR_STUB_LIBRARY,
                CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER,
                CUDA_ERROR_DEVICE_UNAVAILABLE,
                CUDA_ERROR_NO_DEVICE,
                CUDA_ERROR_INVALID_DEVICE,
                CUDA_ERROR_INVALID_HANDLE,
                CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                CUDA_ERROR_NOT_PERMITTED,
                CUDA_ERROR_NOT_SUPPORTED,
                CU_MEMHOSTREGISTER_PORTABLE,
                CU_MEMHOSTREGISTER_DEVICEMAP,
                CU_MEMHOSTREGISTER_IOMEMORY,
                CU_MEMHOSTREGISTER_READ_ONLY,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
                CU_MEM_LOCATION_TYPE_DEVICE,
                CU_MEM_ALLOCATION_TYPE_PINNED,
                CU_MEM_ALLOC_GRANULARITY_MINIMUM,
                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                CU_STREAM_NON_BLOCKING,
                CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
                CU_IPC_HANDLE_SIZE,
                CU_STREAM_WRITE_VALUE_DEFAULT
            ][..],
            &sizes![
                CUipcMemHandle,
                CUresult,
                CUdevice,
                CUdeviceptr,
                CUmemGenericAllocationHandle,
                CUmemLocation,
                CUmemAllocationProp,
                CUmemAccessDesc
            ],
            &offsets![
                CUmemLocation.id,
                CUmemAllocationProp.requestedHandleTypes,
                CUmemAllocationProp.location,
                CUmemAllocationProp.win32HandleMetaData,
                CUmemAllocationProp.allocFlags,
                CUmemAccessDesc.flags
            ],
            &[(
                "offsetof(CUmemAllocationProp, allocFlags.usage)",
                (offset_of!(CUmemAllocationProp, allocFlags) + offset_of!(CUmemAllocFlags, usage))
                    as i64,
            )],
        ]
        .concat();
        // The prototypes as declared in `driver_api!`, in C.
        let protos = r#"
typedef int I; typedef unsigned int U; typedef unsigned long long ULL;
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuInit), CUresult (*)(U)), "cuInit");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuDeviceGet), CUresult (*)(CUdevice *, int)), "cuDeviceGet");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuDevicePrimaryCtxRetain), CUresult (*)(CUcontext *, CUdevice)), "cuDevicePrimaryCtxRetain");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuDevicePrimaryCtxRelease), CUresult (*)(CUdevice)), "cuDevicePrimaryCtxRelease");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuCtxSetCurrent), CUresult (*)(CUcontext)), "cuCtxSetCurrent");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemGetAllocationGranularity), CUresult (*)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags)), "cuMemGetAllocationGranularity");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemCreate), CUresult (*)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, ULL)), "cuMemCreate");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemRelease), CUresult (*)(CUmemGenericAllocationHandle)), "cuMemRelease");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemAddressReserve), CUresult (*)(CUdeviceptr *, size_t, size_t, CUdeviceptr, ULL)), "cuMemAddressReserve");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemAddressFree), CUresult (*)(CUdeviceptr, size_t)), "cuMemAddressFree");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemMap), CUresult (*)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, ULL)), "cuMemMap");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemUnmap), CUresult (*)(CUdeviceptr, size_t)), "cuMemUnmap");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemSetAccess), CUresult (*)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t)), "cuMemSetAccess");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemExportToShareableHandle), CUresult (*)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, ULL)), "cuMemExportToShareableHandle");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemImportFromShareableHandle), CUresult (*)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType)), "cuMemImportFromShareableHandle");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemGetHandleForAddressRange), CUresult (*)(void *, CUdeviceptr, size_t, CUmemRangeHandleType, ULL)), "cuMemGetHandleForAddressRange");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemGetAddressRange), CUresult (*)(CUdeviceptr *, size_t *, CUdeviceptr)), "cuMemGetAddressRange");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemHostRegister), CUresult (*)(void *, size_t, U)), "cuMemHostRegister");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemHostUnregister), CUresult (*)(void *)), "cuMemHostUnregister");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemHostGetDevicePointer), CUresult (*)(CUdeviceptr *, void *, U)), "cuMemHostGetDevicePointer");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuDeviceGetUuid), CUresult (*)(CUuuid *, CUdevice)), "cuDeviceGetUuid");
_Static_assert(sizeof(CUuuid) == 16, "CUuuid");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuIpcGetMemHandle), CUresult (*)(CUipcMemHandle *, CUdeviceptr)), "cuIpcGetMemHandle");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuIpcOpenMemHandle), CUresult (*)(CUdeviceptr *, CUipcMemHandle, U)), "cuIpcOpenMemHandle");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuIpcCloseMemHandle), CUresult (*)(CUdeviceptr)), "cuIpcCloseMemHandle");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuStreamCreate), CUresult (*)(CUstream *, U)), "cuStreamCreate");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuStreamDestroy), CUresult (*)(CUstream)), "cuStreamDestroy");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuStreamSynchronize), CUresult (*)(CUstream)), "cuStreamSynchronize");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemcpyHtoDAsync), CUresult (*)(CUdeviceptr, const void *, size_t, CUstream)), "cuMemcpyHtoDAsync");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemcpyDtoHAsync), CUresult (*)(void *, CUdeviceptr, size_t, CUstream)), "cuMemcpyDtoHAsync");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuMemsetD8Async), CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream)), "cuMemsetD8Async");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuStreamWriteValue64), CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, U)), "cuStreamWriteValue64");
_Static_assert(__builtin_types_compatible_p(__typeof__(&cuGetErrorName), CUresult (*)(CUresult, const char **)), "cuGetErrorName");
"#;
        // The symbols cuda.h binds the names to, as `driver_api!` loads them.
        let symbols = [
            ("cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2"),
            ("cuMemGetAddressRange", "cuMemGetAddressRange_v2"),
            ("cuMemHostRegister", "cuMemHostRegister_v2"),
            ("cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer_v2"),
            ("cuDeviceGetUuid", "cuDeviceGetUuid_v2"),
            ("cuIpcOpenMemHandle", "cuIpcOpenMemHandle_v2"),
            ("cuStreamDestroy", "cuStreamDestroy_v2"),
            ("cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2"),
            ("cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2"),
            ("cuMemsetD8Async", "cuMemsetD8Async"),
            ("cuStreamSynchronize", "cuStreamSynchronize"),
            ("cuStreamWriteValue64", "cuStreamWriteValue64_v2"),
        ];
        let names: String = symbols
            .iter()
            .map(|(name, _)| format!("    printf(\"%s\\n\", NAME({name}));\n"))
            .collect();
        let got = crate::memory::header_check::check_against_header(
            "cuda.h",
            "#include <cuda.h>\n#include <stddef.h>\n#include <stdio.h>\n",
            &format!("{protos}#define S(x) #x\n#define NAME(x) S(x)\n"),
            &consts,
            &names,
            &[
                "-Wno-unused-local-typedefs".into(),
                format!("-I{}", inc.display()),
            ],
        );
        let want: Vec<&str> = symbols.iter().map(|(_, sym)| *sym).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn errors_map() {
        assert_eq!(Lib::error(CUDA_ERROR_OUT_OF_MEMORY), Error::NOMEM);
        assert_eq!(Lib::error(CUDA_ERROR_NO_DEVICE), Error::NODEV);
        assert_eq!(Lib::error(CUDA_ERROR_NOT_SUPPORTED), Error::OPNOTSUPP);
        assert_eq!(Lib::error(12345), Error::IO);
    }
}
