//! The endpoint as the progress thread sees it: its ring block, its
//! libfabric endpoint, CQ and remote counters, what it is bound to, and
//! the progress thread's state of it (`EpState`: the next position, the
//! requests in flight, fences, the tables entries are checked against).
use super::av::AvInner;
use super::block::{retire, tombstone};
use super::cntr::CntrShared;
use super::cq::CqShared;
use super::dom::DomInner;
use super::req::{Req, Waiting};
use super::tables::Tables;
use crate::addr_set::AddrSet;
use crate::core::{self, Ctx};
use crate::fabric::{check, Fid};
use crate::fence::PeerFences;
use crate::ffi;
use crate::inflight::{InFlight, Pool};
use crate::layout::*;
use crate::ring;
use fi_xpu_prov_sdk::{Error, Result};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// Completions read from libfabric per call.
pub const CQ_BATCH: usize = 64;

/// What an endpoint is bound to, fixed once it is enabled.
#[derive(Default, Clone)]
pub struct Bound {
    pub av: Option<Arc<AvInner>>,
    pub tx_cq: Option<Arc<CqShared>>,
    pub rx_cq: Option<Arc<CqShared>>,
    pub cntr: [Option<Arc<CntrShared>>; 6],
}

impl Bound {
    /// The CQ that completions of `op` go to.
    pub fn cq_for(&self, op: u32) -> Option<&CqShared> {
        if ring::is_receive(op) {
            self.rx_cq.as_deref()
        } else {
            self.tx_cq.as_deref()
        }
    }
}

pub struct EpInner {
    pub dom: Arc<DomInner>,
    pub ring_mem: usize,
    pub size: u64,
    pub ep: Fid,
    pub cq: Fid,
    /// Wait fd of `cq`, -1 where the libfabric provider has none.
    pub cq_fd: i32,
    /// A device fills the ring (the XPU context's memory is not plain host
    /// memory): it cannot wake the progress thread, which must poll.
    pub device_ring: bool,
    /// libfabric's counters of remote writes and reads at this endpoint.
    /// Where no XPU counter is bound to either, only their movement
    /// matters (see `Ep::enable_fabric`) and `rem_write` may count both,
    /// `rem_read` then being `None`.
    pub rem_write: Option<Fid>,
    pub rem_read: Option<Fid>,
    pub bound: OnceLock<Bound>,
    pub state: Mutex<EpState>,
    /// What the progress thread re-checks before it sleeps, as its last
    /// pass left it.
    pub sleep_check: SleepCheck,
    pub ctx: Ctx,
}

impl EpInner {
    pub fn dev(&self) -> *mut EpDev {
        self.ring_mem as *mut EpDev
    }

    pub fn ring(&self) -> *mut Wqe {
        (self.ring_mem + EP_DEV_SIZE) as *mut Wqe
    }

    /// The staging slot of ring position `pos` (`STAGE_SLOT` bytes).
    pub fn stage(&self, pos: u64) -> *const u8 {
        let ring_bytes = self.size as usize * std::mem::size_of::<Wqe>();
        let slot = (pos & (self.size - 1)) * STAGE_SLOT;
        (self.ring_mem + EP_DEV_SIZE + ring_bytes + slot as usize) as *const u8
    }

    /// Whether `[addr, addr+len)` lies in an allocation or import of the
    /// context (registrations: `tables::Tables::covering`).
    pub fn ctx_known(&self, addr: u64, len: u64) -> bool {
        core::mem_known(self.ctx, addr as usize, len)
    }
}

impl EpInner {
    /// The libfabric endpoint and its CQ. Kept apart from `Ep::open`: an
    /// endpoint that is never enabled never reaches libfabric (closing one
    /// that was never enabled crashes `tcp;ofi_rxm` in libfabric 1.17).
    pub fn open_fabric_ep(&mut self) -> Result<()> {
        if !self.ep.ptr().is_null() {
            return Ok(());
        }
        let dom = &self.dom;
        let mut ep = std::ptr::null_mut();
        if dom.prov == "shm" {
            let src = shm_src_addr();
            // SAFETY: live domain and its info; a NUL-terminated string;
            // valid out-pointer.
            check(unsafe {
                ffi::xo_ep_open_src(dom.domain.ptr(), dom.info.0, src.as_ptr(), &mut ep)
            } as i64)?;
        } else {
            // SAFETY: live domain and its info; valid out-pointer.
            check(unsafe { ffi::xo_ep_open(dom.domain.ptr(), dom.info.0, &mut ep) } as i64)?;
        }
        let ep = Fid(ep);
        let (mut cq, mut cq_fd) = (std::ptr::null_mut(), -1);
        // SAFETY: as above.
        check(unsafe {
            ffi::xo_cq_open(
                dom.domain.ptr(),
                4 * self.size as usize,
                &mut cq,
                &mut cq_fd,
            )
        } as i64)?;
        // The endpoint closes before the CQ it is bound to (see Drop).
        self.cq = Fid(cq);
        self.cq_fd = cq_fd;
        self.ep = ep;
        Ok(())
    }
}

/// The source address of this process's endpoints over libfabric's shm,
/// which names their shared memory (`/dev/shm/fi_xpu-PID-START:UID:N`):
/// the pid and the process's start time, so that a process that reuses the
/// pid of one that died with an endpoint open (and left its memory behind)
/// gets other names. libfabric's default, the pid alone, made `fi_enable`
/// fail with `EBUSY` there.
fn shm_src_addr() -> std::ffi::CString {
    let start = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|st| {
            let rest = &st[st.rfind(')')? + 1..];
            // Field 22, starttime; `rest` begins at field 3.
            rest.split_whitespace().nth(19).map(str::to_owned)
        })
        .unwrap_or_else(|| "0".into());
    std::ffi::CString::new(format!("fi_shm://fi_xpu-{}-{start}", std::process::id()))
        .expect("digits and dashes")
}

impl EpInner {
    /// Device code refuses the endpoint's handle from now on.
    pub fn tombstone(&self) {
        // SAFETY: the ring memory starts with this endpoint's EpDev, alive
        // as long as self.
        tombstone(unsafe { &(*self.dev()).magic });
    }
}

impl Drop for EpInner {
    fn drop(&mut self) {
        // libfabric may use an operation's context until the endpoint is
        // closed, so the requests outlive it.
        drop(std::mem::replace(&mut self.ep, Fid(std::ptr::null_mut())));
        drop(self.rem_write.take());
        drop(self.rem_read.take());
        drop(std::mem::replace(&mut self.cq, Fid(std::ptr::null_mut())));
        release_requests(self);
        self.tombstone();
        retire(self.ctx, self.ring_mem);
    }
}

#[derive(Default)]
pub struct EpState {
    /// Next ring position to take.
    pub cons: u64,
    /// Ring positions of transmit operations still in flight.
    pub inflight: InFlight,
    /// Every live `Req` (by address), so completions can be trusted and the
    /// requests freed when the endpoint closes.
    pub reqs: AddrSet,
    /// Request records for reuse: no allocation per entry.
    pub pool: Pool<Req>,
    pub rem_write_seen: (u64, u64),
    pub rem_read_seen: (u64, u64),
    /// The next entry waits for room in its CQ: it is not work the thread
    /// can do until the application reads completions.
    pub blocked: bool,
    /// Since when the entry at `cons` has been unpublished while a later
    /// one is published.
    pub stalled_since: Option<Instant>,
    /// When `expire` looks next.
    pub next_expire: Option<Instant>,
    /// The ring position libfabric keeps answering `-FI_EAGAIN` for, and
    /// since when.
    pub refused_since: Option<(u64, Instant)>,
    /// Fences in force, and the transmit operations they hold back (not
    /// yet handed to libfabric, counted in flight).
    pub fences: PeerFences<(Box<Req>, Wqe)>,
    /// Requests not yet handed to libfabric (in order), counted in flight.
    pub waiting: VecDeque<Waiting>,
    /// Puts with a fenced signal, by ring position: parts still to
    /// complete, and the first error.
    pub joint: HashMap<u64, (u8, Option<(Error, i32)>)>,
    /// The registrations and AV addresses entries are checked against.
    pub tables: Tables,
    /// Where libfabric's CQ reads put source addresses.
    pub cq_src: CqSources,
}

impl EpState {
    /// A transmit operation of `r` is in flight.
    pub fn fly(&mut self, r: &Req) {
        self.inflight.add(r.pos);
        self.fences.sent(r.peer, r.pos);
    }

    /// A transmit operation of `r` is no longer in flight.
    pub fn land(&mut self, r: &Req) {
        self.inflight.done(r.pos);
        self.fences.done(r.peer, r.pos);
    }

    /// A fence at `pos`: later transmit operations wait for the earlier
    /// ones to their peer.
    pub fn fence(&mut self, pos: u64) {
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

/// What a thread about to sleep re-checks of an endpoint, as its last pass
/// left it (the pass keeps it here, outside `EpState`, so that the check
/// takes no lock): the consumer position, whether the entry there waits
/// for room in its CQ, and whether only polling will notice when that
/// changes (a stall being timed, or a CQ the application has to make room
/// in: its reads ring no bell). Only the progress thread writes and reads
/// it, and only it changes the state a pass reads, so nothing moves
/// between the pass and the sleep.
#[derive(Default)]
pub struct SleepCheck(pub AtomicU64);

impl SleepCheck {
    pub fn set(&self, st: &EpState) {
        let poll = st.blocked || st.stalled_since.is_some();
        // Positions grow by one an entry: far below 2^62.
        let w = st.cons << 2 | u64::from(st.blocked) << 1 | u64::from(poll);
        self.0.store(w, Ordering::Relaxed);
    }
}

/// The source addresses of one CQ read, kept between passes: not every
/// provider writes them, so each slot holds `FI_ADDR_NOTAVAIL` until
/// libfabric writes it and is reset once its entry is handled, and no
/// pass has to fill the whole buffer.
pub struct CqSources(pub [u64; CQ_BATCH]);

impl Default for CqSources {
    fn default() -> CqSources {
        CqSources([ffi::FI_ADDR_NOTAVAIL; CQ_BATCH])
    }
}

/// Frees the requests libfabric never completed (the endpoint is closed).
pub fn release_requests(ep: &EpInner) {
    let mut st = ep.state.lock().unwrap();
    let held = st.fences.drain();
    for req in std::mem::take(&mut st.waiting)
        .into_iter()
        .map(|h| h.req)
        .chain(held.into_iter().map(|(req, _)| req))
    {
        if let Some(cq) = ep.bound.get().and_then(|b| b.cq_for(req.op)) {
            cq.unreserve();
        }
    }
    for r in st.reqs.drain() {
        // SAFETY: registered requests are live boxes that libfabric no
        // longer references once its endpoint is closed.
        let req = unsafe { Box::from_raw(r as *mut Req) };
        // The completion it reserved will never come (one that timed out
        // used its reservation already).
        if req.timed_out {
            continue;
        }
        if let Some(cq) = ep.bound.get().and_then(|b| b.cq_for(req.op)) {
            cq.unreserve();
        }
    }
    st.inflight.clear();
}
