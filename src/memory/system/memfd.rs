//! The memfds of `FI_HMEM_SYSTEM` memory: made sealed to their size, on
//! hugetlb or transparent huge pages where the policy (`FI_XPU_HUGE_PAGES`)
//! and the kernel allow, and the checks of a descriptor another process
//! hands in before it is mapped.
use crate::error::{Error, Result};
use fi_xpu_os::file;
use fi_xpu_os::rustix::fs::{fstat, ftruncate, FileType, MemfdFlags, SealFlags};
use fi_xpu_os::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

pub(super) fn page_size() -> u64 {
    fi_xpu_os::rustix::param::page_size() as u64
}

pub(super) fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Seals every memfd this backend creates carries: its size is fixed for
/// good (a process it is handed to cannot shrink it under another's
/// mapping, which would turn that mapping's accesses into SIGBUS), and no
/// seal can be added later (a peer adding `F_SEAL_FUTURE_WRITE` would keep
/// everyone else from mapping it writable).
pub const MEMFD_SEALS: SealFlags = SealFlags::SHRINK
    .union(SealFlags::GROW)
    .union(SealFlags::SEAL);

/// Allocations and imports from this size on are mapped for huge pages.
pub(super) const HUGE_MIN: u64 = 2 << 20;

/// `FI_XPU_HUGE_PAGES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum HugePages {
    /// hugetlb pages while the pool has them, else transparent huge pages.
    Try,
    /// Only transparent huge pages (`MADV_HUGEPAGE` on 2 MiB-aligned mappings).
    Thp,
    Off,
}

pub(super) fn huge_pages() -> HugePages {
    match crate::param::core(crate::param::HUGE_PAGES).as_deref() {
        None | Some("") | Some("try") => HugePages::Try,
        Some("thp") => HugePages::Thp,
        Some("off") => HugePages::Off,
        Some(other) => {
            crate::warn!("FI_XPU_HUGE_PAGES={other:?} is not try, thp or off; using try");
            HugePages::Try
        }
    }
}

/// An OS error as a libfabric code.
pub(super) fn os(e: Errno) -> Error {
    Error::from_errno(e.raw_os_error())
}

/// A new memfd that can be sealed, of size 0.
pub(super) fn new_memfd(flags: MemfdFlags) -> Result<OwnedFd> {
    file::memfd(c"fi_xpu", MemfdFlags::ALLOW_SEALING | flags).map_err(os)
}

/// Gives a new memfd its size for good (`MEMFD_SEALS`).
pub(super) fn size_and_seal(fd: &OwnedFd, size: u64) -> Result<()> {
    ftruncate(fd, size).map_err(os)?;
    file::add_seals(fd, MEMFD_SEALS).map_err(os)
}

pub(super) fn memfd(size: u64) -> Result<OwnedFd> {
    let fd = new_memfd(MemfdFlags::empty())?;
    size_and_seal(&fd, size)?;
    Ok(fd)
}

/// The page size of the file behind `fd`: the huge page size on
/// hugetlbfs, whose mappings must start and end on it; else the base page.
pub(super) fn granule(fd: &OwnedFd) -> Result<u64> {
    let (kind, block) = file::fs_type(fd).map_err(os)?;
    Ok(if kind == file::HUGETLBFS_MAGIC {
        block.max(page_size())
    } else {
        page_size()
    })
}

/// Checks a descriptor another process may hold too before `[offset,
/// offset + size)` of it is mapped: a regular file, sealed against
/// shrinking, and long enough. The seals are read before the size, so the
/// size checked cannot go down afterwards. Without the seal its owner could
/// `ftruncate` it and every access of ours past the new end would raise
/// SIGBUS; a file that cannot be sealed at all (not shmem) is refused for
/// the same reason. A DMA-BUF is the exception: its exporter fixed its
/// size, so only the range is checked.
pub(super) fn check_shared_fd(fd: BorrowedFd, offset: u64, size: u64) -> Result<()> {
    let st = fstat(fd).map_err(os)?;
    if file::is_dmabuf(fd) {
        // A DMA-BUF's size is fixed by its exporter: nothing to seal.
        return match offset.checked_add(size) {
            Some(end) if end <= st.st_size as u64 => Ok(()),
            _ => Err(Error::INVAL),
        };
    }
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        crate::warn!("import: fd {} is not a regular file", fd.as_raw_fd());
        return Err(Error::INVAL);
    }
    if !file::seals(fd).is_some_and(|s| s.contains(SealFlags::SHRINK)) {
        crate::warn!(
            "import: fd {} is not sealed against shrinking (memfd_create with MFD_ALLOW_SEALING, then F_ADD_SEALS F_SEAL_SHRINK)",
            fd.as_raw_fd()
        );
        return Err(Error::PERM);
    }
    // Read again: the size can only have grown since.
    let st = fstat(fd).map_err(os)?;
    if offset
        .checked_add(size)
        .is_none_or(|end| end > st.st_size as u64)
    {
        return Err(Error::INVAL);
    }
    Ok(())
}
