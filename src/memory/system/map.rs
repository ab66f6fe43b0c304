//! Mappings of `FI_HMEM_SYSTEM` memory: a file mapped at an address, at
//! an aligned address inside a reservation of ours, and what a
//! reservation gives back around it; hugetlb and transparent huge page
//! placements.
use super::memfd::*;
use crate::error::Result;
use fi_xpu_os::rustix::fs::MemfdFlags;
use fi_xpu_os::rustix::mm::{self, Advice, MapFlags, ProtFlags};
use std::ffi::c_void;
use std::os::fd::OwnedFd;

/// Maps `len` bytes of `fd` from `offset` (page-aligned) at `at` (0:
/// anywhere) with protection `prot`.
pub(super) fn map_prot(
    fd: &OwnedFd,
    at: usize,
    len: usize,
    offset: u64,
    prot: ProtFlags,
) -> Result<usize> {
    let flags = if at != 0 {
        MapFlags::SHARED | MapFlags::FIXED
    } else {
        MapFlags::SHARED
    };
    // SAFETY: mapping a file we hold; with MAP_FIXED, `at` lies inside a
    // reservation this module made and owns.
    let p = unsafe { mm::mmap(at as *mut c_void, len, prot, flags, fd, offset) }.map_err(os)?;
    Ok(p as usize)
}

/// Maps `len` bytes of `fd` from `offset` at a multiple of `align`.
pub(super) fn map_aligned(fd: &OwnedFd, len: usize, offset: u64, align: u64) -> Result<usize> {
    map_aligned_prot(fd, len, offset, align, ProtFlags::READ | ProtFlags::WRITE)
}

/// `map_aligned` with the protection `prot`.
pub(super) fn map_aligned_prot(
    fd: &OwnedFd,
    len: usize,
    offset: u64,
    align: u64,
    prot: ProtFlags,
) -> Result<usize> {
    if align <= page_size() {
        return map_prot(fd, 0, len, offset, prot);
    }
    // Reserve room to slide to the alignment, map there, give back the rest.
    let total = len + align as usize;
    let r = reserve(total)?;
    let addr = round_up(r as u64, align) as usize;
    let mapped = map_prot(fd, addr, len, offset, prot);
    trim_reservation(r, total, addr, len, mapped.is_ok());
    mapped
}

/// Reserves `total` bytes of address space (an anonymous `PROT_NONE`
/// mapping of our own).
pub(super) fn reserve(total: usize) -> Result<usize> {
    // SAFETY: a new anonymous mapping, placed by the kernel.
    let r = unsafe {
        mm::mmap_anonymous(
            std::ptr::null_mut(),
            total,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }
    .map_err(os)?;
    Ok(r as usize)
}

/// Gives back what a reservation `[r, r + total)` holds around the
/// `len` bytes at `addr` that were mapped over it with `MAP_FIXED`. When
/// that mapping failed, `[addr, addr + len)` is left alone: the kernel
/// may have unmapped the reservation there before failing (a hugetlb file
/// whose pool is short does), and another thread may have mapped memory
/// there since, which an unmap of ours would take away from it. That
/// range then stays reserved or is someone else's: address space only,
/// on a path that should not happen.
pub(super) fn trim_reservation(r: usize, total: usize, addr: usize, len: usize, mapped: bool) {
    if addr > r {
        unmap(r, addr - r);
    }
    let end = addr + len;
    if r + total > end {
        unmap(end, r + total - end);
    }
    if !mapped {
        crate::warn!("mapping {len:#x} bytes into a reservation failed; its range stays reserved");
    }
}

pub(super) fn unmap(base: usize, len: usize) {
    // SAFETY: only called on mappings this module created and no longer hands out.
    let _ = unsafe { mm::munmap(base as *mut c_void, len) };
}

/// A memfd of at least `size` bytes backed by hugetlb pages, mapped at a
/// multiple of `alignment`: (fd, address, length). None when the kernel
/// has no such pages to give (no pool, or not enough free: the mapping
/// reserves them, so a short pool fails here and never faults later).
///
/// The file is mapped where the kernel chooses, which for hugetlb is a
/// multiple of the huge page size, never into a reservation of ours: a
/// hugetlb `mmap` fails when the pool is short, and a failed `MAP_FIXED`
/// mapping leaves its range unmapped, free for another thread's next
/// mapping (see `map_aligned_prot`). An alignment above the huge page size
/// that the kernel's choice misses falls back to ordinary pages.
pub(super) fn hugetlb_alloc(size: u64, alignment: u64) -> Option<(OwnedFd, usize, u64)> {
    let fd = new_memfd(MemfdFlags::HUGETLB).ok()?;
    let huge = granule(&fd).ok()?;
    let len = round_up(size, huge);
    size_and_seal(&fd, len).ok()?;
    let addr = map_prot(&fd, 0, len as usize, 0, ProtFlags::READ | ProtFlags::WRITE).ok()?;
    if !(addr as u64).is_multiple_of(alignment.max(1)) {
        unmap(addr, len as usize);
        return None;
    }
    Some((fd, addr, len))
}

/// Asks for transparent huge pages on a shared mapping. The kernel uses
/// them only where it allows them for shared memory
/// (/sys/kernel/mm/transparent_hugepage/shmem_enabled `advise` or more),
/// and only for 2 MiB-aligned stretches of 2 MiB-aligned file offsets,
/// which is why such mappings are placed at 2 MiB multiples.
pub(super) fn advise_huge(addr: usize, len: usize) {
    // SAFETY: a hint on a mapping this module just created; it changes no
    // contents, and its failure (no THP in this kernel) is harmless.
    let _ = unsafe { mm::madvise(addr as *mut c_void, len, Advice::LinuxHugepage) };
}
