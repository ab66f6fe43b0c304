//! eventfd wake-ups: one thread pokes, the waiting thread polls the
//! descriptor and drains it.
use rustix::event::EventfdFlags;
use std::os::fd::{AsFd, OwnedFd};

/// A close-on-exec, non-blocking eventfd at 0.
pub fn eventfd() -> Result<OwnedFd, rustix::io::Errno> {
    rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
}

/// Adds one to the counter (wakes a poller). A full counter already wakes
/// it, so a failure needs no handling.
pub fn poke(fd: impl AsFd) {
    let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
}

/// Reads the counter back to 0 (nothing when it is 0 already).
pub fn drain(fd: impl AsFd) {
    let mut v = [0u8; 8];
    let _ = rustix::io::read(fd, &mut v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::event::Timespec;
    use rustix::event::{poll, PollFd, PollFlags};

    fn ready(fd: &OwnedFd) -> bool {
        let mut p = [PollFd::new(fd, PollFlags::IN)];
        poll(&mut p, Some(&Timespec::default())).unwrap() == 1
    }

    #[test]
    fn poke_wakes_and_drain_resets() {
        let w = eventfd().unwrap();
        assert!(!ready(&w));
        poke(&w);
        poke(&w);
        assert!(ready(&w));
        drain(&w);
        assert!(!ready(&w));
        drain(&w);
    }
}
