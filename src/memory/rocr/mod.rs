//! `FI_HMEM_ROCR` memory through the ROCm runtime (HSA), opened at run time
//! (`driver`), so that libfi_xpu.so links no vendor library.
//!
//! - Device allocations come from the GPU's coarse-grained global memory
//!   pool (`hsa_amd_memory_pool_allocate`); their fd
//!   (`FI_XPU_ALLOC_DMABUF`, `export`) is a DMA-BUF from
//!   `hsa_amd_portable_export_dmabuf`, which runtimes newer than ROCm 5.2
//!   have (`-FI_ENOSYS` without it).
//! - An imported fd is mapped for the GPU with `hsa_amd_interop_map_buffer`
//!   (a peer's DMA-BUF); one the runtime refuses (a memfd) is mapped into
//!   the host and locked, as host memory is.
//! - Host allocations (`FI_XPU_ALLOC_HOST`) are memfd mappings locked for
//!   the GPU with `hsa_amd_memory_lock`; host imports are locked the same
//!   way (`pinned`).
mod driver;

use super::backend::{Allocation, Backend, Import};
use super::pinned::{Pin, PinHow, Pinned};
use super::vendor::{within, Mapping};
use crate::error::{Error, Result};
use driver::*;
use fi_xpu_abi::{FI_XPU_ALLOC_DMABUF, FI_XPU_ALLOC_HOST};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

pub struct Rocr {
    drv: &'static Driver,
    gpu: Handle,
    pool: Handle,
    granule: usize,
    /// `hsa_amd_portable_export_dmabuf`, in newer runtimes than ROCm 5.2.
    export_dmabuf: Option<ExportDmabuf>,
    /// Device allocations: returned address -> (pool allocation, length).
    allocs: Mutex<HashMap<usize, (usize, usize)>>,
    /// Peers' DMA-BUFs mapped for the GPU by `import`.
    mapped: Mutex<HashMap<usize, Mapping>>,
    pinned: Pinned,
}

struct Agents {
    drv: &'static Driver,
    gpus: Vec<Handle>,
    error: Option<hsa_status_t>,
}

/// `hsa_iterate_agents` callback: collects the GPU agents.
unsafe extern "C" fn collect_gpu(agent: Handle, data: *mut c_void) -> hsa_status_t {
    // SAFETY: `data` is the `Agents` that `open` passes.
    let a = unsafe { &mut *data.cast::<Agents>() };
    let mut kind = u32::MAX;
    // SAFETY: the value of HSA_AGENT_INFO_DEVICE is a 32-bit enum.
    let r = unsafe {
        (a.drv.agent_get_info)(agent, HSA_AGENT_INFO_DEVICE, (&mut kind as *mut u32).cast())
    };
    if r != HSA_STATUS_SUCCESS {
        a.error = Some(r);
        return r;
    }
    if kind == HSA_DEVICE_TYPE_GPU {
        a.gpus.push(agent);
    }
    HSA_STATUS_SUCCESS
}

struct Pool {
    drv: &'static Driver,
    found: Option<(Handle, usize)>,
    error: Option<hsa_status_t>,
}

/// `hsa_amd_agent_iterate_memory_pools` callback: the first global,
/// coarse-grained pool the runtime allocates from, and its granule.
unsafe extern "C" fn find_pool(pool: Handle, data: *mut c_void) -> hsa_status_t {
    // SAFETY: `data` is the `Pool` that `open` passes.
    let p = unsafe { &mut *data.cast::<Pool>() };
    let drv = p.drv;
    let info = |attr: u32, out: *mut c_void| {
        // SAFETY: `out` points to a value of the attribute's type.
        unsafe { (drv.memory_pool_get_info)(pool, attr, out) }
    };
    let (mut segment, mut flags, mut allowed, mut granule) = (u32::MAX, 0u32, false, 0usize);
    for (attr, out) in [
        (
            HSA_AMD_MEMORY_POOL_INFO_SEGMENT,
            (&mut segment as *mut u32).cast(),
        ),
        (
            HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS,
            (&mut flags as *mut u32).cast(),
        ),
        (
            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED,
            (&mut allowed as *mut bool).cast(),
        ),
        (
            HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE,
            (&mut granule as *mut usize).cast::<c_void>(),
        ),
    ] {
        let r = info(attr, out);
        if r != HSA_STATUS_SUCCESS {
            p.error = Some(r);
            return r;
        }
    }
    if segment == HSA_AMD_SEGMENT_GLOBAL
        && flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED != 0
        && allowed
    {
        p.found = Some((pool, granule));
        return HSA_STATUS_INFO_BREAK;
    }
    HSA_STATUS_SUCCESS
}

// SAFETY: HSA handles are plain numbers, usable from any thread.
unsafe impl Send for Rocr {}
// SAFETY: as above; the maps are behind mutexes.
unsafe impl Sync for Rocr {}

impl Rocr {
    /// Opens the runtime and finds GPU `ordinal` (in the runtime's agent
    /// order) and its device memory pool: `-FI_ENODEV` without a runtime,
    /// GPU or such ordinal, `-FI_ENOSYS` when the runtime lacks an entry
    /// point; one log line each.
    pub fn open(ordinal: u64) -> Result<Rocr> {
        let drv = Driver::open()?;
        let mut agents = Agents {
            drv,
            gpus: Vec::new(),
            error: None,
        };
        // SAFETY: the callback reads `agents` through `data` during the call.
        let r = unsafe { (drv.iterate_agents)(collect_gpu, (&mut agents as *mut Agents).cast()) };
        drv.check("hsa_iterate_agents", agents.error.unwrap_or(r))?;
        let Some(&gpu) = usize::try_from(ordinal)
            .ok()
            .and_then(|i| agents.gpus.get(i))
        else {
            crate::warn!(
                "fi_xpu_ctx_open: FI_HMEM_ROCR: no GPU {ordinal} ({} found)",
                agents.gpus.len()
            );
            return Err(Error::NODEV);
        };
        let mut pool = Pool {
            drv,
            found: None,
            error: None,
        };
        // SAFETY: as above, with `pool`.
        let r =
            unsafe { (drv.iterate_memory_pools)(gpu, find_pool, (&mut pool as *mut Pool).cast()) };
        let r = pool.error.unwrap_or(if r == HSA_STATUS_INFO_BREAK {
            HSA_STATUS_SUCCESS
        } else {
            r
        });
        drv.check("hsa_amd_agent_iterate_memory_pools", r)?;
        let Some((pool, granule)) = pool.found else {
            crate::warn!("fi_xpu_ctx_open: FI_HMEM_ROCR: GPU {ordinal} has no coarse-grained global memory pool");
            return Err(Error::NODEV);
        };
        Ok(Rocr {
            drv,
            gpu,
            pool,
            granule: granule.max(1),
            // SAFETY: the prototype of upstream's hsa_ext_amd.h.
            export_dmabuf: unsafe {
                (drv.library()).function::<ExportDmabuf>("hsa_amd_portable_export_dmabuf")
            },
            allocs: Mutex::default(),
            mapped: Mutex::default(),
            pinned: Pinned::default(),
        })
    }

    /// A DMA-BUF for `[addr, addr + size)` of device memory, and the offset
    /// of `addr` in it.
    fn dmabuf(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        let Some(export) = self.export_dmabuf else {
            crate::warn!(
                "rocr: {LIBRARY} has no hsa_amd_portable_export_dmabuf (newer than ROCm 5.2): device memory cannot be exported"
            );
            return Err(Error::NOSYS);
        };
        let (mut fd, mut off): (c_int, u64) = (-1, 0);
        // SAFETY: out-pointers to locals.
        self.drv.check("hsa_amd_portable_export_dmabuf", unsafe {
            export(addr as *const c_void, size as usize, &mut fd, &mut off)
        })?;
        if fd < 0 {
            return Err(Error::IO);
        }
        // SAFETY: the runtime hands us a new descriptor.
        Ok((unsafe { OwnedFd::from_raw_fd(fd) }, off))
    }

    fn alloc_device(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        let d = self.drv;
        let slack = if alignment as usize > self.granule {
            alignment as usize
        } else {
            0
        };
        let len = (size as usize + slack).div_ceil(self.granule) * self.granule;
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointer to a local.
        d.check("hsa_amd_memory_pool_allocate", unsafe {
            (d.memory_pool_allocate)(self.pool, len, 0, &mut p)
        })?;
        let base = p as usize;
        let addr = if slack != 0 {
            base.next_multiple_of(alignment as usize)
        } else {
            base
        };
        let fd = if flags & FI_XPU_ALLOC_DMABUF != 0 {
            match self.dmabuf(addr, size) {
                Ok(x) => Some(x),
                Err(e) => {
                    // SAFETY: the allocation just made, freed once.
                    unsafe { (d.memory_pool_free)(p) };
                    return Err(e);
                }
            }
        } else {
            None
        };
        self.allocs
            .lock()
            .unwrap()
            .insert(addr, (base, len - (addr - base)));
        let (fd, offset) = fd.map_or((None, 0), |(f, o)| (Some(f), o));
        Ok(Allocation { addr, fd, offset })
    }

    fn import_fd(&self, req: &Import, fd: BorrowedFd) -> Result<usize> {
        let d = self.drv;
        let mut gpu = self.gpu;
        let (mut size, mut p, mut meta_size, mut meta) =
            (0usize, std::ptr::null_mut(), 0usize, std::ptr::null());
        // SAFETY: one agent; out-pointers to locals; the runtime takes its
        // own reference to the buffer.
        let r = unsafe {
            (d.interop_map_buffer)(
                1,
                &mut gpu,
                fd.as_raw_fd(),
                0,
                &mut size,
                &mut p,
                &mut meta_size,
                &mut meta,
            )
        };
        if r == HSA_STATUS_ERROR_INVALID_ARGUMENT {
            // Not a DMA-BUF the GPU can map: host memory (a memfd).
            return self.pinned.import_fd(self, req);
        }
        d.check("hsa_amd_interop_map_buffer", r)?;
        let base = p as usize;
        let unmap = || {
            // SAFETY: the mapping just made, undone once.
            unsafe { (d.interop_unmap_buffer)(p) };
        };
        if req.offset + req.size > size as u64 {
            unmap();
            return Err(Error::INVAL);
        }
        let fd = Mapping::keep(req, fd).inspect_err(|_| unmap())?;
        let dev = base + req.offset as usize;
        let m = Mapping {
            base,
            len: size,
            fd,
        };
        self.mapped.lock().unwrap().insert(dev, m);
        Ok(dev)
    }

    fn owns(&self, addr: usize, size: u64) -> bool {
        let allocs = self.allocs.lock().unwrap();
        allocs
            .iter()
            .any(|(&a, &(_, len))| within(addr, size, a, len))
            || (self.mapped.lock().unwrap().values()).any(|m| within(addr, size, m.base, m.len))
    }
}

impl Pin for Rocr {
    /// `hsa_amd_memory_lock` for this GPU; the agent address must be the
    /// host one.
    fn pin(&self, base: usize, len: usize, _how: PinHow) -> Result<()> {
        let mut gpu = self.gpu;
        let mut agent_ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: a mapping of this process; one agent.
        self.drv.check("hsa_amd_memory_lock", unsafe {
            (self.drv.memory_lock)(base as *mut c_void, len, &mut gpu, 1, &mut agent_ptr)
        })?;
        if agent_ptr as usize != base {
            crate::warn!(
                "rocr: locked host memory at {base:#x} has GPU address {agent_ptr:?}; fi_xpu needs one address for both"
            );
            self.unpin(base);
            return Err(Error::OPNOTSUPP);
        }
        Ok(())
    }

    fn unpin(&self, base: usize) {
        // SAFETY: a range `pin` locked.
        unsafe { (self.drv.memory_unlock)(base as *mut c_void) };
    }
}

impl Backend for Rocr {
    fn alloc(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        if flags & FI_XPU_ALLOC_HOST != 0 {
            self.pinned.alloc(self, size, alignment, flags)
        } else {
            self.alloc_device(size, alignment, flags)
        }
    }

    fn free(&self, addr: usize) -> Result<()> {
        if let Some((base, _)) = self.allocs.lock().unwrap().remove(&addr) {
            // SAFETY: a pool allocation of this backend, freed once.
            unsafe { (self.drv.memory_pool_free)(base as *mut c_void) };
            return Ok(());
        }
        self.pinned.free(self, addr).unwrap_or(Err(Error::INVAL))
    }

    fn import(&self, req: &Import) -> Result<usize> {
        match req.fd {
            Some(fd) => self.import_fd(req, fd),
            None => {
                let reachable = self.owns(req.host_addr, req.size);
                self.pinned.import_host(self, req, reachable)
            }
        }
    }

    fn unimport(&self, dev_addr: usize, mapped: bool) -> Result<()> {
        if mapped {
            if let Some(m) = self.mapped.lock().unwrap().remove(&dev_addr) {
                // SAFETY: a mapping of this backend, undone once.
                unsafe { (self.drv.interop_unmap_buffer)(m.base as *mut c_void) };
                return Ok(());
            }
        }
        self.pinned.unimport(self, dev_addr, mapped);
        Ok(())
    }

    fn export(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        if let Some(r) = Mapping::export(&self.mapped.lock().unwrap(), addr, size) {
            return r;
        }
        if let Some(r) = self.pinned.export(addr, size) {
            return r;
        }
        self.dmabuf(addr, size)
    }
}

impl Drop for Rocr {
    fn drop(&mut self) {
        for (_, (base, _)) in self.allocs.lock().unwrap().drain() {
            // SAFETY: live pool allocations, freed once.
            unsafe { (self.drv.memory_pool_free)(base as *mut c_void) };
        }
        for (_, m) in self.mapped.lock().unwrap().drain() {
            // SAFETY: live mappings, undone once.
            unsafe { (self.drv.interop_unmap_buffer)(m.base as *mut c_void) };
        }
        self.pinned.release(self);
    }
}
