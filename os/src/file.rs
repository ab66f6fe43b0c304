//! File checks: the file system a descriptor lives on (DMA-BUF,
//! hugetlbfs), its seals and access mode, read-only descriptors, and new
//! sealable memfds.
use rustix::fs::{MemfdFlags, Mode, OFlags, SealFlags};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// `DMA_BUF_MAGIC` of <linux/magic.h>: the file system of DMA-BUF files.
pub const DMA_BUF_MAGIC: i64 = 0x444d_4142;
/// `HUGETLBFS_MAGIC`: where `MFD_HUGETLB` memfds live.
pub const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// The file system of the file behind `fd`: (`f_type`, `f_bsize`).
pub fn fs_type(fd: impl AsFd) -> Result<(i64, u64), rustix::io::Errno> {
    let st = rustix::fs::fstatfs(fd)?;
    #[allow(clippy::unnecessary_cast)]
    Ok((st.f_type as i64, st.f_bsize as u64))
}

/// Whether `fd` is a DMA-BUF (a GPU's or NIC's exported memory): it cannot
/// be sealed, and its exporter fixed its size, so it cannot shrink either.
pub fn is_dmabuf(fd: impl AsFd) -> bool {
    fs_type(fd).is_ok_and(|(t, _)| t == DMA_BUF_MAGIC)
}

/// The seals of `fd`; `None` when it has none to read (not a memfd or
/// shmem file).
pub fn seals(fd: impl AsFd) -> Option<SealFlags> {
    rustix::fs::fcntl_get_seals(fd).ok()
}

/// Adds `seals` to `fd`.
pub fn add_seals(fd: impl AsFd, seals: SealFlags) -> Result<(), rustix::io::Errno> {
    rustix::fs::fcntl_add_seals(fd, seals)
}

/// A second descriptor of the file behind `fd`, opened for reading only
/// (through `/proc/self/fd`): whoever is given it can map the file for
/// reading only. It does not stop a process of the same user from opening
/// the file again for writing the same way; it keeps stray stores out.
/// Fails for files that cannot be opened by path, such as DMA-BUFs.
pub fn reopen_read_only(fd: impl AsFd) -> Result<OwnedFd, rustix::io::Errno> {
    let path = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
    rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty())
}

/// Whether `fd` is open for reading only: no shared writable mapping of it
/// can be made through it.
pub fn read_only_access(fd: impl AsFd) -> bool {
    rustix::fs::fcntl_getfl(fd).is_ok_and(|f| f & OFlags::ACCMODE == OFlags::RDONLY)
}

/// Whether only a read-only shared mapping of `fd` can be made: the file
/// is sealed against writing (`F_SEAL_WRITE`, or `F_SEAL_FUTURE_WRITE` as
/// a process seals memory others may only read), or `fd` is open for
/// reading only (memory a peer lets us read only).
pub fn maps_read_only(fd: impl AsFd) -> bool {
    let fd = fd.as_fd();
    read_only_access(fd)
        || seals(fd).is_some_and(|s| s.intersects(SealFlags::WRITE | SealFlags::FUTURE_WRITE))
}

/// A new close-on-exec memfd of size 0, named `name`, with `flags` added
/// (`ALLOW_SEALING`, `HUGETLB`).
pub fn memfd(name: &std::ffi::CStr, flags: MemfdFlags) -> Result<OwnedFd, rustix::io::Errno> {
    rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memfds_are_not_dmabufs_and_take_seals() {
        let m = memfd(c"t", MemfdFlags::ALLOW_SEALING).unwrap();
        assert!(!is_dmabuf(&m));
        assert_ne!(fs_type(&m).unwrap().0, DMA_BUF_MAGIC);
        assert_eq!(seals(&m), Some(SealFlags::empty()));
        add_seals(&m, SealFlags::SHRINK).unwrap();
        assert_eq!(seals(&m), Some(SealFlags::SHRINK));
        let plain = memfd(c"t", MemfdFlags::empty()).unwrap();
        assert_eq!(seals(&plain), Some(SealFlags::SEAL));
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        assert_eq!(seals(&f), None);
        assert!(!is_dmabuf(&f));
    }

    #[test]
    fn a_read_only_descriptor_cannot_write() {
        let m = memfd(c"t", MemfdFlags::ALLOW_SEALING).unwrap();
        rustix::fs::ftruncate(&m, 4096).unwrap();
        assert!(!read_only_access(&m));
        let ro = reopen_read_only(&m).unwrap();
        assert!(read_only_access(&ro));
        assert!(maps_read_only(&ro) && !maps_read_only(&m));
        assert_eq!(rustix::io::write(&ro, b"x"), Err(rustix::io::Errno::BADF));
        assert_eq!(
            rustix::fs::fstat(&ro).unwrap().st_ino,
            rustix::fs::fstat(&m).unwrap().st_ino
        );
    }
}
