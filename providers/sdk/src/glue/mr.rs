//! The entry points of the MR.
use super::boundary::*;
use crate::Provider;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

pub(crate) unsafe extern "C" fn mr_reg<P: Provider>(
    dom: H,
    ctx: H,
    args: *const fi_xpu_prov_mr_args,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; ctx NULL or live; args and out from the core.
    unsafe { open_on::<P, _, _>(dom, ctx, args, out, P::mr_reg) }
}

pub(crate) unsafe extern "C" fn mr_key<P: Provider>(mr: H, key: *mut u64) -> c_int {
    guard::<P>(|| {
        // SAFETY: live MR.
        let k = P::mr_key(unsafe { obj::<P::Mr>(mr) })?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *key = k };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn mr_desc<P: Provider>(
    mr: H,
    ctx: H,
    buf: *mut c_void,
    len: *mut usize,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live MR and context; len and buf checked by the core.
        unsafe {
            let m = obj::<P::Mr>(mr);
            put_ctx_bytes::<P>(
                ctx,
                buf,
                len,
                |i| i.mr_desc_size,
                |c| P::mr_desc(m, c, flags),
            )
        }
    })
}

pub(crate) unsafe extern "C" fn mr_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live MR once.
    guard::<P>(|| unsafe { close(h, P::mr_close) })
}
