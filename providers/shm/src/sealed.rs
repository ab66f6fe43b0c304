//! Descriptors of memory shared between domains are sealed against
//! shrinking: a process that maps a file another process can `ftruncate`
//! takes SIGBUS on its next access past the new end. The core's built-in
//! memory seals what it allocates and checks what it imports; these checks
//! hold whichever memory backend the context uses (application callbacks
//! included), on both sides of the connection.
use fi_xpu_abi::errno::*;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Seals `fd` against shrinking and growing before it is offered to peers,
/// unless it is already; `Err` when it cannot be sealed (peers would
/// refuse it).
pub fn seal(fd: BorrowedFd) -> Result<(), i32> {
    if is_dmabuf(fd) {
        return Ok(());
    }
    let want = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
    // SAFETY: F_GET_SEALS only reads the file's seals.
    let have = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if have >= 0 && have & want == want {
        return Ok(());
    }
    // SAFETY: adds seals to a file this process shares; fails cleanly
    // when the file does not allow it.
    if have < 0 || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, want) } != 0 {
        return Err(-FI_EPERM);
    }
    Ok(())
}

/// Checks a peer's descriptor before `[offset, offset + size)` of it is
/// mapped: a regular file, sealed against shrinking (-FI_EPERM otherwise),
/// or a DMA-BUF (fixed size), at least `offset + size` long without
/// wrapping (-FI_EINVAL otherwise).
/// The seals are read first, so the size cannot go down after its check.
pub fn check(fd: BorrowedFd, offset: u64, size: u64) -> Result<(), i32> {
    let dmabuf = is_dmabuf(fd);
    // SAFETY: F_GET_SEALS only reads the file's seals.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    if !dmabuf && (seals < 0 || seals & libc::F_SEAL_SHRINK == 0) {
        return Err(-FI_EPERM);
    }
    // SAFETY: fstat into a zeroed struct of a descriptor we hold.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0
        || (!dmabuf && st.st_mode & libc::S_IFMT != libc::S_IFREG)
    {
        return Err(-FI_EINVAL);
    }
    match offset.checked_add(size) {
        Some(end) if size > 0 && end <= st.st_size as u64 => Ok(()),
        _ => Err(-FI_EINVAL),
    }
}

/// `DMA_BUF_MAGIC` of <linux/magic.h>: the file system of DMA-BUF files.
const DMA_BUF_MAGIC: i64 = 0x444d_4142;

/// Whether `fd` is a DMA-BUF (a GPU's or NIC's exported memory): it cannot
/// be sealed, and its exporter fixed its size, so it cannot shrink either.
fn is_dmabuf(fd: BorrowedFd) -> bool {
    // SAFETY: fstatfs into a zeroed struct on a descriptor we hold.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::fstatfs(fd.as_raw_fd(), &mut fs) == 0 && fs.f_type as i64 == DMA_BUF_MAGIC }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, FromRawFd, OwnedFd};

    fn memfd(flags: libc::c_uint, size: i64) -> OwnedFd {
        // SAFETY: a valid name and flags; the descriptor is owned below.
        let fd = unsafe { libc::memfd_create(c"t".as_ptr(), libc::MFD_CLOEXEC | flags) };
        assert!(fd >= 0);
        // SAFETY: a new descriptor, sized here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), size) }, 0);
        fd
    }

    #[test]
    fn unsealable_fds_are_refused() {
        let plain = memfd(0, 8192);
        assert_eq!(seal(plain.as_fd()), Err(-FI_EPERM));
        assert_eq!(check(plain.as_fd(), 0, 4096), Err(-FI_EPERM));
        let f: OwnedFd = std::fs::File::open("/proc/self/exe").unwrap().into();
        assert_eq!(check(f.as_fd(), 0, 64), Err(-FI_EPERM));
    }

    #[test]
    fn sealed_fds_are_checked_for_size() {
        let m = memfd(libc::MFD_ALLOW_SEALING, 8192);
        assert_eq!(check(m.as_fd(), 0, 4096), Err(-FI_EPERM));
        seal(m.as_fd()).unwrap();
        seal(m.as_fd()).unwrap();
        // SAFETY: resizing our own memfd: refused once sealed.
        assert_eq!(unsafe { libc::ftruncate(m.as_raw_fd(), 0) }, -1);
        assert_eq!(check(m.as_fd(), 0, 8192), Ok(()));
        assert_eq!(check(m.as_fd(), 4096, 4097), Err(-FI_EINVAL));
        assert_eq!(check(m.as_fd(), u64::MAX, 2), Err(-FI_EINVAL));
        assert_eq!(check(m.as_fd(), 0, 0), Err(-FI_EINVAL));
    }
}
