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
use super::av::AvInner;
use super::dom::DomInner;
use crate::inflight::FiAddrSet;
use crate::mr_table::{self, MrRec};
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
    /// Brings the copies up to date with `dom` and `av`: two loads and
    /// compares when nothing moved, which is every entry but a few.
    #[inline]
    pub fn refresh(&mut self, dom: &DomInner, av: Option<&AvInner>) {
        let mr_gen = dom.mrs.generation();
        let (addr, av_gen) = av.map_or((0, 0), |a| {
            (a as *const AvInner as usize, a.gen.load(Ordering::Acquire))
        });
        if mr_gen != self.mr_gen || addr != self.av || av_gen != self.av_gen {
            self.copy(dom, av, mr_gen, (addr, av_gen));
        }
    }

    /// The copying of `refresh`, of the tables whose generation moved
    /// (`mr_gen`, and the AV's address and generation: as `refresh` read
    /// them).
    #[cold]
    fn copy(
        &mut self,
        dom: &DomInner,
        av: Option<&AvInner>,
        mr_gen: u64,
        (addr, av_gen): (usize, u64),
    ) {
        if mr_gen != self.mr_gen {
            self.mrs.clone_from(&dom.mrs.lock());
            self.mr_gen = mr_gen;
        }
        if addr != self.av || av_gen != self.av_gen {
            match av {
                Some(a) => self.live.clone_from(&a.live.lock().unwrap()),
                None => self.live.clear(),
            }
            self.av = addr;
            self.av_gen = av_gen;
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
