//! Ring entries to libfabric: each entry checked against what the context
//! knows, translated into a libfabric operation and posted, or held back
//! behind a fence or for a later pass.
use super::gate::Gate;
use super::requests::{fail, finish_part};
use super::tuning::Tuning;
use crate::ffi;
use crate::layout::*;
use crate::ring::{self, Limits, MrRange};
use crate::state::dom::KEY_BASE_MASK;
use crate::state::ep::{Bound, EpInner, EpState};
use crate::state::req::{req_wqe, Req, Signal, Waiting};
use crate::state::tables::Tables;
use fi_xpu_abi::flags::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::c_void;
use std::time::Instant;

/// Checks and issues one entry. `Err(Error::AGAIN)` leaves it in the ring to
/// retry; every other outcome consumes it. `more`: the next entry is
/// published already.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn issue(
    ep: &EpInner,
    b: &Bound,
    st: &mut EpState,
    pos: u64,
    w: &Wqe,
    more: bool,
    g: &Gate,
    tuning: &Tuning,
) -> Result<()> {
    if let Err(e) = validate(ep, b, &mut st.tables, pos, w) {
        fail(b, w, e, 0);
        return Ok(());
    }
    if w.op == OP_NOP || w.op == OP_FENCE {
        if let Some(cq) = b.cq_for(w.op) {
            cq.unreserve();
        }
        if w.op == OP_FENCE {
            st.fence(pos);
        }
        return Ok(());
    }
    translate_and_post(ep, b, st, pos, w, more, g, tuning)
}

/// The checks of a ring entry before anything of it reaches libfabric: its
/// fields (`ring::check`), and that every local buffer lies in memory the
/// context knows, against copies of the registrations and AV addresses
/// (`tables`).
#[inline(never)]
fn validate(ep: &EpInner, b: &Bound, t: &mut Tables, pos: u64, w: &Wqe) -> Result<()> {
    let dom = &ep.dom;
    // After the entry was read: a registration or address removed before
    // the entry was published is gone from the copies (see `tables`).
    t.refresh(dom, b.av.as_deref());
    let t = &*t;
    let lim = Limits {
        max_msg: dom.max_msg,
        has_atomic: dom.has(FI_ATOMIC),
    };
    let mr = |id: u64| {
        t.mr(id).map(|r| MrRange {
            base: r.base,
            len: r.len,
        })
    };
    let addr_ok = |a: u64| b.av.is_some() && t.addr_live(a);
    if let Err(e) = ring::check(w, &lim, &mr, &addr_ok) {
        crate::core::warn(&format!(
            "malformed ring entry at {pos} (op {}): {}",
            w.op, e
        ));
        return Err(e);
    }
    // Nothing but memory the context knows reaches libfabric: a wild
    // pointer would crash the process inside libfabric, a pointer to
    // private host memory would send that memory to the peer.
    if let Some(&(addr, len)) = ring::local_buffers(w)
        .as_slice()
        .iter()
        .find(|&&(a, l)| t.covering(a, l).is_none() && !ep.ctx_known(a, l))
    {
        crate::core::warn(&format!(
            "ring entry at {pos} (op {}): local buffer {addr:#x} ({len} bytes) lies in no \
             allocation, import or registration of the context: {}",
            w.op,
            Error::ACCES
        ));
        return Err(Error::ACCES);
    }
    Ok(())
}

/// Turns a checked entry into a libfabric operation and posts it, or holds
/// it back behind a fence.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn translate_and_post(
    ep: &EpInner,
    b: &Bound,
    st: &mut EpState,
    pos: u64,
    w: &Wqe,
    more: bool,
    g: &Gate,
    tuning: &Tuning,
) -> Result<()> {
    // Every field but `inject`, which is written before it is read: no
    // 128 bytes to clear per entry.
    let mut req = st.pool.reuse(Req::blank);
    req.fi_ctx = [0; 8];
    req.pos = pos;
    req.op = w.op;
    req.peer = w.addr;
    req.context = w.context;
    req.buf = w.buf;
    req.len = w.len;
    req.tag = w.tag;
    req.discard = None;
    req.issued = Instant::now();
    req.timed_out = false;
    req.signal = (w.op == OP_PUT_SIGNAL).then_some(Signal {
        addr: w.addr,
        raddr: w.tag,
        rkey: w.ignore,
        value: w.data,
        add: w.atomic == ring::SIGNAL_ADD,
    });
    req.joint = false;
    req.ordered = false;
    let entry = w;
    let w = if w.op == OP_PUT_SIGNAL {
        put_signal_first(ep, &mut req, w)
    } else {
        translate(ep, &mut req, pos, w)
    };
    let transmit = !ring::is_receive(w.op);
    if transmit && st.fences.active() && st.fences.must_wait(req.peer, pos) {
        // Its peer has operations from before a fence in flight: it waits
        // for them (see `release_held`); later entries go on.
        st.fly(&req);
        st.fences.hold(req.peer, pos, (req, w));
        return Ok(());
    }
    if w.op == OP_WRITE {
        if let Some(delay) = tuning.test_delay {
            st.fly(&req);
            st.waiting.push_back(Waiting {
                due: Instant::now() + delay,
                req,
                w,
            });
            return Ok(());
        }
    }
    let req = Box::into_raw(req);
    let r = g.call(|| post(ep, &st.tables, &w, req as *mut c_void, more));
    match r {
        Ok(()) => {
            st.reqs.insert(req as usize);
            if transmit {
                // SAFETY: libfabric took it and uses only its fi_context.
                st.fly(unsafe { &*req });
            }
            fence_signal(ep, b, st, g, req);
            Ok(())
        }
        Err(e) => {
            // SAFETY: libfabric refused the operation, so the request was
            // never handed out.
            st.pool.give(unsafe { Box::from_raw(req) });
            if e == Error::AGAIN {
                return Err(e);
            }
            crate::core::warn(&format!("libfabric refused op {} at {pos}: {}", w.op, e));
            fail(b, entry, e, 0);
            Ok(())
        }
    }
}

/// The first libfabric operation of a put-with-signal: its data, or the
/// signal alone when there is no data. Data the transport places in order
/// with a later atomic and takes injected goes with `FI_INJECT`, and the
/// signal follows at once (`fence_signal`); other data goes as a write
/// libfabric reports once it is placed at the target (`complete` then
/// posts the signal).
fn put_signal_first(ep: &EpInner, req: &mut Req, entry: &Wqe) -> Wqe {
    if entry.len == 0 {
        if let Some(sig) = req.signal.take() {
            return signal_wqe(ep, req, sig, 0);
        }
    }
    if entry.len <= ep.dom.ordered_inject {
        req.ordered = true;
        return Wqe {
            op: OP_WRITE,
            flags: FI_INJECT,
            data: 0,
            ..*entry
        };
    }
    Wqe {
        op: OP_WRITE,
        flags: FI_DELIVERY_COMPLETE,
        data: 0,
        ..*entry
    }
}

/// A device operation as libfabric takes it.
fn translate(ep: &EpInner, req: &mut Req, pos: u64, entry: &Wqe) -> Wqe {
    let mut w = *entry;
    if w.flags & FI_INJECT != 0 {
        // SAFETY: the slot of `pos` lies in the endpoint's block, and the
        // device does not write it again until `cons` passes `pos`.
        unsafe {
            std::ptr::copy_nonoverlapping(ep.stage(pos), req.inject.as_mut_ptr(), req.inject.len())
        };
        w.buf = req.inject.as_ptr() as u64;
        w.compare = req.inject[INJECT_SIZE as usize..].as_ptr() as u64;
        w.desc = 0;
        w.flags &= !FI_INJECT;
    }
    if w.op == OP_WRITE && w.len == 0 {
        // Nothing to place at the target, so delivery is transmission; and
        // libfabric's shm provider never completes a 0-byte write asked for
        // FI_DELIVERY_COMPLETE (the put-with-signal path skips its 0-byte
        // write for the same reason, see `put_signal_first`).
        w.flags &= !FI_DELIVERY_COMPLETE;
    }
    if w.op == OP_ATOMIC {
        // Not a field of this operation: whatever the device left there
        // never reaches libfabric.
        w.result = 0;
        w.result_desc = 0;
    }
    if w.op == OP_ATOMIC && w.flags & FI_DELIVERY_COMPLETE != 0 && ep.dom.dc_atomic_as_fetch {
        let bytes = ring::check_atomic(&w).map_or(0, |a| a.2) as usize;
        let d = req.discard.insert(vec![0u8; bytes].into_boxed_slice());
        w.result = d.as_mut_ptr() as u64;
        w.result_desc = 0;
    }
    w
}

/// Hands the operations a fence held back and that may go now to
/// libfabric (or, under the testing-only delay, to the waiting queue).
pub(super) fn release_held(
    ep: &EpInner,
    b: &Bound,
    st: &mut EpState,
    g: &Gate,
    tuning: &Tuning,
) -> bool {
    if !st.fences.active() {
        return false;
    }
    let mut free = Vec::new();
    st.fences.release(st.inflight.first(), &mut free);
    let moved = !free.is_empty();
    for (req, w) in free {
        match tuning.test_delay {
            Some(delay) if w.op == OP_WRITE => st.waiting.push_back(Waiting {
                due: Instant::now() + delay,
                req,
                w,
            }),
            _ => hand_over(ep, b, st, g, req, w),
        }
    }
    moved
}

/// Posts the signal of a put-with-signal whose data is complete at the
/// target: an 8-byte atomic (`FI_ATOMIC_WRITE` or `FI_SUM`) with delivery
/// complete, whose completion is the put-with-signal's. The request stays
/// in flight for its ring position until then.
/// `extra`: `FI_FENCE` or `FI_INJECT` when the data was posted just
/// before it (see `fence_signal`).
pub(super) fn post_signal(
    ep: &EpInner,
    b: &Bound,
    st: &mut EpState,
    g: &Gate,
    mut req: Box<Req>,
    sig: Signal,
    extra: u64,
) {
    let w = signal_wqe(ep, &mut req, sig, extra);
    st.fly(&req);
    hand_over(ep, b, st, g, req, w);
}

/// The signal update of a put-with-signal as an atomic of `req`.
fn signal_wqe(ep: &EpInner, req: &mut Req, sig: Signal, extra: u64) -> Wqe {
    use fi_xpu_abi::datatype::FI_UINT64;
    use fi_xpu_abi::op::{FI_ATOMIC_WRITE, FI_SUM};
    let op = if sig.add { FI_SUM } else { FI_ATOMIC_WRITE };
    req.inject[..8].copy_from_slice(&sig.value.to_ne_bytes());
    let mut w = Wqe {
        op: OP_ATOMIC,
        atomic: FI_UINT64 as u32 | (op as u32) << 16,
        flags: FI_DELIVERY_COMPLETE | extra,
        addr: sig.addr,
        buf: req.inject.as_ptr() as u64,
        len: 1,
        raddr: sig.raddr,
        rkey: sig.rkey,
        ..Default::default()
    };
    if ep.dom.dc_atomic_as_fetch {
        // As for any atomic with delivery complete on that transport (see
        // `translate`).
        let d = req.discard.insert(vec![0u8; 8].into_boxed_slice());
        w.result = d.as_mut_ptr() as u64;
    }
    w
}

/// The signal of a put-with-signal whose data libfabric just took follows
/// at once where the transport keeps them in order: behind injected data
/// on a transport that places writes in order (`Req::ordered`), or fenced
/// on one that takes `FI_FENCE` (libfabric applies it only once the data,
/// posted with delivery complete, is placed). The put completes when both
/// parts did.
fn fence_signal(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate, raw: *mut Req) {
    // SAFETY: a live request of ours that libfabric just took; libfabric
    // uses only its fi_context, and only this thread reads its
    // completions, so nothing else touches these fields now.
    let data = unsafe { &mut *raw };
    let extra = if data.ordered {
        FI_INJECT
    } else if ep.dom.fence {
        ffi::FI_FENCE
    } else {
        return;
    };
    let Some(sig) = data.signal.take() else {
        return;
    };
    data.joint = true;
    let mut part = Req::part_of(data);
    part.joint = true;
    post_signal(ep, b, st, g, part, sig, extra);
}

/// Hands a request to libfabric; one it refuses with `-FI_EAGAIN` waits
/// (still in flight) for the next pass, any other refusal fails it.
fn hand_over(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate, mut req: Box<Req>, w: Wqe) {
    req.issued = Instant::now();
    let raw = Box::into_raw(req);
    match g.call(|| post(ep, &st.tables, &w, raw as *mut c_void, false)) {
        Ok(()) => {
            st.reqs.insert(raw as usize);
            fence_signal(ep, b, st, g, raw);
        }
        Err(e) => {
            // SAFETY: libfabric refused it, so the request was never handed
            // out and is ours again.
            let req = unsafe { Box::from_raw(raw) };
            if e == Error::AGAIN {
                st.waiting.push_back(Waiting {
                    due: Instant::now(),
                    req,
                    w,
                });
                return;
            }
            crate::core::warn(&format!(
                "libfabric refused op {} at {}: {}",
                req.op, req.pos, e
            ));
            st.land(&req);
            if req.joint {
                finish_part(b, st, &req, Some((e, 0)));
            } else {
                fail(b, &req_wqe(&req), e, 0);
            }
        }
    }
}

/// Hands over the waiting requests that are due at `now`, in order; true
/// when one moved.
pub(super) fn hand_over_waiting(
    ep: &EpInner,
    b: &Bound,
    st: &mut EpState,
    g: &Gate,
    now: Instant,
) -> bool {
    let mut moved = false;
    while st.waiting.front().is_some_and(|h| h.due <= now) {
        let Some(h) = st.waiting.pop_front() else {
            break;
        };
        let before = st.waiting.len();
        hand_over(ep, b, st, g, h.req, h.w);
        if st.waiting.len() > before {
            // Refused again: it went to the back; keep the order.
            if let Some(h) = st.waiting.pop_back() {
                st.waiting.push_front(h);
            }
            break;
        }
        moved = true;
    }
    moved
}

/// The libfabric descriptor of a local buffer: from its raw descriptor id,
/// else from any registration that covers it.
fn local_desc(t: &Tables, id: u64, buf: u64, len: u64) -> *mut c_void {
    t.mr(id)
        .or_else(|| t.covering(buf, len))
        .map_or(std::ptr::null_mut(), |r| r.desc as *mut c_void)
}

#[inline(never)]
fn post(ep: &EpInner, t: &Tables, w: &Wqe, ctx: *mut c_void, more: bool) -> Result<()> {
    use ffi::*;
    let raddr = if ep.dom.offset_keys {
        w.raddr.wrapping_sub(w.rkey & KEY_BASE_MASK)
    } else {
        w.raddr
    };
    let e = ep.ep.ptr();
    let mut desc = local_desc(t, w.desc, w.buf, w.len);
    let iov = iovec {
        iov_base: w.buf as *mut c_void,
        iov_len: w.len as usize,
    };
    // A device's FI_INJECT never reaches libfabric: the proxy staged the
    // bytes itself and dropped the flag (`translate`). FI_INJECT here and
    // FI_FENCE come only from the proxy (ring::check refuses FI_FENCE from
    // a device): a put-with-signal's parts (`put_signal_first`).
    let data_flags =
        w.flags & (FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE | ffi::FI_FENCE | FI_INJECT);
    let flags = FI_COMPLETION | data_flags | if more { FI_MORE } else { 0 };
    let r = match w.op {
        OP_WRITE | OP_READ => {
            let rma = fi_rma_iov {
                addr: raddr,
                len: w.len as usize,
                key: w.rkey,
            };
            let m = fi_msg_rma {
                msg_iov: &iov,
                desc: &mut desc,
                iov_count: 1,
                addr: w.addr,
                rma_iov: &rma,
                rma_iov_count: 1,
                context: ctx,
                data: w.data,
            };
            // SAFETY: the message and everything it points to live for the
            // call; the buffers were checked by ring::check.
            unsafe {
                if w.op == OP_WRITE {
                    xo_writemsg(e, &m, flags)
                } else {
                    xo_readmsg(e, &m, flags & !FI_REMOTE_CQ_DATA)
                }
            }
        }
        OP_SEND | OP_RECV => {
            let m = fi_msg {
                msg_iov: &iov,
                desc: &mut desc,
                iov_count: 1,
                addr: w.addr,
                context: ctx,
                data: w.data,
            };
            // SAFETY: as above.
            unsafe {
                if w.op == OP_SEND {
                    xo_sendmsg(e, &m, flags)
                } else {
                    xo_recvmsg(e, &m, FI_COMPLETION)
                }
            }
        }
        OP_TSEND | OP_TRECV => {
            let m = fi_msg_tagged {
                msg_iov: &iov,
                desc: &mut desc,
                iov_count: 1,
                addr: w.addr,
                tag: w.tag,
                ignore: w.ignore,
                context: ctx,
                data: w.data,
            };
            // SAFETY: as above.
            unsafe {
                if w.op == OP_TSEND {
                    xo_tsendmsg(e, &m, flags)
                } else {
                    xo_trecvmsg(e, &m, FI_COMPLETION)
                }
            }
        }
        OP_ATOMIC | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC => {
            let (dt, op, bytes) = ring::check_atomic(w)?;
            // A non-fetching atomic with a result buffer is posted as a
            // fetching one (see `issue`).
            let as_fetch = w.op == OP_ATOMIC && w.result != 0;
            let kind = if as_fetch {
                1
            } else {
                (w.op - OP_ATOMIC) as i32
            };
            // SAFETY: live endpoint; plain query.
            let v = unsafe { xo_atomic_valid(e, kind, dt, op) };
            if v != 0 {
                return Err(if v < 0 {
                    Error::from_code(v)
                } else {
                    Error::OPNOTSUPP
                });
            }
            let mut desc = if w.buf == 0 {
                std::ptr::null_mut()
            } else {
                local_desc(t, w.desc, w.buf, bytes)
            };
            let ioc = fi_ioc {
                addr: w.buf as *mut c_void,
                count: w.len as usize,
            };
            let rioc = fi_rma_ioc {
                addr: raddr,
                count: w.len as usize,
                key: w.rkey,
            };
            let m = fi_msg_atomic {
                msg_iov: &ioc,
                desc: &mut desc,
                iov_count: 1,
                addr: w.addr,
                rma_iov: &rioc,
                rma_iov_count: 1,
                datatype: dt,
                op,
                context: ctx,
                data: w.data,
            };
            let res = fi_ioc {
                addr: w.result as *mut c_void,
                count: w.len as usize,
            };
            let mut rdesc = local_desc(t, w.result_desc, w.result, bytes);
            let cmp = fi_ioc {
                addr: w.compare as *mut c_void,
                count: w.len as usize,
            };
            let mut cdesc = local_desc(t, 0, w.compare, bytes);
            let fl = if as_fetch {
                flags & !(FI_DELIVERY_COMPLETE | FI_INJECT)
            } else {
                flags
            };
            // SAFETY: as above.
            unsafe {
                match w.op {
                    OP_ATOMIC if as_fetch => xo_fetch_atomicmsg(e, &m, &res, &mut rdesc, fl),
                    OP_ATOMIC => xo_atomicmsg(e, &m, fl),
                    OP_FETCH_ATOMIC => xo_fetch_atomicmsg(e, &m, &res, &mut rdesc, fl),
                    _ => xo_compare_atomicmsg(e, &m, &cmp, &mut cdesc, &res, &mut rdesc, fl),
                }
            }
        }
        _ => return Err(Error::INVAL),
    };
    crate::fabric::check(r)
}
