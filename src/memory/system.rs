//! `FI_HMEM_SYSTEM` memory: every allocation is a memfd mapping, so it can be
//! handed to another process as a file descriptor; an import with an fd maps
//! that fd, and an import of a host address is the address itself.
use super::{Allocation, Backend, Import};
use crate::error::{Error, Result};
use fi_xpu_os::file;
use fi_xpu_os::rustix::fs::{fstat, ftruncate, FileType, MemfdFlags, SealFlags};
use fi_xpu_os::rustix::mm::{self, Advice, MapFlags, ProtFlags};
use fi_xpu_os::Errno;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;

struct Region {
    /// Start and length of what must be unmapped.
    base: usize,
    len: usize,
    fd: OwnedFd,
    /// Bytes of the memfd mapped at the allocation's address.
    size: u64,
}

/// An import of a file descriptor, mapped by this module.
struct Mapped {
    /// Start and length of the mapping.
    base: usize,
    len: usize,
    /// For an application's import, the file and the offset in it of
    /// `base`, so that the import can be exported again (registered with a
    /// provider that shares memory by fd). Providers' imports of peers'
    /// memory keep no fd: there may be many.
    fd: Option<OwnedFd>,
    file_offset: u64,
}

#[derive(Default)]
pub struct System {
    allocs: Mutex<HashMap<usize, Region>>,
    /// Mapped imports by device address.
    mapped: Mutex<HashMap<usize, Mapped>>,
    /// The huge-page policy when not `FI_XPU_HUGE_PAGES`'s (tests).
    huge: Option<HugePages>,
    /// Address ranges of retired imports, mapped to private zero pages
    /// until the context closes.
    placeholders: Mutex<VecDeque<(usize, usize)>>,
}

impl System {
    fn huge_pages(&self) -> HugePages {
        self.huge.unwrap_or_else(huge_pages)
    }
}

fn page_size() -> u64 {
    fi_xpu_os::rustix::param::page_size() as u64
}

fn round_up(v: u64, to: u64) -> u64 {
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
/// Retired imports whose address range stays reserved (`System::retire`).
const RETIRED_KEPT: usize = 1024;
/// Allocations and imports from this size on are mapped for huge pages.
const HUGE_MIN: u64 = 2 << 20;

/// `FI_XPU_HUGE_PAGES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HugePages {
    /// hugetlb pages while the pool has them, else transparent huge pages.
    Try,
    /// Only transparent huge pages (`MADV_HUGEPAGE` on 2 MiB-aligned mappings).
    Thp,
    Off,
}

fn huge_pages() -> HugePages {
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
fn os(e: Errno) -> Error {
    Error::from_errno(e.raw_os_error())
}

/// A new memfd that can be sealed, of size 0.
fn new_memfd(flags: MemfdFlags) -> Result<OwnedFd> {
    file::memfd(c"fi_xpu", MemfdFlags::ALLOW_SEALING | flags).map_err(os)
}

/// Gives a new memfd its size for good (`MEMFD_SEALS`).
fn size_and_seal(fd: &OwnedFd, size: u64) -> Result<()> {
    ftruncate(fd, size).map_err(os)?;
    file::add_seals(fd, MEMFD_SEALS).map_err(os)
}

fn memfd(size: u64) -> Result<OwnedFd> {
    let fd = new_memfd(MemfdFlags::empty())?;
    size_and_seal(&fd, size)?;
    Ok(fd)
}

/// The page size of the file behind `fd`: the huge page size on
/// hugetlbfs, whose mappings must start and end on it; else the base page.
fn granule(fd: &OwnedFd) -> Result<u64> {
    let (kind, block) = file::fs_type(fd).map_err(os)?;
    Ok(if kind == file::HUGETLBFS_MAGIC {
        block.max(page_size())
    } else {
        page_size()
    })
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
fn hugetlb_alloc(size: u64, alignment: u64) -> Option<(OwnedFd, usize, u64)> {
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
fn advise_huge(addr: usize, len: usize) {
    // SAFETY: a hint on a mapping this module just created; it changes no
    // contents, and its failure (no THP in this kernel) is harmless.
    let _ = unsafe { mm::madvise(addr as *mut c_void, len, Advice::LinuxHugepage) };
}

/// Checks a descriptor another process may hold too before `[offset,
/// offset + size)` of it is mapped: a regular file, sealed against
/// shrinking, and long enough. The seals are read before the size, so the
/// size checked cannot go down afterwards. Without the seal its owner could
/// `ftruncate` it and every access of ours past the new end would raise
/// SIGBUS; a file that cannot be sealed at all (not shmem) is refused for
/// the same reason. A DMA-BUF is the exception: its exporter fixed its
/// size, so only the range is checked.
fn check_shared_fd(fd: BorrowedFd, offset: u64, size: u64) -> Result<()> {
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

/// Maps `len` bytes of `fd` from `offset` (page-aligned) at `at` (0:
/// anywhere) with protection `prot`.
fn map_prot(fd: &OwnedFd, at: usize, len: usize, offset: u64, prot: ProtFlags) -> Result<usize> {
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
fn map_aligned(fd: &OwnedFd, len: usize, offset: u64, align: u64) -> Result<usize> {
    map_aligned_prot(fd, len, offset, align, ProtFlags::READ | ProtFlags::WRITE)
}

/// `map_aligned` with the protection `prot`.
fn map_aligned_prot(
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
    // SAFETY: an anonymous PROT_NONE reservation that we own.
    let r = unsafe {
        mm::mmap_anonymous(
            std::ptr::null_mut(),
            total,
            ProtFlags::empty(),
            MapFlags::PRIVATE | MapFlags::NORESERVE,
        )
    }
    .map_err(os)?;
    let r = r as usize;
    let addr = round_up(r as u64, align) as usize;
    let mapped = map_prot(fd, addr, len, offset, prot);
    trim_reservation(r, total, addr, len, mapped.is_ok());
    mapped
}

/// Gives back what a reservation `[r, r + total)` holds around the
/// `len` bytes at `addr` that were mapped over it with `MAP_FIXED`. When
/// that mapping failed, `[addr, addr + len)` is left alone: the kernel
/// may have unmapped the reservation there before failing (a hugetlb file
/// whose pool is short does), and another thread may have mapped memory
/// there since, which an unmap of ours would take away from it. That
/// range then stays reserved or is someone else's: address space only,
/// on a path that should not happen.
fn trim_reservation(r: usize, total: usize, addr: usize, len: usize, mapped: bool) {
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

fn unmap(base: usize, len: usize) {
    // SAFETY: only called on mappings this module created and no longer hands out.
    let _ = unsafe { mm::munmap(base as *mut c_void, len) };
}

impl Backend for System {
    fn alloc(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        let page = page_size();
        let huge = if size >= HUGE_MIN {
            self.huge_pages()
        } else {
            HugePages::Off
        };
        let tlb = if huge == HugePages::Try {
            hugetlb_alloc(size, alignment)
        } else {
            None
        };
        let (fd, addr, len) = match tlb {
            Some(t) => t,
            None => {
                let len = round_up(size, page);
                let fd = memfd(len)?;
                let align = if huge == HugePages::Off {
                    alignment
                } else {
                    alignment.max(HUGE_MIN)
                };
                let addr = map_aligned(&fd, len as usize, 0, align)?;
                if huge != HugePages::Off {
                    advise_huge(addr, len as usize);
                }
                (fd, addr, len)
            }
        };
        let (base, total) = (addr, len as usize);
        let export = if flags & fi_xpu_abi::FI_XPU_ALLOC_DMABUF != 0 {
            match fd.as_fd().try_clone_to_owned() {
                Ok(f) => Some(f),
                Err(e) => {
                    unmap(base, total);
                    return Err(e.into());
                }
            }
        } else {
            None
        };
        self.allocs.lock().unwrap().insert(
            addr,
            Region {
                base,
                len: total,
                fd,
                size: len,
            },
        );
        Ok(Allocation {
            addr,
            fd: export,
            offset: 0,
        })
    }

    fn free(&self, addr: usize) -> Result<()> {
        let r = self
            .allocs
            .lock()
            .unwrap()
            .remove(&addr)
            .ok_or(Error::INVAL)?;
        unmap(r.base, r.len);
        Ok(())
    }

    fn import(&self, req: &Import) -> Result<usize> {
        let Some(fd) = req.fd else {
            // Host memory is already addressable by host work items (and a
            // BAR mapped into this process is too).
            return Ok(req.host_addr);
        };
        check_shared_fd(fd, req.offset, req.size)?;
        let owned = fd.try_clone_to_owned()?;
        // A hugetlb file maps only in whole huge pages.
        let page = granule(&owned)?;
        let start = req.offset / page * page;
        let delta = (req.offset - start) as usize;
        let len = (round_up(req.offset + req.size, page) - start) as usize;
        // Large imports of ordinary memfds are placed like allocations, so
        // that the kernel may back them with transparent huge pages.
        let thp = page == page_size()
            && len as u64 >= HUGE_MIN
            && start.is_multiple_of(HUGE_MIN)
            && self.huge_pages() != HugePages::Off;
        // Memory its owner sealed against writing is imported read-only:
        // a store into it faults, as the owner meant.
        let prot = if file::maps_read_only(fd) {
            ProtFlags::READ
        } else {
            ProtFlags::READ | ProtFlags::WRITE
        };
        let align = if thp { HUGE_MIN } else { page };
        let base = map_aligned_prot(&owned, len, start, align, prot)?;
        if thp {
            advise_huge(base, len);
        }
        let dev = base + delta;
        let owned = req.exportable.then_some(owned);
        self.mapped.lock().unwrap().insert(
            dev,
            Mapped {
                base,
                len,
                fd: owned,
                file_offset: start,
            },
        );
        Ok(dev)
    }

    fn unimport(&self, dev_addr: usize, mapped: bool) -> Result<()> {
        if !mapped {
            // A host import maps nothing, even at an address a mapped
            // import returned.
            return Ok(());
        }
        if let Some(m) = self.mapped.lock().unwrap().remove(&dev_addr) {
            unmap(m.base, m.len);
        }
        Ok(())
    }

    /// Replaces the shared mapping by private anonymous pages of the same
    /// range in one `mmap(MAP_FIXED)`: there is no moment at which the
    /// range is unmapped, so a device access already under way reads zeros
    /// or writes into a page nobody reads, and never faults or lands in
    /// memory mapped there later. The shared pages go at once;
    /// `MAP_NORESERVE` zero pages cost no memory until touched. Only the
    /// address range stays reserved: nothing bounds how long a device
    /// operation may hold an address (a preempted kernel), so it is handed
    /// back only after `RETIRED_KEPT` later retirements (each range is a
    /// mapping of its own, and a process has some 65,000: a peer that
    /// registers and deregisters memory forever must not use them up), or
    /// when the context closes.
    fn retire(&self, dev_addr: usize) -> Result<()> {
        let mut mapped = self.mapped.lock().unwrap();
        let Some((base, len)) = mapped.get(&dev_addr).map(|m| (m.base, m.len)) else {
            // A host address: not ours to release.
            return Ok(());
        };
        // SAFETY: [base, base+len) is a mapping this module made for the
        // import; MAP_FIXED replaces exactly that range.
        let p = unsafe {
            mm::mmap_anonymous(
                base as *mut c_void,
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::NORESERVE,
            )
        };
        if let Err(e) = p {
            // The failed mapping may have unmapped the range already, and
            // another thread may map there next: forget it rather than
            // unmap it later (see `trim_reservation`).
            mapped.remove(&dev_addr);
            return Err(os(e));
        }
        mapped.remove(&dev_addr);
        let mut kept = self.placeholders.lock().unwrap();
        kept.push_back((base, len));
        if kept.len() > RETIRED_KEPT {
            let (b, l) = kept.pop_front().expect("over the bound");
            unmap(b, l);
        }
        Ok(())
    }

    fn export(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        let inside = |start: usize, len: u64| {
            addr >= start
                && ((addr - start) as u64)
                    .checked_add(size)
                    .is_some_and(|e| e <= len)
        };
        if let Some((start, region)) = self
            .allocs
            .lock()
            .unwrap()
            .iter()
            .find(|(start, r)| inside(**start, r.size))
        {
            return Ok((
                region.fd.as_fd().try_clone_to_owned()?,
                (addr - start) as u64,
            ));
        }
        if let Some(m) = self
            .mapped
            .lock()
            .unwrap()
            .values()
            .find(|m| m.fd.is_some() && inside(m.base, m.len as u64))
        {
            let fd = m.fd.as_ref().expect("filtered above");
            return Ok((
                fd.as_fd().try_clone_to_owned()?,
                m.file_offset + (addr - m.base) as u64,
            ));
        }
        crate::warn!(
            "export: [{addr:#x}, +{size}) is not inside memory allocated or imported by this context"
        );
        Err(Error::OPNOTSUPP)
    }
}

impl Drop for System {
    fn drop(&mut self) {
        for (_, r) in self.allocs.lock().unwrap().drain() {
            unmap(r.base, r.len);
        }
        for (_, m) in self.mapped.lock().unwrap().drain() {
            unmap(m.base, m.len);
        }
        for (base, len) in self.placeholders.lock().unwrap().drain(..) {
            unmap(base, len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fi_xpu_abi::FI_XPU_ALLOC_DMABUF;

    fn import(sys: &System, fd: &OwnedFd, offset: u64, size: u64) -> Result<usize> {
        sys.import(&Import {
            host_addr: 0,
            fd: Some(fd.as_fd()),
            offset,
            size,
            flags: fi_xpu_abi::FI_XPU_IMPORT_DMABUF,
            exportable: false,
        })
    }

    fn raw_memfd(flags: MemfdFlags, size: u64) -> OwnedFd {
        let fd = file::memfd(c"test", flags).unwrap();
        ftruncate(&fd, size).unwrap();
        fd
    }

    fn seals(fd: &OwnedFd) -> SealFlags {
        file::seals(fd).unwrap()
    }

    #[test]
    fn exported_memfds_are_sealed() {
        let sys = System::default();
        let a = sys
            .alloc(10000, 0, fi_xpu_abi::FI_XPU_ALLOC_DMABUF)
            .unwrap();
        let fd = a.fd.unwrap();
        assert_eq!(seals(&fd), MEMFD_SEALS);
        // Resizing and further seals are refused.
        assert_eq!(ftruncate(&fd, 0), Err(Errno::PERM));
        assert!(ftruncate(&fd, 1 << 20).is_err());
        assert!(file::add_seals(&fd, SealFlags::WRITE).is_err());
        let (efd, _) = sys.export(a.addr, 16).unwrap();
        assert_eq!(seals(&efd), MEMFD_SEALS);
        sys.free(a.addr).unwrap();
    }

    /// Whether `[addr, addr + len)` has no mapping: a mapping that must
    /// not replace anything can be made there.
    fn unmapped(addr: usize, len: usize) -> bool {
        // SAFETY: MAP_FIXED_NOREPLACE never replaces a mapping; a probe
        // that succeeds is unmapped again at once.
        let p = unsafe {
            mm::mmap_anonymous(
                addr as *mut c_void,
                len,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::FIXED_NOREPLACE,
            )
        };
        if p.is_ok_and(|p| p as usize == addr) {
            unmap(addr, len);
            return true;
        }
        false
    }

    /// A mapping into a reservation that fails may leave its range
    /// unmapped (a hugetlb file with an empty pool does), and another
    /// thread may map memory there before the failure is seen. Cleaning
    /// up the reservation must leave that memory alone: here, another
    /// process's window that a peer import had just placed there.
    #[test]
    fn a_failed_map_into_a_reservation_leaves_others_memory_alone() {
        let (len, align) = (0x40d000usize, HUGE_MIN as usize);
        let total = len + align;
        let fd = memfd(len as u64).unwrap();
        // SAFETY: a fresh reservation of our own.
        let r = unsafe {
            mm::mmap_anonymous(
                std::ptr::null_mut(),
                total,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .unwrap() as usize;
        let addr = round_up(r as u64, align as u64) as usize;
        // What the failed MAP_FIXED and the other thread did meanwhile.
        unmap(addr, len);
        let other = map_prot(&fd, addr, len, 0, ProtFlags::READ | ProtFlags::WRITE).unwrap();
        assert_eq!(other, addr);
        // SAFETY: the other thread's mapping, just made, len bytes.
        unsafe { ((other + len - 8) as *mut u64).write_volatile(0x5eed) };

        trim_reservation(r, total, addr, len, false);

        // SAFETY: still mapped, or this test dies here as the library's
        // users did.
        let word = unsafe { ((other + len - 8) as *const u64).read_volatile() };
        assert_eq!(word, 0x5eed);
        assert!(
            !unmapped(addr, 4096),
            "the other thread's memory was unmapped"
        );
        if addr > r {
            assert!(unmapped(r, addr - r), "the head of the reservation is kept");
        }
        assert!(
            unmapped(addr + len, r + total - addr - len),
            "the tail is kept"
        );
        unmap(other, len);
    }

    /// Retired ranges stay reserved for the next `RETIRED_KEPT`
    /// retirements, then go: a peer that registers and deregisters memory
    /// forever does not use up the process's mappings.
    #[test]
    fn retired_ranges_are_kept_for_a_bounded_number_of_retirements() {
        let sys = System::default();
        let a = sys.alloc(4096, 0, FI_XPU_ALLOC_DMABUF).unwrap();
        let fd = a.fd.unwrap();
        let first = import(&sys, &fd, 0, 4096).unwrap();
        sys.retire(first).unwrap();
        for _ in 0..RETIRED_KEPT - 1 {
            let d = import(&sys, &fd, 0, 4096).unwrap();
            sys.retire(d).unwrap();
        }
        let kept = |b: usize| sys.placeholders.lock().unwrap().iter().any(|p| p.0 == b);
        assert!(
            kept(first) && !unmapped(first, 4096),
            "kept within the bound"
        );
        let d = import(&sys, &fd, 0, 4096).unwrap();
        sys.retire(d).unwrap();
        // (Not probed: another test's thread may map there at once.)
        assert!(!kept(first), "the oldest goes past the bound");
        assert_eq!(sys.placeholders.lock().unwrap().len(), RETIRED_KEPT);
        sys.free(a.addr).unwrap();
    }

    /// Without huge pages in the pool (the usual case) a large allocation
    /// falls back to ordinary pages and still works.
    #[test]
    fn large_allocations_work_whatever_the_huge_page_pool_holds() {
        let sys = System::default();
        let a = sys.alloc(0x40d000, 0, FI_XPU_ALLOC_DMABUF).unwrap();
        assert!((a.addr as u64).is_multiple_of(page_size()));
        // SAFETY: the allocation's last word.
        unsafe { ((a.addr + 0x40d000 - 8) as *mut u64).write_volatile(1) };
        sys.free(a.addr).unwrap();
    }

    #[test]
    fn retired_imports_stay_addressable_but_release_the_memory() {
        let sys = System::default();
        let a = sys.alloc(8192, 0, fi_xpu_abi::FI_XPU_ALLOC_DMABUF).unwrap();
        let fd = a.fd.unwrap();
        let d = import(&sys, &fd, 4096, 4096).unwrap();
        // SAFETY: both addresses are live mappings of the same 8 KiB memfd.
        unsafe {
            *((a.addr + 4096) as *mut u64) = 7;
            assert_eq!(*(d as *const u64), 7);
        }
        sys.retire(d).unwrap();
        // SAFETY: the retired range stays mapped, to private zero pages.
        unsafe {
            assert_eq!(*(d as *const u64), 0);
            *(d as *mut u64) = 9;
            assert_eq!(*(d as *const u64), 9);
            assert_eq!(
                *((a.addr + 4096) as *const u64),
                7,
                "the memfd is not written"
            );
        }
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| {
                let (lo, hi) = l.split_once(' ').unwrap().0.split_once('-').unwrap();
                let (lo, hi) = (
                    usize::from_str_radix(lo, 16).unwrap(),
                    usize::from_str_radix(hi, 16).unwrap(),
                );
                (lo..hi).contains(&d)
            })
            .unwrap();
        assert!(!line.contains("memfd"), "{line}");
        assert_eq!(sys.unimport(d, true), Ok(()), "no longer a mapped import");
        sys.free(a.addr).unwrap();
    }

    #[test]
    fn write_sealed_fds_are_imported_read_only() {
        let sys = System::default();
        let fd = raw_memfd(MemfdFlags::ALLOW_SEALING, 8192);
        file::add_seals(&fd, SealFlags::SHRINK | SealFlags::FUTURE_WRITE).unwrap();
        let d = import(&sys, &fd, 0, 8192).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| l.starts_with(&format!("{d:x}-")))
            .unwrap();
        assert!(line.contains(" r--s "), "{line}");
        sys.unimport(d, true).unwrap();
    }

    #[test]
    fn imports_refuse_fds_that_can_shrink() {
        let sys = System::default();
        let plain = raw_memfd(MemfdFlags::empty(), 8192);
        assert_eq!(import(&sys, &plain, 0, 4096).unwrap_err(), Error::PERM);
        let sealable = raw_memfd(MemfdFlags::ALLOW_SEALING, 8192);
        assert_eq!(import(&sys, &sealable, 0, 4096).unwrap_err(), Error::PERM);
        file::add_seals(&sealable, SealFlags::GROW).unwrap();
        assert_eq!(
            import(&sys, &sealable, 0, 4096).unwrap_err(),
            Error::PERM,
            "sealed against growing only"
        );
        file::add_seals(&sealable, SealFlags::SHRINK).unwrap();
        assert_eq!(
            import(&sys, &sealable, 4096, 8192).unwrap_err(),
            Error::INVAL,
            "past the end"
        );
        assert_eq!(
            import(&sys, &sealable, u64::MAX - 8, 64).unwrap_err(),
            Error::INVAL,
            "wrapping range"
        );
        let d = import(&sys, &sealable, 4096, 4096).unwrap();
        sys.unimport(d, true).unwrap();
        // A regular file on disk cannot be sealed: refused the same way.
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let f: OwnedFd = f.into();
        assert_eq!(import(&sys, &f, 0, 64).unwrap_err(), Error::PERM);
    }

    fn with(huge: HugePages) -> System {
        let mut s = System::default();
        s.huge = Some(huge);
        s
    }

    /// The VmFlags and KernelPageSize (KiB) of the mapping holding `addr`.
    fn vma(addr: usize) -> (String, u64) {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        let mut kps = 0;
        for l in smaps.lines() {
            if let Some((range, _)) = l.split_once(' ') {
                if let Some((a, b)) = range.split_once('-') {
                    if let (Ok(a), Ok(b)) =
                        (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
                    {
                        inside = a <= addr && addr < b;
                        continue;
                    }
                }
            }
            if !inside {
                continue;
            }
            if let Some(v) = l.strip_prefix("KernelPageSize:") {
                kps = v.trim().trim_end_matches("kB").trim().parse().unwrap();
            }
            if let Some(v) = l.strip_prefix("VmFlags:") {
                return (v.trim().to_string(), kps);
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    fn flag(flags: &str, f: &str) -> bool {
        flags.split_whitespace().any(|x| x == f)
    }

    /// Whether this kernel has transparent huge pages (else MADV_HUGEPAGE
    /// fails and marks nothing).
    fn thp_kernel() -> bool {
        std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists()
    }

    fn free_hugetlb_pages() -> u64 {
        std::fs::read_to_string("/proc/meminfo")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("HugePages_Free:"))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    /// Writes through one mapping and reads through the other.
    fn same_memory(a: usize, b: usize, v: u64) {
        // SAFETY: both are live, writable mappings of the same file page.
        unsafe {
            std::ptr::write_volatile(a as *mut u64, v);
            assert_eq!(std::ptr::read_volatile(b as *const u64), v);
        }
    }

    #[test]
    fn large_memory_is_placed_for_transparent_huge_pages() {
        let m = with(HugePages::Thp);
        let a = m.alloc(4 << 20, 0, FI_XPU_ALLOC_DMABUF).unwrap();
        assert_eq!(a.addr % (2 << 20), 0);
        let (flags, kps) = vma(a.addr);
        assert!(
            flag(&flags, "hg") || !thp_kernel(),
            "no MADV_HUGEPAGE: {flags}"
        );
        assert_eq!(kps, 4, "not a hugetlb mapping");
        let fd = a.fd.unwrap();
        // An import of a 2 MiB-aligned part, as a peer maps a heap.
        let req = |offset, size| Import {
            host_addr: 0,
            fd: Some(fd.as_fd()),
            offset,
            size,
            flags: fi_xpu_abi::FI_XPU_IMPORT_DMABUF,
            exportable: false,
        };
        let d = m.import(&req(2 << 20, 2 << 20)).unwrap();
        assert_eq!(d % (2 << 20), 0);
        assert!(flag(&vma(d).0, "hg") || !thp_kernel());
        same_memory(a.addr + (2 << 20) + 64, d + 64, 0xabc);
        // Not at a 2 MiB offset, or smaller than 2 MiB: placed anywhere.
        let e = m.import(&req(4096, 3 << 20)).unwrap();
        assert!(!flag(&vma(e).0, "hg"));
        same_memory(a.addr + 4096, e, 0xdef);
        m.unimport(d, true).unwrap();
        m.unimport(e, true).unwrap();
        // Small allocations and the `off` policy: ordinary mappings.
        let small = m.alloc((2 << 20) - 4096, 0, 0).unwrap();
        assert!(!flag(&vma(small.addr).0, "hg"));
        let off = with(HugePages::Off);
        let plain = off.alloc(4 << 20, 0, 0).unwrap();
        assert!(!flag(&vma(plain.addr).0, "hg"));
        m.free(small.addr).unwrap();
        off.free(plain.addr).unwrap();
        m.free(a.addr).unwrap();
    }

    /// With hugetlb pages in the pool (`vm.nr_hugepages`), `try` takes
    /// them, and imports of such a memfd map whole huge pages around any
    /// offset; without, it falls back to an ordinary memfd.
    #[test]
    fn hugetlb_pages_when_the_pool_has_them() {
        let m = with(HugePages::Try);
        let pool = free_hugetlb_pages();
        let a = m.alloc(3 << 20, 0, FI_XPU_ALLOC_DMABUF).unwrap();
        let (flags, kps) = vma(a.addr);
        if pool < 2 {
            eprintln!("no free hugetlb pages (HugePages_Free: {pool}): checked the fallback only");
            assert!(!flag(&flags, "ht") && kps == 4, "{flags}");
            assert!(flag(&flags, "hg") || !thp_kernel(), "{flags}");
        } else {
            assert!(flag(&flags, "ht"), "not a hugetlb mapping: {flags}");
            assert_eq!(kps, 2048);
        }
        let fd = a.fd.unwrap();
        let req = Import {
            host_addr: 0,
            fd: Some(fd.as_fd()),
            offset: (2 << 20) + 4096,
            size: 8192,
            flags: fi_xpu_abi::FI_XPU_IMPORT_DMABUF,
            exportable: true,
        };
        let d = m.import(&req).unwrap();
        same_memory(a.addr + (2 << 20) + 4096 + 8, d + 8, 0x5eed);
        let (efd, off) = m.export(d + 16, 64).unwrap();
        assert_eq!(off, (2 << 20) + 4096 + 16);
        drop(efd);
        m.unimport(d, true).unwrap();
        // Alignment beyond the huge page is still honoured.
        let b = m.alloc(2 << 20, 1 << 23, 0).unwrap();
        assert_eq!(b.addr % (1 << 23), 0);
        m.free(b.addr).unwrap();
        m.free(a.addr).unwrap();
    }
}
