//! What the vendor memory backends (`cuda`, `rocr`, `ze`) share: the
//! vendor's driver library opened with `dlopen` and initialised once per
//! process (`Driver`), a failed driver call turned into one log line and a
//! libfabric error (`Driver::check`), and the device ranges a backend maps
//! for a peer's memory (`Mapping`, `within`).
//!
//! Each `driver.rs` describes its library as a `Vendor`: the soname, the
//! entry points, how its status codes read and map to errors.
use super::backend::Import;
use crate::dl::{EntryPoints, Library};
use crate::error::{Error, Result};
use crate::fork::Made;
use std::collections::HashMap;
use std::ffi::{c_char, CStr};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

/// `cuGetErrorName`, `hsa_status_string`: a driver's static name for a
/// status, or NULL.
pub type Describe<S> = unsafe extern "C" fn(S, *mut *const c_char) -> S;

/// A driver opened once per process, or why it could not be.
pub type Once<V> = Made<std::result::Result<Driver<V>, (Error, String)>>;

/// One vendor's driver library, as its `driver.rs` declares it.
pub trait Vendor: Sized + 'static {
    /// `CUresult`, `hsa_status_t`, `ze_result_t`.
    type Status: Copy + PartialEq;
    /// The entry points every supported release has.
    type Api: EntryPoints;
    const SUCCESS: Self::Status;
    /// The soname opened; the dynamic linker's search finds it.
    const LIBRARY: &'static str;
    /// The iface, first in a failed context open's log line.
    const IFACE: &'static str;
    /// What the library is, in "no {KIND}: {LIBRARY}: ...".
    const KIND: &'static str;
    /// The prefix of a failed call's log line.
    const TAG: &'static str;
    /// Said after "{LIBRARY} has no {symbol}".
    const MISSING_HINT: &'static str = "";
    /// The entry point that names a status, if the library has one.
    const DESCRIBE: Option<&'static str> = None;
    /// The initialisation entry point, and what its failure suggests.
    const INIT: &'static str;
    const INIT_HINT: &'static str = "";

    /// The process's driver, in a static of the vendor's.
    fn once() -> &'static Once<Self>;
    /// Calls the initialisation entry point.
    fn init(api: &Self::Api) -> Self::Status;
    /// The libfabric error for a failed call.
    fn error(r: Self::Status) -> Error;
    /// The libfabric error for a failed initialisation.
    fn init_error(r: Self::Status) -> Error {
        Self::error(r)
    }
    /// A status for a log line; `described` is the driver's own name for
    /// it, when it has one.
    fn name(r: Self::Status, described: Option<&str>) -> String;
}

/// A loaded and initialised driver: its entry points (through `Deref`),
/// and the library kept open.
pub struct Driver<V: Vendor> {
    api: V::Api,
    describe: Option<Describe<V::Status>>,
    lib: Library,
}

impl<V: Vendor> std::ops::Deref for Driver<V> {
    type Target = V::Api;
    fn deref(&self) -> &V::Api {
        &self.api
    }
}

impl<V: Vendor> Driver<V> {
    /// The process's driver: opened and initialised once. The error says
    /// what is missing; the caller logs it.
    pub fn get() -> std::result::Result<&'static Driver<V>, (Error, String)> {
        // Two threads may both open it; the library stays loaded.
        V::once()
            .get_or_make(|| {
                let lib = Library::open(Path::new(V::LIBRARY))
                    .map_err(|e| (Error::NODEV, format!("no {}: {}: {e}", V::KIND, V::LIBRARY)))?;
                let api = V::Api::resolve(&lib).map_err(|sym| {
                    let hint = V::MISSING_HINT;
                    (Error::NOSYS, format!("{} has no {sym}{hint}", V::LIBRARY))
                })?;
                // SAFETY: every `Describe` entry point has this prototype in
                // its vendor's header (checked by the layout tests).
                let describe = V::DESCRIBE.and_then(|f| unsafe { lib.function::<Describe<_>>(f) });
                let d = Driver::<V> { api, describe, lib };
                let r = V::init(&d.api);
                if r != V::SUCCESS {
                    let why = format!("{} failed: {}{}", V::INIT, d.name(r), V::INIT_HINT);
                    return Err((V::init_error(r), why));
                }
                Ok(d)
            })
            .as_ref()
            .map_err(|e| e.clone())
    }

    /// The driver for a context's open: its error logged as the iface's.
    pub fn open() -> Result<&'static Driver<V>> {
        Self::get().map_err(|(e, why)| {
            crate::warn!("fi_xpu_ctx_open: {}: {why}", V::IFACE);
            e
        })
    }

    /// The library, for entry points looked up on their own (whose
    /// absence only disables a feature).
    pub fn library(&self) -> &Library {
        &self.lib
    }

    /// A status as the log lines show it.
    pub fn name(&self, r: V::Status) -> String {
        let mut s: *const c_char = std::ptr::null();
        let described = self.describe.and_then(|f| {
            // SAFETY: the entry point writes a static string or leaves NULL.
            let ok = unsafe { f(r, &mut s) } == V::SUCCESS && !s.is_null();
            // SAFETY: as above.
            ok.then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy())
        });
        V::name(r, described.as_deref())
    }

    /// `Ok` for success; otherwise logs that `what` failed and returns the
    /// mapped error.
    pub fn check(&self, what: &str, r: V::Status) -> Result<()> {
        if r == V::SUCCESS {
            return Ok(());
        }
        crate::warn!("{}: {what} failed: {}", V::TAG, self.name(r));
        Err(V::error(r))
    }
}

/// Whether `[addr, addr + size)` lies inside `[start, start + len)`.
pub fn within(addr: usize, size: u64, start: usize, len: usize) -> bool {
    addr >= start
        && ((addr - start) as u64)
            .checked_add(size)
            .is_some_and(|e| e <= len as u64)
}

/// A peer's device memory a backend mapped for an import, by the device
/// address handed out.
pub struct Mapping {
    pub base: usize,
    pub len: usize,
    /// For an application's import: the fd, so that the range can be
    /// exported again (offsets are from `base`).
    pub fd: Option<OwnedFd>,
}

impl Mapping {
    /// The fd to keep for `req`'s mapping of `fd`: a copy when the
    /// application imported it (it may be exported again).
    pub fn keep(req: &Import, fd: BorrowedFd) -> Result<Option<OwnedFd>> {
        if !req.exportable {
            return Ok(None);
        }
        Ok(Some(fd.try_clone_to_owned()?))
    }

    /// An fd and offset for `[addr, addr + size)` from a mapping that kept
    /// its fd; `None` when none holds the range.
    pub fn export(
        maps: &HashMap<usize, Mapping>,
        addr: usize,
        size: u64,
    ) -> Option<Result<(OwnedFd, u64)>> {
        let m = maps
            .values()
            .find(|m| m.fd.is_some() && within(addr, size, m.base, m.len))?;
        let fd = m.fd.as_ref().expect("filtered above");
        let off = (addr - m.base) as u64;
        Some(
            fd.as_fd()
                .try_clone_to_owned()
                .map(|f| (f, off))
                .map_err(Into::into),
        )
    }
}

/// The page size, for rounding a mapping.
pub fn page_size() -> usize {
    fi_xpu_os::rustix::param::page_size() as usize
}
