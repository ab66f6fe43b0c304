//! `FI_HMEM_SYSTEM` memory: every allocation is a memfd mapping, so it can be
//! handed to another process as a file descriptor; an import with an fd maps
//! that fd, and an import of a host address is the address itself.
use super::{Allocation, Backend, Import};
use crate::error::{Error, Result};
use fi_xpu_abi::errno::*;
use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
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
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as u64 }
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

fn memfd(size: u64) -> Result<OwnedFd> {
    // SAFETY: the name is a valid C string; the flags are valid.
    let fd = unsafe { libc::memfd_create(c"fi_xpu".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(Error::last_os());
    }
    // SAFETY: fd is a new descriptor that we own from here on.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on our own memfd.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
        return Err(Error::last_os());
    }
    Ok(fd)
}

/// Maps `len` bytes of `fd` from `offset` (page-aligned) at `at` (0: anywhere).
fn map(fd: &OwnedFd, at: usize, len: usize, offset: u64) -> Result<usize> {
    let flags = libc::MAP_SHARED | if at != 0 { libc::MAP_FIXED } else { 0 };
    // SAFETY: mapping a file we hold; with MAP_FIXED, `at` lies inside a
    // reservation this module made and owns.
    let p = unsafe {
        libc::mmap(
            at as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            fd.as_raw_fd(),
            offset as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(Error::last_os());
    }
    Ok(p as usize)
}

fn unmap(base: usize, len: usize) {
    // SAFETY: only called on mappings this module created and no longer hands out.
    unsafe { libc::munmap(base as *mut libc::c_void, len) };
}

impl Backend for System {
    fn alloc(&self, size: u64, alignment: u64, _flags: u64) -> Result<Allocation> {
        let page = page_size();
        let len = round_up(size, page);
        let fd = memfd(len)?;
        let (addr, base, total) = if alignment <= page {
            let addr = map(&fd, 0, len as usize, 0)?;
            (addr, addr, len as usize)
        } else {
            // Reserve room to slide to the alignment, map there, give back the rest.
            let total = (len + alignment) as usize;
            // SAFETY: an anonymous PROT_NONE reservation that we own.
            let r = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    total,
                    libc::PROT_NONE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if r == libc::MAP_FAILED {
                return Err(Error::last_os());
            }
            let r = r as usize;
            let addr = round_up(r as u64, alignment) as usize;
            if let Err(e) = map(&fd, addr, len as usize, 0) {
                unmap(r, total);
                return Err(e);
            }
            if addr > r {
                unmap(r, addr - r);
            }
            let end = addr + len as usize;
            if r + total > end {
                unmap(end, r + total - end);
            }
            (addr, addr, len as usize)
        };
        let export = if _flags & fi_xpu_abi::FI_XPU_ALLOC_DMABUF != 0 {
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
        // SAFETY: fstat into a zeroed struct on a descriptor checked open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(Error::last_os());
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(Error(FI_EINVAL));
        }
        if req.offset + req.size > st.st_size as u64 {
            return Err(Error::INVAL);
        }
        let page = page_size();
        let start = req.offset / page * page;
        let delta = (req.offset - start) as usize;
        let len = (round_up(req.offset + req.size, page) - start) as usize;
        let owned = fd.try_clone_to_owned()?;
        let base = map(&owned, 0, len, start)?;
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
    }
}
