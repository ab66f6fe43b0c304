//! The provider plugin ABI (`fi_xpu/provider.h`).
//!
//! A plugin is a shared object `libfi_xpu-<name>.so` that exports
//! `fi_xpu_prov_ini`, a function returning a pointer to a static
//! `struct fi_xpu_prov_desc`. The core checks the descriptor's version and size,
//! calls `init` with its table of core services, and from then on calls the
//! entry points with the provider's own opaque handles. The core validates
//! every argument that came from the application before a provider sees it.
use crate::libfabric::{fi_addr_t, fi_cq_err_entry, fi_hmem_iface};
use crate::public::{
    fi_xpu_av_attr, fi_xpu_cntr_attr, fi_xpu_cq_attr, fi_xpu_ctx_info, fi_xpu_domain_attr,
    fi_xpu_ep_attr, fi_xpu_limits, fid_xpu, fid_xpu_host_ctx,
};
use std::ffi::{c_char, c_int, c_void};

/// Plugin ABI major version: a plugin built for another major is refused.
pub const FI_XPU_PROV_ABI_MAJOR: u32 = 1;
/// Plugin ABI minor version: a plugin built for a newer minor is refused; an
/// older one must be at least `FI_XPU_PROV_MIN_SIZE` bytes.
/// 1: `fi_xpu_core` gained `param_define` and `param_get`.
/// 2: `fi_xpu_core` gained `ctx_abort_word`.
/// 3: `fi_xpu_core` gained `mem_retire`.
/// 4: `fi_xpu_core` gained `mem_access`, `ctx_device_uuid`,
///    `mem_export_ipc` and `mem_import_ipc`.
/// 5: `fi_xpu_prov_desc` gained `limits` (read only when `size` covers it).
pub const FI_XPU_PROV_ABI_MINOR: u32 = 5;
/// Name of the symbol every plugin exports.
pub const FI_XPU_PROV_INI_SYMBOL: &str = "fi_xpu_prov_ini";

/// Operations of `fi_xpu_core.mem_access`.
/// Copies `size` bytes from host memory at `host` to the device address.
pub const FI_XPU_MEM_ACCESS_WRITE: c_int = 0;
/// Copies `size` bytes from the device address to host memory at `host`.
pub const FI_XPU_MEM_ACCESS_READ: c_int = 1;
/// Sets `size` bytes at the device address to the byte `value`.
pub const FI_XPU_MEM_ACCESS_SET: c_int = 2;
/// Stores the 64-bit `value` at the 8-byte aligned device address, as one
/// store (`size` is 8): how the host raises a flag device code polls.
pub const FI_XPU_MEM_ACCESS_STORE64: c_int = 3;

/// Bytes of a legacy IPC handle (`fi_xpu_core.mem_export_ipc`).
pub const FI_XPU_IPC_HANDLE_SIZE: usize = 64;

/// Log levels of `fi_xpu_core.log` (and of `FI_XPU_LOG_LEVEL`).
pub const FI_XPU_LOG_WARN: c_int = 1;
pub const FI_XPU_LOG_INFO: c_int = 2;
pub const FI_XPU_LOG_DEBUG: c_int = 3;

/// Everything a provider needs to know about a new XPU context.
#[repr(C)]
pub struct fi_xpu_prov_ctx_args {
    pub iface: fi_hmem_iface,
    pub device: u64,
    /// The application's handle: pass it to the core's memory services.
    pub core_ctx: *mut fid_xpu_host_ctx,
}

/// Arguments of a memory registration.
#[repr(C)]
pub struct fi_xpu_prov_mr_args {
    pub buf: *const c_void,
    pub len: usize,
    /// `FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV`
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub flags: u64,
    /// `FI_HMEM_SYSTEM` unless the registration names an XPU context.
    pub iface: fi_hmem_iface,
    pub device: u64,
    /// The context the memory belongs to, or NULL for plain host memory.
    pub core_ctx: *mut fid_xpu_host_ctx,
}

/// Services the core offers every provider. Memory services take the
/// application's context handle and behave exactly as the public calls.
#[repr(C)]
pub struct fi_xpu_core {
    pub abi_major: u32,
    pub abi_minor: u32,
    pub size: usize,
    pub log: Option<unsafe extern "C" fn(level: c_int, prov: *const c_char, msg: *const c_char)>,
    pub log_enabled: Option<unsafe extern "C" fn(level: c_int) -> c_int>,
    pub mem_alloc: Option<
        unsafe extern "C" fn(
            ctx: *mut fid_xpu_host_ctx,
            size: u64,
            alignment: u64,
            flags: u64,
            addr: *mut *mut c_void,
            fd: *mut c_int,
            offset: *mut u64,
        ) -> c_int,
    >,
    pub mem_import: Option<
        unsafe extern "C" fn(
            ctx: *mut fid_xpu_host_ctx,
            host_addr: *mut c_void,
            fd: c_int,
            offset: u64,
            size: u64,
            flags: u64,
            dev_addr: *mut *mut c_void,
        ) -> c_int,
    >,
    pub mem_unimport:
        Option<unsafe extern "C" fn(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int>,
    pub mem_free:
        Option<unsafe extern "C" fn(ctx: *mut fid_xpu_host_ctx, addr: *mut c_void) -> c_int>,
    /// A DMA-BUF fd (owned by the caller) and offset for `[addr, addr+size)`.
    pub mem_export: Option<
        unsafe extern "C" fn(
            ctx: *mut fid_xpu_host_ctx,
            addr: *mut c_void,
            size: u64,
            fd: *mut c_int,
            offset: *mut u64,
        ) -> c_int,
    >,
    /// Defines the provider `prov`'s parameter `name`, read from the
    /// environment variable `FI_XPU_<PROV>_<NAME>` (`name` and `prov` of
    /// `[a-z0-9_]`), with its default as text and a one-line description,
    /// which `fi_xpu_info -e` lists. Defining it again identically is
    /// harmless. `-FI_EINVAL`: a malformed name or a NULL argument;
    /// `-FI_EALREADY`: the variable is already defined otherwise. (ABI 1.1)
    pub param_define: Option<
        unsafe extern "C" fn(
            prov: *const c_char,
            name: *const c_char,
            default_value: *const c_char,
            help: *const c_char,
        ) -> c_int,
    >,
    /// Reads a parameter `prov` defined: copies its value and a NUL into
    /// `buf` (`*len` bytes). `-FI_ENODATA`: unset or empty (use the
    /// default); `-FI_ENOENT`: never defined; `-FI_ETOOSMALL` with `*len`
    /// set to the size needed. Providers read the environment only through
    /// this call (it uses `secure_getenv`). (ABI 1.1)
    pub param_get: Option<
        unsafe extern "C" fn(
            prov: *const c_char,
            name: *const c_char,
            buf: *mut c_char,
            len: *mut usize,
        ) -> c_int,
    >,
    /// 0 when `[addr, addr+size)` lies inside one allocation or import of
    /// the context, `-FI_ENOENT` when it does not, `-FI_EINVAL` for a bad
    /// context. Providers that hand device-supplied buffers to a transport
    /// check them here first. (ABI 1.1)
    pub mem_known: Option<
        unsafe extern "C" fn(ctx: *mut fid_xpu_host_ctx, addr: *const c_void, size: u64) -> c_int,
    >,
    /// The context's abort word (`fi_xpu_ctx_abort`): a 64-bit word in
    /// memory the host and the context's device both reach, 0 until the
    /// host raises it. Providers store its address in the device blocks of
    /// everything a kernel waits on, and every device wait ends with
    /// `-FI_ECANCELED` once it is not 0. NULL for a bad context or when the
    /// memory could not be had. (ABI 1.2)
    pub ctx_abort_word: Option<unsafe extern "C" fn(ctx: *mut fid_xpu_host_ctx) -> *mut u64>,
    /// Undoes an import of memory whose owner is gone while device code
    /// may still hold addresses inside it: the memory is released at once
    /// and the address range stays mapped, to private zero-filled pages,
    /// until the context closes, so that a late access neither faults nor
    /// reaches other memory. `-FI_EOPNOTSUPP` when the context's memory
    /// backend cannot do it (the import is then left in place). (ABI 1.3)
    pub mem_retire:
        Option<unsafe extern "C" fn(ctx: *mut fid_xpu_host_ctx, dev_addr: *mut c_void) -> c_int>,
    /// Host access to the context's device memory, which the host must not
    /// load from or store to through a pointer: `op` (`FI_XPU_MEM_ACCESS_*`)
    /// on `[dev_addr, dev_addr + size)`, which must lie inside one
    /// allocation or import of the context, done by the memory backend on
    /// a stream of its own that does not synchronise with others, and
    /// waited for. `size` 0 asks whether the context's memory needs this
    /// at all: 0 when it does, `-FI_EOPNOTSUPP` when the host reaches it
    /// by plain loads and stores (host memory, or application callbacks,
    /// which give no way to reach device memory). `-FI_EINVAL`: a bad
    /// context, op or range. (ABI 1.4)
    pub mem_access: Option<
        unsafe extern "C" fn(
            ctx: *mut fid_xpu_host_ctx,
            op: c_int,
            dev_addr: *mut c_void,
            host: *mut c_void,
            size: u64,
            value: u64,
        ) -> c_int,
    >,
    /// The 16-byte UUID of the context's device (for CUDA, the GPU's or
    /// its MIG instance's, `cuDeviceGetUuid`), which names one device the
    /// same way in every process: two contexts are on the same device
    /// when their UUIDs are equal. `-FI_ENODATA` for host memory and
    /// application callbacks; `-FI_EINVAL` for a bad context. (ABI 1.4)
    pub ctx_device_uuid:
        Option<unsafe extern "C" fn(ctx: *mut fid_xpu_host_ctx, uuid: *mut u8) -> c_int>,
    /// A legacy IPC handle (`FI_XPU_IPC_HANDLE_SIZE` bytes at `handle`;
    /// CUDA: `cuIpcGetMemHandle`) of the device allocation holding
    /// `[addr, addr + size)`, memory the context neither allocated nor
    /// imported (`cudaMalloc`), and the offset of `addr` in it: how such
    /// memory is shared with another process, which opens it with
    /// `mem_import_ipc`. `-FI_EOPNOTSUPP` when the backend has no such
    /// handles or the memory is not such an allocation. (ABI 1.4)
    pub mem_export_ipc: Option<
        unsafe extern "C" fn(
            ctx: *mut fid_xpu_host_ctx,
            addr: *mut c_void,
            size: u64,
            handle: *mut u8,
            offset: *mut u64,
        ) -> c_int,
    >,
    /// Opens a legacy IPC handle from another process into the context
    /// (CUDA: `cuIpcOpenMemHandle`) and returns the device address of
    /// `[offset, offset + size)` of its allocation, which must lie inside
    /// it (`-FI_EINVAL` otherwise). Undone by `mem_unimport`. (ABI 1.4)
    pub mem_import_ipc: Option<
        unsafe extern "C" fn(
            ctx: *mut fid_xpu_host_ctx,
            handle: *const u8,
            offset: u64,
            size: u64,
            dev_addr: *mut *mut c_void,
        ) -> c_int,
    >,
}

/// Opaque provider-side handle.
#[allow(non_camel_case_types)] // C's name
pub type fi_xpu_prov_handle = *mut c_void;

/// The descriptor `fi_xpu_prov_ini` returns. Fields up to and including
/// `ep_close` are required (non-NULL) in ABI 1.0.
#[repr(C)]
pub struct fi_xpu_prov_desc {
    pub abi_major: u32,
    pub abi_minor: u32,
    /// `sizeof(struct fi_xpu_prov_desc)` as the plugin was built.
    pub size: usize,
    pub name: *const c_char,
    pub version: u32,
    pub prov_id: u32,
    /// `FI_XPU_CAP_*`
    pub caps: u64,
    /// Bit `1 << iface` for each `enum fi_hmem_iface` the provider serves.
    pub ifaces: u64,
    /// Size of an endpoint name (`fi_xpu_getname`).
    pub addrlen: usize,

    /// Called once after loading. A negative return skips the provider; it
    /// should log why through `core->log` first.
    pub init: Option<
        unsafe extern "C" fn(core: *const fi_xpu_core, prov: *mut fi_xpu_prov_handle) -> c_int,
    >,
    pub fini: Option<unsafe extern "C" fn(prov: fi_xpu_prov_handle)>,

    pub domain_open: Option<
        unsafe extern "C" fn(
            prov: fi_xpu_prov_handle,
            attr: *const fi_xpu_domain_attr,
            domain: *mut fi_xpu_prov_handle,
        ) -> c_int,
    >,
    pub domain_close: Option<unsafe extern "C" fn(domain: fi_xpu_prov_handle) -> c_int>,

    pub ctx_open: Option<
        unsafe extern "C" fn(
            domain: fi_xpu_prov_handle,
            args: *const fi_xpu_prov_ctx_args,
            ctx: *mut fi_xpu_prov_handle,
        ) -> c_int,
    >,
    pub ctx_query:
        Option<unsafe extern "C" fn(ctx: fi_xpu_prov_handle, attr: *mut fi_xpu_ctx_info) -> c_int>,
    pub ctx_close: Option<unsafe extern "C" fn(ctx: fi_xpu_prov_handle) -> c_int>,

    pub av_open: Option<
        unsafe extern "C" fn(
            domain: fi_xpu_prov_handle,
            attr: *const fi_xpu_av_attr,
            av: *mut fi_xpu_prov_handle,
        ) -> c_int,
    >,
    /// Inserts one address of `addrlen` bytes.
    pub av_insert: Option<
        unsafe extern "C" fn(
            av: fi_xpu_prov_handle,
            addr: *const c_void,
            fi_addr: *mut fi_addr_t,
            flags: u64,
        ) -> c_int,
    >,
    pub av_remove: Option<
        unsafe extern "C" fn(av: fi_xpu_prov_handle, fi_addr: fi_addr_t, flags: u64) -> c_int,
    >,
    /// The raw address a kernel uses for `fi_addr` on the context `ctx`.
    pub av_lookup: Option<
        unsafe extern "C" fn(
            av: fi_xpu_prov_handle,
            fi_addr: fi_addr_t,
            ctx: fi_xpu_prov_handle,
            buf: *mut c_void,
            len: *mut usize,
            flags: u64,
        ) -> c_int,
    >,
    pub av_close: Option<unsafe extern "C" fn(av: fi_xpu_prov_handle) -> c_int>,

    /// `ctx` may be NULL (plain host memory).
    pub mr_reg: Option<
        unsafe extern "C" fn(
            domain: fi_xpu_prov_handle,
            ctx: fi_xpu_prov_handle,
            args: *const fi_xpu_prov_mr_args,
            mr: *mut fi_xpu_prov_handle,
        ) -> c_int,
    >,
    pub mr_key: Option<unsafe extern "C" fn(mr: fi_xpu_prov_handle, key: *mut u64) -> c_int>,
    /// The raw descriptor a kernel passes as `desc` for this registration.
    pub mr_desc: Option<
        unsafe extern "C" fn(
            mr: fi_xpu_prov_handle,
            ctx: fi_xpu_prov_handle,
            buf: *mut c_void,
            len: *mut usize,
            flags: u64,
        ) -> c_int,
    >,
    pub mr_close: Option<unsafe extern "C" fn(mr: fi_xpu_prov_handle) -> c_int>,

    /// `ctx` is NULL for a host CQ.
    pub cq_open: Option<
        unsafe extern "C" fn(
            domain: fi_xpu_prov_handle,
            ctx: fi_xpu_prov_handle,
            attr: *const fi_xpu_cq_attr,
            cq: *mut fi_xpu_prov_handle,
        ) -> c_int,
    >,
    pub cq_export: Option<
        unsafe extern "C" fn(cq: fi_xpu_prov_handle, flags: u64, out: *mut fid_xpu) -> c_int,
    >,
    /// Host CQs only: up to `count` entries in the CQ's format; `src_addr` may be NULL.
    pub cq_host_read: Option<
        unsafe extern "C" fn(
            cq: fi_xpu_prov_handle,
            buf: *mut c_void,
            count: usize,
            src_addr: *mut fi_addr_t,
        ) -> isize,
    >,
    pub cq_host_readerr: Option<
        unsafe extern "C" fn(
            cq: fi_xpu_prov_handle,
            buf: *mut fi_cq_err_entry,
            flags: u64,
        ) -> isize,
    >,
    pub cq_close: Option<unsafe extern "C" fn(cq: fi_xpu_prov_handle) -> c_int>,

    /// `ctx` is NULL for a host counter.
    pub cntr_open: Option<
        unsafe extern "C" fn(
            domain: fi_xpu_prov_handle,
            ctx: fi_xpu_prov_handle,
            attr: *const fi_xpu_cntr_attr,
            cntr: *mut fi_xpu_prov_handle,
        ) -> c_int,
    >,
    pub cntr_export: Option<
        unsafe extern "C" fn(cntr: fi_xpu_prov_handle, flags: u64, out: *mut fid_xpu) -> c_int,
    >,
    /// Host counters only: reads the success and error counts.
    pub cntr_host_read: Option<
        unsafe extern "C" fn(cntr: fi_xpu_prov_handle, value: *mut u64, err: *mut u64) -> c_int,
    >,
    /// Host counters only: `FI_XPU_CNTR_ADD` / `FI_XPU_CNTR_SET` on the value
    /// or, with `FI_XPU_CNTR_ERR`, on the error count.
    pub cntr_host_update:
        Option<unsafe extern "C" fn(cntr: fi_xpu_prov_handle, how: u32, value: u64) -> c_int>,
    pub cntr_close: Option<unsafe extern "C" fn(cntr: fi_xpu_prov_handle) -> c_int>,

    pub ep_open: Option<
        unsafe extern "C" fn(
            domain: fi_xpu_prov_handle,
            ctx: fi_xpu_prov_handle,
            attr: *const fi_xpu_ep_attr,
            ep: *mut fi_xpu_prov_handle,
        ) -> c_int,
    >,
    /// Binds an AV, CQ or counter (`fclass` says which) with libfabric's bind flags.
    pub ep_bind: Option<
        unsafe extern "C" fn(
            ep: fi_xpu_prov_handle,
            fclass: usize,
            obj: fi_xpu_prov_handle,
            flags: u64,
        ) -> c_int,
    >,
    pub ep_enable: Option<unsafe extern "C" fn(ep: fi_xpu_prov_handle) -> c_int>,
    pub ep_getname: Option<
        unsafe extern "C" fn(ep: fi_xpu_prov_handle, addr: *mut c_void, len: *mut usize) -> c_int,
    >,
    pub ep_export: Option<
        unsafe extern "C" fn(ep: fi_xpu_prov_handle, flags: u64, out: *mut fid_xpu) -> c_int,
    >,
    pub ep_close: Option<unsafe extern "C" fn(ep: fi_xpu_prov_handle) -> c_int>,

    /// ABI 1.5: the largest sizes the provider serves (0: no bound of its
    /// own), reported in `fi_xpu_info.limits`. A descriptor whose `size`
    /// ends before this field reports none.
    pub limits: fi_xpu_limits,
}

/// Smallest descriptor the core accepts: through `ep_close` (ABI 1.0).
pub const FI_XPU_PROV_MIN_SIZE: usize = std::mem::offset_of!(fi_xpu_prov_desc, limits);

/// The plugin's identity as an ELF note (section `.note.fi_xpu`, in a
/// `PT_NOTE` segment), which the core reads from the file before `dlopen`
/// runs any of the plugin's code: a plugin whose name or `prov_id`
/// duplicates a loaded one, or whose ABI is not this library's, is then
/// refused without its constructors running. The fields follow the ELF
/// note header; the descriptor must agree with them.
#[repr(C)]
pub struct fi_xpu_prov_note {
    /// `FI_XPU_PROV_NOTE_NAMESZ`: the owner "fi_xpu" with its NUL.
    pub namesz: u32,
    /// `FI_XPU_PROV_NOTE_DESCSZ`: the bytes from `abi_major` to the end.
    pub descsz: u32,
    /// `FI_XPU_PROV_NOTE_TYPE`.
    pub type_: u32,
    /// "fi_xpu", NUL-padded.
    pub owner: [c_char; 8],
    /// `FI_XPU_PROV_ABI_MAJOR` and `FI_XPU_PROV_ABI_MINOR` the plugin was built for.
    pub abi_major: u32,
    pub abi_minor: u32,
    /// The descriptor's `prov_id` and `version`.
    pub prov_id: u32,
    pub version: u32,
    /// The descriptor's `name`, NUL-terminated.
    pub name: [c_char; 32],
}

/// `fi_xpu_prov_note.namesz`.
pub const FI_XPU_PROV_NOTE_NAMESZ: u32 = 7;
/// `fi_xpu_prov_note.descsz`.
pub const FI_XPU_PROV_NOTE_DESCSZ: u32 = 48;
/// `fi_xpu_prov_note.type_`.
pub const FI_XPU_PROV_NOTE_TYPE: u32 = 0x5850_0001;

const _: () =
    assert!(std::mem::size_of::<fi_xpu_prov_note>() == 20 + FI_XPU_PROV_NOTE_DESCSZ as usize);

/// `cntr_host_update` selectors.
pub const FI_XPU_CNTR_ADD: u32 = 0;
pub const FI_XPU_CNTR_SET: u32 = 1;
pub const FI_XPU_CNTR_ERR: u32 = 2;

/// The one symbol a plugin exports.
#[allow(non_camel_case_types)] // C's name
pub type fi_xpu_prov_ini_fn = unsafe extern "C" fn() -> *const fi_xpu_prov_desc;
