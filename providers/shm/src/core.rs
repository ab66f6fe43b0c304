//! The core's services (logging, memory) as safe Rust calls.
use fi_xpu_abi::errno::*;
use fi_xpu_abi::*;
use std::ffi::{c_void, CString};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicPtr, Ordering};

static CORE: AtomicPtr<fi_xpu_core> = AtomicPtr::new(std::ptr::null_mut());

pub fn set(core: *const fi_xpu_core) {
    CORE.store(core as *mut fi_xpu_core, Ordering::Release);
}

fn core() -> Option<&'static fi_xpu_core> {
    let p = CORE.load(Ordering::Acquire);
    // SAFETY: the core's service table is static data that outlives every
    // provider call; init checked its size before storing it.
    unsafe { p.as_ref() }
}

pub fn log(level: i32, msg: &str) {
    if let Some(f) = core().and_then(|c| c.log) {
        let m = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: both strings are NUL-terminated and live for the call.
        unsafe { f(level, c"shm".as_ptr(), m.as_ptr()) };
    }
}

pub fn warn(msg: &str) {
    log(FI_XPU_LOG_WARN, msg);
}

pub type Ctx = *mut fid_xpu_ctx;

/// Allocates device memory; `shared` asks for an exportable (memfd) one.
pub fn alloc(ctx: Ctx, size: u64, shared: bool) -> Result<(usize, Option<OwnedFd>), i32> {
    let f = core().and_then(|c| c.mem_alloc).ok_or(-FI_ENOSYS)?;
    let mut addr: *mut c_void = std::ptr::null_mut();
    let mut fd: i32 = -1;
    let mut off = 0u64;
    let flags = if shared { FI_XPU_ALLOC_DMABUF } else { 0 };
    // SAFETY: out-pointers are live locals; ctx is the application's handle.
    let r = unsafe { f(ctx, size, 64, flags, &mut addr, &mut fd, &mut off) };
    if r != 0 {
        return Err(r);
    }
    let fd = (shared && fd >= 0).then(|| {
        // SAFETY: the core hands over ownership of the exported fd.
        unsafe { OwnedFd::from_raw_fd(fd) }
    });
    // SAFETY: fresh allocation of `size` bytes; zeroing makes every shared
    // structure start in its empty state.
    unsafe { std::ptr::write_bytes(addr as *mut u8, 0, size as usize) };
    Ok((addr as usize, fd))
}

pub fn free(ctx: Ctx, addr: usize) {
    if let Some(f) = core().and_then(|c| c.mem_free) {
        // SAFETY: addr came from `alloc` on the same context.
        unsafe { f(ctx, addr as *mut c_void) };
    }
}

/// Maps a peer's DMA-BUF (memfd) into this context.
pub fn import(ctx: Ctx, fd: RawFd, offset: u64, size: u64) -> Result<usize, i32> {
    let f = core().and_then(|c| c.mem_import).ok_or(-FI_ENOSYS)?;
    let mut dev: *mut c_void = std::ptr::null_mut();
    // SAFETY: fd is open for the duration of the call; dev is a live local.
    let r = unsafe {
        f(
            ctx,
            std::ptr::null_mut(),
            fd,
            offset,
            size,
            FI_XPU_IMPORT_DMABUF,
            &mut dev,
        )
    };
    if r != 0 {
        return Err(r);
    }
    Ok(dev as usize)
}

pub fn unimport(ctx: Ctx, dev: usize) {
    if let Some(f) = core().and_then(|c| c.mem_unimport) {
        // SAFETY: dev came from `import` on the same context.
        unsafe { f(ctx, dev as *mut c_void) };
    }
}

/// A DMA-BUF fd and offset for application memory of `ctx`.
pub fn export(ctx: Ctx, addr: usize, size: u64) -> Result<(OwnedFd, u64), i32> {
    let f = core().and_then(|c| c.mem_export).ok_or(-FI_ENOSYS)?;
    let mut fd = -1;
    let mut off = 0u64;
    // SAFETY: out-pointers are live locals.
    let r = unsafe { f(ctx, addr as *mut c_void, size, &mut fd, &mut off) };
    if r != 0 {
        return Err(r);
    }
    // SAFETY: the core hands over ownership of the fd.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, off))
}
