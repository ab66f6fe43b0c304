//! Argument checks the object files share: NULL, attribute sizes, an
//! object's open call in a domain, size queries, raw-bytes queries for
//! kernels, host-side CQs and counters.
use super::boundary::Out;
use crate::error::{Error, Result};
use crate::flags::{self, XpuFormFlags};
use crate::object::{lookup, Kind, Use};
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

pub(super) fn non_null<T>(p: *const T) -> Result<()> {
    if p.is_null() {
        Err(Error::INVAL)
    } else {
        Ok(())
    }
}

/// An attribute struct's `.size` against this library's: a mismatch
/// (an application built against another `fi_xpu.h`, or `.size` left
/// unset) is refused with `-FI_EINVAL` and said in a log line.
pub(super) fn attr_size<T>(call: &str, name: &str, size: usize) -> Result<()> {
    let want = std::mem::size_of::<T>();
    if size == want {
        return Ok(());
    }
    crate::warn!(
        "{call}: struct {name}: .size is {size}, this library's is {want}: set it to sizeof(struct {name}) (-FI_EINVAL)"
    );
    Err(Error::INVAL)
}

/// The body of an object's open call in `domain` with a required attribute
/// (NULL: `-FI_EINVAL`): `open` makes the object, whose fid goes to `out`.
pub(super) fn open_in<A, T>(
    domain: *mut fid_xpu_domain,
    attr: Option<&A>,
    out: Out<*mut T>,
    open: impl FnOnce(&Use, &A) -> Result<*mut fid>,
) -> Result<c_int> {
    let dom = lookup(domain as *const c_void, Kind::Domain)?;
    let attr = attr.ok_or(Error::INVAL)?;
    out.put(open(&dom, attr)?.cast());
    Ok(0)
}

/// Checks a `(buf, len)` pair for a size query (`len` as `borrowed_opt!`
/// read it) and returns `*len`.
pub(super) fn size_query(buf: *mut c_void, len: Option<&usize>) -> Result<usize> {
    let n = *len.ok_or(Error::INVAL)?;
    if buf.is_null() && n != 0 {
        return Err(Error::INVAL);
    }
    Ok(n)
}

/// The checks of a raw-bytes query for a kernel (AV address, MR descriptor):
/// the object and the context are live and share a domain, no flag but
/// `FI_XPU`, and a valid `(buf, len)` size query. Returns the object and the context.
pub(super) fn raw_query(
    obj: *const c_void,
    kind: Kind,
    ctx: *mut fid_xpu_host_ctx,
    buf: *mut c_void,
    len: Option<&usize>,
    flags: u64,
) -> Result<(Use, Use)> {
    let o = lookup(obj, kind)?;
    let c = lookup(ctx as *const c_void, Kind::Ctx)?;
    if !o.same_domain(&c) {
        return Err(Error::INVAL);
    }
    // FI_XPU is what libfabric's callers pass to ask for the XPU form.
    flags::accept::<XpuFormFlags>(flags)?;
    size_query(buf, len)?;
    Ok((o, c))
}

/// A CQ or counter the host reads: `-FI_EOPNOTSUPP` for an XPU one.
pub(super) fn host_side(obj: *const c_void, kind: Kind) -> Result<Use> {
    let o = lookup(obj, kind)?;
    if o.xpu {
        return Err(Error::OPNOTSUPP);
    }
    Ok(o)
}
