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
use crate::fence::PeerFences;
use crate::ffi::{self, fi_cq_err_entry, fi_cq_tagged_entry};
use crate::inflight::{AddrSet, InFlight, Pool};
use crate::layout::*;
use crate::objects::{Bound, EpInner};
use crate::ring::{self, Limits, MrRange};
use crate::tables::Tables;
use fi_xpu_abi::errno::*;
use fi_xpu_abi::flags::*;
use fi_xpu_os::rustix::event::epoll;
use fi_xpu_os::rustix::io::Errno;
use fi_xpu_prov_sdk::{Error, Result};
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Entries taken from one ring per pass, so that one busy endpoint does not
/// starve the others or its own completions.
const BATCH: usize = 64;
/// Completions read from libfabric per call.
const CQ_BATCH: usize = 64;
/// Most libfabric CQ reads (of up to `CQ_BATCH` entries, or one error) per
/// endpoint and pass.
const CQ_READS_PER_PASS: usize = 16;
/// Idle passes that only spin before the thread starts yielding its core
/// (within the spin period): a peer on the same core needs it to answer.
const SPIN_PASSES: u32 = 64;
/// Longest sleep when nothing needs polling: a safety net for posters
/// built without the wake-up.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// Spin after activity where the process may use `SPIN_MIN_CPUS` CPUs or
/// more. With fewer, a communicating process's threads (application and
/// progress, on both sides) outnumber the cores, and a spinning thread only
/// delays the ones that would produce its work (measured: milliseconds per
/// ping-pong instead of tens of microseconds on two cores); a sleeper is
/// scheduled at once when woken.
const DEFAULT_SPIN_US: u64 = 100;
const SPIN_MIN_CPUS: usize = 4;
const DEFAULT_POLL_US: u64 = 200;
const MAX_TUNING_US: u64 = 1_000_000;
const DEFAULT_STALL_MS: u64 = 1000;
const MAX_STALL_MS: u64 = 3_600_000;
/// Later ring positions looked at for a published entry behind a stalled
/// one.
const STALL_SCAN: u64 = 64;
const DEFAULT_CLOSE_MS: u64 = 5000;
const MAX_CLOSE_MS: u64 = 3_600_000;
const DEFAULT_OP_TIMEOUT_MS: u64 = 10_000;
const MAX_OP_TIMEOUT_MS: u64 = 3_600_000;
const MAX_TEST_DELAY_MS: u64 = 60_000;
/// Longest gap between two looks for RMA and atomic operations past their
/// time limit.
const EXPIRE_SCAN: Duration = Duration::from_millis(50);

/// How an idle progress thread waits, and how long closes wait for it.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Polling continues this long after the last activity.
    pub spin: Duration,
    /// Longest sleep while something can only be noticed by polling.
    pub poll: Duration,
    /// How long the entry at the consumer position may stay unpublished
    /// while a later one is published before it is failed and skipped.
    pub stall: Duration,
    /// How long a close waits for a progress thread that is inside a
    /// libfabric call before it gives the thread up (see `Gate`).
    pub close: Duration,
    /// How long an RMA or atomic operation may stay without a completion
    /// from libfabric before it is failed with `-FI_ETIMEDOUT`; `None`:
    /// no limit.
    pub op_timeout: Option<Duration>,
    /// Testing only (`FI_XPU_OFI_TEST_DELAY_MS`): RMA write data (of
    /// writes and put-with-signal) reaches libfabric only this long after
    /// the entry was taken, as on a transport that places data late; other
    /// operations are not held. `None`: off.
    pub test_delay: Option<Duration>,
}

impl Tuning {
    /// `FI_XPU_OFI_SPIN_US`, `FI_XPU_OFI_POLL_US` (microseconds),
    /// `FI_XPU_OFI_STALL_MS` and `FI_XPU_OFI_CLOSE_MS` (milliseconds), read
    /// through `env`; out-of-range or malformed values keep the defaults.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Tuning {
        Self::from_env_cpus(env, usable_cpus())
    }

    fn from_env_cpus(env: impl Fn(&str) -> Option<String>, cpus: usize) -> Tuning {
        let default_spin = if cpus >= SPIN_MIN_CPUS {
            DEFAULT_SPIN_US
        } else {
            0
        };
        let get = |name: &str, default: u64, range: std::ops::RangeInclusive<u64>| match env(name) {
            None => default,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(n) if range.contains(&n) => n,
                _ => {
                    crate::core::warn(&format!(
                        "{name}={v} is not a number in {}..={}; using {default}",
                        range.start(),
                        range.end()
                    ));
                    default
                }
            },
        };
        Tuning {
            spin: Duration::from_micros(get("FI_XPU_OFI_SPIN_US", default_spin, 0..=MAX_TUNING_US)),
            poll: Duration::from_micros(get(
                "FI_XPU_OFI_POLL_US",
                DEFAULT_POLL_US,
                1..=MAX_TUNING_US,
            )),
            stall: Duration::from_millis(get(
                "FI_XPU_OFI_STALL_MS",
                DEFAULT_STALL_MS,
                1..=MAX_STALL_MS,
            )),
            close: Duration::from_millis(get(
                "FI_XPU_OFI_CLOSE_MS",
                DEFAULT_CLOSE_MS,
                1..=MAX_CLOSE_MS,
            )),
            op_timeout: match get(
                "FI_XPU_OFI_OP_TIMEOUT_MS",
                DEFAULT_OP_TIMEOUT_MS,
                0..=MAX_OP_TIMEOUT_MS,
            ) {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
            test_delay: match get("FI_XPU_OFI_TEST_DELAY_MS", 0, 0..=MAX_TEST_DELAY_MS) {
                0 => None,
                ms => Some(Duration::from_millis(ms)),
            },
        }
    }
}

/// CPUs this process may run on.
fn usable_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

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
            .map(|&r| {
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

pub struct Worker {
    eps: Mutex<Vec<Arc<EpInner>>>,
    /// Bumped after each change of `eps`: the thread copies the list only
    /// then, not on every pass.
    eps_gen: AtomicU64,
    stop: AtomicBool,
    /// Bumped once per loop; closers wait for it to move.
    epoch: AtomicU64,
    /// eventfd that wakes the thread: host-side posts, new endpoints,
    /// closers, stop.
    bell: OwnedFd,
    /// epoll set of `bell` and the endpoints' libfabric CQ wait fds.
    poller: OwnedFd,
    /// The libfabric fabric, for `fi_trywait`.
    fabric: usize,
    tuning: Tuning,
    gate: Gate,
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

fn sleeping_word(ep: &EpInner) -> &'static AtomicU32 {
    // SAFETY: the block is live while `ep` is.
    unsafe { at32(std::ptr::addr_of_mut!((*ep.dev()).sleeping)) }
}

/// Token of the eventfd in the epoll set; CQ fds carry their fd number.
const BELL: u64 = u64::MAX;

/// Adds (`token` is `Some`) or removes `fd` in the epoll set, for input.
fn epoll_ctl(poller: &OwnedFd, fd: i32, token: Option<u64>) -> Result<()> {
    // SAFETY: `fd` is our eventfd or a libfabric CQ's fd, open for the
    // call (a CQ's is removed here before libfabric closes it).
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let r = match token {
        Some(t) => epoll::add(
            poller,
            fd,
            epoll::EventData::new_u64(t),
            epoll::EventFlags::IN,
        ),
        None => epoll::delete(poller, fd),
    };
    r.map_err(|e| Error::from_errno(e.raw_os_error()))
}

impl Worker {
    pub fn new(fabric: *mut c_void, tuning: Tuning) -> Result<Worker> {
        let os_err = |e: Errno| Error::from_errno(e.raw_os_error());
        let bell = fi_xpu_os::wake::eventfd().map_err(os_err)?;
        let poller = epoll::create(epoll::CreateFlags::CLOEXEC).map_err(os_err)?;
        epoll_ctl(&poller, bell.as_raw_fd(), Some(BELL))?;
        Ok(Worker {
            eps: Mutex::new(Vec::new()),
            eps_gen: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            epoch: AtomicU64::new(0),
            bell,
            poller,
            fabric: fabric as usize,
            tuning,
            gate: Gate::new(),
        })
    }

    /// The eventfd host-side posters write (`EpDev.wake_fd`).
    pub fn bell_fd(&self) -> i32 {
        self.bell.as_raw_fd()
    }

    fn kick(&self) {
        // A full counter (EAGAIN) already wakes the thread.
        fi_xpu_os::wake::poke(&self.bell);
    }

    pub fn add(&self, ep: Arc<EpInner>) {
        if ep.cq_fd >= 0 {
            if let Err(e) = epoll_ctl(&self.poller, ep.cq_fd, Some(ep.cq_fd as u64)) {
                // The thread still polls the CQ, only less promptly.
                crate::core::warn(&format!("cannot wait on the libfabric CQ's fd: {e}"));
            }
        }
        self.eps.lock().unwrap().push(ep);
        self.eps_gen.fetch_add(1, Ordering::AcqRel);
        self.kick();
    }

    /// Removes an endpoint and returns once the thread no longer uses it,
    /// or once the thread is given up: inside one libfabric call for
    /// longer than `Tuning::close`. The thread then keeps the endpoint (and
    /// its libfabric objects) for good.
    pub fn remove(&self, ep: &Arc<EpInner>, name: &str) {
        self.eps.lock().unwrap().retain(|e| !Arc::ptr_eq(e, ep));
        // Before `start` below: the thread drops its copy of the list at
        // the first pass that begins after this.
        self.eps_gen.fetch_add(1, Ordering::AcqRel);
        if ep.cq_fd >= 0 {
            // Before libfabric closes the fd; failure means it was never added.
            let _ = epoll_ctl(&self.poller, ep.cq_fd, None);
        }
        let start = self.epoch.load(Ordering::Acquire);
        let mut watch = Watch::new();
        // Two full loops: the one running at removal may still hold a clone.
        while !self.stop.load(Ordering::Acquire) && self.epoch.load(Ordering::Acquire) < start + 2 {
            if self.give_up(&mut watch, name) {
                return;
            }
            self.kick();
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Gives the thread up once `watch` has seen it inside the same
    /// libfabric call for the close limit; true when it is given up (now
    /// or before). A thread running the provider's own code always comes
    /// back and is never given up.
    pub fn give_up(&self, watch: &mut Watch, name: &str) -> bool {
        let v = self.gate.0.load(Ordering::Acquire);
        if v & GATE_STATE == GATE_LOST {
            return true;
        }
        if v & GATE_STATE != GATE_IN || v != watch.seen {
            *watch = Watch {
                seen: v,
                since: Instant::now(),
            };
            return false;
        }
        if watch.since.elapsed() < self.tuning.close {
            return false;
        }
        let lost = (v & !GATE_STATE) | GATE_LOST;
        match self
            .gate
            .0
            .compare_exchange(v, lost, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {}
            // The call returned just now.
            Err(_) => return self.gate.lost(),
        }
        crate::core::warn(&format!(
            "progress thread {name} has not come back from a libfabric call for {} ms \
             (a peer that died holding a lock of libfabric's shm provider does this): \
             closing without it; its endpoints and their libfabric objects stay open \
             until the process exits",
            self.tuning.close.as_millis()
        ));
        true
    }

    /// Whether the thread was given up.
    pub fn lost(&self) -> bool {
        self.gate.lost()
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.kick();
    }

    /// Blocks until a wake-up, a libfabric event or the time limit, unless
    /// a ring has work or libfabric has events to read first. `pending`:
    /// transmits are in flight, which only polling moves on.
    fn sleep(&self, eps: &[Arc<EpInner>], pending: bool, fids: &mut Vec<*mut c_void>) {
        fids.clear();
        let mut bounded = pending;
        for ep in eps {
            sleeping_word(ep).store(1, Ordering::SeqCst);
            if ep.cq_fd >= 0 {
                fids.push(ep.cq.ptr());
            }
            bounded |= ep.cq_fd < 0 || ep.device_ring || !ep.dom.auto_progress;
        }
        // Re-check after announcing sleep: a poster that published before
        // it saw `sleeping` left its entry for this check.
        let mut ready = self.stop.load(Ordering::SeqCst);
        for ep in eps {
            let (r, poll) = ring_ready(ep);
            ready |= r;
            bounded |= poll;
        }
        let may_block = !ready
            && match fids.len() {
                0 => true,
                // SAFETY: live fabric and CQs of this domain.
                n => match self.gate.call(|| unsafe {
                    ffi::xo_trywait(self.fabric as *mut c_void, fids.as_mut_ptr(), n as i32)
                }) {
                    0 => true,
                    r if r == -FI_EAGAIN => false,
                    // libfabric cannot say: the fds may miss events.
                    _ => {
                        bounded = true;
                        true
                    }
                },
            };
        if may_block {
            let limit = if bounded { self.tuning.poll } else { MAX_SLEEP };
            if self.wait(limit) {
                fi_xpu_os::wake::drain(&self.bell);
            }
        }
        for ep in eps {
            sleeping_word(ep).store(0, Ordering::Relaxed);
        }
    }

    /// `epoll` with a microsecond limit; true when the bell rang.
    ///
    /// The one epoll call left on libc: rustix's `epoll::wait` takes either
    /// milliseconds or (feature `linux_5_11`) `epoll_pwait2` with no
    /// fallback for kernels before 5.11, and the proxy needs both
    /// microseconds and those kernels.
    fn wait(&self, limit: Duration) -> bool {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        let ts = libc::timespec {
            tv_sec: limit.as_secs() as libc::time_t,
            tv_nsec: limit.subsec_nanos() as libc::c_long,
        };
        // SAFETY: live epoll fd, event buffer of 8, valid timeout, no mask.
        let mut n = unsafe {
            libc::syscall(
                libc::SYS_epoll_pwait2,
                self.poller.as_raw_fd(),
                evs.as_mut_ptr(),
                evs.len() as i32,
                &ts as *const libc::timespec,
                std::ptr::null::<libc::sigset_t>(),
                0usize,
            )
        };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSYS) {
            // Kernels before 5.11: milliseconds, rounded up.
            let ms = limit.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
            // SAFETY: as above.
            n = unsafe {
                libc::epoll_wait(
                    self.poller.as_raw_fd(),
                    evs.as_mut_ptr(),
                    evs.len() as i32,
                    ms,
                )
            } as libc::c_long;
        }
        n > 0 && evs[..n as usize].iter().any(|e| e.u64 == BELL)
    }
}

pub fn run(w: Arc<Worker>) {
    let mut last = Instant::now();
    let mut idle = 0u32;
    let mut eps: Vec<Arc<EpInner>> = Vec::new();
    let mut gen = u64::MAX;
    let mut fids = Vec::new();
    while !w.stop.load(Ordering::Acquire) {
        let now_gen = w.eps_gen.load(Ordering::Acquire);
        if now_gen != gen {
            eps.clone_from(&w.eps.lock().unwrap());
            fids.reserve(eps.len());
            gen = now_gen;
        }
        let (mut busy, mut pending) = (false, false);
        for ep in &eps {
            let p = progress(ep, &w.tuning, &w.gate);
            busy |= p.busy;
            pending |= p.pending;
        }
        let now = Instant::now();
        if busy {
            idle = 0;
            last = now;
        } else {
            idle = idle.saturating_add(1);
            // Transmits in flight need libfabric's progress calls to move
            // their data (a full socket, a peer's queue), and report
            // nothing until they finish.
            if pending || now.duration_since(last) < w.tuning.spin {
                if idle < SPIN_PASSES {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            } else {
                w.sleep(&eps, pending, &mut fids);
            }
        }
        w.epoch.fetch_add(1, Ordering::AcqRel);
    }
}

/// Whether the entry at the consumer position is published and has room
/// in its CQ, and whether only polling will notice when that changes: a
/// stall being timed, or a CQ the application has to make room in (reads
/// ring no bell).
fn ring_ready(ep: &EpInner) -> (bool, bool) {
    let st = ep.state.lock().unwrap();
    let slot = slot(ep, st.cons);
    // SAFETY: the slot lies in the ring.
    let ready =
        unsafe { at64(std::ptr::addr_of_mut!((*slot).seq)) }.load(Ordering::SeqCst) == st.cons + 1;
    (
        ready && !st.blocked,
        st.blocked || st.stalled_since.is_some(),
    )
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

/// One pass over an endpoint.
fn progress(ep: &EpInner, tuning: &Tuning, g: &Gate) -> Pass {
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
    busy |= hand_over_waiting(ep, b, &mut st, g);
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
            crate::core::warn(&format!(
                "ring entry at {pos} never published (seq {seq}) while later ones were, for {} ms: failed and skipped",
                tuning.stall.as_millis()
            ));
            fail(b, &w, Error::INVAL, 0);
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
            Err(e) if e == Error::AGAIN => {
                crate::core::warn(&format!(
                    "op {} at ring position {pos}: libfabric refused it with {} for {} ms: \
                     failed with {}",
                    w.op,
                    e,
                    tuning.op_timeout.map_or(0, |t| t.as_millis()),
                    Error::TIMEDOUT
                ));
                fail(b, &w, Error::TIMEDOUT, 0);
            }
            _ => st.refused_since = None,
        }
        st.cons = pos + 1;
        // SAFETY: aligned word of the live endpoint block.
        unsafe { at64(std::ptr::addr_of_mut!((*dev).cons)) }.store(st.cons, Ordering::Release);
        busy = true;
    }
    busy |= poll_cq(ep, b, &mut st, g);
    busy |= mirror_remote(ep, b, &mut st, g);
    busy |= expire(b, &mut st, tuning);
    busy |= release_held(ep, b, &mut st, g, tuning);
    let flushed = st.inflight.first().unwrap_or(st.cons);
    // SAFETY: aligned word of the live endpoint block.
    unsafe { at64(std::ptr::addr_of_mut!((*dev).flushed)) }.store(flushed, Ordering::Release);
    Pass {
        busy,
        pending: !st.inflight.is_empty(),
    }
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
    if let Some(cq) = cq_for(b, req.op) {
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

/// Checks and issues one entry. `Err(Error::AGAIN)` leaves it in the ring to
/// retry; every other outcome consumes it. `more`: the next entry is
/// published already.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn issue(
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
        if let Some(cq) = cq_for(b, w.op) {
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
fn release_held(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate, tuning: &Tuning) -> bool {
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
fn post_signal(
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

/// Hands over the waiting requests that are due, in order; true when one
/// moved.
fn hand_over_waiting(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate) -> bool {
    let now = Instant::now();
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
        w.raddr.wrapping_sub(w.rkey & crate::objects::KEY_BASE_MASK)
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
/// operation would otherwise never complete.
fn expire(b: &Bound, st: &mut EpState, tuning: &Tuning) -> bool {
    let Some(limit) = tuning.op_timeout else {
        return false;
    };
    let now = Instant::now();
    if st.next_expire.is_some_and(|t| now < t) {
        return false;
    }
    st.next_expire = Some(now + EXPIRE_SCAN.min(limit / 4));
    let mut expired = Vec::new();
    for &r in &st.reqs {
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
            (
                r.pos,
                r.peer,
                Wqe {
                    op: r.op,
                    context: r.context,
                    buf: r.buf,
                    len: r.len,
                    tag: r.tag,
                    ..Default::default()
                },
            )
        };
        st.inflight.done(pos);
        st.fences.done(peer, pos);
        crate::core::warn(&format!(
            "op {} at ring position {pos}: no completion from libfabric after {} ms: \
             failed with {} (libfabric's shm provider never answers an access with a \
             wrong key or outside the registration)",
            w.op,
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
fn refused_too_long(st: &mut EpState, pos: u64, w: &Wqe, tuning: &Tuning) -> bool {
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
    if !st.reqs.remove(&(ctx as usize)) {
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
fn poll_cq(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate) -> bool {
    let mut busy = false;
    // Entries left uninitialised: this runs on every pass and libfabric
    // writes the entries it reports. Not every provider writes sources.
    let mut buf = [const { MaybeUninit::<fi_cq_tagged_entry>::uninit() }; CQ_BATCH];
    let mut src = [ffi::FI_ADDR_NOTAVAIL; CQ_BATCH];
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
                src.as_mut_ptr(),
            )
        });
        if n > 0 {
            busy = true;
            for i in 0..(n as usize).min(CQ_BATCH) {
                // SAFETY: libfabric wrote the first `n` entries.
                let e = unsafe { buf[i].assume_init_ref() };
                complete(ep, b, st, e, src[i], g);
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
    req.discard = None;
    st.pool.give(req);
}

/// Adds what libfabric's remote-access counters gained since the last look
/// to the XPU counters bound for remote reads and writes; any gain is
/// activity, bound or not.
fn mirror_remote(ep: &EpInner, b: &Bound, st: &mut EpState, g: &Gate) -> bool {
    let mut busy = false;
    for (fid, idx, seen) in [
        (&ep.rem_write, CNTR_REM_WRITE, &mut st.rem_write_seen),
        (&ep.rem_read, CNTR_REM_READ, &mut st.rem_read_seen),
    ] {
        let Some(f) = fid else {
            continue;
        };
        let c = b.cntr[idx].as_deref();
        // SAFETY: live libfabric counter. Errors only matter to a bound
        // XPU counter; reading them costs a second call every pass.
        let (v, e) = g.call(|| unsafe {
            (
                ffi::xo_cntr_read(f.ptr()),
                if c.is_some() {
                    ffi::xo_cntr_readerr(f.ptr())
                } else {
                    seen.1
                },
            )
        });
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
    }
    busy
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
        if let Some(cq) = ep.bound.get().and_then(|b| cq_for(b, req.op)) {
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
        if let Some(cq) = ep.bound.get().and_then(|b| cq_for(b, req.op)) {
            cq.unreserve();
        }
    }
    st.inflight.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `fi_xpu_info -e` lists is what is used.
    #[test]
    fn listed_defaults_are_the_ones_used() {
        let listed = |name: &str| {
            crate::objects::PARAMS
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, d, _)| d.parse::<u64>().unwrap())
                .unwrap()
        };
        assert_eq!(listed("spin_us"), DEFAULT_SPIN_US);
        assert_eq!(listed("poll_us"), DEFAULT_POLL_US);
        assert_eq!(listed("stall_ms"), DEFAULT_STALL_MS);
        assert_eq!(listed("close_ms"), DEFAULT_CLOSE_MS);
        assert_eq!(listed("op_timeout_ms"), DEFAULT_OP_TIMEOUT_MS);
        assert_eq!(listed("test_delay_ms"), 0);
        assert_eq!(
            listed("progress_threads"),
            u64::from(crate::objects::DEFAULT_THREADS)
        );
    }

    fn tuning(vars: &[(&str, &str)]) -> Tuning {
        Tuning::from_env_cpus(
            |n| {
                vars.iter()
                    .find(|(k, _)| *k == n)
                    .map(|(_, v)| v.to_string())
            },
            16,
        )
    }

    #[test]
    fn tuning_from_env() {
        let d = tuning(&[]);
        assert_eq!(d.spin, Duration::from_micros(DEFAULT_SPIN_US));
        assert_eq!(d.poll, Duration::from_micros(DEFAULT_POLL_US));
        assert_eq!(d.stall, Duration::from_millis(DEFAULT_STALL_MS));
        assert_eq!(d.close, Duration::from_millis(DEFAULT_CLOSE_MS));
        assert_eq!(
            d.op_timeout,
            Some(Duration::from_millis(DEFAULT_OP_TIMEOUT_MS))
        );
        assert_eq!(
            tuning(&[("FI_XPU_OFI_OP_TIMEOUT_MS", "0")]).op_timeout,
            None
        );
        assert_eq!(
            tuning(&[("FI_XPU_OFI_OP_TIMEOUT_MS", "250")]).op_timeout,
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            tuning(&[("FI_XPU_OFI_OP_TIMEOUT_MS", "x")]).op_timeout,
            d.op_timeout
        );
        assert_eq!(d.test_delay, None);
        assert_eq!(
            tuning(&[("FI_XPU_OFI_TEST_DELAY_MS", "40")]).test_delay,
            Some(Duration::from_millis(40))
        );
        let t = tuning(&[
            ("FI_XPU_OFI_SPIN_US", "0"),
            ("FI_XPU_OFI_POLL_US", " 50 "),
            ("FI_XPU_OFI_STALL_MS", "20"),
            ("FI_XPU_OFI_CLOSE_MS", "300"),
        ]);
        assert_eq!(t.spin, Duration::ZERO);
        assert_eq!(t.poll, Duration::from_micros(50));
        assert_eq!(t.stall, Duration::from_millis(20));
        assert_eq!(t.close, Duration::from_millis(300));
        // A zero poll period would busy-wait; junk and out-of-range values
        // keep the defaults.
        let bad = tuning(&[
            ("FI_XPU_OFI_SPIN_US", "2000000"),
            ("FI_XPU_OFI_POLL_US", "0"),
            ("FI_XPU_OFI_STALL_MS", "-5"),
            ("FI_XPU_OFI_CLOSE_MS", "0"),
        ]);
        assert_eq!(bad.spin, d.spin);
        assert_eq!(bad.poll, d.poll);
        assert_eq!(bad.stall, d.stall);
        assert_eq!(bad.close, d.close);
        // Too few CPUs for the threads of a communicating process: no spin
        // unless asked for.
        let few = |vars: &[(&str, &str)]| {
            Tuning::from_env_cpus(
                |n| {
                    vars.iter()
                        .find(|(k, _)| *k == n)
                        .map(|(_, v)| v.to_string())
                },
                2,
            )
        };
        assert_eq!(few(&[]).spin, Duration::ZERO);
        assert_eq!(
            few(&[("FI_XPU_OFI_SPIN_US", "30")]).spin,
            Duration::from_micros(30)
        );
    }
}
