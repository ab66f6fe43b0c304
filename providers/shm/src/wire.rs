//! Control messages between domains: fixed-size records over a Unix
//! SOCK_SEQPACKET socket in the abstract namespace, with at most one file
//! descriptor attached (SCM_RIGHTS). Never on the data path.
use fi_xpu_abi::errno::*;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

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

fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(FI_EIO)
}

/// Sends one record, with `fd` attached when given.
pub fn send(sock: RawFd, m: &Msg, fd: Option<RawFd>) -> Result<(), i32> {
    let bytes = m.encode();
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // u64 storage keeps the control buffer aligned for cmsghdr.
    let mut cbuf = [0u64; 8];
    // SAFETY: zeroed msghdr is a valid "no name, no control" header.
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        h.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
        h.msg_controllen = space;
        // SAFETY: the control buffer is large and aligned enough for one
        // cmsghdr carrying one int, as CMSG_SPACE computed.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&h);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, fd);
        }
    }
    // SAFETY: h points to live buffers for the duration of the call.
    let n = unsafe { libc::sendmsg(sock, &h, libc::MSG_NOSIGNAL) };
    if n != bytes.len() as isize {
        return Err(if n < 0 { errno() } else { FI_EIO });
    }
    Ok(())
}

/// Receives one record and the descriptor attached to it, if any.
/// `Ok(None)`: the peer closed the connection.
pub fn recv(sock: RawFd) -> Result<Option<(Msg, Option<OwnedFd>)>, i32> {
    recv_flags(sock, 0)
}

/// `recv` that never waits: `Err(EAGAIN)` when no record is there. The
/// control thread reads only what poll reported, and never blocks on a peer.
pub fn recv_nowait(sock: RawFd) -> Result<Option<(Msg, Option<OwnedFd>)>, i32> {
    recv_flags(sock, libc::MSG_DONTWAIT)
}

fn recv_flags(sock: RawFd, flags: libc::c_int) -> Result<Option<(Msg, Option<OwnedFd>)>, i32> {
    let mut bytes = [0u8; WIRE_LEN + 8];
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = [0u64; 8];
    // SAFETY: zeroed msghdr, then pointed at our buffers.
    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
    h.msg_iov = &mut iov;
    h.msg_iovlen = 1;
    h.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    h.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: buffers live for the call; MSG_CMSG_CLOEXEC keeps received fds
    // out of exec'd children.
    let n = unsafe { libc::recvmsg(sock, &mut h, libc::MSG_CMSG_CLOEXEC | flags) };
    if n < 0 {
        return Err(errno());
    }
    let mut got: Option<OwnedFd> = None;
    // SAFETY: walking the control messages the kernel wrote into cbuf.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const RawFd;
                let nfds = ((*c).cmsg_len - libc::CMSG_LEN(0) as usize) / 4;
                for i in 0..nfds {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    // Keep the first; extra ones are closed when dropped.
                    if got.is_none() {
                        got = Some(fd);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&h, c);
        }
    }
    if n == 0 {
        return Ok(None);
    }
    if h.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(FI_EIO);
    }
    match Msg::decode(&bytes[..n as usize]) {
        Some(m) => Ok(Some((m, got))),
        None => Err(FI_EIO),
    }
}

/// The uid of the process at the other end of `sock`.
pub fn peer_uid(sock: &OwnedFd) -> Result<u32, i32> {
    // SAFETY: zeroed ucred is valid; getsockopt writes at most `len` bytes.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: as above.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(errno());
    }
    Ok(cred.uid)
}

/// An abstract-namespace address for `name`.
fn sockaddr(name: &str) -> (libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: zeroed sockaddr_un is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = name.as_bytes();
    let n = b.len().min(a.sun_path.len() - 1);
    for (i, &c) in b[..n].iter().enumerate() {
        a.sun_path[i + 1] = c as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + n;
    (a, len as libc::socklen_t)
}

fn socket() -> Result<OwnedFd, i32> {
    // SAFETY: plain socket creation.
    let s = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if s < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(s) })
}

/// A listening socket whose `accept` never waits (`EAGAIN` when nobody is
/// queued): the control thread accepts what poll reported and moves on.
pub fn listen(name: &str) -> Result<OwnedFd, i32> {
    let s = socket()?;
    // SAFETY: setting a status flag on our own socket.
    if unsafe { libc::fcntl(s.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
        return Err(errno());
    }
    let (a, len) = sockaddr(name);
    // SAFETY: a is a valid sockaddr_un of `len` bytes.
    if unsafe { libc::bind(s.as_raw_fd(), &a as *const _ as *const libc::sockaddr, len) } != 0 {
        return Err(errno());
    }
    // SAFETY: listening on our socket.
    if unsafe { libc::listen(s.as_raw_fd(), 64) } != 0 {
        return Err(errno());
    }
    Ok(s)
}

pub fn connect(name: &str) -> Result<OwnedFd, i32> {
    let s = socket()?;
    let (a, len) = sockaddr(name);
    // SAFETY: a is a valid sockaddr_un of `len` bytes.
    if unsafe { libc::connect(s.as_raw_fd(), &a as *const _ as *const libc::sockaddr, len) } != 0 {
        return Err(errno());
    }
    Ok(s)
}

pub fn accept(listener: &OwnedFd) -> Result<OwnedFd, i32> {
    // SAFETY: accept on our listening socket without a peer address.
    let s = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC,
        )
    };
    if s < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(s) })
}

/// Bounds blocking reads during a handshake, so a silent peer cannot stall us.
pub fn set_timeout(sock: &OwnedFd, secs: i64) {
    let tv = libc::timeval {
        tv_sec: secs,
        tv_usec: 0,
    };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: setting a timeval option on our socket.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &tv as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
    }
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
}
