//! The progress thread's copies of the tables validation reads for every
//! ring entry: the domain's registrations and the AV's live addresses.
//! Each owner bumps a generation after a change (under its lock); the
//! thread compares generations, one atomic load each, and copies a table
//! only when it moved, so that an entry costs no lock.
//!
//! A registration closed before a device published an entry is never
//! used for it: the close bumps the generation before it returns, and the
//! thread reads the generation after the entry (whose publication the
//! close happened before).
use crate::inflight::FiAddrSet;
use crate::mr_table::{self, MrRec};
use crate::objects::{AvInner, DomInner};
use std::sync::atomic::Ordering;

pub struct Tables {
    mr_gen: u64,
    mrs: Vec<Option<MrRec>>,
    /// The AV the copy is of (its address), and its generation.
    av: usize,
    av_gen: u64,
    live: FiAddrSet,
}

impl Default for Tables {
    fn default() -> Tables {
        Tables {
            mr_gen: u64::MAX,
            mrs: Vec::new(),
            av: 0,
            av_gen: u64::MAX,
            live: FiAddrSet::default(),
        }
    }
}

impl Tables {
    /// Brings the copies up to date with `dom` and `av`.
    pub fn refresh(&mut self, dom: &DomInner, av: Option<&AvInner>) {
        let g = dom.mrs.generation();
        if g != self.mr_gen {
            self.mrs.clone_from(&dom.mrs.lock());
            self.mr_gen = g;
        }
        let (addr, g) = av.map_or((0, 0), |a| {
            (a as *const AvInner as usize, a.gen.load(Ordering::Acquire))
        });
        if addr != self.av || g != self.av_gen {
            match av {
                Some(a) => self.live.clone_from(&a.live.lock().unwrap()),
                None => self.live.clear(),
            }
            self.av = addr;
            self.av_gen = g;
        }
    }

    /// The registration a raw descriptor id names (see `DomInner::mr`).
    pub fn mr(&self, id: u64) -> Option<MrRec> {
        self.mrs.get(mr_table::index_of(id)?).copied().flatten()
    }

    /// A registration that covers `len` bytes at `addr`.
    pub fn covering(&self, addr: u64, len: u64) -> Option<MrRec> {
        self.mrs
            .iter()
            .flatten()
            .find(|r| addr >= r.base && addr - r.base <= r.len && len <= r.len - (addr - r.base))
            .copied()
    }

    /// Whether `fi_addr` is a live address of the bound AV.
    pub fn addr_live(&self, fi_addr: u64) -> bool {
        self.av != 0 && self.live.contains(&fi_addr)
    }
}
