//! Host objects of the shm provider: contexts, AVs, registrations, CQs,
//! counters and endpoints, laid out in the shared structures of layout.rs.
use crate::core::{self, Ctx};
use crate::device::DeviceId;
use crate::domain::{load, store, Addr, ConnRef, CtxSt, FreeList, Inner, Slots, ADDR_LEN};
use crate::layout::*;
use crate::table::Table;
use fi_xpu_abi::errno::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const DEFAULT_HEAP: u64 = 8 << 20;
/// libfabric's "queue has been overrun" (not in every fi_errno.h copy).
const AV_TAB_CAP: usize = 1024;

/// The parameters shm defines (name, default, description); `init`
/// registers them with the core.
pub const PARAMS: [(&str, &str, &str); 4] = [
    (
        "heap_size",
        "8388608",
        "bytes of shared memory per XPU context for registrations, CQs, counters and inboxes (at least 1048576)",
    ),
    (
        "test_delay_us",
        "0",
        "TESTING ONLY: microseconds between the 64-byte pieces of a put-with-signal's data, placed last piece first, so that ordering tests can fail (0: off)",
    ),
    (
        "host_progress",
        "0",
        "1: every domain runs a host progress agent, so that streamed and rendezvous sends complete while no kernel runs",
    ),
    (
        "scope",
        "auto",
        "sys: device code uses system scope for every shared object; auto: device scope for what a kernel writes into a peer on its own device, with both heaps in that device's memory",
    ),
];

/// Whether `FI_XPU_SHM_SCOPE=sys` forces system scope everywhere; any
/// other value than `sys` and `auto` is logged and taken as `auto`.
pub fn scope_forced_sys() -> bool {
    let v = fi_xpu_prov_sdk::services::param("scope").unwrap_or_default();
    let v = v.trim();
    if v.eq_ignore_ascii_case("sys") {
        return true;
    }
    static WARNED: std::sync::Once = std::sync::Once::new();
    if !v.is_empty() && !v.eq_ignore_ascii_case("auto") {
        WARNED.call_once(|| {
            core::warn(&format!(
                "FI_XPU_SHM_SCOPE={v}: neither sys nor auto; using auto"
            ))
        });
    }
    false
}

/// Whether `FI_XPU_SHM_HOST_PROGRESS` asks every domain for an agent.
pub fn host_progress() -> bool {
    fi_xpu_prov_sdk::services::param("host_progress").is_some_and(|s| s.trim() == "1")
}

/// The testing-only delay of put-with-signal data (`test_delay_us`), read
/// once per process, in nanoseconds; at most one second per piece.
fn test_delay_ns() -> u64 {
    static DELAY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *DELAY.get_or_init(|| {
        fi_xpu_prov_sdk::services::param("test_delay_us")
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map_or(0, |us| us.min(1_000_000) * 1000)
    })
}

fn heap_size() -> u64 {
    let v =
        fi_xpu_prov_sdk::services::param("heap_size").and_then(|s| s.trim().parse::<u64>().ok());
    v.filter(|&v| v >= 1 << 20).unwrap_or(DEFAULT_HEAP)
}

pub struct XpuCtx {
    pub dom: Arc<Inner>,
    pub id: u64,
    pub core: Ctx,
    /// The device the context's memory is on, as its endpoints publish it.
    pub device_id: DeviceId,
}

impl XpuCtx {
    pub fn open(dom: &Arc<Inner>, core_ctx: Ctx, iface: fi_hmem_iface) -> Result<XpuCtx> {
        let device = core::device_memory(core_ctx);
        if iface != FI_HMEM_SYSTEM && !device {
            core::warn(&format!(
                "fi_xpu_ctx_open: shm serves iface {} through the library's built-in memory \
                 backend only: with application memory callbacks the host has no way into the \
                 context's device memory; open the context without callbacks",
                fi_hmem_iface_name(iface)
            ));
            return Err(Error::OPNOTSUPP);
        }
        if device && dom.agent.is_some() {
            core::warn(
                "fi_xpu_ctx_open: shm cannot run a host progress agent (FI_XPU_DOMAIN_HOST_PROGRESS, \
                 FI_XPU_SHM_HOST_PROGRESS) over a context whose heap is device memory: the agent \
                 progresses inboxes through CPU pointers, which device memory does not have; \
                 open the domain without host progress",
            );
            return Err(Error::OPNOTSUPP);
        }
        let size = heap_size();
        // The registration table (and its header), then room for the
        // endpoints' staging lanes: what peers only read. The lanes take
        // at most as much as the heap (each endpoint's inbox there is as
        // large as its lanes).
        let table = Table::unsealed(STAGE_START + size)?;
        let table_fd = table.fd().try_clone_to_owned().map_err(|_| Error::MFILE)?;
        // The lanes are written by device code: through an import of the
        // table, made before the seal forbids writable mappings.
        let stage =
            core::import(core_ctx, table.fd().as_raw_fd(), 0, table.len()).inspect_err(|e| {
                core::warn(&format!(
                    "fi_xpu_ctx_open: shm maps memory into the context from file descriptors \
                 (fi_xpu_import with FI_XPU_IMPORT_DMABUF of a memfd), and the context's memory \
                 refused one ({e}): the application's import callback must map an fd"
                ))
            })?;
        if let Err(e) = table.seal() {
            core::unimport(core_ctx, stage);
            return Err(e);
        }
        // SAFETY: the table is a fresh writable mapping of at least 64 bytes.
        unsafe {
            let h = table.addr() as *mut HeapHdr;
            (*h).size = table.len();
            (*h).mr_off = 64;
            (*h).mr_slots = MR_SLOTS as u64;
            (*h).magic = HEAP_MAGIC;
        }
        let (heap, fd) = match core::alloc(core_ctx, size, true) {
            Ok((heap, Some(fd))) => (heap, fd),
            Ok((heap, None)) => {
                core::warn(
                    "fi_xpu_ctx_open: shm shares the context's heap with peers as a file \
                     descriptor, and the context's memory gave none: the application's alloc \
                     callback must return an fd (a memfd or DMA-BUF) for FI_XPU_ALLOC_DMABUF",
                );
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(Error::OPNOTSUPP);
            }
            Err(e) => {
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        // The context's root, then its table of raw peer addresses.
        let dev_size = size_of::<CtxDev>() + PEER_ADDRS * size_of::<PeerAddr>();
        let (dev, _) = match core::alloc(core_ctx, dev_size as u64, false) {
            Ok(d) => d,
            Err(e) => {
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        let resolve = match core::alloc_device_only(
            core_ctx,
            (RESOLVE_SLOTS * size_of::<ResolveEnt>()) as u64,
        ) {
            Ok(r) => r,
            Err(e) => {
                core::free(core_ctx, dev);
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        // From here on the table goes with the root: `free_dev` frees both.
        let free_dev = |d: usize| {
            core::free(core_ctx, resolve);
            core::free(core_ctx, d);
        };
        // The heap's own header holds no registrations: a key naming the
        // heap finds no slot.
        let hdr = HeapHdr {
            magic: HEAP_MAGIC,
            size,
            mr_off: 0,
            mr_slots: 0,
            bell: 0,
            _pad: [0; 3],
        };
        // SAFETY: HeapHdr is plain words (repr(C), no padding).
        let hdr_bytes = unsafe {
            std::slice::from_raw_parts((&hdr as *const HeapHdr).cast::<u8>(), size_of::<HeapHdr>())
        };
        if let Err(e) = core::heap_write(core_ctx, heap, hdr_bytes) {
            free_dev(dev);
            core::free(core_ctx, heap);
            core::unimport(core_ctx, stage);
            return Err(e);
        }
        if device {
            core::debug(&format!(
                "XPU context: heap of {size} bytes in device memory ({}), reached by the host \
                 through the memory backend only",
                fi_hmem_iface_name(iface)
            ));
        }
        let st = dom.lock();
        let region = match dom.share_region(st, fd, 0, size, false) {
            Ok(r) => r,
            Err(e) => {
                free_dev(dev);
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        let st = dom.lock();
        let table_region = match dom.share_region(st, table_fd, 0, table.len(), false) {
            Ok(r) => r,
            Err(e) => {
                dom.unshare_region(&mut dom.lock(), region);
                free_dev(dev);
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        // SAFETY: `dev` is the context's CtxDev, allocated above at its
        // size (with the table of peer addresses behind it); its fields.
        unsafe {
            store(dev, heap as u64);
            store(dev + 8, region as u64);
            store(dev + 16, dom.nonce);
            store(dev + 24, (dev + size_of::<CtxDev>()) as u64);
            store(
                dev + std::mem::offset_of!(CtxDev, abort),
                core::ctx_abort_word(core_ctx),
            );
            store(dev + std::mem::offset_of!(CtxDev, resolve), resolve as u64);
        }
        let mut st = dom.lock();
        let id = dom.add_ctx(
            &mut st,
            CtxSt {
                core: core_ctx,
                dev,
                resolve,
                heap,
                heap_region: region,
                heap_alloc: FreeList::new(size_of::<HeapHdr>() as u64, size),
                stage,
                stage_alloc: FreeList::new(STAGE_START, table.len()),
                table,
                table_region,
                mr_slots: Slots::new(MR_SLOTS),
                maps: HashMap::new(),
                peer_addrs: HashMap::new(),
                peer_same_device: HashMap::new(),
                peer_slots: Slots::new(PEER_ADDRS),
                retired_imports: Vec::new(),
                retired_dev: Vec::new(),
            },
        );
        Ok(XpuCtx {
            dom: dom.clone(),
            id,
            core: core_ctx,
            device_id: crate::device::of_ctx(core_ctx, iface),
        })
    }

    pub fn close(&self) -> Result<()> {
        let mut st = self.dom.lock();
        let c = self.dom.remove_ctx(&mut st, self.id).ok_or(Error::INVAL)?;
        self.dom.unshare_region(&mut st, c.heap_region);
        self.dom.unshare_region(&mut st, c.table_region);
        core::free(c.core(), c.resolve);
        core::free(c.core(), c.dev);
        core::free(c.core(), c.heap);
        core::unimport(c.core(), c.stage);
        Ok(())
    }

    /// Carves staging lanes of `size` bytes out of the read-only area;
    /// returns (device address, offset in the table region).
    pub fn stage_alloc(&self, size: u64) -> Result<(usize, u64)> {
        let mut st = self.dom.lock();
        let c = st.ctxs.get_mut(&self.id).ok_or(Error::INVAL)?;
        let off = c.stage_alloc.alloc(size).ok_or_else(|| {
            core::warn("context staging area exhausted; raise FI_XPU_SHM_HEAP_SIZE");
            Error::NOMEM
        })?;
        Ok((c.stage + off as usize, off))
    }

    pub fn stage_free(&self, off: u64, size: u64) {
        let mut st = self.dom.lock();
        if let Some(c) = st.ctxs.get_mut(&self.id) {
            c.stage_alloc.release(off, size);
        }
    }

    /// Carves `size` bytes out of the shared heap; returns (address, offset).
    pub fn heap_alloc(&self, size: u64) -> Result<(usize, u64)> {
        let mut st = self.dom.lock();
        let c = st.ctxs.get_mut(&self.id).ok_or(Error::INVAL)?;
        let off = c.heap_alloc.alloc(size).ok_or_else(|| {
            core::warn("context heap exhausted; raise FI_XPU_SHM_HEAP_SIZE");
            Error::NOMEM
        })?;
        let a = c.heap + off as usize;
        // [a, a+size) lies inside the heap and was free.
        if let Err(e) = core::heap_zero(c.core, a, size) {
            c.heap_alloc.release(off, size);
            return Err(e);
        }
        Ok((a, off))
    }

    /// Device memory of this context that no peer can map: what the owner
    /// follows pointers through lives here, out of other processes' reach.
    pub fn local_alloc(&self, size: u64) -> Result<usize> {
        core::alloc(self.core, size, false).map(|(a, _)| a)
    }

    pub fn local_free(&self, addr: usize) {
        core::free(self.core, addr);
    }

    /// Keeps `addr` (from `local_alloc`) allocated until the context closes.
    pub fn retire_local(&self, addr: usize) {
        let mut st = self.dom.lock();
        match st.ctxs.get_mut(&self.id) {
            Some(c) => c.retired_dev.push(addr),
            None => core::free(self.core, addr),
        }
    }

    pub fn heap_free(&self, off: u64, size: u64) {
        let mut st = self.dom.lock();
        if let Some(c) = st.ctxs.get_mut(&self.id) {
            c.heap_alloc.release(off, size);
        }
    }

    pub fn dev(&self) -> usize {
        self.dom.lock().ctxs.get(&self.id).map_or(0, |c| c.dev)
    }

    /// The address of the context's heap (its `HeapHdr` first).
    pub fn heap(&self) -> usize {
        self.dom.lock().ctxs.get(&self.id).map_or(0, |c| c.heap)
    }

    /// Whether the peer at `fi_addr` of AV `av` (once looked up on this
    /// context) has its context on this context's device: the decision,
    /// made per peer pair, that allows device scope between the two.
    #[allow(dead_code)] // read by the choice of scope per object (fi_xpu_shm(7))
    pub fn same_device_for_peer(&self, av: u64, fi_addr: u64) -> Option<bool> {
        let st = self.dom.lock();
        st.ctxs
            .get(&self.id)?
            .peer_same_device
            .get(&(av, fi_addr))
            .copied()
    }
}

/// Host memory for host CQs and counters (no context to allocate from).
struct HostBuf(Vec<u64>);

impl HostBuf {
    /// `bytes` zeroed, or `-FI_ENOMEM` when the process has not that much.
    fn new(bytes: usize) -> Result<HostBuf> {
        let words = bytes.div_ceil(8);
        let mut v = Vec::new();
        v.try_reserve_exact(words).map_err(|_| {
            core::warn(&format!(
                "shm: no memory for {bytes} bytes of a host object"
            ));
            Error::NOMEM
        })?;
        v.resize(words, 0);
        Ok(HostBuf(v))
    }
    fn addr(&self) -> usize {
        self.0.as_ptr() as usize
    }
}

/// Memory a CQ or counter lives in.
enum Home {
    /// Device memory private to this process (see `local_alloc`).
    Local { ctx: Arc<XpuCtx>, addr: usize },
    /// Owns the memory; only its address is used.
    Host(#[allow(dead_code)] HostBuf),
}

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

fn release(h: &Home) {
    match h {
        Home::Local { ctx, addr } => ctx.local_free(*addr),
        Home::Host(_) => {}
    }
}

/// Ends the life of an exported device block: its validity word at `word`
/// becomes the tombstone and the memory stays mapped (and out of reuse)
/// until the context closes, so a stale handle reads the tombstone, never
/// freed or reused memory.
fn retire(h: &Home, word: usize) {
    match h {
        Home::Local { ctx, addr } => {
            // SAFETY: `word` is the validity word of the block, still
            // mapped (retired, not freed, just below).
            unsafe { store(word, fi_xpu_handle_word(0, FI_XPU_HANDLE_DEAD)) };
            ctx.retire_local(*addr);
        }
        Home::Host(_) => {}
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

/// A counter's words are private to its process, like a CQ's ring: peers
/// cannot rewrite them. A counter that takes remote events (bound for
/// `FI_REMOTE_WRITE` or `FI_REMOTE_READ`) gets a second `Cntr` block in the
/// shared heap, the only part of it peers can write, which their remote
/// events increment; the counter is the sum of the two. Both sit behind a
/// local `CntrDev`, which is what the exported handle points to.
pub struct Counter {
    home: Home,
    pub addr: usize,
    dev_home: Home,
    pub dev: usize,
    /// The context of a device counter (`None`: a host counter).
    ctx: Option<Arc<XpuCtx>>,
    /// The block peers' remote events increment: (address, heap offset),
    /// created at the first bind for remote events, kept until close.
    remote: Mutex<Option<(usize, u64)>>,
}

impl Counter {
    pub fn open(ctx: Option<&Arc<XpuCtx>>) -> Result<Counter> {
        let sz = size_of::<Cntr>() as u64;
        let live = fi_xpu_handle_word(FI_XPU_HANDLE_CNTR, FI_XPU_HANDLE_LIVE);
        let k = match ctx {
            None => {
                let h = HostBuf::new(sz as usize)?;
                let d = HostBuf::new(size_of::<CntrDev>())?;
                let (a, dv) = (h.addr(), d.addr());
                Counter {
                    home: Home::Host(h),
                    addr: a,
                    dev_home: Home::Host(d),
                    dev: dv,
                    ctx: None,
                    remote: Mutex::new(None),
                }
            }
            Some(c) => {
                let a = c.local_alloc(sz)?;
                let dv = match c.local_alloc(size_of::<CntrDev>() as u64) {
                    Ok(x) => x,
                    Err(e) => {
                        c.local_free(a);
                        return Err(e);
                    }
                };
                // SAFETY: `dv` was just allocated at a CntrDev's size.
                unsafe {
                    store(
                        dv + offset_of!(CntrDev, abort),
                        core::ctx_abort_word(c.core),
                    )
                };
                Counter {
                    home: Home::Local {
                        ctx: c.clone(),
                        addr: a,
                    },
                    addr: a,
                    dev_home: Home::Local {
                        ctx: c.clone(),
                        addr: dv,
                    },
                    dev: dv,
                    ctx: Some(c.clone()),
                    remote: Mutex::new(None),
                }
            }
        };
        // SAFETY: the counter and its device block, both just allocated at
        // their sizes; their fields.
        unsafe {
            store(k.addr + offset_of!(Cntr, magic), live);
            store(k.dev + offset_of!(CntrDev, cntr), k.addr as u64);
            store(k.dev + offset_of!(CntrDev, magic), live);
        }
        Ok(k)
    }

    pub fn is_host(&self) -> bool {
        matches!(self.home, Home::Host(_))
    }

    fn remote_guard(&self) -> std::sync::MutexGuard<'_, Option<(usize, u64)>> {
        self.remote.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Heap offset of the block peers' remote events increment, created
    /// on first use (device counters only).
    pub fn remote_block(&self) -> Result<u64> {
        let mut g = self.remote_guard();
        if let Some((_, off)) = *g {
            return Ok(off);
        }
        let Some(c) = &self.ctx else {
            return Err(Error::INVAL);
        };
        let (r, off) = c.heap_alloc(size_of::<Cntr>() as u64)?;
        // SAFETY: `self.dev` is this counter's live CntrDev. Published
        // once the block is zeroed (heap_alloc): device readers add it in
        // from then on.
        unsafe { store(self.dev + offset_of!(CntrDev, rcntr), r as u64) };
        *g = Some((r, off));
        Ok(off)
    }

    /// Word `err` of the counter's own block.
    fn word(&self, err: bool) -> &AtomicU64 {
        // SAFETY: addr points to a live Cntr; both words are 8-byte aligned.
        unsafe { AtomicU64::from_ptr((self.addr + if err { 8 } else { 0 }) as *mut u64) }
    }

    /// Word `err` of the remote block, read once (0 without one).
    fn remote_word(&self, err: bool) -> u64 {
        let Some((r, _)) = *self.remote_guard() else {
            return 0;
        };
        let w = r + if err { 8 } else { 0 };
        match &self.ctx {
            // The remote block stays in the heap until the counter is
            // dropped; both words are 8-byte aligned.
            Some(c) => core::heap_load(c.core, w),
            // SAFETY: as above (a block of the unit tests).
            None => unsafe { load(w) },
        }
    }

    /// The counter's value and error count: its own words plus, for a
    /// counter that takes remote events, those peers increment (wrapping).
    pub fn read(&self) -> (u64, u64) {
        let v = self.word(false).load(Ordering::Acquire);
        let e = self.word(true).load(Ordering::Acquire);
        (
            v.wrapping_add(self.remote_word(false)),
            e.wrapping_add(self.remote_word(true)),
        )
    }

    /// An add goes to the counter's own word. A set stores the value less
    /// what peers counted there, so that a read right after returns it;
    /// remote events that land while it runs may be missed, as libfabric
    /// does not order a set against them either.
    pub fn update(&self, how: u32, v: u64) -> Result<()> {
        let err = how & FI_XPU_CNTR_ERR != 0;
        let w = self.word(err);
        match how & !FI_XPU_CNTR_ERR {
            FI_XPU_CNTR_ADD => {
                w.fetch_add(v, Ordering::AcqRel);
            }
            FI_XPU_CNTR_SET => w.store(v.wrapping_sub(self.remote_word(err)), Ordering::Release),
            _ => return Err(Error::INVAL),
        }
        Ok(())
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        retire(&self.home, self.addr + offset_of!(Cntr, magic));
        retire(&self.dev_home, self.dev + offset_of!(CntrDev, magic));
        let remote = *self.remote.get_mut().unwrap_or_else(|p| p.into_inner());
        if let (Some((_, off)), Some(c)) = (remote, &self.ctx) {
            // SAFETY: the retired CntrDev stays mapped; a stale handle
            // finds no remote block once it is freed.
            unsafe { store(self.dev + offset_of!(CntrDev, rcntr), 0) };
            c.heap_free(off, size_of::<Cntr>() as u64);
        }
    }
}

pub struct AvEntry {
    pub addr: Addr,
    pub conn: ConnRef,
}

pub struct Av {
    pub dom: Arc<Inner>,
    pub id: u64,
    pub entries: Mutex<Vec<Option<AvEntry>>>,
    /// Device AV tables of bound endpoints (address, capacity).
    pub tables: Mutex<Vec<usize>>,
}

impl Av {
    pub fn insert(&self, raw: &[u8]) -> Result<u64> {
        let addr = Addr::decode(raw)?;
        let conn = self.dom.connect(&addr)?;
        let mut e = self.entries.lock().unwrap();
        let idx = e.len();
        if idx >= AV_TAB_CAP {
            return Err(Error::NOSPC);
        }
        e.push(Some(AvEntry { addr, conn }));
        for &t in self.tables.lock().unwrap().iter() {
            write_av_ent(t, idx, addr.nonce, addr.ep_id as u64);
        }
        Ok(idx as u64)
    }

    pub fn remove(&self, fi_addr: u64) -> Result<()> {
        let mut e = self.entries.lock().unwrap();
        match e.get_mut(fi_addr as usize) {
            Some(slot @ Some(_)) => {
                *slot = None;
                for &t in self.tables.lock().unwrap().iter() {
                    write_av_ent(t, fi_addr as usize, 0, u64::MAX);
                }
                Ok(())
            }
            _ => Err(Error::INVAL),
        }
    }

    /// The raw address (pointer to a `PeerAddr` in `ctx`'s memory).
    pub fn lookup(&self, fi_addr: u64, ctx: &XpuCtx) -> Result<u64> {
        let e = self.entries.lock().unwrap();
        let ent = e
            .get(fi_addr as usize)
            .and_then(|x| x.as_ref())
            .ok_or(Error::INVAL)?;
        let mut st = self.dom.lock();
        let c = st.ctxs.get_mut(&ctx.id).ok_or(Error::INVAL)?;
        if let Some(p) = c.peer_addrs.get(&(self.id, fi_addr)) {
            return Ok(*p as u64);
        }
        // The peer left and its connection id went to another one since.
        if st.conns.get(&ent.conn.cid).map(|x| x.gen) != Some(ent.conn.gen) {
            return Err(Error::CONNRESET);
        }
        let c = st.ctxs.get_mut(&ctx.id).ok_or(Error::INVAL)?;
        let map = *c.maps.get(&ent.conn.cid).ok_or(Error::NOTCONN)?;
        let slot = c.peer_slots.take().ok_or_else(|| {
            core::warn("context's table of raw peer addresses is full");
            Error::NOSPC
        })?;
        let p = c.dev + size_of::<CtxDev>() + slot * size_of::<PeerAddr>();
        // SAFETY: a free slot of the context's table, zeroed when freed.
        unsafe {
            let r = p as *mut PeerAddr;
            (*r).map = map as u64;
            (*r).info_region = ent.addr.ep_region as u64;
            (*r).info_off = ent.addr.ep_off as u64;
            (*r).nonce = ent.addr.nonce;
            (*r).ep_id = ent.addr.ep_id as u64;
            (*r).conn_at_peer = ent.conn.at_peer;
            (*r).conn_gen = ent.conn.at_peer_gen;
            (*r).map_gen = ent.conn.gen;
            (*r).key = ent.conn.tx_key;
        }
        let same = peer_device(map, &ent.addr)
            .is_some_and(|d| crate::device::same_device_for_peer_pair(&ctx.device_id, &d));
        let forced = scope_forced_sys();
        let scope = crate::device::scope_for_peer_pair(same, core::device_memory(ctx.core), forced);
        // SAFETY: the slot filled above; device code reads the record only
        // once the address is handed out below.
        unsafe { (*(p as *mut PeerAddr)).scope = scope };
        c.peer_addrs.insert((self.id, fi_addr), p);
        c.peer_same_device.insert((self.id, fi_addr), same);
        core::debug(&format!(
            "fi_xpu_av_lookup: peer {fi_addr} of AV {} is {} this context's device: {} scope{}",
            self.id,
            if same { "on" } else { "not on" },
            if scope == SCOPE_DEV {
                "device"
            } else {
                "system"
            },
            if same && forced {
                " (FI_XPU_SHM_SCOPE=sys)"
            } else {
                ""
            }
        ));
        Ok(p as u64)
    }

    pub fn close(&self) {
        let mut st = self.dom.lock();
        for c in st.ctxs.values_mut() {
            let (table, slots) = (c.dev + size_of::<CtxDev>(), &mut c.peer_slots);
            c.peer_same_device.retain(|(av, _), _| *av != self.id);
            c.peer_addrs.retain(|(av, _), p| {
                if *av == self.id {
                    // SAFETY: a slot of the context's table, no longer handed out.
                    unsafe { std::ptr::write_bytes(*p as *mut PeerAddr, 0, 1) };
                    slots.give((*p - table) / size_of::<PeerAddr>());
                    false
                } else {
                    true
                }
            });
        }
    }
}

/// The device of the peer endpoint at `addr`, read once from its
/// information (in its table region, mapped read-only through `map`);
/// `None` when the region is not mapped or too short.
fn peer_device(map: usize, addr: &Addr) -> Option<DeviceId> {
    let rid = addr.ep_region as usize;
    if rid == 0 || rid >= MAX_REGIONS {
        return None;
    }
    // SAFETY: `map` is a live PeerMap of the context; rid is in range.
    let (base, size) = unsafe {
        (
            load(map + offset_of!(PeerMap, base) + 8 * rid),
            load(map + offset_of!(PeerMap, size) + 8 * rid),
        )
    };
    let end = (addr.ep_off as u64).checked_add(size_of::<EpInfo>() as u64)?;
    if base == 0 || end > size {
        return None;
    }
    let at = base as usize + addr.ep_off as usize + offset_of!(EpInfo, device);
    // SAFETY: inside the peer's table region, mapped here at `base` for
    // `size` bytes (checked above); host memory (a sealed memfd), read
    // once, any value acceptable.
    Some(std::array::from_fn(|i| unsafe { load(at + 8 * i) }))
}

/// Writes entry `idx` of the device AV table at `tab` (a bound
/// endpoint's, AV_TAB_CAP entries of two words).
fn write_av_ent(tab: usize, idx: usize, nonce: u64, ep_id: u64) {
    assert!(idx < AV_TAB_CAP, "AV index {idx}");
    // SAFETY: `tab` is a live table of AV_TAB_CAP entries (endpoints
    // unregister theirs under the same lock before freeing it).
    unsafe {
        store(tab + 16 * idx, nonce);
        store(tab + 16 * idx + 8, ep_id);
    }
}

/// What peers get of a registration's memory: without `FI_REMOTE_WRITE`,
/// a read-only descriptor of the same file, sealed first (a read-only
/// descriptor cannot add seals), so that peers map it read-only and a
/// stray store into it faults in the peer instead of changing our memory.
/// A DMA-BUF cannot be opened again by path and is shared as it is, as is
/// any memory where `/proc` cannot reopen it (logged).
fn shared_view(fd: std::os::fd::OwnedFd, access: u64) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    if access & FI_REMOTE_WRITE != 0
        || fi_xpu_os::file::is_dmabuf(&fd)
        || crate::sealed::is_device_handle(fd.as_fd())
    {
        return Ok(fd);
    }
    crate::sealed::seal(fd.as_fd()).inspect_err(|_| {
        core::warn("cannot seal memory against resizing; peers would refuse it")
    })?;
    match fi_xpu_os::file::reopen_read_only(&fd) {
        Ok(ro) => Ok(ro),
        Err(e) => {
            core::warn(&format!(
                "fi_xpu_mr_reg: cannot open a read-only view of the memory for peers ({e}); \
                 they map it writable"
            ));
            Ok(fd)
        }
    }
}

pub struct Mr {
    pub dom: Arc<Inner>,
    pub ctx_id: u64,
    pub slot: usize,
    pub region: u32,
    pub key: u64,
    pub base: u64,
    pub len: u64,
}

impl Mr {
    pub fn reg(dom: &Arc<Inner>, ctx: &XpuCtx, args: &fi_xpu_prov_mr_args) -> Result<Mr> {
        const RULE: &str = "fi_xpu_mr_reg: shm registers only memory its context can export as an fd (from fi_xpu_alloc or fi_xpu_import on that context)";
        const DEVICE_RULE: &str = "fi_xpu_mr_reg: shm cannot share this memory with peers: on a device context it registers memory of the context (fi_xpu_alloc, or fi_xpu_import of a CUDA VMM allocation's POSIX file descriptor or of host memory), and memory from cudaMalloc/cuMemAlloc through a legacy IPC handle where the driver gives one; a DMA-BUF no other process can map into its GPU: allocate the memory with fi_xpu_alloc on the context, or cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR";
        let device = core::device_memory(ctx.core);
        let (buf, len) = (args.buf as usize, args.len as u64);
        let (fd, off, ipc) = if device && !core::known(ctx.core, buf, len) {
            // Device memory of the application's (cudaMalloc): shared
            // through a legacy IPC handle, where the driver gives one.
            let (h, off) = core::export_ipc(ctx.core, buf, len).inspect_err(|e| {
                core::warn(&format!("{DEVICE_RULE} (no IPC handle either: {e})"))
            })?;
            (crate::domain::ipc_record(&h)?, off, true)
        } else {
            let (fd, off) = core::export(ctx.core, buf, len).inspect_err(|_| core::warn(RULE))?;
            if device && fi_xpu_os::file::is_dmabuf(&fd) {
                core::warn(DEVICE_RULE);
                return Err(Error::OPNOTSUPP);
            }
            (shared_view(fd, args.access)?, off, false)
        };
        let slot = {
            let mut st = dom.lock();
            let c = st.ctxs.get_mut(&ctx.id).ok_or(Error::INVAL)?;
            c.mr_slots.take().ok_or(Error::NOSPC)?
        };
        let st = dom.lock();
        let region = match dom.share_region(st, fd, off, args.len as u64, ipc) {
            Ok(r) => r,
            Err(e) => {
                if let Some(c) = dom.lock().ctxs.get_mut(&ctx.id) {
                    c.mr_slots.give(slot);
                }
                return Err(e);
            }
        };
        let mut st = dom.lock();
        let gen = Inner::next_gen(&mut st);
        let c = st.ctxs.get(&ctx.id).ok_or(Error::INVAL)?;
        let key = ((c.table_region as u64) << 48) | ((slot as u64) << 32) | gen as u64;
        let e = c.table.addr() + 64 + slot * size_of::<MrEntry>();
        // SAFETY: slot `slot` of the context's live registration table
        // (its header, then MR_SLOTS entries); the entry's fields.
        unsafe {
            store(e + 8, args.buf as u64);
            store(e + 16, args.len as u64);
            store(e + 24, args.access);
            store(e + 32, region as u64);
            store(e + 40, key);
            // The generation is published last: a peer that sees it sees the rest.
            store(e, gen as u64);
        }
        Ok(Mr {
            dom: dom.clone(),
            ctx_id: ctx.id,
            slot,
            region,
            key,
            base: args.buf as u64,
            len: args.len as u64,
        })
    }

    pub fn close(&self) {
        let mut st = self.dom.lock();
        if let Some(c) = st.ctxs.get_mut(&self.ctx_id) {
            // SAFETY: this registration's entry of the live table.
            unsafe { store(c.table.addr() + 64 + self.slot * size_of::<MrEntry>(), 0) };
            c.mr_slots.give(self.slot);
        }
        self.dom.unshare_region(&mut st, self.region);
    }

    pub fn desc(&self) -> [u64; 4] {
        [self.region as u64, self.base, self.len, self.key]
    }
}

pub struct Ep {
    pub ctx: Arc<XpuCtx>,
    pub id: u32,
    pub block: usize,
    pub block_off: u64,
    block_size: u64,
    /// Where its staging lanes lie in the context's table region, and
    /// its `EpInfo` just behind them.
    stage_off: u64,
    info: usize,
    pub dev: usize,
    pub av: Option<Arc<Av>>,
    av_tab: usize,
    pub cqs: Vec<Arc<Cq>>,
    pub enabled: bool,
}

impl Ep {
    pub fn open(ctx: &Arc<XpuCtx>, caps: u64) -> Result<Ep> {
        let c = ctx;
        // The inbox follows the block in the heap, which peers write; the
        // staging lanes lie in the area peers only read (table.rs).
        let block_size = size_of::<EpBlock>() as u64 + INBOX_SLOTS * SLOT_SIZE;
        let (block, block_off) = c.heap_alloc(block_size)?;
        let (stage, stage_off) = match c.stage_alloc(STAGE_BYTES + INFO_BYTES) {
            Ok(x) => x,
            Err(e) => {
                c.heap_free(block_off, block_size);
                return Err(e);
            }
        };
        // Its information for peers follows its lanes, read-only to them
        // as well.
        let info = stage + STAGE_BYTES as usize;
        let dsz = size_of::<EpDev>() as u64;
        let dev = match c.local_alloc(dsz) {
            Ok(x) => x,
            Err(e) => {
                c.heap_free(block_off, block_size);
                c.stage_free(stage_off, STAGE_BYTES + INFO_BYTES);
                return Err(e);
            }
        };
        let avsz = (AV_TAB_CAP * size_of::<AvEnt>()) as u64;
        let av_tab = match c.local_alloc(avsz) {
            Ok(x) => x,
            Err(e) => {
                c.heap_free(block_off, block_size);
                c.stage_free(stage_off, STAGE_BYTES + INFO_BYTES);
                c.local_free(dev);
                return Err(e);
            }
        };
        let (stage_region, heap_region) = c
            .dom
            .lock()
            .ctxs
            .get(&c.id)
            .map_or((0, 0), |x| (x.table_region, x.heap_region));
        let id = c.dom.next_ep();
        let caps = if caps == 0 {
            FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC
        } else {
            caps
        };
        // SAFETY: fresh zeroed allocations of the right sizes.
        unsafe {
            // Area of the table that an earlier endpoint may have used.
            std::ptr::write_bytes(info as *mut u8, 0, INFO_BYTES as usize);
            let i = info as *mut EpInfo;
            (*i).nonce = c.dom.nonce;
            (*i).ep_id = id as u64;
            (*i).caps = caps;
            (*i).heap_region = heap_region as u64;
            (*i).block_off = block_off;
            (*i).device = c.device_id;
            (*i).magic = EP_MAGIC;
            let d = dev as *mut EpDev;
            (*d).block = block as u64;
            (*d).ctx = c.dev() as u64;
            (*d).nonce = c.dom.nonce;
            (*d).ep_id = id as u64;
            (*d).caps = caps;
            (*d).av_tab = av_tab as u64;
            (*d).av_count = AV_TAB_CAP as u64;
            (*d).magic = fi_xpu_handle_word(FI_XPU_HANDLE_EP, FI_XPU_HANDLE_LIVE);
            (*d).test_delay_ns = test_delay_ns();
            (*d).stage = stage as u64;
            (*d).stage_region = stage_region as u64;
            (*d).stage_off = stage_off;
        }
        for i in 0..AV_TAB_CAP {
            write_av_ent(av_tab, i, 0, u64::MAX);
        }
        Ok(Ep {
            ctx: ctx.clone(),
            id,
            block,
            block_off,
            block_size,
            stage_off,
            info,
            dev,
            av: None,
            av_tab,
            cqs: Vec::new(),
            enabled: false,
        })
    }

    pub fn bind_av(&mut self, av: &Arc<Av>) {
        let a = av;
        for (i, e) in a.entries.lock().unwrap().iter().enumerate() {
            if let Some(e) = e {
                write_av_ent(self.av_tab, i, e.addr.nonce, e.addr.ep_id as u64);
            }
        }
        a.tables.lock().unwrap().push(self.av_tab);
        self.av = Some(av.clone());
    }

    pub fn bind_cq(&mut self, cq: &Arc<Cq>, flags: u64) -> Result<()> {
        let q = cq;
        if !q.is_host() && q.ctx_id != self.ctx.id {
            return Err(Error::INVAL);
        }
        // Only a CQ bound for receive takes remote events (remote CQ data).
        let remote = match flags & FI_RECV != 0 && !q.is_host() {
            true => q.remote_ring()?,
            false => 0,
        };
        q.add_progress(self.dev)?;
        // SAFETY: this endpoint's live EpDev and endpoint block; their
        // CQ words.
        unsafe {
            if flags & FI_TRANSMIT != 0 {
                store(self.dev + 40, q.dev as u64);
            }
            if flags & FI_RECV != 0 {
                store(self.dev + 48, q.dev as u64);
                if remote != 0 {
                    store(self.info + offset_of!(EpInfo, rx_cq), remote);
                }
            }
        }
        self.cqs.push(cq.clone());
        Ok(())
    }

    pub fn bind_cntr(&mut self, c: &Counter, flags: u64) -> Result<()> {
        let pairs = [
            (FI_SEND, CNTR_SEND),
            (FI_RECV, CNTR_RECV),
            (FI_READ, CNTR_READ),
            (FI_WRITE, CNTR_WRITE),
            (FI_REMOTE_READ, CNTR_REM_READ),
            (FI_REMOTE_WRITE, CNTR_REM_WRITE),
        ];
        if c.is_host() && flags & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
            core::warn("a host counter cannot count remote accesses: peers cannot reach it");
            return Err(Error::OPNOTSUPP);
        }
        // Only a counter bound for remote events has words peers can reach.
        let remote = match flags & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
            true => c.remote_block()?,
            false => 0,
        };
        // SAFETY: this endpoint's live EpDev (its six counter words) and
        // endpoint block (its remote counter offsets).
        unsafe {
            for (f, i) in pairs {
                if flags & f != 0 {
                    store(self.dev + 56 + 8 * i, c.addr as u64);
                }
            }
            if flags & FI_REMOTE_WRITE != 0 {
                store(self.info + offset_of!(EpInfo, rem_write_cntr), remote);
            }
            if flags & FI_REMOTE_READ != 0 {
                store(self.info + offset_of!(EpInfo, rem_read_cntr), remote);
            }
        }
        Ok(())
    }

    pub fn name(&self) -> [u8; ADDR_LEN] {
        let c = &self.ctx;
        let region = c.dom.lock().ctxs.get(&c.id).map_or(0, |x| x.table_region);
        Addr {
            boot_id: c.dom.boot_id,
            pid: c.dom.pid,
            ep_id: self.id,
            nonce: c.dom.nonce,
            secret: c.dom.secret,
            ep_region: region,
            ep_off: (self.stage_off + STAGE_BYTES) as u32,
        }
        .encode()
    }

    pub fn close(&mut self) {
        if let Some(a) = &self.ctx.dom.agent {
            a.remove(self.dev);
        }
        for q in &self.cqs {
            q.remove_progress(self.dev);
        }
        if let Some(a) = &self.av {
            a.tables.lock().unwrap().retain(|&t| t != self.av_tab);
        }
        let c = &self.ctx;
        // SAFETY: the endpoint's information, live until freed just below; the
        // EpDev, retired (kept mapped) below, not freed.
        unsafe {
            // What remote events complete into first: a peer whose resolve
            // table still holds this endpoint (fi_xpu_shm(7) MEMORY
            // PLACEMENT) counts nothing into blocks that may be freed.
            for f in [
                offset_of!(EpInfo, rx_cq),
                offset_of!(EpInfo, rem_write_cntr),
                offset_of!(EpInfo, rem_read_cntr),
            ] {
                store(self.info + f, 0);
            }
            store(self.info + offset_of!(EpInfo, magic), 0)
        };
        c.heap_free(self.block_off, self.block_size);
        c.stage_free(self.stage_off, STAGE_BYTES + INFO_BYTES);
        // SAFETY: as above.
        unsafe {
            store(
                self.dev + offset_of!(EpDev, magic),
                fi_xpu_handle_word(0, FI_XPU_HANDLE_DEAD),
            )
        };
        c.retire_local(self.dev);
        c.local_free(self.av_tab);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_default_is_the_one_used() {
        assert_eq!(PARAMS[0].1, DEFAULT_HEAP.to_string());
    }

    /// Publishes a completion the way device code does: claim the head,
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

    /// A counter whose remote block is host memory the test increments the
    /// way peers do (device counters get theirs from the heap).
    fn counter_with_remote() -> (Counter, HostBuf) {
        let k = Counter::open(None).unwrap();
        let r = HostBuf::new(size_of::<Cntr>()).unwrap();
        *k.remote_guard() = Some((r.addr(), 64));
        (k, r)
    }

    /// A peer's remote event: an atomic add to the remote block's word.
    fn remote_add(r: &HostBuf, err: bool, v: u64) {
        // SAFETY: the block's words live as long as `r`.
        let w = unsafe { AtomicU64::from_ptr((r.addr() + if err { 8 } else { 0 }) as *mut u64) };
        w.fetch_add(v, Ordering::AcqRel);
    }

    fn own(k: &Counter) -> (u64, u64) {
        (
            k.word(false).load(Ordering::Acquire),
            k.word(true).load(Ordering::Acquire),
        )
    }

    #[test]
    fn a_counter_reads_its_own_and_its_remote_events() {
        let (k, r) = counter_with_remote();
        remote_add(&r, false, 5);
        k.update(FI_XPU_CNTR_ADD, 3).unwrap();
        assert_eq!(k.read(), (8, 0));
        remote_add(&r, true, 2);
        k.update(FI_XPU_CNTR_ADD | FI_XPU_CNTR_ERR, 1).unwrap();
        assert_eq!(k.read(), (8, 3));
        // Adds go to the counter's own words only.
        assert_eq!(own(&k), (3, 1));
    }

    #[test]
    fn a_set_reads_back_and_later_remote_events_add_to_it() {
        let (k, r) = counter_with_remote();
        remote_add(&r, false, 7);
        k.update(FI_XPU_CNTR_SET, 100).unwrap();
        assert_eq!(k.read().0, 100);
        assert_eq!(own(&k).0, 93);
        remote_add(&r, false, 2);
        assert_eq!(k.read().0, 102);
        remote_add(&r, true, 4);
        k.update(FI_XPU_CNTR_SET | FI_XPU_CNTR_ERR, 1).unwrap();
        assert_eq!(k.read(), (102, 1));
        k.update(FI_XPU_CNTR_ADD, 1).unwrap();
        assert_eq!(k.read(), (103, 1));
    }

    #[test]
    fn counter_arithmetic_wraps() {
        let (k, r) = counter_with_remote();
        // Set below what peers counted: the own word wraps below zero.
        remote_add(&r, false, 10);
        k.update(FI_XPU_CNTR_SET, 3).unwrap();
        assert_eq!(own(&k).0, 3u64.wrapping_sub(10));
        assert_eq!(k.read().0, 3);
        k.update(FI_XPU_CNTR_SET, 0).unwrap();
        assert_eq!(k.read().0, 0);
        remote_add(&r, false, 1);
        assert_eq!(k.read().0, 1);
        // A sum past 2^64 wraps, as the words themselves do.
        k.update(FI_XPU_CNTR_SET, u64::MAX).unwrap();
        assert_eq!(k.read().0, u64::MAX);
        remote_add(&r, false, 2);
        assert_eq!(k.read().0, 1);
        // Remote words near 2^64 (a peer may write anything there).
        remote_add(&r, true, u64::MAX - 1);
        k.update(FI_XPU_CNTR_ADD | FI_XPU_CNTR_ERR, 5).unwrap();
        assert_eq!(k.read().1, 3);
        k.update(FI_XPU_CNTR_SET | FI_XPU_CNTR_ERR, 7).unwrap();
        assert_eq!(k.read().1, 7);
        assert_eq!(own(&k).1, 9);
    }

    #[test]
    fn a_counter_without_a_remote_block_is_its_own_words() {
        let k = Counter::open(None).unwrap();
        k.update(FI_XPU_CNTR_ADD, 4).unwrap();
        k.update(FI_XPU_CNTR_SET | FI_XPU_CNTR_ERR, 2).unwrap();
        assert_eq!(k.read(), (4, 2));
        assert_eq!(own(&k), (4, 2));
        k.update(FI_XPU_CNTR_SET, 9).unwrap();
        assert_eq!(k.read(), (9, 2));
        assert_eq!(k.update(7, 1), Err(Error::INVAL));
        // A host counter never gets one: peers cannot reach host memory.
        assert_eq!(k.remote_block(), Err(Error::INVAL));
    }
}
