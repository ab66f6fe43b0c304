//! One pass of a progress thread over one endpoint: the ring entries
//! published since the last pass taken and issued (in order, in batches),
//! libfabric's completions read, the remote counters mirrored, the time
//! limits enforced; and what the thread re-checks before it sleeps.
use super::complete::{expire, mirror_remote, poll_cq, refused_too_long};
use super::gate::Gate;
use super::post::{hand_over_waiting, issue, release_held};
use super::requests::fail;
use super::tuning::Tuning;
use crate::layout::*;
use crate::state::ep::{Bound, EpInner, EpState};
use crate::state::word::at64_ptr;
use fi_xpu_prov_sdk::Error;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Entries taken from one ring per pass, so that one busy endpoint does not
/// starve the others or its own completions.
const BATCH: usize = 64;
/// Later ring positions looked at for a published entry behind a stalled
/// one.
const STALL_SCAN: u64 = 64;

/// Whether the entry at the consumer position is published and has room
/// in its CQ, and whether only polling will notice when that changes (see
/// `SleepCheck`).
pub fn ring_ready(ep: &EpInner) -> (bool, bool) {
    let w = ep.sleep_check.0.load(Ordering::Relaxed);
    let (cons, blocked, poll) = (w >> 2, w & 2 != 0, w & 1 != 0);
    let slot = slot(ep, cons);
    // SAFETY: the slot lies in the ring.
    let ready =
        unsafe { at64_ptr(std::ptr::addr_of_mut!((*slot).seq)) }.load(Ordering::SeqCst) == cons + 1;
    (ready && !blocked, poll)
}

/// Whether the unpublished entry at `pos` has been passed by a published
/// later one for longer than the limit. A producer that claimed a position
/// and is still filling it looks the same for a while, which is why the
/// limit is generous; one that wrote a wrong `seq` would stop the ring for
/// good.
fn stalled(ep: &EpInner, st: &mut EpState, pos: u64, limit: Duration) -> bool {
    // SAFETY: aligned word of the live endpoint block.
    let prod =
        unsafe { at64_ptr(std::ptr::addr_of_mut!((*ep.dev()).prod)) }.load(Ordering::Acquire);
    let claimed = prod.wrapping_sub(pos).min(ep.size);
    let overtaken = (1..claimed.min(STALL_SCAN + 1)).any(|k| {
        let s = slot(ep, pos + k);
        // SAFETY: the slot lies in the ring.
        unsafe { at64_ptr(std::ptr::addr_of_mut!((*s).seq)) }.load(Ordering::Acquire) == pos + k + 1
    });
    if !overtaken {
        st.stalled_since = None;
        return false;
    }
    let since = *st.stalled_since.get_or_insert_with(Instant::now);
    since.elapsed() >= limit
}

/// Whether the entry at `pos` is published.
fn published(ep: &EpInner, pos: u64) -> bool {
    let s = slot(ep, pos);
    // SAFETY: the slot lies in the ring.
    unsafe { at64_ptr(std::ptr::addr_of_mut!((*s).seq)) }.load(Ordering::Acquire) == pos + 1
}

fn slot(ep: &EpInner, pos: u64) -> *mut Wqe {
    // SAFETY: `size` is a power of two and the ring has `size` entries.
    unsafe { ep.ring().add((pos & (ep.size - 1)) as usize) }
}

/// What one pass over an endpoint found.
pub struct Pass {
    /// Something happened: an entry was taken or a completion arrived.
    pub busy: bool,
    /// Transmit operations are in flight.
    pub pending: bool,
}

/// One pass over an endpoint; `now`: when the loop began.
pub fn progress(ep: &EpInner, tuning: &Tuning, g: &Gate, now: Instant) -> Pass {
    let Some(b) = ep.bound.get() else {
        return Pass {
            busy: false,
            pending: false,
        };
    };
    let mut st = ep.state.lock().unwrap();
    let mut busy = false;
    let dev = ep.dev();
    st.blocked = false;
    if !st.waiting.is_empty() {
        busy |= hand_over_waiting(ep, b, &mut st, g, now);
    }
    for i in 0..BATCH {
        let pos = st.cons;
        let s = slot(ep, pos);
        // SAFETY: the slot is in the ring; `seq` is read atomically before
        // the rest of the entry is copied (acquire pairs with the device's
        // release store).
        let seq = unsafe { at64_ptr(std::ptr::addr_of_mut!((*s).seq)) }.load(Ordering::Acquire);
        let skip = seq != pos + 1;
        if skip && !stalled(ep, &mut st, pos, tuning.stall) {
            break;
        }
        // SAFETY: the entry is complete (seq matched), or its producer had
        // its time; the device does not touch it again until `cons` moves
        // past it.
        let w = unsafe { std::ptr::read_volatile(s) };
        let cq = b.cq_for(w.op);
        if cq.is_some_and(|cq| !cq.reserve()) {
            st.blocked = true;
            break;
        }
        st.stalled_since = None;
        let r = if skip {
            skip_unpublished(b, &w, pos, seq, tuning);
            Ok(())
        } else {
            // More entries are already published: libfabric may hold this
            // operation and send it with them (`FI_MORE`).
            let more = i + 1 < BATCH && published(ep, pos + 1);
            issue(ep, b, &mut st, pos, &w, more, g, tuning)
        };
        match r {
            Err(e) if e == Error::AGAIN && !refused_too_long(&mut st, pos, &w, tuning) => {
                if let Some(cq) = cq {
                    cq.unreserve();
                }
                break;
            }
            Err(e) if e == Error::AGAIN => fail_refused(b, &w, pos, e, tuning),
            _ => st.refused_since = None,
        }
        st.cons = pos + 1;
        // SAFETY: aligned word of the live endpoint block.
        unsafe { at64_ptr(std::ptr::addr_of_mut!((*dev).cons)) }.store(st.cons, Ordering::Release);
        busy = true;
    }
    busy |= poll_cq(ep, b, &mut st, g);
    // Completions the queues had to drop become an FI_EOVERRUN entry once
    // the application made room, whether or not anything else completes.
    for cq in [&b.tx_cq, &b.rx_cq].into_iter().flatten() {
        cq.report_losses();
    }
    busy |= mirror_remote(ep, b, &mut st, g, busy);
    busy |= expire(b, &mut st, tuning, now);
    if st.fences.active() {
        busy |= release_held(ep, b, &mut st, g, tuning);
    }
    let flushed = st.inflight.first().unwrap_or(st.cons);
    // SAFETY: aligned word of the live endpoint block.
    unsafe { at64_ptr(std::ptr::addr_of_mut!((*dev).flushed)) }.store(flushed, Ordering::Release);
    ep.sleep_check.set(&st);
    Pass {
        busy,
        pending: !st.inflight.is_empty(),
    }
}

/// Fails the entry at `pos` that was never published while later ones
/// were (see `stalled`). Out of line: the pass's loop does not prepare
/// its message.
#[cold]
fn skip_unpublished(b: &Bound, w: &Wqe, pos: u64, seq: u64, tuning: &Tuning) {
    crate::core::warn(&format!(
        "ring entry at {pos} never published (seq {seq}) while later ones were, for {} ms: failed and skipped",
        tuning.stall.as_millis()
    ));
    fail(b, w, Error::INVAL, 0);
}

/// Fails the entry at `pos` that libfabric kept refusing with `e`
/// (`-FI_EAGAIN`) for the operation limit (see `refused_too_long`).
#[cold]
fn fail_refused(b: &Bound, w: &Wqe, pos: u64, e: Error, tuning: &Tuning) {
    crate::core::warn(&format!(
        "op {} at ring position {pos}: libfabric refused it with {} for {} ms: \
         failed with {}",
        w.op,
        e,
        tuning.op_timeout.map_or(0, |t| t.as_millis()),
        Error::TIMEDOUT
    ));
    fail(b, w, Error::TIMEDOUT, 0);
}
