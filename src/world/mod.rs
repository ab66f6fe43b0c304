//! Worlds: a fixed set of ranks that found each other through a bootstrap,
//! with one lane per provider they need (shm for ranks on the same node,
//! ofi for the others), and the device table kernels use to name a peer by
//! its rank (`include/fi_xpu/device_world.h`).
//!
//! Every set-up step is collective and ends with an agreement: each rank
//! says whether its part worked, and when one failed all of them return an
//! error, so no rank goes on with a world another rank could not build.
pub mod handles;
pub mod lane;
pub mod layout;
pub mod node;
pub mod peers;
pub mod window;

use crate::bootstrap::{Bootstrap, Collectives};
use crate::error::{Error, Result};
use crate::ops::Face;
use crate::warn;
use fi_xpu_abi::*;
pub use lane::Device;
use lane::{Available, Lane};
use layout::*;
pub use peers::{agree, Peers};
use std::ops::{Deref, DerefMut};

/// A world: its peers (what its windows need of it, `peers.rs`) and its
/// control window.
pub struct World {
    peers: Peers,
    ctl: Option<window::Window>,
}

impl Deref for World {
    type Target = Peers;
    fn deref(&self) -> &Peers {
        &self.peers
    }
}

impl DerefMut for World {
    fn deref_mut(&mut self) -> &mut Peers {
        &mut self.peers
    }
}

/// Which providers one rank can use, as it tells the others.
const HAS_SHM: u8 = 1;
const HAS_OFI: u8 = 2;

impl World {
    /// Builds the world over `boot`, with contexts on the device `xpu`,
    /// its objects made for the C API `face`.
    pub fn open(mut boot: Box<dyn Bootstrap>, xpu: &Device, face: &Face) -> Result<World> {
        let (rank, size) = (boot.rank(), boot.size());
        let ids = boot.allgatherv(&node::identity())?;
        let (node, nnodes) = node::number(&ids);

        let avail = agree(boot.as_mut(), Available::list(face))?;
        let mine = avail
            .find(FI_XPU_PROV_SHM, xpu.iface)
            .map_or(0, |_| HAS_SHM)
            | avail
                .find(FI_XPU_PROV_OFI, xpu.iface)
                .map_or(0, |_| HAS_OFI);
        let has = boot.allgather(&[mine])?;
        let shm_pair = |a: usize, b: usize| {
            node[a] == node[b] && has[a] & HAS_SHM != 0 && has[b] & HAS_SHM != 0
        };
        let need_ofi = (0..size).any(|p| !shm_pair(rank, p))
            || nnodes > 1
            || has.iter().any(|h| h & HAS_SHM == 0);
        // Every rank opens ofi when any pair needs it: atomics of a world
        // across nodes all go through ofi, loopback included.
        let need_ofi = agree_flag(boot.as_mut(), need_ofi)?;

        let lanes = agree(
            boot.as_mut(),
            (|| {
                let mut lanes = Vec::new();
                if mine & HAS_SHM != 0 {
                    lanes.push(Lane::open(
                        avail.find(FI_XPU_PROV_SHM, xpu.iface).unwrap(),
                        xpu,
                        face,
                    )?);
                }
                if need_ofi {
                    let Some(i) = avail.find(FI_XPU_PROV_OFI, xpu.iface) else {
                        warn!("world: rank {rank} needs the ofi provider (peers on other nodes), which is not available");
                        return Err(Error::NODATA);
                    };
                    lanes.push(Lane::open(i, xpu, face)?);
                }
                Ok(lanes)
            })(),
        )?;

        // Names: per lane, prov_id (4), length (4), name.
        let mut card = Vec::new();
        for l in &lanes {
            let name = l.getname();
            let name = agree(boot.as_mut(), name)?;
            card.extend_from_slice(&l.prov_id.to_le_bytes());
            card.extend_from_slice(&(name.len() as u32).to_le_bytes());
            card.extend_from_slice(&name);
        }
        let cards = boot.allgatherv(&card)?;
        let names: Vec<Vec<(u32, Vec<u8>)>> =
            cards.iter().map(|c| parse_card(c)).collect::<Result<_>>()?;

        let shm_lane = lanes.iter().position(|l| l.prov_id == FI_XPU_PROV_SHM);
        let ofi_lane = lanes.iter().position(|l| l.prov_id == FI_XPU_PROV_OFI);
        let mut rma_lane = vec![0; size];
        let mut amo_lane = vec![0; size];
        let routes = (|| {
            for p in 0..size {
                let l = match (shm_pair(rank, p), shm_lane, ofi_lane) {
                    (true, Some(s), _) => s,
                    (_, _, Some(o)) => o,
                    _ => return Err(Error::NODATA),
                };
                rma_lane[p] = l;
                amo_lane[p] = if nnodes > 1 {
                    ofi_lane.ok_or(Error::NODATA)?
                } else {
                    l
                };
            }
            Ok(())
        })();
        agree(boot.as_mut(), routes)?;

        let mut addrs = vec![[None; LANES]; size];
        let inserted = (|| {
            for (li, l) in lanes.iter().enumerate() {
                for p in 0..size {
                    if rma_lane[p] != li && amo_lane[p] != li {
                        continue;
                    }
                    let name = names[p]
                        .iter()
                        .find(|(id, _)| *id == l.prov_id)
                        .map(|(_, n)| n)
                        .ok_or(Error::NODATA)?;
                    addrs[p][li] = Some(l.insert(name)?);
                }
            }
            Ok(())
        })();
        agree(boot.as_mut(), inserted)?;

        let mut w = World {
            peers: Peers {
                rank,
                size,
                boot,
                lanes,
                node,
                nnodes,
                addrs,
                rma_lane,
                amo_lane,
                dev: 0,
            },
            ctl: None,
        };
        let table = w.lanes[0].alloc_table(std::mem::size_of::<WorldDev>() as u64);
        w.dev = agree(w.boot.as_mut(), table)?;
        let mut d = WorldDev {
            valid: 0,
            rank: rank as u32,
            nranks: size as u32,
            nlanes: w.lanes.len() as u32,
            flags: if nnodes > 1 { WORLD_ATOMICS_OFI } else { 0 },
            ..Default::default()
        };
        for (i, l) in w.lanes.iter().enumerate() {
            d.lane[i] = WorldLane {
                ep: l.dev_ep,
                cntr: l.dev_cntr,
                cq: l.dev_cq,
                issued: 0,
                errors_seen: 0,
            };
        }
        w.write_dev(&d)?;
        let ctl = window::Window::alloc(&mut w, (8 * BARRIER_ROUNDS) as u64)?;
        d.ctl = ctl.dev as u64;
        d.valid = WORLD_VALID;
        w.ctl = Some(ctl);
        w.write_dev(&d)?;
        Ok(w)
    }

    /// This world's table (kernels get it only once the world is open).
    fn write_dev(&self, d: &WorldDev) -> Result<()> {
        self.lanes[0].write_table(self.dev, d.bytes())
    }

    /// Closes the world's own resources: the control window, the table and
    /// the lanes (in that order). Collective where the bootstrap still
    /// works; the local resources are released either way.
    pub fn close(mut self) -> Result<()> {
        let synced = self.peers.boot.barrier();
        if let Some(ctl) = self.ctl.take() {
            ctl.release(&self.peers);
        }
        if self.dev != 0 {
            let _ = self.lanes[0].free(self.dev);
        }
        drop(self.peers.lanes);
        synced
    }
}

/// Whether `v` holds on any rank.
fn agree_flag(boot: &mut dyn Bootstrap, v: bool) -> Result<bool> {
    Ok(boot.allgather(&[v as u8])?.iter().any(|b| *b != 0))
}

fn parse_card(c: &[u8]) -> Result<Vec<(u32, Vec<u8>)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < c.len() {
        if c.len() - at < 8 {
            return Err(Error::INVAL);
        }
        let id = u32::from_le_bytes(c[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(c[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 8;
        if c.len() - at < len {
            return Err(Error::INVAL);
        }
        out.push((id, c[at..at + len].to_vec()));
        at += len;
    }
    Ok(out)
}
