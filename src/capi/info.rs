//! Discovery, versions and error strings.
use crate::error::{strerror_c, Error};
use crate::provider::Providers;
use fi_xpu_abi::*;
use std::ffi::{c_char, c_int, CStr, CString};

/// The providers of this process, loaded on first use with the C API's
/// services table.
pub fn providers() -> &'static Providers {
    crate::provider::providers(&super::services::CORE_SERVICES)
}

/// Library version as `FI_XPU_VERSION(major, minor)`.
#[no_mangle]
pub extern "C" fn fi_xpu_version() -> u32 {
    FI_XPU_API_VERSION
}

/// Text for an error number (either sign). The string is static.
#[no_mangle]
pub extern "C" fn fi_xpu_strerror(errnum: c_int) -> *const c_char {
    strerror_c(errnum).as_ptr()
}

/// Whether provider `p` matches the hints (NULL: every provider).
///
/// # Safety
/// `hints` is NULL or an `fi_xpu_info` as the application's header lays
/// it out: an older one ends at `handle`, so only fields before it are
/// read, one by one.
unsafe fn matches(hints: *const fi_xpu_info, p: &crate::provider::Provider) -> bool {
    if hints.is_null() {
        return true;
    }
    // SAFETY: per the function contract: fields before `handle`, read
    // through the raw pointer without making a reference to the whole.
    let (name, caps, ifaces, prov_id) = unsafe {
        (
            std::ptr::addr_of!((*hints).prov_name).read(),
            std::ptr::addr_of!((*hints).caps).read(),
            std::ptr::addr_of!((*hints).ifaces).read(),
            std::ptr::addr_of!((*hints).prov_id).read(),
        )
    };
    let d = p.desc();
    if !name.is_null() {
        // SAFETY: a non-NULL hint name is a NUL-terminated string (API contract).
        let want = unsafe { CStr::from_ptr(name) };
        if want.to_bytes() != p.name.as_bytes() {
            return false;
        }
    }
    (d.caps & caps) == caps
        && (d.ifaces & ifaces) == ifaces
        && (prov_id == 0 || prov_id == d.prov_id)
}

/// Lists the usable providers matching `hints` (NULL: all).
///
/// # Safety
/// `hints` is NULL or a valid `fi_xpu_info`; `info` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_getinfo(
    version: u32,
    hints: *const fi_xpu_info,
    flags: u64,
    info: *mut *mut fi_xpu_info,
) -> c_int {
    boundary!({
        let out = out!(info)?;
        if version >> 16 != FI_XPU_MAJOR_VERSION || (version & 0xffff) > FI_XPU_MINOR_VERSION {
            crate::warn!(
                "fi_xpu_getinfo: version {}.{} is not served by this library ({FI_XPU_MAJOR_VERSION}.{FI_XPU_MINOR_VERSION})",
                version >> 16,
                version & 0xffff
            );
            return Err(Error::NOSYS);
        }
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let mut head: *mut fi_xpu_info = std::ptr::null_mut();
        let all = providers();
        for i in all.listing_order().into_iter().rev() {
            let p = &all.loaded[i];
            // SAFETY: `hints` is NULL or a valid struct, unchanged during
            // the call (the API's contract).
            if !unsafe { matches(hints, p) } {
                continue;
            }
            let d = p.desc();
            let node = Box::new(fi_xpu_info {
                next: head,
                prov_name: CString::new(p.name.clone()).unwrap().into_raw(),
                prov_version: d.version,
                prov_id: d.prov_id,
                caps: d.caps,
                ifaces: d.ifaces,
                addrlen: d.addrlen,
                handle: (i + 1) as *mut std::ffi::c_void,
                limits: d.limits,
            });
            head = Box::into_raw(node);
        }
        if head.is_null() {
            return Err(Error::NODATA);
        }
        out.put(head);
        Ok(0)
    })
}

/// Frees a list from `fi_xpu_getinfo`.
///
/// # Safety
/// `info` is NULL or a list returned by `fi_xpu_getinfo`, freed once.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_freeinfo(info: *mut fi_xpu_info) {
    boundary!({
        let mut cur = info;
        // Every node was made by Box::into_raw in fi_xpu_getinfo.
        while let Some(node) = owned!(cur) {
            if !node.prov_name.is_null() {
                // SAFETY: made by CString::into_raw in fi_xpu_getinfo.
                drop(unsafe { CString::from_raw(node.prov_name) });
            }
            cur = node.next;
        }
        Ok(())
    })
}

/// The provider an info entry names (the index kept in `handle`).
pub(super) fn provider_of(
    info: &fi_xpu_info,
) -> crate::Result<std::sync::Arc<crate::provider::Provider>> {
    let idx = (info.handle as usize).checked_sub(1).ok_or(Error::INVAL)?;
    let p = providers().loaded.get(idx).ok_or(Error::INVAL)?;
    if p.desc().prov_id != info.prov_id {
        return Err(Error::INVAL);
    }
    Ok(p.clone())
}
