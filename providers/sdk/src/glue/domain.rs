//! The entry points of init and fini, the domain and the XPU context.
use super::boundary::*;
use crate::{services, Provider};
use fi_xpu_abi::*;
use std::ffi::c_int;

pub(crate) unsafe extern "C" fn init<P: Provider>(core: *const fi_xpu_core, prov: *mut H) -> c_int {
    guard::<P>(|| {
        // SAFETY: the core passes its static table; size is read first.
        if unsafe { (*core).size } < std::mem::size_of::<fi_xpu_core>() {
            return Err(Error::NOSYS);
        }
        services::set(core, P::NAME);
        P::init()?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *prov = std::ptr::null_mut() };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn fini<P: Provider>(_prov: H) {}

pub(crate) unsafe extern "C" fn domain_open<P: Provider>(
    _prov: H,
    attr: *const fi_xpu_domain_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: the core passes its attributes (its defaults when the
    // application gave none) and a valid out-pointer.
    guard::<P>(|| unsafe { open(P::domain_open(&*attr), out) })
}

pub(crate) unsafe extern "C" fn domain_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live domain once, after all its children.
    guard::<P>(|| unsafe { close(h, P::domain_close) })
}

pub(crate) unsafe extern "C" fn ctx_open<P: Provider>(
    dom: H,
    args: *const fi_xpu_prov_ctx_args,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; args and out from the core.
    unsafe { open_in::<P, _, _>(dom, args, out, P::ctx_open) }
}

pub(crate) unsafe extern "C" fn ctx_query<P: Provider>(
    ctx: H,
    attr: *mut fi_xpu_ctx_info,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live context.
        let a = P::ctx_query(unsafe { obj::<P::Ctx>(ctx) })?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *attr = a };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn ctx_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live context once, after objects on it.
    guard::<P>(|| unsafe { close(h, P::ctx_close) })
}
