//! One collective of the TCP bootstrap on the joined connections: every
//! rank sends its block to rank 0, which answers all with the gathered
//! blocks or the failure.
use super::{read_exact, u64_at, write_all, Tcp};
use crate::error::{Error, Result};
use crate::warn;
use std::time::Instant;

impl Tcp {
    /// Rank 0's side of a collective.
    pub(super) fn gather(&mut self, mine: &[u8], deadline: Instant) -> Result<Vec<u8>> {
        let mut all = mine.to_vec();
        let mut status: Result<()> = Ok(());
        for r in 1..self.size {
            let s = &mut self.conns[r - 1];
            let mut head = [0u8; 16];
            let got = read_exact(s, &mut head, deadline).and_then(|_| {
                let (seq, len) = (u64_at(&head, 0), u64_at(&head, 8));
                if seq != self.seq || len as usize != mine.len() {
                    warn!(
                        "bootstrap: rank {r} is in collective {seq} with {len} bytes, rank 0 in {} with {}",
                        self.seq,
                        mine.len()
                    );
                    return Err(Error::INVAL);
                }
                let at = all.len();
                all.resize(at + mine.len(), 0);
                read_exact(s, &mut all[at..], deadline)
            });
            if let Err(e) = got {
                if e != Error::INVAL {
                    warn!("bootstrap: rank {r} failed: {e}");
                }
                status = Err(e);
                break;
            }
        }
        let (code, body): (i64, &[u8]) = match status {
            Ok(()) => (0, &all),
            Err(e) => (e.code() as i64, &[]),
        };
        let mut answer = Vec::with_capacity(24 + body.len());
        answer.extend_from_slice(&self.seq.to_le_bytes());
        answer.extend_from_slice(&code.to_le_bytes());
        answer.extend_from_slice(&(body.len() as u64).to_le_bytes());
        answer.extend_from_slice(body);
        // Every rank hears the outcome; one that is gone does not stop the
        // others from hearing it.
        let tell = Instant::now() + self.timeout;
        for s in &mut self.conns {
            let _ = write_all(s, &answer, tell);
        }
        status.map(|_| all)
    }

    /// Any other rank's side.
    pub(super) fn contribute(&mut self, mine: &[u8], deadline: Instant) -> Result<Vec<u8>> {
        let s = &mut self.conns[0];
        let mut head = Vec::with_capacity(16 + mine.len());
        head.extend_from_slice(&self.seq.to_le_bytes());
        head.extend_from_slice(&(mine.len() as u64).to_le_bytes());
        head.extend_from_slice(mine);
        write_all(s, &head, deadline)?;
        let mut ans = [0u8; 24];
        read_exact(s, &mut ans, deadline)?;
        let (seq, code, len) = (u64_at(&ans, 0), u64_at(&ans, 8) as i64, u64_at(&ans, 16));
        if code < 0 {
            return Err(Error::from_code(code.max(-(i32::MAX as i64)) as i32));
        }
        if seq != self.seq || len != (mine.len() * self.size) as u64 {
            warn!(
                "bootstrap: rank 0 answered collective {seq} with {len} bytes; expected {} with {}",
                self.seq,
                mine.len() * self.size
            );
            return Err(Error::NOMSG);
        }
        let mut all = vec![0u8; len as usize];
        read_exact(s, &mut all, deadline)?;
        Ok(all)
    }
}
