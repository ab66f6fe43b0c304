//! The core's services (logging, parameters, memory) as safe calls.
//!
//! `init` stores the core's table here before the provider's own `init`
//! runs; until then logging is silent and memory services answer
//! `-FI_ENOSYS`. A plugin links its own copy of this crate, so the table and
//! the provider name are per plugin.
use crate::{Error, Result};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::*;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicPtr, Ordering};

static CORE: AtomicPtr<fi_xpu_core> = AtomicPtr::new(std::ptr::null_mut());
static NAME: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// The application's handle of an XPU context
/// (`fi_xpu_prov_ctx_args::core_ctx`), which the memory services take back.
/// A token, not a reference: the core looks it up in its registry on every
/// call, so a stale or foreign value is answered with an error, never
/// followed, and a provider may copy it and hand it between threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoreCtx(*mut fid_xpu_host_ctx);

// SAFETY: the pointer is never dereferenced outside the core, whose
// services look it up in their registry (under its lock) on every call:
// moving the token to another thread moves a number.
unsafe impl Send for CoreCtx {}
// SAFETY: as above; shared access only copies the token.
unsafe impl Sync for CoreCtx {}

impl CoreCtx {
    /// The handle of the context being opened.
    pub fn of(args: &fi_xpu_prov_ctx_args) -> CoreCtx {
        CoreCtx(args.core_ctx)
    }

    /// No context: every service refuses it (for tests without a core).
    pub const NONE: CoreCtx = CoreCtx(std::ptr::null_mut());
}

pub(crate) fn set(core: *const fi_xpu_core, name: &'static CStr) {
    NAME.store(name.as_ptr() as *mut c_char, Ordering::Release);
    CORE.store(core as *mut fi_xpu_core, Ordering::Release);
}

fn core() -> Option<&'static fi_xpu_core> {
    let p = CORE.load(Ordering::Acquire);
    // SAFETY: the core's service table is static data that outlives every
    // provider call; `init` checked its size before storing it.
    unsafe { p.as_ref() }
}

/// One line through the core's logger, tagged with the provider's name.
pub fn log(level: i32, msg: &str) {
    let Some(f) = core().and_then(|c| c.log) else {
        return;
    };
    let m = CString::new(msg.replace('\0', " ")).unwrap_or_default();
    // SAFETY: NAME points to the provider's static name (stored with CORE);
    // both strings are NUL-terminated and live for the call.
    unsafe { f(level, NAME.load(Ordering::Acquire), m.as_ptr()) };
}

/// Whether a message of `level` would be printed, to skip formatting it.
pub fn log_enabled(level: i32) -> bool {
    match core().and_then(|c| c.log_enabled) {
        // SAFETY: a plain function of the core taking an integer.
        Some(f) => unsafe { f(level) != 0 },
        None => false,
    }
}

pub fn warn(msg: &str) {
    log(FI_XPU_LOG_WARN, msg);
}

pub fn info(msg: &str) {
    log(FI_XPU_LOG_INFO, msg);
}

pub fn debug(msg: &str) {
    log(FI_XPU_LOG_DEBUG, msg);
}

/// Defines this provider's parameter `name`: the environment variable
/// `FI_XPU_<PROVIDER>_<NAME>`, with its default (as text) and a one-line
/// description, which `fi_xpu_info -e` lists. Define every parameter in
/// `Provider::init`, before reading it with `param`.
pub fn param_define(name: &str, default: &str, help: &str) -> Result<()> {
    let f = core().and_then(|c| c.param_define).ok_or(Error::NOSYS)?;
    let text = |s: &str| CString::new(s).map_err(|_| Error::INVAL);
    let (name, default, help) = (text(name)?, text(default)?, text(help)?);
    // SAFETY: NAME is the provider's static name (stored with CORE); the
    // other strings are NUL-terminated locals that live for the call.
    let r = unsafe {
        f(
            NAME.load(Ordering::Acquire),
            name.as_ptr(),
            default.as_ptr(),
            help.as_ptr(),
        )
    };
    Error::check(r)
}

/// The value of this provider's parameter `name` (defined with
/// `param_define`), read by the core (which ignores the environment of
/// set-uid programs); `None` when it is unset or empty, and (with a
/// warning) when it was never defined.
pub fn param(name: &str) -> Option<String> {
    let f = core().and_then(|c| c.param_get)?;
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0u8; 256];
    loop {
        let mut len = buf.len();
        // SAFETY: `buf` holds `len` writable bytes; the strings are
        // NUL-terminated and live for the call (NAME: see `log`).
        let r = unsafe {
            f(
                NAME.load(Ordering::Acquire),
                cname.as_ptr(),
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        match r {
            0 => {
                let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
                return Some(String::from_utf8_lossy(&buf[..end]).into_owned());
            }
            r if r == -FI_ETOOSMALL && len > buf.len() => buf.resize(len, 0),
            r if r == -FI_ENOENT => {
                warn(&format!("parameter {name} read but never defined"));
                return None;
            }
            _ => return None,
        }
    }
}

/// What `mem_alloc` hands back.
#[derive(Debug)]
pub struct Allocation {
    /// Device address (for `FI_HMEM_SYSTEM` and `FI_XPU_ALLOC_HOST`, also
    /// the host's).
    pub addr: usize,
    /// The exported DMA-BUF, with `FI_XPU_ALLOC_DMABUF` only.
    pub fd: Option<OwnedFd>,
    /// Where the allocation starts inside `fd`.
    pub offset: u64,
}

/// `fi_xpu_alloc` on the context `ctx`. The memory is not cleared: only
/// the provider knows whether the host may write it.
pub fn mem_alloc(ctx: CoreCtx, size: u64, alignment: u64, flags: u64) -> Result<Allocation> {
    let f = core().and_then(|c| c.mem_alloc).ok_or(Error::NOSYS)?;
    let mut addr: *mut c_void = std::ptr::null_mut();
    let mut fd: i32 = -1;
    let mut offset = 0u64;
    // SAFETY: out-pointers are live locals; the core validates ctx.
    let r = unsafe {
        f(
            ctx.0,
            size,
            alignment,
            flags,
            &mut addr,
            &mut fd,
            &mut offset,
        )
    };
    if r != 0 {
        return Err(Error::from_code(r));
    }
    let fd = (flags & FI_XPU_ALLOC_DMABUF != 0 && fd >= 0).then(|| {
        // SAFETY: the core hands over ownership of the exported fd.
        unsafe { OwnedFd::from_raw_fd(fd) }
    });
    Ok(Allocation {
        addr: addr as usize,
        fd,
        offset,
    })
}

/// Releases memory from `mem_alloc`. A failure is not reported: there is
/// nothing a provider could do, and the core releases whatever is left
/// when the context closes.
pub fn mem_free(ctx: CoreCtx, addr: usize) {
    if let Some(f) = core().and_then(|c| c.mem_free) {
        // SAFETY: the core validates ctx and looks addr up among the
        // context's allocations.
        unsafe { f(ctx.0, addr as *mut c_void) };
    }
}

/// `fi_xpu_import`: maps `[host_addr, host_addr+size)`, or with
/// `FI_XPU_IMPORT_DMABUF` the file `fd` at `offset`, into the context.
pub fn mem_import(
    ctx: CoreCtx,
    host_addr: usize,
    fd: RawFd,
    offset: u64,
    size: u64,
    flags: u64,
) -> Result<usize> {
    let f = core().and_then(|c| c.mem_import).ok_or(Error::NOSYS)?;
    let mut dev: *mut c_void = std::ptr::null_mut();
    // SAFETY: dev is a live local; the core validates ctx, flags and fd.
    let r = unsafe {
        f(
            ctx.0,
            host_addr as *mut c_void,
            fd,
            offset,
            size,
            flags,
            &mut dev,
        )
    };
    if r != 0 {
        return Err(Error::from_code(r));
    }
    Ok(dev as usize)
}

/// Maps a DMA-BUF (a peer's memfd, a NIC's doorbell page) into the context.
pub fn import_dmabuf(ctx: CoreCtx, fd: RawFd, offset: u64, size: u64) -> Result<usize> {
    mem_import(ctx, 0, fd, offset, size, FI_XPU_IMPORT_DMABUF)
}

/// Undoes `mem_import`; failures are not reported (see `mem_free`).
pub fn mem_unimport(ctx: CoreCtx, dev: usize) {
    if let Some(f) = core().and_then(|c| c.mem_unimport) {
        // SAFETY: the core validates ctx and looks dev up among its imports.
        unsafe { f(ctx.0, dev as *mut c_void) };
    }
}

/// Host access to the context's device memory through its backend
/// (`fi_xpu_core.mem_access`).
///
/// # Safety
/// For `FI_XPU_MEM_ACCESS_WRITE` and `_READ`, `host` is valid for `size`
/// bytes of reading, respectively writing.
pub unsafe fn mem_access(
    ctx: CoreCtx,
    op: c_int,
    dev: usize,
    host: *mut c_void,
    size: u64,
    value: u64,
) -> Result<()> {
    let f = core().and_then(|c| c.mem_access).ok_or(Error::NOSYS)?;
    // SAFETY: the core validates ctx, op and the range; `host` is the
    // caller's promise.
    match unsafe { f(ctx.0, op, dev as *mut c_void, host, size, value) } {
        0 => Ok(()),
        e => Err(Error::from_code(e)),
    }
}

/// The UUID of the context's device (`fi_xpu_core.ctx_device_uuid`);
/// `None` for host memory, callbacks, or a core without the service.
pub fn ctx_device_uuid(ctx: CoreCtx) -> Option<[u8; 16]> {
    let f = core().and_then(|c| c.ctx_device_uuid)?;
    let mut u = [0u8; 16];
    // SAFETY: the core validates ctx and writes 16 bytes on success.
    (unsafe { f(ctx.0, u.as_mut_ptr()) } == 0).then_some(u)
}

/// A legacy IPC handle and offset for `[addr, addr + size)`
/// (`fi_xpu_core.mem_export_ipc`).
pub fn mem_export_ipc(
    ctx: CoreCtx,
    addr: usize,
    size: u64,
) -> Result<([u8; FI_XPU_IPC_HANDLE_SIZE], u64)> {
    let f = core().and_then(|c| c.mem_export_ipc).ok_or(Error::NOSYS)?;
    let mut h = [0u8; FI_XPU_IPC_HANDLE_SIZE];
    let mut off = 0u64;
    // SAFETY: the core validates ctx and the range; the out-pointers are
    // a handle's bytes and a local.
    match unsafe { f(ctx.0, addr as *mut c_void, size, h.as_mut_ptr(), &mut off) } {
        0 => Ok((h, off)),
        e => Err(Error::from_code(e)),
    }
}

/// Opens a peer's legacy IPC handle into the context
/// (`fi_xpu_core.mem_import_ipc`); undone by `mem_unimport`.
pub fn mem_import_ipc(
    ctx: CoreCtx,
    handle: &[u8; FI_XPU_IPC_HANDLE_SIZE],
    offset: u64,
    size: u64,
) -> Result<usize> {
    let f = core().and_then(|c| c.mem_import_ipc).ok_or(Error::NOSYS)?;
    let mut d: *mut c_void = std::ptr::null_mut();
    // SAFETY: the core validates ctx and reads the handle's bytes.
    match unsafe { f(ctx.0, handle.as_ptr(), offset, size, &mut d) } {
        0 => Ok(d as usize),
        e => Err(Error::from_code(e)),
    }
}

/// Undoes an import whose owner is gone, keeping its address range mapped
/// to private zero pages until the context closes (`fi_xpu_core.mem_retire`).
/// `Err` when the context's backend cannot: the import is then still live.
pub fn mem_retire(ctx: CoreCtx, dev: usize) -> Result<()> {
    let f = core().and_then(|c| c.mem_retire).ok_or(Error::NOSYS)?;
    // SAFETY: the core validates ctx and looks dev up among its imports.
    match unsafe { f(ctx.0, dev as *mut c_void) } {
        0 => Ok(()),
        e => Err(Error::from_code(e)),
    }
}

/// A DMA-BUF fd (owned by the caller) and offset for application memory of
/// `ctx`, to share it with a peer process or a NIC.
pub fn mem_export(ctx: CoreCtx, addr: usize, size: u64) -> Result<(OwnedFd, u64)> {
    let f = core().and_then(|c| c.mem_export).ok_or(Error::NOSYS)?;
    let mut fd = -1;
    let mut off = 0u64;
    // SAFETY: out-pointers are live locals; the core validates the range.
    let r = unsafe { f(ctx.0, addr as *mut c_void, size, &mut fd, &mut off) };
    if r != 0 {
        return Err(Error::from_code(r));
    }
    // SAFETY: on success the core hands over ownership of the fd.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, off))
}

/// Whether `[addr, addr+size)` lies inside one allocation or import of the
/// context `ctx` (memory the device may use). False as well when the core
/// cannot say.
pub fn mem_known(ctx: CoreCtx, addr: usize, size: u64) -> bool {
    let Some(f) = core().and_then(|c| c.mem_known) else {
        return false;
    };
    // SAFETY: the core validates ctx and only compares the range with its
    // records; nothing at `addr` is read.
    unsafe { f(ctx.0, addr as *const c_void, size) == 0 }
}

/// Address of the context's abort word (`fi_xpu_ctx_abort`), to be stored
/// in the device blocks a kernel waits on; 0 when the core has none.
pub fn ctx_abort_word(ctx: CoreCtx) -> u64 {
    let Some(f) = core().and_then(|c| c.ctx_abort_word) else {
        return 0;
    };
    // SAFETY: the core looks ctx up in its registry before using it.
    unsafe { f(ctx.0) as u64 }
}
