//! Memory operations of an XPU context (`fi_xpu_alloc`, `fi_xpu_import`,
//! `fi_xpu_unimport`, `fi_xpu_free`): argument checks and bookkeeping shared
//! by every backend, and the choice of backend for a context.
//!
//! Backends: `system` (memfd mappings, `FI_HMEM_SYSTEM`); `cuda` (the CUDA
//! driver), `ze` (Level Zero) and `rocr` (the ROCm runtime), opened at run
//! time, with `vendor` (what the three share) and `pinned` (host memory
//! they pin for the device); `user` (the application's `struct
//! fi_xpu_mem_ops`). Other ifaces without callbacks report `FI_ENOSYS`.
mod backend;
mod cuda;
#[cfg(test)]
mod cuda_include;
#[cfg(test)]
mod header_check;
mod pinned;
mod rocr;
mod system;
#[cfg(test)]
mod tests;
mod user;
mod vendor;
mod ze;

use crate::error::{Error, Result};
use crate::flags::{self, AllocFlags, ImportFlags};
use crate::warn;
use fi_xpu_abi::*;
use std::collections::HashMap;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::{Mutex, OnceLock};

pub use backend::{Access, Allocation, Backend, Import, Owner, IPC_HANDLE};
pub use user::UserOps;

/// Largest alignment an allocation may ask for.
pub const MAX_ALIGNMENT: u64 = 1 << 30;

/// The memory of one XPU context: a backend plus the record of what the
/// application holds, so that bad frees and unimports are refused.
pub struct Memory {
    pub iface: fi_hmem_iface,
    pub device: u64,
    backend: Box<dyn Backend>,
    /// Live allocations by address: size and owner.
    allocs: Mutex<HashMap<usize, (u64, Owner)>>,
    /// Live imports by device address. Two can share an address: a host
    /// import of the address a DMA-BUF import returned.
    imports: Mutex<HashMap<usize, Vec<ImportRec>>>,
    /// The context's abort word (`fi_xpu_ctx_abort`), allocated host-and-
    /// device-visible on first use, outside the application's allocations.
    abort: OnceLock<Option<usize>>,
}

#[derive(Clone, Copy, Debug)]
struct ImportRec {
    size: u64,
    owner: Owner,
    /// Imported from a DMA-BUF fd (the backend mapped it).
    mapped: bool,
}

impl Memory {
    /// Chooses the backend for `iface`: the application's callbacks when
    /// given, otherwise the built-in one.
    pub fn new(iface: fi_hmem_iface, device: u64, ops: Option<UserOps>) -> Result<Memory> {
        if !(FI_HMEM_SYSTEM..=FI_HMEM_SYNAPSEAI).contains(&iface) {
            warn!("fi_xpu_ctx_open: unknown iface {iface}");
            return Err(Error::INVAL);
        }
        let backend: Box<dyn Backend> = match (ops, iface) {
            (Some(ops), _) => Box::new(ops),
            (None, FI_HMEM_SYSTEM) => Box::new(system::System::default()),
            (None, FI_HMEM_CUDA) => Box::new(cuda::Cuda::open(device)?),
            (None, FI_HMEM_ZE) => Box::new(ze::Ze::open(device)?),
            (None, FI_HMEM_ROCR) => Box::new(rocr::Rocr::open(device)?),
            (None, _) => {
                warn!(
                    "fi_xpu_ctx_open: no built-in memory backend for iface {} (device {device}) yet; supply struct fi_xpu_mem_ops",
                    iface_name(iface)
                );
                return Err(Error::NOSYS);
            }
        };
        Ok(Memory {
            iface,
            device,
            backend,
            allocs: Mutex::default(),
            imports: Mutex::default(),
            abort: OnceLock::new(),
        })
    }

    pub fn alloc(&self, size: u64, alignment: u64, flags: u64, owner: Owner) -> Result<Allocation> {
        let want = flags::accept::<AllocFlags>(flags)?;
        if size == 0 {
            return Err(Error::INVAL);
        }
        if alignment != 0 && (!alignment.is_power_of_two() || alignment > MAX_ALIGNMENT) {
            return Err(Error::INVAL);
        }
        if size > isize::MAX as u64 / 2 {
            return Err(Error::OVERFLOW);
        }
        let a = self.backend.alloc(size, alignment, flags)?;
        if want.contains(AllocFlags::DMABUF) && a.fd.is_none() {
            let _ = self.backend.free(a.addr);
            warn!("fi_xpu_alloc: the memory backend returned no fd for FI_XPU_ALLOC_DMABUF");
            return Err(Error::OPNOTSUPP);
        }
        if alignment != 0 && !(a.addr as u64).is_multiple_of(alignment) {
            let _ = self.backend.free(a.addr);
            warn!("fi_xpu_alloc: the memory backend ignored the requested alignment {alignment}");
            return Err(Error::FAULT);
        }
        self.allocs.lock().unwrap().insert(a.addr, (size, owner));
        Ok(a)
    }

    /// Frees `owner`'s allocation at `addr`; another owner's is refused
    /// (`-FI_EINVAL`) as an unknown address.
    pub fn free(&self, addr: usize, owner: Owner) -> Result<()> {
        {
            let mut allocs = self.allocs.lock().unwrap();
            match allocs.get(&addr) {
                Some(&(_, o)) if o == owner => allocs.remove(&addr),
                _ => return Err(Error::INVAL),
            };
        }
        self.backend.free(addr)
    }

    /// `fd` is -1 unless `FI_XPU_IMPORT_DMABUF` is set. The application's
    /// imports are exportable (see `Import`), a provider's are not.
    pub fn import(
        &self,
        host_addr: usize,
        fd: RawFd,
        offset: u64,
        size: u64,
        flags: u64,
        owner: Owner,
    ) -> Result<usize> {
        flags::accept::<ImportFlags>(flags)?;
        if size == 0 {
            return Err(Error::INVAL);
        }
        if offset
            .checked_add(size)
            .is_none_or(|end| end > isize::MAX as u64)
            || (host_addr as u64).checked_add(size).is_none()
        {
            return Err(Error::OVERFLOW);
        }
        let fd = if flags & FI_XPU_IMPORT_DMABUF != 0 {
            if fd < 0 || !fd_is_open(fd) {
                return Err(Error::BADF);
            }
            // SAFETY: fd was checked to be open; the borrow ends with this call.
            Some(unsafe { BorrowedFd::borrow_raw(fd) })
        } else {
            if fd != -1 {
                return Err(Error::INVAL);
            }
            if host_addr == 0 || offset != 0 {
                return Err(Error::INVAL);
            }
            None
        };
        let mapped = fd.is_some();
        let dev = self.backend.import(&Import {
            host_addr,
            fd,
            offset,
            size,
            flags,
            exportable: owner == Owner::App,
        })?;
        self.record_import(
            dev,
            ImportRec {
                size,
                owner,
                mapped,
            },
        );
        Ok(dev)
    }

    /// The import of `owner` at `dev_addr` that `unimport` would undo: a
    /// host import before a mapped one, so that the mapping lives while
    /// anything at that address does. Returns its size and whether it is
    /// the last import there.
    pub fn import_to_undo(&self, dev_addr: usize, owner: Owner) -> Option<(u64, bool)> {
        let imports = self.imports.lock().unwrap();
        let recs = imports.get(&dev_addr)?;
        let i = undo_index(recs, owner)?;
        Some((recs[i].size, recs.len() == 1))
    }

    /// Undoes one of `owner`'s imports at `dev_addr`; `-FI_EINVAL` when it
    /// has none there.
    pub fn unimport(&self, dev_addr: usize, owner: Owner) -> Result<()> {
        let rec = {
            let mut imports = self.imports.lock().unwrap();
            let Some(recs) = imports.get_mut(&dev_addr) else {
                return Err(Error::INVAL);
            };
            let Some(i) = undo_index(recs, owner) else {
                return Err(Error::INVAL);
            };
            let rec = recs.remove(i);
            if recs.is_empty() {
                imports.remove(&dev_addr);
            }
            rec
        };
        self.backend.unimport(dev_addr, rec.mapped)
    }

    /// Size of `owner`'s allocation at `addr`, if there is one.
    pub fn alloc_size(&self, addr: usize, owner: Owner) -> Option<u64> {
        match self.allocs.lock().unwrap().get(&addr) {
            Some(&(size, o)) if o == owner => Some(size),
            _ => None,
        }
    }

    /// Undoes one import of memory whose owner is gone while device code
    /// may still use addresses inside it (see `Backend::retire`). A backend
    /// that cannot leaves the import live and says so.
    pub fn retire(&self, dev_addr: usize) -> Result<()> {
        let mut imports = self.imports.lock().unwrap();
        let Some(recs) = imports.get_mut(&dev_addr) else {
            return Err(Error::INVAL);
        };
        // The mapped import, if any: a host import maps nothing.
        let i = recs
            .iter()
            .rposition(|r| r.mapped)
            .unwrap_or(recs.len() - 1);
        if recs[i].mapped {
            self.backend.retire(dev_addr)?;
        }
        recs.remove(i);
        if recs.is_empty() {
            imports.remove(&dev_addr);
        }
        Ok(())
    }

    pub fn export(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        if size == 0 {
            return Err(Error::INVAL);
        }
        self.backend.export(addr, size)
    }

    /// Host access to the context's device memory (`Backend::access`);
    /// the range must lie inside one live allocation or import.
    pub fn access(&self, access: Access) -> Result<()> {
        if let Some((dev, len)) = access.range() {
            if !self.contains(dev, len) {
                warn!("device memory access: [{dev:#x}, +{len}) is not memory of this context");
                return Err(Error::INVAL);
            }
            if matches!(access, Access::Store64 { .. }) && dev % 8 != 0 {
                return Err(Error::INVAL);
            }
        }
        self.backend.access(access)
    }

    /// `Backend::export_ipc`.
    pub fn export_ipc(&self, addr: usize, size: u64) -> Result<([u8; IPC_HANDLE], u64)> {
        if size == 0 || (addr as u64).checked_add(size).is_none() {
            return Err(Error::INVAL);
        }
        self.backend.export_ipc(addr, size)
    }

    /// `Backend::import_ipc`, recorded as an import (undone by
    /// `unimport`).
    pub fn import_ipc(&self, handle: &[u8; IPC_HANDLE], offset: u64, size: u64) -> Result<usize> {
        if size == 0
            || offset
                .checked_add(size)
                .is_none_or(|end| end > isize::MAX as u64)
        {
            return Err(Error::INVAL);
        }
        let dev = self.backend.import_ipc(handle, offset, size)?;
        let owner = Owner::Provider;
        self.record_import(
            dev,
            ImportRec {
                size,
                owner,
                mapped: true,
            },
        );
        Ok(dev)
    }

    /// Adds an import at `dev` to those recorded there.
    fn record_import(&self, dev: usize, rec: ImportRec) {
        self.imports
            .lock()
            .unwrap()
            .entry(dev)
            .or_default()
            .push(rec);
    }

    /// The UUID of the context's device (`Backend::device_uuid`).
    pub fn device_uuid(&self) -> Result<[u8; 16]> {
        self.backend.device_uuid()
    }

    /// Address of the context's abort word: 64 bytes the device reads and the
    /// host writes, zero until `fi_xpu_ctx_abort`; None when the backend
    /// cannot give host-visible memory.
    pub fn abort_word(&self) -> Option<usize> {
        *self.abort.get_or_init(|| {
            let a = match self.backend.alloc(64, 64, FI_XPU_ALLOC_HOST) {
                Ok(a) => a,
                Err(e) => {
                    warn!("XPU context: no memory for the abort word ({e:?}); device waits cannot be aborted");
                    return None;
                }
            };
            // SAFETY: a fresh host-visible allocation of 64 bytes.
            unsafe { std::ptr::write_bytes(a.addr as *mut u8, 0, 64) };
            Some(a.addr)
        })
    }

    /// Raises (`true`) or lowers the abort word; `-FI_ENOSYS` without one.
    pub fn set_abort(&self, raised: bool) -> Result<()> {
        let w = self.abort_word().ok_or(Error::NOSYS)?;
        // SAFETY: the abort word is a live, 8-byte aligned allocation of
        // this context; device code reads it with atomic loads.
        let w = unsafe { std::sync::atomic::AtomicU64::from_ptr(w as *mut u64) };
        w.store(raised as u64, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// Releases what the application left behind when its context closes.
    pub fn release_all(&self) {
        if let Some(Some(a)) = self.abort.get() {
            let _ = self.backend.free(*a);
        }
        let allocs: Vec<usize> = self
            .allocs
            .lock()
            .unwrap()
            .drain()
            .map(|(a, _)| a)
            .collect();
        let imports: Vec<(usize, Vec<ImportRec>)> = self.imports.lock().unwrap().drain().collect();
        if !allocs.is_empty() || !imports.is_empty() {
            warn!(
                "XPU context closed with {} allocation(s) and {} import(s) still live; releasing them",
                allocs.len(),
                imports.len()
            );
        }
        for a in allocs {
            let _ = self.backend.free(a);
        }
        for (dev, recs) in imports {
            for rec in recs {
                let _ = self.backend.unimport(dev, rec.mapped);
            }
        }
    }

    /// Whether `[addr, addr+size)` lies inside one live allocation or
    /// import, without wrapping: a provider's check of a buffer device code
    /// named before it hands the buffer to a transport.
    pub fn contains(&self, addr: usize, size: u64) -> bool {
        let Some(end) = (addr as u64).checked_add(size) else {
            return false;
        };
        let inside = |start: usize, len: u64| {
            addr >= start && (start as u64).checked_add(len).is_some_and(|e| end <= e)
        };
        self.allocs
            .lock()
            .unwrap()
            .iter()
            .any(|(&a, &(len, _))| inside(a, len))
            || self
                .imports
                .lock()
                .unwrap()
                .iter()
                .any(|(&a, recs)| recs.iter().any(|r| inside(a, r.size)))
    }

    pub fn live_counts(&self) -> (usize, usize) {
        (
            self.allocs.lock().unwrap().len(),
            self.imports.lock().unwrap().len(),
        )
    }
}

/// Which of `owner`'s imports at one address `unimport` undoes first: a
/// host one.
fn undo_index(recs: &[ImportRec], owner: Owner) -> Option<usize> {
    let mine = |r: &ImportRec| r.owner == owner;
    recs.iter()
        .rposition(|r| mine(r) && !r.mapped)
        .or_else(|| recs.iter().rposition(mine))
}

fn fd_is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only queries the descriptor table.
    unsafe { libc::fcntl(fd, libc::F_GETFD) >= 0 }
}

pub use fi_xpu_abi::fi_hmem_iface_name as iface_name;
