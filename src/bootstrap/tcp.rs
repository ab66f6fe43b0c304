//! The TCP rendezvous bootstrap, the default.
//!
//! Rank 0 listens at an address every rank was given; the others connect
//! to it (retrying until the deadline, so start order does not matter) and
//! introduce themselves: protocol magic, rank, number of ranks and a hash
//! of the job key. Rank 0 refuses a wrong introduction with a status the
//! joiner returns (`-FI_EINVAL` for a rank or size that does not fit,
//! `-FI_EKEYREJECTED` for another job's key) and keeps waiting for the
//! right one. Introductions proceed side by side (one `poll` over the
//! listener and every connection not yet introduced), so a stranger that
//! connects and says nothing holds one of `MAX_PENDING` places for at most
//! `HELLO_WAIT` and delays nobody. Every collective is a gather at rank 0
//! and its answer to all (a star: n-1 connections, which is what set-up
//! traffic needs; at most `MAX_RANKS` ranks).
//!
//! Failures: a peer that closes or resets its connection makes the
//! collective fail with `-FI_ECONNRESET`, one that does not answer within
//! the timeout with `-FI_ETIMEDOUT`, and rank 0 passes its failure to every
//! rank still connected, so all of them return an error instead of
//! waiting. Lengths read from the wire are bounded before anything is
//! allocated.
//!
//! Files: this one holds the configuration, the joined world and its
//! `Bootstrap` face with the socket helpers; `rendezvous` admits the ranks
//! (rank 0 listening, the others connecting), `collective` is one
//! gather-and-answer on the joined connections.
use super::{Bootstrap, MAX_BLOCK};
use crate::error::{Error, Result};
use crate::warn;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

mod collective;
mod rendezvous;
#[cfg(test)]
mod tests;

const MAGIC: [u8; 8] = *b"FIXPUBS1";
/// Most ranks a tcp world has: rank 0 holds a connection to each.
pub const MAX_RANKS: usize = 1 << 20;
/// How long rank 0 waits for a connected stranger to introduce itself.
const HELLO_WAIT: Duration = Duration::from_secs(5);

/// What a rank needs to join.
#[derive(Clone, Debug)]
pub struct Config {
    pub addr: String,
    pub rank: usize,
    pub size: usize,
    pub key: String,
    pub timeout: Duration,
}

pub struct Tcp {
    rank: usize,
    size: usize,
    /// Rank 0: the connection of rank r at r - 1. Others: rank 0's.
    conns: Vec<TcpStream>,
    timeout: Duration,
    seq: u64,
    failed: Option<Error>,
}

/// FNV-1a of the job key: both sides compare hashes, not the key.
fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn io_error(e: std::io::Error) -> Error {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => Error::TIMEDOUT,
        ErrorKind::UnexpectedEof
        | ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe => Error::CONNRESET,
        _ => Error::from(e),
    }
}

fn remaining(deadline: Instant) -> Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(Error::TIMEDOUT)
    } else {
        Ok(left)
    }
}

fn read_exact(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> Result<()> {
    s.set_read_timeout(Some(remaining(deadline)?))
        .map_err(io_error)?;
    s.read_exact(buf).map_err(io_error)
}

fn write_all(s: &mut TcpStream, buf: &[u8], deadline: Instant) -> Result<()> {
    s.set_write_timeout(Some(remaining(deadline)?))
        .map_err(io_error)?;
    s.write_all(buf).map_err(io_error)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn resolve(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .map_err(|e| {
            warn!("bootstrap: cannot resolve `{addr}`: {e}");
            Error::INVAL
        })?
        .next()
        .ok_or(Error::INVAL)
}

impl Tcp {
    /// Joins the rendezvous: rank 0 listens and waits for every other rank,
    /// the others connect to rank 0.
    pub fn join(cfg: &Config) -> Result<Tcp> {
        if cfg.size == 0 || cfg.rank >= cfg.size {
            return Err(Error::INVAL);
        }
        if cfg.size > MAX_RANKS {
            warn!(
                "bootstrap: the tcp bootstrap serves at most {MAX_RANKS} ranks; {} asked",
                cfg.size
            );
            return Err(Error::INVAL);
        }
        let addr = resolve(&cfg.addr)?;
        let deadline = Instant::now() + cfg.timeout;
        let conns = if cfg.size == 1 {
            Vec::new()
        } else if cfg.rank == 0 {
            Self::accept_all(addr, cfg, deadline)?
        } else {
            vec![Self::connect(addr, cfg, deadline)?]
        };
        Ok(Tcp {
            rank: cfg.rank,
            size: cfg.size,
            conns,
            timeout: cfg.timeout,
            seq: 0,
            failed: None,
        })
    }
}

impl Bootstrap for Tcp {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<u8>> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if mine.len() > MAX_BLOCK {
            return Err(Error::MSGSIZE);
        }
        let deadline = Instant::now() + self.timeout;
        let r = match (self.size, self.rank) {
            (1, _) => Ok(mine.to_vec()),
            (_, 0) => self.gather(mine, deadline),
            _ => self.contribute(mine, deadline),
        };
        self.seq += 1;
        if let Err(e) = r {
            self.failed = Some(e);
            // Closing tells everyone waiting on this rank at once.
            for s in &self.conns {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
        r
    }
}
