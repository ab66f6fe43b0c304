//! Per-peer fences of one endpoint (`fi_xpu_fence`): a transmit operation
//! taken after a fence waits only until the operations taken before that
//! fence to its own peer completed; operations to other peers go ahead.
//!
//! The bookkeeping exists only while a fence is in force: at a fence, the
//! operations in flight are listed per peer; from then on every operation
//! that starts or ends is noted, and a held operation counts as in flight
//! (so that one behind a later fence waits for it too, and quiet waits for
//! it). A fence is retired once nothing taken before it is in flight any
//! more; with the last one retired the lists are dropped, and the fast path
//! pays one branch per operation.
use crate::inflight::AddrHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

type PeerMap<V> = HashMap<u64, V, BuildHasherDefault<AddrHasher>>;

pub struct PeerFences<T> {
    /// Ring positions of the fences in force, oldest first.
    fences: VecDeque<u64>,
    /// Ring positions of the transmit operations in flight, per peer (one
    /// element per operation), while a fence is in force.
    flight: PeerMap<Vec<u64>>,
    /// Operations held back, per peer, in ring order.
    held: PeerMap<VecDeque<(u64, T)>>,
}

impl<T> Default for PeerFences<T> {
    fn default() -> Self {
        PeerFences {
            fences: VecDeque::new(),
            flight: PeerMap::default(),
            held: PeerMap::default(),
        }
    }
}

impl<T> PeerFences<T> {
    /// Whether a fence is in force.
    pub fn active(&self) -> bool {
        !self.fences.is_empty()
    }

    /// A fence at ring position `pos`; `live` lists (peer, position) of
    /// every transmit operation in flight now (read only when no fence is
    /// in force yet: afterwards the lists are kept up to date).
    pub fn fence(&mut self, pos: u64, live: impl IntoIterator<Item = (u64, u64)>) {
        if self.fences.is_empty() {
            self.flight.clear();
            for (peer, p) in live {
                self.flight.entry(peer).or_default().push(p);
            }
        }
        self.fences.push_back(pos);
    }

    /// A transmit operation at `pos` to `peer` is in flight.
    pub fn sent(&mut self, peer: u64, pos: u64) {
        if self.active() {
            self.flight.entry(peer).or_default().push(pos);
        }
    }

    /// One transmit operation at `pos` to `peer` ended.
    pub fn done(&mut self, peer: u64, pos: u64) {
        if !self.active() {
            return;
        }
        if let Some(v) = self.flight.get_mut(&peer) {
            if let Some(i) = v.iter().position(|&p| p == pos) {
                v.swap_remove(i);
            }
            if v.is_empty() {
                self.flight.remove(&peer);
            }
        }
    }

    /// The newest fence before ring position `pos`.
    fn fence_before(&self, pos: u64) -> Option<u64> {
        self.fences.iter().rev().copied().find(|&f| f < pos)
    }

    /// Whether an operation to `peer` taken before ring position `fence` is
    /// still in flight.
    fn pending_before(&self, peer: u64, fence: u64) -> bool {
        self.flight
            .get(&peer)
            .is_some_and(|v| v.iter().any(|&p| p < fence))
    }

    /// Whether the transmit operation at `pos` (the newest taken) to `peer`
    /// must wait for earlier ones.
    pub fn must_wait(&self, peer: u64, pos: u64) -> bool {
        self.fence_before(pos)
            .is_some_and(|f| self.pending_before(peer, f))
    }

    /// Holds `op`, at `pos` to `peer`, back; the caller counted it in
    /// flight (`sent`).
    pub fn hold(&mut self, peer: u64, pos: u64, op: T) {
        self.held.entry(peer).or_default().push_back((pos, op));
    }

    /// Retires the fences that nothing in flight precedes (`oldest`: the
    /// oldest ring position in flight, held operations included) and moves
    /// the held operations free to go now into `out`, in ring order per
    /// peer. They stay counted in flight.
    pub fn release(&mut self, oldest: Option<u64>, out: &mut Vec<T>) {
        if !self.active() {
            return;
        }
        while self
            .fences
            .front()
            .is_some_and(|&f| oldest.is_none_or(|o| o > f))
        {
            self.fences.pop_front();
        }
        if !self.held.is_empty() {
            let mut emptied = Vec::new();
            for (&peer, q) in self.held.iter_mut() {
                while let Some(&(pos, _)) = q.front() {
                    let f = self.fences.iter().rev().copied().find(|&f| f < pos);
                    let waits = f.is_some_and(|f| {
                        self.flight
                            .get(&peer)
                            .is_some_and(|v| v.iter().any(|&p| p < f))
                    });
                    if waits {
                        break;
                    }
                    if let Some((_, op)) = q.pop_front() {
                        out.push(op);
                    }
                }
                if q.is_empty() {
                    emptied.push(peer);
                }
            }
            for p in emptied {
                self.held.remove(&p);
            }
        }
        if self.fences.is_empty() {
            self.flight.clear();
        }
    }

    /// Takes every held operation (the endpoint closes).
    pub fn drain(&mut self) -> Vec<T> {
        let mut held: Vec<(u64, T)> = self.held.drain().flat_map(|(_, q)| q).collect();
        held.sort_by_key(|&(pos, _)| pos);
        self.fences.clear();
        self.flight.clear();
        held.into_iter().map(|(_, op)| op).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the proxy does with one endpoint: in-flight positions (global)
    /// beside the per-peer fences.
    #[derive(Default)]
    struct Ep {
        f: PeerFences<u64>,
        inflight: Vec<(u64, u64)>,
    }

    impl Ep {
        fn take(&mut self, peer: u64, pos: u64) -> bool {
            self.inflight.push((peer, pos));
            self.f.sent(peer, pos);
            let wait = self.f.must_wait(peer, pos);
            if wait {
                self.f.hold(peer, pos, pos);
            }
            !wait
        }
        fn fence(&mut self, pos: u64) {
            let live = self.inflight.clone();
            self.f.fence(pos, live);
        }
        fn done(&mut self, peer: u64, pos: u64) -> Vec<u64> {
            let i = self
                .inflight
                .iter()
                .position(|&e| e == (peer, pos))
                .unwrap();
            self.inflight.remove(i);
            self.f.done(peer, pos);
            let mut out = Vec::new();
            let oldest = self.inflight.iter().map(|&(_, p)| p).min();
            self.f.release(oldest, &mut out);
            out
        }
    }

    #[test]
    fn other_peers_go_ahead_of_a_fenced_one() {
        let mut ep = Ep::default();
        assert!(ep.take(1, 0));
        ep.fence(1);
        assert!(
            !ep.take(1, 2),
            "peer 1's later write waits for its earlier one"
        );
        assert!(ep.take(2, 3), "peer 2 had nothing before the fence");
        assert!(!ep.take(1, 4), "behind the held one of its peer");
        assert_eq!(ep.done(2, 3), Vec::<u64>::new());
        assert_eq!(ep.done(1, 0), vec![2, 4], "peer 1's, in ring order");
        assert!(!ep.f.active(), "nothing before the fence is in flight");
    }

    #[test]
    fn a_second_fence_orders_released_operations_too() {
        let mut ep = Ep::default();
        assert!(ep.take(1, 0));
        ep.fence(1);
        assert!(!ep.take(1, 2));
        ep.fence(3);
        assert!(!ep.take(1, 4));
        assert!(ep.take(2, 5));
        assert_eq!(ep.done(1, 0), vec![2], "4 waits for 2 to complete");
        assert_eq!(ep.done(2, 5), Vec::<u64>::new());
        assert_eq!(ep.done(1, 2), vec![4]);
        assert_eq!(ep.done(1, 4), Vec::<u64>::new());
        assert!(!ep.f.active());
    }

    #[test]
    fn a_fence_with_nothing_in_flight_costs_nothing_later() {
        let mut ep = Ep::default();
        ep.fence(0);
        let mut out = Vec::new();
        ep.f.release(None, &mut out);
        assert!(!ep.f.active() && out.is_empty());
        assert!(ep.take(1, 1));
        assert!(ep.f.flight.is_empty(), "no lists kept without a fence");
    }

    #[test]
    fn two_operations_at_one_position() {
        // A put-with-signal: data and signal at one ring position.
        let mut ep = Ep::default();
        assert!(ep.take(1, 0));
        assert!(ep.take(1, 0));
        ep.fence(1);
        assert!(!ep.take(1, 2));
        assert_eq!(ep.done(1, 0), Vec::<u64>::new());
        assert_eq!(ep.done(1, 0), vec![2]);
    }

    #[test]
    fn drain_gives_back_every_held_operation() {
        let mut ep = Ep::default();
        assert!(ep.take(1, 0));
        assert!(ep.take(2, 1));
        ep.fence(2);
        assert!(!ep.take(2, 3));
        assert!(!ep.take(1, 4));
        assert_eq!(ep.f.drain(), vec![3, 4]);
        assert!(!ep.f.active());
    }
}
