//! Words shared with device code, and the allocators of heap offsets
//! and table slots.
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes a u64 that device code (ours or a peer's) reads concurrently.
///
/// # Safety
/// `addr` is 8-byte aligned and lies inside memory this domain allocated or
/// mapped (a context's device blocks, peer maps, heap or table), live for
/// the call; every other access to that word is atomic.
pub unsafe fn store(addr: usize, v: u64) {
    // SAFETY: the caller's promise.
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }.store(v, Ordering::Release);
}

/// Reads a u64 that device code writes concurrently.
///
/// # Safety
/// As for `store`.
pub unsafe fn load(addr: usize) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { AtomicU64::from_ptr(addr as *mut u64) }.load(Ordering::Acquire)
}

/// First-fit allocator over a context heap.
#[derive(Debug)]
pub struct FreeList {
    free: Vec<(u64, u64)>,
}

impl FreeList {
    pub fn new(start: u64, end: u64) -> FreeList {
        FreeList {
            free: vec![(start, end - start)],
        }
    }

    pub fn alloc(&mut self, size: u64) -> Option<u64> {
        let size = size.div_ceil(64) * 64;
        let i = self.free.iter().position(|&(_, l)| l >= size)?;
        let (off, len) = self.free[i];
        if len == size {
            self.free.remove(i);
        } else {
            self.free[i] = (off + size, len - size);
        }
        Some(off)
    }

    pub fn release(&mut self, off: u64, size: u64) {
        let size = size.div_ceil(64) * 64;
        let i = self.free.partition_point(|&(o, _)| o < off);
        self.free.insert(i, (off, size));
        // Merge neighbours so the heap does not fragment over open/close cycles.
        let mut j = 0;
        while j + 1 < self.free.len() {
            if self.free[j].0 + self.free[j].1 == self.free[j + 1].0 {
                self.free[j].1 += self.free[j + 1].1;
                self.free.remove(j + 1);
            } else {
                j += 1;
            }
        }
    }
}

/// The slot numbers of a fixed-size table (registrations, raw peer
/// addresses), taken and given back in constant time whatever the number
/// in use: the lowest free slot first while none was given back.
#[derive(Debug)]
pub struct Slots {
    free: Vec<usize>,
    used: Vec<bool>,
}

impl Slots {
    pub fn new(n: usize) -> Slots {
        Slots {
            free: (0..n).rev().collect(),
            used: vec![false; n],
        }
    }

    pub fn take(&mut self) -> Option<usize> {
        let s = self.free.pop()?;
        self.used[s] = true;
        Some(s)
    }

    /// Gives `s` back; a slot not in use is left alone.
    pub fn give(&mut self, s: usize) {
        if self.used.get(s) == Some(&true) {
            self.used[s] = false;
            self.free.push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_and_given_back() {
        let mut s = Slots::new(3);
        assert_eq!((s.take(), s.take()), (Some(0), Some(1)));
        s.give(0);
        s.give(0); // twice: still one free slot 0
        s.give(7); // out of range: ignored
        assert_eq!((s.take(), s.take(), s.take()), (Some(0), Some(2), None));
        s.give(1);
        assert_eq!((s.take(), s.take()), (Some(1), None));
    }

    #[test]
    fn free_list_merges() {
        let mut f = FreeList::new(0, 1024);
        let a = f.alloc(100).unwrap();
        let b = f.alloc(100).unwrap();
        assert_eq!((a, b), (0, 128));
        assert_eq!(f.alloc(2000), None);
        f.release(a, 100);
        f.release(b, 100);
        assert_eq!(f.alloc(1024), Some(0));
    }
}
