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
use super::{Bootstrap, MAX_BLOCK};
use crate::error::{Error, Result};
use crate::warn;
use fi_xpu_abi::errno::*;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

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

/// Most connections rank 0 holds at once that have not yet introduced
/// themselves.
const MAX_PENDING: usize = 64;

/// A connection rank 0 accepted, until it has introduced itself.
struct Hello {
    stream: TcpStream,
    from: SocketAddr,
    buf: [u8; 24],
    got: usize,
    /// When it is dropped if still silent.
    until: Instant,
}

enum Step {
    More,
    Done,
    Gone,
}

impl Hello {
    /// Reads what has arrived (the stream does not block).
    fn read(&mut self) -> Step {
        match self.stream.read(&mut self.buf[self.got..]) {
            Ok(0) => Step::Gone,
            Ok(n) => {
                self.got += n;
                let m = self.got.min(MAGIC.len());
                if self.buf[..m] != MAGIC[..m] {
                    Step::Gone
                } else if self.got == self.buf.len() {
                    Step::Done
                } else {
                    Step::More
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                Step::More
            }
            Err(_) => Step::Gone,
        }
    }
}

/// Takes every connection waiting at the listener. A rank introduces
/// itself as soon as it connects, so each is read at once, and those whose
/// introduction is complete are returned to be answered. Past
/// `MAX_PENDING` silent ones the oldest is read a last time and dropped.
fn accept_new(listener: &TcpListener, pending: &mut VecDeque<Hello>) -> Vec<Hello> {
    let mut done = Vec::new();
    let take = |mut h: Hello, done: &mut Vec<Hello>| match h.read() {
        Step::Done => {
            done.push(h);
            None
        }
        Step::Gone => {
            warn!(
                "bootstrap: {} connected but is not a fi_xpu rank; dropped",
                h.from
            );
            None
        }
        Step::More => Some(h),
    };
    while let Ok((s, from)) = listener.accept() {
        if s.set_nonblocking(true).is_err() {
            continue;
        }
        let _ = s.set_nodelay(true);
        let h = Hello {
            stream: s,
            from,
            buf: [0; 24],
            got: 0,
            until: Instant::now() + HELLO_WAIT,
        };
        let Some(h) = take(h, &mut done) else {
            continue;
        };
        if pending.len() >= MAX_PENDING {
            if let Some(old) = pending.pop_front() {
                let from = old.from;
                if take(old, &mut done).is_some() {
                    warn!(
                        "bootstrap: {MAX_PENDING} connections are waiting to introduce themselves; dropped the oldest, {from}"
                    );
                }
            }
        }
        pending.push_back(h);
    }
    done
}

/// Rank 0's answer to a full introduction: the rank and its stream when
/// admitted; a refusal is sent and logged.
fn admit(
    h: &mut Hello,
    cfg: &Config,
    slots: &[Option<TcpStream>],
    deadline: Instant,
) -> Option<(usize, TcpStream)> {
    let (hello, from) = (&h.buf, h.from);
    let rank = u32::from_le_bytes(hello[8..12].try_into().unwrap()) as usize;
    let size = u32::from_le_bytes(hello[12..16].try_into().unwrap()) as usize;
    let status = if u64_at(hello, 16) != key_hash(&cfg.key) {
        warn!("bootstrap: {from} (rank {rank}) belongs to another job (key differs); refused");
        -FI_EKEYREJECTED
    } else if size != cfg.size || rank == 0 || rank >= cfg.size {
        warn!(
            "bootstrap: {from} says rank {rank} of {size}, but this job has {} ranks; refused",
            cfg.size
        );
        -FI_EINVAL
    } else if slots[rank - 1].is_some() {
        warn!("bootstrap: {from} says rank {rank}, which already joined; refused");
        -FI_EINVAL
    } else {
        0
    };
    let mut s = h.stream.try_clone().ok()?;
    s.set_nonblocking(false).ok()?;
    let mut reply = [0u8; 16];
    reply[..8].copy_from_slice(&MAGIC);
    reply[8..12].copy_from_slice(&status.to_le_bytes());
    // 16 bytes into an empty send buffer: never waits in practice, and the
    // write timeout bounds it if the stranger's window is shut.
    let wait = (Instant::now() + HELLO_WAIT).min(deadline);
    if write_all(&mut s, &reply, wait).is_err() || status != 0 {
        return None;
    }
    Some((rank, s))
}

/// Waits until the listener or a pending connection is readable, or
/// `wake`; returns which are (the listener first).
fn wait_any(listener: &TcpListener, pending: &VecDeque<Hello>, wake: Instant) -> Result<Vec<bool>> {
    use fi_xpu_os::rustix::event::{poll, PollFd, PollFlags, Timespec};
    use fi_xpu_os::Errno;
    let left = remaining(wake)?.max(Duration::from_millis(1));
    let limit = Timespec {
        tv_sec: left.as_secs().min(i32::MAX as u64) as _,
        tv_nsec: left.subsec_nanos() as _,
    };
    let mut fds = Vec::with_capacity(1 + pending.len());
    fds.push(PollFd::new(listener, PollFlags::IN));
    fds.extend(
        pending
            .iter()
            .map(|h| PollFd::new(&h.stream, PollFlags::IN)),
    );
    match poll(&mut fds, Some(&limit)) {
        Ok(0) => Err(Error::TIMEDOUT),
        Ok(_) => Ok(fds.iter().map(|f| !f.revents().is_empty()).collect()),
        Err(Errno::INTR) => Ok(vec![false; fds.len()]),
        Err(e) => Err(Error::from_errno(e.raw_os_error())),
    }
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

    /// Rank 0 waits for every other rank. Introductions proceed side by
    /// side: each connection not yet introduced holds 24 bytes and a
    /// descriptor, at most `MAX_PENDING` of them (the oldest is dropped for
    /// a newcomer), and each is dropped `HELLO_WAIT` after it connected. A
    /// stranger therefore costs the world one of those places, never time.
    fn accept_all(addr: SocketAddr, cfg: &Config, deadline: Instant) -> Result<Vec<TcpStream>> {
        let listener = TcpListener::bind(addr).map_err(|e| {
            warn!("bootstrap: rank 0 cannot listen at {addr}: {e}");
            Error::from(e)
        })?;
        listener.set_nonblocking(true).map_err(io_error)?;
        let mut slots: Vec<Option<TcpStream>> = Vec::new();
        slots.try_reserve_exact(cfg.size - 1).map_err(|_| {
            warn!("bootstrap: no memory for a table of {} ranks", cfg.size);
            Error::NOMEM
        })?;
        slots.resize_with(cfg.size - 1, || None);
        let mut pending: VecDeque<Hello> = VecDeque::new();
        let mut missing = cfg.size - 1;
        while missing > 0 {
            let now = Instant::now();
            pending.retain(|h| {
                let keep = now < h.until;
                if !keep {
                    warn!(
                        "bootstrap: {} connected but did not introduce itself in time; dropped",
                        h.from
                    );
                }
                keep
            });
            let wake = pending.iter().map(|h| h.until).fold(deadline, Instant::min);
            let ready = match wait_any(&listener, &pending, wake) {
                Ok(r) => r,
                Err(e) if Instant::now() < deadline && e == Error::TIMEDOUT => continue,
                Err(e) => {
                    warn!(
                        "bootstrap: {missing} of {} ranks did not join at {addr} in time",
                        cfg.size - 1
                    );
                    return Err(e);
                }
            };
            // Introductions first: `ready[k + 1]` is pending[k]'s.
            let mut k = 0;
            pending.retain_mut(|h| {
                let me = k;
                k += 1;
                if !ready.get(me + 1).copied().unwrap_or(false) {
                    return true;
                }
                match h.read() {
                    Step::More => true,
                    Step::Gone => {
                        warn!(
                            "bootstrap: {} connected but is not a fi_xpu rank; dropped",
                            h.from
                        );
                        false
                    }
                    Step::Done => {
                        if let Some((rank, s)) = admit(h, cfg, &slots, deadline) {
                            slots[rank - 1] = Some(s);
                            missing -= 1;
                        }
                        false
                    }
                }
            });
            if ready[0] {
                for mut h in accept_new(&listener, &mut pending) {
                    if let Some((rank, s)) = admit(&mut h, cfg, &slots, deadline) {
                        slots[rank - 1] = Some(s);
                        missing -= 1;
                    }
                }
            }
        }
        Ok(slots.into_iter().map(Option::unwrap).collect())
    }

    fn connect(addr: SocketAddr, cfg: &Config, deadline: Instant) -> Result<TcpStream> {
        let mut s = loop {
            match TcpStream::connect_timeout(&addr, remaining(deadline)?) {
                Ok(s) => break s,
                Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                    // Rank 0 is not listening yet.
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    let err = io_error(e);
                    if err != Error::TIMEDOUT {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    return Err(err);
                }
            }
        };
        let _ = s.set_nodelay(true);
        let mut hello = [0u8; 24];
        hello[..8].copy_from_slice(&MAGIC);
        hello[8..12].copy_from_slice(&(cfg.rank as u32).to_le_bytes());
        hello[12..16].copy_from_slice(&(cfg.size as u32).to_le_bytes());
        hello[16..24].copy_from_slice(&key_hash(&cfg.key).to_le_bytes());
        write_all(&mut s, &hello, deadline)?;
        let mut reply = [0u8; 16];
        read_exact(&mut s, &mut reply, deadline)?;
        if reply[..8] != MAGIC {
            warn!("bootstrap: {addr} does not speak the fi_xpu bootstrap protocol");
            return Err(Error::NOMSG);
        }
        let status = i32::from_le_bytes(reply[8..12].try_into().unwrap());
        if status != 0 {
            warn!(
                "bootstrap: rank 0 at {addr} refused rank {}: {}",
                cfg.rank,
                crate::error::strerror(status)
            );
            return Err(Error::from_code(status));
        }
        Ok(s)
    }

    /// Rank 0's side of a collective.
    fn gather(&mut self, mine: &[u8], deadline: Instant) -> Result<Vec<u8>> {
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
    fn contribute(&mut self, mine: &[u8], deadline: Instant) -> Result<Vec<u8>> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::Collectives;

    fn cfg(addr: &str, rank: usize, size: usize, key: &str, ms: u64) -> Config {
        Config {
            addr: addr.into(),
            rank,
            size,
            key: key.into(),
            timeout: Duration::from_millis(ms),
        }
    }

    /// A port free at a loopback address of this call's own (127.x.y.z
    /// from the process id and a counter), so that neither the other
    /// tests of this process nor another run of them can bind it between
    /// this call and rank 0's bind.
    fn free_addr() -> String {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let id = std::process::id().wrapping_mul(2_654_435_761) ^ n.wrapping_mul(40_503);
        let ip = std::net::Ipv4Addr::new(
            127,
            1 + (id % 254) as u8,
            (id >> 8) as u8,
            1 + ((id >> 16) % 254) as u8,
        );
        let l = TcpListener::bind((ip, 0)).unwrap();
        l.local_addr().unwrap().to_string()
    }

    #[test]
    fn four_ranks_gather_broadcast_and_barrier() {
        let addr = free_addr();
        let threads: Vec<_> = (0..4)
            .map(|r| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut b = Tcp::join(&cfg(&addr, r, 4, "k", 20_000)).unwrap();
                    let all = b.allgather(&[r as u8; 3]).unwrap();
                    assert_eq!(all, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
                    let v = b.allgatherv(&vec![7u8; r]).unwrap();
                    assert_eq!(v.iter().map(Vec::len).collect::<Vec<_>>(), [0, 1, 2, 3]);
                    assert_eq!(b.bcast(b"from two", 2).unwrap(), b"from two");
                    b.barrier().unwrap();
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn refusals_of_a_wrong_joiner() {
        let addr = free_addr();
        let a2 = addr.clone();
        let root = std::thread::spawn(move || Tcp::join(&cfg(&a2, 0, 2, "job", 3_000)).map(|_| ()));
        // Another size, another key, rank 0 again: each refused by rank 0,
        // which then times out waiting for the real rank 1.
        assert_eq!(
            Tcp::join(&cfg(&addr, 1, 3, "job", 3_000)).err(),
            Some(Error::INVAL)
        );
        assert_eq!(
            Tcp::join(&cfg(&addr, 1, 2, "other", 3_000)).err(),
            Some(Error::KEYREJECTED)
        );
        assert_eq!(root.join().unwrap(), Err(Error::TIMEDOUT));
        assert_eq!(
            Tcp::join(&cfg(&addr, 2, 2, "job", 100)).err(),
            Some(Error::INVAL)
        );
    }

    #[test]
    fn nobody_listening_times_out() {
        let addr = free_addr();
        assert_eq!(
            Tcp::join(&cfg(&addr, 1, 2, "", 300)).err(),
            Some(Error::TIMEDOUT)
        );
    }

    #[test]
    fn a_peer_that_leaves_fails_everyone_and_stays_failed() {
        let addr = free_addr();
        let threads: Vec<_> = (0..3)
            .map(|r| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut b = Tcp::join(&cfg(&addr, r, 3, "", 20_000)).unwrap();
                    b.barrier().unwrap();
                    if r == 2 {
                        return None; // dropped: its connection closes
                    }
                    let first = b.barrier().err();
                    assert_eq!(b.barrier().err(), first, "failure is sticky");
                    first
                })
            })
            .collect();
        let got: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(got, [Some(Error::CONNRESET), Some(Error::CONNRESET), None]);
    }

    #[test]
    fn mismatched_lengths_fail_every_rank() {
        let addr = free_addr();
        let threads: Vec<_> = (0..2)
            .map(|r| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut b = Tcp::join(&cfg(&addr, r, 2, "", 20_000)).unwrap();
                    b.allgather(&vec![0u8; 4 + r]).err()
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), Some(Error::INVAL));
        }
    }

    #[test]
    fn a_silent_peer_times_out() {
        let addr = free_addr();
        let a2 = addr.clone();
        let quiet = std::thread::spawn(move || {
            let b = Tcp::join(&cfg(&a2, 1, 2, "", 20_000)).unwrap();
            std::thread::sleep(Duration::from_millis(1500));
            drop(b);
        });
        let mut b = Tcp::join(&cfg(&addr, 0, 2, "", 500)).unwrap();
        assert_eq!(b.barrier().err(), Some(Error::TIMEDOUT));
        quiet.join().unwrap();
    }

    /// Strangers that connect and say nothing (more of them than rank 0
    /// holds at once) cost the world no time: the two ranks join well
    /// inside a timeout shorter than one stranger's allowance to speak.
    #[test]
    fn silent_strangers_do_not_stall_the_rendezvous() {
        let addr = free_addr();
        let a0 = addr.clone();
        let timeout = HELLO_WAIT.as_millis() as u64 * 3 / 5;
        let rank0 = std::thread::spawn(move || Tcp::join(&cfg(&a0, 0, 2, "k", timeout)));
        let sock: SocketAddr = addr.parse().unwrap();
        let mut silent = Vec::new();
        while silent.len() < MAX_PENDING + 16 {
            match TcpStream::connect(sock) {
                Ok(s) => silent.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        let mut one = Tcp::join(&cfg(&addr, 1, 2, "k", timeout)).unwrap();
        let mut zero = rank0.join().unwrap().unwrap();
        let t = std::thread::spawn(move || one.allgather(&[1]).unwrap());
        assert_eq!(zero.allgather(&[0]).unwrap(), vec![0, 1]);
        assert_eq!(t.join().unwrap(), vec![0, 1]);
        drop(silent);
    }

    /// A size past what the bootstrap serves is refused before anything is
    /// allocated for it.
    #[test]
    fn too_many_ranks_are_refused_up_front() {
        for size in [MAX_RANKS + 1, i32::MAX as usize] {
            let r = Tcp::join(&cfg("127.0.0.1:0", 0, size, "", 100));
            assert_eq!(r.err(), Some(Error::INVAL), "{size} ranks");
        }
        let r = Tcp::join(&cfg(&free_addr(), 0, MAX_RANKS, "", 100));
        assert_eq!(r.err(), Some(Error::TIMEDOUT), "the largest size is served");
    }
}
