//! The system backend against the kernel: seals, mappings, retirements,
//! huge pages.
use super::*;
use fi_xpu_abi::FI_XPU_ALLOC_DMABUF;
use fi_xpu_os::rustix::fs::{ftruncate, MemfdFlags, SealFlags};
use fi_xpu_os::Errno;

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
    let r = reserve(total).unwrap();
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
                if let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
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
    let d = import(&m, &fd, 2 << 20, 2 << 20).unwrap();
    assert_eq!(d % (2 << 20), 0);
    assert!(flag(&vma(d).0, "hg") || !thp_kernel());
    same_memory(a.addr + (2 << 20) + 64, d + 64, 0xabc);
    // Not at a 2 MiB offset, or smaller than 2 MiB: placed anywhere.
    let e = import(&m, &fd, 4096, 3 << 20).unwrap();
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
