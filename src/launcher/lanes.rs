//! The lanes of one subgroup in the GPU-like mode: they take turns.
//!
//! A GPU runs a subgroup's lanes together only where the code makes them
//! meet (a subgroup barrier, broadcast, shuffle or ballot); between those
//! points lanes that diverge, or that the hardware schedules independently
//! (NVIDIA since Volta), run in any order. CPU threads started together
//! usually run in launch order instead, which hides code that lets lane 0
//! write and the others read with no subgroup sync between.
//!
//! Here exactly one lane of the subgroup runs at a time: it holds the turn
//! until it reaches a subgroup barrier or broadcast, returns, blocks in a
//! work-group or device barrier, or pauses in a spin loop; then the next
//! lane of the current order runs. When every lane that has not returned
//! reached the subgroup barrier, the barrier completes and the lanes run on
//! in a fresh order, drawn from the seed, the subgroup and the barrier's
//! number, so a run repeats exactly. Between two subgroup syncs each lane
//! therefore sees either all or none of another lane's writes, in an order
//! that changes from one stretch to the next and puts lane 0 anywhere.
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

pub(super) struct Lanes {
    seed: u64,
    st: Mutex<State>,
    /// One per lane, so that a turn wakes only the lane that takes it.
    cvs: Vec<Condvar>,
}

struct State {
    /// The lane that may run.
    turn: Option<u32>,
    /// Lanes waiting for a turn, in the order they get it.
    queue: VecDeque<u32>,
    /// Lanes of the subgroup.
    members: u32,
    /// Lanes at the current subgroup barrier.
    arrived: u32,
    /// Subgroup barriers completed.
    epoch: u64,
    /// The broadcast's value.
    slot: u64,
    /// Given up (`abandon`): a lane that can never arrive is missing.
    broken: bool,
}

/// splitmix64: a well-mixed 64-bit value from any input.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fisher-Yates with a generator seeded by `seed`; element by element, so
/// that no library routine copies the lanes' shared state with memcpy
/// (ThreadSanitizer sees those, but not the lock that orders them; a debug
/// build's `swap` is one).
#[allow(clippy::manual_swap)]
fn shuffle(v: &mut VecDeque<u32>, seed: u64) {
    let mut s = seed;
    for i in (1..v.len()).rev() {
        s = mix(s);
        let j = (s % (i as u64 + 1)) as usize;
        let t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

/// Lanes `0..n` in the order drawn from `seed`, into the empty `q`.
fn order(q: &mut VecDeque<u32>, n: u32, seed: u64) {
    for lane in 0..n {
        q.push_back(lane);
    }
    shuffle(q, seed);
}

impl Lanes {
    /// `n` lanes; `seed` already tells this subgroup from the others.
    pub(super) fn new(n: u32, seed: u64) -> Lanes {
        // Sized once: no allocation once lanes run.
        let mut queue = VecDeque::with_capacity(n as usize);
        order(&mut queue, n, mix(seed));
        Lanes {
            seed,
            st: Mutex::new(State {
                turn: queue.pop_front(),
                queue,
                members: n,
                arrived: 0,
                epoch: 0,
                slot: 0,
                broken: false,
            }),
            cvs: (0..n).map(|_| Condvar::new()).collect(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives the turn to the next waiting lane (or to nobody).
    fn pass(&self, st: &mut State) {
        st.turn = st.queue.pop_front();
        if let Some(l) = st.turn {
            self.cvs[l as usize].notify_one();
        }
    }

    /// Queues `lane` for a turn (it takes the turn at once if nobody holds
    /// it).
    fn request(&self, st: &mut State, lane: u32) {
        if st.turn.is_none() {
            st.turn = Some(lane);
        } else {
            st.queue.push_back(lane);
        }
    }

    fn wait_turn<'a>(&'a self, mut st: MutexGuard<'a, State>, lane: u32) -> MutexGuard<'a, State> {
        while st.turn != Some(lane) {
            st = self.cvs[lane as usize]
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        st
    }

    /// Every lane arrived: the barrier completes and the lanes run on in a
    /// new order.
    fn complete_if_all_there(&self, st: &mut State) {
        if st.arrived != st.members {
            return;
        }
        // Nobody else can be queued: every lane is here.
        st.epoch += 1;
        st.arrived = 0;
        let (n, seed) = (st.members, mix(self.seed ^ mix(st.epoch)));
        order(&mut st.queue, n, seed);
        if st.turn.is_none() {
            self.pass(st);
        }
    }

    /// Waits for the first turn of `lane`.
    pub(super) fn start(&self, lane: u32) {
        drop(self.wait_turn(self.lock(), lane));
    }

    /// `lane` returned from the kernel. It remains a member, as with the
    /// plain launcher and as `fi_xpu_arch_scope_size` counts it: a
    /// subgroup call after it returned waits for it.
    pub(super) fn exit(&self, lane: u32) {
        let mut st = self.lock();
        if st.turn == Some(lane) {
            self.pass(&mut st);
        }
    }

    /// `lane` is about to block outside the subgroup (a work-group or
    /// device barrier): the others run meanwhile.
    pub(super) fn park(&self, lane: u32) {
        let mut st = self.lock();
        if st.turn == Some(lane) {
            self.pass(&mut st);
        }
    }

    /// After `park`: waits for the turn again.
    pub(super) fn resume(&self, lane: u32) {
        let mut st = self.lock();
        self.request(&mut st, lane);
        drop(self.wait_turn(st, lane));
    }

    /// A spin loop's pause: the lane goes to the back of the line. Whether
    /// it got the turn straight back (no other lane could run).
    pub(super) fn pause(&self, lane: u32) -> bool {
        let mut st = self.lock();
        if st.queue.is_empty() {
            return true;
        }
        st.queue.push_back(lane);
        if st.turn == Some(lane) {
            self.pass(&mut st);
        }
        drop(self.wait_turn(st, lane));
        false
    }

    /// The subgroup barrier: `Err(arrived)` when `deadline` passed first
    /// (how many lanes, the caller included, were there; the caller's
    /// arrival is taken back).
    pub(super) fn barrier(&self, lane: u32, deadline: Option<Instant>) -> Result<(), u32> {
        let mut st = self.lock();
        if st.broken {
            // The caller holds its turn and keeps it.
            return Err(st.arrived + 1);
        }
        let epoch = st.epoch;
        st.arrived += 1;
        if st.turn == Some(lane) {
            self.pass(&mut st);
        }
        self.complete_if_all_there(&mut st);
        let cv = &self.cvs[lane as usize];
        loop {
            if st.epoch != epoch && st.turn == Some(lane) {
                return Ok(());
            }
            if st.broken && st.epoch == epoch {
                let arrived = st.arrived;
                st.arrived -= 1;
                self.request(&mut st, lane);
                drop(self.wait_turn(st, lane));
                return Err(arrived);
            }
            match deadline {
                None => st = cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    let now = Instant::now();
                    if st.epoch == epoch && now >= t {
                        let arrived = st.arrived;
                        st.arrived -= 1;
                        self.request(&mut st, lane);
                        drop(self.wait_turn(st, lane));
                        return Err(arrived);
                    }
                    let left = t
                        .saturating_duration_since(now)
                        .max(std::time::Duration::from_millis(1));
                    st = cv
                        .wait_timeout(st, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
    }

    /// The subgroup broadcast from lane 0; two barriers as in the plain
    /// launcher's, so lane 0 cannot overwrite the value before every lane
    /// read it.
    pub(super) fn broadcast(&self, lane: u32, v: u64) -> Result<u64, u32> {
        if lane == 0 {
            self.lock().slot = v;
        }
        self.barrier(lane, None)?;
        let out = self.lock().slot;
        self.barrier(lane, None)?;
        Ok(out)
    }

    /// Gives up on the missing lanes: every lane waiting at the barrier
    /// returns `Err(arrived)` (in turn), and so does every later barrier.
    pub(super) fn abandon(&self) {
        self.lock().broken = true;
        for cv in &self.cvs {
            cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn orders_differ_and_repeat() {
        let (mut a, mut b, mut c) = (VecDeque::new(), VecDeque::new(), VecDeque::new());
        order(&mut a, 32, mix(1));
        order(&mut b, 32, mix(1));
        order(&mut c, 32, mix(2));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mut s: Vec<u32> = a.into_iter().collect();
        s.sort_unstable();
        assert_eq!(s, (0..32).collect::<Vec<_>>());
    }

    /// One lane at a time; all lanes meet at the barrier; the log of who
    /// ran shows each stretch complete before the next.
    #[test]
    fn one_lane_at_a_time_between_barriers() {
        let n = 8;
        let lanes = Arc::new(Lanes::new(n, 7));
        let log = Arc::new(Mutex::new(Vec::new()));
        let running = Arc::new(std::sync::atomic::AtomicU32::new(0));
        std::thread::scope(|s| {
            for lane in 0..n {
                let (lanes, log, running) = (lanes.clone(), log.clone(), running.clone());
                s.spawn(move || {
                    lanes.start(lane);
                    for step in 0..3u32 {
                        let was = running.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        assert_eq!(was, 0, "two lanes ran at once");
                        std::thread::yield_now();
                        log.lock().unwrap().push((step, lane));
                        running.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                        lanes.barrier(lane, None).unwrap();
                    }
                    assert_eq!(lanes.broadcast(lane, u64::from(lane) + 100), Ok(100));
                    lanes.exit(lane);
                });
            }
        });
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 24);
        for (i, (step, _)) in log.iter().enumerate() {
            assert_eq!(*step as usize, i / 8);
        }
        let firsts: Vec<u32> = (0..3).map(|s| log[s * 8].1).collect();
        let orders: Vec<Vec<u32>> = (0..3)
            .map(|s| log[s * 8..s * 8 + 8].iter().map(|x| x.1).collect())
            .collect();
        assert!(
            orders[0] != orders[1] || orders[1] != orders[2],
            "{firsts:?}"
        );
    }

    #[test]
    fn a_lane_that_never_comes_times_the_barrier_out() {
        let lanes = Arc::new(Lanes::new(2, 3));
        std::thread::scope(|s| {
            let l = lanes.clone();
            s.spawn(move || {
                l.start(0);
                let t = Instant::now() + std::time::Duration::from_millis(50);
                assert_eq!(l.barrier(0, Some(t)), Err(1));
                l.exit(0);
            });
            let l = lanes.clone();
            s.spawn(move || {
                l.start(1);
                // Parked elsewhere until lane 0 gave up.
                l.park(1);
                std::thread::sleep(std::time::Duration::from_millis(200));
                l.resume(1);
                l.exit(1);
            });
        });
    }
}
