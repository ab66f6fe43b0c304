//! A domain: the listening socket, the control thread, the connections to
//! peer domains and the regions shared with them, and the per-context maps
//! of peer regions that device code reads.
use crate::core::{self, Ctx};
use crate::layout::*;
use crate::sealed;
use crate::wire::{self, Msg};
use fi_xpu_os::file::maps_read_only;
use fi_xpu_prov_sdk::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::mem::offset_of;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const ADDR_LEN: usize = 64;
const ADDR_MAGIC: u32 = 0x4858_5346; // "FSXH"
const ADDR_VERSION: u16 = 2;
/// How long a registration waits for connected peers to map it.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// An endpoint address (`fi_xpu_getname`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Addr {
    pub boot_id: [u8; 16],
    pub pid: u32,
    pub ep_id: u32,
    pub nonce: u64,
    pub secret: [u8; 16],
    pub ep_region: u32,
    pub ep_off: u32,
}

impl Addr {
    pub fn encode(&self) -> [u8; ADDR_LEN] {
        let mut o = [0u8; ADDR_LEN];
        o[0..4].copy_from_slice(&ADDR_MAGIC.to_le_bytes());
        o[4..6].copy_from_slice(&ADDR_VERSION.to_le_bytes());
        o[8..24].copy_from_slice(&self.boot_id);
        o[24..28].copy_from_slice(&self.pid.to_le_bytes());
        o[28..32].copy_from_slice(&self.ep_id.to_le_bytes());
        o[32..40].copy_from_slice(&self.nonce.to_le_bytes());
        o[40..56].copy_from_slice(&self.secret);
        o[56..60].copy_from_slice(&self.ep_region.to_le_bytes());
        o[60..64].copy_from_slice(&self.ep_off.to_le_bytes());
        o
    }

    /// Parses an address the application got from somewhere else.
    pub fn decode(b: &[u8]) -> Result<Addr> {
        if b.len() < ADDR_LEN
            || u32::from_le_bytes(b[0..4].try_into().unwrap()) != ADDR_MAGIC
            || u16::from_le_bytes(b[4..6].try_into().unwrap()) != ADDR_VERSION
        {
            return Err(Error::INVAL);
        }
        let u32at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let mut a = Addr {
            pid: u32at(24),
            ep_id: u32at(28),
            nonce: u64::from_le_bytes(b[32..40].try_into().unwrap()),
            ep_region: u32at(56),
            ep_off: u32at(60),
            ..Default::default()
        };
        a.boot_id.copy_from_slice(&b[8..24]);
        a.secret.copy_from_slice(&b[40..56]);
        if a.ep_region as usize >= MAX_REGIONS || a.ep_region == 0 {
            return Err(Error::INVAL);
        }
        Ok(a)
    }

    pub fn socket_name(&self) -> String {
        socket_name(self.pid, self.nonce)
    }
}

fn socket_name(pid: u32, nonce: u64) -> String {
    format!("fi_xpu_shm.{pid}.{nonce:016x}")
}

pub fn random_bytes(out: &mut [u8]) -> Result<()> {
    use fi_xpu_os::rustix::{io::Errno, rand};
    let mut got = 0;
    while got < out.len() {
        match rand::getrandom(&mut out[got..], rand::GetRandomFlags::empty()) {
            Ok(n) => got += n,
            Err(Errno::INTR) => {}
            Err(_) => return Err(Error::IO),
        }
    }
    Ok(())
}

/// This node's boot id; two processes share it only on the same kernel.
pub fn boot_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let hex: Vec<u8> = s.trim().bytes().filter(|c| c.is_ascii_hexdigit()).collect();
        for (i, pair) in hex.chunks(2).take(16).enumerate() {
            let s = std::str::from_utf8(pair).unwrap_or("0");
            id[i] = u8::from_str_radix(s, 16).unwrap_or(0);
        }
    }
    id
}

pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Writes a u64 that device code (ours or a peer's) reads concurrently.
///
/// # Safety
/// `addr` is 8-byte aligned and lies inside memory this domain allocated or
/// mapped (a context's device blocks, peer maps, heap or table), live for
/// the call; every other access to that word is atomic.
pub unsafe fn store(addr: usize, v: u64) {
    // SAFETY: the caller's promise.
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }.store(v, Ordering::Release);
}

/// Reads a u64 that device code writes concurrently.
///
/// # Safety
/// As for `store`.
pub unsafe fn load(addr: usize) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }.load(Ordering::Acquire)
}

/// First-fit allocator over a context heap.
#[derive(Debug)]
pub struct FreeList {
    free: Vec<(u64, u64)>,
}

impl FreeList {
    pub fn new(start: u64, end: u64) -> FreeList {
        FreeList {
            free: vec![(start, end - start)],
        }
    }

    pub fn alloc(&mut self, size: u64) -> Option<u64> {
        let size = size.div_ceil(64) * 64;
        let i = self.free.iter().position(|&(_, l)| l >= size)?;
        let (off, len) = self.free[i];
        if len == size {
            self.free.remove(i);
        } else {
            self.free[i] = (off + size, len - size);
        }
        Some(off)
    }

    pub fn release(&mut self, off: u64, size: u64) {
        let size = size.div_ceil(64) * 64;
        let i = self.free.partition_point(|&(o, _)| o < off);
        self.free.insert(i, (off, size));
        // Merge neighbours so the heap does not fragment over open/close cycles.
        let mut j = 0;
        while j + 1 < self.free.len() {
            if self.free[j].0 + self.free[j].1 == self.free[j + 1].0 {
                self.free[j].1 += self.free[j + 1].1;
                self.free.remove(j + 1);
            } else {
                j += 1;
            }
        }
    }
}

/// The slot numbers of a fixed-size table (registrations, raw peer
/// addresses), taken and given back in constant time whatever the number
/// in use: the lowest free slot first while none was given back.
#[derive(Debug)]
pub struct Slots {
    free: Vec<usize>,
    used: Vec<bool>,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        Slots {
            free: (0..n).rev().collect(),
            used: vec![false; n],
        }
    }

    pub fn take(&mut self) -> Option<usize> {
        let s = self.free.pop()?;
        self.used[s] = true;
        Some(s)
    }

    /// Gives `s` back; a slot not in use is left alone.
    pub fn give(&mut self, s: usize) {
        if self.used.get(s) == Some(&true) {
            self.used[s] = false;
            self.free.push(s);
        }
    }
}

/// A region this domain shares with its peers.
pub struct Region {
    pub fd: OwnedFd,
    pub offset: u64,
    pub size: u64,
    /// `fd` is a legacy IPC record (`ipc_record`), not the memory.
    pub ipc: bool,
}

/// The REGION message's flag for a legacy IPC record, above the region id.
const REGION_IPC: u64 = 1 << 32;

/// A legacy IPC record: what a REGION message with `REGION_IPC` carries,
/// in a sealed memfd: this magic, then the handle.
const IPC_MAGIC: u64 = 0x6370_6975_7078_6966; // "fixpuipc"
const IPC_RECORD: usize = 8 + core::IPC_HANDLE;

/// A sealed memfd holding the legacy IPC record of `handle`.
pub fn ipc_record(handle: &[u8; core::IPC_HANDLE]) -> Result<OwnedFd> {
    use std::os::unix::fs::FileExt;
    let fd = fi_xpu_os::file::memfd(
        c"fi_xpu-ipc",
        fi_xpu_os::rustix::fs::MemfdFlags::CLOEXEC
            | fi_xpu_os::rustix::fs::MemfdFlags::ALLOW_SEALING,
    )
    .map_err(|_| Error::MFILE)?;
    let mut rec = [0u8; IPC_RECORD];
    rec[..8].copy_from_slice(&IPC_MAGIC.to_le_bytes());
    rec[8..].copy_from_slice(handle);
    let f = std::fs::File::from(fd);
    f.write_all_at(&rec, 0).map_err(|_| Error::IO)?;
    let fd = OwnedFd::from(f);
    sealed::seal(fd.as_fd())?;
    Ok(fd)
}

/// The handle in a peer's legacy IPC record, read once and checked.
fn read_ipc_record(fd: &OwnedFd) -> Option<[u8; core::IPC_HANDLE]> {
    use std::os::unix::fs::FileExt;
    sealed::check(fd.as_fd(), 0, IPC_RECORD as u64).ok()?;
    let f = std::fs::File::from(fd.try_clone().ok()?);
    let mut rec = [0u8; IPC_RECORD];
    f.read_exact_at(&mut rec, 0).ok()?;
    (u64::from_le_bytes(rec[..8].try_into().unwrap()) == IPC_MAGIC)
        .then(|| rec[8..].try_into().unwrap())
}

/// How this domain maps a region a peer shares.
pub enum PeerKind {
    /// A sealed memfd or a DMA-BUF: mapped by any context.
    File,
    /// A device memory handle (`sealed::is_device_handle`): device
    /// contexts only.
    Device,
    /// A legacy IPC handle of the peer's device memory: device contexts
    /// only, and never in the process that owns the memory (the driver
    /// refuses to open a handle there: a loopback connection leaves the
    /// region unmapped).
    Ipc(Box<[u8; core::IPC_HANDLE]>),
    /// The same, from this process itself.
    OwnIpc,
}

/// A region a peer shares: its descriptor (kept for contexts opened
/// later), range, and how it is mapped.
pub struct PeerRegion {
    pub fd: OwnedFd,
    pub off: u64,
    pub size: u64,
    pub kind: PeerKind,
}

impl PeerRegion {
    /// Maps the region into context `core`; `None` (logged) when it
    /// cannot.
    fn import(&self, core: Ctx, rid: u32) -> Option<usize> {
        let device_only = !matches!(self.kind, PeerKind::File);
        if device_only && !core::device_memory(core) {
            core::warn(&format!(
                "peer region {rid} is device memory, which a host-memory context cannot map"
            ));
            return None;
        }
        let r = match &self.kind {
            PeerKind::Ipc(h) => core::import_ipc(core, h, self.off, self.size),
            PeerKind::OwnIpc => {
                core::debug(&format!(
                    "region {rid} of this process's own is shared by an IPC handle, which it cannot open: not mapped through the loopback connection"
                ));
                return None;
            }
            _ => core::import(core, self.fd.as_raw_fd(), self.off, self.size),
        };
        r.inspect_err(|e| core::warn(&format!("cannot map peer region {rid}: {e}")))
            .ok()
    }

    fn read_only(&self) -> bool {
        matches!(self.kind, PeerKind::File) && maps_read_only(self.fd.as_fd())
    }
}

/// One XPU context of this domain.
pub struct CtxSt {
    pub core: Ctx,
    pub dev: usize,
    /// The context's resolve table (`CtxDev::resolve`).
    pub resolve: usize,
    pub heap: usize,
    pub heap_region: u32,
    pub heap_alloc: FreeList,
    /// Device address of this context's writable import of `table`, and
    /// the free space of its staging area (offsets in the table).
    pub stage: usize,
    pub stage_alloc: FreeList,
    /// Header, registration table and staging lanes, read-only to peers
    /// (table.rs).
    pub table: crate::table::Table,
    pub table_region: u32,
    pub mr_slots: Slots,
    pub maps: HashMap<u32, usize>,
    /// Raw AV addresses handed out on this context: (av id, fi_addr) -> record.
    pub peer_addrs: HashMap<(u64, u64), usize>,
    /// Whether the peer behind each of those addresses has its context on
    /// this context's device (`device::same_device_for_peer_pair`).
    pub peer_same_device: HashMap<(u64, u64), bool>,
    /// Which slots of the context's table of raw peer addresses are in use.
    pub peer_slots: Slots,
    /// Imports of departed peers that the memory backend could not retire:
    /// kept until the context closes, so an access under way cannot fault.
    pub retired_imports: Vec<usize>,
    /// Device blocks of closed endpoints and CQs, tombstoned: kept mapped
    /// until the context closes so stale handles never reach freed memory.
    pub retired_dev: Vec<usize>,
}

impl CtxSt {
    pub fn core(&self) -> Ctx {
        self.core
    }
}

/// What an AV entry needs to know of its connection.
#[derive(Clone, Copy, Debug)]
pub struct ConnRef {
    pub cid: u32,
    pub gen: u64,
    pub at_peer: u64,
    pub at_peer_gen: u64,
    /// The key the peer gave this connection, which stamps what is sent
    /// to it.
    pub tx_key: [u64; 2],
}

/// A connection to another domain (either direction).
pub struct Conn {
    pub sock: Option<OwnedFd>,
    /// The handshake is over: the control thread serves the socket.
    pub ready: bool,
    /// This domain's regions went to the peer (the handshake's snapshot,
    /// sent under the state lock): every region shared or withdrawn since
    /// must be told to it, even before the handshake is over.
    pub announced: bool,
    pub client: bool,
    pub remote_nonce: u64,
    /// This id's generation: ids of departed peers are reused, and the
    /// generation tells the connections that held one apart.
    pub gen: u64,
    /// The id and generation the other side gave this connection (clients only).
    pub at_peer: u64,
    pub at_peer_gen: u64,
    /// The secret this connection was authenticated with (clients only).
    pub secret: [u8; 16],
    /// The key this domain drew for this connection: what the peer
    /// stamps its entries with (given to it in WELCOME; never given to
    /// anyone for a client connection, whose peer sends over its own).
    pub rx_key: [u64; 2],
    /// The key the peer gave this connection (clients only).
    pub tx_key: [u64; 2],
    /// The peer's pid as the kernel reported it on connecting.
    pub pid: i32,
    pub regions: HashMap<u32, PeerRegion>,
    pub imports: HashMap<(u64, u32), usize>,
    pub pushed: u64,
    pub acked: u64,
}

#[derive(Default)]
pub struct State {
    pub regions: BTreeMap<u32, Region>,
    pub ctxs: HashMap<u64, CtxSt>,
    pub conns: HashMap<u32, Conn>,
    /// Sockets of lost connections, closed by the control thread between
    /// two polls: a descriptor number the control thread may be polling
    /// must not be handed out again (to a new peer's socket or a received
    /// region) while it still acts on what that poll returned.
    pub(crate) retired_socks: Vec<OwnedFd>,
    next_conn_gen: u64,
    next_ctx: u64,
    next_ep: u32,
    next_gen: u32,
    next_obj: u64,
    pub stop: bool,
}

pub struct Inner {
    pub nonce: u64,
    pub secret: [u8; 16],
    pub boot_id: [u8; 16],
    pub pid: u32,
    pub(crate) listener: OwnedFd,
    pub(crate) wake: OwnedFd,
    st: Mutex<State>,
    pub(crate) cv: Condvar,
    /// The host progress agent, when the domain asked for one.
    pub agent: Option<crate::agent::Agent>,
}

pub struct Domain {
    pub inner: Arc<Inner>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Domain {
    pub fn open(host_progress: bool) -> Result<Domain> {
        let agent = if host_progress {
            Some(crate::agent::Agent::start()?)
        } else {
            None
        };
        let mut r = [0u8; 28];
        random_bytes(&mut r)?;
        // Never 0, which peer maps use for "no attested source".
        let nonce = u64::from_le_bytes(r[0..8].try_into().unwrap()).max(1);
        let mut secret = [0u8; 16];
        secret.copy_from_slice(&r[8..24]);
        let pid = std::process::id();
        let listener = wire::listen(&socket_name(pid, nonce)).map_err(|e| {
            core::warn(&format!("cannot listen on the control socket: errno {e}"));
            Error::ADDRINUSE
        })?;
        let wake = fi_xpu_os::wake::eventfd().map_err(|_| Error::MFILE)?;
        let inner = Arc::new(Inner {
            nonce,
            secret,
            boot_id: boot_id(),
            pid,
            listener,
            wake,
            st: Mutex::new(State {
                next_conn_gen: 1,
                next_ctx: 1,
                next_ep: 1,
                // Registration keys carry the generation: from a random
                // start, two domains that register in the same order
                // still hand out different keys, so an access sent to
                // the wrong peer is refused instead of landing.
                next_gen: u32::from_le_bytes(r[24..28].try_into().unwrap()).max(1),
                next_obj: 1,
                ..Default::default()
            }),
            cv: Condvar::new(),
            agent,
        });
        let i2 = inner.clone();
        let thread = std::thread::Builder::new()
            .name("fi_xpu_shm".into())
            .spawn(move || i2.control_loop())
            .map_err(|_| Error::NOMEM)?;
        Ok(Domain {
            inner,
            thread: Some(thread),
        })
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.inner.poke();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut st = self.inner.lock();
        st.conns.clear();
        st.regions.clear();
    }
}

impl Inner {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the control thread so it re-reads the set of connections.
    fn poke(&self) {
        fi_xpu_os::wake::poke(&self.wake);
    }

    pub fn next_ep(&self) -> u32 {
        let mut st = self.lock();
        st.next_ep += 1;
        st.next_ep - 1
    }

    pub fn next_obj(&self) -> u64 {
        let mut st = self.lock();
        st.next_obj += 1;
        st.next_obj - 1
    }

    pub fn next_gen(st: &mut State) -> u32 {
        let g = st.next_gen;
        st.next_gen = st.next_gen.wrapping_add(1).max(1);
        g
    }

    /// Adds a region and tells every connected peer; returns once they have
    /// mapped it (or are gone, or the wait timed out).
    pub fn share_region(
        &self,
        mut st: MutexGuard<'_, State>,
        fd: OwnedFd,
        offset: u64,
        size: u64,
        ipc: bool,
    ) -> Result<u32> {
        let Some(id) = (1..MAX_REGIONS as u32).find(|i| !st.regions.contains_key(i)) else {
            core::warn(&format!(
                "all {} shareable regions of the domain are in use",
                MAX_REGIONS - 1
            ));
            return Err(Error::NOSPC);
        };
        if let Err(e) = sealed::seal(fd.as_fd()) {
            core::warn("cannot seal memory against resizing; peers would refuse it");
            return Err(e);
        }
        let raw = fd.as_raw_fd();
        st.regions.insert(
            id,
            Region {
                fd,
                offset,
                size,
                ipc,
            },
        );
        let a = id as u64 | if ipc { REGION_IPC } else { 0 };
        let mut waits = Vec::new();
        for (cid, c) in st.conns.iter_mut() {
            if !c.announced {
                continue;
            }
            if let Some(s) = &c.sock {
                let m = Msg::new(wire::REGION, a, size, offset);
                if wire::send(s.as_raw_fd(), &m, Some(raw)).is_ok() {
                    c.pushed += 1;
                    waits.push((*cid, c.gen, c.pushed));
                }
            }
        }
        let deadline = Instant::now() + PUSH_TIMEOUT;
        loop {
            // A peer that left no longer counts, nor does the one that
            // took its id since (it was sent every region on connecting).
            let pending = waits.iter().any(|(cid, gen, n)| {
                st.conns
                    .get(cid)
                    .is_some_and(|c| c.gen == *gen && c.sock.is_some() && c.acked < *n)
            });
            if !pending {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                core::warn("a peer did not acknowledge a new region in time");
                break;
            }
            st = self
                .cv
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(id)
    }

    /// Withdraws a region from peers.
    pub fn unshare_region(&self, st: &mut State, id: u32) {
        if st.regions.remove(&id).is_none() {
            return;
        }
        for c in st.conns.values() {
            if let (true, Some(s)) = (c.announced, &c.sock) {
                let _ = wire::send(
                    s.as_raw_fd(),
                    &Msg::new(wire::REMOVE, id as u64, 0, 0),
                    None,
                );
            }
        }
    }

    /// Creates the map of connection `cid` in context `ctx_id`, importing
    /// every region the peer has shared so far.
    fn add_map(st: &mut State, ctx_id: u64, cid: u32) -> Result<()> {
        let (core, dev) = {
            let c = st.ctxs.get(&ctx_id).ok_or(Error::INVAL)?;
            (c.core(), c.dev)
        };
        // A reused id keeps its map: raw addresses of the departed peer
        // still point here and now fail the generation check.
        let map = match st.ctxs.get(&ctx_id).and_then(|c| c.maps.get(&cid)) {
            Some(&m) => {
                let (k, pk) = (offset_of!(PeerMap, key), offset_of!(PeerMap, prev_key));
                let (n, pn) = (offset_of!(PeerMap, nonce), offset_of!(PeerMap, prev_nonce));
                stale(m, true);
                // SAFETY: `m` is this context's live PeerMap (a core
                // allocation of its size); the offsets are its fields.
                unsafe {
                    // What the departed peer left behind is still its own.
                    store(m + pk, load(m + k));
                    store(m + pk + 8, load(m + k + 8));
                    store(m + pn, load(m + n));
                    store(m + offset_of!(PeerMap, prev_gen), load(m + 8));
                }
                for rid in 1..MAX_REGIONS as u32 {
                    set_map(m, rid, 0, 0, false);
                }
                m
            }
            None => core::alloc(core, std::mem::size_of::<PeerMap>() as u64, false)?.0,
        };
        let nonce = Self::attested_nonce(st, cid);
        let conn = st.conns.get_mut(&cid).ok_or(Error::INVAL)?;
        // SAFETY: `map` is a live PeerMap of this context (kept, or just
        // allocated at its size); the offsets are its fields.
        unsafe {
            store(map + offset_of!(PeerMap, key), conn.rx_key[0]);
            store(map + offset_of!(PeerMap, key) + 8, conn.rx_key[1]);
            store(map + offset_of!(PeerMap, nonce), nonce);
            store(map + 8, conn.gen);
            store(map, PEER_ALIVE);
        }
        for (&rid, r) in conn.regions.iter() {
            if let Some(d) = r.import(core, rid) {
                set_map(map, rid, d, r.size, r.read_only());
                conn.imports.insert((ctx_id, rid), d);
            }
        }
        if conn.sock.is_none() {
            stale(map, true);
        }
        st.ctxs.get_mut(&ctx_id).unwrap().maps.insert(cid, map);
        // SAFETY: `dev` is the context's live CtxDev, whose table of maps
        // has a word for every connection id (cid < MAX_CONNS).
        unsafe { store(dev + 32 + 8 * cid as usize, map as u64) };
        Ok(())
    }

    /// A peer shared region `a` (its id, and `REGION_IPC` for a legacy
    /// IPC record): map it into every context. Nothing happens when
    /// connection `cid` is no longer generation `gen`.
    pub(crate) fn peer_region(
        st: &mut State,
        cid: u32,
        gen: u64,
        a: u64,
        fd: OwnedFd,
        off: u64,
        size: u64,
    ) {
        let rid = a as u32;
        if rid == 0 || rid as usize >= MAX_REGIONS || a & !(REGION_IPC | u32::MAX as u64) != 0 {
            core::warn(&format!("peer sent an invalid region id {a:#x}"));
            return;
        }
        if Self::live_conn(st, cid, gen).is_none() {
            return;
        }
        Self::peer_remove(st, cid, gen, rid);
        // Device memory (a peer's heap or registration on its GPU) only
        // device contexts can map; its driver checks the range.
        let own = st
            .conns
            .get(&cid)
            .is_some_and(|c| c.pid as u32 == std::process::id());
        let kind = if a & REGION_IPC != 0 {
            match read_ipc_record(&fd) {
                Some(_) if own => PeerKind::OwnIpc,
                Some(h) => PeerKind::Ipc(Box::new(h)),
                None => {
                    core::warn(&format!("refused peer region {rid}: not an IPC record"));
                    return;
                }
            }
        } else if sealed::is_device_handle(fd.as_fd()) {
            PeerKind::Device
        } else {
            PeerKind::File
        };
        if !matches!(kind, PeerKind::File) {
            if off
                .checked_add(size)
                .is_none_or(|end| end > isize::MAX as u64)
                || size == 0
            {
                core::warn(&format!("refused peer region {rid}: a bad range"));
                return;
            }
        } else if let Err(e) = sealed::check(fd.as_fd(), off, size) {
            core::warn(&format!(
                "refused peer region {rid}: its descriptor {} (error {e})",
                if e == Error::PERM {
                    "can shrink under the mapping"
                } else {
                    "does not cover the range it announced"
                }
            ));
            return;
        }
        let targets: Vec<(u64, Ctx, usize)> = st
            .ctxs
            .iter()
            .filter_map(|(id, c)| c.maps.get(&cid).map(|m| (*id, c.core(), *m)))
            .collect();
        let Some(conn) = st.conns.get_mut(&cid) else {
            return;
        };
        let r = PeerRegion {
            fd,
            off,
            size,
            kind,
        };
        for (ctx_id, core, map) in targets {
            if let Some(d) = r.import(core, rid) {
                set_map(map, rid, d, size, r.read_only());
                conn.imports.insert((ctx_id, rid), d);
            }
        }
        conn.regions.insert(rid, r);
    }

    /// The peer withdrew region `rid`: it leaves every map, and each
    /// import is retired rather than unmapped, since device code may still
    /// hold an address inside it (see `retire_import`).
    pub(crate) fn peer_remove(st: &mut State, cid: u32, gen: u64, rid: u32) {
        let Some(conn) = Self::live_conn(st, cid, gen) else {
            return;
        };
        conn.regions.remove(&rid);
        let gone: Vec<(u64, usize)> = conn
            .imports
            .iter()
            .filter(|((_, r), _)| *r == rid)
            .map(|((ctx_id, _), d)| (*ctx_id, *d))
            .collect();
        for &(ctx_id, _) in &gone {
            conn.imports.remove(&(ctx_id, rid));
        }
        for (ctx_id, d) in gone {
            Self::retire_import(st, ctx_id, cid, rid, d);
        }
    }

    /// Registers a new context: its maps of every peer.
    pub fn add_ctx(&self, st: &mut State, c: CtxSt) -> u64 {
        let id = st.next_ctx;
        st.next_ctx += 1;
        st.ctxs.insert(id, c);
        let cids: Vec<u32> = st.conns.keys().copied().collect();
        for cid in cids {
            if let Err(e) = Self::add_map(st, id, cid) {
                core::warn(&format!("cannot map connection {cid}: {e}"));
            }
        }
        id
    }

    /// Unmaps every peer region from a context and frees its maps.
    pub fn remove_ctx(&self, st: &mut State, id: u64) -> Option<CtxSt> {
        let c = st.ctxs.remove(&id)?;
        for conn in st.conns.values_mut() {
            let keys: Vec<(u64, u32)> = conn
                .imports
                .keys()
                .filter(|(cx, _)| *cx == id)
                .copied()
                .collect();
            for k in keys {
                let d = conn.imports.remove(&k).unwrap();
                core::unimport(c.core(), d);
            }
        }
        for &d in c.retired_imports.iter() {
            core::unimport(c.core(), d);
        }
        for &d in c.retired_dev.iter() {
            core::free(c.core(), d);
        }
        for m in c.maps.values() {
            core::free(c.core(), *m);
        }
        Some(c)
    }

    /// The domain nonce entries arriving through connection `cid` are
    /// attributed to. A peer names its own nonce when it connects, and
    /// nothing stops it from naming another's: the claim stands only when
    /// this domain reached the domain of that nonce itself (a connection
    /// of ours to the socket its address names, whose server proved the
    /// nonce) and the kernel reports the same process at both ends. 0 (no
    /// nonce, no source) otherwise, or for our own client connections.
    fn attested_nonce(st: &State, cid: u32) -> u64 {
        let Some(c) = st.conns.get(&cid).filter(|c| !c.client && c.sock.is_some()) else {
            return 0;
        };
        let reached = st.conns.values().any(|o| {
            o.client && o.sock.is_some() && o.remote_nonce == c.remote_nonce && o.pid == c.pid
        });
        if reached {
            c.remote_nonce
        } else {
            0
        }
    }

    /// Writes the attested nonce of every connection into the maps of
    /// every context: after a connection came or went, a claim may now
    /// stand or fall.
    pub(crate) fn attest(st: &State) {
        // A departed peer keeps what it was attested as: its entries
        // still waiting are its own.
        for (&cid, _) in st.conns.iter().filter(|(_, c)| c.sock.is_some()) {
            let nonce = Self::attested_nonce(st, cid);
            for c in st.ctxs.values() {
                if let Some(&m) = c.maps.get(&cid) {
                    // SAFETY: a live PeerMap of the context; its field.
                    unsafe { store(m + offset_of!(PeerMap, nonce), nonce) };
                }
            }
        }
    }

    /// The lowest connection id that is free or held by a departed peer.
    fn free_conn_id(st: &State) -> Option<u32> {
        (0..MAX_CONNS as u32).find(|i| st.conns.get(i).is_none_or(|c| c.sock.is_none()))
    }

    /// Connection `cid` when it is still generation `gen` and connected.
    pub(crate) fn live_conn(st: &mut State, cid: u32, gen: u64) -> Option<&mut Conn> {
        st.conns
            .get_mut(&cid)
            .filter(|c| c.gen == gen && c.sock.is_some())
    }

    /// Marks established connections whose peer hung up as lost, without
    /// waiting for the control loop to notice, so that their ids can be
    /// reused at once. Any thread may call this: the sockets are retired,
    /// not closed, and the control loop checks the generation of every
    /// connection it acts on. Connections still in their handshake are
    /// left to the thread running it. Returns whether any was lost.
    fn reap(st: &mut State) -> bool {
        let mut fds: Vec<(u32, u64, libc::pollfd)> = st
            .conns
            .iter()
            .filter(|(_, c)| c.ready)
            .filter_map(|(cid, c)| {
                c.sock.as_ref().map(|s| {
                    (
                        *cid,
                        c.gen,
                        libc::pollfd {
                            fd: s.as_raw_fd(),
                            events: 0,
                            revents: 0,
                        },
                    )
                })
            })
            .collect();
        let mut lost = false;
        for (cid, gen, p) in fds.iter_mut() {
            // SAFETY: polling one live descriptor (owned by the connection,
            // under the state lock) without waiting.
            let n = unsafe { libc::poll(p, 1, 0) };
            if n == 1 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                lost |= Self::mark_lost(st, *cid, *gen);
            }
        }
        lost
    }

    pub(crate) fn new_conn(st: &mut State, sock: OwnedFd, client: bool) -> Result<u32> {
        Self::reap(st);
        let pid = wire::peer_pid(&sock)?;
        let mut k = [0u8; 16];
        random_bytes(&mut k)?;
        let rx_key = [
            u64::from_le_bytes(k[0..8].try_into().unwrap()),
            u64::from_le_bytes(k[8..16].try_into().unwrap()),
        ];
        let Some(cid) = Self::free_conn_id(st) else {
            core::warn(&format!(
                "connection limit ({MAX_CONNS} live connections per domain) reached"
            ));
            return Err(Error::NOSPC);
        };
        // A departed peer's id is reused: its imports were retired when it
        // left (mark_lost); its maps are cleared and reused (add_map).
        if let Some(old) = st.conns.remove(&cid) {
            for ((ctx_id, _), d) in old.imports {
                if let Some(c) = st.ctxs.get_mut(&ctx_id) {
                    c.retired_imports.push(d);
                }
            }
        }
        let gen = st.next_conn_gen;
        st.next_conn_gen += 1;
        st.conns.insert(
            cid,
            Conn {
                sock: Some(sock),
                ready: false,
                announced: false,
                client,
                remote_nonce: 0,
                gen,
                at_peer: 0,
                at_peer_gen: 0,
                secret: [0; 16],
                rx_key,
                tx_key: [0; 2],
                pid,
                regions: HashMap::new(),
                imports: HashMap::new(),
                pushed: 0,
                acked: 0,
            },
        );
        let ctxs: Vec<u64> = st.ctxs.keys().copied().collect();
        for id in ctxs {
            Self::add_map(st, id, cid)?;
        }
        Ok(cid)
    }

    pub(crate) fn send_regions(st: &State, sock: RawFd) -> Result<()> {
        for (id, r) in st.regions.iter() {
            let a = *id as u64 | if r.ipc { REGION_IPC } else { 0 };
            wire::send(
                sock,
                &Msg::new(wire::REGION, a, r.size, r.offset),
                Some(r.fd.as_raw_fd()),
            )?;
        }
        wire::send(sock, &Msg::new(wire::DONE, 0, 0, 0), None)
    }

    /// Reads REGION records until DONE during a handshake.
    fn recv_regions(&self, cid: u32, gen: u64, sock: RawFd) -> Result<()> {
        loop {
            match wire::recv(sock)? {
                None => return Err(Error::CONNRESET),
                Some((m, _)) if m.kind == wire::DONE => return Ok(()),
                Some((m, Some(fd))) if m.kind == wire::REGION => {
                    let mut st = self.lock();
                    Self::peer_region(&mut st, cid, gen, m.a, fd, m.c, m.b);
                }
                Some(_) => return Err(Error::IO),
            }
        }
    }

    /// Connects to the domain that owns `addr`, or reuses a live connection
    /// to it.
    pub fn connect(&self, addr: &Addr) -> Result<ConnRef> {
        if !ct_eq(&addr.boot_id, &self.boot_id) {
            core::warn(&format!(
                "address of pid {} is on another node (boot id differs); shm reaches peers on this node only",
                addr.pid
            ));
            return Err(Error::HOSTUNREACH);
        }
        {
            let st = self.lock();
            if let Some((cid, c)) = st.conns.iter().find(|(_, c)| {
                c.client && c.ready && c.sock.is_some() && c.remote_nonce == addr.nonce
            }) {
                // The peer checked the secret once, on connecting; an address
                // reusing the connection must carry the same one.
                if !ct_eq(&c.secret, &addr.secret) {
                    core::warn(&format!(
                        "address of pid {} carries the wrong secret; refused",
                        addr.pid
                    ));
                    return Err(Error::ACCES);
                }
                return Ok(ConnRef {
                    cid: *cid,
                    gen: c.gen,
                    at_peer: c.at_peer,
                    at_peer_gen: c.at_peer_gen,
                    tx_key: c.tx_key,
                });
            }
        }
        let sock = wire::connect(&addr.socket_name()).map_err(|e| {
            core::warn(&format!(
                "cannot reach pid {} (errno {e}): the peer endpoint is gone",
                addr.pid
            ));
            Error::CONNREFUSED
        })?;
        wire::set_timeout(&sock, 10);
        let me = fi_xpu_os::rustix::process::getuid().as_raw();
        let uid = wire::peer_uid(&sock)?;
        if uid != me {
            core::warn(&format!(
                "refusing peer pid {}: it runs as uid {uid}, this process as uid {me}",
                addr.pid
            ));
            return Err(Error::ACCES);
        }
        wire::peer_pid(&sock)?;
        let mut hello = Msg::new(wire::HELLO, self.nonce, 0, 0);
        hello.secret = addr.secret;
        wire::send(sock.as_raw_fd(), &hello, None)?;
        let welcome = match wire::recv(sock.as_raw_fd())? {
            Some((m, _)) if m.kind == wire::WELCOME => m,
            Some((m, _)) if m.kind == wire::REFUSE => {
                let code = Error::new((m.a as i32).clamp(1, 4096));
                core::warn(&format!(
                    "peer pid {} refused the connection: {code}",
                    addr.pid
                ));
                return Err(code);
            }
            _ => return Err(Error::CONNRESET),
        };
        if welcome.b != addr.nonce {
            return Err(Error::INVAL);
        }
        let raw = sock.as_raw_fd();
        let (cid, gen) = {
            let mut st = self.lock();
            let cid = Self::new_conn(&mut st, sock, true)?;
            let c = st.conns.get_mut(&cid).unwrap();
            c.remote_nonce = addr.nonce;
            c.at_peer = welcome.a;
            c.at_peer_gen = welcome.c;
            c.secret = addr.secret;
            c.tx_key = [
                u64::from_le_bytes(welcome.secret[0..8].try_into().unwrap()),
                u64::from_le_bytes(welcome.secret[8..16].try_into().unwrap()),
            ];
            let gen = c.gen;
            // Claims of the nonce we just reached can now be checked.
            Self::attest(&st);
            if let Err(e) = Self::send_regions(&st, raw) {
                Self::mark_lost(&mut st, cid, gen);
                drop(st);
                self.poke();
                return Err(e);
            }
            // From here on what this domain shares goes to the peer too:
            // it follows the snapshot on the socket.
            st.conns.get_mut(&cid).unwrap().announced = true;
            (cid, gen)
        };
        // Sockets of peers that new_conn found gone wait for the control
        // thread to close them.
        self.poke();
        if let Err(e) = self.recv_regions(cid, gen, raw) {
            self.conn_lost(cid, gen);
            return Err(e);
        }
        let mut st = self.lock();
        let Some(c) = Self::live_conn(&mut st, cid, gen) else {
            return Err(Error::CONNRESET);
        };
        c.ready = true;
        let r = ConnRef {
            cid,
            gen: c.gen,
            at_peer: c.at_peer,
            at_peer_gen: c.at_peer_gen,
            tx_key: c.tx_key,
        };
        drop(st);
        self.poke();
        Ok(r)
    }

    /// The peer closed its socket or died: device operations on it fail from
    /// now on, and its memory is released (`retire_imports`).
    pub(crate) fn conn_lost(&self, cid: u32, gen: u64) {
        let mut st = self.lock();
        Self::mark_lost(&mut st, cid, gen);
        drop(st);
        self.cv.notify_all();
        self.poke();
    }

    /// Marks generation `gen` of connection `cid` lost; a later generation
    /// (another peer that took the id since) is left alone. Returns whether
    /// it was live.
    fn mark_lost(st: &mut State, cid: u32, gen: u64) -> bool {
        let Some(sock) = Self::live_conn(st, cid, gen).and_then(|c| {
            c.regions.clear();
            c.sock.take()
        }) else {
            return false;
        };
        st.retired_socks.push(sock);
        let maps: Vec<usize> = st
            .ctxs
            .values()
            .filter_map(|c| c.maps.get(&cid).copied())
            .collect();
        for m in maps {
            stale(m, true);
        }
        Self::retire_imports(st, cid);
        Self::attest(st);
        true
    }

    /// Releases the memory of a departed peer now rather than when the
    /// context closes: its regions leave the maps (new operations find
    /// nothing) and each import is retired, which frees the shared pages
    /// but keeps the address range mapped to private zero pages, so that
    /// device code already holding an address inside it neither faults nor
    /// reaches other memory. A backend that cannot retire keeps the import
    /// until the context closes, as before.
    fn retire_imports(st: &mut State, cid: u32) {
        let Some(conn) = st.conns.get_mut(&cid) else {
            return;
        };
        let imports: Vec<((u64, u32), usize)> = conn.imports.drain().collect();
        for ((ctx_id, rid), d) in imports {
            Self::retire_import(st, ctx_id, cid, rid, d);
        }
    }

    /// Takes import `d` of region `rid` of connection `cid` out of the map
    /// of context `ctx_id` and retires it: the shared pages go, the address
    /// range stays reserved (zero pages) for the next 1024 retirements or
    /// until the context closes, so that an address device code read before
    /// the map changed does not reach memory mapped there later. A backend
    /// that cannot retire keeps the import until the context closes.
    fn retire_import(st: &mut State, ctx_id: u64, cid: u32, rid: u32, d: usize) {
        let Some(c) = st.ctxs.get_mut(&ctx_id) else {
            return;
        };
        if let Some(&m) = c.maps.get(&cid) {
            set_map(m, rid, 0, 0, false);
        }
        if let Err(e) = core::retire(c.core(), d) {
            core::debug(&format!(
                "peer region {rid} stays mapped until its context closes ({e})"
            ));
            c.retired_imports.push(d);
        }
    }
}

/// Moves the epoch of the live PeerMap at `map` (release), after the
/// change that makes what device code resolved through it stale (resolve
/// entries made under the old value are not used again); first marks its
/// peer gone when `dead`. Every caller passes a live PeerMap of a context
/// and holds the domain lock, which makes it the word's only writer.
fn stale(map: usize, dead: bool) {
    let e = map + offset_of!(PeerMap, epoch);
    // SAFETY: the callers' promise above: the state and epoch words of a
    // live PeerMap.
    unsafe {
        if dead {
            store(map, PEER_DEAD);
        }
        store(e, load(e).wrapping_add(1));
    }
}

/// Sets region `rid` of the live PeerMap at `map` (0: withdrawn), mapped
/// read-only when `ro`.
fn set_map(map: usize, rid: u32, base: usize, size: u64, ro: bool) {
    assert!(rid > 0 && (rid as usize) < MAX_REGIONS, "region id {rid}");
    let off_base = offset_of!(PeerMap, base) + 8 * rid as usize;
    let off_size = offset_of!(PeerMap, size) + 8 * rid as usize;
    let off_ro = offset_of!(PeerMap, ro) + 8 * (rid as usize / 64);
    let bit = 1u64 << (rid % 64);
    // SAFETY: every caller passes a live PeerMap of a context; rid is
    // checked against its arrays above.
    unsafe {
        if base == 0 {
            store(map + off_base, 0);
            store(map + off_size, 0);
            stale(map, false);
        } else {
            // Before the base: device code finds the region only with
            // its protection known.
            let w = load(map + off_ro);
            store(map + off_ro, if ro { w | bit } else { w & !bit });
            store(map + off_size, size);
            store(map + off_base, base as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipc_records_round_trip_and_forged_ones_are_refused() {
        use std::io::Write;
        let h: [u8; core::IPC_HANDLE] = std::array::from_fn(|i| i as u8 ^ 0x5a);
        let fd = ipc_record(&h).unwrap();
        assert_eq!(read_ipc_record(&fd), Some(h));
        // Sealed: it cannot shrink under the reader.
        assert!(fi_xpu_os::rustix::fs::ftruncate(&fd, 0).is_err());
        // An unsealed file, a wrong magic, a short record: refused.
        let plain =
            fi_xpu_os::file::memfd(c"t", fi_xpu_os::rustix::fs::MemfdFlags::empty()).unwrap();
        let mut f = std::fs::File::from(plain);
        f.write_all(&[0u8; IPC_RECORD]).unwrap();
        assert_eq!(read_ipc_record(&OwnedFd::from(f)), None);
        let bad = ipc_record(&h).unwrap();
        {
            use std::os::unix::fs::FileExt;
            let g = std::fs::File::from(bad.try_clone().unwrap());
            g.write_all_at(b"notmagic", 0).unwrap();
        }
        assert_eq!(read_ipc_record(&bad), None);
        let short =
            fi_xpu_os::file::memfd(c"t", fi_xpu_os::rustix::fs::MemfdFlags::ALLOW_SEALING).unwrap();
        fi_xpu_os::rustix::fs::ftruncate(&short, 16).unwrap();
        sealed::seal(short.as_fd()).unwrap();
        assert_eq!(read_ipc_record(&short), None);
    }

    #[test]
    fn slots_are_taken_and_given_back() {
        let mut s = Slots::new(3);
        assert_eq!((s.take(), s.take()), (Some(0), Some(1)));
        s.give(0);
        s.give(0); // twice: still one free slot 0
        s.give(7); // out of range: ignored
        assert_eq!((s.take(), s.take(), s.take()), (Some(0), Some(2), None));
        s.give(1);
        assert_eq!((s.take(), s.take()), (Some(1), None));
    }

    #[test]
    fn addr_round_trip_and_rejects() {
        let a = Addr {
            boot_id: [3; 16],
            pid: 77,
            ep_id: 5,
            nonce: 0x1234,
            secret: [9; 16],
            ep_region: 2,
            ep_off: 4096,
        };
        assert_eq!(Addr::decode(&a.encode()), Ok(a));
        let mut b = a.encode();
        b[0] ^= 0xff;
        assert_eq!(Addr::decode(&b), Err(Error::INVAL));
        let mut z = a;
        z.ep_region = 0;
        assert_eq!(Addr::decode(&z.encode()), Err(Error::INVAL));
        assert_eq!(Addr::decode(&a.encode()[..10]), Err(Error::INVAL));
    }

    #[test]
    fn free_list_merges() {
        let mut f = FreeList::new(0, 1024);
        let a = f.alloc(100).unwrap();
        let b = f.alloc(100).unwrap();
        assert_eq!((a, b), (0, 128));
        assert_eq!(f.alloc(2000), None);
        f.release(a, 100);
        f.release(b, 100);
        assert_eq!(f.alloc(1024), Some(0));
    }

    fn conn(client: bool, nonce: u64, pid: i32) -> Conn {
        let (a, _) = std::os::unix::net::UnixStream::pair().unwrap();
        Conn {
            sock: Some(a.into()),
            ready: true,
            announced: true,
            client,
            remote_nonce: nonce,
            gen: 1,
            at_peer: 0,
            at_peer_gen: 0,
            secret: [0; 16],
            rx_key: [1, 2],
            tx_key: [0; 2],
            pid,
            regions: HashMap::new(),
            imports: HashMap::new(),
            pushed: 0,
            acked: 0,
        }
    }

    /// A peer names its own nonce on connecting; the claim stands only
    /// for the process this domain reached under that nonce itself.
    #[test]
    fn a_claimed_nonce_stands_only_for_the_process_we_reached() {
        let mut st = State::default();
        st.conns.insert(0, conn(false, 0xa, 100)); // A, as it says
        assert_eq!(Inner::attested_nonce(&st, 0), 0, "not reached yet");
        st.conns.insert(1, conn(true, 0xa, 100)); // we reached A: pid 100
        st.conns.insert(2, conn(false, 0xa, 200)); // another claiming A
        assert_eq!(Inner::attested_nonce(&st, 0), 0xa);
        assert_eq!(Inner::attested_nonce(&st, 2), 0, "pid 200 is not A");
        assert_eq!(Inner::attested_nonce(&st, 1), 0, "our own client side");
        st.conns.get_mut(&1).unwrap().sock = None; // A's listener side gone
        assert_eq!(Inner::attested_nonce(&st, 0), 0);
        assert_eq!(Inner::attested_nonce(&st, 9), 0, "no such connection");
    }

    #[test]
    fn boot_id_is_stable() {
        assert_eq!(boot_id(), boot_id());
    }
}
