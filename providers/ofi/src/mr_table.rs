//! A domain's registrations as the proxy checks ring entries against them:
//! an entry names a registration by the id word of its raw descriptor
//! (`MR_MAGIC << 32 | index`).
use crate::layout::MR_MAGIC;
use std::sync::{Mutex, MutexGuard};

/// One registration, as the proxy checks buffers against it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrRec {
    pub base: u64,
    pub len: u64,
    pub desc: usize,
}

#[derive(Default)]
pub struct MrTable(Mutex<Vec<Option<MrRec>>>);

impl MrTable {
    /// The registration a raw descriptor id names.
    pub fn get(&self, id: u64) -> Option<MrRec> {
        if id >> 32 != MR_MAGIC {
            return None;
        }
        let idx = (id & 0xffff_ffff) as usize;
        self.lock().get(idx).copied().flatten()
    }

    /// Records `rec` in the first free slot; returns its index.
    pub fn insert(&self, rec: MrRec) -> usize {
        let mut mrs = self.lock();
        match mrs.iter().position(Option::is_none) {
            Some(i) => {
                mrs[i] = Some(rec);
                i
            }
            None => {
                mrs.push(Some(rec));
                mrs.len() - 1
            }
        }
    }

    pub fn remove(&self, index: usize) {
        self.lock()[index] = None;
    }

    pub fn lock(&self) -> MutexGuard<'_, Vec<Option<MrRec>>> {
        self.0.lock().unwrap()
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
        t.remove(0);
        assert_eq!(t.get(MR_MAGIC << 32), None);
        assert_eq!(t.insert(r), 0);
    }
}
