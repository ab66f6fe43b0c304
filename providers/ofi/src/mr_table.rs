//! A domain's registrations as the proxy checks ring entries against them:
//! an entry names a registration by the id word of its raw descriptor
//! (`MR_MAGIC << 32 | index`). A generation moves with every change, so
//! that progress threads keep copies (`state::tables::Tables`) and take no lock
//! per entry.
use crate::layout::MR_MAGIC;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One registration, as the proxy checks buffers against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrRec {
    pub base: u64,
    pub len: u64,
    pub desc: usize,
}

#[derive(Default)]
pub struct MrTable {
    recs: Mutex<Vec<Option<MrRec>>>,
    /// Moves after every change, under the lock.
    gen: AtomicU64,
}

/// The table index a raw descriptor id names, if it names one.
pub fn index_of(id: u64) -> Option<usize> {
    (id >> 32 == MR_MAGIC).then_some((id & 0xffff_ffff) as usize)
}

impl MrTable {
    /// The registration a raw descriptor id names.
    pub fn get(&self, id: u64) -> Option<MrRec> {
        self.lock().get(index_of(id)?).copied().flatten()
    }

    /// The generation: another value means the table changed since.
    pub fn generation(&self) -> u64 {
        self.gen.load(Ordering::Acquire)
    }

    /// Records `rec` in the first free slot; returns its index.
    pub fn insert(&self, rec: MrRec) -> usize {
        let mut mrs = self.lock();
        let i = match mrs.iter().position(Option::is_none) {
            Some(i) => {
                mrs[i] = Some(rec);
                i
            }
            None => {
                mrs.push(Some(rec));
                mrs.len() - 1
            }
        };
        self.gen.fetch_add(1, Ordering::Release);
        i
    }

    pub fn remove(&self, index: usize) {
        let mut mrs = self.lock();
        mrs[index] = None;
        self.gen.fetch_add(1, Ordering::Release);
    }

    pub fn lock(&self) -> MutexGuard<'_, Vec<Option<MrRec>>> {
        self.recs.lock().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_live_slots_only() {
        let t = MrTable::default();
        let r = MrRec {
            base: 0x1000,
            len: 64,
            desc: 0,
        };
        assert_eq!(t.insert(r), 0);
        assert_eq!(t.insert(r), 1);
        assert_eq!(t.get(MR_MAGIC << 32 | 1), Some(r));
        assert_eq!(t.get(1), None);
        assert_eq!(t.get(MR_MAGIC << 32 | 2), None);
        let g = t.generation();
        t.remove(0);
        assert_ne!(t.generation(), g, "a removal moves the generation");
        assert_eq!(t.get(MR_MAGIC << 32), None);
        assert_eq!(t.insert(r), 0);
    }
}
