//! The part of a context's shared memory that peers read but must never
//! write: its header and registration table, and the staging lanes its
//! endpoints stream sends through. Every remote access is checked against
//! that table, so a peer able to write it could grant itself (or point
//! another peer's operations at) memory it was never given; a peer able to
//! write a lane could change the bytes of a message sent to another peer.
//!
//! It is a memfd of its own, mapped writable here once and then sealed
//! with `F_SEAL_FUTURE_WRITE`: from then on no process can map it writable
//! or make a read-only mapping of it writable, this one's first mapping
//! excepted. Peers import it read-only (the core maps a descriptor sealed
//! against writing read-only); a store into it raises SIGSEGV in the peer
//! instead of changing what other peers' operations are checked against.
//! The seal is the kernel's, not the peer's good will.
use fi_xpu_os::file::{add_seals, memfd};
use fi_xpu_os::rustix::fs::{ftruncate, MemfdFlags, SealFlags};
use fi_xpu_os::rustix::mm::{self, MapFlags, ProtFlags};
use fi_xpu_os::rustix::param::page_size;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::c_void;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Seals of a table from its creation: fixed size (as every shared
/// region), so that the memory backend imports it.
const SIZE_SEALS: SealFlags = SealFlags::SHRINK.union(SealFlags::GROW);
/// Seals of a table once its owner's writable mappings are made: no new
/// writable mapping, no further seals.
pub const TABLE_SEALS: SealFlags = SIZE_SEALS
    .union(SealFlags::FUTURE_WRITE)
    .union(SealFlags::SEAL);

pub struct Table {
    addr: usize,
    len: usize,
    fd: OwnedFd,
}

impl Table {
    /// A zeroed table of at least `size` bytes, writable here only.
    #[cfg(test)]
    pub fn new(size: u64) -> Result<Table> {
        let t = Table::unsealed(size)?;
        t.seal()?;
        Ok(t)
    }

    /// A zeroed table of at least `size` bytes, sealed against resizing
    /// only: its owner makes the writable mappings it needs (its device
    /// import of the lanes) and then calls `seal`.
    pub fn unsealed(size: u64) -> Result<Table> {
        let page = page_size() as u64;
        let len = size.div_ceil(page) * page;
        let fd = memfd(c"fi_xpu_shm_table", MemfdFlags::ALLOW_SEALING).map_err(|_| Error::NOMEM)?;
        ftruncate(&fd, len).map_err(|_| Error::NOMEM)?;
        // SAFETY: a new shared mapping of the whole memfd, anywhere.
        let p = unsafe {
            mm::mmap(
                std::ptr::null_mut(),
                len as usize,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                &fd,
                0,
            )
        }
        .map_err(|_| Error::NOMEM)?;
        let t = Table {
            addr: p as usize,
            len: len as usize,
            fd,
        };
        add_seals(&t.fd, SIZE_SEALS).map_err(|_| Error::PERM)?;
        Ok(t)
    }

    /// Seals the table against writing: the mappings made so far stay
    /// writable, no later one can be.
    pub fn seal(&self) -> Result<()> {
        add_seals(&self.fd, TABLE_SEALS).map_err(|_| Error::PERM)
    }

    pub fn addr(&self) -> usize {
        self.addr
    }

    pub fn len(&self) -> u64 {
        self.len as u64
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        let _ = unsafe { mm::munmap(self.addr as *mut c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fi_xpu_os::rustix::mm::MprotectFlags;
    use fi_xpu_os::Errno;

    #[test]
    fn writable_here_read_only_everywhere_else() {
        let t = Table::new(5000).unwrap();
        assert_eq!(t.len(), 8192);
        // SAFETY: the table's own mapping, 8 KiB.
        unsafe { *((t.addr() + 4096) as *mut u64) = 7 };
        assert_eq!(fi_xpu_os::file::seals(t.fd()), Some(TABLE_SEALS));
        let map = |prot| {
            // SAFETY: a new mapping of the table's memfd, unmapped below.
            unsafe {
                mm::mmap(
                    std::ptr::null_mut(),
                    8192,
                    prot,
                    MapFlags::SHARED,
                    t.fd(),
                    0,
                )
            }
        };
        assert_eq!(map(ProtFlags::READ | ProtFlags::WRITE), Err(Errno::PERM));
        let p = map(ProtFlags::READ).unwrap();
        // SAFETY: the read-only mapping just made: read, then try to make
        // it writable, which the seal forbids.
        unsafe {
            assert_eq!(*((p as usize + 4096) as *const u64), 7);
            assert_eq!(
                mm::mprotect(p, 8192, MprotectFlags::READ | MprotectFlags::WRITE),
                Err(Errno::ACCESS)
            );
            mm::munmap(p, 8192).unwrap();
        }
        // Adding a seal is refused (F_SEAL_SEAL).
        assert_eq!(add_seals(t.fd(), SealFlags::WRITE), Err(Errno::PERM));
    }
}
