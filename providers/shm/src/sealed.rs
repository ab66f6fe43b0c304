//! Descriptors of memory shared between domains are sealed against
//! shrinking: a process that maps a file another process can `ftruncate`
//! takes SIGBUS on its next access past the new end. The core's built-in
//! memory seals what it allocates and checks what it imports; these checks
//! hold whichever memory backend the context uses (application callbacks
//! included), on both sides of the connection.
//!
//! A device memory handle (a CUDA VMM allocation's POSIX file descriptor)
//! is neither a regular file nor a DMA-BUF: it cannot be resized, has no
//! size to check, and only a device context's backend maps it (the driver
//! refuses a range past the allocation).
use fi_xpu_os::file::{add_seals, is_dmabuf, seals};
use fi_xpu_os::rustix::fs::{fstat, FileType, SealFlags};
use fi_xpu_prov_sdk::{Error, Result};
use std::os::fd::BorrowedFd;

/// Seals `fd` against shrinking and growing before it is offered to peers,
/// unless it is already; `Err` when it cannot be sealed (peers would
/// refuse it).
pub fn seal(fd: BorrowedFd) -> Result<()> {
    if is_dmabuf(fd) || is_device_handle(fd) {
        return Ok(());
    }
    let want = SealFlags::SHRINK | SealFlags::GROW;
    match seals(fd) {
        Some(have) if have.contains(want) => Ok(()),
        Some(_) if add_seals(fd, want).is_ok() => Ok(()),
        _ => Err(Error::PERM),
    }
}

/// Whether `fd` is a device memory handle: neither a regular file nor a
/// DMA-BUF (see the module's comment).
pub fn is_device_handle(fd: BorrowedFd) -> bool {
    !is_dmabuf(fd)
        && fstat(fd).is_ok_and(|st| FileType::from_raw_mode(st.st_mode) != FileType::RegularFile)
}

/// Checks a peer's descriptor before `[offset, offset + size)` of it is
/// mapped: a regular file, sealed against shrinking (-FI_EPERM otherwise),
/// or a DMA-BUF (fixed size), at least `offset + size` long without
/// wrapping (-FI_EINVAL otherwise).
/// The seals are read first, so the size cannot go down after its check.
pub fn check(fd: BorrowedFd, offset: u64, size: u64) -> Result<()> {
    let dmabuf = is_dmabuf(fd);
    let sealed = seals(fd).is_some_and(|s| s.contains(SealFlags::SHRINK));
    if !dmabuf && !sealed {
        return Err(Error::PERM);
    }
    let st = fstat(fd).map_err(|_| Error::INVAL)?;
    if !dmabuf && FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Error::INVAL);
    }
    match offset.checked_add(size) {
        Some(end) if size > 0 && end <= st.st_size as u64 => Ok(()),
        _ => Err(Error::INVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fi_xpu_os::rustix::fs::{ftruncate, MemfdFlags};
    use std::os::fd::{AsFd, OwnedFd};

    fn memfd(flags: MemfdFlags, size: u64) -> OwnedFd {
        let fd = fi_xpu_os::file::memfd(c"t", flags).unwrap();
        ftruncate(&fd, size).unwrap();
        fd
    }

    #[test]
    fn unsealable_fds_are_refused() {
        let plain = memfd(MemfdFlags::empty(), 8192);
        assert_eq!(seal(plain.as_fd()), Err(Error::PERM));
        assert_eq!(check(plain.as_fd(), 0, 4096), Err(Error::PERM));
        let f: OwnedFd = std::fs::File::open("/proc/self/exe").unwrap().into();
        assert_eq!(check(f.as_fd(), 0, 64), Err(Error::PERM));
    }

    #[test]
    fn device_handles_need_no_seal_and_fail_the_file_check() {
        let dev: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        assert!(is_device_handle(dev.as_fd()));
        assert_eq!(seal(dev.as_fd()), Ok(()));
        // Mapped only into device contexts, never by the file check.
        assert_eq!(check(dev.as_fd(), 0, 64), Err(Error::PERM));
        let m = memfd(MemfdFlags::ALLOW_SEALING, 8192);
        assert!(!is_device_handle(m.as_fd()));
    }

    #[test]
    fn sealed_fds_are_checked_for_size() {
        let m = memfd(MemfdFlags::ALLOW_SEALING, 8192);
        assert_eq!(check(m.as_fd(), 0, 4096), Err(Error::PERM));
        seal(m.as_fd()).unwrap();
        seal(m.as_fd()).unwrap();
        // Resizing is refused once sealed.
        assert!(ftruncate(&m, 0).is_err());
        assert_eq!(check(m.as_fd(), 0, 8192), Ok(()));
        assert_eq!(check(m.as_fd(), 4096, 4097), Err(Error::INVAL));
        assert_eq!(check(m.as_fd(), u64::MAX, 2), Err(Error::INVAL));
        assert_eq!(check(m.as_fd(), 0, 0), Err(Error::INVAL));
    }
}
