//! The domain: `fi_xpu_domain`.
use super::args::attr_size;
use super::fid::FID_OPS;
use super::info::provider_of;
use crate::flags::{self, DomainFlags};
use crate::ops::objects as ops;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// Opens a domain on the provider `info` names.
///
/// # Safety
/// `info` comes from `fi_xpu_getinfo`; `attr` is NULL or valid; `domain` is a
/// valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_domain(
    info: *const fi_xpu_info,
    attr: *const fi_xpu_domain_attr,
    domain: *mut *mut fid_xpu_domain,
    context: *mut c_void,
) -> c_int {
    boundary!({
        let out = out!(domain)?;
        let prov = provider_of(borrowed!(info)?)?;
        let defaults = fi_xpu_domain_attr::default();
        let attr = match borrowed_opt!(attr) {
            None => &defaults,
            Some(a) => {
                attr_size::<fi_xpu_domain_attr>("fi_xpu_domain", "fi_xpu_domain_attr", a.size)?;
                flags::accept::<DomainFlags>(a.flags)?;
                a
            }
        };
        out.put(ops::domain(prov, attr, context, &FID_OPS)?.cast());
        Ok(0)
    })
}
