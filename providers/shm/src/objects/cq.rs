//! XPU CQs: a private ring, a shared ring for remote completions, the
//! host read.
use super::ctx::XpuCtx;
use super::home::{release, retire, Home, HostBuf};
use crate::core;
use crate::domain::{load, store};
use crate::layout::*;
use fi_xpu_abi::errno::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A CQ's ring and device state are private to its process: peers cannot
/// publish completions in it. A CQ that takes remote events (bound for
/// receive) gets a second ring in the shared heap, the only part of it
/// peers can write, which device reads drain into the private ring keeping
/// only what a remote completion carries.
pub struct Cq {
    home: Home,
    dev_home: Home,
    pub ring: usize,
    pub dev: usize,
    pub ctx_id: u64,
    /// The context of a device CQ (`None`: a host CQ).
    ctx: Option<Arc<XpuCtx>>,
    /// The ring peers push remote completions into: (heap offset, bytes).
    remote: Mutex<Option<(u64, u64)>>,
    format: i32,
    size: u64,
    /// Serialises host reads: taking an entry is a peek then a move of the
    /// tail, and two threads reading at once must not take the same one.
    reader: Mutex<()>,
}

/// Most entries a shm CQ holds (fi_xpu_shm(7)); larger asks are
/// `-FI_EINVAL`.
pub const MAX_CQ_SIZE: usize = 1 << 20;

impl Cq {
    pub fn open(ctx: Option<&Arc<XpuCtx>>, attr: &fi_xpu_cq_attr) -> Result<Cq> {
        if attr.size > MAX_CQ_SIZE {
            core::warn(&format!(
                "fi_xpu_cq_open: shm CQs hold at most {MAX_CQ_SIZE} entries; {} asked",
                attr.size
            ));
            return Err(Error::INVAL);
        }
        let size = if attr.size == 0 {
            1024
        } else {
            attr.size as u64
        }
        .next_power_of_two();
        let format = if attr.format == FI_CQ_FORMAT_UNSPEC {
            FI_CQ_FORMAT_CONTEXT
        } else {
            attr.format
        };
        let bytes = CQ_HDR + size * size_of::<Cqe>() as u64;
        let (home, ring, dev_home, dev, ctx_id) = if let Some(c) = ctx {
            let r = c.local_alloc(bytes)?;
            let dv = match c.local_alloc(size_of::<CqDev>() as u64) {
                Ok(x) => x,
                Err(e) => {
                    c.local_free(r);
                    return Err(e);
                }
            };
            (
                Home::Local {
                    ctx: c.clone(),
                    addr: r,
                },
                r,
                Home::Local {
                    ctx: c.clone(),
                    addr: dv,
                },
                dv,
                c.id,
            )
        } else {
            let h = HostBuf::new(bytes as usize)?;
            let d = HostBuf::new(size_of::<CqDev>())?;
            let (r, dv) = (h.addr(), d.addr());
            (Home::Host(h), r, Home::Host(d), dv, 0)
        };
        // SAFETY: ring and dev are fresh zeroed allocations of the right size.
        unsafe {
            let r = ring as *mut CqRing;
            (*r).size = size;
            (*r).format = format as u64;
            let d = dev as *mut CqDev;
            (*d).ring = ring as u64;
            (*d).size = size;
            (*d).format = format as u64;
            (*d).timeout_ms = attr.timeout as i64;
            (*d).magic = fi_xpu_handle_word(FI_XPU_HANDLE_CQ, FI_XPU_HANDLE_LIVE);
            if let Some(c) = ctx {
                (*d).abort = core::ctx_abort_word(c.core);
                (*d).bell = (c.heap() + offset_of!(HeapHdr, bell)) as u64;
            }
        }
        Ok(Cq {
            home,
            dev_home,
            ring,
            dev,
            ctx_id,
            ctx: ctx.cloned(),
            remote: Mutex::new(None),
            format,
            size,
            reader: Mutex::new(()),
        })
    }

    pub fn is_host(&self) -> bool {
        matches!(self.home, Home::Host(_))
    }

    /// Heap offset of the ring peers push remote completions into,
    /// created on first use (device CQs only).
    pub fn remote_ring(&self) -> Result<u64> {
        let mut g = self.remote.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((off, _)) = *g {
            return Ok(off);
        }
        let Some(c) = &self.ctx else {
            return Err(Error::INVAL);
        };
        let bytes = CQ_HDR + self.size * size_of::<Cqe>() as u64;
        let (r, off) = c.heap_alloc(bytes)?;
        // A fresh zeroed heap allocation of a ring of `size` entries.
        let hdr =
            core::heap_store(c.core, r + offset_of!(CqRing, size), self.size).and_then(|_| {
                core::heap_store(c.core, r + offset_of!(CqRing, format), self.format as u64)
            });
        if let Err(e) = hdr {
            c.heap_free(off, bytes);
            return Err(e);
        }
        // Whose peer maps attribute its entries, and the offset their
        // stamps name.
        // SAFETY: `self.dev` is this CQ's live CqDev; its fields.
        unsafe {
            store(self.dev + offset_of!(CqDev, ctx), c.dev() as u64);
            store(self.dev + offset_of!(CqDev, roff), off);
            // Published last: device readers start draining once they see it.
            store(self.dev + offset_of!(CqDev, rring), r as u64);
        }
        *g = Some((off, bytes));
        Ok(off)
    }

    fn entry(&self, pos: u64) -> *mut Cqe {
        (self.ring + CQ_HDR as usize + (pos % self.size) as usize * size_of::<Cqe>()) as *mut Cqe
    }

    fn read_guard(&self) -> std::sync::MutexGuard<'_, ()> {
        self.reader.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Next published entry, if any (host CQs only; callers hold
    /// `read_guard` until they consume it).
    fn peek(&self) -> Option<(u64, Cqe)> {
        let tail = self.word(64).load(Ordering::Acquire);
        let e = self.entry(tail);
        // SAFETY: an entry of the live ring; its seq word.
        if unsafe { load(e as usize) } != tail + 1 {
            return None;
        }
        // SAFETY: the producer published this entry (seq written last,
        // acquire-loaded above) and cannot reuse it before tail moves.
        Some((tail, unsafe { std::ptr::read(e) }))
    }

    fn consume(&self, tail: u64) {
        self.word(64).store(tail + 1, Ordering::Release);
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: the ring header is live and 8-byte aligned for the CQ's life.
        unsafe { AtomicU64::from_ptr((self.ring + off) as *mut u64) }
    }

    /// Turns completions the device dropped on a full ring into one
    /// `FI_EOVERRUN` error entry, once there is room for it; the twin of
    /// `fi_xpu_shm_report_overrun` in the device header.
    fn report_overrun(&self) {
        let (ov, seen) = (self.word(144), self.word(152));
        // What was reported first, as in the device header: the count read
        // after it is never behind it.
        let s = seen.load(Ordering::Acquire);
        let o = ov.load(Ordering::Acquire);
        if o == s
            || seen
                .compare_exchange(s, o, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return;
        }
        let head = self.word(0);
        loop {
            // The tail first, as in fi_xpu_shm_ring_put.
            let t = self.word(64).load(Ordering::Acquire);
            let h = head.load(Ordering::Acquire);
            if h.wrapping_sub(t) >= self.size {
                seen.fetch_sub(o - s, Ordering::AcqRel);
                return;
            }
            if head
                .compare_exchange(h, h + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                let e = self.entry(h);
                // SAFETY: the claimed entry is ours until its seq is published.
                unsafe {
                    std::ptr::write(
                        e,
                        Cqe {
                            seq: 0,
                            flags: 0,
                            context: 0,
                            len: 0,
                            buf: 0,
                            data: 0,
                            tag: 0,
                            err: -(FI_EOVERRUN as i64),
                            olen: o - s,
                            src_nonce: 0,
                            src_ep: 0,
                            is_err: 1,
                            src_conn: 0,
                            stamp: 0,
                        },
                    )
                };
                // SAFETY: the claimed entry, live; its seq word.
                unsafe { store(e as usize, h + 1) };
                return;
            }
        }
    }

    /// Host read of up to `count` entries in the CQ's format into `buf`,
    /// with their source addresses into `src` unless it is NULL.
    ///
    /// # Safety
    /// `buf` has room for `count` entries of the CQ's format and `src` is
    /// NULL or has `count` slots (what the SDK's `HostCqBuf` describes).
    pub unsafe fn host_read(&self, buf: *mut u8, count: usize, src: *mut u64) -> Result<usize> {
        let esz = match self.format {
            FI_CQ_FORMAT_CONTEXT => 8,
            FI_CQ_FORMAT_MSG => 24,
            FI_CQ_FORMAT_DATA => 40,
            _ => 48,
        };
        let _g = self.read_guard();
        self.report_overrun();
        let mut n = 0;
        while n < count {
            let Some((tail, e)) = self.peek() else { break };
            if e.is_err != 0 {
                if n == 0 {
                    return Err(Error::AVAIL);
                }
                break;
            }
            let words = [e.context, e.flags, e.len, e.buf, e.data, e.tag];
            // SAFETY: the caller gave room for `count` entries of the format.
            unsafe {
                std::ptr::copy_nonoverlapping(words.as_ptr() as *const u8, buf.add(n * esz), esz);
                if !src.is_null() {
                    *src.add(n) = FI_ADDR_NOTAVAIL;
                }
            }
            self.consume(tail);
            n += 1;
        }
        if n == 0 {
            Err(Error::AGAIN)
        } else {
            Ok(n)
        }
    }

    pub fn host_readerr(&self, out: &mut fi_cq_err_entry) -> Result<usize> {
        let _g = self.read_guard();
        self.report_overrun();
        match self.peek() {
            Some((tail, e)) if e.is_err != 0 => {
                *out = fi_cq_err_entry {
                    op_context: e.context as *mut _,
                    flags: e.flags,
                    len: e.len as usize,
                    buf: e.buf as *mut _,
                    data: e.data,
                    tag: e.tag,
                    olen: e.olen as usize,
                    err: (-e.err) as i32,
                    prov_errno: e.err as i32,
                    err_data: std::ptr::null_mut(),
                    err_data_size: 0,
                };
                self.consume(tail);
                Ok(1)
            }
            _ => Err(Error::AGAIN),
        }
    }

    /// Adds an endpoint whose progress runs when this CQ is read.
    pub fn add_progress(&self, ep_dev: usize) -> Result<()> {
        let list = self.progress_list();
        if list.contains(&(ep_dev as u64)) {
            return Ok(());
        }
        if list.len() >= MAX_PROGRESS {
            return Err(Error::NOSPC);
        }
        let n = list.len();
        // SAFETY: the CqDev's count and its list of MAX_PROGRESS words
        // (n is below that).
        unsafe {
            store(self.dev + 40 + 8 * n, ep_dev as u64);
            store(self.dev + 32, n as u64 + 1);
        }
        self.forget_idle();
        Ok(())
    }

    pub fn remove_progress(&self, ep_dev: usize) {
        let list: Vec<u64> = self
            .progress_list()
            .into_iter()
            .filter(|&e| e != ep_dev as u64)
            .collect();
        // SAFETY: as in `add_progress`; the list only shrinks.
        unsafe {
            for (i, e) in list.iter().enumerate() {
                store(self.dev + 40 + 8 * i, *e);
            }
            store(self.dev + 32, list.len() as u64);
        }
        self.forget_idle();
    }

    /// Makes the next device poll read in full: what it progresses changed
    /// (an endpoint with arrivals may have joined), or the CQ closes (the
    /// full read reports the dead handle).
    fn forget_idle(&self) {
        // SAFETY: the live (or retired, still mapped) CqDev's bseen word.
        unsafe { store(self.dev + offset_of!(CqDev, bseen), BSEEN_NONE) };
    }

    /// The endpoints whose progress runs when this CQ is read (the host
    /// writes the list; its count is never above MAX_PROGRESS).
    fn progress_list(&self) -> Vec<u64> {
        // SAFETY: the live CqDev's count and list words.
        unsafe {
            let n = (load(self.dev + 32) as usize).min(MAX_PROGRESS);
            (0..n).map(|i| load(self.dev + 40 + 8 * i)).collect()
        }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        let remote = *self.remote.get_mut().unwrap_or_else(|p| p.into_inner());
        if let (Some((off, size)), Some(c)) = (remote, &self.ctx) {
            c.heap_free(off, size);
        }
        release(&self.home);
        retire(&self.dev_home, self.dev + offset_of!(CqDev, magic));
        self.forget_idle();
    }
}

/// Host CQ: a provider-side queue the host reads; FI_ADDR for readfrom.
pub const FI_ADDR_NOTAVAIL: u64 = u64::MAX;

#[cfg(test)]
mod tests {
    use super::*;
    use fi_xpu_abi::flags::*;

    /// write the entry, store its sequence number last.
    fn push(q: &Cq, context: u64) {
        let h = q.word(0).fetch_add(1, Ordering::AcqRel);
        let e = q.entry(h);
        // SAFETY: the claimed entry is ours until its seq is published, and
        // the tests never fill the ring past its size.
        unsafe {
            std::ptr::write(
                e,
                Cqe {
                    seq: 0,
                    flags: FI_SEND | FI_MSG,
                    context,
                    len: 8,
                    buf: 0,
                    data: 0,
                    tag: 0,
                    err: 0,
                    olen: 0,
                    src_nonce: 0,
                    src_ep: 0,
                    is_err: 0,
                    src_conn: 0,
                    stamp: 0,
                },
            )
        };
        // SAFETY: as above: the claimed entry's seq word.
        unsafe { store(e as usize, h + 1) };
    }

    /// `host_read` into context-format entries (one word each).
    fn read(q: &Cq, buf: &mut [u64]) -> Result<usize> {
        assert_eq!(q.format, FI_CQ_FORMAT_CONTEXT);
        // SAFETY: `buf` has room for `buf.len()` one-word entries; no
        // source addresses are asked for.
        unsafe { q.host_read(buf.as_mut_ptr() as *mut u8, buf.len(), std::ptr::null_mut()) }
    }

    fn host_cq(size: usize) -> Cq {
        let attr = fi_xpu_cq_attr {
            size,
            flags: 0,
            format: FI_CQ_FORMAT_CONTEXT,
            timeout: 0,
            xpu_ctx: std::ptr::null_mut(),
        };
        Cq::open(None, &attr).unwrap()
    }

    #[test]
    fn concurrent_host_reads_take_each_entry_once() {
        const N: u64 = 4096;
        const READERS: usize = 4;
        let q = host_cq(N as usize);
        for round in 0..64 {
            for i in 0..N {
                push(&q, round * N + i + 1);
            }
            let got: Vec<Vec<u64>> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..READERS)
                    .map(|_| {
                        s.spawn(|| {
                            let mut mine = Vec::new();
                            let mut buf = [0u64; 2];
                            loop {
                                let n = match read(&q, &mut buf[..2]) {
                                    Err(Error::AGAIN) => return mine,
                                    r => r.unwrap(),
                                };
                                assert!(n == 1 || n == 2, "host_read returned {n}");
                                mine.extend_from_slice(&buf[..n]);
                            }
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let mut all: Vec<u64> = got.into_iter().flatten().collect();
            all.sort_unstable();
            let want: Vec<u64> = (round * N + 1..=round * N + N).collect();
            assert_eq!(
                all.len(),
                want.len(),
                "round {round}: entries taken twice or lost"
            );
            assert_eq!(all, want, "round {round}");
        }
    }

    #[test]
    fn host_read_stops_at_an_error_entry_and_readerr_takes_it() {
        let q = host_cq(8);
        push(&q, 7);
        let h = q.word(0).fetch_add(1, Ordering::AcqRel);
        let e = q.entry(h);
        // SAFETY: as in `push`.
        unsafe {
            (*e).context = 9;
            (*e).err = -(FI_ECONNRESET as i64);
            (*e).is_err = 1;
        }
        // SAFETY: as above.
        unsafe { store(e as usize, h + 1) };
        let mut buf = [0u64; 4];
        assert_eq!(read(&q, &mut buf[..4]), Ok(1));
        assert_eq!(buf[0], 7);
        assert_eq!(read(&q, &mut buf[..4]), Err(Error::AVAIL));
        // SAFETY: an all-zero fi_cq_err_entry is valid (null pointers).
        let mut ee: fi_cq_err_entry = unsafe { std::mem::zeroed() };
        assert_eq!(q.host_readerr(&mut ee), Ok(1));
        assert_eq!((ee.op_context as u64, ee.err), (9, FI_ECONNRESET));
        assert_eq!(q.host_readerr(&mut ee), Err(Error::AGAIN));
        assert_eq!(read(&q, &mut buf[..4]), Err(Error::AGAIN));
    }
}
