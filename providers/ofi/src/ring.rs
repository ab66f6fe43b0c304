//! Checks of ring entries taken from device-written memory. Everything in a
//! `Wqe` is untrusted: a malformed entry becomes an error completion, never
//! a libfabric call with bad arguments.
use crate::layout::*;
use fi_xpu_abi::datatype::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::op::*;
use fi_xpu_prov_sdk::{Error, Result};

bitflags::bitflags! {
    /// Flags a device may set on an entry.
    /// `FI_MORE` only delays the doorbell on the device side.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct WqeFlags: u64 {
        const REMOTE_CQ_DATA = FI_REMOTE_CQ_DATA;
        const COMPLETION = FI_COMPLETION;
        const DELIVERY_COMPLETE = FI_DELIVERY_COMPLETE;
        const INJECT = FI_INJECT;
        const MORE = FI_MORE;
    }
}
/// Every bit of `WqeFlags`.
pub const WQE_FLAGS: u64 = WqeFlags::all().bits();
/// Most elements one atomic entry may carry.
pub const MAX_ATOMIC_COUNT: u64 = 64;

/// What the proxy knows when it checks an entry.
pub struct Limits {
    pub max_msg: u64,
    pub has_atomic: bool,
}

/// A registration as the proxy recorded it.
#[derive(Clone, Copy, Debug)]
pub struct MrRange {
    pub base: u64,
    pub len: u64,
}

pub fn datatype_size(dt: i32) -> Option<u64> {
    Some(match dt {
        FI_INT8 | FI_UINT8 => 1,
        FI_INT16 | FI_UINT16 => 2,
        FI_INT32 | FI_UINT32 | FI_FLOAT => 4,
        FI_INT64 | FI_UINT64 | FI_DOUBLE => 8,
        _ => return None,
    })
}

fn is_float(dt: i32) -> bool {
    dt == FI_FLOAT || dt == FI_DOUBLE
}

/// Checks the atomic fields; returns (datatype, op, bytes).
pub fn check_atomic(w: &Wqe) -> Result<(i32, i32, u64)> {
    let dt = (w.atomic & 0xffff) as i32;
    let op = (w.atomic >> 16) as i32;
    let size = datatype_size(dt).ok_or(Error::INVAL)?;
    if w.len == 0 || w.len > MAX_ATOMIC_COUNT {
        return Err(Error::INVAL);
    }
    let ok = match w.op {
        OP_ATOMIC => (FI_MIN..=FI_ATOMIC_WRITE).contains(&op) && op != FI_ATOMIC_READ,
        OP_FETCH_ATOMIC => (FI_MIN..=FI_ATOMIC_WRITE).contains(&op),
        OP_COMPARE_ATOMIC => (FI_CSWAP..=FI_MSWAP).contains(&op),
        _ => false,
    };
    if !ok {
        return Err(Error::INVAL);
    }
    // Bitwise and logical operations have no meaning on floats.
    let bitwise = matches!(
        op,
        FI_LOR | FI_LAND | FI_BOR | FI_BAND | FI_LXOR | FI_BXOR | FI_MSWAP
    );
    if bitwise && is_float(dt) {
        return Err(Error::OPNOTSUPP);
    }
    Ok((dt, op, size * w.len))
}

fn range_ok(buf: u64, len: u64) -> bool {
    buf.checked_add(len).is_some() && (buf != 0 || len == 0)
}

/// Validates one entry. `mr` resolves a descriptor id to its registration.
/// Generic, not `dyn`: the proxy's lookups are inlined into the check it
/// runs for every entry.
pub fn check(
    w: &Wqe,
    lim: &Limits,
    mr: &impl Fn(u64) -> Option<MrRange>,
    addr_ok: &impl Fn(u64) -> bool,
) -> Result<()> {
    if w.op == 0 || w.op > OP_LAST {
        return Err(Error::INVAL);
    }
    if WqeFlags::from_bits(w.flags).is_none() {
        return Err(Error::BADFLAGS);
    }
    if w.op == OP_NOP || w.op == OP_FENCE {
        return Ok(());
    }
    if w.op == OP_PUT_SIGNAL {
        check_signal(w, lim)?;
    }
    let inject = w.flags & FI_INJECT != 0;
    if inject && !has_source(w.op) {
        return Err(Error::INVAL);
    }
    let bytes = match w.op {
        OP_ATOMIC | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC => {
            if !lim.has_atomic {
                return Err(Error::OPNOTSUPP);
            }
            check_atomic(w)?.2
        }
        _ => w.len,
    };
    if bytes > lim.max_msg {
        return Err(Error::MSGSIZE);
    }
    let read_only_fetch = w.op == OP_FETCH_ATOMIC && (w.atomic >> 16) as i32 == FI_ATOMIC_READ;
    if inject && !read_only_fetch && bytes > INJECT_SIZE {
        return Err(Error::MSGSIZE);
    }
    // An injected source lies in the entry's staging slot, whatever `buf`
    // and `compare` say.
    let source_in_buf = !read_only_fetch && !inject;
    if source_in_buf && !range_ok(w.buf, bytes) {
        return Err(Error::INVAL);
    }
    let covered = |id: u64, buf: u64, len: u64| -> Result<()> {
        if id == 0 {
            return Ok(());
        }
        let r = mr(id).ok_or(Error::INVAL)?;
        if buf < r.base || buf - r.base > r.len || len > r.len - (buf - r.base) {
            return Err(Error::ACCES);
        }
        Ok(())
    };
    if source_in_buf {
        covered(w.desc, w.buf, bytes)?;
    }
    match w.op {
        OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC => {
            if !range_ok(w.result, bytes) || w.result == 0 {
                return Err(Error::INVAL);
            }
            covered(w.result_desc, w.result, bytes)?;
            if w.op == OP_COMPARE_ATOMIC
                && !inject
                && (w.compare == 0 || !range_ok(w.compare, bytes))
            {
                return Err(Error::INVAL);
            }
        }
        _ => {}
    }
    let directed = !matches!(w.op, OP_RECV | OP_TRECV) || w.addr != u64::MAX;
    if directed && !addr_ok(w.addr) {
        return Err(Error::INVAL);
    }
    Ok(())
}

/// The signal part of a put-with-signal: atomics on the transport, no
/// remote CQ data (`data` carries the signal value), an 8-byte aligned
/// signal word, a known signal operation (0 set, 1 add).
fn check_signal(w: &Wqe, lim: &Limits) -> Result<()> {
    if w.flags & FI_REMOTE_CQ_DATA != 0 {
        return Err(Error::BADFLAGS);
    }
    if !lim.has_atomic {
        return Err(Error::OPNOTSUPP);
    }
    if !w.tag.is_multiple_of(8) || w.atomic > SIGNAL_ADD {
        return Err(Error::INVAL);
    }
    Ok(())
}

/// Signal operations of a put-with-signal (`Wqe.atomic`), as
/// `FI_XPU_SIGNAL_SET` and `FI_XPU_SIGNAL_ADD` of fi_xpu/device_signal.h.
pub const SIGNAL_SET: u32 = 0;
pub const SIGNAL_ADD: u32 = 1;

/// Whether the operation sends data from a local buffer (the ones that
/// take `FI_INJECT`).
pub fn has_source(op: u32) -> bool {
    matches!(
        op,
        OP_WRITE | OP_SEND | OP_TSEND | OP_ATOMIC | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC
    )
}

/// The local buffers of an entry, `(address, bytes)`: at most three (source,
/// compare, result), kept inline so that the proxy's check allocates nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Bufs {
    v: [(u64, u64); 3],
    n: usize,
}

impl Bufs {
    fn push(&mut self, b: (u64, u64)) {
        self.v[self.n] = b;
        self.n += 1;
    }

    pub fn as_slice(&self) -> &[(u64, u64)] {
        &self.v[..self.n]
    }
}

/// The local memory a checked entry makes libfabric read or write, as
/// (address, bytes): the source or destination buffer (unless injected),
/// the compare buffer, the fetch result. Each must lie in memory the
/// context knows (allocated, imported or registered) before the entry
/// reaches libfabric.
pub fn local_buffers(w: &Wqe) -> Bufs {
    let mut out = Bufs::default();
    let inject = w.flags & FI_INJECT != 0;
    let bytes = match w.op {
        OP_ATOMIC | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC => match check_atomic(w) {
            Ok((_, _, b)) => b,
            Err(_) => return out,
        },
        OP_NOP | OP_FENCE => return out,
        _ => w.len,
    };
    let read_only_fetch = w.op == OP_FETCH_ATOMIC && (w.atomic >> 16) as i32 == FI_ATOMIC_READ;
    if bytes > 0 && !read_only_fetch && !inject {
        out.push((w.buf, bytes));
    }
    if w.op == OP_COMPARE_ATOMIC && !inject {
        out.push((w.compare, bytes));
    }
    if matches!(w.op, OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC) {
        out.push((w.result, bytes));
    }
    out
}

/// Completion flags of an operation (`fi_cq_*_entry.flags`).
pub fn completion_flags(op: u32) -> u64 {
    match op {
        OP_WRITE | OP_PUT_SIGNAL => FI_RMA | FI_WRITE,
        OP_READ => FI_RMA | FI_READ,
        OP_SEND => FI_MSG | FI_SEND,
        OP_RECV => FI_MSG | FI_RECV,
        OP_TSEND => FI_TAGGED | FI_SEND,
        OP_TRECV => FI_TAGGED | FI_RECV,
        OP_ATOMIC => FI_ATOMIC | FI_WRITE,
        OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC => FI_ATOMIC | FI_READ,
        _ => 0,
    }
}

/// The counter an operation's completion counts on (`EpDev.cntr` index).
pub fn counter_of(op: u32) -> Option<usize> {
    match op {
        OP_SEND | OP_TSEND => Some(CNTR_SEND),
        OP_RECV | OP_TRECV => Some(CNTR_RECV),
        OP_WRITE | OP_PUT_SIGNAL | OP_ATOMIC => Some(CNTR_WRITE),
        OP_READ | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC => Some(CNTR_READ),
        _ => None,
    }
}

pub fn is_receive(op: u32) -> bool {
    matches!(op, OP_RECV | OP_TRECV)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits {
            max_msg: 1 << 20,
            has_atomic: true,
        }
    }

    fn mr(id: u64) -> Option<MrRange> {
        (id == 7).then_some(MrRange {
            base: 0x1000,
            len: 0x100,
        })
    }

    fn any(_: u64) -> bool {
        true
    }

    fn write() -> Wqe {
        Wqe {
            op: OP_WRITE,
            buf: 0x1000,
            len: 0x100,
            desc: 7,
            ..Default::default()
        }
    }

    #[test]
    fn accepts_good_entries() {
        assert_eq!(check(&write(), &lim(), &mr, &any), Ok(()));
        let nop = Wqe {
            op: OP_NOP,
            ..Default::default()
        };
        assert_eq!(check(&nop, &lim(), &mr, &any), Ok(()));
        let recv_any = Wqe {
            op: OP_RECV,
            buf: 0x1000,
            len: 8,
            addr: u64::MAX,
            ..Default::default()
        };
        assert_eq!(check(&recv_any, &lim(), &mr, &|_| false), Ok(()));
    }

    #[test]
    fn put_with_signal_entries() {
        let l = lim();
        let put = Wqe {
            op: OP_PUT_SIGNAL,
            tag: 0x2000,
            atomic: SIGNAL_ADD,
            ..write()
        };
        assert_eq!(check(&put, &l, &mr, &any), Ok(()));
        assert_eq!(local_buffers(&put).as_slice(), [(0x1000, 0x100)]);
        assert_eq!(completion_flags(OP_PUT_SIGNAL), FI_RMA | FI_WRITE);
        assert_eq!(counter_of(OP_PUT_SIGNAL), Some(CNTR_WRITE));
        let cq_data = Wqe {
            flags: FI_REMOTE_CQ_DATA,
            ..put
        };
        assert_eq!(check(&cq_data, &l, &mr, &any), Err(Error::BADFLAGS));
        let inject = Wqe {
            flags: FI_INJECT,
            ..put
        };
        assert_eq!(check(&inject, &l, &mr, &any), Err(Error::INVAL));
        let misaligned = Wqe { tag: 0x2004, ..put };
        assert_eq!(check(&misaligned, &l, &mr, &any), Err(Error::INVAL));
        let unknown = Wqe { atomic: 2, ..put };
        assert_eq!(check(&unknown, &l, &mr, &any), Err(Error::INVAL));
        let no_atomics = Limits {
            has_atomic: false,
            ..l
        };
        assert_eq!(check(&put, &no_atomics, &mr, &any), Err(Error::OPNOTSUPP));
        let fence = Wqe {
            op: OP_FENCE,
            ..write()
        };
        assert_eq!(check(&fence, &l, &mr, &any), Ok(()));
        assert!(local_buffers(&fence).as_slice().is_empty());
    }

    #[test]
    fn rejects_malformed_entries() {
        let l = lim();
        let bad_op = Wqe { op: 99, ..write() };
        assert_eq!(check(&bad_op, &l, &mr, &any), Err(Error::INVAL));
        let zero_op = Wqe { op: 0, ..write() };
        assert_eq!(check(&zero_op, &l, &mr, &any), Err(Error::INVAL));
        let big = Wqe {
            len: 2 << 20,
            desc: 0,
            ..write()
        };
        assert_eq!(check(&big, &l, &mr, &any), Err(Error::MSGSIZE));
        let bad_desc = Wqe { desc: 8, ..write() };
        assert_eq!(check(&bad_desc, &l, &mr, &any), Err(Error::INVAL));
        let outside = Wqe {
            buf: 0x1080,
            ..write()
        };
        assert_eq!(check(&outside, &l, &mr, &any), Err(Error::ACCES));
        let wrap = Wqe {
            buf: u64::MAX - 4,
            len: 16,
            desc: 0,
            ..write()
        };
        assert_eq!(check(&wrap, &l, &mr, &any), Err(Error::INVAL));
        let null = Wqe {
            buf: 0,
            desc: 0,
            ..write()
        };
        assert_eq!(check(&null, &l, &mr, &any), Err(Error::INVAL));
        let flags = Wqe {
            flags: 1 << 62,
            ..write()
        };
        assert_eq!(check(&flags, &l, &mr, &any), Err(Error::BADFLAGS));
        assert_eq!(check(&write(), &l, &mr, &|_| false), Err(Error::INVAL));
    }

    #[test]
    fn injected_entries() {
        let l = lim();
        // The source is in the staging slot: `buf` and `desc` are not used.
        let w = Wqe {
            flags: FI_INJECT,
            buf: 0,
            desc: 0,
            len: INJECT_SIZE,
            ..write()
        };
        assert_eq!(check(&w, &l, &mr, &any), Ok(()));
        assert!(local_buffers(&w).as_slice().is_empty());
        let big = Wqe {
            len: INJECT_SIZE + 1,
            ..w
        };
        assert_eq!(check(&big, &l, &mr, &any), Err(Error::MSGSIZE));
        let read = Wqe { op: OP_READ, ..w };
        assert_eq!(check(&read, &l, &mr, &any), Err(Error::INVAL));
        let recv = Wqe { op: OP_RECV, ..w };
        assert_eq!(check(&recv, &l, &mr, &any), Err(Error::INVAL));
        // Compare atomics: operand and compare injected, result not.
        let cas = Wqe {
            op: OP_COMPARE_ATOMIC,
            atomic: FI_UINT64 as u32 | (FI_CSWAP as u32) << 16,
            flags: FI_INJECT,
            buf: 0,
            compare: 0,
            len: 8,
            result: 0x2000,
            ..Default::default()
        };
        assert_eq!(check(&cas, &l, &mr, &any), Ok(()));
        assert_eq!(local_buffers(&cas).as_slice(), [(0x2000, 64)]);
        let cas9 = Wqe { len: 9, ..cas };
        assert_eq!(check(&cas9, &l, &mr, &any), Err(Error::MSGSIZE));
    }

    #[test]
    fn local_buffers_of_entries() {
        assert_eq!(local_buffers(&write()).as_slice(), [(0x1000, 0x100)]);
        let fetch = Wqe {
            op: OP_FETCH_ATOMIC,
            atomic: FI_UINT32 as u32 | (FI_SUM as u32) << 16,
            buf: 0x10,
            len: 2,
            result: 0x20,
            ..Default::default()
        };
        assert_eq!(local_buffers(&fetch).as_slice(), [(0x10, 8), (0x20, 8)]);
        let empty = Wqe {
            op: OP_SEND,
            buf: 0,
            len: 0,
            ..Default::default()
        };
        assert!(local_buffers(&empty).as_slice().is_empty());
    }

    #[test]
    fn atomic_checks() {
        let l = lim();
        let a = |op: u32, dt: i32, aop: i32, n: u64| Wqe {
            op,
            atomic: dt as u32 | (aop as u32) << 16,
            buf: 0x1000,
            len: n,
            result: 0x2000,
            compare: 0x3000,
            ..Default::default()
        };
        assert_eq!(
            check(&a(OP_ATOMIC, FI_UINT64, FI_SUM, 1), &l, &mr, &any),
            Ok(())
        );
        assert_eq!(
            check(&a(OP_ATOMIC, FI_UINT64, FI_CSWAP, 1), &l, &mr, &any),
            Err(Error::INVAL)
        );
        assert_eq!(
            check(&a(OP_ATOMIC, 42, FI_SUM, 1), &l, &mr, &any),
            Err(Error::INVAL)
        );
        assert_eq!(
            check(&a(OP_ATOMIC, FI_DOUBLE, FI_BOR, 1), &l, &mr, &any),
            Err(Error::OPNOTSUPP)
        );
        assert_eq!(
            check(&a(OP_ATOMIC, FI_UINT64, FI_SUM, 0), &l, &mr, &any),
            Err(Error::INVAL)
        );
        assert_eq!(
            check(&a(OP_COMPARE_ATOMIC, FI_INT32, FI_CSWAP, 1), &l, &mr, &any),
            Ok(())
        );
        let fetch_read = Wqe {
            buf: 0,
            ..a(OP_FETCH_ATOMIC, FI_UINT32, FI_ATOMIC_READ, 1)
        };
        assert_eq!(check(&fetch_read, &l, &mr, &any), Ok(()));
        let no_result = Wqe {
            result: 0,
            ..a(OP_FETCH_ATOMIC, FI_UINT32, FI_SUM, 1)
        };
        assert_eq!(check(&no_result, &l, &mr, &any), Err(Error::INVAL));
    }
}
