//! The proxy's bookkeeping of the operations libfabric holds, kept free of
//! allocations once warm: the request records are reused, in-flight ring
//! positions are a queue in issue order, and the keys the host chose
//! (AV addresses, peers) are hashed cheaply. Live requests are found in
//! `addr_set`.
use std::collections::{HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Records a `Pool::default()` keeps at most.
const KEEP: usize = 1024;

/// Records kept for reuse, at most `cap` of them.
pub struct Pool<T> {
    free: Vec<Box<T>>,
    cap: usize,
}

impl<T> Default for Pool<T> {
    fn default() -> Pool<T> {
        Pool::new(KEEP)
    }
}

impl<T> Pool<T> {
    pub const fn new(cap: usize) -> Pool<T> {
        Pool {
            free: Vec::new(),
            cap,
        }
    }

    /// A kept record as it was given back, else a new one from `new`: for
    /// a caller that sets every field it relies on (and may leave large
    /// ones it overwrites before reading).
    pub fn reuse(&mut self, new: impl FnOnce() -> T) -> Box<T> {
        self.free.pop().unwrap_or_else(|| Box::new(new()))
    }

    /// Keeps `b` for a later `reuse`, or frees it when enough are kept.
    pub fn give(&mut self, b: Box<T>) {
        if self.free.len() < self.cap {
            if self.free.capacity() == 0 {
                self.free.reserve_exact(self.cap);
            }
            self.free.push(b);
        }
    }
}

/// Transmit ring positions still in flight, with how many operations each
/// has there (a put-with-signal has two). Positions are mostly added in
/// increasing order (at the back); the queue stays sorted, the oldest in
/// front.
#[derive(Default)]
pub struct InFlight {
    q: VecDeque<(u64, u32)>,
    live: usize,
}

impl InFlight {
    /// One more operation of position `pos`.
    pub fn add(&mut self, pos: u64) {
        self.live += 1;
        match self.q.back_mut() {
            Some((p, n)) if *p == pos => *n += 1,
            Some((p, _)) if *p > pos => match self.q.binary_search_by_key(&pos, |&(p, _)| p) {
                Ok(i) => self.q[i].1 += 1,
                Err(i) => self.q.insert(i, (pos, 1)),
            },
            _ => self.q.push_back((pos, 1)),
        }
    }

    /// One operation of position `pos` is done; false if none was there.
    pub fn done(&mut self, pos: u64) -> bool {
        // Mostly the oldest: completions come about in issue order.
        if let Some((p, n)) = self.q.front_mut() {
            if *p == pos && *n > 0 {
                *n -= 1;
                self.live -= 1;
                if *n == 0 {
                    self.q.pop_front();
                    self.drop_finished();
                }
                return true;
            }
        }
        let i = match self.q.front() {
            Some(&(p, _)) if p == pos => 0,
            _ => match self.q.binary_search_by_key(&pos, |&(p, _)| p) {
                Ok(i) => i,
                Err(_) => return false,
            },
        };
        if self.q[i].1 == 0 {
            return false;
        }
        self.q[i].1 -= 1;
        self.live -= 1;
        self.drop_finished();
        true
    }

    /// Drops the finished positions in front, and those behind a
    /// long-running one once they outnumber the live ones, so that the
    /// queue stays bounded.
    fn drop_finished(&mut self) {
        while self.q.front().is_some_and(|&(_, n)| n == 0) {
            self.q.pop_front();
        }
        if self.q.len() > 64 && self.q.len() > 4 * self.live {
            self.q.retain(|&(_, n)| n > 0);
        }
    }

    /// The oldest position in flight.
    pub fn first(&self) -> Option<u64> {
        self.q.front().map(|&(p, _)| p)
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn clear(&mut self) {
        self.q.clear();
        self.live = 0;
    }
}

/// Hash of a libfabric address: a multiply, enough for keys the host
/// chose (AV indices); SipHash cost more than the rest of a lookup.
#[derive(Default)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

/// libfabric addresses of an AV (host-chosen, looked up for every entry).
pub type FiAddrSet = HashSet<u64, BuildHasherDefault<AddrHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_position_in_flight() {
        let mut f = InFlight::default();
        assert_eq!(f.first(), None);
        f.add(3);
        f.add(3);
        f.add(5);
        f.add(9);
        assert_eq!(f.first(), Some(3));
        assert!(f.done(5));
        assert!(!f.done(5), "position 5 had one operation");
        assert!(!f.done(4), "position 4 was never added");
        assert_eq!(f.first(), Some(3));
        assert!(f.done(3));
        assert_eq!(f.first(), Some(3), "position 3 had two operations");
        assert!(f.done(3));
        assert_eq!(f.first(), Some(9));
        assert!(f.done(9));
        assert!(f.is_empty());
        assert_eq!(f.first(), None);
    }

    #[test]
    fn a_position_added_late_is_the_oldest() {
        let mut f = InFlight::default();
        f.add(7);
        f.add(8);
        assert!(f.done(7));
        // A put's signal, posted after its data completed.
        f.add(7);
        f.add(5);
        assert_eq!(f.first(), Some(5));
        assert!(f.done(5));
        assert_eq!(f.first(), Some(7));
        assert!(f.done(7));
        assert!(f.done(8));
        assert!(f.is_empty());
    }

    #[test]
    fn finished_positions_behind_a_stuck_one_are_dropped() {
        let mut f = InFlight::default();
        f.add(0);
        for p in 1..10_000 {
            f.add(p);
            assert!(f.done(p));
        }
        assert_eq!(f.first(), Some(0));
        assert!(f.q.len() <= 65, "{} positions kept", f.q.len());
        assert!(f.done(0));
        assert!(f.is_empty());
    }

    #[test]
    fn pool_reuses_records() {
        let mut p = Pool::new(2);
        let a = p.reuse(|| 1u64);
        let at = &*a as *const u64;
        p.give(a);
        let b = p.reuse(|| 2);
        assert_eq!(
            (&*b as *const u64, *b),
            (at, 1),
            "the kept record, as given back"
        );
        p.give(b);
        p.give(Box::new(3));
        p.give(Box::new(4));
        assert_eq!(p.free.len(), 2, "at most cap kept");
    }
}
