//! What a world's windows need of it, below both: the ranks, the
//! bootstrap, the lanes, each peer's routes and addresses and the world's
//! device table; and `agree`, the end of every collective step.
use super::lane::Lane;
use super::layout::LANES;
use crate::bootstrap::Bootstrap;
use crate::error::{Error, Result};
use crate::warn;

/// How a world reaches each peer.
pub struct Peers {
    pub rank: usize,
    pub size: usize,
    pub(super) boot: Box<dyn Bootstrap>,
    pub lanes: Vec<Lane>,
    pub node: Vec<usize>,
    pub nnodes: usize,
    /// Per peer: its raw address in each of this rank's lanes (None where
    /// that lane does not reach it).
    pub(super) addrs: Vec<[Option<u64>; LANES]>,
    /// Per peer: the lane of its rma route and of its amo route.
    pub(super) rma_lane: Vec<usize>,
    pub(super) amo_lane: Vec<usize>,
    /// The device table (`struct fi_xpu_world_dev`), in lane 0's memory.
    pub dev: usize,
}

// SAFETY: the device table is memory this world owns; the lanes are Send.
unsafe impl Send for Peers {}

impl Peers {
    pub fn boot(&mut self) -> &mut dyn Bootstrap {
        self.boot.as_mut()
    }
}

/// The outcome of a collective step on every rank: this rank's own error,
/// else the first other rank's, else its value.
pub fn agree<T>(boot: &mut dyn Bootstrap, mine: Result<T>) -> Result<T> {
    let code = match &mine {
        Ok(_) => 0i32,
        Err(e) => e.code(),
    };
    let all = boot.allgather(&code.to_le_bytes())?;
    mine.as_ref().map_err(|e| *e)?;
    for (r, c) in all.chunks_exact(4).enumerate() {
        let c = i32::from_le_bytes(c.try_into().unwrap());
        if c != 0 {
            warn!(
                "world: rank {r} failed this step ({}); so does rank {}",
                crate::error::strerror(c),
                boot.rank()
            );
            return Err(Error::from_code(c));
        }
    }
    mine
}
