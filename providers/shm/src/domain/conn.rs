//! Connections to peer domains: attestation, the handshake, connect,
//! loss.
use super::addr::{ct_eq, random_bytes, Addr};
use super::region::{stale, REGION_IPC};
use super::state::{Conn, ConnRef, Inner, State};
use crate::core;
use crate::layout::*;
use crate::wire::{self, Msg};
use fi_xpu_prov_sdk::{Error, Result};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

impl Inner {
    /// The lowest connection id that is free or held by a departed peer.
    fn free_conn_id(st: &State) -> Option<u32> {
        (0..MAX_CONNS as u32).find(|i| st.conns.get(i).is_none_or(|c| c.sock.is_none()))
    }

    /// Connection `cid` when it is still generation `gen` and connected.
    pub(crate) fn live_conn(st: &mut State, cid: u32, gen: u64) -> Option<&mut Conn> {
        st.conns
            .get_mut(&cid)
            .filter(|c| c.gen == gen && c.sock.is_some())
    }

    /// Marks established connections whose peer hung up as lost, without
    /// waiting for the control loop to notice, so that their ids can be
    /// reused at once. Any thread may call this: the sockets are retired,
    /// not closed, and the control loop checks the generation of every
    /// connection it acts on. Connections still in their handshake are
    /// left to the thread running it. Returns whether any was lost.
    fn reap(st: &mut State) -> bool {
        let mut fds: Vec<(u32, u64, libc::pollfd)> = st
            .conns
            .iter()
            .filter(|(_, c)| c.ready)
            .filter_map(|(cid, c)| {
                c.sock.as_ref().map(|s| {
                    (
                        *cid,
                        c.gen,
                        libc::pollfd {
                            fd: s.as_raw_fd(),
                            events: 0,
                            revents: 0,
                        },
                    )
                })
            })
            .collect();
        let mut lost = false;
        for (cid, gen, p) in fds.iter_mut() {
            // SAFETY: polling one live descriptor (owned by the connection,
            // under the state lock) without waiting.
            let n = unsafe { libc::poll(p, 1, 0) };
            if n == 1 && p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                lost |= Self::mark_lost(st, *cid, *gen);
            }
        }
        lost
    }

    pub(crate) fn new_conn(st: &mut State, sock: OwnedFd, client: bool) -> Result<u32> {
        Self::reap(st);
        let pid = wire::peer_pid(&sock)?;
        let mut k = [0u8; 16];
        random_bytes(&mut k)?;
        let rx_key = [
            u64::from_le_bytes(k[0..8].try_into().unwrap()),
            u64::from_le_bytes(k[8..16].try_into().unwrap()),
        ];
        let Some(cid) = Self::free_conn_id(st) else {
            core::warn(&format!(
                "connection limit ({MAX_CONNS} live connections per domain) reached"
            ));
            return Err(Error::NOSPC);
        };
        // A departed peer's id is reused: its imports were retired when it
        // left (mark_lost); its maps are cleared and reused (add_map).
        if let Some(old) = st.conns.remove(&cid) {
            for ((ctx_id, _), d) in old.imports {
                if let Some(c) = st.ctxs.get_mut(&ctx_id) {
                    c.retired_imports.push(d);
                }
            }
        }
        let gen = st.next_conn_gen;
        st.next_conn_gen += 1;
        st.conns
            .insert(cid, Conn::new(sock, client, gen, rx_key, pid));
        let ctxs: Vec<u64> = st.ctxs.keys().copied().collect();
        for id in ctxs {
            Self::add_map(st, id, cid)?;
        }
        Ok(cid)
    }

    pub(crate) fn send_regions(st: &State, sock: RawFd) -> Result<()> {
        for (id, r) in st.regions.iter() {
            let a = *id as u64 | if r.ipc { REGION_IPC } else { 0 };
            wire::send(
                sock,
                &Msg::new(wire::REGION, a, r.size, r.offset),
                Some(r.fd.as_raw_fd()),
            )?;
        }
        wire::send(sock, &Msg::new(wire::DONE, 0, 0, 0), None)
    }

    /// Reads REGION records until DONE during a handshake.
    fn recv_regions(&self, cid: u32, gen: u64, sock: RawFd) -> Result<()> {
        loop {
            match wire::recv(sock)? {
                None => return Err(Error::CONNRESET),
                Some((m, _)) if m.kind == wire::DONE => return Ok(()),
                Some((m, Some(fd))) if m.kind == wire::REGION => {
                    let mut st = self.lock();
                    Self::peer_region(&mut st, cid, gen, m.a, fd, m.c, m.b);
                }
                Some(_) => return Err(Error::IO),
            }
        }
    }

    /// Connects to the domain that owns `addr`, or reuses a live connection
    /// to it.
    pub fn connect(&self, addr: &Addr) -> Result<ConnRef> {
        if !ct_eq(&addr.boot_id, &self.boot_id) {
            core::warn(&format!(
                "address of pid {} is on another node (boot id differs); shm reaches peers on this node only",
                addr.pid
            ));
            return Err(Error::HOSTUNREACH);
        }
        {
            let st = self.lock();
            if let Some((cid, c)) = st.conns.iter().find(|(_, c)| {
                c.client && c.ready && c.sock.is_some() && c.remote_nonce == addr.nonce
            }) {
                // The peer checked the secret once, on connecting; an address
                // reusing the connection must carry the same one.
                if !ct_eq(&c.secret, &addr.secret) {
                    core::warn(&format!(
                        "address of pid {} carries the wrong secret; refused",
                        addr.pid
                    ));
                    return Err(Error::ACCES);
                }
                return Ok(ConnRef {
                    cid: *cid,
                    gen: c.gen,
                    at_peer: c.at_peer,
                    at_peer_gen: c.at_peer_gen,
                    tx_key: c.tx_key,
                });
            }
        }
        let sock = wire::connect(&addr.socket_name()).map_err(|e| {
            core::warn(&format!(
                "cannot reach pid {} (errno {e}): the peer endpoint is gone",
                addr.pid
            ));
            Error::CONNREFUSED
        })?;
        wire::set_timeout(&sock, 10);
        let me = fi_xpu_os::rustix::process::getuid().as_raw();
        let uid = wire::peer_uid(&sock)?;
        if uid != me {
            core::warn(&format!(
                "refusing peer pid {}: it runs as uid {uid}, this process as uid {me}",
                addr.pid
            ));
            return Err(Error::ACCES);
        }
        wire::peer_pid(&sock)?;
        let mut hello = Msg::new(wire::HELLO, self.nonce, 0, 0);
        hello.secret = addr.secret;
        wire::send(sock.as_raw_fd(), &hello, None)?;
        let welcome = match wire::recv(sock.as_raw_fd())? {
            Some((m, _)) if m.kind == wire::WELCOME => m,
            Some((m, _)) if m.kind == wire::REFUSE => {
                let code = Error::new((m.a as i32).clamp(1, 4096));
                core::warn(&format!(
                    "peer pid {} refused the connection: {code}",
                    addr.pid
                ));
                return Err(code);
            }
            _ => return Err(Error::CONNRESET),
        };
        if welcome.b != addr.nonce {
            return Err(Error::INVAL);
        }
        let raw = sock.as_raw_fd();
        let (cid, gen) = {
            let mut st = self.lock();
            let cid = Self::new_conn(&mut st, sock, true)?;
            let c = st.conns.get_mut(&cid).unwrap();
            c.remote_nonce = addr.nonce;
            c.at_peer = welcome.a;
            c.at_peer_gen = welcome.c;
            c.secret = addr.secret;
            c.tx_key = [
                u64::from_le_bytes(welcome.secret[0..8].try_into().unwrap()),
                u64::from_le_bytes(welcome.secret[8..16].try_into().unwrap()),
            ];
            let gen = c.gen;
            // Claims of the nonce we just reached can now be checked.
            Self::attest(&st);
            if let Err(e) = Self::send_regions(&st, raw) {
                Self::mark_lost(&mut st, cid, gen);
                drop(st);
                self.poke();
                return Err(e);
            }
            // From here on what this domain shares goes to the peer too:
            // it follows the snapshot on the socket.
            st.conns.get_mut(&cid).unwrap().announced = true;
            (cid, gen)
        };
        // Sockets of peers that new_conn found gone wait for the control
        // thread to close them.
        self.poke();
        if let Err(e) = self.recv_regions(cid, gen, raw) {
            self.conn_lost(cid, gen);
            return Err(e);
        }
        let mut st = self.lock();
        let Some(c) = Self::live_conn(&mut st, cid, gen) else {
            return Err(Error::CONNRESET);
        };
        c.ready = true;
        let r = ConnRef {
            cid,
            gen: c.gen,
            at_peer: c.at_peer,
            at_peer_gen: c.at_peer_gen,
            tx_key: c.tx_key,
        };
        drop(st);
        self.poke();
        Ok(r)
    }

    /// The peer closed its socket or died: device operations on it fail from
    /// now on, and its memory is released (`retire_imports`).
    pub(crate) fn conn_lost(&self, cid: u32, gen: u64) {
        let mut st = self.lock();
        Self::mark_lost(&mut st, cid, gen);
        drop(st);
        self.cv.notify_all();
        self.poke();
    }

    /// Marks generation `gen` of connection `cid` lost; a later generation
    /// (another peer that took the id since) is left alone. Returns whether
    /// it was live.
    fn mark_lost(st: &mut State, cid: u32, gen: u64) -> bool {
        let Some(sock) = Self::live_conn(st, cid, gen).and_then(|c| {
            c.regions.clear();
            c.sock.take()
        }) else {
            return false;
        };
        st.retired_socks.push(sock);
        let maps: Vec<usize> = st
            .ctxs
            .values()
            .filter_map(|c| c.maps.get(&cid).copied())
            .collect();
        for m in maps {
            stale(m, true);
        }
        Self::retire_imports(st, cid);
        Self::attest(st);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(client: bool, nonce: u64, pid: i32) -> Conn {
        let (a, _) = std::os::unix::net::UnixStream::pair().unwrap();
        Conn {
            ready: true,
            announced: true,
            remote_nonce: nonce,
            ..Conn::new(a.into(), client, 1, [1, 2], pid)
        }
    }

    /// A peer names its own nonce on connecting; the claim stands only
    /// for the process this domain reached under that nonce itself.
    #[test]
    fn a_claimed_nonce_stands_only_for_the_process_we_reached() {
        let mut st = State::default();
        st.conns.insert(0, conn(false, 0xa, 100)); // A, as it says
        assert_eq!(Inner::attested_nonce(&st, 0), 0, "not reached yet");
        st.conns.insert(1, conn(true, 0xa, 100)); // we reached A: pid 100
        st.conns.insert(2, conn(false, 0xa, 200)); // another claiming A
        assert_eq!(Inner::attested_nonce(&st, 0), 0xa);
        assert_eq!(Inner::attested_nonce(&st, 2), 0, "pid 200 is not A");
        assert_eq!(Inner::attested_nonce(&st, 1), 0, "our own client side");
        st.conns.get_mut(&1).unwrap().sock = None; // A's listener side gone
        assert_eq!(Inner::attested_nonce(&st, 0), 0);
        assert_eq!(Inner::attested_nonce(&st, 9), 0, "no such connection");
    }
}
