//! The domain: a libfabric fabric and domain (the first libfabric
//! provider of the list that offers what fi_xpu needs, or the one named),
//! and the progress threads that serve its endpoints.
use crate::core;
use crate::fabric::{Fid, Info};
use crate::ffi;
use crate::params::{param, DEFAULT_THREADS, MAX_THREADS};
use crate::proxy::{self, Tuning, Watch, Worker};
use crate::state::dom::{DomInner, MrTable};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

/// Longest operation the proxy passes on, whatever libfabric allows (tcp
/// and shm say SIZE_MAX): no buffer of a device or host reaches 2^48
/// bytes, so a longer length in a ring entry is garbage, not a transfer.
pub const MAX_LEN: u64 = 1 << 48;

/// The libfabric providers tried in order when none is named (the list in
/// shim.c, for messages).
pub const DEFAULT_FABRICS: &str = "cxi, efa, verbs, opx, tcp, shm";
/// libfabric's reliable-datagram utility provider (`udp;ofi_rxd`).
const RXD: &str = "ofi_rxd";

const BASE_CAPS: u64 = FI_MSG
    | FI_RMA
    | FI_TAGGED
    | FI_READ
    | FI_WRITE
    | FI_SEND
    | FI_RECV
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE;

/// A domain: what its objects and the progress threads read of it
/// (`inner`), and the threads themselves.
pub struct Domain {
    pub inner: Arc<DomInner>,
    pub workers: Arc<Workers>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// The domain's progress threads, shared with its contexts and endpoints.
pub struct Workers {
    pub list: Vec<Arc<Worker>>,
    /// Turns of the threads: the next endpoint enabled goes to
    /// `next % list.len()`.
    pub next: AtomicUsize,
}

/// The string at `p`, empty for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that lives for the call.
unsafe fn cstr_or_empty(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: per the function contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Domain {
    pub fn open(attr: Option<&fi_xpu_domain_attr>) -> Result<Domain> {
        let prov = match attr.filter(|a| !a.fabric_prov.is_null()) {
            // SAFETY: the core passes the caller's NUL-terminated string.
            Some(a) => Some(unsafe { cstr_or_empty(a.fabric_prov) }),
            None => param("FI_XPU_OFI_PROVIDER"),
        };
        let nthreads = match attr.map_or(0, |a| a.progress_threads) {
            0 => param("FI_XPU_OFI_PROGRESS_THREADS")
                .and_then(|s| s.parse().ok())
                .unwrap_or(DEFAULT_THREADS),
            n => n,
        };
        if nthreads == 0 || nthreads > MAX_THREADS {
            core::warn(&format!(
                "progress_threads {nthreads} out of range 1..={MAX_THREADS}"
            ));
            return Err(Error::INVAL);
        }
        let cprov = CString::new(prov.clone().unwrap_or_default()).map_err(|_| Error::INVAL)?;
        let cdom = CString::new(param("FI_XPU_OFI_DOMAIN").unwrap_or_default())
            .map_err(|_| Error::INVAL)?;
        // FI_FENCE sits below the others but FI_ATOMIC: a transport never
        // loses one of them to it (the subsets keep the higher bits longest).
        let optional = FI_ATOMIC | ffi::FI_FENCE | FI_HMEM | ffi::FI_RMA_EVENT | ffi::FI_SOURCE;
        let (mut info, mut fabric, mut domain) = (
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
        let mut caps = 0u64;
        // SAFETY: valid strings and out-pointers.
        let r = unsafe {
            ffi::xo_open(
                cprov.as_ptr(),
                cdom.as_ptr(),
                BASE_CAPS,
                optional,
                &mut info,
                &mut fabric,
                &mut domain,
                &mut caps,
            )
        };
        if r != 0 {
            core::warn(&format!(
                "no libfabric provider{} offers RDM endpoints with MSG, TAGGED and RMA: {}",
                prov.as_deref().map_or_else(
                    || format!(" of the default list ({DEFAULT_FABRICS})"),
                    |p| format!(" named '{p}'")
                ),
                ffi::strerror(r)
            ));
            return Err(if r == -FI_ENODATA {
                Error::NODEV
            } else {
                Error::from_code(r)
            });
        }
        let info = Info(info);
        // SAFETY: info is live for these reads.
        let (name, dname, mr_mode, max_msg) = unsafe {
            (
                cstr_or_empty(ffi::xo_info_prov_name(info.0)),
                cstr_or_empty(ffi::xo_info_domain_name(info.0)),
                ffi::xo_info_mr_mode(info.0),
                ffi::xo_info_max_msg_size(info.0).min(MAX_LEN),
            )
        };
        if name.contains(RXD) && caps & FI_ATOMIC != 0 {
            // Its fetching atomics crash inside libfabric 1.17: atomics
            // become error completions instead.
            core::warn(&format!(
                "libfabric provider {name}: atomics disabled (its fetching atomics crash in libfabric)"
            ));
            caps &= !FI_ATOMIC;
        }
        let ordered_inject = if param("FI_XPU_OFI_ORDERED_SIGNAL").as_deref() == Some("0") {
            0
        } else {
            // SAFETY: info is live.
            unsafe { ffi::xo_info_ordered_inject(info.0) as u64 }
        };
        core::info(&format!(
            "transport: libfabric provider {name} ({dname}), {}; {nthreads} progress thread(s){}{}; \
             signals follow their data {}{}",
            match &prov {
                Some(p) => format!("named '{p}'"),
                None => format!("the first of {DEFAULT_FABRICS} that works"),
            },
            if caps & FI_ATOMIC != 0 {
                ""
            } else {
                ", no atomics"
            },
            if caps & ffi::FI_RMA_EVENT != 0 {
                ""
            } else {
                ", no remote counters"
            },
            if caps & ffi::FI_FENCE != 0 {
                "fenced (FI_FENCE)"
            } else {
                "once the data is delivered"
            },
            if ordered_inject > 0 {
                format!(
                    ", or at once behind injected data of up to {ordered_inject} bytes (ordered writes)"
                )
            } else {
                String::new()
            },
        ));
        let tuning = Tuning::from_params(param);
        let mut workers = Vec::new();
        for _ in 0..nthreads {
            match Worker::new(fabric, tuning) {
                Ok(w) => workers.push(Arc::new(w)),
                Err(e) => {
                    // SAFETY: the objects were just opened and are unused.
                    unsafe {
                        ffi::xo_close(domain);
                        ffi::xo_close(fabric);
                    }
                    return Err(e);
                }
            }
        }
        // SAFETY: info is live.
        let auto_progress = unsafe { ffi::xo_info_auto_progress(info.0) } != 0;
        let dc_atomic_as_fetch = name == "shm";
        let inner = Arc::new(DomInner {
            domain: Fid(domain),
            _fabric: Fid(fabric),
            info,
            prov: name,
            caps,
            max_msg,
            auto_progress,
            offset_keys: mr_mode & (ffi::FI_MR_VIRT_ADDR | ffi::FI_MR_PROV_KEY) == 0,
            dc_atomic_as_fetch,
            fence: caps & ffi::FI_FENCE != 0,
            ordered_inject,
            mrs: MrTable::default(),
            next_key: AtomicU64::new(1 << 32),
        });
        let all = Arc::new(Workers {
            list: workers.clone(),
            next: AtomicUsize::new(0),
        });
        let mut threads = Vec::new();
        for (i, w) in workers.into_iter().enumerate() {
            let t = std::thread::Builder::new()
                .name(thread_name(i))
                .spawn(move || proxy::run(w))
                .map_err(|_| Error::NOMEM);
            match t {
                Ok(t) => threads.push(t),
                Err(e) => {
                    let d = Domain {
                        inner,
                        workers: all,
                        threads,
                    };
                    drop(d);
                    return Err(e);
                }
            }
        }
        Ok(Domain {
            inner,
            workers: all,
            threads,
        })
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        for w in &self.workers.list {
            w.stop();
        }
        for (i, t) in self.threads.drain(..).enumerate() {
            let w = &self.workers.list[i];
            let mut watch = Watch::new();
            // A thread stuck inside libfabric is left behind (the handle
            // dropped, detaching it): it keeps what it references, the
            // libfabric domain included, until the process exits.
            loop {
                if t.is_finished() {
                    let _ = t.join();
                    break;
                }
                if w.give_up(&mut watch, &thread_name(i)) {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}

pub fn thread_name(i: usize) -> String {
    format!("fi_xpu-ofi-{i}")
}
