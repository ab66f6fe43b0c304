//! The progress thread: its endpoints, its loop over them, and its sleep
//! in `epoll` when they are idle.
use super::gate::{Gate, Watch, GATE_IN, GATE_LOST, GATE_STATE};
use super::pass::{progress, ring_ready};
use super::tuning::Tuning;
use crate::ffi;
use crate::state::ep::EpInner;
use crate::state::word::at32_ptr;
use fi_xpu_abi::errno::*;
use fi_xpu_os::rustix::event::epoll;
use fi_xpu_os::rustix::io::Errno;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::c_void;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Idle passes that only spin before the thread starts yielding its core
/// (within the spin period): a peer on the same core needs it to answer.
const SPIN_PASSES: u32 = 64;
/// Longest sleep when nothing needs polling: a safety net for posters
/// built without the wake-up.
const MAX_SLEEP: Duration = Duration::from_secs(1);

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
    /// The kernel lacks `epoll_pwait2` (before 5.11): `wait` goes straight
    /// to `epoll_wait`.
    no_pwait2: AtomicBool,
}

fn sleeping_word(ep: &EpInner) -> &'static AtomicU32 {
    // SAFETY: the block is live while `ep` is.
    unsafe { at32_ptr(std::ptr::addr_of_mut!((*ep.dev()).sleeping)) }
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
            no_pwait2: AtomicBool::new(false),
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
    /// a ring has work or libfabric has events to read first. `bounded`:
    /// only polling notices some work whatever the rings hold (see `run`);
    /// `fids`: the libfabric CQs with wait fds.
    fn sleep(&self, eps: &[Arc<EpInner>], mut bounded: bool, fids: &mut [*mut c_void]) {
        let mut ready = false;
        for ep in eps {
            sleeping_word(ep).store(1, Ordering::SeqCst);
            // Re-check after announcing sleep: a poster that published
            // before it saw `sleeping` left its entry for this check.
            let (r, poll) = ring_ready(ep);
            bounded |= poll;
            if r {
                ready = true;
                break;
            }
        }
        ready |= self.stop.load(Ordering::SeqCst);
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
    /// microseconds and those kernels. An `ENOSYS` is remembered: later
    /// sleeps skip the call that fails.
    fn wait(&self, limit: Duration) -> bool {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        let ts = libc::timespec {
            tv_sec: limit.as_secs() as libc::time_t,
            tv_nsec: limit.subsec_nanos() as libc::c_long,
        };
        let mut n = -1;
        if !self.no_pwait2.load(Ordering::Relaxed) {
            // SAFETY: live epoll fd, event buffer of 8, valid timeout, no mask.
            n = unsafe {
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
                self.no_pwait2.store(true, Ordering::Relaxed);
            }
        }
        if n < 0 && self.no_pwait2.load(Ordering::Relaxed) {
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

// Never inlined: the benchmarks find the proxy thread by this function.
#[inline(never)]
pub fn run(w: Arc<Worker>) {
    let mut last = Instant::now();
    let mut idle = 0u32;
    let mut eps: Vec<Arc<EpInner>> = Vec::new();
    let mut gen = u64::MAX;
    // The libfabric CQs with wait fds, and whether a sleep is bounded
    // whatever the passes found: a CQ without a wait fd, a ring a device
    // fills, or libfabric progress only inside its calls. Both change only
    // with the list.
    let mut fids = Vec::new();
    let mut always_bounded = false;
    while !w.stop.load(Ordering::Acquire) {
        let now_gen = w.eps_gen.load(Ordering::Acquire);
        if now_gen != gen {
            eps.clone_from(&w.eps.lock().unwrap());
            fids.clear();
            fids.extend(eps.iter().filter(|ep| ep.cq_fd >= 0).map(|ep| ep.cq.ptr()));
            always_bounded = eps
                .iter()
                .any(|ep| ep.cq_fd < 0 || ep.device_ring || !ep.dom.auto_progress);
            gen = now_gen;
        }
        // One clock reading per loop: the passes' time limits and the
        // spin period are all far coarser than a loop.
        let now = Instant::now();
        let (mut busy, mut pending) = (false, false);
        for ep in &eps {
            let p = progress(ep, &w.tuning, &w.gate, now);
            busy |= p.busy;
            pending |= p.pending;
        }
        if busy {
            idle = 0;
            last = now;
        } else {
            idle = idle.saturating_add(1);
            // Transmits in flight need libfabric's progress calls to move
            // their data (a full socket, a peer's queue), and report
            // nothing until they finish.
            let spinning = !w.tuning.spin.is_zero() && now.duration_since(last) < w.tuning.spin;
            if pending || spinning {
                if idle < SPIN_PASSES {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            } else {
                w.sleep(&eps, always_bounded, &mut fids);
            }
        }
        w.epoch.fetch_add(1, Ordering::AcqRel);
    }
}
