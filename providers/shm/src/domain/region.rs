//! Regions shared with peers and regions peers share: sealed and IPC
//! records, the per-context maps of peer regions that device code reads.
use super::state::{CtxSt, Inner, PeerKind, PeerRegion, Region, State};
use super::words::{load, store};
use crate::core::{self, Ctx};
use crate::layout::*;
use crate::sealed;
use crate::wire::{self, Msg};
use fi_xpu_os::file::maps_read_only;
use fi_xpu_prov_sdk::{Error, Result};
use std::mem::offset_of;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

/// How long a registration waits for connected peers to map it.
const PUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// The REGION message's flag for a legacy IPC record, above the region id.
pub(super) const REGION_IPC: u64 = 1 << 32;

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

impl Inner {
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
    pub(super) fn add_map(st: &mut State, ctx_id: u64, cid: u32) -> Result<()> {
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
    pub(super) fn attested_nonce(st: &State, cid: u32) -> u64 {
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

    /// Releases the memory of a departed peer now rather than when the
    /// context closes: its regions leave the maps (new operations find
    /// nothing) and each import is retired, which frees the shared pages
    /// but keeps the address range mapped to private zero pages, so that
    /// device code already holding an address inside it neither faults nor
    /// reaches other memory. A backend that cannot retire keeps the import
    /// until the context closes, as before.
    pub(super) fn retire_imports(st: &mut State, cid: u32) {
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
pub(super) fn stale(map: usize, dead: bool) {
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
}
