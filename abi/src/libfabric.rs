//! Mirrors of libfabric's own types and values. The public header takes these
//! from libfabric's headers when present and from ABI-identical stand-ins
//! otherwise; a C test checks that both agree with these values.
use std::ffi::{c_char, c_int, c_void};

#[allow(non_camel_case_types)] // C's name
pub type fi_addr_t = u64;
pub const FI_ADDR_UNSPEC: fi_addr_t = u64::MAX;
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;

/// `enum fi_hmem_iface`
#[allow(non_camel_case_types)] // C's name
pub type fi_hmem_iface = c_int;
pub const FI_HMEM_SYSTEM: fi_hmem_iface = 0;
pub const FI_HMEM_CUDA: fi_hmem_iface = 1;
pub const FI_HMEM_ROCR: fi_hmem_iface = 2;
pub const FI_HMEM_ZE: fi_hmem_iface = 3;
pub const FI_HMEM_NEURON: fi_hmem_iface = 4;
pub const FI_HMEM_SYNAPSEAI: fi_hmem_iface = 5;

/// The name log lines give an iface ("cuda" for `FI_HMEM_CUDA`).
pub fn fi_hmem_iface_name(iface: fi_hmem_iface) -> &'static str {
    match iface {
        FI_HMEM_SYSTEM => "system",
        FI_HMEM_CUDA => "cuda",
        FI_HMEM_ROCR => "rocr",
        FI_HMEM_ZE => "ze",
        FI_HMEM_NEURON => "neuron",
        FI_HMEM_SYNAPSEAI => "synapseai",
        _ => "unknown",
    }
}

/// `enum fi_cq_format`
#[allow(non_camel_case_types)] // C's name
pub type fi_cq_format = c_int;
pub const FI_CQ_FORMAT_UNSPEC: fi_cq_format = 0;
pub const FI_CQ_FORMAT_CONTEXT: fi_cq_format = 1;
pub const FI_CQ_FORMAT_MSG: fi_cq_format = 2;
pub const FI_CQ_FORMAT_DATA: fi_cq_format = 3;
pub const FI_CQ_FORMAT_TAGGED: fi_cq_format = 4;

/// `enum fi_datatype` (point-to-point atomic types)
pub mod datatype {
    pub const FI_INT8: i32 = 0;
    pub const FI_UINT8: i32 = 1;
    pub const FI_INT16: i32 = 2;
    pub const FI_UINT16: i32 = 3;
    pub const FI_INT32: i32 = 4;
    pub const FI_UINT32: i32 = 5;
    pub const FI_INT64: i32 = 6;
    pub const FI_UINT64: i32 = 7;
    pub const FI_FLOAT: i32 = 8;
    pub const FI_DOUBLE: i32 = 9;
    pub const FI_DATATYPE_LAST: i32 = 14;
}

/// `enum fi_op` (point-to-point atomic operations)
pub mod op {
    pub const FI_MIN: i32 = 0;
    pub const FI_MAX: i32 = 1;
    pub const FI_SUM: i32 = 2;
    pub const FI_PROD: i32 = 3;
    pub const FI_LOR: i32 = 4;
    pub const FI_LAND: i32 = 5;
    pub const FI_BOR: i32 = 6;
    pub const FI_BAND: i32 = 7;
    pub const FI_LXOR: i32 = 8;
    pub const FI_BXOR: i32 = 9;
    pub const FI_ATOMIC_READ: i32 = 10;
    pub const FI_ATOMIC_WRITE: i32 = 11;
    pub const FI_CSWAP: i32 = 12;
    pub const FI_CSWAP_NE: i32 = 13;
    pub const FI_CSWAP_LE: i32 = 14;
    pub const FI_CSWAP_LT: i32 = 15;
    pub const FI_CSWAP_GE: i32 = 16;
    pub const FI_CSWAP_GT: i32 = 17;
    pub const FI_MSWAP: i32 = 18;
    pub const FI_ATOMIC_OP_LAST: i32 = 19;
}

/// Capability and operation flags (`FI_*` bits of `<rdma/fabric.h>`).
pub mod flags {
    pub const FI_MSG: u64 = 1 << 1;
    pub const FI_RMA: u64 = 1 << 2;
    pub const FI_TAGGED: u64 = 1 << 3;
    pub const FI_ATOMIC: u64 = 1 << 4;
    pub const FI_READ: u64 = 1 << 8;
    pub const FI_WRITE: u64 = 1 << 9;
    pub const FI_RECV: u64 = 1 << 10;
    pub const FI_SEND: u64 = 1 << 11;
    pub const FI_TRANSMIT: u64 = FI_SEND;
    pub const FI_REMOTE_READ: u64 = 1 << 12;
    pub const FI_REMOTE_WRITE: u64 = 1 << 13;
    pub const FI_MULTI_RECV: u64 = 1 << 16;
    pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
    /// More operations follow: the provider may defer starting this one
    /// until an operation without it, or a flush.
    pub const FI_MORE: u64 = 1 << 18;
    pub const FI_COMPLETION: u64 = 1 << 24;
    pub const FI_INJECT: u64 = 1 << 25;
    pub const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
    pub const FI_HMEM: u64 = 1 << 47;
    /// libfabric 2.x's `FI_XPU` (bit 44; 1.x has `FI_XPU_TRIGGER` there).
    pub const FI_XPU: u64 = 1 << 44;
}

/// `FI_CLASS_*` values used by fi_xpu objects.
pub mod class {
    pub const FI_CLASS_DOMAIN: usize = 2;
    pub const FI_CLASS_EP: usize = 3;
    pub const FI_CLASS_AV: usize = 11;
    pub const FI_CLASS_MR: usize = 12;
    pub const FI_CLASS_CQ: usize = 14;
    pub const FI_CLASS_CNTR: usize = 15;
}

/// Error numbers, positive as in libfabric; calls return them negated.
pub mod errno {
    pub const FI_SUCCESS: i32 = 0;
    pub const FI_EPERM: i32 = 1;
    pub const FI_ENOENT: i32 = 2;
    pub const FI_EINTR: i32 = 4;
    pub const FI_EIO: i32 = 5;
    pub const FI_E2BIG: i32 = 7;
    pub const FI_EBADF: i32 = 9;
    pub const FI_EAGAIN: i32 = 11;
    pub const FI_ENOMEM: i32 = 12;
    pub const FI_EACCES: i32 = 13;
    pub const FI_EFAULT: i32 = 14;
    pub const FI_EBUSY: i32 = 16;
    pub const FI_ENODEV: i32 = 19;
    pub const FI_EINVAL: i32 = 22;
    pub const FI_EMFILE: i32 = 24;
    pub const FI_ENOSPC: i32 = 28;
    pub const FI_ENOSYS: i32 = 38;
    pub const FI_ENOMSG: i32 = 42;
    pub const FI_ENODATA: i32 = 61;
    pub const FI_EOVERFLOW: i32 = 75;
    pub const FI_EMSGSIZE: i32 = 90;
    pub const FI_ENOPROTOOPT: i32 = 92;
    pub const FI_EOPNOTSUPP: i32 = 95;
    pub const FI_EADDRINUSE: i32 = 98;
    pub const FI_EADDRNOTAVAIL: i32 = 99;
    pub const FI_ENETDOWN: i32 = 100;
    pub const FI_ENETUNREACH: i32 = 101;
    pub const FI_ECONNABORTED: i32 = 103;
    pub const FI_ECONNRESET: i32 = 104;
    pub const FI_ENOBUFS: i32 = 105;
    pub const FI_EISCONN: i32 = 106;
    pub const FI_ENOTCONN: i32 = 107;
    pub const FI_ESHUTDOWN: i32 = 108;
    pub const FI_ETIMEDOUT: i32 = 110;
    pub const FI_ECONNREFUSED: i32 = 111;
    pub const FI_EHOSTDOWN: i32 = 112;
    pub const FI_EHOSTUNREACH: i32 = 113;
    pub const FI_EALREADY: i32 = 114;
    pub const FI_EINPROGRESS: i32 = 115;
    pub const FI_EREMOTEIO: i32 = 121;
    pub const FI_ECANCELED: i32 = 125;
    pub const FI_EKEYREJECTED: i32 = 129;
    pub const FI_EOTHER: i32 = 256;
    pub const FI_ETOOSMALL: i32 = 257;
    pub const FI_EOPBADSTATE: i32 = 258;
    pub const FI_EAVAIL: i32 = 259;
    pub const FI_EBADFLAGS: i32 = 260;
    pub const FI_ENOEQ: i32 = 261;
    pub const FI_EDOMAIN: i32 = 262;
    pub const FI_ENOCQ: i32 = 263;
    pub const FI_ECRC: i32 = 264;
    pub const FI_ETRUNC: i32 = 265;
    pub const FI_ENOKEY: i32 = 266;
    pub const FI_ENOAV: i32 = 267;
    pub const FI_EOVERRUN: i32 = 268;
    pub const FI_ENORX: i32 = 269;
}

/// `struct fi_ops`: the generic operations every fid points to.
#[repr(C)]
pub struct fi_ops {
    pub size: usize,
    pub close: Option<unsafe extern "C" fn(fid: *mut fid) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(fid: *mut fid, bfid: *mut fid, flags: u64) -> c_int>,
    pub control:
        Option<unsafe extern "C" fn(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int>,
    pub ops_open: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
    pub tostr: Option<unsafe extern "C" fn(fid: *const fid, buf: *mut c_char, len: usize) -> c_int>,
    pub ops_set: Option<
        unsafe extern "C" fn(
            fid: *mut fid,
            name: *const c_char,
            flags: u64,
            ops: *mut c_void,
            context: *mut c_void,
        ) -> c_int,
    >,
}

/// `struct fid`: the head of every fi_xpu host object.
#[repr(C)]
pub struct fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *mut fi_ops,
}

/// `struct fi_cq_entry`
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_entry {
    pub op_context: *mut c_void,
}

/// `struct fi_cq_msg_entry`
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_msg_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
}

/// `struct fi_cq_data_entry`
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_data_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
}

/// `struct fi_cq_tagged_entry`
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

/// `struct fi_cq_err_entry`
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

impl Default for fi_cq_err_entry {
    fn default() -> Self {
        Self {
            op_context: std::ptr::null_mut(),
            flags: 0,
            len: 0,
            buf: std::ptr::null_mut(),
            data: 0,
            tag: 0,
            olen: 0,
            err: 0,
            prov_errno: 0,
            err_data: std::ptr::null_mut(),
            err_data_size: 0,
        }
    }
}

/// `struct iovec` (`<sys/uio.h>`)
#[repr(C)]
pub struct iovec {
    pub iov_base: *mut c_void,
    pub iov_len: usize,
}

/// `struct fi_rma_iov`
#[repr(C)]
pub struct fi_rma_iov {
    pub addr: u64,
    pub len: usize,
    pub key: u64,
}

/// `struct fi_ioc`
#[repr(C)]
pub struct fi_ioc {
    pub addr: *mut c_void,
    pub count: usize,
}

/// `struct fi_rma_ioc`
#[repr(C)]
pub struct fi_rma_ioc {
    pub addr: u64,
    pub count: usize,
    pub key: u64,
}

/// `struct fi_msg`
#[repr(C)]
pub struct fi_msg {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_msg_tagged`
#[repr(C)]
pub struct fi_msg_tagged {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub tag: u64,
    pub ignore: u64,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_msg_rma`
#[repr(C)]
pub struct fi_msg_rma {
    pub msg_iov: *const iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_iov,
    pub rma_iov_count: usize,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_msg_atomic`
#[repr(C)]
pub struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: usize,
    pub datatype: c_int,
    pub op: c_int,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_msg_fetch` and `struct fi_msg_compare` (same layout)
#[repr(C)]
pub struct fi_msg_fetch {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
}

/// `struct fi_op_msg` (`<rdma/fi_trigger.h>`); `ep` is the endpoint the
/// request is for (for fi_xpu: its `struct fid_xpu_host_ep`).
#[repr(C)]
pub struct fi_op_msg {
    pub ep: *mut c_void,
    pub msg: fi_msg,
    pub flags: u64,
}

/// `struct fi_op_tagged`
#[repr(C)]
pub struct fi_op_tagged {
    pub ep: *mut c_void,
    pub msg: fi_msg_tagged,
    pub flags: u64,
}

/// `struct fi_op_rma`
#[repr(C)]
pub struct fi_op_rma {
    pub ep: *mut c_void,
    pub msg: fi_msg_rma,
    pub flags: u64,
}

/// `struct fi_op_atomic`
#[repr(C)]
pub struct fi_op_atomic {
    pub ep: *mut c_void,
    pub msg: fi_msg_atomic,
    pub flags: u64,
}

/// `struct fi_op_fetch_atomic`
#[repr(C)]
pub struct fi_op_fetch_atomic {
    pub ep: *mut c_void,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub flags: u64,
}

/// `struct fi_op_compare_atomic`
#[repr(C)]
pub struct fi_op_compare_atomic {
    pub ep: *mut c_void,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub compare: fi_msg_fetch,
    pub flags: u64,
}

/// `enum fi_op_type` (`<rdma/fi_trigger.h>`)
pub mod op_type {
    pub const FI_OP_RECV: u32 = 0;
    pub const FI_OP_SEND: u32 = 1;
    pub const FI_OP_TRECV: u32 = 2;
    pub const FI_OP_TSEND: u32 = 3;
    pub const FI_OP_READ: u32 = 4;
    pub const FI_OP_WRITE: u32 = 5;
    pub const FI_OP_ATOMIC: u32 = 6;
    pub const FI_OP_FETCH_ATOMIC: u32 = 7;
    pub const FI_OP_COMPARE_ATOMIC: u32 = 8;
    pub const FI_OP_CNTR_SET: u32 = 9;
    pub const FI_OP_CNTR_ADD: u32 = 10;
}

/// `fi_control` commands of the work-request API (libfabric's RFC,
/// ofiwg/libfabric#12695), issued on an endpoint.
pub mod control {
    pub const FI_QUEUE_WORK: i32 = 11;
    pub const FI_FLUSH_WORK: i32 = 13;
    pub const FI_PREPARE_WORK: i32 = 22;
}

/// `FI_WR`: the work-request capability bit of the RFC.
pub const FI_WR: u64 = 1 << 39;

/// `struct fi_wr_attr` (libfabric's RFC, ofiwg/libfabric#12695): a work
/// request to prepare into `wr_buf`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_wr_attr {
    /// `enum fi_op_type`
    pub op_type: c_int,
    /// The `fi_op_*` descriptor `op_type` names.
    pub op: *mut c_void,
    pub wr_buf: *mut c_void,
    pub wr_len: usize,
}
