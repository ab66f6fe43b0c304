//! Host memory made reachable by a device through the vendor's pinning
//! call (`cuMemHostRegister`, `hsa_amd_memory_lock`): memfd allocations for
//! `FI_XPU_ALLOC_HOST` (shareable with other processes by fd), host
//! mappings of imported fds the driver does not take as its own, and host
//! addresses the application imports. Shared by the CUDA and ROCr
//! backends; the device address of pinned memory must be its host address.
use super::backend::{Allocation, Backend, Import};
use super::system::System;
use crate::error::{Error, Result};
use fi_xpu_abi::FI_XPU_IMPORT_IOMEMORY;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::Mutex;

/// A vendor's pinning calls.
pub trait Pin {
    /// Pins `[base, base + len)` (page-aligned) for the device, usable there
    /// at the same address; `-FI_EBUSY` when it is pinned already (by the
    /// application). Undoes itself on failure.
    fn pin(&self, base: usize, len: usize, how: PinHow) -> Result<()>;
    fn unpin(&self, base: usize);
}

/// How a range is pinned.
#[derive(Clone, Copy, Debug, Default)]
pub struct PinHow {
    /// I/O memory (`FI_XPU_IMPORT_IOMEMORY`).
    pub iomem: bool,
    /// Mapped read-only in the host (a region a peer shares read-only):
    /// the device may only read it, and drivers refuse to pin such pages
    /// for writing.
    pub read_only: bool,
}

#[derive(Default)]
pub struct Pinned {
    host: System,
    /// `FI_XPU_ALLOC_HOST` allocations: address -> pinned length.
    allocs: Mutex<HashMap<usize, usize>>,
    /// Imported fds mapped into the host: address -> pinned (base, length).
    mapped: Mutex<HashMap<usize, (usize, usize)>>,
    /// Ranges pinned for host imports: base -> number of imports.
    regs: Mutex<HashMap<usize, usize>>,
    /// Host imports by address: the pinned base, or `None` when the memory
    /// was reachable already.
    imports: Mutex<HashMap<usize, Vec<Option<usize>>>>,
}

fn page_size() -> usize {
    fi_xpu_os::rustix::param::page_size() as usize
}

/// The page-aligned range enclosing `[addr, addr + size)`.
fn pages(addr: usize, size: usize) -> (usize, usize) {
    let p = page_size();
    let base = addr / p * p;
    (base, (addr + size).div_ceil(p) * p - base)
}

fn inside(addr: usize, size: u64, start: usize, len: usize) -> bool {
    addr >= start
        && ((addr - start) as u64)
            .checked_add(size)
            .is_some_and(|e| e <= len as u64)
}

impl Pinned {
    /// A pinned memfd allocation.
    pub fn alloc(&self, p: &dyn Pin, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        let a = self.host.alloc(size, alignment, flags)?;
        let (base, len) = pages(a.addr, size as usize);
        if let Err(e) = p.pin(base, len, PinHow::default()) {
            let _ = self.host.free(a.addr);
            return Err(e);
        }
        self.allocs.lock().unwrap().insert(a.addr, len);
        Ok(a)
    }

    /// Frees a pinned allocation; `None` when `addr` is not one.
    pub fn free(&self, p: &dyn Pin, addr: usize) -> Option<Result<()>> {
        self.allocs.lock().unwrap().remove(&addr)?;
        p.unpin(addr);
        Some(self.host.free(addr))
    }

    /// Maps an fd into the host and pins the mapping.
    pub fn import_fd(&self, p: &dyn Pin, req: &Import) -> Result<usize> {
        let addr = self.host.import(req)?;
        let (base, len) = pages(addr, req.size as usize);
        let how = PinHow {
            iomem: req.flags & FI_XPU_IMPORT_IOMEMORY != 0,
            read_only: req.fd.is_some_and(fi_xpu_os::file::maps_read_only),
        };
        if let Err(e) = p.pin(base, len, how) {
            let _ = self.host.unimport(addr, true);
            return Err(e);
        }
        self.mapped.lock().unwrap().insert(addr, (base, len));
        Ok(addr)
    }

    /// Pins the pages of a host address (once for overlapping imports of
    /// the same pages); memory pinned already, or `reachable` (memory the
    /// backend made reachable itself), is used as it is.
    pub fn import_host(&self, p: &dyn Pin, req: &Import, reachable: bool) -> Result<usize> {
        let addr = req.host_addr;
        let ours = if reachable || self.owns(addr, req.size) {
            None
        } else {
            let (base, len) = pages(addr, req.size as usize);
            let mut regs = self.regs.lock().unwrap();
            if let Some(n) = regs.get_mut(&base) {
                *n += 1;
                Some(base)
            } else {
                let how = PinHow {
                    iomem: req.flags & FI_XPU_IMPORT_IOMEMORY != 0,
                    read_only: false,
                };
                match p.pin(base, len, how) {
                    Ok(()) => {
                        regs.insert(base, 1);
                        Some(base)
                    }
                    Err(e) if e == Error::BUSY => None,
                    Err(e) => return Err(e),
                }
            }
        };
        self.imports
            .lock()
            .unwrap()
            .entry(addr)
            .or_default()
            .push(ours);
        Ok(addr)
    }

    /// Undoes an import this module made; false when it made none at `dev`.
    pub fn unimport(&self, p: &dyn Pin, dev: usize, mapped: bool) -> bool {
        if mapped {
            let Some((base, _)) = self.mapped.lock().unwrap().remove(&dev) else {
                return false;
            };
            p.unpin(base);
            let _ = self.host.unimport(dev, true);
            return true;
        }
        let ours = {
            let mut imports = self.imports.lock().unwrap();
            let Some(v) = imports.get_mut(&dev) else {
                return false;
            };
            let ours = v.pop().flatten();
            if v.is_empty() {
                imports.remove(&dev);
            }
            ours
        };
        if let Some(base) = ours {
            let mut regs = self.regs.lock().unwrap();
            if let Some(n) = regs.get_mut(&base) {
                *n -= 1;
                if *n == 0 {
                    regs.remove(&base);
                    p.unpin(base);
                }
            }
        }
        true
    }

    /// Whether the range lies in a pinned allocation or mapping.
    pub fn owns(&self, addr: usize, size: u64) -> bool {
        self.allocs
            .lock()
            .unwrap()
            .iter()
            .any(|(&a, &len)| inside(addr, size, a, len))
            || self
                .mapped
                .lock()
                .unwrap()
                .values()
                .any(|&(b, len)| inside(addr, size, b, len))
    }

    /// The memfd and offset of a range of a pinned allocation or mapping;
    /// `None` when the range is in neither.
    pub fn export(&self, addr: usize, size: u64) -> Option<Result<(OwnedFd, u64)>> {
        self.owns(addr, size).then(|| self.host.export(addr, size))
    }

    /// Unpins everything (the memfd mappings go with the `System`).
    pub fn release(&self, p: &dyn Pin) {
        for (a, _) in self.allocs.lock().unwrap().drain() {
            p.unpin(a);
        }
        for (_, (base, _)) in self.mapped.lock().unwrap().drain() {
            p.unpin(base);
        }
        for (base, _) in self.regs.lock().unwrap().drain() {
            p.unpin(base);
        }
    }
}
