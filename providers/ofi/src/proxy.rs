//! Progress threads: each drains the rings of its endpoints, issues the
//! operations on libfabric, reads libfabric's completions and publishes them
//! to the XPU CQs and counters.
//!
//! An idle thread spins briefly, then yields, then sleeps: on the endpoint's
//! doorbell word (a futex the device side bumps after publishing while the
//! `sleeping` flag is set) when it serves one endpoint, otherwise for at
//! most `MAX_SLEEP`.
use crate::ffi::{self, fi_cq_err_entry, fi_cq_tagged_entry};
use crate::layout::*;
use crate::objects::{Bound, EpInner};
use crate::ring::{self, Limits, MrRange};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::flags::*;
use std::collections::{BTreeMap, HashSet};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Entries taken from one ring per pass, so that one busy endpoint does not
/// starve the others or its own completions.
const BATCH: usize = 64;
/// Completions read from libfabric per call.
const CQ_BATCH: usize = 16;
const SPIN_PASSES: u32 = 200;
const YIELD_PASSES: u32 = 2000;
const MAX_SLEEP: Duration = Duration::from_millis(1);

/// One outstanding libfabric operation. The first 64 bytes are the
/// `struct fi_context2` libfabric may use while it runs.
#[repr(C)]
pub struct Req {
    fi_ctx: [u64; 8],
    pos: u64,
    op: u32,
    context: u64,
    buf: u64,
    len: u64,
    tag: u64,
}

#[derive(Default)]
pub struct EpState {
    /// Next ring position to take.
    cons: u64,
    /// Ring positions of transmit operations still in flight (with counts).
    inflight: BTreeMap<u64, u32>,
    /// Every live `Req` (by address), so completions can be trusted and the
    /// requests freed when the endpoint closes.
    reqs: HashSet<usize>,
    rem_write_seen: (u64, u64),
    rem_read_seen: (u64, u64),
    /// The next entry waits for room in its CQ: it is not work the thread
    /// can do until the application reads completions.
    blocked: bool,
}

pub struct Worker {
    eps: Mutex<Vec<Arc<EpInner>>>,
    stop: AtomicBool,
    /// Bumped once per loop; closers wait for it to move.
    epoch: AtomicU64,
    /// Futex word for host-side wake-ups (new endpoint, close, stop).
    wake: AtomicU32,
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a futex wait on a live, aligned u32 with a valid timeout; it
    // only reads the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: waking waiters of a live, aligned u32.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

fn at64(p: *mut u64) -> &'static AtomicU64 {
    // SAFETY: callers pass aligned words of device blocks that outlive the
    // use (the endpoint is kept alive by the worker's Arc).
    unsafe { AtomicU64::from_ptr(p) }
}

fn at32(p: *mut u32) -> &'static AtomicU32 {
    // SAFETY: as at64.
    unsafe { AtomicU32::from_ptr(p) }
}

impl Worker {
    pub fn new() -> Worker {
        Worker {
            eps: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            wake: AtomicU32::new(0),
        }
    }

    fn kick(&self, ep: Option<&EpInner>) {
        self.wake.fetch_add(1, Ordering::SeqCst);
        futex_wake(&self.wake);
        let eps = match ep {
            Some(e) => vec![e.dev()],
            None => self.eps.lock().unwrap().iter().map(|e| e.dev()).collect(),
        };
        for dev in eps {
            // SAFETY: the endpoint block is live while its EpInner is.
            let bell = at32(unsafe { std::ptr::addr_of_mut!((*dev).doorbell) });
            bell.fetch_add(1, Ordering::SeqCst);
            futex_wake(bell);
        }
    }

    pub fn add(&self, ep: Arc<EpInner>) {
        self.eps.lock().unwrap().push(ep);
        self.kick(None);
    }

    /// Removes an endpoint and returns once the thread no longer uses it.
    pub fn remove(&self, ep: &Arc<EpInner>) {
        self.eps.lock().unwrap().retain(|e| !Arc::ptr_eq(e, ep));
        let start = self.epoch.load(Ordering::Acquire);
        // Two full loops: the one running at removal may still hold a clone.
        while !self.stop.load(Ordering::Acquire) && self.epoch.load(Ordering::Acquire) < start + 2 {
            self.kick(Some(ep));
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.kick(None);
    }
}

pub fn run(w: Arc<Worker>) {
    let mut idle = 0u32;
    while !w.stop.load(Ordering::Acquire) {
        let eps: Vec<Arc<EpInner>> = w.eps.lock().unwrap().clone();
        let mut busy = false;
        for ep in &eps {
            busy |= progress(ep);
        }
        if busy {
            idle = 0;
        } else {
            idle = idle.saturating_add(1);
            if idle < SPIN_PASSES {
                std::hint::spin_loop();
            } else if idle < YIELD_PASSES {
                std::thread::yield_now();
            } else {
                sleep(&w, &eps);
            }
        }
        drop(eps);
        w.epoch.fetch_add(1, Ordering::AcqRel);
    }
}

fn sleep(w: &Worker, eps: &[Arc<EpInner>]) {
    let wake = w.wake.load(Ordering::SeqCst);
    if let [ep] = eps {
        let dev = ep.dev();
        // SAFETY: the block is live while `ep` is.
        let (bell, sleeping) = unsafe {
            (
                at32(std::ptr::addr_of_mut!((*dev).doorbell)),
                at32(std::ptr::addr_of_mut!((*dev).sleeping)),
            )
        };
        let b = bell.load(Ordering::SeqCst);
        sleeping.store(1, Ordering::SeqCst);
        // Re-check after announcing sleep: a device that published before
        // it saw `sleeping` left its entry for this check.
        if !has_work(ep) && w.wake.load(Ordering::SeqCst) == wake {
            futex_wait(bell, b, MAX_SLEEP);
        }
        sleeping.store(0, Ordering::SeqCst);
    } else {
        futex_wait(&w.wake, wake, MAX_SLEEP);
    }
}

fn has_work(ep: &EpInner) -> bool {
    let st = ep.state.lock().unwrap();
    let slot = slot(ep, st.cons);
    // SAFETY: the slot lies in the ring.
    let ready =
        at64(unsafe { std::ptr::addr_of_mut!((*slot).seq) }).load(Ordering::Acquire) == st.cons + 1;
    (ready && !st.blocked) || !st.inflight.is_empty() || !st.reqs.is_empty()
}

fn slot(ep: &EpInner, pos: u64) -> *mut Wqe {
    // SAFETY: `size` is a power of two and the ring has `size` entries.
    unsafe { ep.ring().add((pos & (ep.size - 1)) as usize) }
}

/// One pass over an endpoint; true if anything happened.
fn progress(ep: &EpInner) -> bool {
    let Some(b) = ep.bound.get() else {
        return false;
    };
    let mut st = ep.state.lock().unwrap();
    let mut busy = false;
    let dev = ep.dev();
    st.blocked = false;
    for _ in 0..BATCH {
        let pos = st.cons;
        let s = slot(ep, pos);
        // SAFETY: the slot is in the ring; `seq` is read atomically before
        // the rest of the entry is copied (acquire pairs with the device's
        // release store).
        let seq = at64(unsafe { std::ptr::addr_of_mut!((*s).seq) }).load(Ordering::Acquire);
        if seq != pos + 1 {
            break;
        }
        // SAFETY: the entry is complete (seq matched); the device does not
        // touch it again until `cons` moves past it.
        let w = unsafe { std::ptr::read_volatile(s) };
        let cq = cq_for(b, w.op);
        if cq.is_some_and(|cq| !cq.reserve()) {
            st.blocked = true;
            break;
        }
        match issue(ep, b, &mut st, pos, &w) {
            Err(e) if e == -FI_EAGAIN => {
                if let Some(cq) = cq {
                    cq.unreserve();
                }
                break;
            }
            _ => {}
        }
        st.cons = pos + 1;
        // SAFETY: aligned word of the live endpoint block.
        at64(unsafe { std::ptr::addr_of_mut!((*dev).cons) }).store(st.cons, Ordering::Release);
        busy = true;
    }
    busy |= poll_cq(ep, b, &mut st);
    busy |= mirror_remote(ep, b, &mut st);
    let flushed = st.inflight.keys().next().copied().unwrap_or(st.cons);
    // SAFETY: aligned word of the live endpoint block.
    at64(unsafe { std::ptr::addr_of_mut!((*dev).flushed) }).store(flushed, Ordering::Release);
    busy
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
fn fail(b: &Bound, w: &Wqe, err: i32, prov_errno: i32) {
    if let Some(cq) = cq_for(b, w.op) {
        cq.push_reserved(Cqe {
            flags: ring::completion_flags(w.op),
            context: w.context,
            buf: w.buf,
            tag: w.tag,
            olen: w.len,
            err: err.min(-1) as i64,
            src: ffi::FI_ADDR_NOTAVAIL,
            is_err: 1,
            prov_errno: prov_errno as i64,
            ..Default::default()
        });
    }
    let idx = ring::counter_of(w.op).unwrap_or(CNTR_SEND);
    if let Some(c) = b.cntr[idx].as_deref() {
        c.add_err(1);
    }
}

/// Checks and issues one entry. `Err(-FI_EAGAIN)` leaves it in the ring to
/// retry; every other outcome consumes it.
fn issue(ep: &EpInner, b: &Bound, st: &mut EpState, pos: u64, w: &Wqe) -> Result<(), i32> {
    let dom = &ep.dom;
    let lim = Limits {
        max_msg: dom.max_msg,
        has_atomic: dom.has(FI_ATOMIC),
    };
    let mr = |id: u64| {
        dom.mr(id).map(|r| MrRange {
            base: r.base,
            len: r.len,
        })
    };
    let addr_ok = |a: u64| {
        b.av.as_ref()
            .is_some_and(|av| av.live.lock().unwrap().contains(&a))
    };
    if let Err(e) = ring::check(w, &lim, &mr, &addr_ok) {
        crate::core::warn(&format!(
            "malformed ring entry at {pos} (op {}): {}",
            w.op,
            ffi::strerror(e)
        ));
        fail(b, w, e, 0);
        return Ok(());
    }
    if w.op == OP_NOP {
        if let Some(cq) = cq_for(b, w.op) {
            cq.unreserve();
        }
        return Ok(());
    }
    let req = Box::into_raw(Box::new(Req {
        fi_ctx: [0; 8],
        pos,
        op: w.op,
        context: w.context,
        buf: w.buf,
        len: w.len,
        tag: w.tag,
    }));
    let r = post(ep, w, req as *mut c_void);
    match r {
        Ok(()) => {
            st.reqs.insert(req as usize);
            if !ring::is_receive(w.op) {
                *st.inflight.entry(pos).or_insert(0) += 1;
            }
            Ok(())
        }
        Err(e) => {
            // SAFETY: libfabric refused the operation, so the request was
            // never handed out.
            drop(unsafe { Box::from_raw(req) });
            if e == -FI_EAGAIN {
                return Err(e);
            }
            crate::core::warn(&format!(
                "libfabric refused op {} at {pos}: {}",
                w.op,
                ffi::strerror(e)
            ));
            fail(b, w, e, 0);
            Ok(())
        }
    }
}

/// The libfabric descriptor of a local buffer: from its raw descriptor id,
/// else from any registration that covers it.
fn local_desc(ep: &EpInner, id: u64, buf: u64, len: u64) -> *mut c_void {
    if let Some(r) = ep.dom.mr(id) {
        return r.desc as *mut c_void;
    }
    let mrs = ep.dom.mrs.lock().unwrap();
    mrs.iter()
        .flatten()
        .find(|r| buf >= r.base && buf - r.base <= r.len && len <= r.len - (buf - r.base))
        .map_or(std::ptr::null_mut(), |r| r.desc as *mut c_void)
}

fn post(ep: &EpInner, w: &Wqe, ctx: *mut c_void) -> Result<(), i32> {
    use ffi::*;
    let raddr = if ep.dom.offset_keys {
        w.raddr.wrapping_sub(w.rkey)
    } else {
        w.raddr
    };
    let e = ep.ep.ptr();
    let mut desc = local_desc(ep, w.desc, w.buf, w.len);
    let iov = iovec {
        iov_base: w.buf as *mut c_void,
        iov_len: w.len as usize,
    };
    let data_flags = w.flags & (FI_REMOTE_CQ_DATA | FI_DELIVERY_COMPLETE | FI_INJECT);
    let flags = FI_COMPLETION | data_flags;
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
            let kind = (w.op - OP_ATOMIC) as i32;
            // SAFETY: live endpoint; plain query.
            let v = unsafe { xo_atomic_valid(e, kind, dt, op) };
            if v != 0 {
                return Err(if v < 0 { v } else { -FI_EOPNOTSUPP });
            }
            let mut desc = if w.buf == 0 {
                std::ptr::null_mut()
            } else {
                local_desc(ep, w.desc, w.buf, bytes)
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
            let mut rdesc = local_desc(ep, w.result_desc, w.result, bytes);
            let cmp = fi_ioc {
                addr: w.compare as *mut c_void,
                count: w.len as usize,
            };
            let mut cdesc = local_desc(ep, 0, w.compare, bytes);
            let fl = flags & !FI_INJECT;
            // SAFETY: as above.
            unsafe {
                match w.op {
                    OP_ATOMIC => xo_atomicmsg(e, &m, fl),
                    OP_FETCH_ATOMIC => xo_fetch_atomicmsg(e, &m, &res, &mut rdesc, fl),
                    _ => xo_compare_atomicmsg(e, &m, &cmp, &mut cdesc, &res, &mut rdesc, fl),
                }
            }
        }
        _ => return Err(-FI_EINVAL),
    };
    crate::fabric::check(r)
}

/// Takes a request back from libfabric, if it is one of ours.
fn take_req(st: &mut EpState, ctx: *mut c_void) -> Option<Box<Req>> {
    if !st.reqs.remove(&(ctx as usize)) {
        return None;
    }
    // SAFETY: the pointer came from Box::into_raw in `issue` and was still
    // registered, so it is live and owned by us again.
    let req = unsafe { Box::from_raw(ctx as *mut Req) };
    if !ring::is_receive(req.op) {
        if let Some(n) = st.inflight.get_mut(&req.pos) {
            *n -= 1;
            if *n == 0 {
                st.inflight.remove(&req.pos);
            }
        }
    }
    Some(req)
}

fn poll_cq(ep: &EpInner, b: &Bound, st: &mut EpState) -> bool {
    let mut busy = false;
    let mut buf = [fi_cq_tagged_entry {
        op_context: std::ptr::null_mut(),
        flags: 0,
        len: 0,
        buf: std::ptr::null_mut(),
        data: 0,
        tag: 0,
    }; CQ_BATCH];
    let mut src = [ffi::FI_ADDR_NOTAVAIL; CQ_BATCH];
    loop {
        // SAFETY: live CQ; buffers of CQ_BATCH entries.
        let n = unsafe {
            ffi::xo_cq_readfrom(
                ep.cq.ptr(),
                buf.as_mut_ptr() as *mut c_void,
                CQ_BATCH,
                src.as_mut_ptr(),
            )
        };
        if n > 0 {
            busy = true;
            for i in 0..n as usize {
                complete(ep, b, st, &buf[i], src[i]);
            }
            continue;
        }
        if n == -(FI_EAVAIL as i64) {
            busy = true;
            let mut e = fi_cq_err_entry::default();
            // SAFETY: live CQ; valid entry.
            if unsafe { ffi::xo_cq_readerr(ep.cq.ptr(), &mut e) } < 1 {
                break;
            }
            if let Some(req) = take_req(st, e.op_context) {
                let w = Wqe {
                    op: req.op,
                    context: req.context,
                    buf: req.buf,
                    tag: req.tag,
                    ..Default::default()
                };
                fail(b, &w, -e.err.abs(), e.prov_errno);
            }
            continue;
        }
        break;
    }
    busy
}

fn complete(ep: &EpInner, b: &Bound, st: &mut EpState, e: &fi_cq_tagged_entry, src: u64) {
    let _ = ep;
    if e.flags & FI_REMOTE_WRITE != 0 {
        // A remote write carrying CQ data: it completes at the target only.
        if let Some(cq) = b.rx_cq.as_deref() {
            cq.push(Cqe {
                flags: e.flags & (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA),
                len: e.len as u64,
                buf: e.buf as u64,
                data: e.data,
                src,
                ..Default::default()
            });
        }
        return;
    }
    let Some(req) = take_req(st, e.op_context) else {
        return;
    };
    let recv = ring::is_receive(req.op);
    if let Some(cq) = cq_for(b, req.op) {
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
    if let Some(c) = ring::counter_of(req.op).and_then(|i| b.cntr[i].as_deref()) {
        c.add(1);
    }
}

/// Adds what libfabric's remote-access counters gained since the last look
/// to the XPU counters bound for remote reads and writes.
fn mirror_remote(ep: &EpInner, b: &Bound, st: &mut EpState) -> bool {
    let mut busy = false;
    for (fid, idx, seen) in [
        (&ep.rem_write, CNTR_REM_WRITE, &mut st.rem_write_seen),
        (&ep.rem_read, CNTR_REM_READ, &mut st.rem_read_seen),
    ] {
        let (Some(f), Some(c)) = (fid, b.cntr[idx].as_deref()) else {
            continue;
        };
        // SAFETY: live libfabric counter.
        let (v, e) = unsafe { (ffi::xo_cntr_read(f.ptr()), ffi::xo_cntr_readerr(f.ptr())) };
        if v > seen.0 {
            c.add(v - seen.0);
            busy = true;
        }
        if e > seen.1 {
            c.add_err(e - seen.1);
            busy = true;
        }
        *seen = (v.max(seen.0), e.max(seen.1));
    }
    busy
}

/// Frees the requests libfabric never completed (the endpoint is closed).
pub fn release_requests(ep: &EpInner) {
    let mut st = ep.state.lock().unwrap();
    for r in st.reqs.drain() {
        // SAFETY: registered requests are live boxes that libfabric no
        // longer references once its endpoint is closed.
        let req = unsafe { Box::from_raw(r as *mut Req) };
        // The completion it reserved will never come.
        if let Some(cq) = ep.bound.get().and_then(|b| cq_for(b, req.op)) {
            cq.unreserve();
        }
    }
    st.inflight.clear();
}
