//! Control messages between domains: fixed-size records over a Unix
//! SOCK_SEQPACKET socket in the abstract namespace, with at most one file
//! descriptor attached (SCM_RIGHTS). Never on the data path.
use fi_xpu_os::seqpacket;
use fi_xpu_prov_sdk::{Error, Result};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

pub const HELLO: u32 = 1;
pub const WELCOME: u32 = 2;
pub const REFUSE: u32 = 3;
pub const REGION: u32 = 4;
pub const REMOVE: u32 = 5;
pub const DONE: u32 = 6;
pub const ACK: u32 = 7;

const MAGIC: u32 = 0x4658_5348;

/// One control record. Field meaning depends on `kind` (see domain.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Msg {
    pub kind: u32,
    pub a: u64,
    pub b: u64,
    pub c: u64,
    pub secret: [u8; 16],
}

const WIRE_LEN: usize = 48;

impl Msg {
    pub fn new(kind: u32, a: u64, b: u64, c: u64) -> Msg {
        Msg {
            kind,
            a,
            b,
            c,
            secret: [0; 16],
        }
    }

    pub(crate) fn encode(&self) -> [u8; WIRE_LEN] {
        let mut o = [0u8; WIRE_LEN];
        o[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        o[4..8].copy_from_slice(&self.kind.to_le_bytes());
        o[8..16].copy_from_slice(&self.a.to_le_bytes());
        o[16..24].copy_from_slice(&self.b.to_le_bytes());
        o[24..32].copy_from_slice(&self.c.to_le_bytes());
        o[32..48].copy_from_slice(&self.secret);
        o
    }

    /// Parses bytes from another process; anything malformed is `None`.
    pub fn decode(b: &[u8]) -> Option<Msg> {
        if b.len() != WIRE_LEN || u32::from_le_bytes(b[0..4].try_into().ok()?) != MAGIC {
            return None;
        }
        let u = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap());
        let kind = u32::from_le_bytes(b[4..8].try_into().ok()?);
        if !(HELLO..=ACK).contains(&kind) {
            return None;
        }
        let mut secret = [0u8; 16];
        secret.copy_from_slice(&b[32..48]);
        Some(Msg {
            kind,
            a: u(8..16),
            b: u(16..24),
            c: u(24..32),
            secret,
        })
    }
}

/// The caller's descriptor, for the length of one call.
fn borrow<'a>(sock: RawFd) -> BorrowedFd<'a> {
    // SAFETY: every caller holds `sock` open (owned by a connection under
    // the state lock, or retired but kept until the next round) across the
    // call this borrow is for.
    unsafe { BorrowedFd::borrow_raw(sock) }
}

/// Sends one record, with `fd` attached when given.
pub fn send(sock: RawFd, m: &Msg, fd: Option<RawFd>) -> Result<()> {
    let bytes = m.encode();
    match seqpacket::send(borrow(sock), &bytes, fd.map(borrow)) {
        Ok(n) if n == bytes.len() => Ok(()),
        Ok(_) => Err(Error::IO),
        Err(e) => Err(Error::from_errno(e.raw_os_error())),
    }
}

/// Receives one record and the descriptor attached to it, if any.
/// `Ok(None)`: the peer closed the connection.
pub fn recv(sock: RawFd) -> Result<Option<(Msg, Option<OwnedFd>)>> {
    recv_flags(sock, false)
}

/// `recv` that never waits: `Err(EAGAIN)` when no record is there. The
/// control thread reads only what poll reported, and never blocks on a peer.
pub fn recv_nowait(sock: RawFd) -> Result<Option<(Msg, Option<OwnedFd>)>> {
    recv_flags(sock, true)
}

fn recv_flags(sock: RawFd, nowait: bool) -> Result<Option<(Msg, Option<OwnedFd>)>> {
    let mut bytes = [0u8; WIRE_LEN + 8];
    let r = seqpacket::recv(borrow(sock), &mut bytes, nowait)
        .map_err(|e| Error::from_errno(e.raw_os_error()))?;
    if r.len == 0 {
        return Ok(None);
    }
    if r.truncated {
        return Err(Error::IO);
    }
    match Msg::decode(&bytes[..r.len]) {
        Some(m) => Ok(Some((m, r.fd))),
        None => Err(Error::IO),
    }
}

/// `SO_PEERCRED` of `sock`, in the kernel's own layout: the pid is 0 when
/// the peer runs in a pid namespace this process cannot name (another
/// container's, or its parent's).
fn peercred(sock: &OwnedFd) -> Result<libc::ucred> {
    let mut c = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` is a writable ucred of `len` bytes, what SO_PEERCRED
    // writes; the descriptor is live for the call.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(Error::from_errno(
            std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
        ));
    }
    Ok(c)
}

/// The uid of the process at the other end of `sock`.
pub fn peer_uid(sock: &OwnedFd) -> Result<u32> {
    Ok(peercred(sock)?.uid)
}

/// The uid and pid of the process at the other end of `sock`, as the
/// kernel saw it connect (`SO_PEERCRED`; the pid as this process's pid
/// namespace names it, 0 for a peer in a pid namespace it cannot name).
pub fn peer_cred(sock: &OwnedFd) -> Result<(u32, i32)> {
    let c = peercred(sock)?;
    Ok((c.uid, c.pid))
}

/// The pid of the peer of `sock`, or `-FI_EOPNOTSUPP` and a log line when
/// the peer runs in a pid namespace this process cannot name: shm ties a
/// peer's connections together by pid (a message's source is attested
/// that way), which such a peer does not have here.
pub fn peer_pid(sock: &OwnedFd) -> Result<i32> {
    let pid = peer_cred(sock)?.1;
    if pid == 0 {
        crate::core::warn(
            "the peer runs in another pid namespace (the kernel gives it no pid here): shm \
             cannot tell its connections apart from another process's and refuses it; \
             processes in separate pid namespaces communicate over the ofi provider",
        );
        return Err(Error::OPNOTSUPP);
    }
    Ok(pid)
}

/// A listening socket whose `accept` never waits (`EAGAIN` when nobody is
/// queued): the control thread accepts what poll reported and moves on.
pub fn listen(name: &str) -> Result<OwnedFd> {
    seqpacket::listen(name).map_err(|e| Error::from_errno(e.raw_os_error()))
}

pub fn connect(name: &str) -> Result<OwnedFd> {
    seqpacket::connect(name).map_err(|e| Error::from_errno(e.raw_os_error()))
}

pub fn accept(listener: &OwnedFd) -> Result<OwnedFd> {
    seqpacket::accept(listener).map_err(|e| Error::from_errno(e.raw_os_error()))
}

/// Bounds blocking reads during a handshake, so a silent peer cannot stall us.
pub fn set_timeout(sock: &OwnedFd, secs: i64) {
    seqpacket::set_timeout(sock, secs.max(0) as u64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let mut m = Msg::new(REGION, 1, 2, 3);
        m.secret = [7; 16];
        assert_eq!(Msg::decode(&m.encode()), Some(m));
        let mut bad = m.encode();
        bad[0] ^= 1;
        assert_eq!(Msg::decode(&bad), None);
        let mut bad = m.encode();
        bad[4] = 99;
        assert_eq!(Msg::decode(&bad), None);
        assert_eq!(Msg::decode(&m.encode()[..40]), None);
    }

    #[test]
    fn peer_credentials_of_a_process_in_this_namespace() {
        let n = format!("fi_xpu_shm_wire_test.{}", std::process::id());
        let l = listen(&n).unwrap();
        let c = connect(&n).unwrap();
        let s = accept(&l).unwrap();
        let me = fi_xpu_os::rustix::process::getuid().as_raw();
        assert_eq!(peer_uid(&s).unwrap(), me);
        assert_eq!(peer_uid(&c).unwrap(), me);
        assert_eq!(peer_pid(&s).unwrap(), std::process::id() as i32);
        assert_eq!(peer_cred(&c).unwrap(), (me, std::process::id() as i32));
    }
}
