//! The control thread of a domain: it accepts connections, runs the server
//! side of their handshakes and serves the control messages of established
//! connections, all from one `poll`.
//!
//! Nothing here blocks on a peer. A handshake is a small state machine
//! advanced one record at a time when its socket is readable, so a
//! connection that never says HELLO (or stops half way) costs one
//! descriptor until its deadline, never a stall of the others: a
//! legitimate peer's `fi_xpu_av_insert` completes while hundreds of silent
//! connections are open. At most `MAX_HANDSHAKES` wait at once; past that
//! the oldest one that has not authenticated yet is dropped.
use crate::core;
use crate::domain::{ct_eq, Inner};
use crate::wire::{self, Msg};
use fi_xpu_prov_sdk::Error;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// How long a connection may take from accept to the end of its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes under way at once.
const MAX_HANDSHAKES: usize = 256;
/// Connections accepted per round, so that established peers are served
/// between bursts.
const ACCEPTS_PER_ROUND: usize = 64;

enum Stage {
    /// Accepted; waiting for HELLO. The socket is still ours.
    Hello(OwnedFd),
    /// Authenticated: connection `cid` of generation `gen` owns the socket;
    /// waiting for the peer's regions and DONE.
    Regions { cid: u32, gen: u64 },
}

struct Handshake {
    stage: Stage,
    raw: RawFd,
    deadline: Instant,
}

impl Inner {
    /// The control thread's loop; returns when the domain closes.
    pub(crate) fn control_loop(&self) {
        let mut hs: Vec<Handshake> = Vec::new();
        loop {
            let mut fds = vec![
                pollin(self.wake.as_raw_fd()),
                pollin(self.listener.as_raw_fd()),
            ];
            let mut ids = Vec::new();
            {
                let mut st = self.lock();
                if st.stop {
                    return;
                }
                // No snapshot of the last round is in use any more.
                st.retired_socks.clear();
                for (cid, c) in st.conns.iter() {
                    if let (true, Some(s)) = (c.ready, &c.sock) {
                        fds.push(pollin(s.as_raw_fd()));
                        ids.push((*cid, c.gen));
                    }
                }
            }
            let first_hs = fds.len();
            fds.extend(hs.iter().map(|h| pollin(h.raw)));
            let now = Instant::now();
            let wait = hs
                .iter()
                .map(|h| h.deadline.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(1));
            // SAFETY: fds is a live array of pollfd of the given length.
            let n = unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    wait.as_millis() as i32 + 1,
                )
            };
            if n < 0 {
                continue;
            }
            if fds[0].revents != 0 {
                fi_xpu_os::wake::drain(&self.wake);
            }
            // Departures first, so that their ids are free for newcomers.
            for (i, (cid, gen)) in ids.iter().enumerate() {
                let ev = fds[i + 2].revents;
                if ev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                    self.handle(*cid, *gen, fds[i + 2].fd);
                }
            }
            let now = Instant::now();
            let mut keep = Vec::with_capacity(hs.len());
            for (h, p) in hs.into_iter().zip(&fds[first_hs..]) {
                let h = if p.revents != 0 {
                    self.handshake_step(h)
                } else {
                    Some(h)
                };
                match h {
                    Some(h) if now >= h.deadline => self.handshake_drop(h, "timed out"),
                    Some(h) => keep.push(h),
                    None => {}
                }
            }
            hs = keep;
            if fds[1].revents & libc::POLLIN != 0 {
                self.accept_new(&mut hs);
            }
        }
    }

    /// Accepts what waits on the listener (a bounded number per round).
    fn accept_new(&self, hs: &mut Vec<Handshake>) {
        let me = fi_xpu_os::rustix::process::getuid().as_raw();
        for _ in 0..ACCEPTS_PER_ROUND {
            let Ok(sock) = wire::accept(&self.listener) else {
                return;
            };
            match wire::peer_uid(&sock) {
                Ok(uid) if uid == me => {}
                Ok(uid) => {
                    core::warn(&format!(
                        "refused a connection from uid {uid} (this process runs as uid {me})"
                    ));
                    refuse(sock.as_raw_fd(), Error::ACCES);
                    continue;
                }
                Err(_) => continue,
            }
            // Sends are rare and small; a peer that stops reading cannot
            // hold them up for longer than this.
            wire::set_timeout(&sock, HANDSHAKE_TIMEOUT.as_secs() as i64);
            if hs.len() >= MAX_HANDSHAKES {
                if let Some(i) = hs.iter().position(|h| matches!(h.stage, Stage::Hello(_))) {
                    let h = hs.remove(i);
                    self.handshake_drop(h, "dropped: too many handshakes under way");
                } else {
                    refuse(sock.as_raw_fd(), Error::AGAIN);
                    continue;
                }
            }
            hs.push(Handshake {
                raw: sock.as_raw_fd(),
                stage: Stage::Hello(sock),
                deadline: Instant::now() + HANDSHAKE_TIMEOUT,
            });
        }
    }

    /// Reads one record of a handshake whose socket poll found ready and
    /// acts on it. `None`: the handshake ended (done or failed).
    fn handshake_step(&self, h: Handshake) -> Option<Handshake> {
        let m = match wire::recv_nowait(h.raw) {
            Err(e) if e == Error::AGAIN || e == Error::INTR => return Some(h),
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => {
                self.handshake_drop(h, "closed by the peer");
                return None;
            }
        };
        match (h.stage, m) {
            (Stage::Hello(sock), (m, _)) if m.kind == wire::HELLO => {
                if !ct_eq(&m.secret, &self.secret) {
                    core::warn("refused a connection that did not present this endpoint's secret");
                    refuse(h.raw, Error::ACCES);
                    return None;
                }
                let raw = h.raw;
                if let Err(e) = wire::peer_pid(&sock) {
                    refuse(raw, e);
                    return None;
                }
                let (cid, gen, key) = {
                    let mut st = self.lock();
                    match Self::new_conn(&mut st, sock, false) {
                        Ok(cid) => {
                            let c = st.conns.get_mut(&cid).unwrap();
                            c.remote_nonce = m.a;
                            let r = (cid, c.gen, c.rx_key);
                            // The nonce it claims stands if we reached it.
                            Self::attest(&st);
                            r
                        }
                        Err(e) => {
                            // The socket went with the failed call; the
                            // peer sees it close.
                            core::warn(&format!("cannot take a new connection: {e}"));
                            return None;
                        }
                    }
                };
                // The key it stamps what it sends us with: for this
                // connection alone, over this socket alone.
                let mut welcome = Msg::new(wire::WELCOME, cid as u64, self.nonce, gen);
                welcome.secret[0..8].copy_from_slice(&key[0].to_le_bytes());
                welcome.secret[8..16].copy_from_slice(&key[1].to_le_bytes());
                if wire::send(raw, &welcome, None).is_err() {
                    self.conn_lost(cid, gen);
                    return None;
                }
                Some(Handshake {
                    stage: Stage::Regions { cid, gen },
                    raw,
                    deadline: h.deadline,
                })
            }
            (Stage::Regions { cid, gen }, (m, fd)) => {
                let mut st = self.lock();
                // Lost meanwhile (the domain is closing): nothing to finish.
                Self::live_conn(&mut st, cid, gen)?;
                match (m.kind, fd) {
                    (wire::REGION, Some(fd)) => {
                        Self::peer_region(&mut st, cid, gen, m.a, fd, m.c, m.b);
                        Some(Handshake {
                            stage: Stage::Regions { cid, gen },
                            raw: h.raw,
                            deadline: h.deadline,
                        })
                    }
                    (wire::DONE, _) => {
                        if Self::send_regions(&st, h.raw).is_err() {
                            drop(st);
                            self.conn_lost(cid, gen);
                            return None;
                        }
                        if let Some(c) = Self::live_conn(&mut st, cid, gen) {
                            c.ready = true;
                            c.announced = true;
                        }
                        None
                    }
                    _ => {
                        drop(st);
                        core::warn("a peer broke the handshake protocol; connection closed");
                        self.conn_lost(cid, gen);
                        None
                    }
                }
            }
            (Stage::Hello(_), _) => {
                core::warn("a connection sent something other than HELLO first; closed");
                None
            }
        }
    }

    fn handshake_drop(&self, h: Handshake, why: &str) {
        match h.stage {
            Stage::Hello(_) => core::debug(&format!("unauthenticated connection {why}")),
            Stage::Regions { cid, gen } => {
                core::warn(&format!("handshake of connection {cid} {why}"));
                self.conn_lost(cid, gen);
            }
        }
    }

    /// Handles what poll reported on socket `raw` of generation `gen` of
    /// connection `cid`. By now the peer may have been found gone and its
    /// id given to another one (by a handshake in this round, or by a
    /// `connect` on another thread): the event is then stale and ignored.
    fn handle(&self, cid: u32, gen: u64, raw: RawFd) {
        {
            let mut st = self.lock();
            let owned = Self::live_conn(&mut st, cid, gen)
                .is_some_and(|c| c.sock.as_ref().map(|s| s.as_raw_fd()) == Some(raw));
            if !owned {
                return;
            }
        }
        // The socket stays open until the next round even if the connection
        // is lost meanwhile (retired_socks), so this reads the right one.
        match wire::recv_nowait(raw) {
            Ok(Some((m, fd))) => match (m.kind, fd) {
                (wire::REGION, Some(fd)) => {
                    let mut st = self.lock();
                    Self::peer_region(&mut st, cid, gen, m.a, fd, m.c, m.b);
                    let _ = wire::send(raw, &Msg::new(wire::ACK, m.a, 0, 0), None);
                }
                (wire::REMOVE, _) => {
                    let mut st = self.lock();
                    Self::peer_remove(&mut st, cid, gen, m.a as u32);
                }
                (wire::ACK, _) => {
                    let mut st = self.lock();
                    if let Some(c) = Self::live_conn(&mut st, cid, gen) {
                        c.acked += 1;
                    }
                    drop(st);
                    self.cv.notify_all();
                }
                _ => core::warn("ignored a malformed control message from a peer"),
            },
            Ok(None) => self.conn_lost(cid, gen),
            Err(e) if e == Error::AGAIN || e == Error::INTR => {}
            Err(_) => self.conn_lost(cid, gen),
        }
    }
}

fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Tells a peer why its connection is refused (the positive error number).
fn refuse(raw: RawFd, why: Error) {
    let _ = wire::send(raw, &Msg::new(wire::REFUSE, why.errno() as u64, 0, 0), None);
}
