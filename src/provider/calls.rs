//! The provider's entry points as typed Rust methods of `Provider`, one per
//! descriptor field: each takes the entry point from the descriptor (the
//! loader checked it is set), converts its typed arguments to the plugin
//! ABI's and calls it. The one `unsafe` call is written once, in
//! `entry_points!`.
//!
//! Methods whose arguments are all typed (handles a provider gave, plain
//! values, references) are safe. Those that pass a buffer with its length
//! apart (a size query, a CQ read) are `unsafe fn`: their caller states
//! that the buffer holds the length it passes.
use super::handle::Handle;
use super::loader::Provider;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};

/// How a typed argument is passed to an entry point: a handle as the
/// provider's pointer, a reference as a pointer to what it names, a value
/// as itself.
trait Arg {
    type C;
    fn c(self) -> Self::C;
}

impl Arg for Handle {
    type C = fi_xpu_prov_handle;
    fn c(self) -> Self::C {
        self.0
    }
}

impl Arg for &mut Handle {
    type C = *mut fi_xpu_prov_handle;
    fn c(self) -> Self::C {
        &mut self.0
    }
}

/// Types an entry point reads or writes through a pointer argument.
trait Pointee {}

impl<T: Pointee> Arg for &T {
    type C = *const T;
    fn c(self) -> Self::C {
        self
    }
}

impl<T: Pointee> Arg for &mut T {
    type C = *mut T;
    fn c(self) -> Self::C {
        self
    }
}

macro_rules! pointee {
    ($($t:ty),*) => { $(impl Pointee for $t {})* };
}
pointee!(
    u64,
    usize,
    fi_xpu_domain_attr,
    fi_xpu_prov_ctx_args,
    fi_xpu_ctx_info,
    fi_xpu_av_attr,
    fi_xpu_prov_mr_args,
    fi_xpu_cq_attr,
    fi_xpu_cntr_attr,
    fi_xpu_ep_attr,
    fid_xpu,
    fi_cq_err_entry
);

macro_rules! by_value {
    ($($t:ty),*) => {
        $(impl Arg for $t {
            type C = $t;
            fn c(self) -> Self::C {
                self
            }
        })*
    };
}
by_value!(
    u32,
    u64,
    usize,
    *const c_void,
    *mut c_void,
    *mut usize,
    *mut fi_addr_t
);

/// One typed method per entry point. `unsafe fn` marks those whose raw
/// arguments the caller vouches for (see each one's `# Safety`).
macro_rules! entry_points {
    () => {};
    ($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty; $($rest:tt)*) => {
        entry_points!(@emit [$(#[$doc])*] [] $name ($($arg: $ty),*) $ret);
        entry_points!($($rest)*);
    };
    // `$q` is `unsafe`.
    ($(#[$doc:meta])* $q:ident fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty; $($rest:tt)*) => {
        entry_points!(@emit [$(#[$doc])*] [$q] $name ($($arg: $ty),*) $ret);
        entry_points!($($rest)*);
    };
    (@emit [$(#[$doc:meta])*] [$($q:ident)?] $name:ident ($($arg:ident: $ty:ty),*) $ret:ty) => {
        impl Provider {
            $(#[$doc])*
            pub $($q)? fn $name(&self, $($arg: $ty),*) -> $ret {
                let f = self.desc().$name.expect(concat!("loader checked ", stringify!($name)));
                $(let $arg = Arg::c($arg);)*
                // SAFETY: the loader checked that this entry point is set
                // (a required field, or one the descriptor's size covers);
                // handles are ones this provider made and the core keeps
                // live while the call runs, references point to what the
                // plugin ABI says, and an `unsafe fn`'s raw buffers are valid
                // for their lengths (its caller's contract).
                unsafe { f($($arg),*) }
            }
        }
    };
}

entry_points! {
    fn domain_open(prov: Handle, attr: &fi_xpu_domain_attr, domain: &mut Handle) -> c_int;
    fn domain_close(domain: Handle) -> c_int;

    fn ctx_open(domain: Handle, args: &fi_xpu_prov_ctx_args, ctx: &mut Handle) -> c_int;
    fn ctx_query(ctx: Handle, info: &mut fi_xpu_ctx_info) -> c_int;
    fn ctx_close(ctx: Handle) -> c_int;

    fn av_open(domain: Handle, attr: &fi_xpu_av_attr, av: &mut Handle) -> c_int;
    /// # Safety
    /// `addr` holds the provider's `addrlen` bytes.
    unsafe fn av_insert(av: Handle, addr: *const c_void, fi_addr: &mut u64, flags: u64) -> c_int;
    fn av_remove(av: Handle, fi_addr: u64, flags: u64) -> c_int;
    /// # Safety
    /// `len` is valid and `buf` is NULL with `*len` 0, or holds `*len` bytes.
    unsafe fn av_lookup(
        av: Handle,
        fi_addr: u64,
        ctx: Handle,
        buf: *mut c_void,
        len: *mut usize,
        flags: u64
    ) -> c_int;
    fn av_close(av: Handle) -> c_int;

    fn mr_reg(domain: Handle, ctx: Handle, args: &fi_xpu_prov_mr_args, mr: &mut Handle) -> c_int;
    fn mr_key(mr: Handle, key: &mut u64) -> c_int;
    /// # Safety
    /// `len` is valid and `buf` is NULL with `*len` 0, or holds `*len` bytes.
    unsafe fn mr_desc(mr: Handle, ctx: Handle, buf: *mut c_void, len: *mut usize, flags: u64) -> c_int;
    fn mr_close(mr: Handle) -> c_int;

    fn cq_open(domain: Handle, ctx: Handle, attr: &fi_xpu_cq_attr, cq: &mut Handle) -> c_int;
    fn cq_export(cq: Handle, flags: u64, out: &mut fid_xpu) -> c_int;
    /// # Safety
    /// `buf` has room for `count` entries of the CQ's format; `src_addr`
    /// is NULL or has `count` slots.
    unsafe fn cq_host_read(cq: Handle, buf: *mut c_void, count: usize, src_addr: *mut fi_addr_t) -> isize;
    fn cq_host_readerr(cq: Handle, buf: &mut fi_cq_err_entry, flags: u64) -> isize;
    fn cq_close(cq: Handle) -> c_int;

    fn cntr_open(domain: Handle, ctx: Handle, attr: &fi_xpu_cntr_attr, cntr: &mut Handle) -> c_int;
    fn cntr_export(cntr: Handle, flags: u64, out: &mut fid_xpu) -> c_int;
    fn cntr_host_read(cntr: Handle, value: &mut u64, err: &mut u64) -> c_int;
    fn cntr_host_update(cntr: Handle, how: u32, value: u64) -> c_int;
    fn cntr_close(cntr: Handle) -> c_int;

    fn ep_open(domain: Handle, ctx: Handle, attr: &fi_xpu_ep_attr, ep: &mut Handle) -> c_int;
    fn ep_bind(ep: Handle, fclass: usize, obj: Handle, flags: u64) -> c_int;
    fn ep_enable(ep: Handle) -> c_int;
    /// # Safety
    /// `len` is valid and `addr` is NULL with `*len` 0, or holds `*len` bytes.
    unsafe fn ep_getname(ep: Handle, addr: *mut c_void, len: *mut usize) -> c_int;
    fn ep_export(ep: Handle, flags: u64, out: &mut fid_xpu) -> c_int;
    fn ep_close(ep: Handle) -> c_int;
}
