//! Windows: symmetric memory of a world. One collective call allocates the
//! same number of bytes on every rank, registers them with every lane,
//! exchanges the keys and bases, and writes the device table that names,
//! per peer, the route of its writes and reads and the route of its
//! atomics (`struct fi_xpu_window_dev`).
use super::lane::{Lane, Reg};
use super::layout::*;
use super::peers::{agree, Peers};
use crate::error::{Error, Result};
use crate::warn;

pub struct Window {
    pub size: u64,
    /// This rank's part, in lane 0's context.
    pub addr: usize,
    /// Its address in each lane (lane 0's is `addr`).
    local: Vec<usize>,
    regs: Vec<Reg>,
    /// The device table and its length.
    pub dev: usize,
}

/// Bytes of one rank's card per lane: prov_id (8, padded), base, key.
const CARD_LANE: usize = 24;

fn page_round(n: u64) -> Option<u64> {
    n.checked_add(4095).map(|v| v & !4095)
}

impl Window {
    /// Collective: every rank passes the same `size`.
    pub fn alloc(w: &mut Peers, size: u64) -> Result<Window> {
        let sizes = w.boot().allgather(&size.to_le_bytes())?;
        if sizes
            .chunks_exact(8)
            .any(|c| u64::from_le_bytes(c.try_into().unwrap()) != size)
        {
            warn!("world: fi_xpu_world_alloc called with different sizes on different ranks");
            return Err(Error::INVAL);
        }
        if size == 0 {
            return Err(Error::INVAL);
        }
        let Some(mapped) = page_round(size).filter(|m| *m <= isize::MAX as u64 / 2) else {
            return Err(Error::OVERFLOW);
        };
        let mine = Self::local_part(w, mapped);
        let ok = mine.as_ref().map(|_| ()).map_err(|e| *e);
        if let Err(e) = agree(w.boot(), ok) {
            if let Ok(win) = mine {
                win.release(w);
            }
            return Err(e);
        }
        let mut win = mine?;
        win.size = size;

        let mut card = vec![0u8; CARD_LANE * LANES];
        for (i, l) in w.lanes.iter().enumerate() {
            let c = &mut card[i * CARD_LANE..(i + 1) * CARD_LANE];
            c[..4].copy_from_slice(&l.prov_id.to_le_bytes());
            c[8..16].copy_from_slice(&(win.local[i] as u64).to_le_bytes());
            c[16..24].copy_from_slice(&win.regs[i].key.to_le_bytes());
        }
        let cards = match w.boot().allgather(&card) {
            Ok(c) => c,
            Err(e) => {
                win.release(w);
                return Err(e);
            }
        };
        let table = Self::table(w, &win, &cards);
        match agree(w.boot(), table) {
            Ok(dev) => {
                win.dev = dev;
                Ok(win)
            }
            Err(e) => {
                win.release(w);
                Err(e)
            }
        }
    }

    /// Allocates, imports into the other lanes and registers this rank's
    /// part; undoes what it did on an error.
    fn local_part(w: &Peers, mapped: u64) -> Result<Window> {
        let addr = w.lanes[0].alloc(mapped, false)?;
        let mut win = Window {
            size: mapped,
            addr,
            local: vec![addr],
            regs: Vec::new(),
            dev: 0,
        };
        let r = (|| {
            for l in &w.lanes[1..] {
                win.local.push(l.import(addr, mapped)?);
            }
            for (i, l) in w.lanes.iter().enumerate() {
                win.regs.push(l.register(win.local[i], mapped as usize)?);
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(win),
            Err(e) => {
                win.release(w);
                Err(e)
            }
        }
    }

    /// Writes the device table from every rank's card.
    fn table(w: &Peers, win: &Window, cards: &[u8]) -> Result<usize> {
        let n = w.size;
        let head = std::mem::size_of::<WindowDev>();
        let len = head + n * std::mem::size_of::<WindowPeer>();
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(len).map_err(|_| Error::NOMEM)?;
        let dev = w.lanes[0].alloc_table(len as u64)?;
        let route = |p: usize, lane: usize| -> Result<Route> {
            let prov_id = w.lanes[lane].prov_id;
            let c = &cards[p * CARD_LANE * LANES..(p + 1) * CARD_LANE * LANES];
            let entry = c
                .chunks_exact(CARD_LANE)
                .find(|e| u32::from_le_bytes(e[..4].try_into().unwrap()) == prov_id)
                .ok_or(Error::NODATA)?;
            Ok(Route {
                lane: lane as u32,
                prov_id,
                addr: w.addrs[p][lane].ok_or(Error::NODATA)?,
                base: u64::from_le_bytes(entry[8..16].try_into().unwrap()),
                key: u64::from_le_bytes(entry[16..24].try_into().unwrap()),
            })
        };
        let peers: Result<Vec<WindowPeer>> = (0..n)
            .map(|p| {
                Ok(WindowPeer {
                    rma: route(p, w.rma_lane[p])?,
                    amo: route(p, w.amo_lane[p])?,
                })
            })
            .collect();
        let peers = match peers {
            Ok(p) => p,
            Err(e) => {
                let _ = w.lanes[0].free(dev);
                return Err(e);
            }
        };
        let mut d = WindowDev {
            valid: WINDOW_VALID,
            rank: w.rank as u32,
            nranks: n as u32,
            size: win.size,
            addr: win.addr as u64,
            world: w.dev as u64,
            peer: (dev + head) as u64,
            ..Default::default()
        };
        for (i, r) in win.regs.iter().enumerate() {
            d.local[i] = WindowLocal {
                addr: win.local[i] as u64,
                desc: r.desc,
            };
        }
        // The header, then `n` peers, in one write (no kernel has the
        // table yet).
        bytes.extend_from_slice(d.bytes());
        for p in &peers {
            bytes.extend_from_slice(p.bytes());
        }
        if let Err(e) = w.lanes[0].write_table(dev, &bytes) {
            let _ = w.lanes[0].free(dev);
            return Err(e);
        }
        Ok(dev)
    }

    /// Releases this rank's part (not collective).
    pub fn release(self, w: &Peers) {
        for r in self.regs {
            Lane::deregister(r);
        }
        for (i, a) in self.local.iter().enumerate().skip(1) {
            if let Err(e) = w.lanes[i].unimport(*a) {
                warn!("world: unimporting a window: {e}");
            }
        }
        if let Err(e) = w.lanes[0].free(self.addr) {
            warn!("world: freeing a window: {e}");
        }
        if self.dev != 0 {
            let _ = w.lanes[0].free(self.dev);
        }
    }

    /// Collective free: every rank stops using the window before any rank
    /// releases its part.
    pub fn free(self, w: &mut Peers) -> Result<()> {
        let synced = crate::bootstrap::Collectives::barrier(w.boot());
        self.release(w);
        synced
    }
}
