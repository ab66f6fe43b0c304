//! The AV as the progress threads see it: the libfabric AV and the
//! addresses inserted and not removed, which ring entries are checked
//! against.
use crate::fabric::Fid;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

pub struct AvInner {
    pub fid: Fid,
    pub live: Mutex<crate::inflight::FiAddrSet>,
    /// Moves after every change of `live`, under its lock (see
    /// `tables::Tables`).
    pub gen: AtomicU64,
}
