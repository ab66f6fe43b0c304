//! Writing an fi_xpu provider in Rust.
//!
//! The plugin ABI (`fi_xpu/provider.h`, see fi_xpu_prov_desc(7)) is a
//! table of 32 `extern "C"` entry points over opaque handles. This crate
//! owns that unsafe layer once: a provider implements the safe [`Provider`]
//! trait on its own types and writes
//!
//! ```text
//! fi_xpu_prov_sdk::export_provider!(MyProvider);
//! ```
//!
//! which emits the static descriptor and `fi_xpu_prov_ini`. Each entry point
//! is a generic function of the SDK instantiated for the provider: it turns
//! handles back into references, calls the trait, writes out-parameters only
//! on success, answers size queries with `-FI_ETOOSMALL` and `*len`, and
//! catches panics so that none crosses the C boundary (`-FI_EOTHER`, with a
//! log line). [`services`] wraps the core's table: logging under the
//! provider's name and the memory services.
//!
//! What the SDK relies on is what the core guarantees (fi_xpu_prov_desc(7)):
//! every handle it passes is one this provider returned and has not closed,
//! of the right kind; attributes and out-pointers are valid; closes come
//! once, after every object that depends on the one closed.
mod glue;
pub mod layout_check;
pub mod services;

pub use fi_xpu_abi as abi;
pub use fi_xpu_abi::error::{Error, Result};

use fi_xpu_abi::*;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard};

/// What `ep_bind` receives: an object of this provider, by class.
pub enum Bind<'a, P: Provider + ?Sized> {
    Av(&'a P::Av),
    Cq(&'a P::Cq),
    Cntr(&'a P::Cntr),
}

/// The application's buffer of a host CQ read: room for `count()` entries
/// in the CQ's format, and `count()` source addresses when `src()` is not
/// NULL. The core checked that the buffer is non-NULL and `count()` > 0;
/// its size follows from the format the CQ was opened with, which only the
/// provider knows, so entries are written through the raw pointers.
pub struct HostCqBuf<'a> {
    buf: *mut u8,
    count: usize,
    src: *mut fi_addr_t,
    _app: PhantomData<&'a mut [u8]>,
}

impl HostCqBuf<'_> {
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf
    }

    /// NULL when the application did not ask for source addresses.
    pub fn src(&mut self) -> *mut fi_addr_t {
        self.src
    }
}

/// A provider: its identity, its object types and the safe operations on
/// them. Errors are [`Error`]s (`Error::INVAL`...), which the SDK returns
/// to the application as negative codes (`-FI_EINVAL`), unchanged.
///
/// Entry points may run on any thread and concurrently, also on one object
/// (fi_xpu_prov_desc(7), THREADING), hence `&` references and `Send + Sync`
/// objects: state that operations change needs interior mutability. Close
/// methods get `&mut`: the core calls them once, when nothing else holds
/// the object. A close that returns an error keeps the object alive and
/// usable; on success the SDK drops it.
pub trait Provider: 'static {
    /// Must equal `<name>` of the file name `libfi_xpu-<name>.so`.
    const NAME: &'static CStr;
    /// `FI_XPU_VERSION(major, minor)` of the provider itself.
    const VERSION: u32;
    /// The id kernels dispatch on (`fid_xpu.prov_id`).
    const PROV_ID: u32;
    /// `FI_XPU_CAP_*` offered.
    const CAPS: u64;
    /// Bit `1 << iface` per `enum fi_hmem_iface` served.
    const IFACES: u64;
    /// Bytes of an endpoint name (`ep_getname`, `av_insert`).
    const ADDRLEN: usize;
    /// The largest sizes served (`fi_xpu_info.limits`); 0 where the
    /// provider sets no bound of its own. Requests above one are the
    /// provider's to refuse with `FI_EINVAL`.
    const LIMITS: fi_xpu_limits = fi_xpu_limits {
        cq_size: 0,
        tx_depth: 0,
        rx_depth: 0,
        msg_size: 0,
    };

    type Domain: Send + Sync;
    type Ctx: Send + Sync;
    type Av: Send + Sync;
    type Mr: Send + Sync;
    type Cq: Send + Sync;
    type Cntr: Send + Sync;
    type Ep: Send + Sync;

    /// Runs once after the core's services are in place; an error skips the
    /// provider (log why first).
    fn init() -> Result<()> {
        Ok(())
    }

    fn domain_open(attr: &fi_xpu_domain_attr) -> Result<Self::Domain>;
    fn domain_close(_domain: &mut Self::Domain) -> Result<()> {
        Ok(())
    }

    fn ctx_open(domain: &Self::Domain, args: &fi_xpu_prov_ctx_args) -> Result<Self::Ctx>;
    /// Also sizes the buffers of `av_lookup` and `mr_desc`: smaller ones are
    /// answered with `-FI_ETOOSMALL` before the provider is asked.
    fn ctx_query(ctx: &Self::Ctx) -> Result<fi_xpu_ctx_info>;
    fn ctx_close(_ctx: &mut Self::Ctx) -> Result<()> {
        Ok(())
    }

    fn av_open(domain: &Self::Domain, attr: &fi_xpu_av_attr) -> Result<Self::Av>;
    /// `addr` is `ADDRLEN` bytes; returns the new `fi_addr`.
    fn av_insert(av: &Self::Av, addr: &[u8], flags: u64) -> Result<fi_addr_t>;
    fn av_remove(av: &Self::Av, fi_addr: fi_addr_t, flags: u64) -> Result<()>;
    /// The raw address a kernel on `ctx` uses for `fi_addr`.
    fn av_lookup(av: &Self::Av, fi_addr: fi_addr_t, ctx: &Self::Ctx, flags: u64)
        -> Result<Vec<u8>>;
    fn av_close(_av: &mut Self::Av) -> Result<()> {
        Ok(())
    }

    /// `ctx` is `None` for plain host memory.
    fn mr_reg(
        domain: &Self::Domain,
        ctx: Option<&Self::Ctx>,
        args: &fi_xpu_prov_mr_args,
    ) -> Result<Self::Mr>;
    fn mr_key(mr: &Self::Mr) -> Result<u64>;
    /// The raw descriptor a kernel on `ctx` passes as `desc`.
    fn mr_desc(mr: &Self::Mr, ctx: &Self::Ctx, flags: u64) -> Result<Vec<u8>>;
    fn mr_close(_mr: &mut Self::Mr) -> Result<()> {
        Ok(())
    }

    /// `ctx` is `None` for a host CQ.
    fn cq_open(
        domain: &Self::Domain,
        ctx: Option<&Self::Ctx>,
        attr: &fi_xpu_cq_attr,
    ) -> Result<Self::Cq>;
    /// The device-visible address of the CQ's state (`fid_xpu.prov_ctx`).
    fn cq_export(cq: &Self::Cq, flags: u64) -> Result<u64>;
    /// Host CQs only: the number of entries read, `-FI_EAGAIN` when empty.
    fn cq_host_read(cq: &Self::Cq, out: HostCqBuf<'_>) -> Result<usize>;
    fn cq_host_readerr(cq: &Self::Cq, out: &mut fi_cq_err_entry, flags: u64) -> Result<usize>;
    fn cq_close(_cq: &mut Self::Cq) -> Result<()> {
        Ok(())
    }

    /// `ctx` is `None` for a host counter.
    fn cntr_open(
        domain: &Self::Domain,
        ctx: Option<&Self::Ctx>,
        attr: &fi_xpu_cntr_attr,
    ) -> Result<Self::Cntr>;
    fn cntr_export(cntr: &Self::Cntr, flags: u64) -> Result<u64>;
    /// Host counters only: (value, error count).
    fn cntr_host_read(cntr: &Self::Cntr) -> Result<(u64, u64)>;
    /// `FI_XPU_CNTR_ADD` / `FI_XPU_CNTR_SET`, or-ed with `FI_XPU_CNTR_ERR`.
    fn cntr_host_update(cntr: &Self::Cntr, how: u32, value: u64) -> Result<()>;
    fn cntr_close(_cntr: &mut Self::Cntr) -> Result<()> {
        Ok(())
    }

    fn ep_open(domain: &Self::Domain, ctx: &Self::Ctx, attr: &fi_xpu_ep_attr) -> Result<Self::Ep>;
    /// The core checked domain and context; the object stays open while bound.
    fn ep_bind(ep: &Self::Ep, obj: Bind<'_, Self>, flags: u64) -> Result<()>;
    fn ep_enable(ep: &Self::Ep) -> Result<()>;
    /// The endpoint's name, `ADDRLEN` bytes.
    fn ep_getname(ep: &Self::Ep) -> Result<Vec<u8>>;
    fn ep_export(ep: &Self::Ep, flags: u64) -> Result<u64>;
    fn ep_close(_ep: &mut Self::Ep) -> Result<()> {
        Ok(())
    }
}

/// The `fi_ep_bind` flag of each of an endpoint's six counters, in the
/// order the providers' layouts number them (`CNTR_SEND` 0, `CNTR_RECV`,
/// `CNTR_READ`, `CNTR_WRITE`, `CNTR_REM_READ`, `CNTR_REM_WRITE` 5).
pub const CNTR_BIND_FLAGS: [u64; 6] = {
    use abi::flags::*;
    [
        FI_SEND,
        FI_RECV,
        FI_READ,
        FI_WRITE,
        FI_REMOTE_READ,
        FI_REMOTE_WRITE,
    ]
};

/// The counter slots `flags` (of `fi_ep_bind`) select.
pub fn cntr_slots(flags: u64) -> impl Iterator<Item = usize> {
    (0..CNTR_BIND_FLAGS.len()).filter(move |&i| flags & CNTR_BIND_FLAGS[i] != 0)
}

/// A count-or-error from code that speaks the C convention.
pub fn ssize(r: isize) -> Result<usize> {
    if r < 0 {
        Err(Error::from_code(r.max(i32::MIN as isize) as i32))
    } else {
        Ok(r as usize)
    }
}

/// A status in the C convention (0 or a negative code) as a `Result`.
pub fn status(r: i32) -> Result<()> {
    Error::check(r)
}

/// Locks `m` even if a panic poisoned it: the SDK turns a panic into
/// `-FI_EOTHER` and the object stays in use, so its lock must stay usable.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The static descriptor `fi_xpu_prov_ini` returns.
/// The ELF note of provider `P` (`fi_xpu_prov_note`), which
/// `export_provider!` places in `.note.fi_xpu`: the core reads the name,
/// `prov_id` and ABI from the file, before `dlopen`.
pub const fn note<P: Provider>() -> abi::fi_xpu_prov_note {
    let bytes = P::NAME.to_bytes();
    assert!(bytes.len() < 32, "a provider name has at most 31 bytes");
    let mut name = [0 as std::ffi::c_char; 32];
    let mut i = 0;
    while i < bytes.len() {
        name[i] = bytes[i] as std::ffi::c_char;
        i += 1;
    }
    let mut owner = [0 as std::ffi::c_char; 8];
    let fi_xpu = b"fi_xpu";
    let mut i = 0;
    while i < fi_xpu.len() {
        owner[i] = fi_xpu[i] as std::ffi::c_char;
        i += 1;
    }
    abi::fi_xpu_prov_note {
        namesz: abi::FI_XPU_PROV_NOTE_NAMESZ,
        descsz: abi::FI_XPU_PROV_NOTE_DESCSZ,
        type_: abi::FI_XPU_PROV_NOTE_TYPE,
        owner,
        abi_major: abi::FI_XPU_PROV_ABI_MAJOR,
        abi_minor: abi::FI_XPU_PROV_ABI_MINOR,
        prov_id: P::PROV_ID,
        version: P::VERSION,
        name,
    }
}

pub struct Descriptor(fi_xpu_prov_desc);

// SAFETY: the descriptor is immutable static data: pointers to a static
// name and to functions.
unsafe impl Sync for Descriptor {}

impl Descriptor {
    pub const fn of<P: Provider>() -> Descriptor {
        Descriptor(glue::descriptor::<P>())
    }

    pub const fn as_ptr(&'static self) -> *const fi_xpu_prov_desc {
        &self.0
    }
}

/// Makes the crate a plugin of provider `$p`: a static descriptor whose
/// entry points are the SDK's functions instantiated for `$p`, and the exported
/// `fi_xpu_prov_ini` returning it. Use once, in the plugin's cdylib.
#[macro_export]
macro_rules! export_provider {
    ($p:ty) => {
        static FI_XPU_PROV_DESCRIPTOR: $crate::Descriptor = $crate::Descriptor::of::<$p>();

        /// The plugin's identity, read by the core before it loads the file.
        #[used]
        #[link_section = ".note.fi_xpu"]
        static FI_XPU_PROV_NOTE: $crate::abi::fi_xpu_prov_note = $crate::note::<$p>();

        /// The plugin's entry point.
        #[no_mangle]
        pub extern "C" fn fi_xpu_prov_ini() -> *const $crate::abi::fi_xpu_prov_desc {
            FI_XPU_PROV_DESCRIPTOR.as_ptr()
        }
    };
}
