//! The bookkeeping of `Memory` over the system backend: argument checks,
//! owners, ranges.
use super::*;

fn system() -> Memory {
    Memory::new(FI_HMEM_SYSTEM, 0, None).unwrap()
}

/// The application's import of `[offset, offset + size)` of DMA-BUF `fd`.
fn import_dmabuf(m: &Memory, fd: &OwnedFd, offset: u64, size: u64) -> Result<usize> {
    use std::os::fd::AsRawFd;
    m.import(
        0,
        fd.as_raw_fd(),
        offset,
        size,
        FI_XPU_IMPORT_DMABUF,
        Owner::App,
    )
}

#[test]
fn contains_only_live_ranges() {
    let m = system();
    let a = m.alloc(4096, 0, 0, Owner::App).unwrap().addr;
    assert!(m.contains(a, 4096));
    assert!(m.contains(a + 4095, 1));
    assert!(m.contains(a + 100, 0));
    assert!(!m.contains(a + 4095, 2));
    assert!(!m.contains(a.wrapping_sub(1), 2));
    assert!(!m.contains(a, u64::MAX));
    assert!(!m.contains(usize::MAX, 2));
    let mut host = [0u8; 64];
    let h = host.as_mut_ptr() as usize;
    assert!(!m.contains(h, 8));
    let d = m.import(h, -1, 0, 64, 0, Owner::App).unwrap();
    assert!(m.contains(d, 64));
    assert!(!m.contains(d, 65));
    m.unimport(d, Owner::App).unwrap();
    assert!(!m.contains(d, 8));
    m.free(a, Owner::App).unwrap();
    assert!(!m.contains(a, 8));
}

#[test]
fn alloc_checks() {
    let m = system();
    assert_eq!(m.alloc(0, 0, 0, Owner::App).unwrap_err(), Error::INVAL);
    assert_eq!(m.alloc(64, 3, 0, Owner::App).unwrap_err(), Error::INVAL);
    assert_eq!(
        m.alloc(64, 0, 1 << 40, Owner::App).unwrap_err(),
        Error::BADFLAGS
    );
    assert_eq!(
        m.alloc(u64::MAX, 0, 0, Owner::App).unwrap_err(),
        Error::OVERFLOW
    );
    let a = m
        .alloc(100, 1 << 16, FI_XPU_ALLOC_DMABUF, Owner::App)
        .unwrap();
    assert_eq!(a.addr % (1 << 16), 0);
    assert!(a.fd.is_some());
    assert_eq!(m.free(a.addr + 1, Owner::App).unwrap_err(), Error::INVAL);
    m.free(a.addr, Owner::App).unwrap();
    assert_eq!(m.free(a.addr, Owner::App).unwrap_err(), Error::INVAL);
}

#[test]
fn import_checks() {
    let m = system();
    let mut host = [0u8; 64];
    let h = host.as_mut_ptr() as usize;
    assert_eq!(
        m.import(h, 0, 0, 64, 0, Owner::App).unwrap_err(),
        Error::INVAL,
        "fd without the flag"
    );
    assert_eq!(
        m.import(0, -1, 0, 64, FI_XPU_IMPORT_DMABUF, Owner::App)
            .unwrap_err(),
        Error::BADF
    );
    assert_eq!(
        m.import(0, 1000, 0, 64, FI_XPU_IMPORT_DMABUF, Owner::App)
            .unwrap_err(),
        Error::BADF
    );
    assert_eq!(
        m.import(h, -1, 0, 0, 0, Owner::App).unwrap_err(),
        Error::INVAL
    );
    assert_eq!(
        m.import(h, -1, 0, 64, 1 << 9, Owner::App).unwrap_err(),
        Error::BADFLAGS
    );
    let d = m
        .import(h, -1, 0, 64, FI_XPU_IMPORT_DEVICEMAP, Owner::App)
        .unwrap();
    assert_eq!(d, h, "system memory is its own device mapping");
    m.unimport(d, Owner::App).unwrap();
    assert_eq!(m.unimport(d, Owner::App).unwrap_err(), Error::INVAL);
}

#[test]
fn dmabuf_round_trip() {
    let m = system();
    let a = m.alloc(8192, 0, FI_XPU_ALLOC_DMABUF, Owner::App).unwrap();
    let fd = a.fd.unwrap();
    let d = import_dmabuf(&m, &fd, 4096, 4096).unwrap();
    // SAFETY: both are live mappings of the same memfd, 8 KiB and 4 KiB long.
    unsafe {
        *((a.addr + 4096 + 8) as *mut u64) = 0xfeed;
        assert_eq!(*((d + 8) as *const u64), 0xfeed);
    }
    assert_eq!(
        import_dmabuf(&m, &fd, 4096, 8192).unwrap_err(),
        Error::INVAL,
        "range past the end of the buffer"
    );
    let (efd, off) = m.export(a.addr + 4096, 16).unwrap();
    assert_eq!(off, 4096);
    drop(efd);
    m.unimport(d, Owner::App).unwrap();
    m.free(a.addr, Owner::App).unwrap();
}

#[test]
fn host_import_at_a_mapped_address_leaves_the_mapping() {
    let m = system();
    let a = m.alloc(4096, 0, FI_XPU_ALLOC_DMABUF, Owner::App).unwrap();
    let fd = a.fd.unwrap();
    let d = import_dmabuf(&m, &fd, 0, 4096).unwrap();
    let h = m.import(d, -1, 0, 4096, 0, Owner::App).unwrap();
    assert_eq!(h, d, "a host import is its own address");
    assert_eq!(m.import_to_undo(d, Owner::App), Some((4096, false)));
    m.unimport(d, Owner::App).unwrap();
    // SAFETY: the DMA-BUF import must still be mapped (4 KiB).
    unsafe {
        *(d as *mut u64) = 7;
        assert_eq!(*(a.addr as *const u64), 7);
    }
    assert_eq!(m.import_to_undo(d, Owner::App), Some((4096, true)));
    m.unimport(d, Owner::App).unwrap();
    assert_eq!(m.unimport(d, Owner::App).unwrap_err(), Error::INVAL);
    m.free(a.addr, Owner::App).unwrap();
}

#[test]
fn each_owner_reaches_only_its_own_memory() {
    let m = system();
    let p = m.alloc(4096, 0, 0, Owner::Provider).unwrap().addr;
    assert_eq!(m.alloc_size(p, Owner::App), None);
    assert_eq!(m.free(p, Owner::App).unwrap_err(), Error::INVAL);
    assert!(m.contains(p, 4096), "still live after the refused free");
    let a = m.alloc(4096, 0, 0, Owner::App).unwrap().addr;
    assert_eq!(m.free(a, Owner::Provider).unwrap_err(), Error::INVAL);
    let mut host = [0u8; 64];
    let h = host.as_mut_ptr() as usize;
    let d = m.import(h, -1, 0, 64, 0, Owner::Provider).unwrap();
    assert_eq!(m.import_to_undo(d, Owner::App), None);
    assert_eq!(m.unimport(d, Owner::App).unwrap_err(), Error::INVAL);
    assert!(m.contains(d, 64));
    m.unimport(d, Owner::Provider).unwrap();
    m.free(p, Owner::Provider).unwrap();
    m.free(a, Owner::App).unwrap();
}

#[test]
fn host_memory_needs_no_access_and_ranges_are_checked() {
    let m = system();
    assert_eq!(m.access(Access::Probe).unwrap_err(), Error::OPNOTSUPP);
    let a = m.alloc(4096, 0, 0, Owner::Provider).unwrap().addr;
    let src = [1u8; 16];
    assert_eq!(
        m.access(Access::Write {
            dev: a + 4090,
            src: &src
        })
        .unwrap_err(),
        Error::INVAL,
        "past the allocation"
    );
    assert_eq!(
        m.access(Access::Store64 {
            dev: a + 4,
            value: 1
        })
        .unwrap_err(),
        Error::INVAL,
        "unaligned"
    );
    // In range, the host-memory backend says plain access will do.
    assert_eq!(
        m.access(Access::Write { dev: a, src: &src }).unwrap_err(),
        Error::OPNOTSUPP
    );
    m.free(a, Owner::Provider).unwrap();
}

#[test]
fn vendor_without_ops() {
    assert_eq!(
        Memory::new(FI_HMEM_NEURON, 0, None).err(),
        Some(Error::NOSYS)
    );
    assert_eq!(Memory::new(42, 0, None).err(), Some(Error::INVAL));
}
