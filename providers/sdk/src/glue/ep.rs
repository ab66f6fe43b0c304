//! The entry points of the endpoint.
use super::boundary::*;
use crate::{Bind, Provider};
use fi_xpu_abi::class::*;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

pub(crate) unsafe extern "C" fn ep_open<P: Provider>(
    dom: H,
    ctx: H,
    attr: *const fi_xpu_ep_attr,
    out: *mut H,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live domain and context (always set for an EP); attr from
        // the core.
        let (d, c, a) = unsafe { (obj::<P::Domain>(dom), obj::<P::Ctx>(ctx), &*attr) };
        // SAFETY: `out` is the core's valid out-pointer (this entry point's contract).
        unsafe { open(P::ep_open(d, c, a), out) }
    })
}

pub(crate) unsafe extern "C" fn ep_bind<P: Provider>(
    ep: H,
    fclass: usize,
    o: H,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live handles; `fclass` says what `o` is.
        let (e, b) = unsafe {
            let b = match fclass {
                FI_CLASS_AV => Bind::Av(obj::<P::Av>(o)),
                FI_CLASS_CQ => Bind::Cq(obj::<P::Cq>(o)),
                FI_CLASS_CNTR => Bind::Cntr(obj::<P::Cntr>(o)),
                _ => return Err(Error::INVAL),
            };
            (obj::<P::Ep>(ep), b)
        };
        P::ep_bind(e, b, flags).map(|_| 0)
    })
}

pub(crate) unsafe extern "C" fn ep_enable<P: Provider>(ep: H) -> c_int {
    // SAFETY: live EP.
    guard::<P>(|| P::ep_enable(unsafe { obj::<P::Ep>(ep) }).map(|_| 0))
}

pub(crate) unsafe extern "C" fn ep_getname<P: Provider>(
    ep: H,
    addr: *mut c_void,
    len: *mut usize,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live EP.
        let name = P::ep_getname(unsafe { obj::<P::Ep>(ep) })?;
        // SAFETY: addr holds *len bytes (checked by the core).
        unsafe { put_sized(addr, len, &name) }
    })
}

pub(crate) unsafe extern "C" fn ep_export<P: Provider>(
    ep: H,
    flags: u64,
    out: *mut fid_xpu,
) -> c_int {
    // SAFETY: live EP; valid out-pointer from the core.
    unsafe { export::<P, P::Ep>(ep, flags, out, FI_CLASS_EP, P::ep_export) }
}

pub(crate) unsafe extern "C" fn ep_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live EP once.
    guard::<P>(|| unsafe { close(h, P::ep_close) })
}
