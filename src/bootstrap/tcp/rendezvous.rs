//! The rendezvous of the TCP bootstrap: rank 0 listens and admits every
//! other rank after its introduction, introductions side by side; the
//! others connect and introduce themselves.
use super::{io_error, key_hash, read_exact, remaining, u64_at, write_all};
use super::{Config, Tcp, HELLO_WAIT, MAGIC};
use crate::error::{Error, Result};
use crate::warn;
use fi_xpu_abi::errno::*;
use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Most connections rank 0 holds at once that have not yet introduced
/// themselves.
pub(super) const MAX_PENDING: usize = 64;

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
    /// Rank 0 waits for every other rank. Introductions proceed side by
    /// side: each connection not yet introduced holds 24 bytes and a
    /// descriptor, at most `MAX_PENDING` of them (the oldest is dropped for
    /// a newcomer), and each is dropped `HELLO_WAIT` after it connected. A
    /// stranger therefore costs the world one of those places, never time.
    pub(super) fn accept_all(
        addr: SocketAddr,
        cfg: &Config,
        deadline: Instant,
    ) -> Result<Vec<TcpStream>> {
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

    pub(super) fn connect(addr: SocketAddr, cfg: &Config, deadline: Instant) -> Result<TcpStream> {
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
}
