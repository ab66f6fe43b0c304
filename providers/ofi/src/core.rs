//! The core's services (logging, memory) as safe Rust calls.
use fi_xpu_abi::errno::*;
use fi_xpu_abi::*;
use std::ffi::{c_void, CString};
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
        unsafe { f(level, c"ofi".as_ptr(), m.as_ptr()) };
    }
}

pub fn warn(msg: &str) {
    log(FI_XPU_LOG_WARN, msg);
}

pub fn info(msg: &str) {
    log(FI_XPU_LOG_INFO, msg);
}

pub type Ctx = *mut fid_xpu_ctx;

/// Host-visible memory of the context `ctx`, zeroed.
pub fn alloc_host(ctx: Ctx, size: u64) -> Result<usize, i32> {
    let f = core().and_then(|c| c.mem_alloc).ok_or(-FI_ENOSYS)?;
    let mut addr: *mut c_void = std::ptr::null_mut();
    let mut fd: i32 = -1;
    let mut off = 0u64;
    // SAFETY: out-pointers are live locals; ctx is the application's handle.
    let r = unsafe {
        f(
            ctx,
            size,
            4096,
            FI_XPU_ALLOC_HOST,
            &mut addr,
            &mut fd,
            &mut off,
        )
    };
    if r != 0 {
        return Err(r);
    }
    // SAFETY: fresh allocation of `size` bytes that the host can reach;
    // zero is the empty state of every structure placed there.
    unsafe { std::ptr::write_bytes(addr as *mut u8, 0, size as usize) };
    Ok(addr as usize)
}

pub fn free(ctx: Ctx, addr: usize) {
    if let Some(f) = core().and_then(|c| c.mem_free) {
        // SAFETY: addr came from `alloc_host` on the same context.
        unsafe { f(ctx, addr as *mut c_void) };
    }
}
