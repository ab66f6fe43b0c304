//! Types and constants declared by `fi_xpu.h`. Names and layouts that
//! upstream libfabric's `fi_xpu.h` defines are kept; extensions are marked.
use crate::libfabric::{fi_hmem_iface, fid};
use std::ffi::{c_char, c_int, c_void};

/// Cooperative scopes: every thread of the scope calls the operation with the
/// same arguments.
pub const FI_XPU_WORK_ITEM: c_int = 0;
pub const FI_XPU_SUBGROUP: c_int = 1;
pub const FI_XPU_WORK_GROUP: c_int = 2;
pub const FI_XPU_DEVICE: c_int = 3;

/// `fi_xpu_alloc` flag: the allocation must be exportable as a DMA-BUF fd.
pub const FI_XPU_ALLOC_DMABUF: u64 = 1 << 0;
/// `fi_xpu_alloc` flag (extension): host RAM that the device can also access.
pub const FI_XPU_ALLOC_HOST: u64 = 1 << 1;
/// `fi_xpu_domain_attr.flags`: run a host progress agent, a thread that
/// moves operations needing the initiator's device code while no kernel
/// runs (providers whose transfers already move without device code accept
/// it and change nothing).
pub const FI_XPU_DOMAIN_HOST_PROGRESS: u64 = 1 << 0;
/// `fi_xpu_ctx_abort` flag: lower the abort word again (without it the
/// call raises it).
pub const FI_XPU_ABORT_CLEAR: u64 = 1 << 0;
/// `fi_xpu_import` flag: the host address is PCIe BAR / MMIO space.
pub const FI_XPU_IMPORT_IOMEMORY: u64 = 1 << 0;
/// `fi_xpu_import` flag: the result must be usable from kernels.
pub const FI_XPU_IMPORT_DEVICEMAP: u64 = 1 << 1;
/// `fi_xpu_import` flag (extension): the resource is the DMA-BUF `fd` at
/// `offset`; `host_addr` may be NULL.
pub const FI_XPU_IMPORT_DMABUF: u64 = 1 << 2;

/// Context capabilities returned by `fi_xpu_ctx_getinfo`.
pub const FI_XPU_CAP_EP: u64 = 1 << 0;
pub const FI_XPU_CAP_CQ: u64 = 1 << 1;
pub const FI_XPU_CAP_CNTR: u64 = 1 << 2;
pub const FI_XPU_CAP_WR: u64 = 1 << 3;

/// Provider identifiers for device-side dispatch (`fid_xpu.prov_id`).
/// 0 is reserved; 1 to 0xffff are libfabric's `enum fi_xpu_provider` (1 is
/// its EFA), never assigned here; fi_xpu's in-tree providers sit from
/// `FI_XPU_PROV_INTREE_BASE`; ids from `FI_XPU_PROV_USER_BASE` up are free
/// for out-of-tree providers.
pub const FI_XPU_PROV_EFA: u32 = 1;
pub const FI_XPU_PROV_INTREE_BASE: u32 = 0x1_0000;
pub const FI_XPU_PROV_SHM: u32 = FI_XPU_PROV_INTREE_BASE + 1;
pub const FI_XPU_PROV_OFI: u32 = FI_XPU_PROV_INTREE_BASE + 2;
pub const FI_XPU_PROV_USER_BASE: u32 = 0x2_0000;

/// `fid.fclass` of an XPU context (`FI_CLASS_*` has no value for it in
/// libfabric 1.x; this one cannot collide with theirs).
pub const FI_XPU_CLASS_CTX: usize = 0x5843_5800;

/// Memory callbacks an application may supply in `fi_xpu_ctx_open_attr.ops`.
/// `size` is `sizeof` the struct the caller was built with: fields past it are
/// taken as absent. `import` takes the DMA-BUF `fd`/`offset` pair (extension);
/// `export_dmabuf` (extension, optional) turns an address range the device owns into
/// a DMA-BUF fd, so memory not allocated through `alloc` can still be shared.
#[repr(C)]
pub struct fi_xpu_mem_ops {
    pub size: usize,
    pub alloc: Option<
        unsafe extern "C" fn(
            device: u64,
            size: u64,
            alignment: u64,
            flags: u64,
            addr: *mut *mut c_void,
            fd: *mut c_int,
            offset: *mut u64,
        ) -> c_int,
    >,
    pub import: Option<
        unsafe extern "C" fn(
            device: u64,
            host_addr: *mut c_void,
            fd: c_int,
            offset: u64,
            size: u64,
            flags: u64,
            dev_addr: *mut *mut c_void,
        ) -> c_int,
    >,
    pub unimport: Option<unsafe extern "C" fn(device: u64, dev_addr: *mut c_void) -> c_int>,
    pub free: Option<unsafe extern "C" fn(device: u64, addr: *mut c_void)>,
    pub export_dmabuf: Option<
        unsafe extern "C" fn(
            device: u64,
            addr: *mut c_void,
            size: u64,
            fd: *mut c_int,
            offset: *mut u64,
        ) -> c_int,
    >,
}

/// Input to `fi_xpu_ctx_open`: which device, and optionally how to reach its memory.
#[repr(C)]
pub struct fi_xpu_ctx_open_attr {
    pub iface: fi_hmem_iface,
    pub device: u64,
    pub ops: *mut fi_xpu_mem_ops,
}

/// Output of `fi_xpu_ctx_getinfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct fi_xpu_ctx_info {
    pub caps: u64,
    pub av_addr_size: usize,
    pub mr_desc_size: usize,
    pub max_tx_wr_desc_size: usize,
    pub max_rx_wr_desc_size: usize,
}

/// Base of every handle a kernel receives. `prov_ctx` is the provider's
/// device-visible state for the object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fid_xpu {
    pub fclass: u32,
    pub prov_id: u32,
    pub prov_ctx: u64,
}

/// Device handle of an endpoint.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct fid_xpu_ep {
    pub fid: fid_xpu,
}

/// Device handle of a completion queue.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct fid_xpu_cq {
    pub fid: fid_xpu,
}

/// Device handle of a counter.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct fid_xpu_cntr {
    pub fid: fid_xpu,
}

/// Host object: a provider instance. Only the fid is public.
#[repr(C)]
pub struct fid_xpu_domain {
    pub fid: fid,
}

/// Host object: one device (iface + ordinal + memory operations).
#[repr(C)]
pub struct fid_xpu_host_ctx {
    pub fid: fid,
}

/// Host object: address vector.
#[repr(C)]
pub struct fid_xpu_av {
    pub fid: fid,
}

/// Host object: memory registration.
#[repr(C)]
pub struct fid_xpu_mr {
    pub fid: fid,
}

/// Host object: endpoint (the kernel's handle is `struct fid_xpu_ep`).
#[repr(C)]
pub struct fid_xpu_host_ep {
    pub fid: fid,
}

/// Host object: completion queue (the kernel's handle is `struct fid_xpu_cq`).
#[repr(C)]
pub struct fid_xpu_host_cq {
    pub fid: fid,
}

/// Host object: counter (the kernel's handle is `struct fid_xpu_cntr`).
#[repr(C)]
pub struct fid_xpu_host_cntr {
    pub fid: fid,
}

/// One usable provider, as listed by `fi_xpu_getinfo`.
#[repr(C)]
pub struct fi_xpu_info {
    pub next: *mut fi_xpu_info,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub prov_id: u32,
    /// `FI_XPU_CAP_*`
    pub caps: u64,
    /// Bit `1 << iface` for every `enum fi_hmem_iface` the provider serves.
    pub ifaces: u64,
    /// Size of the address `fi_xpu_getname` returns.
    pub addrlen: usize,
    /// Core-private; do not touch.
    pub handle: *mut c_void,
    /// The largest sizes the provider serves. (The library allocates
    /// this structure, so fields are only ever added at its end.)
    pub limits: fi_xpu_limits,
}

/// The largest sizes a provider serves; a request above one is refused
/// with `-FI_EINVAL` and a log line that names the bound. 0: the provider
/// states no bound of its own (the memory the request needs still bounds
/// it, and a transport may bound it lower per domain).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fi_xpu_limits {
    /// Entries of a CQ (`fi_xpu_cq_attr.size`).
    pub cq_size: u64,
    /// Operations an endpoint queues for sending (`fi_xpu_ep_attr.tx_size`).
    pub tx_depth: u64,
    /// Receives an endpoint holds posted (`fi_xpu_ep_attr.rx_size`).
    pub rx_depth: u64,
    /// Bytes of one message, read or write.
    pub msg_size: u64,
}

/// Optional input to `fi_xpu_domain` (NULL: defaults). `size` versions it.
#[repr(C)]
pub struct fi_xpu_domain_attr {
    pub size: usize,
    /// Provider-specific choice of transport, e.g. the libfabric provider the
    /// ofi provider runs over ("tcp"); NULL for the provider's default.
    pub fabric_prov: *const c_char,
    /// Number of progress threads, for providers that have any; 0: default.
    pub progress_threads: u32,
    pub reserved: u32,
    pub flags: u64,
}

impl Default for fi_xpu_domain_attr {
    /// What a NULL `attr` means: the provider's defaults.
    fn default() -> Self {
        fi_xpu_domain_attr {
            size: std::mem::size_of::<fi_xpu_domain_attr>(),
            fabric_prov: std::ptr::null(),
            progress_threads: 0,
            reserved: 0,
            flags: 0,
        }
    }
}

/// Optional input to `fi_xpu_av_open`.
#[repr(C)]
pub struct fi_xpu_av_attr {
    /// Expected number of entries (a hint); 0: provider default.
    pub count: usize,
    pub flags: u64,
}

/// Input to `fi_xpu_cq_open`.
#[repr(C)]
pub struct fi_xpu_cq_attr {
    /// Number of entries.
    pub size: usize,
    pub flags: u64,
    /// `enum fi_cq_format`; `FI_CQ_FORMAT_UNSPEC` means `FI_CQ_FORMAT_CONTEXT`.
    pub format: c_int,
    /// Milliseconds a blocking device read (`fi_xpu_cq_sread`) waits at most;
    /// negative: no limit.
    pub timeout: c_int,
    /// Set: an XPU CQ readable by kernels. NULL: a host CQ.
    pub xpu_ctx: *mut fid_xpu_host_ctx,
}

/// Input to `fi_xpu_cntr_open`.
#[repr(C)]
pub struct fi_xpu_cntr_attr {
    pub flags: u64,
    /// Set: an XPU counter readable by kernels. NULL: a host counter.
    pub xpu_ctx: *mut fid_xpu_host_ctx,
}

/// Input to `fi_xpu_endpoint`.
#[repr(C)]
pub struct fi_xpu_ep_attr {
    /// Capabilities wanted (`FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC`); 0: all.
    pub caps: u64,
    /// Transmit and receive queue depths; 0: provider default.
    pub tx_size: usize,
    pub rx_size: usize,
    pub flags: u64,
    /// The device that posts on this endpoint (required).
    pub xpu_ctx: *mut fid_xpu_host_ctx,
}
