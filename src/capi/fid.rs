//! What every fid shares: `fi_xpu_export`, `fi_xpu_close`, and the
//! `fi_ops` each object's shell points at (libfabric's `fi_close`,
//! `fi_ep_bind` and `fi_control` on an fi_xpu object).
use super::wr;
use crate::object::{self, lookup, lookup_any, Kind};
use crate::ops::objects as ops;
use fi_xpu_abi::errno::FI_ENOSYS;
use fi_xpu_abi::*;
use std::ffi::{c_char, c_int, c_void};

/// Binds the AV, CQ or counter `bfid` to the endpoint `ep`
/// (`fi_xpu_ep_bind`, and the fid's `bind`).
pub(super) fn ep_bind(ep: *mut fid_xpu_host_ep, bfid: *mut fid, flags: u64) -> c_int {
    boundary!({
        let e = lookup(ep as *const c_void, Kind::Ep)?;
        let b = lookup_any(bfid as *const c_void)?;
        ops::ep_bind(&e, &b, flags)?;
        Ok(0)
    })
}

/// Fills the device handle of an endpoint, XPU CQ or XPU counter.
///
/// # Safety
/// `out` is a valid `struct fid_xpu` (or larger typed wrapper).
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_export(obj: *mut fid, flags: u64, out: *mut fid_xpu) -> c_int {
    boundary!({
        let out = out!(out)?;
        out.put(ops::export(&*lookup_any(obj as *const c_void)?, flags)?);
        Ok(0)
    })
}

/// Closes any fi_xpu object (as `fi_close(fid)` does).
#[no_mangle]
pub extern "C" fn fi_xpu_close(obj: *mut fid) -> c_int {
    boundary!(object::close(obj as *const c_void).map(|_| 0))
}

unsafe extern "C" fn fid_close(fid: *mut fid) -> c_int {
    boundary!(object::close(fid as *const c_void).map(|_| 0))
}

unsafe extern "C" fn fid_bind(fid: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    ep_bind(fid as *mut fid_xpu_host_ep, bfid, flags)
}

unsafe extern "C" fn fid_control(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: `fid` is looked up before use, and `arg` is NULL or what
    // `fi_control`'s contract says for `command` (the application's call).
    unsafe { wr::control(fid, command, arg) }
}

unsafe extern "C" fn fid_ops_open(
    _fid: *mut fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut *mut c_void,
    _context: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn fid_tostr(_fid: *const fid, _buf: *mut c_char, _len: usize) -> c_int {
    -FI_ENOSYS
}

unsafe extern "C" fn fid_ops_set(
    _fid: *mut fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut c_void,
    _context: *mut c_void,
) -> c_int {
    -FI_ENOSYS
}

/// The `fi_ops` every fi_xpu object's fid points to, so that libfabric's
/// `fi_close(&obj->fid)` works.
pub static FID_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(fid_close),
    bind: Some(fid_bind),
    control: Some(fid_control),
    ops_open: Some(fid_ops_open),
    tostr: Some(fid_tostr),
    ops_set: Some(fid_ops_set),
};
