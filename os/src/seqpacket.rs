//! Unix `SOCK_SEQPACKET` sockets in the abstract namespace that carry one
//! record at a time, with at most one file descriptor attached
//! (`SCM_RIGHTS`), and the uid of the process at the other end
//! (`SO_PEERCRED`).
use rustix::fs::OFlags;
use rustix::io::Errno;
use rustix::net::{
    sockopt, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags,
    SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags, SocketType,
};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// Control space for one descriptor (the kernel's `CMSG_SPACE(sizeof(int))`,
/// with room to spare for a peer that sends more).
const CONTROL: usize = 64;

/// An abstract-namespace address for `name` (cut to what fits).
fn address(name: &str) -> Result<SocketAddrUnix, Errno> {
    let b = name.as_bytes();
    SocketAddrUnix::new_abstract_name(&b[..b.len().min(107)])
}

fn socket() -> Result<OwnedFd, Errno> {
    rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
}

/// A listening socket whose `accept` never waits (`EAGAIN` when nobody is
/// queued).
pub fn listen(name: &str) -> Result<OwnedFd, Errno> {
    let s = socket()?;
    rustix::fs::fcntl_setfl(&s, OFlags::NONBLOCK)?;
    rustix::net::bind(&s, &address(name)?)?;
    rustix::net::listen(&s, 64)?;
    Ok(s)
}

pub fn connect(name: &str) -> Result<OwnedFd, Errno> {
    let s = socket()?;
    rustix::net::connect(&s, &address(name)?)?;
    Ok(s)
}

/// Accepts one queued connection (close-on-exec).
pub fn accept(listener: impl AsFd) -> Result<OwnedFd, Errno> {
    rustix::net::accept_with(listener, SocketFlags::CLOEXEC)
}

/// Sends `bytes` as one record, with `fd` attached when given; returns the
/// bytes sent. Never raises SIGPIPE.
pub fn send(sock: impl AsFd, bytes: &[u8], fd: Option<BorrowedFd>) -> Result<usize, Errno> {
    let mut space = [MaybeUninit::<u8>::uninit(); CONTROL];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds;
    if let Some(fd) = fd {
        fds = [fd];
        control.push(SendAncillaryMessage::ScmRights(&fds));
    }
    rustix::net::sendmsg(
        sock,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )
}

/// One received record.
#[derive(Debug)]
pub struct Received {
    /// Bytes of the record (0: the peer closed the connection).
    pub len: usize,
    /// The first descriptor attached (close-on-exec); others are closed.
    pub fd: Option<OwnedFd>,
    /// The record or its control data did not fit.
    pub truncated: bool,
}

/// Receives one record into `buf`; with `nowait`, `EAGAIN` when none is
/// there.
pub fn recv(sock: impl AsFd, buf: &mut [u8], nowait: bool) -> Result<Received, Errno> {
    let mut space = [MaybeUninit::<u8>::uninit(); CONTROL];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut flags = RecvFlags::CMSG_CLOEXEC;
    if nowait {
        flags |= RecvFlags::DONTWAIT;
    }
    let r = rustix::net::recvmsg(sock, &mut [IoSliceMut::new(buf)], &mut control, flags)?;
    let mut fd = None;
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = m {
            for f in fds {
                // Keep the first; extra ones are closed when dropped.
                fd.get_or_insert(f);
            }
        }
    }
    Ok(Received {
        len: r.bytes,
        fd,
        truncated: r.flags.intersects(ReturnFlags::TRUNC | ReturnFlags::CTRUNC),
    })
}

// No `SO_PEERCRED` here: rustix's `UCred` holds the pid as a non-zero type,
// and the kernel reports pid 0 for a peer in a pid namespace this process
// cannot name (undefined behaviour to construct). Callers read it with
// `getsockopt` into the kernel's own layout (the shm provider's `wire`).

/// Bounds blocking sends and receives on `sock` to `secs` seconds.
pub fn set_timeout(sock: impl AsFd, secs: u64) {
    let t = Some(Duration::from_secs(secs));
    let _ = sockopt::set_socket_timeout(&sock, sockopt::Timeout::Recv, t);
    let _ = sockopt::set_socket_timeout(&sock, sockopt::Timeout::Send, t);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    fn name() -> String {
        format!(
            "fi_xpu_os_test.{}.{:?}",
            std::process::id(),
            std::thread::current().id()
        )
    }

    #[test]
    fn records_carry_one_descriptor() {
        let n = name();
        let l = listen(&n).unwrap();
        assert_eq!(accept(&l).unwrap_err(), Errno::AGAIN);
        let c = connect(&n).unwrap();
        let s = accept(&l).unwrap();
        set_timeout(&s, 5);
        let mut buf = [0u8; 16];
        assert_eq!(recv(&s, &mut buf, true).unwrap_err(), Errno::AGAIN);

        let mut f: std::fs::File = crate::file::memfd(c"t", rustix::fs::MemfdFlags::empty())
            .unwrap()
            .into();
        f.write_all(b"hello").unwrap();
        assert_eq!(send(&c, b"abc", Some(f.as_fd())).unwrap(), 3);
        let r = recv(&s, &mut buf, false).unwrap();
        assert_eq!((r.len, r.truncated), (3, false));
        assert_eq!(&buf[..3], b"abc");
        let mut g: std::fs::File = r.fd.unwrap().into();
        let mut text = String::new();
        g.rewind().unwrap();
        g.read_to_string(&mut text).unwrap();
        assert_eq!(text, "hello");

        assert_eq!(send(&c, &[7u8; 32], None).unwrap(), 32);
        let r = recv(&s, &mut buf, false).unwrap();
        assert!(r.truncated && r.fd.is_none());

        drop(c);
        assert_eq!(recv(&s, &mut buf, false).unwrap().len, 0);
    }
}
