//! `FI_HMEM_SYSTEM` memory: every allocation is a memfd mapping, so it can be
//! handed to another process as a file descriptor; an import with an fd maps
//! that fd, and an import of a host address is the address itself.
//!
//! `memfd` makes and checks the files, `map` places them in the address
//! space; this file keeps the allocations and imports of one context.
mod map;
mod memfd;
#[cfg(test)]
mod tests;

use super::backend::{Allocation, Backend, Import};
use crate::error::{Error, Result};
use fi_xpu_os::file;
use fi_xpu_os::rustix::mm::{self, MapFlags, ProtFlags};
use map::*;
use memfd::*;
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::os::fd::{AsFd, OwnedFd};
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

/// Retired imports whose address range stays reserved (`System::retire`).
const RETIRED_KEPT: usize = 1024;

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
