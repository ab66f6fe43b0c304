//! The domain as its objects and the progress threads see it: the
//! libfabric fabric, domain and info, what the libfabric provider offers,
//! and the table of registrations. The domain object (`objects::domain`)
//! opens it and owns the progress threads beside it.
use crate::fabric::{Fid, Info};
pub use crate::mr_table::{MrRec, MrTable};
use std::sync::atomic::AtomicU64;

/// Keys of providers that address by offset: the registration's base
/// address in the low bits, a generation above them.
pub const KEY_GENERATION_SHIFT: u32 = 56;
pub const KEY_BASE_MASK: u64 = (1 << KEY_GENERATION_SHIFT) - 1;

pub struct DomInner {
    // Field order is drop order: the domain closes before its fabric, and
    // the info is freed last.
    pub domain: Fid,
    pub _fabric: Fid,
    pub info: Info,
    pub prov: String,
    pub caps: u64,
    pub max_msg: u64,
    /// libfabric places incoming data on its own; otherwise only the
    /// progress threads' calls do, so they cannot sleep without a limit.
    pub auto_progress: bool,
    /// The provider addresses registrations by offset and takes our keys:
    /// keys are base addresses and remote addresses are sent as offsets.
    pub offset_keys: bool,
    /// Post a non-fetching atomic that asks for `FI_DELIVERY_COMPLETE` as
    /// a fetching one instead (the fetched values discarded): libfabric's
    /// `shm` provider (1.17 and later 1.x) returns the inject buffer of such
    /// an atomic to its pool twice, once at the target and once at the
    /// initiator, so that later atomics share buffers and apply or fetch
    /// each other's values. A fetching atomic completes only after the
    /// target applied it, which is what delivery completion promises.
    pub dc_atomic_as_fetch: bool,
    /// The transport takes `FI_FENCE`: a put with signal posts its signal
    /// right behind the data, fenced, instead of after the data's
    /// delivery completion.
    pub fence: bool,
    /// The largest put-with-signal data posted with `FI_INJECT` and its
    /// signal right behind it, unfenced: the transport places a write's
    /// data before a later write's or atomic's up to this size, and
    /// takes it injected (0: never).
    pub ordered_inject: u64,
    pub mrs: MrTable,
    /// The next key handed out to a registration that asks for none.
    pub next_key: AtomicU64,
}

impl DomInner {
    pub fn has(&self, cap: u64) -> bool {
        self.caps & cap == cap
    }

    /// The registration a raw descriptor id names.
    pub fn mr(&self, id: u64) -> Option<MrRec> {
        self.mrs.get(id)
    }
}
