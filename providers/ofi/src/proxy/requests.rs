//! How a ring entry ends when it does not complete normally: an error
//! completion and count for a failed entry, and the completion of a
//! put-with-signal once both of its parts ended. The one place post and
//! complete publish outcomes from.
use crate::ffi;
use crate::layout::*;
use crate::ring;
use crate::state::ep::{Bound, EpState};
use crate::state::req::{req_wqe, Req};
use fi_xpu_prov_sdk::Error;

/// Publishes a failed entry (whose completion was reserved): an error
/// completion and the error count. An entry whose opcode is unknown counts
/// on the send counter, the one every transmit request can reach.
pub fn fail(b: &Bound, w: &Wqe, err: Error, prov_errno: i32) {
    // The counter moves before the completion is published, so a device
    // that has read the error entry also sees the error count.
    let idx = ring::counter_of(w.op).unwrap_or(CNTR_SEND);
    if let Some(c) = b.cntr[idx].as_deref() {
        c.add_err(1);
    }
    if let Some(cq) = b.cq_for(w.op) {
        cq.push_reserved(Cqe {
            flags: ring::completion_flags(w.op),
            context: w.context,
            buf: w.buf,
            tag: w.tag,
            olen: w.len,
            err: err.code() as i64,
            src: ffi::FI_ADDR_NOTAVAIL,
            is_err: 1,
            prov_errno: prov_errno as i64,
            ..Default::default()
        });
    }
}

/// One part of a put with a fenced signal ended (`err`: how it failed):
/// the put's completion, or its first error, once both ended.
pub fn finish_part(b: &Bound, st: &mut EpState, r: &Req, err: Option<(Error, i32)>) {
    let e = st.joint.entry(r.pos).or_insert((2, None));
    e.0 = e.0.saturating_sub(1);
    if e.1.is_none() {
        e.1 = err;
    }
    if e.0 > 0 {
        return;
    }
    let err = st.joint.remove(&r.pos).and_then(|e| e.1);
    let w = req_wqe(r);
    match err {
        Some((e, prov_errno)) => fail(b, &w, e, prov_errno),
        None => {
            if let Some(c) = ring::counter_of(r.op).and_then(|i| b.cntr[i].as_deref()) {
                c.add(1);
            }
            if let Some(cq) = b.cq_for(r.op) {
                cq.push_reserved(Cqe {
                    flags: ring::completion_flags(r.op),
                    context: r.context,
                    len: r.len,
                    src: ffi::FI_ADDR_NOTAVAIL,
                    ..Default::default()
                });
            }
        }
    }
}
