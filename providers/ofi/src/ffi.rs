//! The libfabric structs the provider fills by hand, and the C shim's calls
//! (shim/shim.c). Layouts are checked against libfabric's headers by
//! `layout_matches_headers` below.
#![allow(non_camel_case_types)]
use std::ffi::{c_char, c_int, c_long, c_void};

/// libfabric's message and completion structs, mirrored once for the
/// whole library.
pub use fi_xpu_abi::{
    fi_cq_err_entry, fi_cq_tagged_entry, fi_ioc, fi_msg, fi_msg_atomic, fi_msg_rma, fi_msg_tagged,
    fi_rma_ioc, fi_rma_iov, iovec,
};

/// `struct fi_context2`: scratch space a provider may use per operation.
pub const FI_CONTEXT2_SIZE: usize = 64;

pub const FI_ADDR_NOTAVAIL: u64 = u64::MAX;
/// Capability and operation flag: the operation waits until every earlier
/// one to the same peer has completed.
pub const FI_FENCE: u64 = 1 << 21;
pub const FI_RMA_EVENT: u64 = 1 << 56;
/// More operations follow at once: the provider may hold this one to send
/// them together (it still moves it in its next progress call).
pub const FI_MORE: u64 = 1 << 18;
pub const FI_SOURCE: u64 = 1 << 57;
pub const FI_MR_LOCAL: u64 = 1 << 0;
pub const FI_MR_HMEM: u64 = 1 << 10;
pub const FI_MR_VIRT_ADDR: u64 = 1 << 4;
pub const FI_MR_PROV_KEY: u64 = 1 << 6;

extern "C" {
    pub fn xo_available() -> c_int;
    pub fn xo_version() -> u32;
    pub fn xo_strerror(err: c_int) -> *const c_char;
    pub fn xo_open(
        prov: *const c_char,
        domain_name: *const c_char,
        base_caps: u64,
        optional: u64,
        info: *mut *mut c_void,
        fabric: *mut *mut c_void,
        domain: *mut *mut c_void,
        got_caps: *mut u64,
    ) -> c_int;
    pub fn xo_freeinfo(info: *mut c_void);
    pub fn xo_info_prov_name(info: *const c_void) -> *const c_char;
    pub fn xo_info_domain_name(info: *const c_void) -> *const c_char;
    pub fn xo_info_mr_mode(info: *const c_void) -> u64;
    pub fn xo_info_max_msg_size(info: *const c_void) -> u64;
    pub fn xo_info_cq_data_size(info: *const c_void) -> usize;
    pub fn xo_close(fid: *mut c_void) -> c_int;
    pub fn xo_av_open(domain: *mut c_void, count: usize, av: *mut *mut c_void) -> c_int;
    pub fn xo_av_insert(av: *mut c_void, addr: *const c_void, fi_addr: *mut u64) -> c_int;
    pub fn xo_av_remove(av: *mut c_void, fi_addr: u64) -> c_int;
    #[allow(clippy::too_many_arguments)]
    pub fn xo_mr_reg(
        domain: *mut c_void,
        buf: *const c_void,
        len: usize,
        access: u64,
        requested_key: u64,
        iface: c_int,
        device: u64,
        mr: *mut *mut c_void,
        key: *mut u64,
        desc: *mut *mut c_void,
    ) -> c_int;
    pub fn xo_cq_open(
        domain: *mut c_void,
        size: usize,
        cq: *mut *mut c_void,
        fd: *mut c_int,
    ) -> c_int;
    pub fn xo_trywait(fabric: *mut c_void, fids: *mut *mut c_void, count: c_int) -> c_int;
    pub fn xo_info_auto_progress(info: *const c_void) -> c_int;
    pub fn xo_info_ordered_inject(info: *const c_void) -> usize;
    pub fn xo_cntr_open(domain: *mut c_void, cntr: *mut *mut c_void) -> c_int;
    pub fn xo_cntr_read(cntr: *mut c_void) -> u64;
    pub fn xo_cntr_readerr(cntr: *mut c_void) -> u64;
    pub fn xo_ep_open(domain: *mut c_void, info: *mut c_void, ep: *mut *mut c_void) -> c_int;
    pub fn xo_ep_open_src(
        domain: *mut c_void,
        info: *mut c_void,
        src: *const c_char,
        ep: *mut *mut c_void,
    ) -> c_int;
    pub fn xo_ep_bind(ep: *mut c_void, fid: *mut c_void, flags: u64) -> c_int;
    pub fn xo_ep_enable(ep: *mut c_void) -> c_int;
    pub fn xo_getname(ep: *mut c_void, addr: *mut c_void, len: *mut usize) -> c_int;
    pub fn xo_cq_readfrom(cq: *mut c_void, buf: *mut c_void, count: usize, src: *mut u64)
        -> c_long;
    pub fn xo_cq_readerr(cq: *mut c_void, err: *mut fi_cq_err_entry) -> c_long;
    pub fn xo_writemsg(ep: *mut c_void, msg: *const fi_msg_rma, flags: u64) -> c_long;
    pub fn xo_readmsg(ep: *mut c_void, msg: *const fi_msg_rma, flags: u64) -> c_long;
    pub fn xo_sendmsg(ep: *mut c_void, msg: *const fi_msg, flags: u64) -> c_long;
    pub fn xo_recvmsg(ep: *mut c_void, msg: *const fi_msg, flags: u64) -> c_long;
    pub fn xo_tsendmsg(ep: *mut c_void, msg: *const fi_msg_tagged, flags: u64) -> c_long;
    pub fn xo_trecvmsg(ep: *mut c_void, msg: *const fi_msg_tagged, flags: u64) -> c_long;
    pub fn xo_atomicmsg(ep: *mut c_void, msg: *const fi_msg_atomic, flags: u64) -> c_long;
    pub fn xo_fetch_atomicmsg(
        ep: *mut c_void,
        msg: *const fi_msg_atomic,
        result: *const fi_ioc,
        result_desc: *mut *mut c_void,
        flags: u64,
    ) -> c_long;
    pub fn xo_compare_atomicmsg(
        ep: *mut c_void,
        msg: *const fi_msg_atomic,
        compare: *const fi_ioc,
        compare_desc: *mut *mut c_void,
        result: *const fi_ioc,
        result_desc: *mut *mut c_void,
        flags: u64,
    ) -> c_long;
    pub fn xo_atomic_valid(ep: *mut c_void, kind: c_int, datatype: c_int, op: c_int) -> c_int;
    pub fn xo_layout(out: *mut usize, max: usize) -> usize;
}

/// Whether the shim was built against libfabric.
pub fn available() -> bool {
    // SAFETY: no arguments, no state.
    unsafe { xo_available() != 0 }
}

pub fn strerror(err: i32) -> String {
    // SAFETY: fi_strerror returns a static NUL-terminated string.
    let s = unsafe { std::ffi::CStr::from_ptr(xo_strerror(err.abs())) };
    s.to_string_lossy().into_owned()
}

/// The same list of sizes and offsets that `xo_layout` reports from the C
/// headers, computed from the structs above.
pub fn rust_layout() -> Vec<usize> {
    use std::mem::{offset_of, size_of};
    vec![
        size_of::<iovec>(),
        size_of::<fi_rma_iov>(),
        offset_of!(fi_rma_iov, len),
        offset_of!(fi_rma_iov, key),
        size_of::<fi_ioc>(),
        offset_of!(fi_ioc, count),
        size_of::<fi_rma_ioc>(),
        offset_of!(fi_rma_ioc, count),
        offset_of!(fi_rma_ioc, key),
        size_of::<fi_msg>(),
        offset_of!(fi_msg, desc),
        offset_of!(fi_msg, iov_count),
        offset_of!(fi_msg, addr),
        offset_of!(fi_msg, context),
        offset_of!(fi_msg, data),
        size_of::<fi_msg_tagged>(),
        offset_of!(fi_msg_tagged, addr),
        offset_of!(fi_msg_tagged, tag),
        offset_of!(fi_msg_tagged, ignore),
        offset_of!(fi_msg_tagged, context),
        offset_of!(fi_msg_tagged, data),
        size_of::<fi_msg_rma>(),
        offset_of!(fi_msg_rma, addr),
        offset_of!(fi_msg_rma, rma_iov),
        offset_of!(fi_msg_rma, rma_iov_count),
        offset_of!(fi_msg_rma, context),
        offset_of!(fi_msg_rma, data),
        size_of::<fi_msg_atomic>(),
        offset_of!(fi_msg_atomic, addr),
        offset_of!(fi_msg_atomic, rma_iov),
        offset_of!(fi_msg_atomic, rma_iov_count),
        offset_of!(fi_msg_atomic, datatype),
        offset_of!(fi_msg_atomic, op),
        offset_of!(fi_msg_atomic, context),
        offset_of!(fi_msg_atomic, data),
        size_of::<fi_cq_tagged_entry>(),
        offset_of!(fi_cq_tagged_entry, tag),
        size_of::<fi_cq_err_entry>(),
        offset_of!(fi_cq_err_entry, err),
        offset_of!(fi_cq_err_entry, prov_errno),
        FI_CONTEXT2_SIZE,
    ]
}

#[cfg(all(test, ofi_libfabric))]
mod tests {
    #[test]
    fn layout_matches_headers() {
        let mut c = [0usize; 64];
        // SAFETY: the buffer holds 64 entries and the call writes at most that.
        let n = unsafe { super::xo_layout(c.as_mut_ptr(), c.len()) };
        let r = super::rust_layout();
        assert_eq!(n, r.len(), "the two lists name the same fields");
        assert_eq!(&c[..n], &r[..]);
    }
}
