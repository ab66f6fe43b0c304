//! Progress threads: each drains the rings of its endpoints, issues the
//! operations on libfabric, reads libfabric's completions and publishes them
//! to the XPU CQs and counters.
//!
//! After its last activity a thread keeps polling for `Tuning::spin` (a
//! ping-pong partner answers within that; no spin by default on machines
//! too small for it), then blocks in `epoll` on its
//! eventfd (written by host-side posters that find `sleeping` set, and by
//! closers) and on the wait fds of its endpoints' libfabric CQs, after
//! `fi_trywait` said that is safe. libfabric providers with manual progress
//! (tcp, shm) place incoming RMA data only inside the target's calls and
//! signal no fd for it, and a GPU cannot write an eventfd, so the sleep is
//! bounded by `Tuning::poll` unless libfabric progresses on its own, every
//! CQ has a wait fd and every ring is filled by the host.
//!
//! The parts: `worker` (the thread, its endpoints and its sleep), `post`
//! (ring entries checked, translated and handed to libfabric), `complete`
//! (libfabric's completions and counters published to the XPU CQs and
//! counters, and the time limits of operations libfabric does not finish)
//! and `tuning` (the thread's settings from the environment). This file
//! holds what they share: the request and endpoint state, the gate around
//! libfabric calls, the completion or error of a finished entry, and the
//! pass over one endpoint.
mod complete;
mod post;
mod tuning;
mod worker;

pub use complete::release_requests;
pub use tuning::Tuning;
pub use worker::{run, Worker};

use crate::addr_set::AddrSet;
use crate::fence::PeerFences;
use crate::ffi;
use crate::inflight::{InFlight, Pool};
use crate::layout::*;
use crate::objects::{Bound, EpInner};
use crate::ring;
use crate::tables::Tables;
use complete::{expire, mirror_remote, poll_cq, refused_too_long, CqSources};
use fi_xpu_prov_sdk::Error;
use post::{hand_over_waiting, issue, release_held};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Entries taken from one ring per pass, so that one busy endpoint does not
/// starve the others or its own completions.
const BATCH: usize = 64;
/// Later ring positions looked at for a published entry behind a stalled
/// one.
const STALL_SCAN: u64 = 64;

/// One outstanding libfabric operation. The first 64 bytes are the
/// `struct fi_context2` libfabric may use while it runs.
#[repr(C)]
pub struct Req {
    fi_ctx: [u64; 8],
    pos: u64,
    op: u32,
    /// The peer (libfabric address) of a transmit operation.
    peer: u64,
    context: u64,
    buf: u64,
    len: u64,
    tag: u64,
    /// An `FI_INJECT` entry's source (and compare) bytes, copied out of its
    /// staging slot before the slot can be reused; libfabric reads them
    /// from here.
    inject: [u8; STAGE_SLOT as usize],
    /// Where the values of a non-fetching atomic posted as a fetching one
    /// land (see `DomInner::dc_atomic_as_fetch`); never read.
    discard: Option<Box<[u8]>>,
    /// When libfabric took it.
    issued: Instant,
    /// Failed with `-FI_ETIMEDOUT` (see `expire`): a completion libfabric
    /// reports for it later is dropped.
    timed_out: bool,
    /// The data part of a put-with-signal: its signal, posted once the
    /// data is complete at the target.
    signal: Option<Signal>,
    /// One of the two parts of a put-with-signal whose signal was posted
    /// fenced behind its data: the put completes when both did.
    joint: bool,
    /// The data of a put-with-signal, posted with `FI_INJECT` on a
    /// transport that places it before later writes and atomics: the
    /// signal follows at once (see `DomInner::ordered_inject`).
    ordered: bool,
}

impl Req {
    /// A request for no entry yet.
    fn blank() -> Req {
        Req {
            fi_ctx: [0; 8],
            pos: 0,
            op: 0,
            peer: 0,
            context: 0,
            buf: 0,
            len: 0,
            tag: 0,
            inject: [0; STAGE_SLOT as usize],
            discard: None,
            issued: Instant::now(),
            timed_out: false,
            signal: None,
            joint: false,
            ordered: false,
        }
    }

    /// A second request for the same ring entry (a put-with-signal's
    /// signal).
    fn part_of(r: &Req) -> Box<Req> {
        Box::new(Req {
            fi_ctx: [0; 8],
            pos: r.pos,
            op: r.op,
            peer: r.peer,
            context: r.context,
            buf: r.buf,
            len: r.len,
            tag: r.tag,
            inject: [0; STAGE_SLOT as usize],
            discard: None,
            issued: Instant::now(),
            timed_out: false,
            signal: None,
            joint: false,
            ordered: false,
        })
    }
}

/// The signal word update of a put-with-signal.
#[derive(Clone, Copy)]
struct Signal {
    addr: u64,
    raddr: u64,
    rkey: u64,
    value: u64,
    add: bool,
}

/// A request whose libfabric call waits: the testing-only delay of write
/// data (until `due`), or a signal libfabric refused with `-FI_EAGAIN`.
struct Waiting {
    due: Instant,
    req: Box<Req>,
    w: Wqe,
}

#[derive(Default)]
pub struct EpState {
    /// Next ring position to take.
    cons: u64,
    /// Ring positions of transmit operations still in flight.
    inflight: InFlight,
    /// Every live `Req` (by address), so completions can be trusted and the
    /// requests freed when the endpoint closes.
    reqs: AddrSet,
    /// Request records for reuse: no allocation per entry.
    pool: Pool<Req>,
    rem_write_seen: (u64, u64),
    rem_read_seen: (u64, u64),
    /// The next entry waits for room in its CQ: it is not work the thread
    /// can do until the application reads completions.
    blocked: bool,
    /// Since when the entry at `cons` has been unpublished while a later
    /// one is published.
    stalled_since: Option<Instant>,
    /// When `expire` looks next.
    next_expire: Option<Instant>,
    /// The ring position libfabric keeps answering `-FI_EAGAIN` for, and
    /// since when.
    refused_since: Option<(u64, Instant)>,
    /// Fences in force, and the transmit operations they hold back (not
    /// yet handed to libfabric, counted in flight).
    fences: PeerFences<(Box<Req>, Wqe)>,
    /// Requests not yet handed to libfabric (in order), counted in flight.
    waiting: VecDeque<Waiting>,
    /// Puts with a fenced signal, by ring position: parts still to
    /// complete, and the first error.
    joint: HashMap<u64, (u8, Option<(Error, i32)>)>,
    /// The registrations and AV addresses entries are checked against.
    tables: Tables,
    /// Where libfabric's CQ reads put source addresses.
    cq_src: CqSources,
}

impl EpState {
    /// A transmit operation of `r` is in flight.
    fn fly(&mut self, r: &Req) {
        self.inflight.add(r.pos);
        self.fences.sent(r.peer, r.pos);
    }

    /// A transmit operation of `r` is no longer in flight.
    fn land(&mut self, r: &Req) {
        self.inflight.done(r.pos);
        self.fences.done(r.peer, r.pos);
    }

    /// A fence at `pos`: later transmit operations wait for the earlier
    /// ones to their peer.
    fn fence(&mut self, pos: u64) {
        let live = self
            .reqs
            .iter()
            .map(|r| {
                // SAFETY: a registered request is a live box of ours;
                // libfabric only uses its fi_context, never these fields.
                unsafe { &*(r as *const Req) }
            })
            .filter(|r| !r.timed_out && !ring::is_receive(r.op))
            .chain(self.waiting.iter().map(|h| &*h.req))
            .map(|r| (r.peer, r.pos))
            .collect::<Vec<_>>();
        self.fences.fence(pos, live);
    }
}

/// Whether a progress thread is inside a libfabric call, and whether a
/// closer gave up on it there.
///
/// A libfabric call may never return: libfabric 1.17's `shm` provider
/// guards each endpoint's receive queue with a spinlock that lives in
/// shared memory, and a peer killed while it holds that lock (pushing a
/// command into our queue) leaves it held for good, so every progress
/// call on our endpoint spins forever. A closer cannot wait for such a
/// thread, and cannot free what the thread references while the thread
/// might still touch it. The gate settles it: the thread touches the
/// endpoints' memory only while it owns the gate (`OUT`); a closer that
/// saw the thread inside the same call (`IN`, same call number) for the
/// whole close limit takes the gate (`LOST`) and may then release
/// everything; the thread, should its call ever return, sees `LOST` and
/// parks for good without touching anything.
///
/// The word holds the call number above the two state bits, so that a
/// closer can tell one long call from many short ones.
pub struct Gate(AtomicU64);

const GATE_OUT: u64 = 0;
const GATE_IN: u64 = 1;
const GATE_LOST: u64 = 2;
const GATE_STATE: u64 = 3;

impl Gate {
    fn new() -> Gate {
        Gate(AtomicU64::new(GATE_OUT))
    }

    /// Runs one libfabric call with the gate open to closers.
    fn call<T>(&self, f: impl FnOnce() -> T) -> T {
        // Only this thread changes the word while it is OUT.
        let inside = (self.0.load(Ordering::Relaxed) & !GATE_STATE).wrapping_add(4) | GATE_IN;
        // Release: what the thread wrote before the call is visible to a
        // closer that takes the gate.
        self.0.store(inside, Ordering::Release);
        let r = f();
        if self
            .0
            .compare_exchange(
                inside,
                inside & !GATE_STATE,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            // Given up while inside the call: what this thread references
            // may be gone. It holds its endpoints (and their locks) until
            // the process ends.
            loop {
                std::thread::park();
            }
        }
        r
    }

    pub fn lost(&self) -> bool {
        self.0.load(Ordering::Acquire) & GATE_STATE == GATE_LOST
    }
}

/// A closer's view of a progress thread: the gate word it last saw and
/// since when.
pub struct Watch {
    seen: u64,
    since: Instant,
}

impl Watch {
    pub fn new() -> Watch {
        Watch {
            seen: u64::MAX,
            since: Instant::now(),
        }
    }
}

/// The word at `p` as an atomic.
///
/// # Safety
/// `p` is an aligned word of a device block that stays mapped for `'a`
/// (the endpoint is kept alive by the worker's Arc) and is only accessed
/// atomically meanwhile.
unsafe fn at64<'a>(p: *mut u64) -> &'a AtomicU64 {
    // SAFETY: per the function contract.
    unsafe { AtomicU64::from_ptr(p) }
}

/// As `at64`, for a 32-bit word.
///
/// # Safety
/// As `at64`.
unsafe fn at32<'a>(p: *mut u32) -> &'a AtomicU32 {
    // SAFETY: per the function contract.
    unsafe { AtomicU32::from_ptr(p) }
}

/// What a thread about to sleep re-checks of an endpoint, as its last pass
/// left it (the pass keeps it here, outside `EpState`, so that the check
/// takes no lock): the consumer position, whether the entry there waits
/// for room in its CQ, and whether only polling will notice when that
/// changes (a stall being timed, or a CQ the application has to make room
/// in: its reads ring no bell). Only the progress thread writes and reads
/// it, and only it changes the state a pass reads, so nothing moves
/// between the pass and the sleep.
#[derive(Default)]
pub struct SleepCheck(AtomicU64);

impl SleepCheck {
    fn set(&self, st: &EpState) {
        let poll = st.blocked || st.stalled_since.is_some();
        // Positions grow by one an entry: far below 2^62.
        let w = st.cons << 2 | u64::from(st.blocked) << 1 | u64::from(poll);
        self.0.store(w, Ordering::Relaxed);
    }
}

/// Whether the entry at the consumer position is published and has room
/// in its CQ, and whether only polling will notice when that changes (see
/// `SleepCheck`).
fn ring_ready(ep: &EpInner) -> (bool, bool) {
    let w = ep.sleep_check.0.load(Ordering::Relaxed);
    let (cons, blocked, poll) = (w >> 2, w & 2 != 0, w & 1 != 0);
    let slot = slot(ep, cons);
    // SAFETY: the slot lies in the ring.
    let ready =
        unsafe { at64(std::ptr::addr_of_mut!((*slot).seq)) }.load(Ordering::SeqCst) == cons + 1;
    (ready && !blocked, poll)
}

/// Whether the unpublished entry at `pos` has been passed by a published
/// later one for longer than the limit. A producer that claimed a position
/// and is still filling it looks the same for a while, which is why the
/// limit is generous; one that wrote a wrong `seq` would stop the ring for
/// good.
fn stalled(ep: &EpInner, st: &mut EpState, pos: u64, limit: Duration) -> bool {
    // SAFETY: aligned word of the live endpoint block.
    let prod = unsafe { at64(std::ptr::addr_of_mut!((*ep.dev()).prod)) }.load(Ordering::Acquire);
    let claimed = prod.wrapping_sub(pos).min(ep.size);
    let overtaken = (1..claimed.min(STALL_SCAN + 1)).any(|k| {
        let s = slot(ep, pos + k);
        // SAFETY: the slot lies in the ring.
        unsafe { at64(std::ptr::addr_of_mut!((*s).seq)) }.load(Ordering::Acquire) == pos + k + 1
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
    unsafe { at64(std::ptr::addr_of_mut!((*s).seq)) }.load(Ordering::Acquire) == pos + 1
}

fn slot(ep: &EpInner, pos: u64) -> *mut Wqe {
    // SAFETY: `size` is a power of two and the ring has `size` entries.
    unsafe { ep.ring().add((pos & (ep.size - 1)) as usize) }
}

/// What one pass over an endpoint found.
struct Pass {
    /// Something happened: an entry was taken or a completion arrived.
    busy: bool,
    /// Transmit operations are in flight.
    pending: bool,
}

/// One pass over an endpoint; `now`: when the loop began.
fn progress(ep: &EpInner, tuning: &Tuning, g: &Gate, now: Instant) -> Pass {
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
        let seq = unsafe { at64(std::ptr::addr_of_mut!((*s).seq)) }.load(Ordering::Acquire);
        let skip = seq != pos + 1;
        if skip && !stalled(ep, &mut st, pos, tuning.stall) {
            break;
        }
        // SAFETY: the entry is complete (seq matched), or its producer had
        // its time; the device does not touch it again until `cons` moves
        // past it.
        let w = unsafe { std::ptr::read_volatile(s) };
        let cq = cq_for(b, w.op);
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
        unsafe { at64(std::ptr::addr_of_mut!((*dev).cons)) }.store(st.cons, Ordering::Release);
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
    unsafe { at64(std::ptr::addr_of_mut!((*dev).flushed)) }.store(flushed, Ordering::Release);
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

fn cq_for(b: &Bound, op: u32) -> Option<&crate::objects::CqShared> {
    if ring::is_receive(op) {
        b.rx_cq.as_deref()
    } else {
        b.tx_cq.as_deref()
    }
}

/// Publishes a failed entry (whose completion was reserved): an error
/// completion and the error count. An entry whose opcode is unknown counts
/// on the send counter, the one every transmit request can reach.
fn fail(b: &Bound, w: &Wqe, err: Error, prov_errno: i32) {
    // The counter moves before the completion is published, so a device
    // that has read the error entry also sees the error count.
    let idx = ring::counter_of(w.op).unwrap_or(CNTR_SEND);
    if let Some(c) = b.cntr[idx].as_deref() {
        c.add_err(1);
    }
    if let Some(cq) = cq_for(b, w.op) {
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

/// What `fail` needs of a request.
fn req_wqe(r: &Req) -> Wqe {
    Wqe {
        op: r.op,
        context: r.context,
        buf: r.buf,
        len: r.len,
        tag: r.tag,
        ..Default::default()
    }
}

/// One part of a put with a fenced signal ended (`err`: how it failed):
/// the put's completion, or its first error, once both ended.
fn finish_part(b: &Bound, st: &mut EpState, r: &Req, err: Option<(Error, i32)>) {
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
            if let Some(cq) = cq_for(b, r.op) {
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
