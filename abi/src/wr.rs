//! The prepared work request (`fi_xpu/wr.h`, generated): what
//! `fi_xpu_prepare_wr` writes into the caller's `wr_buf` from libfabric's
//! `struct fi_wr_attr`, and what the device call `fi_xpu_queue_wr` posts.
//! The layout is the same for every provider: the host side converts the
//! libfabric-style description (fi_addr_t, registration handles) into the
//! raw forms kernels pass (the AV entry and the descriptor bytes), so the
//! device side posts it with the provider's ordinary operation.

/// Size of a prepared work request: `max_tx_wr_desc_size` and
/// `max_rx_wr_desc_size` of `fi_xpu_ctx_getinfo` on providers with
/// `FI_XPU_CAP_WR`.
pub const FI_XPU_WR_SIZE: usize = 256;
/// Bytes of a raw AV address or descriptor a work request carries.
pub const FI_XPU_WR_RAW_SIZE: usize = 32;
/// High half of `fi_xpu_wr.magic`; the low half is the `FI_XPU_API_VERSION`
/// of the library that prepared it.
pub const FI_XPU_WR_MAGIC: u64 = 0x5752_5850_0000_0000;
/// `fi_xpu_wr.present` bits: which raw fields hold a value.
pub const FI_XPU_WR_PEER: u32 = 1 << 0;
pub const FI_XPU_WR_DESC: u32 = 1 << 1;
pub const FI_XPU_WR_RESULT_DESC: u32 = 1 << 2;
pub const FI_XPU_WR_COMPARE_DESC: u32 = 1 << 3;

/// `fi_xpu_wr.op_type`: libfabric's `enum fi_op_type` values, for device
/// code, which has no `<rdma/fi_trigger.h>`.
pub const FI_XPU_WR_OP_RECV: u32 = 0;
pub const FI_XPU_WR_OP_SEND: u32 = 1;
pub const FI_XPU_WR_OP_TRECV: u32 = 2;
pub const FI_XPU_WR_OP_TSEND: u32 = 3;
pub const FI_XPU_WR_OP_READ: u32 = 4;
pub const FI_XPU_WR_OP_WRITE: u32 = 5;
pub const FI_XPU_WR_OP_ATOMIC: u32 = 6;
pub const FI_XPU_WR_OP_FETCH_ATOMIC: u32 = 7;
pub const FI_XPU_WR_OP_COMPARE_ATOMIC: u32 = 8;

/// A prepared work request. Fields are the arguments of the device
/// operation `op_type` (libfabric's `enum fi_op_type`) names.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_xpu_wr {
    /// `FI_XPU_WR_MAGIC | FI_XPU_API_VERSION`
    pub magic: u64,
    /// `fid_xpu.prov_id` of the endpoint it was prepared for.
    pub prov_id: u32,
    /// `enum fi_op_type`
    pub op_type: u32,
    /// `FI_XPU_WR_PEER`, `FI_XPU_WR_DESC`, ...
    pub present: u32,
    /// `enum fi_datatype` and `enum fi_op` of atomics.
    pub datatype: u32,
    pub atomic_op: u32,
    /// Zero.
    pub reserved: u32,
    pub flags: u64,
    /// Local buffer (for atomics: the operand) and its length in bytes
    /// (for atomics: the element count).
    pub buf: u64,
    pub len: u64,
    /// Remote address and key (RMA, atomics).
    pub addr: u64,
    pub key: u64,
    pub data: u64,
    pub tag: u64,
    pub ignore: u64,
    pub context: u64,
    /// Compare operand and result buffer of fetching atomics.
    pub compare: u64,
    pub result: u64,
    /// Zero.
    pub reserved2: u64,
    /// The peer's raw AV address (`fi_xpu_av_lookup`).
    pub peer: [u8; FI_XPU_WR_RAW_SIZE],
    /// Raw descriptors (`fi_xpu_mr_desc`) of buf, result and compare.
    pub desc: [u8; FI_XPU_WR_RAW_SIZE],
    pub result_desc: [u8; FI_XPU_WR_RAW_SIZE],
    pub compare_desc: [u8; FI_XPU_WR_RAW_SIZE],
}

const _: () = assert!(std::mem::size_of::<fi_xpu_wr>() == FI_XPU_WR_SIZE);
