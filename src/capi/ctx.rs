//! The XPU context: `fi_xpu_ctx_open`, `fi_xpu_ctx_getinfo`,
//! `fi_xpu_ctx_abort`.
use super::args::open_in;
use super::fid::FID_OPS;
use crate::error::Error;
use crate::flags::{self, AbortFlags};
use crate::memory::UserOps;
use crate::object::{lookup, Kind};
use crate::ops::objects as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// Creates the XPU context of one device.
///
/// # Safety
/// `attr` points to a valid `fi_xpu_ctx_open_attr` whose `ops`, if set, points to a
/// struct of at least its `size` bytes; `ctx` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_ctx_open(
    domain: *mut fid_xpu_domain,
    attr: *const fi_xpu_ctx_open_attr,
    ctx: *mut *mut fid_xpu_host_ctx,
    context: *mut c_void,
) -> c_int {
    boundary!(open_in(
        domain,
        borrowed_opt!(attr),
        out!(ctx)?,
        |dom, attr| {
            let user = if attr.ops.is_null() {
                None
            } else {
                // SAFETY: a non-NULL `ops` points to a struct of its `size`
                // bytes (the API's contract).
                Some(unsafe { UserOps::from_raw(attr.ops, attr.device) }?)
            };
            ops::ctx_open(dom, attr.iface, attr.device, user, context, &FID_OPS)
        }
    ))
}

/// Capabilities and raw sizes of a context.
///
/// # Safety
/// `attr` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_ctx_getinfo(
    ctx: *mut fid_xpu_host_ctx,
    attr: *mut fi_xpu_ctx_info,
) -> c_int {
    boundary!({
        let out = out!(attr)?;
        out.put(ops::ctx_query(&*lookup(ctx as *const c_void, Kind::Ctx)?)?);
        Ok(0)
    })
}

/// Raises the context's abort word (lowers it with `FI_XPU_ABORT_CLEAR`):
/// every device wait on an object of the context ends with `-FI_ECANCELED`
/// while it is raised.
#[no_mangle]
pub extern "C" fn fi_xpu_ctx_abort(ctx: *mut fid_xpu_host_ctx, flags: u64) -> c_int {
    boundary!({
        let c = lookup(ctx as *const c_void, Kind::Ctx)?;
        flags::accept::<AbortFlags>(flags)?;
        c.memory
            .as_ref()
            .ok_or(Error::INVAL)?
            .set_abort(flags & FI_XPU_ABORT_CLEAR == 0)?;
        Ok(0)
    })
}
