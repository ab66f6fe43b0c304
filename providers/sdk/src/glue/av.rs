//! The entry points of the AV.
use super::boundary::*;
use crate::Provider;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

pub(crate) unsafe extern "C" fn av_open<P: Provider>(
    dom: H,
    attr: *const fi_xpu_av_attr,
    out: *mut H,
) -> c_int {
    // SAFETY: live domain; attributes (the core's defaults when the
    // application gave none) and out from the core.
    unsafe { open_in::<P, _, _>(dom, attr, out, P::av_open) }
}

pub(crate) unsafe extern "C" fn av_insert<P: Provider>(
    av: H,
    addr: *const c_void,
    fi_addr: *mut fi_addr_t,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: the core passes `addrlen` readable bytes.
        let raw = unsafe { std::slice::from_raw_parts(addr as *const u8, P::ADDRLEN) };
        // SAFETY: live AV.
        let a = P::av_insert(unsafe { obj::<P::Av>(av) }, raw, flags)?;
        // SAFETY: valid out-pointer from the core.
        unsafe { *fi_addr = a };
        Ok(0)
    })
}

pub(crate) unsafe extern "C" fn av_remove<P: Provider>(
    av: H,
    fi_addr: fi_addr_t,
    flags: u64,
) -> c_int {
    // SAFETY: live AV.
    guard::<P>(|| P::av_remove(unsafe { obj::<P::Av>(av) }, fi_addr, flags).map(|_| 0))
}

pub(crate) unsafe extern "C" fn av_lookup<P: Provider>(
    av: H,
    fi_addr: fi_addr_t,
    ctx: H,
    buf: *mut c_void,
    len: *mut usize,
    flags: u64,
) -> c_int {
    guard::<P>(|| {
        // SAFETY: live AV and context; len and buf checked by the core.
        unsafe {
            let a = obj::<P::Av>(av);
            put_ctx_bytes::<P>(
                ctx,
                buf,
                len,
                |i| i.av_addr_size,
                |c| P::av_lookup(a, fi_addr, c, flags),
            )
        }
    })
}

pub(crate) unsafe extern "C" fn av_close<P: Provider>(h: H) -> c_int {
    // SAFETY: the core closes a live AV once, when nothing is bound to it.
    guard::<P>(|| unsafe { close(h, P::av_close) })
}
