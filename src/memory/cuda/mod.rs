//! `FI_HMEM_CUDA` memory through the CUDA driver API, opened at run time
//! (`driver`), so that libfi_xpu.so links no vendor library.
//!
//! - Device allocations are `cuMemCreate` allocations with a POSIX
//!   file-descriptor shareable handle, mapped with `cuMemMap` and made
//!   accessible with `cuMemSetAccess`; their fd (`FI_XPU_ALLOC_DMABUF`,
//!   `export`) is that shareable handle, which a peer's import maps with
//!   `cuMemImportFromShareableHandle`.
//! - Host allocations (`FI_XPU_ALLOC_HOST`) are memfd mappings, as for
//!   `FI_HMEM_SYSTEM`, pinned and mapped to the device with
//!   `cuMemHostRegister`; CUDA's unified addressing makes the device address
//!   the host one.
//! - An imported fd that is not a CUDA handle (a memfd, a DMA-BUF the host
//!   can map) is mapped into the host and registered the same way; an
//!   imported host address is registered.
//! - Exporting device memory the context did not allocate (an application's
//!   `cuMemAlloc`) gives a DMA-BUF (`cuMemGetHandleForAddressRange`) of its
//!   whole allocation, for NIC registration.
//! - Device memory the context did not allocate (an application's
//!   `cuMemAlloc`) is shared with another process through a legacy IPC
//!   handle (`export_ipc`: `cuIpcGetMemHandle`; `import_ipc`:
//!   `cuIpcOpenMemHandle`), which a DMA-BUF cannot do.
//! - The host reaches device memory only through the driver (`access`):
//!   asynchronous copies, memsets and `cuStreamWriteValue64` on a stream
//!   of the backend's own, created `CU_STREAM_NON_BLOCKING` so that it
//!   never waits for (or makes wait) the legacy stream a running kernel
//!   may sit on, each followed by a wait on that stream alone.
mod driver;

use super::backend::{Access, Allocation, Backend, Import, IPC_HANDLE};
use super::pinned::{Pin, PinHow, Pinned};
use super::vendor::{page_size, within, Mapping};
use crate::error::{Error, Result};
use driver::*;
use fi_xpu_abi::{FI_XPU_ALLOC_DMABUF, FI_XPU_ALLOC_HOST};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Mutex;

/// A device allocation: the physical allocation and the range it is mapped at.
struct DevAlloc {
    handle: CUmemGenericAllocationHandle,
    len: usize,
}

pub struct Cuda {
    drv: &'static Driver,
    dev: CUdevice,
    ctx: CUcontext,
    granularity: usize,
    allocs: Mutex<HashMap<usize, DevAlloc>>,
    /// Peers' allocations mapped by `import` (their fd: the handle fd).
    mapped: Mutex<HashMap<usize, Mapping>>,
    /// Host allocations, host-mapped fds and host imports.
    pinned: Pinned,
    /// The private stream of `access` (as an address; 0 until first use).
    stream: Mutex<usize>,
    /// Peers' allocations opened from IPC handles: device address handed
    /// out -> the base `cuIpcOpenMemHandle` returned and how many opens
    /// (the driver may hand out one mapping for a handle opened again),
    /// each closed once.
    ipc: Mutex<HashMap<usize, (usize, u32)>>,
}

// SAFETY: CUcontext is an opaque driver handle, usable from any thread once
// made current there (every entry point does).
unsafe impl Send for Cuda {}
// SAFETY: as above; the maps are behind mutexes.
unsafe impl Sync for Cuda {}

fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

impl Cuda {
    /// Opens the driver and retains the primary context of device
    /// `ordinal`: `-FI_ENODEV` without a driver, device or such ordinal,
    /// `-FI_ENOSYS` when the driver lacks an entry point; one log line each.
    pub fn open(ordinal: u64) -> Result<Cuda> {
        let drv = Driver::open()?;
        let Ok(ord) = c_int::try_from(ordinal) else {
            crate::warn!("fi_xpu_ctx_open: FI_HMEM_CUDA: no device {ordinal}");
            return Err(Error::NODEV);
        };
        let mut dev: CUdevice = 0;
        // SAFETY: out-pointer to a local.
        drv.check(&format!("cuDeviceGet({ord})"), unsafe {
            (drv.device_get)(&mut dev, ord)
        })?;
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: as above; `dev` came from cuDeviceGet.
        drv.check("cuDevicePrimaryCtxRetain", unsafe {
            (drv.primary_ctx_retain)(&mut ctx, dev)
        })?;
        let mut c = Cuda {
            drv,
            dev,
            ctx,
            granularity: 0,
            allocs: Mutex::default(),
            mapped: Mutex::default(),
            pinned: Pinned::default(),
            stream: Mutex::new(0),
            ipc: Mutex::default(),
        };
        c.current()?;
        let mut g = 0usize;
        let prop = c.prop();
        // SAFETY: pointers to locals.
        drv.check("cuMemGetAllocationGranularity", unsafe {
            (drv.mem_get_allocation_granularity)(&mut g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)
        })?;
        if g == 0 || !g.is_power_of_two() {
            crate::warn!("cuda: the driver reports an allocation granularity of {g}");
            return Err(Error::IO);
        }
        c.granularity = g;
        Ok(c)
    }

    /// Makes the context current on the calling thread.
    fn current(&self) -> Result<()> {
        // SAFETY: a primary context this backend retains.
        self.drv.check("cuCtxSetCurrent", unsafe {
            (self.drv.ctx_set_current)(self.ctx)
        })
    }

    fn prop(&self) -> CUmemAllocationProp {
        CUmemAllocationProp {
            type_: CU_MEM_ALLOCATION_TYPE_PINNED,
            requestedHandleTypes: CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            location: CUmemLocation {
                type_: CU_MEM_LOCATION_TYPE_DEVICE,
                id: self.dev,
            },
            win32HandleMetaData: std::ptr::null_mut(),
            allocFlags: CUmemAllocFlags::default(),
        }
    }

    /// Reserves `len` bytes of device address space, maps `handle` there and
    /// makes it readable and writable by this device. Undoes what it did
    /// on failure; the handle stays the caller's.
    fn map(&self, handle: CUmemGenericAllocationHandle, len: usize, align: usize) -> Result<usize> {
        let d = self.drv;
        let mut va: CUdeviceptr = 0;
        // SAFETY: out-pointer to a local.
        d.check("cuMemAddressReserve", unsafe {
            (d.mem_address_reserve)(&mut va, len, align, 0, 0)
        })?;
        // SAFETY: maps a live handle at the start of our own reservation.
        let r = d.check("cuMemMap", unsafe { (d.mem_map)(va, len, 0, handle, 0) });
        if let Err(e) = r {
            // SAFETY: the reservation just made.
            unsafe { (d.mem_address_free)(va, len) };
            return Err(e);
        }
        let access = CUmemAccessDesc {
            location: CUmemLocation {
                type_: CU_MEM_LOCATION_TYPE_DEVICE,
                id: self.dev,
            },
            flags: CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range mapped above; one descriptor.
        let r = d.check("cuMemSetAccess", unsafe {
            (d.mem_set_access)(va, len, &access, 1)
        });
        if let Err(e) = r {
            self.unmap(va as usize, len);
            return Err(e);
        }
        Ok(va as usize)
    }

    fn unmap(&self, va: usize, len: usize) {
        // SAFETY: a range `map` mapped and nothing hands out any more.
        unsafe {
            (self.drv.mem_unmap)(va as CUdeviceptr, len);
            (self.drv.mem_address_free)(va as CUdeviceptr, len);
        }
    }

    /// The device address of host memory pinned and mapped with
    /// `cuMemHostRegister`: with unified addressing, the host address.
    fn device_pointer(&self, host: usize) -> Result<usize> {
        let mut d: CUdeviceptr = 0;
        // SAFETY: out-pointer to a local; `host` lies in a registered range.
        self.drv.check("cuMemHostGetDevicePointer", unsafe {
            (self.drv.mem_host_get_device_pointer)(&mut d, host as *mut c_void, 0)
        })?;
        if d as usize != host {
            crate::warn!(
                "cuda: host memory at {host:#x} has device address {d:#x}; fi_xpu needs unified addressing"
            );
            return Err(Error::OPNOTSUPP);
        }
        Ok(host)
    }

    fn alloc_device(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        let d = self.drv;
        let len = round_up(size as usize, self.granularity);
        let prop = self.prop();
        let mut h: CUmemGenericAllocationHandle = 0;
        // SAFETY: pointers to locals.
        d.check("cuMemCreate", unsafe {
            (d.mem_create)(&mut h, len, &prop, 0)
        })?;
        let release = || {
            // SAFETY: the handle created above, released once.
            unsafe { (d.mem_release)(h) };
        };
        let align = (alignment as usize).max(self.granularity);
        let va = match self.map(h, len, align) {
            Ok(va) => va,
            Err(e) => {
                release();
                return Err(e);
            }
        };
        let fd = if flags & FI_XPU_ALLOC_DMABUF != 0 {
            match self.shareable(h) {
                Ok(fd) => Some(fd),
                Err(e) => {
                    self.unmap(va, len);
                    release();
                    return Err(e);
                }
            }
        } else {
            None
        };
        self.allocs
            .lock()
            .unwrap()
            .insert(va, DevAlloc { handle: h, len });
        Ok(Allocation {
            addr: va,
            fd,
            offset: 0,
        })
    }

    /// The POSIX file-descriptor shareable handle of an allocation.
    fn shareable(&self, h: CUmemGenericAllocationHandle) -> Result<OwnedFd> {
        let mut fd: c_int = -1;
        // SAFETY: for this handle type the driver writes an int.
        self.drv.check("cuMemExportToShareableHandle", unsafe {
            (self.drv.mem_export_to_shareable_handle)(
                (&mut fd as *mut c_int).cast(),
                h,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        })?;
        if fd < 0 {
            return Err(Error::IO);
        }
        // SAFETY: the driver hands us a new descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The backend's own non-blocking stream, created on first use.
    fn stream(&self) -> Result<CUstream> {
        let mut s = self.stream.lock().unwrap();
        if *s == 0 {
            let mut st: CUstream = std::ptr::null_mut();
            // SAFETY: out-pointer to a local; the context is current.
            self.drv.check("cuStreamCreate", unsafe {
                (self.drv.stream_create)(&mut st, CU_STREAM_NON_BLOCKING)
            })?;
            *s = st as usize;
        }
        Ok(*s as CUstream)
    }

    /// One host access on the private stream, waited for there.
    fn access_on_stream(&self, a: Access) -> Result<()> {
        let d = self.drv;
        let st = self.stream()?;
        // SAFETY: the range is live memory of this context (checked by
        // `Memory::access`); host buffers are the borrowed slices, valid
        // until the synchronisation below returns.
        let (what, r) = unsafe {
            match a {
                Access::Probe => return Ok(()),
                Access::Write { dev, src } => (
                    "cuMemcpyHtoDAsync",
                    (d.memcpy_htod_async)(dev as CUdeviceptr, src.as_ptr().cast(), src.len(), st),
                ),
                Access::Read { dev, dst } => (
                    "cuMemcpyDtoHAsync",
                    (d.memcpy_dtoh_async)(
                        dst.as_mut_ptr().cast(),
                        dev as CUdeviceptr,
                        dst.len(),
                        st,
                    ),
                ),
                Access::Set { dev, len, byte } => (
                    "cuMemsetD8Async",
                    (d.memset_d8_async)(dev as CUdeviceptr, byte, len, st),
                ),
                Access::Store64 { dev, value } => {
                    let r = (d.stream_write_value64)(
                        st,
                        dev as CUdeviceptr,
                        value,
                        CU_STREAM_WRITE_VALUE_DEFAULT,
                    );
                    if r == CUDA_ERROR_NOT_SUPPORTED {
                        // A device without stream memory operations: the
                        // 8 bytes as one copy, still on this stream.
                        let v = value.to_ne_bytes();
                        let r = (d.memcpy_htod_async)(dev as CUdeviceptr, v.as_ptr().cast(), 8, st);
                        d.check("cuMemcpyHtoDAsync", r)?;
                        // `v` must outlive the copy: wait here.
                        return d.check("cuStreamSynchronize", (d.stream_synchronize)(st));
                    }
                    ("cuStreamWriteValue64", r)
                }
            }
        };
        d.check(what, r)?;
        // SAFETY: the stream created above.
        d.check("cuStreamSynchronize", unsafe { (d.stream_synchronize)(st) })
    }

    /// Whether `[addr, addr + size)` is device memory of this context.
    fn owns(&self, addr: usize, size: u64) -> bool {
        let allocs = self.allocs.lock().unwrap();
        allocs.iter().any(|(&a, r)| within(addr, size, a, r.len))
            || (self.mapped.lock().unwrap().values()).any(|m| within(addr, size, m.base, m.len))
    }

    fn import_fd(&self, req: &Import, fd: BorrowedFd) -> Result<usize> {
        let d = self.drv;
        let mut h: CUmemGenericAllocationHandle = 0;
        // SAFETY: for this handle type the OS handle is the fd itself.
        let r = unsafe {
            (d.mem_import_from_shareable_handle)(
                &mut h,
                fd.as_raw_fd() as usize as *mut c_void,
                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        };
        if matches!(
            r,
            CUDA_ERROR_INVALID_VALUE | CUDA_ERROR_INVALID_HANDLE | CUDA_ERROR_NOT_SUPPORTED
        ) {
            // Not a CUDA allocation: host memory (a memfd) or a DMA-BUF the
            // host can map.
            return self.pinned.import_fd(self, req);
        }
        d.check("cuMemImportFromShareableHandle", r)?;
        let len = round_up((req.offset + req.size) as usize, self.granularity);
        let mapped = self.map(h, len, self.granularity);
        // SAFETY: the mapping (if any) keeps the allocation; the handle goes.
        unsafe { (d.mem_release)(h) };
        let base = mapped?;
        let fd = Mapping::keep(req, fd).inspect_err(|_| self.unmap(base, len))?;
        let dev = base + req.offset as usize;
        let m = Mapping { base, len, fd };
        self.mapped.lock().unwrap().insert(dev, m);
        Ok(dev)
    }

    /// A DMA-BUF of the whole allocation holding `addr` (memory this context
    /// did not allocate), and the offset of `addr` in it.
    fn dmabuf(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        let d = self.drv;
        let (mut base, mut len): (CUdeviceptr, usize) = (0, 0);
        // SAFETY: out-pointers to locals.
        let r = unsafe { (d.mem_get_address_range)(&mut base, &mut len, addr as CUdeviceptr) };
        if r != CUDA_SUCCESS {
            crate::warn!(
                "export: [{addr:#x}, +{size}) is neither memory of this context nor CUDA device memory ({})",
                d.name(r)
            );
            return Err(Error::OPNOTSUPP);
        }
        let off = addr as u64 - base;
        if off + size > len as u64 {
            crate::warn!("export: [{addr:#x}, +{size}) runs past its CUDA allocation");
            return Err(Error::INVAL);
        }
        let mut fd: c_int = -1;
        // SAFETY: for this handle type the driver writes an int.
        d.check("cuMemGetHandleForAddressRange", unsafe {
            (d.mem_get_handle_for_address_range)(
                (&mut fd as *mut c_int).cast(),
                base,
                round_up(len, page_size()),
                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        })?;
        if fd < 0 {
            return Err(Error::IO);
        }
        // SAFETY: the driver hands us a new descriptor.
        Ok((unsafe { OwnedFd::from_raw_fd(fd) }, off))
    }
}

impl Backend for Cuda {
    fn alloc(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        self.current()?;
        if flags & FI_XPU_ALLOC_HOST != 0 {
            self.pinned.alloc(self, size, alignment, flags)
        } else {
            self.alloc_device(size, alignment, flags)
        }
    }

    fn free(&self, addr: usize) -> Result<()> {
        self.current()?;
        if let Some(a) = self.allocs.lock().unwrap().remove(&addr) {
            self.unmap(addr, a.len);
            // SAFETY: the handle of this allocation, released once.
            unsafe { (self.drv.mem_release)(a.handle) };
            return Ok(());
        }
        self.pinned.free(self, addr).unwrap_or(Err(Error::INVAL))
    }

    fn import(&self, req: &Import) -> Result<usize> {
        self.current()?;
        match req.fd {
            Some(fd) => self.import_fd(req, fd),
            None => {
                let reachable = self.owns(req.host_addr, req.size);
                self.pinned.import_host(self, req, reachable)
            }
        }
    }

    fn unimport(&self, dev_addr: usize, mapped: bool) -> Result<()> {
        self.current()?;
        if mapped {
            let opened = {
                let mut ipc = self.ipc.lock().unwrap();
                let base = ipc.get_mut(&dev_addr).map(|(base, opens)| {
                    *opens -= 1;
                    (*base, *opens == 0)
                });
                if let Some((_, true)) = base {
                    ipc.remove(&dev_addr);
                }
                base
            };
            if let Some((base, _)) = opened {
                // SAFETY: a base cuIpcOpenMemHandle returned, closed once
                // per open.
                return self.drv.check("cuIpcCloseMemHandle", unsafe {
                    (self.drv.ipc_close_mem_handle)(base as CUdeviceptr)
                });
            }
            if let Some(m) = self.mapped.lock().unwrap().remove(&dev_addr) {
                self.unmap(m.base, m.len);
                return Ok(());
            }
        }
        self.pinned.unimport(self, dev_addr, mapped);
        Ok(())
    }

    fn export(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        self.current()?;
        let handle = (self.allocs.lock().unwrap().iter())
            .find(|(&a, r)| within(addr, size, a, r.len))
            .map(|(&a, r)| (a, r.handle));
        if let Some((start, h)) = handle {
            return Ok((self.shareable(h)?, (addr - start) as u64));
        }
        if let Some(r) = Mapping::export(&self.mapped.lock().unwrap(), addr, size) {
            return r;
        }
        if let Some(r) = self.pinned.export(addr, size) {
            return r;
        }
        self.dmabuf(addr, size)
    }

    fn export_ipc(&self, addr: usize, size: u64) -> Result<([u8; IPC_HANDLE], u64)> {
        self.current()?;
        // Memory of the context has a file descriptor to share instead.
        if self.owns(addr, size) || self.pinned.owns(addr, size) {
            return Err(Error::OPNOTSUPP);
        }
        let d = self.drv;
        let (mut base, mut len): (CUdeviceptr, usize) = (0, 0);
        // SAFETY: out-pointers to locals.
        if unsafe { (d.mem_get_address_range)(&mut base, &mut len, addr as CUdeviceptr) }
            != CUDA_SUCCESS
        {
            return Err(Error::OPNOTSUPP);
        }
        let off = addr as u64 - base;
        if off.checked_add(size).is_none_or(|e| e > len as u64) {
            return Err(Error::INVAL);
        }
        let mut h = CUipcMemHandle {
            reserved: [0; CU_IPC_HANDLE_SIZE],
        };
        // SAFETY: out-pointer to a local handle; `base` starts an allocation.
        d.check("cuIpcGetMemHandle", unsafe {
            (d.ipc_get_mem_handle)(&mut h, base)
        })?;
        Ok((h.reserved, off))
    }

    fn import_ipc(&self, handle: &[u8; IPC_HANDLE], offset: u64, size: u64) -> Result<usize> {
        self.current()?;
        let d = self.drv;
        let mut base: CUdeviceptr = 0;
        let h = CUipcMemHandle { reserved: *handle };
        // SAFETY: out-pointer to a local; the handle is passed by value.
        d.check("cuIpcOpenMemHandle", unsafe {
            (d.ipc_open_mem_handle)(&mut base, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        })?;
        let close = || {
            // SAFETY: the base just opened, closed once.
            unsafe { (d.ipc_close_mem_handle)(base) };
        };
        let (mut b, mut len): (CUdeviceptr, usize) = (0, 0);
        // SAFETY: out-pointers to locals.
        let r = unsafe { (d.mem_get_address_range)(&mut b, &mut len, base) };
        if r != CUDA_SUCCESS || b != base || offset + size > len as u64 {
            close();
            crate::warn!("cuda: an IPC handle's allocation does not hold [+{offset}, +{size})");
            return Err(Error::INVAL);
        }
        let dev = base as usize + offset as usize;
        self.ipc
            .lock()
            .unwrap()
            .entry(dev)
            .or_insert((base as usize, 0))
            .1 += 1;
        Ok(dev)
    }

    fn device_uuid(&self) -> Result<[u8; 16]> {
        let mut u = [0u8; 16];
        // SAFETY: out-pointer to 16 bytes (CUuuid); `dev` from cuDeviceGet.
        self.drv.check("cuDeviceGetUuid", unsafe {
            (self.drv.device_get_uuid)(&mut u, self.dev)
        })?;
        Ok(u)
    }

    /// Not done: a peer's device memory stays mapped until the context
    /// closes. Unmapping it under a kernel that still holds an address
    /// inside it faults the kernel (under MPS, a fatal fault ends every
    /// client), and the driver has no zero-page stand-in; the context's
    /// close comes after the application's last kernel on it.
    fn retire(&self, _dev_addr: usize) -> Result<()> {
        Err(Error::OPNOTSUPP)
    }

    fn access(&self, a: Access) -> Result<()> {
        self.current()?;
        self.access_on_stream(a)
    }
}

impl Pin for Cuda {
    /// `cuMemHostRegister` (portable, device-mapped), then the device
    /// address, which unified addressing makes the host one.
    fn pin(&self, base: usize, len: usize, how: PinHow) -> Result<()> {
        let mut flags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
        if how.iomem {
            flags |= CU_MEMHOSTREGISTER_IOMEMORY;
        }
        // Pages mapped read-only are pinned only with this flag.
        if how.read_only {
            flags |= CU_MEMHOSTREGISTER_READ_ONLY;
        }
        // SAFETY: a mapping of this process, page-aligned.
        self.drv.check("cuMemHostRegister", unsafe {
            (self.drv.mem_host_register)(base as *mut c_void, len, flags)
        })?;
        if let Err(e) = self.device_pointer(base) {
            self.unpin(base);
            return Err(e);
        }
        Ok(())
    }

    fn unpin(&self, base: usize) {
        // SAFETY: a range `pin` registered.
        unsafe { (self.drv.mem_host_unregister)(base as *mut c_void) };
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        if self.current().is_err() {
            return;
        }
        for (va, a) in self.allocs.lock().unwrap().drain() {
            self.unmap(va, a.len);
            // SAFETY: the handle of a live allocation, released once.
            unsafe { (self.drv.mem_release)(a.handle) };
        }
        for (_, m) in self.mapped.lock().unwrap().drain() {
            self.unmap(m.base, m.len);
        }
        for (_, (base, opens)) in self.ipc.lock().unwrap().drain() {
            for _ in 0..opens {
                // SAFETY: a base cuIpcOpenMemHandle returned, closed once
                // per open.
                unsafe { (self.drv.ipc_close_mem_handle)(base as CUdeviceptr) };
            }
        }
        self.pinned.release(self);
        let st = *self.stream.get_mut().unwrap();
        if st != 0 {
            // SAFETY: the stream `stream` created, destroyed once.
            unsafe { (self.drv.stream_destroy)(st as CUstream) };
        }
        // SAFETY: the primary context retained in `open`, released once.
        unsafe { (self.drv.primary_ctx_release)(self.dev) };
    }
}
