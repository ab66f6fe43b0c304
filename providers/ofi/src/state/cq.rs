//! The XPU CQ: a `CqDev` block and its ring of `Cqe`, written by the
//! progress threads (completions promised when an entry is taken, then
//! written; losses reported as FI_EOVERRUN entries) and read by kernels
//! or, for host CQs, by `fi_xpu_cq_read`.
use super::block::{tombstone, Block};
use super::word::at64;
use crate::core::{self, Ctx};
use crate::ffi;
use crate::layout::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Entries of a CQ at most (reported in `fi_xpu_info.limits.cq_size`).
pub const MAX_CQ_ENTRIES: u64 = 1 << 20;

/// A completion queue: a `CqDev` block and its ring of `Cqe`.
pub struct CqShared {
    mem: Block,
    pub size: u64,
    pub format: i32,
    /// Serialises writers of entries (progress threads of several
    /// endpoints).
    lock: Mutex<()>,
    /// Ring positions claimed: the entries written (`tail`) and the
    /// completions promised to operations taken from rings and not yet
    /// written. The proxy takes an entry only when its completion is sure
    /// to fit, so a queue nobody reaps stops the rings instead of dropping
    /// completions. Every entry written takes a claim first (a promise, or
    /// a claim of its own), and a claim is only taken while fewer than
    /// `size` positions past `head` are claimed, so a writer never reaches
    /// an entry not yet read. Only ever raised by a compare-and-swap that
    /// checks that room (without the lock: a promise costs no lock) or
    /// lowered, under the lock, by a promise given back.
    claimed: AtomicU64,
    /// Dropped completions (the block's `overflow`) already reported in
    /// FI_EOVERRUN entries; written under `lock`.
    reported: AtomicU64,
}

impl CqShared {
    pub fn open(ctx: Option<Ctx>, attr: &fi_xpu_cq_attr) -> Result<Arc<CqShared>> {
        let size = match attr.size {
            0 => CQ_ENTRIES,
            n => (n as u64).checked_next_power_of_two().unwrap_or(u64::MAX),
        };
        if size > MAX_CQ_ENTRIES {
            return Err(Error::INVAL);
        }
        let format = match attr.format {
            FI_CQ_FORMAT_UNSPEC => FI_CQ_FORMAT_CONTEXT,
            f => f,
        };
        let bytes = CQ_DEV_SIZE + size as usize * std::mem::size_of::<Cqe>();
        let mem = Block::new(ctx, bytes)?;
        let dev = mem.addr as *mut CqDev;
        // SAFETY: fresh zeroed block, not shared yet.
        unsafe {
            (*dev).magic = fi_xpu_handle_word(FI_XPU_HANDLE_CQ, FI_XPU_HANDLE_LIVE);
            (*dev).ring = (mem.addr + CQ_DEV_SIZE) as u64;
            (*dev).size = size;
            (*dev).format = format as u64;
            (*dev).timeout_ms = attr.timeout as i64;
            (*dev).abort = ctx.map_or(0, core::ctx_abort_word);
        }
        Ok(Arc::new(CqShared {
            mem,
            size,
            format,
            lock: Mutex::new(()),
            claimed: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        }))
    }

    pub fn dev(&self) -> *mut CqDev {
        self.mem.addr as *mut CqDev
    }

    fn dev_ref(&self) -> &CqDev {
        // SAFETY: the block lives as long as self.
        unsafe { &*self.dev() }
    }

    fn slot(&self, pos: u64) -> *mut Cqe {
        (self.mem.addr + CQ_DEV_SIZE + ((pos & (self.size - 1)) as usize) * 96) as *mut Cqe
    }

    /// Promises room for one completion; false when the entries not yet
    /// read and those already promised fill the queue. Takes no lock.
    pub fn reserve(&self) -> bool {
        self.claim()
    }

    /// Claims one ring position, if fewer than `size` past `head` are.
    fn claim(&self) -> bool {
        let d = self.dev_ref();
        let mut c = self.claimed.load(Ordering::Relaxed);
        loop {
            // `head` only grows (a reader that moves it back is refused
            // room: the difference wraps to a huge number), so room seen
            // for `c` is still there when the swap finds `c` unchanged.
            let head = at64(&d.head).load(Ordering::Acquire);
            if c.wrapping_sub(head) >= self.size {
                return false;
            }
            match self
                .claimed
                .compare_exchange_weak(c, c + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
    }

    /// Gives back a claim that will not be written; lock held (`tail`
    /// stays put), never below `tail`.
    fn unclaim_locked(&self) {
        let tail = at64(&self.dev_ref().tail).load(Ordering::Relaxed);
        let _ = self
            .claimed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                (c > tail).then(|| c - 1)
            });
    }

    /// Gives back a promise that will not be used.
    pub fn unreserve(&self) {
        let _g = self.lock.lock().unwrap();
        self.unclaim_locked();
    }

    /// Appends the completion a `reserve` promised.
    pub fn push_reserved(&self, e: Cqe) -> bool {
        self.push_inner(e, true)
    }

    /// Appends a completion nobody reserved room for (a remote write's CQ
    /// data); false (and the overflow count bumped) when the ring is full.
    pub fn push(&self, e: Cqe) -> bool {
        self.push_inner(e, false)
    }

    /// Reports the completions dropped since the last report, if any, in
    /// one FI_EOVERRUN entry (`olen` the number), as soon as the queue has
    /// room for it beyond what was promised: called by the progress thread
    /// on each pass, so that a loss is never silent even when nothing else
    /// completes. Two loads when there is nothing to report.
    #[inline]
    pub fn report_losses(&self) {
        let lost = at64(&self.dev_ref().overflow).load(Ordering::Relaxed);
        if lost != self.reported.load(Ordering::Relaxed) {
            self.report_losses_slow();
        }
    }

    #[cold]
    fn report_losses_slow(&self) {
        let _g = self.lock.lock().unwrap();
        self.report_losses_locked();
    }

    /// `report_losses` with the lock held: the report takes a claim of its
    /// own, so it never takes the room of a promise, nor of the entry a
    /// caller claimed before.
    fn report_losses_locked(&self) {
        let d = self.dev_ref();
        let lost = at64(&d.overflow).load(Ordering::Relaxed);
        let reported = self.reported.load(Ordering::Relaxed);
        if lost == reported || !self.claim() {
            return;
        }
        let tail = at64(&d.tail).load(Ordering::Relaxed);
        self.write_at(
            tail,
            &Cqe {
                err: Error::OVERRUN.code() as i64,
                olen: lost.wrapping_sub(reported),
                src: ffi::FI_ADDR_NOTAVAIL,
                is_err: 1,
                ..Default::default()
            },
        );
        self.reported.store(lost, Ordering::Relaxed);
    }

    fn push_inner(&self, mut e: Cqe, reserved: bool) -> bool {
        let _g = self.lock.lock().unwrap();
        // A completion nobody reserved room for (a peer's remote CQ data,
        // as many as the peer likes) claims room beyond every promise:
        // never the room promised to the operations of this process, which
        // would otherwise be dropped.
        if !reserved && !self.claim() {
            self.overflow();
            return false;
        }
        // A loss reported first, if there is room for it beside this entry
        // and every promise.
        self.report_losses_locked();
        let d = self.dev_ref();
        let tail = at64(&d.tail).load(Ordering::Relaxed);
        let head = at64(&d.head).load(Ordering::Acquire);
        // Only a reader that moved `head` where no reader may (past `tail`,
        // or back) leaves a claimed position unwritable.
        if tail.wrapping_sub(head) >= self.size {
            self.unclaim_locked();
            self.overflow();
            return false;
        }
        e.seq = 0;
        self.write_at(tail, &e);
        true
    }

    /// Counts a dropped completion.
    fn overflow(&self) {
        let dropped = at64(&self.dev_ref().overflow).fetch_add(1, Ordering::Relaxed) + 1;
        // One line per power of two: a flood does not flood the log.
        if dropped.is_power_of_two() {
            core::warn(&format!(
                "completion queue overflow: {dropped} completion(s) dropped so far"
            ));
        }
    }

    /// Writes `e` at position `tail` (free: the caller checked, lock held)
    /// and publishes it.
    fn write_at(&self, tail: u64, e: &Cqe) {
        let d = self.dev_ref();
        let slot = self.slot(tail);
        // SAFETY: the slot lies inside the ring and readers ignore it until
        // `seq` matches, which is stored last below.
        unsafe {
            let s = &mut *slot;
            s.flags = e.flags;
            s.context = e.context;
            s.len = e.len;
            s.buf = e.buf;
            s.data = e.data;
            s.tag = e.tag;
            s.err = e.err;
            s.olen = e.olen;
            s.src = e.src;
            s.is_err = e.is_err;
            s.prov_errno = e.prov_errno;
            at64(&s.seq).store(tail + 1, Ordering::Release);
        }
        at64(&d.tail).store(tail + 1, Ordering::Release);
    }

    /// Host read of up to `count` entries in the CQ's format into `buf`,
    /// with their source addresses into `src` unless it is NULL.
    ///
    /// # Safety
    /// `buf` has room for `count` entries of the CQ's format and `src` is
    /// NULL or has `count` slots (what the SDK's `HostCqBuf` describes).
    pub unsafe fn host_read(
        &self,
        buf: *mut u8,
        count: usize,
        src: *mut fi_addr_t,
    ) -> Result<usize> {
        let d = self.dev_ref();
        let mut n = 0usize;
        while n < count {
            let head = at64(&d.head).load(Ordering::Relaxed);
            // SAFETY: the slot is inside the ring.
            let s = unsafe { &*self.slot(head) };
            if at64(&s.seq).load(Ordering::Acquire) != head + 1 {
                break;
            }
            if s.is_err != 0 {
                if n == 0 {
                    return Err(Error::AVAIL);
                }
                break;
            }
            let entry = entry_bytes(self.format);
            // SAFETY: the core checked `buf` has room for `count` entries.
            unsafe { write_entry(buf.add(n * entry), self.format, s) };
            if !src.is_null() {
                // SAFETY: as above for `src`.
                unsafe { *src.add(n) = s.src };
            }
            at64(&d.head).store(head + 1, Ordering::Release);
            n += 1;
        }
        if n == 0 {
            Err(Error::AGAIN)
        } else {
            Ok(n)
        }
    }

    pub fn host_readerr(&self, out: &mut fi_cq_err_entry) -> Result<usize> {
        let d = self.dev_ref();
        let head = at64(&d.head).load(Ordering::Relaxed);
        // SAFETY: the slot is inside the ring.
        let s = unsafe { &*self.slot(head) };
        if at64(&s.seq).load(Ordering::Acquire) != head + 1 || s.is_err == 0 {
            return Err(Error::AGAIN);
        }
        out.op_context = s.context as *mut c_void;
        out.flags = s.flags;
        out.len = s.len as usize;
        out.buf = s.buf as *mut c_void;
        out.data = s.data;
        out.tag = s.tag;
        out.olen = s.olen as usize;
        out.err = (-s.err) as i32;
        out.prov_errno = s.prov_errno as i32;
        out.err_data_size = 0;
        at64(&d.head).store(head + 1, Ordering::Release);
        Ok(1)
    }
}

impl CqShared {
    /// Device code refuses the CQ's handle from now on.
    pub fn tombstone(&self) {
        tombstone(&self.dev_ref().magic);
    }
}

impl Drop for CqShared {
    fn drop(&mut self) {
        self.tombstone();
    }
}

pub fn entry_bytes(format: i32) -> usize {
    match format {
        FI_CQ_FORMAT_MSG => std::mem::size_of::<fi_cq_msg_entry>(),
        FI_CQ_FORMAT_DATA => std::mem::size_of::<fi_cq_data_entry>(),
        FI_CQ_FORMAT_TAGGED => std::mem::size_of::<fi_cq_tagged_entry>(),
        _ => std::mem::size_of::<fi_cq_entry>(),
    }
}

/// # Safety
/// `out` has room for one entry of `format`.
unsafe fn write_entry(out: *mut u8, format: i32, s: &Cqe) {
    let ctx = s.context as *mut c_void;
    let buf = s.buf as *mut c_void;
    let len = s.len as usize;
    // SAFETY: per the function contract; unaligned writes since the caller's
    // buffer is only byte-addressed here.
    unsafe {
        match format {
            FI_CQ_FORMAT_MSG => (out as *mut fi_cq_msg_entry).write_unaligned(fi_cq_msg_entry {
                op_context: ctx,
                flags: s.flags,
                len,
            }),
            FI_CQ_FORMAT_DATA => (out as *mut fi_cq_data_entry).write_unaligned(fi_cq_data_entry {
                op_context: ctx,
                flags: s.flags,
                len,
                buf,
                data: s.data,
            }),
            FI_CQ_FORMAT_TAGGED => {
                (out as *mut fi_cq_tagged_entry).write_unaligned(fi_cq_tagged_entry {
                    op_context: ctx,
                    flags: s.flags,
                    len,
                    buf,
                    data: s.data,
                    tag: s.tag,
                })
            }
            _ => (out as *mut fi_cq_entry).write_unaligned(fi_cq_entry { op_context: ctx }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fi_xpu_abi::errno::*;

    fn cq(size: usize) -> Arc<CqShared> {
        let attr = fi_xpu_cq_attr {
            size,
            flags: 0,
            format: FI_CQ_FORMAT_CONTEXT,
            timeout: 0,
            xpu_ctx: std::ptr::null_mut(),
        };
        CqShared::open(None, &attr).unwrap()
    }

    fn entry(context: u64) -> Cqe {
        Cqe {
            context,
            ..Default::default()
        }
    }

    /// The contexts of the completions read, and the `olen` of each
    /// FI_EOVERRUN entry (as a negative number), in order.
    fn drain(cq: &CqShared) -> Vec<i64> {
        let mut got = Vec::new();
        loop {
            let mut ctx = 0u64;
            // SAFETY: room for one FI_CQ_FORMAT_CONTEXT entry; no sources.
            match unsafe { cq.host_read(&mut ctx as *mut u64 as *mut u8, 1, std::ptr::null_mut()) }
            {
                Ok(_) => got.push(ctx as i64),
                Err(e) if e == Error::AVAIL => {
                    let mut err = fi_cq_err_entry::default();
                    cq.host_readerr(&mut err).unwrap();
                    assert_eq!(err.err, FI_EOVERRUN);
                    got.push(-(err.olen as i64));
                }
                Err(_) => return got,
            }
        }
    }

    #[test]
    fn cq_promises_are_kept_and_losses_reported() {
        let q = cq(4);
        assert!(q.reserve() && q.reserve() && q.reserve());
        // Unreserved completions only get the room nobody was promised.
        assert!(q.push(entry(10)));
        assert!(!q.push(entry(11)));
        assert!(!q.push(entry(12)));
        assert!(!q.reserve());
        // The loss waits for room beyond the promises.
        q.report_losses();
        assert_eq!(drain(&q), [10]);
        q.report_losses();
        assert!(q.push_reserved(entry(1)));
        assert!(q.push_reserved(entry(2)));
        assert!(q.push_reserved(entry(3)));
        assert_eq!(drain(&q), [-2, 1, 2, 3]);
        // A promise given back frees its room, never more.
        assert!(q.reserve());
        q.unreserve();
        q.unreserve();
        for c in 20..24 {
            assert!(q.push(entry(c)));
        }
        assert!(!q.push(entry(24)));
        assert!(!q.reserve());
        assert_eq!(drain(&q), [20, 21, 22, 23]);
        // Reported beside a completion once there is room for both.
        assert!(q.reserve());
        assert!(q.push_reserved(entry(4)));
        assert_eq!(drain(&q), [-1, 4]);
    }
}
