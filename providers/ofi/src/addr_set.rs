//! The addresses of the proxy's live requests: every completion libfabric
//! reports is looked up here before its context is trusted, so a lookup
//! must cost a few compares. An open-addressing table of nonzero keys
//! (linear probing, at most half full, removal by backward shift, so no
//! tombstones), hashed with a multiply: the keys are heap addresses.

/// A set of nonzero addresses.
#[derive(Default)]
pub struct AddrSet {
    /// Power-of-two many slots (or none); 0 marks a free one.
    slots: Vec<usize>,
    len: usize,
}

/// Slots of the first table.
const MIN_SLOTS: usize = 16;

impl AddrSet {
    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The slot where the probe for `a` starts.
    #[inline]
    fn home(&self, a: usize) -> usize {
        let bits = self.slots.len().trailing_zeros();
        // Fibonacci hashing: the high bits of the product mix every bit
        // of the address, alignment zeros included.
        ((a as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    /// The slot holding `a`, if any.
    #[inline]
    fn find(&self, a: usize) -> Option<usize> {
        if a == 0 || self.len == 0 {
            return None;
        }
        let mut i = self.home(a);
        loop {
            match self.slots[i] {
                0 => return None,
                k if k == a => return Some(i),
                _ => i = (i + 1) & self.mask(),
            }
        }
    }

    /// Adds `a` (nonzero); false if it was there already.
    #[inline]
    pub fn insert(&mut self, a: usize) -> bool {
        assert_ne!(a, 0, "AddrSet keys are nonzero");
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mut i = self.home(a);
        loop {
            match self.slots[i] {
                0 => break,
                k if k == a => return false,
                _ => i = (i + 1) & self.mask(),
            }
        }
        self.slots[i] = a;
        self.len += 1;
        true
    }

    /// Removes `a`; false if it was not there.
    #[inline]
    pub fn remove(&mut self, a: usize) -> bool {
        let Some(mut hole) = self.find(a) else {
            return false;
        };
        self.slots[hole] = 0;
        self.len -= 1;
        // Close the hole: a later key of the run moves into it unless its
        // probe starts after the hole (cyclically), where it still is
        // reachable.
        let mask = self.mask();
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let k = self.slots[j];
            if k == 0 {
                return true;
            }
            let home = self.home(k);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = k;
                self.slots[j] = 0;
                hole = j;
            }
        }
    }

    #[cfg(test)]
    fn contains(&self, a: usize) -> bool {
        self.find(a).is_some()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.slots.iter().copied().filter(|&a| a != 0)
    }

    /// Takes every address out, leaving the set empty.
    pub fn drain(&mut self) -> impl Iterator<Item = usize> {
        self.len = 0;
        std::mem::take(&mut self.slots)
            .into_iter()
            .filter(|&a| a != 0)
    }

    #[cold]
    fn grow(&mut self) {
        let n = (2 * self.slots.len()).max(MIN_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![0; n]);
        self.len = 0;
        for a in old.into_iter().filter(|&a| a != 0) {
            self.insert(a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn behaves_as_a_set() {
        let mut s = AddrSet::default();
        let mut model = HashSet::new();
        assert!(!s.contains(0) && !s.remove(0) && !s.remove(64));
        // A pseudo-random mix of inserts and removes of 64-byte aligned
        // addresses from a small range, so that runs collide and wrap.
        let mut x = 0x1234_5678_u64;
        for step in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = 0x7f00_0000_0000 + ((x % 512) as usize) * 64;
            if x & (1 << 40) != 0 {
                assert_eq!(s.insert(a), model.insert(a), "insert {a:#x} at {step}");
            } else {
                assert_eq!(s.remove(a), model.remove(&a), "remove {a:#x} at {step}");
            }
            assert_eq!(s.len(), model.len());
        }
        for &a in &model {
            assert!(s.contains(a));
        }
        let mut seen: Vec<usize> = s.iter().collect();
        seen.sort_unstable();
        let mut want: Vec<usize> = model.iter().copied().collect();
        want.sort_unstable();
        assert_eq!(seen, want);
        let mut drained: Vec<usize> = s.drain().collect();
        drained.sort_unstable();
        assert_eq!(drained, want);
        assert!(s.is_empty() && s.iter().next().is_none() && !s.contains(want[0]));
        assert!(s.insert(want[0]) && s.contains(want[0]));
    }

    #[test]
    fn removal_keeps_wrapped_runs_reachable() {
        let mut s = AddrSet::default();
        // Enough keys that some runs wrap past the last slot.
        let keys: Vec<usize> = (1..=8).map(|k| k * 4096).collect();
        for &k in &keys {
            assert!(s.insert(k));
        }
        for (i, &k) in keys.iter().enumerate() {
            assert!(s.remove(k));
            for &rest in &keys[i + 1..] {
                assert!(s.contains(rest), "{rest:#x} lost after removing {k:#x}");
            }
        }
        assert!(s.is_empty());
    }
}
