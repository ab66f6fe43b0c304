//! Bootstraps: how the ranks of a world find each other and exchange the
//! few bytes that set it up (node ids, endpoint names, registration keys).
//!
//! A bootstrap knows its rank and the number of ranks and offers one
//! collective, an allgather of equal-sized blocks; barrier, broadcast and
//! the allgather of blocks of different sizes are built on it here, so a
//! new bootstrap implements one call. Built in: the TCP rendezvous (`tcp`);
//! others come as `struct fi_xpu_bootstrap_ops` from the application or
//! from a separately loaded module (`mpi`, see `module`).
//!
//! A failed collective leaves the bootstrap failed: every later call
//! returns the same error at once, so a rank never waits on a world that
//! already lost a peer.
pub mod module;
pub mod tcp;

use crate::error::{Error, Result};

/// One way of reaching the other ranks during set-up.
pub trait Bootstrap: Send {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Every rank's `mine`, in rank order. All ranks pass the same length
    /// (`-FI_EINVAL` on every rank otherwise, where the bootstrap can tell).
    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<u8>>;
}

/// The collectives built on `allgather`.
pub trait Collectives {
    fn barrier(&mut self) -> Result<()>;
    /// Blocks of any size, one per rank, in rank order.
    fn allgatherv(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// `buf` of rank `root` on every rank (the sizes may differ).
    fn bcast(&mut self, buf: &[u8], root: usize) -> Result<Vec<u8>>;
}

impl<B: Bootstrap + ?Sized> Collectives for B {
    fn barrier(&mut self) -> Result<()> {
        self.allgather(&[]).map(|_| ())
    }

    fn allgatherv(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let lens = self.allgather(&(mine.len() as u64).to_le_bytes())?;
        let lens: Vec<usize> = lens
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()) as usize)
            .collect();
        let max = lens.iter().copied().max().unwrap_or(0);
        if max > MAX_BLOCK {
            return Err(Error::MSGSIZE);
        }
        let mut padded = mine.to_vec();
        padded.resize(max, 0);
        let all = self.allgather(&padded)?;
        Ok(lens
            .iter()
            .enumerate()
            .map(|(r, &l)| all[r * max..r * max + l].to_vec())
            .collect())
    }

    fn bcast(&mut self, buf: &[u8], root: usize) -> Result<Vec<u8>> {
        if root >= self.size() {
            return Err(Error::INVAL);
        }
        let mine = if self.rank() == root { buf } else { &[] };
        Ok(self.allgatherv(mine)?.swap_remove(root))
    }
}

/// Largest block one rank contributes to a collective.
pub const MAX_BLOCK: usize = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// A bootstrap of one rank; its allgather returns its own block.
    struct Alone;
    impl Bootstrap for Alone {
        fn rank(&self) -> usize {
            0
        }
        fn size(&self) -> usize {
            1
        }
        fn allgather(&mut self, mine: &[u8]) -> Result<Vec<u8>> {
            Ok(mine.to_vec())
        }
    }

    #[test]
    fn derived_collectives() {
        let mut b = Alone;
        b.barrier().unwrap();
        assert_eq!(b.allgatherv(b"abc").unwrap(), vec![b"abc".to_vec()]);
        assert_eq!(b.bcast(b"xy", 0).unwrap(), b"xy".to_vec());
        assert_eq!(b.bcast(b"xy", 1), Err(Error::INVAL));
    }
}
