//! The entry points of the XPU counter.
use super::boundary::*;
use crate::Provider;
use fi_xpu_abi::class::*;
use fi_xpu_abi::*;
use std::ffi::c_int;

pub(crate) unsafe extern "C" fn cntr_open<P: Provider>(
    dom: H,
    ctx: H,
    attr: *const fi_xpu_cntr_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; ctx NULL or live; attr and out from the core.
    unsafe { open_on::<P, _, _>(dom, ctx, attr, out, P::cntr_open) }
}

pub(crate) unsafe extern "C" fn cntr_export<P: Provider>(
    c: H,
    flags: u64,
    out: *mut fid_xpu,
) -> c_int {
    // SAFETY: live counter; valid out-pointer from the core.
    unsafe { export::<P, P::Cntr>(c, flags, out, FI_CLASS_CNTR, P::cntr_export) }
}

pub(crate) unsafe extern "C" fn cntr_host_read<P: Provider>(
    c: H,
    value: *mut u64,
    err: *mut u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live counter.
        let (v, e) = P::cntr_host_read(unsafe { obj::<P::Cntr>(c) })?;
        // SAFETY: valid out-pointers from the core.
        unsafe {
            *value = v;
            *err = e;
        }
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn cntr_host_update<P: Provider>(c: H, how: u32, value: u64) -> c_int {
    // SAFETY: live counter.
    guard::<P>(|| P::cntr_host_update(unsafe { obj::<P::Cntr>(c) }, how, value).map(|_| 0))
}

pub(crate) unsafe extern "C" fn cntr_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live counter once, when nothing is bound to it.
    guard::<P>(|| unsafe { close(h, P::cntr_close) })
}
