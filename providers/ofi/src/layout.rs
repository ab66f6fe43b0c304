//! Memory layouts shared with the ofi provider's device code. Every struct
//! here is `struct fi_xpu_ofi_<name>` and every constant `FI_XPU_OFI_<NAME>`
//! in `include/fi_xpu/ofi/ofi__types.h`, which is generated from this file
//! (`cargo xtask headers`; `tests/headers.rs` fails when it is stale), so C
//! has no copy of its own; the test below still compiles the header and
//! compares it field by field.
//!
//! All of it lives in host-visible memory allocated through the XPU context
//! (`FI_XPU_ALLOC_HOST`): the device writes ring entries and reads
//! completions; the proxy threads read ring entries and write completions.

/// Magic in the high half of a raw MR descriptor's `id` word.
pub const MR_MAGIC: u64 = 0x4f46_4d52; // "OFMR"

/// Ring opcodes (`fi_xpu_ofi_wqe.op`).
pub const OP_WRITE: u32 = 1;
pub const OP_READ: u32 = 2;
pub const OP_SEND: u32 = 3;
pub const OP_RECV: u32 = 4;
pub const OP_TSEND: u32 = 5;
pub const OP_TRECV: u32 = 6;
pub const OP_ATOMIC: u32 = 7;
pub const OP_FETCH_ATOMIC: u32 = 8;
pub const OP_COMPARE_ATOMIC: u32 = 9;
/// Does nothing but complete in order: used by `flush` to learn that every
/// earlier entry has been issued.
pub const OP_NOP: u32 = 10;
/// Put-with-signal: the write of `buf`/`len` to `raddr`/`rkey`, then the
/// signal word at `tag` (address) / `ignore` (key) of the same peer set to
/// (`atomic` 0) or increased by (`atomic` 1) `data`, once the write is
/// complete at the target.
pub const OP_PUT_SIGNAL: u32 = 11;
/// Later entries wait in the ring until every earlier transmit operation
/// of the endpoint has completed; no completion of its own.
pub const OP_FENCE: u32 = 12;
pub const OP_LAST: u32 = OP_FENCE;

/// Default ring entries per endpoint (power of two).
pub const RING_ENTRIES: u64 = 256;
/// Most bytes of source data an entry posted with `FI_INJECT` carries: the
/// device copies them into the entry's staging slot, so the source may be
/// reused as soon as the post returns.
pub const INJECT_SIZE: u64 = 64;
/// Bytes of one staging slot: the operand at 0 and, for compare atomics,
/// the compare values at `INJECT_SIZE`.
pub const STAGE_SLOT: u64 = 2 * INJECT_SIZE;
/// Default XPU CQ entries.
pub const CQ_ENTRIES: u64 = 1024;

/// One work request, 128 bytes. The device fills every field, then writes
/// `seq = position + 1` last with release ordering at system scope; the
/// proxy treats an entry as present only when `seq` equals the position it
/// expects plus one, so stale entries of the previous lap are never taken.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wqe {
    pub seq: u64,
    pub op: u32,
    /// Atomics: `datatype | op << 16`.
    pub atomic: u32,
    /// `FI_REMOTE_CQ_DATA`, `FI_COMPLETION`, `FI_DELIVERY_COMPLETE`...
    pub flags: u64,
    /// Raw AV entry of the peer (a libfabric `fi_addr_t`).
    pub addr: u64,
    pub buf: u64,
    /// Bytes; element count for atomics.
    pub len: u64,
    /// `id` word of the local buffer's raw MR descriptor, 0 for none.
    pub desc: u64,
    pub raddr: u64,
    pub rkey: u64,
    pub context: u64,
    pub data: u64,
    pub tag: u64,
    pub ignore: u64,
    pub compare: u64,
    pub result: u64,
    /// `id` word of the result (fetch) buffer's descriptor, 0 for none.
    pub result_desc: u64,
}

/// Counter indexes of `EpDev.cntr`.
pub const CNTR_SEND: usize = 0;
pub const CNTR_RECV: usize = 1;
pub const CNTR_READ: usize = 2;
pub const CNTR_WRITE: usize = 3;
pub const CNTR_REM_READ: usize = 4;
pub const CNTR_REM_WRITE: usize = 5;
// The SDK's CNTR_BIND_FLAGS numbers the counters the same way.
const _: () = assert!(matches!(
    [
        CNTR_SEND,
        CNTR_RECV,
        CNTR_READ,
        CNTR_WRITE,
        CNTR_REM_READ,
        CNTR_REM_WRITE
    ],
    [0, 1, 2, 3, 4, 5]
));

/// An endpoint's device block; `fid_xpu.prov_ctx` points here. The three
/// indexes sit on their own cache lines: `prod` is bumped by device groups,
/// `cons` written by the proxy, `cons_cache` by the device when it finds
/// the ring full.
#[repr(C)]
pub struct EpDev {
    pub magic: u64,
    pub ring: u64,
    /// Entries in the ring, a power of two.
    pub size: u64,
    pub caps: u64,
    pub tx_cq: u64,
    pub rx_cq: u64,
    /// Counter blocks (`Cntr`), 0 when not bound: send, recv, read, write,
    /// remote read, remote write.
    pub cntr: [u64; 6],
    pub max_msg: u64,
    /// Most bytes an entry posted with `FI_INJECT` may carry (`INJECT_SIZE`).
    pub inject_size: u64,
    /// The staging slots of `FI_INJECT` entries: `size` slots of
    /// `STAGE_SLOT` bytes, slot `pos & (size - 1)` for ring position `pos`.
    pub stage: u64,
    /// The context's abort word (`fi_xpu_ctx_abort`), 0 when none.
    pub abort: u64,
    pub prod: u64,
    pub _p1: [u64; 7],
    pub cons_cache: u64,
    pub _p2: [u64; 7],
    /// Entries the proxy has taken from the ring.
    pub cons: u64,
    /// Every entry below this position has been issued and every transmit
    /// operation among them has completed.
    pub flushed: u64,
    pub _p3: [u64; 6],
    /// Counts the wake-ups host-side posters sent (diagnostic only).
    pub doorbell: u32,
    /// Set by a progress thread about to block; the first host-side poster
    /// to see it clears it and writes `wake_fd`.
    pub sleeping: u32,
    /// The progress thread's eventfd, -1 before the endpoint is enabled.
    /// Only meaningful in the process that owns the endpoint: a GPU cannot
    /// write it, which is why device-filled rings are polled.
    pub wake_fd: i32,
    pub _p4a: u32,
    pub _p4: [u64; 6],
}
pub const EP_DEV_SIZE: usize = 384;

/// A CQ's device block; `fid_xpu.prov_ctx` points here. `size` entries of
/// `Cqe` follow at `ring`.
#[repr(C)]
pub struct CqDev {
    pub magic: u64,
    pub ring: u64,
    pub size: u64,
    /// `enum fi_cq_format` (never UNSPEC: CONTEXT is stored instead).
    pub format: u64,
    /// Milliseconds `sread` waits at most; negative: no limit.
    pub timeout_ms: i64,
    /// Completions dropped because the ring was full.
    pub overflow: u64,
    /// The context's abort word (`fi_xpu_ctx_abort`), 0 when none.
    pub abort: u64,
    pub _p0: u64,
    /// Next entry to read; readers claim entries with a CAS.
    pub head: u64,
    pub _p1: [u64; 7],
    /// Next entry the proxy writes.
    pub tail: u64,
    pub _p2: [u64; 7],
}
pub const CQ_DEV_SIZE: usize = 192;

/// One completion, 96 bytes; `seq` (position + 1) is written last.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub seq: u64,
    pub flags: u64,
    pub context: u64,
    pub len: u64,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    /// Negative `FI_E*` value of an error entry.
    pub err: i64,
    pub olen: u64,
    /// Source `fi_addr_t` (`FI_ADDR_NOTAVAIL` when unknown).
    pub src: u64,
    pub is_err: u64,
    pub prov_errno: i64,
}

/// A counter (device-visible for an XPU counter, heap for a host one).
#[repr(C)]
#[derive(Default)]
pub struct Cntr {
    pub value: u64,
    pub err: u64,
    /// Validity word (`fi_xpu_handle_word`), checked by device code.
    pub magic: u64,
    /// The context's abort word (`fi_xpu_ctx_abort`), 0 when none.
    pub abort: u64,
    pub _pad: [u64; 4],
}

/// Raw MR descriptor (`fi_xpu_mr_desc`), what a kernel passes as `desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MrDesc {
    /// `MR_MAGIC << 32 | index` in the domain's registration table.
    pub id: u64,
    pub key: u64,
    pub base: u64,
    pub len: u64,
}

#[cfg(test)]
mod tests {
    /// One definition: every struct here is what the generated
    /// include/fi_xpu/ofi/ofi__types.h declares, checked field by field
    /// against the compiled C header.
    #[test]
    fn c_header_matches_field_by_field() {
        let items = fi_xpu_prov_sdk::layout_items! {
            Wqe = "fi_xpu_ofi_wqe" {
                seq, op, atomic, flags, addr, buf, len, desc, raddr, rkey, context, data, tag,
                ignore, compare, result, result_desc
            }
            EpDev = "fi_xpu_ofi_ep_dev" {
                magic, ring, size, caps, tx_cq, rx_cq, cntr, max_msg, inject_size, stage, abort, prod,
                cons_cache, cons, flushed, doorbell, sleeping, wake_fd
            }
            CqDev = "fi_xpu_ofi_cq_dev" {
                magic, ring, size, format, timeout_ms, overflow, abort, head, tail
            }
            Cqe = "fi_xpu_ofi_cqe" {
                seq, flags, context, len, buf, data, tag, err, olen, src, is_err, prov_errno
            }
            Cntr = "fi_xpu_ofi_cntr" { value, err, magic, abort }
            MrDesc = "fi_xpu_ofi_mr_desc" { id, key, base, len }
        };
        fi_xpu_prov_sdk::layout_check::check(
            "fi_xpu/ofi/ofi__types.h",
            include_str!("layout.rs"),
            &items,
        );
    }

    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn sizes() {
        assert_eq!(size_of::<Wqe>(), 128);
        assert_eq!(size_of::<EpDev>(), EP_DEV_SIZE);
        assert_eq!(offset_of!(EpDev, inject_size), 104);
        assert_eq!(offset_of!(EpDev, stage), 112);
        assert_eq!(offset_of!(EpDev, prod), 128);
        assert_eq!(offset_of!(EpDev, cons_cache), 192);
        assert_eq!(offset_of!(EpDev, cons), 256);
        assert_eq!(offset_of!(EpDev, doorbell), 320);
        assert_eq!(offset_of!(EpDev, wake_fd), 328);
        assert_eq!(size_of::<CqDev>(), CQ_DEV_SIZE);
        assert_eq!(offset_of!(CqDev, head), 64);
        assert_eq!(offset_of!(CqDev, tail), 128);
        assert_eq!(size_of::<Cqe>(), 96);
        assert_eq!(size_of::<Cntr>(), 64);
        assert_eq!(size_of::<MrDesc>(), 32);
    }
}
