//! The entry points of the XPU CQ.
use super::boundary::*;
use crate::{HostCqBuf, Provider};
use fi_xpu_abi::class::*;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;

pub(crate) unsafe extern "C" fn cq_open<P: Provider>(
    dom: H,
    ctx: H,
    attr: *const fi_xpu_cq_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; ctx NULL or live; attr and out from the core.
    unsafe { open_on::<P, _, _>(dom, ctx, attr, out, P::cq_open) }
}

pub(crate) unsafe extern "C" fn cq_export<P: Provider>(
    cq: H,
    flags: u64,
    out: *mut fid_xpu,
) -> c_int {
    // SAFETY: live CQ; valid out-pointer from the core.
    unsafe { export::<P, P::Cq>(cq, flags, out, FI_CLASS_CQ, P::cq_export) }
}

pub(crate) unsafe extern "C" fn cq_host_read<P: Provider>(
    cq: H,
    buf: *mut c_void,
    count: usize,
    src: *mut fi_addr_t,
) -> isize {
    guard_count::<P>(|| {
        let out = HostCqBuf {
            buf: buf as *mut u8,
            count,
            src,
            _app: PhantomData,
        };
        // SAFETY: live CQ.
        P::cq_host_read(unsafe { obj::<P::Cq>(cq) }, out)
    })
}

pub(crate) unsafe extern "C" fn cq_host_readerr<P: Provider>(
    cq: H,
    buf: *mut fi_cq_err_entry,
    flags: u64,
) -> isize {
    // SAFETY: live CQ; valid entry pointer from the core.
    guard_count::<P>(|| unsafe { P::cq_host_readerr(obj::<P::Cq>(cq), &mut *buf, flags) })
}

pub(crate) unsafe extern "C" fn cq_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live CQ once, when nothing is bound to it.
    guard::<P>(|| unsafe { close(h, P::cq_close) })
}
