//! Address vectors: connected peers, the device AV tables of bound
//! endpoints.
use super::ctx::XpuCtx;
use super::params::scope_forced_sys;
use crate::core;
use crate::device::DeviceId;
use crate::domain::{load, store, Addr, ConnRef, Inner};
use crate::layout::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::mem::{offset_of, size_of};
use std::sync::{Arc, Mutex};

/// Entries of an endpoint's device AV table.
pub(super) const AV_TAB_CAP: usize = 1024;

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
pub(super) fn write_av_ent(tab: usize, idx: usize, nonce: u64, ep_id: u64) {
    assert!(idx < AV_TAB_CAP, "AV index {idx}");
    // SAFETY: `tab` is a live table of AV_TAB_CAP entries (endpoints
    // unregister theirs under the same lock before freeing it).
    unsafe {
        store(tab + 16 * idx, nonce);
        store(tab + 16 * idx + 8, ep_id);
    }
}
