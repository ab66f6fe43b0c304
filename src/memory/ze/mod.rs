//! `FI_HMEM_ZE` memory through Level Zero, opened at run time (`driver`),
//! so that libfi_xpu.so links no vendor library.
//!
//! - Device allocations (`zeMemAllocDevice`) and host allocations
//!   (`FI_XPU_ALLOC_HOST`, `zeMemAllocHost`) are made exportable as DMA-BUF
//!   (`ze_external_memory_export_desc_t`); their fd comes from
//!   `zeMemGetAllocProperties` with `ze_external_memory_export_fd_t`.
//! - An imported fd is a DMA-BUF, imported with `zeMemAllocDevice` and
//!   `ze_external_memory_import_fd_t` (the Intel GPU case: a NIC's doorbell
//!   page or a peer's memory handed over as a DMA-BUF).
//! - Level Zero has no registration of arbitrary host memory in its core
//!   API: a host import is accepted only for memory of this context.
mod driver;

use super::backend::{Allocation, Backend, Import};
use super::vendor::{page_size, within};
use crate::error::{Error, Result};
use driver::*;
use fi_xpu_abi::{FI_XPU_ALLOC_DMABUF, FI_XPU_ALLOC_HOST};
use std::collections::HashMap;
use std::ffi::c_void;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

pub struct Ze {
    drv: &'static Driver,
    ctx: Handle,
    dev: Handle,
    /// Allocations: address -> size.
    allocs: Mutex<HashMap<usize, usize>>,
    /// DMA-BUF imports: device address -> (base to free, mapped length).
    imports: Mutex<HashMap<usize, (usize, usize)>>,
}

// SAFETY: Level Zero handles are usable from any thread.
unsafe impl Send for Ze {}
// SAFETY: as above; the maps are behind mutexes.
unsafe impl Sync for Ze {}

const EXPORT_DMABUF: ze_external_memory_export_desc_t = ze_external_memory_export_desc_t {
    stype: ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_DESC,
    pNext: std::ptr::null(),
    flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
};

impl Ze {
    /// Opens the loader and a context on device `ordinal`, counted over the
    /// devices of every driver in the loader's order: `-FI_ENODEV` without
    /// a loader, driver or such device, `-FI_ENOSYS` when the loader lacks
    /// an entry point; one log line each.
    pub fn open(ordinal: u64) -> Result<Ze> {
        let drv = Driver::open()?;
        let mut n = 0u32;
        // SAFETY: a count query with a NULL array.
        drv.check("zeDriverGet", unsafe {
            (drv.driver_get)(&mut n, std::ptr::null_mut())
        })?;
        let mut drivers = vec![std::ptr::null_mut(); n as usize];
        // SAFETY: an array of `n` handles.
        drv.check("zeDriverGet", unsafe {
            (drv.driver_get)(&mut n, drivers.as_mut_ptr())
        })?;
        drivers.truncate(n as usize);
        let mut seen = 0u64;
        for d in drivers {
            let mut m = 0u32;
            // SAFETY: a count query with a NULL array.
            drv.check("zeDeviceGet", unsafe {
                (drv.device_get)(d, &mut m, std::ptr::null_mut())
            })?;
            if ordinal >= seen + m as u64 {
                seen += m as u64;
                continue;
            }
            let mut devs = vec![std::ptr::null_mut(); m as usize];
            // SAFETY: an array of `m` handles.
            drv.check("zeDeviceGet", unsafe {
                (drv.device_get)(d, &mut m, devs.as_mut_ptr())
            })?;
            let Some(&dev) = devs.get((ordinal - seen) as usize) else {
                break;
            };
            let desc = ze_context_desc_t {
                stype: ZE_STRUCTURE_TYPE_CONTEXT_DESC,
                pNext: std::ptr::null(),
                flags: 0,
            };
            let mut ctx: Handle = std::ptr::null_mut();
            // SAFETY: pointers to locals.
            drv.check("zeContextCreate", unsafe {
                (drv.context_create)(d, &desc, &mut ctx)
            })?;
            return Ok(Ze {
                drv,
                ctx,
                dev,
                allocs: Mutex::default(),
                imports: Mutex::default(),
            });
        }
        crate::warn!("fi_xpu_ctx_open: FI_HMEM_ZE: no device {ordinal} ({seen} found)");
        Err(Error::NODEV)
    }

    /// A DMA-BUF fd of the allocation at `base`.
    fn export_fd(&self, base: usize) -> Result<OwnedFd> {
        let mut efd = ze_external_memory_fd_t {
            stype: ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_EXPORT_FD,
            pNext: std::ptr::null(),
            flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
            fd: -1,
        };
        let mut props = ze_memory_allocation_properties_t {
            stype: ZE_STRUCTURE_TYPE_MEMORY_ALLOCATION_PROPERTIES,
            pNext: (&mut efd as *mut ze_external_memory_fd_t).cast(),
            type_: 0,
            id: 0,
            pageSize: 0,
        };
        // SAFETY: pointers to locals chained as ze_api.h describes.
        self.drv.check("zeMemGetAllocProperties", unsafe {
            (self.drv.mem_get_alloc_properties)(
                self.ctx,
                base as *const c_void,
                &mut props,
                std::ptr::null_mut(),
            )
        })?;
        if efd.fd < 0 {
            crate::warn!("ze: zeMemGetAllocProperties returned no DMA-BUF fd");
            return Err(Error::IO);
        }
        // SAFETY: the driver hands us a new descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(efd.fd) })
    }

    fn free_mem(&self, p: usize) {
        // SAFETY: memory this backend allocated or imported, freed once.
        unsafe { (self.drv.mem_free)(self.ctx, p as *mut c_void) };
    }

    fn import_fd(&self, req: &Import, fd: BorrowedFd) -> Result<usize> {
        let p = page_size();
        let len = (req.offset + req.size).div_ceil(p as u64) as usize * p;
        let ifd = ze_external_memory_fd_t {
            stype: ZE_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMPORT_FD,
            pNext: std::ptr::null(),
            flags: ZE_EXTERNAL_MEMORY_TYPE_FLAG_DMA_BUF,
            fd: fd.as_raw_fd(),
        };
        let desc = ze_device_mem_alloc_desc_t {
            stype: ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC,
            pNext: (&ifd as *const ze_external_memory_fd_t).cast(),
            flags: 0,
            ordinal: 0,
        };
        let mut base: *mut c_void = std::ptr::null_mut();
        // SAFETY: pointers to locals chained as ze_api.h describes; the
        // driver takes its own reference to the DMA-BUF.
        let r =
            unsafe { (self.drv.mem_alloc_device)(self.ctx, &desc, len, 0, self.dev, &mut base) };
        self.drv.check("zeMemAllocDevice (DMA-BUF import)", r)?;
        let dev = base as usize + req.offset as usize;
        self.imports
            .lock()
            .unwrap()
            .insert(dev, (base as usize, len));
        Ok(dev)
    }

    fn owns(&self, addr: usize, size: u64) -> bool {
        let allocs = self.allocs.lock().unwrap();
        allocs.iter().any(|(&a, &len)| within(addr, size, a, len))
            || (self.imports.lock().unwrap().values()).any(|&(b, len)| within(addr, size, b, len))
    }
}

impl Backend for Ze {
    fn alloc(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        let d = self.drv;
        let mut p: *mut c_void = std::ptr::null_mut();
        let export = (&EXPORT_DMABUF as *const ze_external_memory_export_desc_t).cast();
        if flags & FI_XPU_ALLOC_HOST != 0 {
            let desc = ze_host_mem_alloc_desc_t {
                stype: ZE_STRUCTURE_TYPE_HOST_MEM_ALLOC_DESC,
                pNext: export,
                flags: 0,
            };
            // SAFETY: pointers to locals and a static descriptor.
            d.check("zeMemAllocHost", unsafe {
                (d.mem_alloc_host)(self.ctx, &desc, size as usize, alignment as usize, &mut p)
            })?;
        } else {
            let desc = ze_device_mem_alloc_desc_t {
                stype: ZE_STRUCTURE_TYPE_DEVICE_MEM_ALLOC_DESC,
                pNext: export,
                flags: 0,
                ordinal: 0,
            };
            // SAFETY: as above.
            d.check("zeMemAllocDevice", unsafe {
                (d.mem_alloc_device)(
                    self.ctx,
                    &desc,
                    size as usize,
                    alignment as usize,
                    self.dev,
                    &mut p,
                )
            })?;
        }
        let addr = p as usize;
        let fd = if flags & FI_XPU_ALLOC_DMABUF != 0 {
            match self.export_fd(addr) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    self.free_mem(addr);
                    return Err(e);
                }
            }
        } else {
            None
        };
        self.allocs.lock().unwrap().insert(addr, size as usize);
        Ok(Allocation {
            addr,
            fd,
            offset: 0,
        })
    }

    fn free(&self, addr: usize) -> Result<()> {
        self.allocs
            .lock()
            .unwrap()
            .remove(&addr)
            .ok_or(Error::INVAL)?;
        self.free_mem(addr);
        Ok(())
    }

    fn import(&self, req: &Import) -> Result<usize> {
        if let Some(fd) = req.fd {
            return self.import_fd(req, fd);
        }
        if self.owns(req.host_addr, req.size) {
            return Ok(req.host_addr);
        }
        crate::warn!(
            "fi_xpu_import: FI_HMEM_ZE maps host memory only as a DMA-BUF fd (FI_XPU_IMPORT_DMABUF) or from FI_XPU_ALLOC_HOST; [{:#x}, +{}) is neither",
            req.host_addr,
            req.size
        );
        Err(Error::OPNOTSUPP)
    }

    fn unimport(&self, dev_addr: usize, mapped: bool) -> Result<()> {
        if mapped {
            if let Some((base, _)) = self.imports.lock().unwrap().remove(&dev_addr) {
                self.free_mem(base);
            }
        }
        Ok(())
    }

    fn export(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        let d = self.drv;
        let mut base: *mut c_void = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: out-pointers to locals.
        let r = unsafe {
            (d.mem_get_address_range)(self.ctx, addr as *const c_void, &mut base, &mut len)
        };
        if r != ZE_RESULT_SUCCESS {
            crate::warn!(
                "export: [{addr:#x}, +{size}) is not Level Zero memory of this context ({})",
                d.name(r)
            );
            return Err(Error::OPNOTSUPP);
        }
        let off = (addr - base as usize) as u64;
        if off + size > len as u64 {
            crate::warn!("export: [{addr:#x}, +{size}) runs past its Level Zero allocation");
            return Err(Error::INVAL);
        }
        Ok((self.export_fd(base as usize)?, off))
    }
}

impl Drop for Ze {
    fn drop(&mut self) {
        for (a, _) in self.allocs.lock().unwrap().drain() {
            self.free_mem(a);
        }
        for (_, (base, _)) in self.imports.lock().unwrap().drain() {
            self.free_mem(base);
        }
        // SAFETY: the context created in `open`, destroyed once.
        unsafe { (self.drv.context_destroy)(self.ctx) };
    }
}
