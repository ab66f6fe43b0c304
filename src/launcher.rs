//! Host XPU launcher: runs a kernel function as G groups of N work items on
//! CPU threads.
//!
//! Each work item is one thread. Its position (`fi_xpu_host_item`) lives in
//! a thread-local that the host branch of the device arch layer reads, and
//! the barriers and broadcasts of every scope go through `Team`s shared by
//! the threads of a launch. A thread outside any launch is a work item of its
//! own, so work-item scope device code runs from ordinary threads too.
use crate::error::{Error, Result};
use fi_xpu_abi::errno::{FI_E2BIG, FI_EAGAIN};
use fi_xpu_abi::*;
use std::cell::{Cell, RefCell};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A validated launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub num_groups: u32,
    pub group_size: u32,
    pub subgroup_size: u32,
}

impl Shape {
    /// Checks an attribute: `-FI_EINVAL` for an empty launch,
    /// `-FI_EBADFLAGS` for unknown flags, `-FI_E2BIG` for more than
    /// `FI_XPU_HOST_MAX_ITEMS` threads.
    pub fn new(attr: &fi_xpu_host_launch_attr) -> Result<Shape> {
        if attr.flags != 0 {
            return Err(Error::BADFLAGS);
        }
        if attr.num_groups == 0 || attr.group_size == 0 {
            return Err(Error::INVAL);
        }
        match attr.num_groups.checked_mul(attr.group_size) {
            Some(n) if n <= FI_XPU_HOST_MAX_ITEMS => {}
            _ => return Err(Error(FI_E2BIG)),
        }
        let subgroup_size = match attr.subgroup_size {
            0 => FI_XPU_HOST_DEFAULT_SUBGROUP,
            s => s,
        };
        Ok(Shape {
            num_groups: attr.num_groups,
            group_size: attr.group_size,
            subgroup_size,
        })
    }

    pub fn items(&self) -> u32 {
        self.num_groups * self.group_size
    }

    fn subgroups_per_group(&self) -> u32 {
        self.group_size.div_ceil(self.subgroup_size)
    }

    /// Lanes of subgroup `sg` of a group (the last one may be partial).
    fn subgroup_items(&self, sg: u32) -> u32 {
        (self.group_size - sg * self.subgroup_size).min(self.subgroup_size)
    }

    /// The position of the work item with global id `global`.
    pub fn item(&self, global: u32) -> fi_xpu_host_item {
        let local_id = global % self.group_size;
        let subgroup_id = local_id / self.subgroup_size;
        fi_xpu_host_item {
            local_id,
            group_size: self.group_size,
            group_id: global / self.group_size,
            num_groups: self.num_groups,
            lane_id: local_id % self.subgroup_size,
            subgroup_id,
            subgroup_size: self.subgroup_size,
            subgroup_items: self.subgroup_items(subgroup_id),
        }
    }
}

/// The threads of one scope instance: a barrier and a slot for broadcasts.
///
/// The barrier counts arrivals per generation; a member that gives up
/// waiting (`wait_for`) takes its arrival back, so the team is as before for
/// the next call and a member that arrives late waits (and gives up) alone.
struct Team {
    size: u32,
    state: Mutex<TeamState>,
    cv: Condvar,
}

struct TeamState {
    arrived: u32,
    generation: u64,
    slot: u64,
}

impl Team {
    fn new(n: u32) -> Team {
        Team {
            size: n,
            state: Mutex::new(TeamState {
                arrived: 0,
                generation: 0,
                slot: 0,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TeamState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn wait(&self) {
        // Without a limit the wait only ends when everyone arrived.
        let _ = self.wait_for(None);
    }

    /// Waits for every member, for at most `limit`. `Err(arrived)` when the
    /// time ran out: how many members (the caller included) were there.
    fn wait_for(&self, limit: Option<Duration>) -> std::result::Result<(), u32> {
        let deadline = limit.map(|d| Instant::now() + d);
        let mut st = self.lock();
        let generation = st.generation;
        st.arrived += 1;
        if st.arrived == self.size {
            st.arrived = 0;
            st.generation = st.generation.wrapping_add(1);
            self.cv.notify_all();
            return Ok(());
        }
        while st.generation == generation {
            match deadline {
                None => st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                Some(t) => {
                    let now = Instant::now();
                    if now >= t {
                        let arrived = st.arrived;
                        st.arrived -= 1;
                        return Err(arrived);
                    }
                    st = self
                        .cv
                        .wait_timeout(st, t - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        Ok(())
    }

    /// The leader's value for everyone. The second wait keeps a leader that
    /// hurries on to the next broadcast from overwriting the slot before
    /// every member has read it.
    fn broadcast(&self, leader: bool, v: u64) -> u64 {
        if leader {
            self.lock().slot = v;
        }
        self.wait();
        let out = self.lock().slot;
        self.wait();
        out
    }
}

/// Everything the threads of one launch share.
struct Launch {
    device: Team,
    groups: Vec<Team>,
    /// `subgroups[group * per_group + subgroup]`
    subgroups: Vec<Team>,
    per_group: u32,
}

impl Launch {
    fn new(shape: &Shape) -> Launch {
        let per_group = shape.subgroups_per_group();
        Launch {
            device: Team::new(shape.items()),
            groups: (0..shape.num_groups)
                .map(|_| Team::new(shape.group_size))
                .collect(),
            subgroups: (0..shape.num_groups)
                .flat_map(|_| (0..per_group).map(|sg| Team::new(shape.subgroup_items(sg))))
                .collect(),
            per_group,
        }
    }

    /// The team of `scope` the work item `it` belongs to, and whether it
    /// leads it; `None` for work-item scope.
    fn team(&self, it: &fi_xpu_host_item, scope: i32) -> Result<Option<(&Team, bool)>> {
        Ok(match scope {
            FI_XPU_WORK_ITEM => None,
            FI_XPU_SUBGROUP => Some((
                &self.subgroups[(it.group_id * self.per_group + it.subgroup_id) as usize],
                it.lane_id == 0,
            )),
            FI_XPU_WORK_GROUP => Some((&self.groups[it.group_id as usize], it.local_id == 0)),
            FI_XPU_DEVICE => Some((&self.device, it.local_id == 0 && it.group_id == 0)),
            _ => return Err(Error::INVAL),
        })
    }
}

/// The position of a thread outside any launch: a group of one.
const SINGLE: fi_xpu_host_item = fi_xpu_host_item {
    local_id: 0,
    group_size: 1,
    group_id: 0,
    num_groups: 1,
    lane_id: 0,
    subgroup_id: 0,
    subgroup_size: 1,
    subgroup_items: 1,
};

thread_local! {
    static ITEM: Cell<fi_xpu_host_item> = const { Cell::new(SINGLE) };
    static LAUNCH: RefCell<Option<Arc<Launch>>> = const { RefCell::new(None) };
}

/// The calling thread's position. The pointer stays valid for the life of
/// the thread, and the value does not change while a kernel runs.
pub fn current_item_ptr() -> *const fi_xpu_host_item {
    ITEM.with(|c| c.as_ptr().cast_const())
}

pub fn current_item() -> fi_xpu_host_item {
    ITEM.with(Cell::get)
}

fn check_scope(scope: i32) -> Result<()> {
    match scope {
        FI_XPU_WORK_ITEM | FI_XPU_SUBGROUP | FI_XPU_WORK_GROUP | FI_XPU_DEVICE => Ok(()),
        _ => Err(Error::INVAL),
    }
}

/// Runs `f` with the caller's team for `scope`, or returns `alone` when the
/// caller is a team of one (work-item scope, or outside any launch).
fn with_team<T>(scope: i32, alone: T, f: impl FnOnce(&Team, bool) -> T) -> Result<T> {
    check_scope(scope)?;
    LAUNCH.with(|l| {
        let l = l.borrow();
        let Some(launch) = l.as_ref() else {
            return Ok(alone);
        };
        Ok(match launch.team(&current_item(), scope)? {
            Some((team, leader)) => f(team, leader),
            None => alone,
        })
    })
}

/// Waits for every work item of the caller's `scope` instance.
pub fn barrier(scope: i32) -> Result<()> {
    with_team(scope, (), |team, _| team.wait())
}

/// Waits for every work item of the caller's `scope` instance for at most
/// `limit`. `Ok(Err(arrived))` when the time ran out, with the number of
/// members (the caller included) that had reached the barrier; nobody is
/// left waiting for the caller then.
pub fn barrier_for(scope: i32, limit: Duration) -> Result<std::result::Result<(), u32>> {
    with_team(scope, Ok(()), |team, _| team.wait_for(Some(limit)))
}

/// The value the leader (rank 0) of the caller's `scope` instance passed.
pub fn broadcast(scope: i32, value: u64) -> Result<u64> {
    with_team(scope, value, |team, leader| team.broadcast(leader, value))
}

/// Nanoseconds on a monotonic clock (its origin is the first call).
pub fn clock_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let ns = EPOCH.get_or_init(Instant::now).elapsed().as_nanos();
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Lets other threads run; host work items usually outnumber cores.
pub fn pause() {
    std::thread::yield_now();
}

/// Held by every thread until all are started: if one cannot be created the
/// others are told to leave instead of waiting at a barrier for it forever.
struct Gate {
    go: Mutex<Option<bool>>,
    cv: Condvar,
}

impl Gate {
    fn open(&self, go: bool) {
        *self.go.lock().unwrap_or_else(|e| e.into_inner()) = Some(go);
        self.cv.notify_all();
    }

    fn wait(&self) -> bool {
        let mut g = self.go.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(go) = *g {
                return go;
            }
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Runs `kernel` once on each of `shape.items()` new threads and returns
/// when all have finished. `-FI_EAGAIN` if the threads cannot be created
/// (then the kernel has run nowhere).
pub fn launch(shape: &Shape, kernel: impl Fn() + Sync) -> Result<()> {
    let shared = Arc::new(Launch::new(shape));
    let gate = Gate {
        go: Mutex::new(None),
        cv: Condvar::new(),
    };
    std::thread::scope(|s| {
        // Joined explicitly (not just left to the scope) so that tools that
        // follow pthread_join see the kernel's writes ordered before return.
        let mut handles = Vec::with_capacity(shape.items() as usize);
        for global in 0..shape.items() {
            let item = shape.item(global);
            let shared = Arc::clone(&shared);
            let (gate, kernel) = (&gate, &kernel);
            let spawned = std::thread::Builder::new()
                .name(format!("fi_xpu g{} l{}", item.group_id, item.local_id))
                .spawn_scoped(s, move || {
                    if !gate.wait() {
                        return;
                    }
                    ITEM.with(|c| c.set(item));
                    LAUNCH.with(|l| *l.borrow_mut() = Some(shared));
                    kernel();
                    LAUNCH.with(|l| *l.borrow_mut() = None);
                    ITEM.with(|c| c.set(SINGLE));
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    crate::warn!("host launch: cannot start thread {global}: {e}");
                    gate.open(false);
                    return Err(Error(FI_EAGAIN));
                }
            }
        }
        gate.open(true);
        for h in handles {
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    fn attr(g: u32, n: u32, sg: u32) -> fi_xpu_host_launch_attr {
        fi_xpu_host_launch_attr {
            num_groups: g,
            group_size: n,
            subgroup_size: sg,
            flags: 0,
        }
    }

    #[test]
    fn shape_errors() {
        assert_eq!(Shape::new(&attr(0, 4, 0)), Err(Error::INVAL));
        assert_eq!(Shape::new(&attr(4, 0, 0)), Err(Error::INVAL));
        assert_eq!(Shape::new(&attr(65, 64, 0)), Err(Error(FI_E2BIG)));
        assert_eq!(
            Shape::new(&attr(u32::MAX, u32::MAX, 0)),
            Err(Error(FI_E2BIG))
        );
        let mut a = attr(1, 1, 0);
        a.flags = 1;
        assert_eq!(Shape::new(&a), Err(Error::BADFLAGS));
        assert_eq!(Shape::new(&attr(2, 3, 0)).unwrap().subgroup_size, 32);
    }

    #[test]
    fn items_cover_the_launch() {
        let s = Shape::new(&attr(3, 10, 4)).unwrap();
        let it = s.item(19);
        assert_eq!(
            (it.group_id, it.local_id, it.subgroup_id, it.lane_id),
            (1, 9, 2, 1)
        );
        assert_eq!(it.subgroup_items, 2);
        assert_eq!(s.item(4).subgroup_items, 4);
    }

    #[test]
    fn outside_a_launch_is_one_work_item() {
        assert_eq!(current_item(), SINGLE);
        for scope in 0..4 {
            assert_eq!(barrier(scope), Ok(()));
            assert_eq!(broadcast(scope, 7), Ok(7));
        }
        assert_eq!(barrier(4), Err(Error::INVAL));
        assert_eq!(broadcast(-1, 7), Err(Error::INVAL));
    }

    #[test]
    fn a_member_that_never_arrives_ends_the_wait() {
        let s = Shape::new(&attr(2, 4, 2)).unwrap();
        let timed_out = AtomicU32::new(0);
        let arrived = AtomicU32::new(0);
        launch(&s, || {
            let it = current_item();
            // Work item 3 of group 1 skips the call; its group gives up.
            if it.group_id == 1 && it.local_id == 3 {
                return;
            }
            match barrier_for(FI_XPU_WORK_GROUP, Duration::from_millis(100)).unwrap() {
                Ok(()) => assert_eq!(it.group_id, 0),
                Err(n) => {
                    assert_eq!(it.group_id, 1);
                    timed_out.fetch_add(1, Ordering::SeqCst);
                    arrived.fetch_max(n, Ordering::SeqCst);
                }
            }
            // The team is whole again for those who are all there.
            if it.group_id == 0 {
                barrier(FI_XPU_WORK_GROUP).unwrap();
            }
        })
        .unwrap();
        assert_eq!(timed_out.load(Ordering::SeqCst), 3);
        assert_eq!(arrived.load(Ordering::SeqCst), 3);
        // Alone outside a launch there is nobody to wait for.
        assert_eq!(barrier_for(FI_XPU_WORK_GROUP, Duration::ZERO), Ok(Ok(())));
        assert_eq!(barrier_for(9, Duration::ZERO), Err(Error::INVAL));
    }

    #[test]
    fn barriers_and_broadcasts() {
        let s = Shape::new(&attr(3, 5, 2)).unwrap();
        let before = AtomicU32::new(0);
        let bad = AtomicU32::new(0);
        let sum = AtomicU64::new(0);
        launch(&s, || {
            let it = current_item();
            let id = u64::from(it.group_id * 100 + it.local_id);
            before.fetch_add(1, Ordering::SeqCst);
            barrier(FI_XPU_DEVICE).unwrap();
            if before.load(Ordering::SeqCst) != 15 {
                bad.fetch_add(1, Ordering::SeqCst);
            }
            let g = broadcast(FI_XPU_WORK_GROUP, id).unwrap();
            let sg = broadcast(FI_XPU_SUBGROUP, id).unwrap();
            let d = broadcast(FI_XPU_DEVICE, id + 1000).unwrap();
            if g != u64::from(it.group_id * 100)
                || sg != u64::from(it.group_id * 100 + it.subgroup_id * 2)
                || d != 1000
            {
                bad.fetch_add(1, Ordering::SeqCst);
            }
            sum.fetch_add(id, Ordering::SeqCst);
        })
        .unwrap();
        assert_eq!(bad.load(Ordering::SeqCst), 0);
        assert_eq!(sum.load(Ordering::SeqCst), 3 * 10 + 300 * 5);
        assert_eq!(current_item(), SINGLE);
    }
}
