//! libfabric's completions to the XPU: CQ entries and counters for the
//! operations libfabric finished or failed, the remote-access counters,
//! and the time limits that fail operations libfabric holds, or keeps
//! refusing, too long.
use super::gate::Gate;
use super::post::post_signal;
use super::requests::{fail, finish_part};
use super::tuning::Tuning;
use crate::fabric::Fid;
use crate::ffi::{self, fi_cq_err_entry, fi_cq_tagged_entry};
use crate::layout::*;
use crate::ring;
use crate::state::cntr::CntrShared;
use crate::state::ep::{Bound, EpInner, EpState, CQ_BATCH};
use crate::state::req::{req_wqe, Req};
use fi_xpu_abi::errno::FI_EAVAIL;
use fi_xpu_abi::flags::*;
use fi_xpu_prov_sdk::Error;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

/// Most libfabric CQ reads (of up to `CQ_BATCH` entries, or one error) per
/// endpoint and pass.
const CQ_READS_PER_PASS: usize = 16;
/// Longest gap between two looks for RMA and atomic operations past their
/// time limit.
const EXPIRE_SCAN: Duration = Duration::from_millis(50);

/// Publishes the error libfabric reported for a request: as `fail`, with
/// what libfabric says of the transfer. A truncated receive reports the
/// bytes placed (`len`) and those that did not fit (`olen`), as libfabric
/// defines them, and the tag and CQ data of the message that matched.
fn fail_reported(b: &Bound, req: &Req, e: &fi_cq_err_entry) {
    let idx = ring::counter_of(req.op).unwrap_or(CNTR_SEND);
    if let Some(c) = b.cntr[idx].as_deref() {
        c.add_err(1);
    }
    let recv = ring::is_receive(req.op);
    if let Some(cq) = b.cq_for(req.op) {
        cq.push_reserved(Cqe {
            flags: ring::completion_flags(req.op) | (e.flags & FI_REMOTE_CQ_DATA),
            context: req.context,
            len: if recv { (e.len as u64).min(req.len) } else { 0 },
            buf: req.buf,
            data: if recv { e.data } else { 0 },
            tag: if recv { e.tag } else { req.tag },
            olen: e.olen as u64,
            err: (-e.err.abs()).min(-1) as i64,
            src: ffi::FI_ADDR_NOTAVAIL,
            is_err: 1,
            prov_errno: e.prov_errno as i64,
            ..Default::default()
        });
    }
}

/// Whether an operation of opcode `op` ends with `-FI_ETIMEDOUT` when
/// libfabric keeps it past `Tuning::op_timeout`: RMA and atomics, which a
/// peer serves without its application's help. Messages wait for the
/// peer's receives, which may legitimately take any time.
fn has_time_limit(op: u32) -> bool {
    matches!(
        op,
        OP_WRITE | OP_READ | OP_ATOMIC | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC | OP_PUT_SIGNAL
    )
}

/// Fails the RMA and atomic operations libfabric has held longer than the
/// limit: an error completion `-FI_ETIMEDOUT` and an error count, and they
/// no longer hold `fi_xpu_flush` back. libfabric keeps the request (and may
/// still complete it, which is then dropped): libfabric 1.17's `shm`
/// provider never answers a write, read or atomic with a wrong key or past
/// the end of a registration when the initiator waits for an answer
/// (`FI_DELIVERY_COMPLETE`, reads, fetching atomics), and such an
/// operation would otherwise never complete. `now`: the time of the pass.
/// Looks only every `EXPIRE_SCAN` or so: most passes cost two compares.
#[inline]
pub(super) fn expire(b: &Bound, st: &mut EpState, tuning: &Tuning, now: Instant) -> bool {
    match tuning.op_timeout {
        Some(limit) if st.next_expire.is_none_or(|t| now >= t) => {
            st.next_expire = Some(now + EXPIRE_SCAN.min(limit / 4));
            expire_scan(b, st, limit, now)
        }
        _ => false,
    }
}

/// The look of `expire`.
#[inline(never)]
fn expire_scan(b: &Bound, st: &mut EpState, limit: Duration, now: Instant) -> bool {
    let mut expired = Vec::new();
    for r in st.reqs.iter() {
        let p = r as *mut Req;
        // SAFETY: a registered request is a live box of ours; libfabric
        // only uses its first 64 bytes (the fi_context2), never these
        // fields, which only this thread touches.
        let (op, issued, timed_out) = unsafe { ((*p).op, (*p).issued, (*p).timed_out) };
        if !timed_out && has_time_limit(op) && now.duration_since(issued) >= limit {
            expired.push(p);
        }
    }
    for p in &expired {
        // SAFETY: as above.
        let (pos, peer, w) = unsafe {
            (*(*p)).timed_out = true;
            let r = &*(*p);
            (r.pos, r.peer, req_wqe(r))
        };
        st.inflight.done(pos);
        st.fences.done(peer, pos);
        crate::core::warn(&format!(
            "op {} at ring position {pos}, {} bytes: no completion from libfabric after {} ms: \
             failed with {} (libfabric never reported the operation; its shm provider, for \
             one, leaves some accesses the target refused unanswered)",
            w.op,
            w.len,
            limit.as_millis(),
            Error::TIMEDOUT
        ));
        // SAFETY: as above.
        let r = unsafe { &**p };
        if r.joint {
            finish_part(b, st, r, Some((Error::TIMEDOUT, 0)));
        } else {
            fail(b, &w, Error::TIMEDOUT, 0);
        }
    }
    !expired.is_empty()
}

/// Whether libfabric has refused the RMA or atomic entry at `pos` with
/// `-FI_EAGAIN` for longer than the operation limit: libfabric 1.17's `shm`
/// does so for good once an earlier operation of the endpoint was never
/// answered, and the entry would hold the ring.
pub(super) fn refused_too_long(st: &mut EpState, pos: u64, w: &Wqe, tuning: &Tuning) -> bool {
    let Some(limit) = tuning.op_timeout.filter(|_| has_time_limit(w.op)) else {
        return false;
    };
    match st.refused_since {
        Some((p, since)) if p == pos => {
            if since.elapsed() < limit {
                return false;
            }
            st.refused_since = None;
            true
        }
        _ => {
            st.refused_since = Some((pos, Instant::now()));
            false
        }
    }
}

/// Takes a request back from libfabric, if it is one of ours.
fn take_req(st: &mut EpState, ctx: *mut c_void) -> Option<Box<Req>> {
    if !st.reqs.remove(ctx as usize) {
        return None;
    }
    // SAFETY: the pointer came from Box::into_raw in `issue` and was still
    // registered, so it is live and owned by us again.
    let req = unsafe { Box::from_raw(ctx as *mut Req) };
    if req.timed_out {
        // Already failed and no longer counted in flight.
        return None;
    }
    if !ring::is_receive(req.op) {
        st.land(&req);
    }
    Some(req)
}

#[inline(never)]
pub(super) fn poll_cq(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate) -> bool {
    let mut busy = false;
    // Entries left uninitialised: this runs on every pass and libfabric
    // writes the entries it reports.
    let mut buf = [const { MaybeUninit::<fi_cq_tagged_entry>::uninit() }; CQ_BATCH];
    // Bounded: a CQ that never runs dry (a peer's flood, or a transport
    // that reports the same error again and again) must not keep the
    // thread from its other endpoints, its ring and its time limits.
    for _ in 0..CQ_READS_PER_PASS {
        // SAFETY: live CQ; buffers of CQ_BATCH entries.
        let n = g.call(|| unsafe {
            ffi::xo_cq_readfrom(
                ep.cq.ptr(),
                buf.as_mut_ptr() as *mut c_void,
                CQ_BATCH,
                st.cq_src.0.as_mut_ptr(),
            )
        });
        if n > 0 {
            busy = true;
            for (i, e) in buf.iter().take(n as usize).enumerate() {
                // SAFETY: libfabric wrote the first `n` entries.
                let e = unsafe { e.assume_init_ref() };
                let src = std::mem::replace(&mut st.cq_src.0[i], ffi::FI_ADDR_NOTAVAIL);
                complete(ep, b, st, e, src, g);
            }
            // A short read emptied the CQ: another read would find what
            // arrived since, which the next pass finds as well (this one
            // was busy, so the thread does not sleep before it).
            if (n as usize) < CQ_BATCH {
                break;
            }
            continue;
        }
        if n == -(FI_EAVAIL as i64) {
            busy = true;
            let mut e = fi_cq_err_entry::default();
            // SAFETY: live CQ; valid entry.
            if g.call(|| unsafe { ffi::xo_cq_readerr(ep.cq.ptr(), &mut e) }) < 1 {
                break;
            }
            if let Some(req) = take_req(st, e.op_context) {
                if req.joint {
                    finish_part(b, st, &req, Some((Error::from_code(e.err), e.prov_errno)));
                    continue;
                }
                fail_reported(b, &req, &e);
                st.pool.give(req);
            }
            continue;
        }
        break;
    }
    busy
}

#[inline(never)]
fn complete(ep: &EpInner, b: &Bound, st: &mut EpState, e: &fi_cq_tagged_entry, src: u64, g: &Gate) {
    if e.flags & FI_REMOTE_WRITE != 0 {
        // A remote write carrying CQ data: it completes at the target only.
        if let Some(cq) = b.rx_cq.as_deref() {
            cq.push(Cqe {
                // As every provider reports it (libfabric's tcp leaves out FI_RMA).
                flags: FI_RMA | FI_REMOTE_WRITE | (e.flags & FI_REMOTE_CQ_DATA),
                // len and buf are 0 on every provider: libfabric defines
                // them for receives only, and tcp reports 0 where shm
                // reports the length.
                data: e.data,
                src,
                ..Default::default()
            });
        }
        return;
    }
    let Some(mut req) = take_req(st, e.op_context) else {
        return;
    };
    if let Some(sig) = req.signal.take() {
        // The data is placed at the target: now the signal.
        post_signal(ep, b, st, g, req, sig, 0);
        return;
    }
    if req.joint {
        finish_part(b, st, &req, None);
        st.pool.give(req);
        return;
    }
    let recv = ring::is_receive(req.op);
    // As in `fail`: the counter first, then the completion.
    if let Some(c) = ring::counter_of(req.op).and_then(|i| b.cntr[i].as_deref()) {
        c.add(1);
    }
    if let Some(cq) = b.cq_for(req.op) {
        cq.push_reserved(Cqe {
            flags: ring::completion_flags(req.op) | (e.flags & FI_REMOTE_CQ_DATA),
            context: req.context,
            len: if recv { e.len as u64 } else { req.len },
            buf: if recv { req.buf } else { 0 },
            data: if recv { e.data } else { 0 },
            tag: if recv { e.tag } else { 0 },
            src: if recv { src } else { ffi::FI_ADDR_NOTAVAIL },
            ..Default::default()
        });
    }
    req.discard = None;
    st.pool.give(req);
}

/// Adds what libfabric's remote-access counters gained since the last look
/// to the XPU counters bound for remote reads and writes; any gain is
/// activity, bound or not. `busy`: the pass found work already; then
/// counters no XPU counter is bound to are not read, their movement would
/// only say so again (the gain is seen, once, at a later look).
#[inline]
pub(super) fn mirror_remote(
    ep: &EpInner,
    b: &Bound,
    st: &mut EpState,
    g: &Gate,
    busy: bool,
) -> bool {
    let bound = b.cntr[CNTR_REM_WRITE].is_some() || b.cntr[CNTR_REM_READ].is_some();
    if (busy && !bound) || (ep.rem_write.is_none() && ep.rem_read.is_none()) {
        return false;
    }
    read_counters(ep, b, st, g)
}

/// The look of `mirror_remote`.
#[inline(never)]
fn read_counters(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate) -> bool {
    let (wc, rc) = (
        b.cntr[CNTR_REM_WRITE].as_deref(),
        b.cntr[CNTR_REM_READ].as_deref(),
    );
    let (ws, rs) = (st.rem_write_seen, st.rem_read_seen);
    // Both counters in one call through the gate.
    let (w, r) = g.call(|| {
        (
            read_remote(ep.rem_write.as_ref(), wc.is_some(), ws),
            read_remote(ep.rem_read.as_ref(), rc.is_some(), rs),
        )
    });
    mirror(w, wc, &mut st.rem_write_seen) | mirror(r, rc, &mut st.rem_read_seen)
}

/// A remote-access counter's value and error count, or `seen` when there
/// is none. Errors only matter to a bound XPU counter (`bound`): reading
/// them costs a second call every pass.
fn read_remote(fid: Option<&Fid>, bound: bool, seen: (u64, u64)) -> (u64, u64) {
    let Some(f) = fid else {
        return seen;
    };
    // SAFETY: live libfabric counter.
    unsafe {
        (
            ffi::xo_cntr_read(f.ptr()),
            if bound {
                ffi::xo_cntr_readerr(f.ptr())
            } else {
                seen.1
            },
        )
    }
}

/// Adds the gain from `seen` to `now` (value, errors) to `c`; true when
/// there was any.
fn mirror(now: (u64, u64), c: Option<&CntrShared>, seen: &mut (u64, u64)) -> bool {
    let (v, e) = now;
    let mut busy = false;
    if v > seen.0 {
        if let Some(c) = c {
            c.add(v - seen.0);
        }
        busy = true;
    }
    if e > seen.1 {
        if let Some(c) = c {
            c.add_err(e - seen.1);
        }
        busy = true;
    }
    *seen = (v.max(seen.0), e.max(seen.1));
    busy
}
