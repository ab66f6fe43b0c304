//! Memory through the application's `struct fi_xpu_mem_ops` callbacks.
use super::backend::{Allocation, Backend, Import};
use crate::error::{Error, Result};
use fi_xpu_abi::fi_xpu_mem_ops;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The callbacks, copied out of the application's struct so that fields past
/// its `size` are never read.
#[derive(Clone)]
pub struct UserOps {
    device: u64,
    alloc:
        unsafe extern "C" fn(u64, u64, u64, u64, *mut *mut c_void, *mut c_int, *mut u64) -> c_int,
    import: unsafe extern "C" fn(u64, *mut c_void, c_int, u64, u64, u64, *mut *mut c_void) -> c_int,
    unimport: unsafe extern "C" fn(u64, *mut c_void) -> c_int,
    free: unsafe extern "C" fn(u64, *mut c_void),
    export: Option<unsafe extern "C" fn(u64, *mut c_void, u64, *mut c_int, *mut u64) -> c_int>,
}

/// Size of the first version of `struct fi_xpu_mem_ops` (through `free`).
pub const OPS_V1_SIZE: usize = std::mem::offset_of!(fi_xpu_mem_ops, export_dmabuf);

impl UserOps {
    /// Reads the callbacks from a struct of `ops.size` bytes.
    ///
    /// # Safety
    /// `ops` must point to at least `size_of::<usize>()` readable bytes and,
    /// when its `size` field says so, to that many.
    pub unsafe fn from_raw(ops: *const fi_xpu_mem_ops, device: u64) -> Result<UserOps> {
        // SAFETY: the caller guarantees the size field is readable.
        let size = unsafe { (*ops).size };
        if size < OPS_V1_SIZE {
            crate::warn!(
                "struct fi_xpu_mem_ops: size {size} is smaller than the first version's {OPS_V1_SIZE}"
            );
            return Err(Error::INVAL);
        }
        // SAFETY: `size` covers every field read below.
        let o = unsafe { &*ops };
        let (Some(alloc), Some(import), Some(unimport), Some(free)) =
            (o.alloc, o.import, o.unimport, o.free)
        else {
            crate::warn!(
                "struct fi_xpu_mem_ops: alloc, import, unimport and free are all required"
            );
            return Err(Error::INVAL);
        };
        let export = if size >= std::mem::size_of::<fi_xpu_mem_ops>() {
            o.export_dmabuf
        } else {
            None
        };
        Ok(UserOps {
            device,
            alloc,
            import,
            unimport,
            free,
            export,
        })
    }
}

impl Backend for UserOps {
    fn alloc(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
        let mut addr: *mut c_void = std::ptr::null_mut();
        let mut fd: c_int = -1;
        let mut offset = 0u64;
        // SAFETY: calling the application's callback with valid out-pointers.
        Error::check(unsafe {
            (self.alloc)(
                self.device,
                size,
                alignment,
                flags,
                &mut addr,
                &mut fd,
                &mut offset,
            )
        })?;
        if addr.is_null() {
            return Err(Error::NOMEM);
        }
        // SAFETY: the callback hands ownership of a returned fd to the caller.
        let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        Ok(Allocation {
            addr: addr as usize,
            fd,
            offset,
        })
    }

    fn free(&self, addr: usize) -> Result<()> {
        // SAFETY: `addr` came from this backend's alloc and is freed once.
        unsafe { (self.free)(self.device, addr as *mut c_void) };
        Ok(())
    }

    fn import(&self, req: &Import) -> Result<usize> {
        let mut dev: *mut c_void = std::ptr::null_mut();
        let fd = req.fd.map_or(-1, |f| f.as_raw_fd());
        // SAFETY: calling the application's callback with checked arguments.
        Error::check(unsafe {
            (self.import)(
                self.device,
                req.host_addr as *mut c_void,
                fd,
                req.offset,
                req.size,
                req.flags,
                &mut dev,
            )
        })?;
        if dev.is_null() {
            return Err(Error::OTHER);
        }
        Ok(dev as usize)
    }

    fn unimport(&self, dev_addr: usize, _mapped: bool) -> Result<()> {
        // SAFETY: `dev_addr` came from this backend's import.
        Error::check(unsafe { (self.unimport)(self.device, dev_addr as *mut c_void) })
    }

    fn export(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
        let Some(export) = self.export else {
            crate::warn!(
                "export: [{addr:#x}, +{size}): the context's struct fi_xpu_mem_ops has no export_dmabuf callback (NULL, or a size that predates it); providers that share memory by fd need it"
            );
            return Err(Error::OPNOTSUPP);
        };
        let mut fd: c_int = -1;
        let mut offset = 0u64;
        // SAFETY: calling the application's callback with valid out-pointers.
        Error::check(unsafe {
            export(self.device, addr as *mut c_void, size, &mut fd, &mut offset)
        })?;
        if fd < 0 {
            return Err(Error::OTHER);
        }
        // SAFETY: the callback hands ownership of the fd to the caller.
        Ok((unsafe { OwnedFd::from_raw_fd(fd) }, offset))
    }
}

// SAFETY: the callbacks are plain C functions the application declares
// callable from any thread (documented in fi_xpu_alloc(3)).
unsafe impl Send for UserOps {}
// SAFETY: as above.
unsafe impl Sync for UserOps {}
