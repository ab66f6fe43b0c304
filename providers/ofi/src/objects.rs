//! Host objects of the ofi provider, each backed by libfabric: domain (a
//! libfabric fabric and domain, and the progress threads), XPU context, AV,
//! MR, CQ, counter and endpoint. CQs and counters are plain memory the proxy writes and kernels
//! read; the endpoint owns the work-request ring the kernels write.
use crate::core::{self, Ctx};
use crate::fabric::{check, Fid, Info};
use crate::ffi;
use crate::layout::*;
use crate::proxy::{self, Tuning, Watch, Worker};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::{c_void, CStr, CString};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Size of an endpoint name (`fi_xpu_getname`): a header and the libfabric
/// name.
pub const ADDR_LEN: usize = 64;
const ADDR_MAGIC: u32 = 0x4158_4f46; // "FOXA"
const ADDR_HDR: usize = 8;
/// Default and most progress threads per domain.
pub(crate) const DEFAULT_THREADS: u32 = 1;
const MAX_THREADS: u32 = 64;
/// Longest operation the proxy passes on, whatever libfabric allows (tcp
/// and shm say SIZE_MAX): no buffer of a device or host reaches 2^48
/// bytes, so a longer length in a ring entry is garbage, not a transfer.
pub const MAX_LEN: u64 = 1 << 48;

/// The libfabric providers tried in order when none is named (the list in
/// shim.c, for messages).
pub const DEFAULT_FABRICS: &str = "cxi, efa, verbs, opx, tcp, shm";
/// libfabric's reliable-datagram utility provider (`udp;ofi_rxd`).
const RXD: &str = "ofi_rxd";

const BASE_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_TAGGED
    | FI_READ
    | FI_WRITE
    | FI_SEND
    | FI_RECV
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE;

pub use crate::mr_table::{MrRec, MrTable};

pub struct DomInner {
    // Field order is drop order: the domain closes before its fabric, and
    // the info is freed last.
    pub domain: Fid,
    pub _fabric: Fid,
    pub info: Info,
    pub prov: String,
    pub caps: u64,
    pub max_msg: u64,
    /// libfabric places incoming data on its own; otherwise only the
    /// progress threads' calls do, so they cannot sleep without a limit.
    pub auto_progress: bool,
    /// The provider addresses registrations by offset and takes our keys:
    /// keys are base addresses and remote addresses are sent as offsets.
    pub offset_keys: bool,
    /// Post a non-fetching atomic that asks for `FI_DELIVERY_COMPLETE` as
    /// a fetching one instead (the fetched values discarded): libfabric's
    /// `shm` provider (1.17 and later 1.x) returns the inject buffer of such
    /// an atomic to its pool twice, once at the target and once at the
    /// initiator, so that later atomics share buffers and apply or fetch
    /// each other's values. A fetching atomic completes only after the
    /// target applied it, which is what delivery completion promises.
    pub dc_atomic_as_fetch: bool,
    /// The transport takes `FI_FENCE`: a put with signal posts its signal
    /// right behind the data, fenced, instead of after the data's
    /// delivery completion.
    pub fence: bool,
    /// The largest put-with-signal data posted with `FI_INJECT` and its
    /// signal right behind it, unfenced: the transport places a write's
    /// data before a later write's or atomic's up to this size, and
    /// takes it injected (0: never).
    pub ordered_inject: u64,
    pub mrs: MrTable,
    next_ep: AtomicUsize,
    next_key: AtomicU64,
    pub workers: Vec<Arc<Worker>>,
}

impl DomInner {
    pub fn has(&self, cap: u64) -> bool {
        self.caps & cap == cap
    }

    /// The registration a raw descriptor id names.
    pub fn mr(&self, id: u64) -> Option<MrRec> {
        self.mrs.get(id)
    }
}

pub struct Domain {
    pub inner: Arc<DomInner>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// The parameters ofi defines (name, default, description); `init`
/// registers them with the core. Each is `FI_XPU_OFI_<NAME>`.
pub const PARAMS: [(&str, &str, &str); 10] = [
    (
        "provider",
        "",
        "libfabric provider to run on (empty: the first of cxi, efa, verbs, opx, tcp, shm that works)",
    ),
    (
        "domain",
        "",
        "libfabric domain name to use, such as an interface (empty: any)",
    ),
    (
        "progress_threads",
        "1",
        "progress threads per domain, 1 to 64, unless fi_xpu_domain_attr.progress_threads is set",
    ),
    (
        "spin_us",
        "100",
        "microseconds a progress thread keeps polling after its last activity (0 on hosts with fewer than 4 CPUs)",
    ),
    (
        "poll_us",
        "200",
        "longest sleep, in microseconds, of a progress thread that can only notice work by polling",
    ),
    (
        "stall_ms",
        "1000",
        "milliseconds an unpublished ring slot may hold up later published ones before it is failed",
    ),
    (
        "close_ms",
        "5000",
        "milliseconds a close waits for a progress thread stuck inside libfabric before giving it up",
    ),
    (
        "op_timeout_ms",
        "10000",
        "milliseconds an RMA or atomic may go without a completion from libfabric before it fails with -FI_ETIMEDOUT (0: no limit)",
    ),
    (
        "ordered_signal",
        "1",
        "a put with signal whose data fits the transport's inject size goes out injected, its signal right behind it, where the transport orders write data placement (FI_ORDER_WAW, max_order_waw_size) (0: the signal always waits for the data's delivery completion)",
    ),
    (
        "test_delay_ms",
        "0",
        "TESTING ONLY: milliseconds RMA write data waits before it reaches libfabric, as on a transport that places data late, so that ordering tests can fail (0: off)",
    ),
];

/// The value of `FI_XPU_OFI_<NAME>`, through the core's parameter registry
/// (`name` is the variable).
fn env(var: &str) -> Option<String> {
    let name = var.strip_prefix("FI_XPU_OFI_")?.to_ascii_lowercase();
    fi_xpu_prov_sdk::services::param(&name)
}

/// The string at `p`, empty for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that lives for the call.
unsafe fn cstr_or_empty(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the function contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Domain {
    pub fn open(attr: Option<&fi_xpu_domain_attr>) -> Result<Domain> {
        let prov = match attr.filter(|a| !a.fabric_prov.is_null()) {
            // SAFETY: the core passes the caller's NUL-terminated string.
            Some(a) => Some(unsafe { cstr_or_empty(a.fabric_prov) }),
            None => env("FI_XPU_OFI_PROVIDER"),
        };
        let nthreads = match attr.map_or(0, |a| a.progress_threads) {
            0 => env("FI_XPU_OFI_PROGRESS_THREADS")
                .and_then(|s| s.parse().ok())
                .unwrap_or(DEFAULT_THREADS),
            n => n,
        };
        if nthreads == 0 || nthreads > MAX_THREADS {
            core::warn(&format!(
                "progress_threads {nthreads} out of range 1..={MAX_THREADS}"
            ));
            return Err(Error::INVAL);
        }
        let cprov = CString::new(prov.clone().unwrap_or_default()).map_err(|_| Error::INVAL)?;
        let cdom =
            CString::new(env("FI_XPU_OFI_DOMAIN").unwrap_or_default()).map_err(|_| Error::INVAL)?;
        // FI_FENCE sits below the others but FI_ATOMIC: a transport never
        // loses one of them to it (the subsets keep the higher bits longest).
        let optional = FI_ATOMIC | ffi::FI_FENCE | FI_HMEM | ffi::FI_RMA_EVENT | ffi::FI_SOURCE;
        let (mut info, mut fabric, mut domain) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        let mut caps = 0u64;
        // SAFETY: valid strings and out-pointers.
        let r = unsafe {
            ffi::xo_open(
                cprov.as_ptr(),
                cdom.as_ptr(),
                BASE_CAPS,
                optional,
                &mut info,
                &mut fabric,
                &mut domain,
                &mut caps,
            )
        };
        if r != 0 {
            core::warn(&format!(
                "no libfabric provider{} offers RDM endpoints with MSG, TAGGED and RMA: {}",
                prov.as_deref().map_or_else(
                    || format!(" of the default list ({DEFAULT_FABRICS})"),
                    |p| format!(" named '{p}'")
                ),
                ffi::strerror(r)
            ));
            return Err(if r == -FI_ENODATA {
                Error::NODEV
            } else {
                Error::from_code(r)
            });
        }
        let info = Info(info);
        // SAFETY: info is live for these reads.
        let (name, dname, mr_mode, max_msg) = unsafe {
            (
                cstr_or_empty(ffi::xo_info_prov_name(info.0)),
                cstr_or_empty(ffi::xo_info_domain_name(info.0)),
                ffi::xo_info_mr_mode(info.0),
                ffi::xo_info_max_msg_size(info.0).min(MAX_LEN),
            )
        };
        if name.contains(RXD) && caps & FI_ATOMIC != 0 {
            // Its fetching atomics crash inside libfabric 1.17: atomics
            // become error completions instead.
            core::warn(&format!(
                "libfabric provider {name}: atomics disabled (its fetching atomics crash in libfabric)"
            ));
            caps &= !FI_ATOMIC;
        }
        let ordered_inject = if env("FI_XPU_OFI_ORDERED_SIGNAL").as_deref() == Some("0") {
            0
        } else {
            // SAFETY: info is live.
            unsafe { ffi::xo_info_ordered_inject(info.0) as u64 }
        };
        core::info(&format!(
            "transport: libfabric provider {name} ({dname}), {}; {nthreads} progress thread(s){}{}; \
             signals follow their data {}{}",
            match &prov {
                Some(p) => format!("named '{p}'"),
                None => format!("the first of {DEFAULT_FABRICS} that works"),
            },
            if caps & FI_ATOMIC != 0 {
                ""
            } else {
                ", no atomics"
            },
            if caps & ffi::FI_RMA_EVENT != 0 {
                ""
            } else {
                ", no remote counters"
            },
            if caps & ffi::FI_FENCE != 0 {
                "fenced (FI_FENCE)"
            } else {
                "once the data is delivered"
            },
            if ordered_inject > 0 {
                format!(
                    ", or at once behind injected data of up to {ordered_inject} bytes (ordered writes)"
                )
            } else {
                String::new()
            },
        ));
        let tuning = Tuning::from_env(env);
        let mut workers = Vec::new();
        for _ in 0..nthreads {
            match Worker::new(fabric, tuning) {
                Ok(w) => workers.push(Arc::new(w)),
                Err(e) => {
                    // SAFETY: the objects were just opened and are unused.
                    unsafe {
                        ffi::xo_close(domain);
                        ffi::xo_close(fabric);
                    }
                    return Err(e);
                }
            }
        }
        // SAFETY: info is live.
        let auto_progress = unsafe { ffi::xo_info_auto_progress(info.0) } != 0;
        let dc_atomic_as_fetch = name == "shm";
        let inner = Arc::new(DomInner {
            domain: Fid(domain),
            _fabric: Fid(fabric),
            info,
            prov: name,
            caps,
            max_msg,
            auto_progress,
            offset_keys: mr_mode & (ffi::FI_MR_VIRT_ADDR | ffi::FI_MR_PROV_KEY) == 0,
            dc_atomic_as_fetch,
            fence: caps & ffi::FI_FENCE != 0,
            ordered_inject,
            mrs: MrTable::default(),
            next_ep: AtomicUsize::new(0),
            next_key: AtomicU64::new(1 << 32),
            workers: workers.clone(),
        });
        let mut threads = Vec::new();
        for (i, w) in workers.into_iter().enumerate() {
            let t = std::thread::Builder::new()
                .name(thread_name(i))
                .spawn(move || proxy::run(w))
                .map_err(|_| Error::NOMEM);
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    let d = Domain { inner, threads };
                    drop(d);
                    return Err(e);
                }
            }
        }
        Ok(Domain { inner, threads })
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        for w in &self.inner.workers {
            w.stop();
        }
        for (i, t) in self.threads.drain(..).enumerate() {
            let w = &self.inner.workers[i];
            let mut watch = Watch::new();
            // A thread stuck inside libfabric is left behind (the handle
            // dropped, detaching it): it keeps what it references, the
            // libfabric domain included, until the process exits.
            loop {
                if t.is_finished() {
                    let _ = t.join();
                    break;
                }
                if w.give_up(&mut watch, &thread_name(i)) {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

fn thread_name(i: usize) -> String {
    format!("fi_xpu-ofi-{i}")
}

pub struct XpuCtx {
    pub dom: Arc<DomInner>,
    pub core_ctx: Ctx,
    pub iface: i32,
}

impl XpuCtx {
    pub fn open(dom: &Arc<DomInner>, a: &fi_xpu_prov_ctx_args) -> Result<XpuCtx> {
        if a.iface != FI_HMEM_SYSTEM && !dom.has(FI_HMEM) {
            core::warn(&format!(
                "libfabric provider {} does not offer FI_HMEM: cannot serve iface {} \
                 (this libfabric was built without that interface's memory support; \
                 an FI_HMEM_SYSTEM context with host memory works)",
                dom.prov,
                fi_hmem_iface_name(a.iface)
            ));
            return Err(Error::OPNOTSUPP);
        }
        let core_ctx = Ctx::of(a);
        RETIRED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((core_ctx, Vec::new()));
        Ok(XpuCtx {
            dom: dom.clone(),
            core_ctx,
            iface: a.iface,
        })
    }
}

pub struct AvInner {
    pub fid: Fid,
    pub live: Mutex<crate::inflight::FiAddrSet>,
    /// Moves after every change of `live`, under its lock (see
    /// `tables::Tables`).
    pub gen: AtomicU64,
}

pub struct Av {
    pub inner: Arc<AvInner>,
}

/// An endpoint name: magic, length of the libfabric name, then the name.
pub fn encode_name(raw: &[u8]) -> Result<[u8; ADDR_LEN]> {
    if raw.len() > ADDR_LEN - ADDR_HDR {
        return Err(Error::OVERFLOW);
    }
    let mut o = [0u8; ADDR_LEN];
    o[0..4].copy_from_slice(&ADDR_MAGIC.to_le_bytes());
    o[4..6].copy_from_slice(&1u16.to_le_bytes());
    o[6..8].copy_from_slice(&(raw.len() as u16).to_le_bytes());
    o[ADDR_HDR..ADDR_HDR + raw.len()].copy_from_slice(raw);
    Ok(o)
}

/// The libfabric name inside an endpoint name.
pub fn decode_name(b: &[u8]) -> Result<&[u8]> {
    if b.len() < ADDR_LEN || u32::from_le_bytes(b[0..4].try_into().unwrap()) != ADDR_MAGIC {
        return Err(Error::INVAL);
    }
    if u16::from_le_bytes(b[4..6].try_into().unwrap()) != 1 {
        return Err(Error::INVAL);
    }
    let n = u16::from_le_bytes(b[6..8].try_into().unwrap()) as usize;
    if n == 0 || n > ADDR_LEN - ADDR_HDR {
        return Err(Error::INVAL);
    }
    Ok(&b[ADDR_HDR..ADDR_HDR + n])
}

impl Av {
    pub fn open(dom: &Arc<DomInner>, count: usize) -> Result<Av> {
        let mut av = std::ptr::null_mut();
        // SAFETY: live domain; valid out-pointer.
        check(unsafe { ffi::xo_av_open(dom.domain.ptr(), count, &mut av) } as i64)?;
        Ok(Av {
            inner: Arc::new(AvInner {
                fid: Fid(av),
                live: Mutex::new(Default::default()),
                gen: AtomicU64::new(0),
            }),
        })
    }

    pub fn insert(&self, name: &[u8]) -> Result<u64> {
        let raw = decode_name(name)?;
        let mut out = 0u64;
        // SAFETY: `raw` is a libfabric name of this provider's format, as
        // long as the peer uses the same libfabric provider; libfabric
        // parses it.
        let r = unsafe {
            ffi::xo_av_insert(
                self.inner.fid.ptr(),
                raw.as_ptr() as *const c_void,
                &mut out,
            )
        };
        if r != 0 {
            core::warn(&format!("fi_av_insert failed: {}", ffi::strerror(r)));
            return Err(Error::from_code(r));
        }
        let mut live = self.inner.live.lock().unwrap();
        live.insert(out);
        self.inner.gen.fetch_add(1, Ordering::Release);
        Ok(out)
    }

    pub fn remove(&self, fi_addr: u64) -> Result<()> {
        {
            let mut live = self.inner.live.lock().unwrap();
            if !live.remove(&fi_addr) {
                return Err(Error::INVAL);
            }
            self.inner.gen.fetch_add(1, Ordering::Release);
        }
        // SAFETY: live AV; the address was inserted.
        check(unsafe { ffi::xo_av_remove(self.inner.fid.ptr(), fi_addr) } as i64)
    }

    pub fn lookup(&self, fi_addr: u64) -> Result<u64> {
        if self.inner.live.lock().unwrap().contains(&fi_addr) {
            Ok(fi_addr)
        } else {
            Err(Error::INVAL)
        }
    }
}

pub struct Mr {
    pub dom: Arc<DomInner>,
    /// Deregistered on drop.
    _fid: Fid,
    pub key: u64,
    pub index: usize,
    pub base: u64,
    pub len: u64,
}

/// Keys of providers that address by offset: the registration's base
/// address in the low bits, a generation above them.
pub const KEY_GENERATION_SHIFT: u32 = 56;
pub const KEY_BASE_MASK: u64 = (1 << KEY_GENERATION_SHIFT) - 1;
const MAX_KEY_GENERATION: u64 = 0xff;

impl Mr {
    pub fn reg(dom: &Arc<DomInner>, a: &fi_xpu_prov_mr_args) -> Result<Mr> {
        let (mut mr, mut key, mut desc) = (std::ptr::null_mut(), 0u64, std::ptr::null_mut());
        let mut access = a.access;
        // Local access rights libfabric wants for the buffer to be a source
        // or target of the endpoint's own operations.
        access |= FI_READ | FI_WRITE | FI_SEND | FI_RECV;
        // Peers address memory by virtual address. A provider that wants
        // offsets and takes the caller's key gets the base address as key,
        // so that the initiator can turn an address into an offset; other
        // providers that take keys need distinct ones.
        // With base addresses as keys, registering the same range twice (which
        // libfabric allows) would reuse a key: later ones carry a generation
        // in the bits above any user address (`KEY_BASE_MASK`).
        let mut generation = 0u64;
        let r = loop {
            let requested_key = if dom.offset_keys {
                a.buf as u64 | generation << KEY_GENERATION_SHIFT
            } else {
                match a.requested_key {
                    0 => dom.next_key.fetch_add(1, Ordering::Relaxed),
                    k => k,
                }
            };
            // SAFETY: the core checked buf/len; out-pointers are live locals.
            let r = unsafe {
                ffi::xo_mr_reg(
                    dom.domain.ptr(),
                    a.buf,
                    a.len,
                    access,
                    requested_key,
                    a.iface,
                    a.device,
                    &mut mr,
                    &mut key,
                    &mut desc,
                )
            };
            let retry = dom.offset_keys
                && r == -FI_ENOKEY
                && a.buf as u64 & !KEY_BASE_MASK == 0
                && generation < MAX_KEY_GENERATION;
            if !retry {
                break r;
            }
            generation += 1;
        };
        if r != 0 {
            core::warn(&format!("fi_mr_regattr failed: {}", ffi::strerror(r)));
            return Err(Error::from_code(r));
        }
        let rec = MrRec {
            base: a.buf as u64,
            len: a.len as u64,
            desc: desc as usize,
        };
        let index = dom.mrs.insert(rec);
        Ok(Mr {
            dom: dom.clone(),
            _fid: Fid(mr),
            key,
            index,
            base: rec.base,
            len: rec.len,
        })
    }

    pub fn desc(&self) -> MrDesc {
        MrDesc {
            id: MR_MAGIC << 32 | self.index as u64,
            key: self.key,
            base: self.base,
            len: self.len,
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        self.dom.mrs.remove(self.index);
    }
}

/// Memory of a CQ or counter: in the XPU context for device objects, on the
/// heap for host ones.
struct Block {
    addr: usize,
    ctx: Option<Ctx>,
    layout: std::alloc::Layout,
}

impl Block {
    fn new(ctx: Option<Ctx>, size: usize) -> Result<Block> {
        let layout = std::alloc::Layout::from_size_align(size, 4096).map_err(|_| Error::INVAL)?;
        let addr = match ctx {
            Some(c) => core::alloc_host(c, size as u64)?,
            None => {
                // SAFETY: non-zero size.
                let p = unsafe { std::alloc::alloc_zeroed(layout) };
                if p.is_null() {
                    return Err(Error::NOMEM);
                }
                p as usize
            }
        };
        Ok(Block { addr, ctx, layout })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        match self.ctx {
            // An exported block: its validity word (the first word of a
            // CqDev, the third of a Cntr) was tombstoned by its owner; it
            // stays mapped until the context closes.
            Some(c) => retire(c, self.addr),
            // SAFETY: allocated above with this layout.
            None => unsafe { std::alloc::dealloc(self.addr as *mut u8, self.layout) },
        }
    }
}

/// Device memory of closed objects, per context: kept mapped, tombstoned,
/// until the context closes.
static RETIRED: Mutex<Vec<(Ctx, Vec<usize>)>> = Mutex::new(Vec::new());

fn retire(ctx: Ctx, addr: usize) {
    let mut r = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
    match r.iter_mut().find(|(c, _)| *c == ctx) {
        Some((_, v)) => v.push(addr),
        None => core::free(ctx, addr),
    }
}

impl Drop for XpuCtx {
    fn drop(&mut self) {
        let mut r = RETIRED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = r.iter().position(|(c, _)| *c == self.core_ctx) {
            for a in r.swap_remove(i).1 {
                core::free(self.core_ctx, a);
            }
        }
    }
}

fn tombstone(word: &u64) {
    at64(word).store(fi_xpu_handle_word(0, FI_XPU_HANDLE_DEAD), Ordering::Release);
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

impl CntrShared {
    /// Device code refuses the counter's handle from now on.
    pub fn tombstone(&self) {
        tombstone(&self.c().magic);
    }
}

impl Drop for CntrShared {
    fn drop(&mut self) {
        self.tombstone();
    }
}

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

fn at64(p: &u64) -> &AtomicU64 {
    // SAFETY: every u64 of the shared blocks is 8-aligned and only ever
    // accessed atomically once the block is shared.
    unsafe { AtomicU64::from_ptr(p as *const u64 as *mut u64) }
}

impl CqShared {
    pub fn open(ctx: Option<Ctx>, attr: &fi_xpu_cq_attr) -> Result<Arc<CqShared>> {
        let size = match attr.size {
            0 => CQ_ENTRIES,
            n => (n as u64).checked_next_power_of_two().unwrap_or(u64::MAX),
        };
        if size > 1 << 20 {
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

/// A counter: one `Cntr` block.
pub struct CntrShared {
    mem: Block,
}

impl CntrShared {
    pub fn open(ctx: Option<Ctx>) -> Result<Arc<CntrShared>> {
        let mem = Block::new(ctx, std::mem::size_of::<Cntr>())?;
        // SAFETY: fresh zeroed block of a Cntr, not shared yet.
        unsafe {
            let k = mem.addr as *mut Cntr;
            (*k).magic = fi_xpu_handle_word(FI_XPU_HANDLE_CNTR, FI_XPU_HANDLE_LIVE);
            (*k).abort = ctx.map_or(0, core::ctx_abort_word);
        };
        Ok(Arc::new(CntrShared { mem }))
    }

    pub fn dev(&self) -> *mut Cntr {
        self.mem.addr as *mut Cntr
    }

    fn c(&self) -> &Cntr {
        // SAFETY: the block lives as long as self.
        unsafe { &*self.dev() }
    }

    pub fn add(&self, v: u64) {
        at64(&self.c().value).fetch_add(v, Ordering::AcqRel);
    }

    pub fn add_err(&self, v: u64) {
        at64(&self.c().err).fetch_add(v, Ordering::AcqRel);
    }

    pub fn read(&self) -> (u64, u64) {
        (
            at64(&self.c().value).load(Ordering::Acquire),
            at64(&self.c().err).load(Ordering::Acquire),
        )
    }

    pub fn update(&self, how: u32, v: u64) -> Result<()> {
        let target = if how & FI_XPU_CNTR_ERR != 0 {
            &self.c().err
        } else {
            &self.c().value
        };
        match how & !FI_XPU_CNTR_ERR {
            FI_XPU_CNTR_ADD => {
                at64(target).fetch_add(v, Ordering::AcqRel);
            }
            FI_XPU_CNTR_SET => at64(target).store(v, Ordering::Release),
            _ => return Err(Error::INVAL),
        }
        Ok(())
    }
}

/// What an endpoint is bound to, fixed once it is enabled.
#[derive(Default, Clone)]
pub struct Bound {
    pub av: Option<Arc<AvInner>>,
    pub tx_cq: Option<Arc<CqShared>>,
    pub rx_cq: Option<Arc<CqShared>>,
    pub cntr: [Option<Arc<CntrShared>>; 6],
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
    pub state: Mutex<proxy::EpState>,
    /// What the progress thread re-checks before it sleeps, as its last
    /// pass left it.
    pub sleep_check: proxy::SleepCheck,
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
    fn open_fabric_ep(&mut self) -> Result<()> {
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
        proxy::release_requests(self);
        self.tombstone();
        retire(self.ctx, self.ring_mem);
    }
}

pub struct Ep {
    pub inner: Arc<EpInner>,
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
        if size > 1 << 16 {
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
                state: Mutex::new(proxy::EpState::default()),
                sleep_check: proxy::SleepCheck::default(),
                ctx: c.core_ctx,
            }),
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
        let slots = [
            (FI_SEND, CNTR_SEND),
            (FI_RECV, CNTR_RECV),
            (FI_READ, CNTR_READ),
            (FI_WRITE, CNTR_WRITE),
            (FI_REMOTE_READ, CNTR_REM_READ),
            (FI_REMOTE_WRITE, CNTR_REM_WRITE),
        ];
        for (flag, i) in slots {
            if flags & flag != 0 {
                self.pending.cntr[i] = Some(c.clone());
            }
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
        let n = dom.workers.len();
        let first = dom.next_ep.fetch_add(1, Ordering::Relaxed);
        // A thread given up (stuck inside libfabric) would never serve it.
        let Some(w) = (0..n)
            .map(|k| (first + k) % n)
            .find(|&w| !dom.workers[w].lost())
        else {
            core::warn("fi_xpu_enable: every progress thread of the domain is stuck in libfabric");
            return Err(Error::IO);
        };
        // SAFETY: as above, not shared yet.
        unsafe { (*dev).wake_fd = dom.workers[w].bell_fd() };
        dom.workers[w].add(self.inner.clone());
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
            self.inner.dom.workers[w].remove(&self.inner, &thread_name(w));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let raw = [1u8, 2, 3, 4, 5];
        let n = encode_name(&raw).unwrap();
        assert_eq!(decode_name(&n).unwrap(), &raw);
        let mut bad = n;
        bad[0] ^= 1;
        assert_eq!(decode_name(&bad), Err(Error::INVAL));
        let mut long = n;
        long[6..8].copy_from_slice(&200u16.to_le_bytes());
        assert_eq!(decode_name(&long), Err(Error::INVAL));
        assert_eq!(decode_name(&n[..20]), Err(Error::INVAL));
        assert_eq!(encode_name(&[7u8; 56]).map(|n| n[63]), Ok(7));
        assert_eq!(encode_name(&[0u8; 200]), Err(Error::OVERFLOW));
    }

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
