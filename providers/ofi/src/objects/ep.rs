//! The endpoint: its ring block (the work-request ring kernels write and
//! its staging slots), what it is bound to, and its libfabric endpoint,
//! opened and bound when it is enabled and then served by one of the
//! domain's progress threads.
use super::av::{encode_name, Av, ADDR_HDR, ADDR_LEN};
use super::ctx::XpuCtx;
use super::domain::{thread_name, Workers};
use crate::core;
use crate::fabric::{check, Fid};
use crate::ffi;
use crate::layout::*;
use crate::state::av::AvInner;
use crate::state::cntr::CntrShared;
use crate::state::cq::CqShared;
use crate::state::ep::{Bound, EpInner, EpState, SleepCheck};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{cntr_slots, Error, Result};
use std::ffi::c_void;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

/// Entries of an endpoint's work-request ring at most, the deepest
/// `tx_size`/`rx_size` served (`fi_xpu_info.limits`).
pub const MAX_RING_ENTRIES: u64 = 1 << 16;

pub struct Ep {
    pub inner: Arc<EpInner>,
    /// The domain's progress threads: one of them serves it once enabled.
    workers: Arc<Workers>,
    pending: Bound,
    worker: Option<usize>,
}

impl Ep {
    pub fn open(c: &XpuCtx, attr: &fi_xpu_ep_attr) -> Result<Ep> {
        let dom = &c.dom;
        let size = match attr.tx_size.max(attr.rx_size) {
            0 => RING_ENTRIES,
            // A size past 2^63 has no power of two: refused below.
            n => (n as u64)
                .checked_next_power_of_two()
                .unwrap_or(u64::MAX)
                .max(2),
        };
        if size > MAX_RING_ENTRIES {
            return Err(Error::INVAL);
        }
        let ring_bytes = size * std::mem::size_of::<Wqe>() as u64;
        let bytes = EP_DEV_SIZE as u64 + ring_bytes + size * STAGE_SLOT;
        let mem = core::alloc_host(c.core_ctx, bytes)?;
        let dev = mem as *mut EpDev;
        // SAFETY: fresh zeroed block, not shared yet.
        unsafe {
            (*dev).magic = fi_xpu_handle_word(FI_XPU_HANDLE_EP, FI_XPU_HANDLE_LIVE);
            (*dev).ring = (mem + EP_DEV_SIZE) as u64;
            (*dev).size = size;
            (*dev).caps = if attr.caps == 0 {
                FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC
            } else {
                attr.caps
            };
            (*dev).max_msg = dom.max_msg;
            (*dev).inject_size = INJECT_SIZE;
            (*dev).stage = mem as u64 + EP_DEV_SIZE as u64 + ring_bytes;
            (*dev).wake_fd = -1;
            (*dev).abort = core::ctx_abort_word(c.core_ctx);
        }
        Ok(Ep {
            inner: Arc::new(EpInner {
                dom: dom.clone(),
                ring_mem: mem,
                size,
                // Opened by `enable`: libfabric 1.17's `tcp;ofi_rxm` crashes
                // closing an endpoint that was never enabled, so one that
                // is never enabled never reaches libfabric.
                ep: Fid(std::ptr::null_mut()),
                cq: Fid(std::ptr::null_mut()),
                cq_fd: -1,
                device_ring: c.iface != FI_HMEM_SYSTEM,
                rem_write: None,
                rem_read: None,
                bound: OnceLock::new(),
                state: Mutex::new(EpState::default()),
                sleep_check: SleepCheck::default(),
                ctx: c.core_ctx,
            }),
            workers: c.workers.clone(),
            pending: Bound::default(),
            worker: None,
        })
    }

    pub fn bind_av(&mut self, av: &Av) -> Result<()> {
        self.pending.av = Some(av.inner.clone());
        Ok(())
    }

    pub fn bind_cq(&mut self, cq: &Arc<CqShared>, flags: u64) -> Result<()> {
        if flags & FI_TRANSMIT != 0 {
            self.pending.tx_cq = Some(cq.clone());
        }
        if flags & FI_RECV != 0 {
            self.pending.rx_cq = Some(cq.clone());
        }
        Ok(())
    }

    pub fn bind_cntr(&mut self, c: &Arc<CntrShared>, flags: u64) -> Result<()> {
        if flags & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 && !self.inner.dom.has(ffi::FI_RMA_EVENT)
        {
            core::warn(&format!(
                "remote counters need FI_RMA_EVENT, which libfabric provider {} lacks",
                self.inner.dom.prov
            ));
            return Err(Error::OPNOTSUPP);
        }
        for i in cntr_slots(flags) {
            self.pending.cntr[i] = Some(c.clone());
        }
        Ok(())
    }

    pub fn enable(&mut self) -> Result<()> {
        // The core says it in its log line for -FI_ENOAV.
        let av = self.pending.av.clone().ok_or(Error::NOAV)?;
        let inner = Arc::get_mut(&mut self.inner).ok_or(Error::BUSY)?;
        let dom = inner.dom.clone();
        inner.open_fabric_ep()?;
        if let Err(e) = Self::enable_fabric(inner, &av, &self.pending) {
            // The endpoint closes first, then what was bound to it (the
            // AV, closed later by the application, among them): an AV or
            // CQ that an endpoint still holds refuses to close (EBUSY) and
            // leaks. Closing a libfabric endpoint that was never enabled
            // crashes libfabric 1.17's tcp;ofi_rxm, so there the endpoint,
            // and what is bound to it, are left open instead.
            let fids = [
                std::mem::replace(&mut inner.ep, Fid(std::ptr::null_mut())),
                inner.rem_write.take().unwrap_or(Fid(std::ptr::null_mut())),
                inner.rem_read.take().unwrap_or(Fid(std::ptr::null_mut())),
                std::mem::replace(&mut inner.cq, Fid(std::ptr::null_mut())),
            ];
            if dom.prov.contains("ofi_rxm") {
                fids.into_iter().for_each(std::mem::forget);
            } else {
                drop(fids); // in order: the array drops its first element first
            }
            inner.cq_fd = -1;
            return Err(e);
        }
        let b = self.pending.clone();
        let dev = inner.dev();
        // SAFETY: the block is not shared with a device yet (not exported
        // before enable).
        unsafe {
            (*dev).tx_cq = b.tx_cq.as_ref().map_or(0, |c| c.dev() as u64);
            (*dev).rx_cq = b.rx_cq.as_ref().map_or(0, |c| c.dev() as u64);
            for i in 0..6 {
                (*dev).cntr[i] = b.cntr[i].as_ref().map_or(0, |c| c.dev() as u64);
            }
        }
        let _ = inner.bound.set(b);
        let workers = &self.workers.list;
        let n = workers.len();
        let first = self.workers.next.fetch_add(1, Ordering::Relaxed);
        // A thread given up (stuck inside libfabric) would never serve it.
        let Some(w) = (0..n)
            .map(|k| (first + k) % n)
            .find(|&w| !workers[w].lost())
        else {
            core::warn("fi_xpu_enable: every progress thread of the domain is stuck in libfabric");
            return Err(Error::IO);
        };
        // SAFETY: as above, not shared yet.
        unsafe { (*dev).wake_fd = workers[w].bell_fd() };
        workers[w].add(self.inner.clone());
        self.worker = Some(w);
        Ok(())
    }

    /// Binds AV, CQ and remote counters to the libfabric endpoint and
    /// enables it.
    fn enable_fabric(inner: &mut EpInner, av: &AvInner, pending: &Bound) -> Result<()> {
        let (ep, dom) = (inner.ep.ptr(), inner.dom.clone());
        // SAFETY: live libfabric objects of the same domain.
        check(unsafe { ffi::xo_ep_bind(ep, av.fid.ptr(), 0) } as i64)?;
        // SAFETY: as above.
        check(unsafe { ffi::xo_ep_bind(ep, inner.cq.ptr(), FI_TRANSMIT | FI_RECV) } as i64)?;
        // With FI_RMA_EVENT the counters are opened even when no XPU counter
        // is bound: their movement tells the progress thread that peers are
        // writing or reading here, which libfabric's manual progress only
        // completes inside its calls.
        let open_cntr = || -> Result<Fid> {
            let mut c = std::ptr::null_mut();
            // SAFETY: live domain; valid out-pointer.
            check(unsafe { ffi::xo_cntr_open(dom.domain.ptr(), &mut c) } as i64)?;
            Ok(Fid(c))
        };
        let unbound =
            pending.cntr[CNTR_REM_WRITE].is_none() && pending.cntr[CNTR_REM_READ].is_none();
        if unbound && dom.has(ffi::FI_RMA_EVENT) {
            // Only the movement matters: one counter of both, which the
            // progress thread reads once a pass instead of twice. Two
            // counters where libfabric cannot bind one to both.
            let c = open_cntr()?;
            // SAFETY: live libfabric objects.
            if unsafe { ffi::xo_ep_bind(ep, c.ptr(), FI_REMOTE_WRITE | FI_REMOTE_READ) } == 0 {
                inner.rem_write = Some(c);
            }
        }
        let shared = inner.rem_write.is_some();
        for (i, flag) in [
            (CNTR_REM_WRITE, FI_REMOTE_WRITE),
            (CNTR_REM_READ, FI_REMOTE_READ),
        ] {
            if shared || pending.cntr[i].is_none() && !dom.has(ffi::FI_RMA_EVENT) {
                continue;
            }
            let c = open_cntr()?;
            // SAFETY: live libfabric objects.
            check(unsafe { ffi::xo_ep_bind(ep, c.ptr(), flag) } as i64)?;
            if flag == FI_REMOTE_WRITE {
                inner.rem_write = Some(c);
            } else {
                inner.rem_read = Some(c);
            }
        }
        // SAFETY: live endpoint with AV and CQ bound.
        let r = unsafe { ffi::xo_ep_enable(ep) };
        if r != 0 {
            core::warn(&format!("fi_enable failed: {}", ffi::strerror(r)));
            return Err(Error::from_code(r));
        }
        Ok(())
    }

    pub fn name(&self) -> Result<[u8; ADDR_LEN]> {
        if self.worker.is_none() {
            return Err(Error::OPBADSTATE);
        }
        let mut raw = [0u8; ADDR_LEN - ADDR_HDR];
        let mut len = raw.len();
        // SAFETY: live enabled endpoint; buffer of `len` bytes.
        let r = unsafe {
            ffi::xo_getname(
                self.inner.ep.ptr(),
                raw.as_mut_ptr() as *mut c_void,
                &mut len,
            )
        };
        if r != 0 {
            return Err(if r == -FI_ETOOSMALL {
                Error::OVERFLOW
            } else {
                Error::from_code(r)
            });
        }
        encode_name(&raw[..len])
    }
}

impl Drop for Ep {
    fn drop(&mut self) {
        if let Some(w) = self.worker {
            self.workers.list[w].remove(&self.inner, &thread_name(w));
        }
    }
}
