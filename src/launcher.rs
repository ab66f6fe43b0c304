//! Host XPU launcher: runs a kernel function as G groups of N work items on
//! CPU threads.
//!
//! Each work item runs on a thread of its own, kept between launches
//! (`pool`). Its position (`fi_xpu_host_item`) lives in
//! a thread-local that the host branch of the device arch layer reads, and
//! the barriers and broadcasts of every scope go through `Team`s shared by
//! the threads of a launch. A thread outside any launch is a work item of its
//! own, so work-item scope device code runs from ordinary threads too.
//!
//! The GPU-like mode (`FI_XPU_HOST_LAUNCH_GPU`, or `FI_XPU_HOST_GPU` for
//! every launch) takes away what CPU threads forgive: only some groups are
//! resident at once (`residency`), the lanes of a subgroup take turns
//! between subgroup syncs (`lanes`), and subgroups are 64 lanes wide unless
//! the launch says otherwise, so groups of 32 or of 48 work items end with a
//! partial one.
//!
//! The weak-ordering mode (`FI_XPU_HOST_WEAK_ORDER`, `weak`) holds back the
//! stores of device code compiled for it, as a GPU may, so that a missing
//! or too narrow release shows on CPU threads too. It combines with the
//! GPU-like mode.
use crate::error::{Error, Result};
use crate::param;
use fi_xpu_abi::*;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

mod lanes;
mod monitor;
mod partial;
mod pool;
mod residency;
mod weak;

use lanes::Lanes;
use residency::{Call, Doing, Residency};

/// How long a work item waiting at a barrier, a kept thread waiting for
/// its next work item, and a launch waiting for its work items look for
/// the change (letting other threads run between looks) before they sleep.
/// A sleep and its wake-up cost tens of microseconds on a virtual machine;
/// the launches and barriers of a kernel usually follow each other closer
/// than that.
const SPIN: Duration = Duration::from_micros(50);

/// The GPU-like mode's settings for one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuLike {
    /// Most groups resident at once.
    pub resident: u32,
    /// How long resident groups may make no progress while others wait.
    pub hang: Duration,
    /// Seeds the lanes' orders.
    pub seed: u64,
    /// How long a subgroup or work-group call waits for missing members
    /// before the partial group is reported (`None`: never).
    pub partial: Option<Duration>,
}

/// The GPU-like mode's parameters as the environment sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuEnv {
    /// `FI_XPU_HOST_GPU`: the mode for every launch, with that many groups
    /// resident.
    pub every_launch: Option<u32>,
    pub hang_ms: u64,
    pub seed: u64,
    pub subgroup: u32,
    /// `FI_XPU_HOST_GPU_GROUP_MS`; 0 turns the partial-group check off.
    pub group_ms: u64,
}

/// Resident groups of a launch that asks for the mode when
/// `FI_XPU_HOST_GPU` does not say.
pub const GPU_DEFAULT_RESIDENT: u32 = 2;

impl Default for GpuEnv {
    fn default() -> Self {
        GpuEnv {
            every_launch: None,
            hang_ms: 5000,
            seed: 1,
            subgroup: 64,
            group_ms: 5000,
        }
    }
}

impl GpuEnv {
    /// Reads the parameters; a value that is not a positive number is
    /// reported and the default used.
    pub fn read() -> GpuEnv {
        fn num(var: &str) -> Option<u64> {
            let v = param::core(var)?;
            match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    crate::warn!("{var}={v} is not a positive number: ignored");
                    None
                }
            }
        }
        let d = GpuEnv::default();
        let small = |n: u64| u32::try_from(n).ok();
        GpuEnv {
            every_launch: num(param::HOST_GPU).and_then(small),
            hang_ms: num(param::HOST_GPU_HANG_MS).unwrap_or(d.hang_ms),
            seed: num(param::HOST_GPU_SEED).unwrap_or(d.seed),
            subgroup: num(param::HOST_GPU_SUBGROUP)
                .and_then(small)
                .unwrap_or(d.subgroup),
            group_ms: param::core(param::HOST_GPU_GROUP_MS).map_or(d.group_ms, |v| {
                v.trim().parse::<u64>().unwrap_or_else(|_| {
                    crate::warn!("{}={v} is not a number: ignored", param::HOST_GPU_GROUP_MS);
                    d.group_ms
                })
            }),
        }
    }
}

/// The weak-ordering mode's window when `FI_XPU_HOST_WEAK_ORDER` turns it
/// on (any value but empty and `0`), else `None`.
fn weak_env() -> Option<Duration> {
    let on = param::core(param::HOST_WEAK_ORDER)?;
    if on.trim().is_empty() || on.trim() == "0" {
        return None;
    }
    Some(
        param::core(param::HOST_WEAK_WINDOW_MS).map_or(weak::DEFAULT_WINDOW, |v| {
            v.trim().parse::<u64>().map_or_else(
                |_| {
                    crate::warn!(
                        "{}={v} is not a number: ignored",
                        param::HOST_WEAK_WINDOW_MS
                    );
                    weak::DEFAULT_WINDOW
                },
                Duration::from_millis,
            )
        }),
    )
}

/// A validated launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub num_groups: u32,
    pub group_size: u32,
    pub subgroup_size: u32,
    /// The GPU-like mode, when on.
    pub gpu: Option<GpuLike>,
    /// The weak-ordering mode, when on: its window (`weak`).
    pub weak: Option<Duration>,
}

impl Shape {
    /// Checks an attribute: `-FI_EINVAL` for an empty launch,
    /// `-FI_EBADFLAGS` for unknown flags, `-FI_E2BIG` for more than
    /// `FI_XPU_HOST_MAX_ITEMS` threads. The GPU-like mode's parameters come
    /// from the environment.
    /// The weak-ordering mode too comes from the environment
    /// (`FI_XPU_HOST_WEAK_ORDER`, `FI_XPU_HOST_WEAK_WINDOW_MS`).
    pub fn new(attr: &fi_xpu_host_launch_attr) -> Result<Shape> {
        let mut shape = Shape::with_env(attr, &GpuEnv::read())?;
        shape.weak = weak_env();
        Ok(shape)
    }

    pub fn with_env(attr: &fi_xpu_host_launch_attr, env: &GpuEnv) -> Result<Shape> {
        if attr.flags & !FI_XPU_HOST_LAUNCH_GPU != 0 {
            return Err(Error::BADFLAGS);
        }
        if attr.num_groups == 0 || attr.group_size == 0 {
            return Err(Error::INVAL);
        }
        match attr.num_groups.checked_mul(attr.group_size) {
            Some(n) if n <= FI_XPU_HOST_MAX_ITEMS => {}
            _ => return Err(Error::E2BIG),
        }
        let gpu = match (attr.flags & FI_XPU_HOST_LAUNCH_GPU != 0, env.every_launch) {
            (_, Some(resident)) => Some(resident),
            (true, None) => Some(GPU_DEFAULT_RESIDENT),
            (false, None) => None,
        }
        .map(|resident| GpuLike {
            resident,
            hang: Duration::from_millis(env.hang_ms),
            seed: env.seed,
            partial: (env.group_ms > 0).then(|| Duration::from_millis(env.group_ms)),
        });
        let subgroup_size = match (attr.subgroup_size, gpu) {
            (0, None) => FI_XPU_HOST_DEFAULT_SUBGROUP,
            (0, Some(_)) => env.subgroup,
            (s, _) => s,
        };
        Ok(Shape {
            num_groups: attr.num_groups,
            group_size: attr.group_size,
            subgroup_size,
            gpu,
            weak: None,
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
    /// `state.generation`, for members that look for its change without
    /// the lock before they sleep (`SPIN`).
    generation: AtomicU64,
}

struct TeamState {
    arrived: u32,
    generation: u64,
    slot: u64,
    /// Given up (`abandon`): a member that can never arrive is missing.
    broken: bool,
}

impl Team {
    fn new(n: u32) -> Team {
        Team {
            size: n,
            state: Mutex::new(TeamState {
                arrived: 0,
                generation: 0,
                slot: 0,
                broken: false,
            }),
            cv: Condvar::new(),
            generation: AtomicU64::new(0),
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
        if st.broken {
            return Err(st.arrived + 1);
        }
        let generation = st.generation;
        st.arrived += 1;
        if st.arrived == self.size {
            st.arrived = 0;
            st.generation = st.generation.wrapping_add(1);
            self.generation.store(st.generation, Ordering::Release);
            self.cv.notify_all();
            return Ok(());
        }
        drop(st);
        let spin = Instant::now();
        while spin.elapsed() < SPIN && deadline.is_none_or(|t| Instant::now() < t) {
            if self.generation.load(Ordering::Acquire) != generation {
                return Ok(());
            }
            std::thread::yield_now();
        }
        let mut st = self.lock();
        while st.generation == generation {
            if st.broken {
                let arrived = st.arrived;
                st.arrived -= 1;
                return Err(arrived);
            }
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
    fn broadcast(&self, leader: bool, v: u64) -> std::result::Result<u64, u32> {
        if leader {
            self.lock().slot = v;
        }
        self.wait_for(None)?;
        let out = self.lock().slot;
        self.wait_for(None)?;
        Ok(out)
    }

    /// Gives up on the missing members: every member waiting returns
    /// `Err(arrived)`, and so does every later call.
    fn abandon(&self) {
        self.lock().broken = true;
        self.cv.notify_all();
    }
}

/// Everything the threads of one launch share.
struct Launch {
    shape: Shape,
    device: Team,
    groups: Vec<Team>,
    /// `subgroups[group * per_group + subgroup]`
    subgroups: Vec<Team>,
    per_group: u32,
    gpu: Option<Gpu>,
    /// The weak-ordering mode's device overlay.
    weak: Option<weak::Device>,
}

/// The GPU-like mode's state of a launch.
struct Gpu {
    residency: Residency,
    /// `lanes[group * per_group + subgroup]`, in place of `subgroups`.
    lanes: Vec<Lanes>,
    /// The watch for group calls that only some members reach.
    partial: Option<partial::Partial>,
}

impl Launch {
    fn new(shape: &Shape) -> Launch {
        let per_group = shape.subgroups_per_group();
        // Lanes of every subgroup of the launch, in `subgroups` order.
        let widths: Vec<u32> = (0..shape.num_groups)
            .flat_map(|_| (0..per_group).map(|sg| shape.subgroup_items(sg)))
            .collect();
        let gpu = shape.gpu.map(|m| Gpu {
            residency: Residency::new(m.resident, shape.num_groups, shape.group_size, m.hang),
            lanes: widths
                .iter()
                .zip(0u64..)
                .map(|(&n, i)| Lanes::new(n, m.seed.wrapping_mul(0x0100_0000_01b3) ^ i))
                .collect(),
            partial: m.partial.map(partial::Partial::new),
        });
        Launch {
            shape: *shape,
            device: Team::new(shape.items()),
            groups: (0..shape.num_groups)
                .map(|_| Team::new(shape.group_size))
                .collect(),
            subgroups: if gpu.is_some() {
                Vec::new()
            } else {
                widths.into_iter().map(Team::new).collect()
            },
            per_group,
            gpu,
            weak: shape.weak.map(weak::Device::new),
        }
    }

    fn lanes(&self, it: &fi_xpu_host_item) -> Option<&Lanes> {
        let i = (it.group_id * self.per_group + it.subgroup_id) as usize;
        self.gpu.as_ref().map(|g| &g.lanes[i])
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

/// A GPU-like launch's call at `scope` (not work-item scope): `None` when
/// the caller is in no such launch. The caller's subgroup takes part as
/// its lanes (their turns); for a wider scope the caller's lane lets the
/// others of its subgroup run while it waits in `wide`, and waits for its
/// turn again after.
fn gpu_scope<T>(
    scope: i32,
    call: Call,
    sub: impl FnOnce(&Lanes, u32) -> T,
    wide: impl FnOnce(&Team, bool) -> T,
    done: impl Fn(&T) -> bool,
) -> Option<T> {
    LAUNCH.with(|l| {
        let l = l.borrow();
        let launch = l.as_ref()?;
        let gpu = launch.gpu.as_ref()?;
        let it = current_item();
        let lanes = launch.lanes(&it)?;
        let global = it.group_id * it.group_size + it.local_id;
        let res = &gpu.residency;
        res.wait_in(global, scope, call);
        let out = if scope == FI_XPU_SUBGROUP {
            sub(lanes, it.lane_id)
        } else {
            let (team, leader) = launch.team(&it, scope).ok()??;
            lanes.park(it.lane_id);
            let out = wide(team, leader);
            res.set(global, Doing::Turn);
            lanes.resume(it.lane_id);
            out
        };
        if done(&out) {
            res.progressed();
        }
        res.set(global, Doing::Running);
        Some(out)
    })
}

/// Waits for every work item of the caller's `scope` instance.
/// `-FI_ETIMEDOUT` in a GPU-like launch when the instance was given up
/// because a member can never arrive (`partial`).
pub fn barrier(scope: i32) -> Result<()> {
    check_scope(scope)?;
    weak_sync();
    if scope != FI_XPU_WORK_ITEM {
        // Without a deadline the wait only ends when everyone arrived (or
        // the partial-group check gave up on the instance).
        if let Some(r) = gpu_scope(
            scope,
            Call::Barrier,
            |lanes, lane| lanes.barrier(lane, None),
            |team, _| team.wait_for(None),
            std::result::Result::is_ok,
        ) {
            return r.map_err(|_| Error::TIMEDOUT);
        }
    }
    with_team(scope, (), |team, _| team.wait())
}

/// Waits for every work item of the caller's `scope` instance for at most
/// `limit`. `Ok(Err(arrived))` when the time ran out, with the number of
/// members (the caller included) that had reached the barrier; nobody is
/// left waiting for the caller then.
pub fn barrier_for(scope: i32, limit: Duration) -> Result<std::result::Result<(), u32>> {
    check_scope(scope)?;
    weak_sync();
    if scope != FI_XPU_WORK_ITEM {
        let deadline = Instant::now() + limit;
        if let Some(r) = gpu_scope(
            scope,
            Call::Barrier,
            |lanes, lane| lanes.barrier(lane, Some(deadline)),
            |team, _| team.wait_for(Some(limit)),
            std::result::Result::is_ok,
        ) {
            return Ok(r);
        }
    }
    with_team(scope, Ok(()), |team, _| team.wait_for(Some(limit)))
}

/// The value the leader (rank 0) of the caller's `scope` instance passed.
/// `-FI_ETIMEDOUT` as for `barrier`.
pub fn broadcast(scope: i32, value: u64) -> Result<u64> {
    check_scope(scope)?;
    weak_sync();
    if scope != FI_XPU_WORK_ITEM {
        if let Some(v) = gpu_scope(
            scope,
            Call::Broadcast,
            |lanes, lane| lanes.broadcast(lane, value),
            |team, leader| team.broadcast(leader, value),
            std::result::Result::is_ok,
        ) {
            return v.map_err(|_| Error::TIMEDOUT);
        }
    }
    // Without a deadline nobody gives up on the plain launcher's teams.
    with_team(scope, Ok(value), |team, leader| {
        team.broadcast(leader, value)
    })?
    .map_err(|_| Error::TIMEDOUT)
}

/// Nanoseconds on a monotonic clock (its origin is the first call).
pub fn clock_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let ns = crate::fork::made_once(&EPOCH, Instant::now)
        .elapsed()
        .as_nanos();
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Lets other threads run; host work items usually outnumber cores. In a
/// GPU-like launch the caller's lane also lets the other lanes of its
/// subgroup run, and counts as spinning for the hang watch.
pub fn pause() {
    let alone = LAUNCH.with(|l| {
        let l = l.borrow();
        let Some(launch) = l.as_ref() else {
            return true;
        };
        let (Some(gpu), it) = (launch.gpu.as_ref(), current_item()) else {
            return true;
        };
        let Some(lanes) = launch.lanes(&it) else {
            return true;
        };
        let global = it.group_id * it.group_size + it.local_id;
        gpu.residency.paused(global);
        gpu.residency.set(global, Doing::Turn);
        let alone = lanes.pause(it.lane_id);
        gpu.residency.set(global, Doing::Running);
        alone
    });
    if alone {
        std::thread::yield_now();
    }
}

/// Runs `f` with the weak-ordering mode's state of the caller's launch
/// and the caller's global id; `None` outside a launch in that mode.
fn with_weak<T>(f: impl FnOnce(&weak::Device, u32) -> T) -> Option<T> {
    LAUNCH.with(|l| {
        let l = l.borrow();
        let d = l.as_ref()?.weak.as_ref()?;
        let it = current_item();
        Some(f(d, it.group_id * it.group_size + it.local_id))
    })
}

/// Writes everything the caller's launch holds back to memory (a
/// system-scope release by the caller); nothing outside the mode.
fn weak_sync() {
    // SAFETY: what is held back was stored by `weak_copy`, whose caller
    // named each destination writable (and keeps it so for the kernel).
    with_weak(|d, me| unsafe { d.release(me, weak::MS_SYSTEM) });
}

/// An atomic load of `size` (4 or 8) bytes of device code compiled for
/// the weak-ordering mode (`weak`); the plain load elsewhere.
///
/// # Safety
/// `p` is aligned and valid for an atomic load of `size` bytes.
pub unsafe fn weak_load(p: usize, size: usize, order: i32) -> u64 {
    // SAFETY: the caller's contract.
    with_weak(|d, _| unsafe { d.load(p, size, order) })
        .unwrap_or_else(|| unsafe { weak::plain_load(p, size, order) })
}

/// An atomic store, as `weak_load`.
///
/// # Safety
/// `p` is aligned and valid for an atomic store of `size` bytes.
pub unsafe fn weak_store(p: usize, size: usize, v: u64, order: i32, mscope: i32) {
    // SAFETY: the caller's contract; held-back stores as in `weak_sync`.
    with_weak(|d, me| unsafe { d.store(me, p, size, v, order, mscope) })
        .unwrap_or_else(|| unsafe { weak::plain_store(p, size, v, order) });
}

/// An atomic read-modify-write (`FI_XPU_HOST_WEAK_*`), as `weak_load`;
/// returns the old value.
///
/// # Safety
/// `p` is aligned and valid for an atomic RMW of `size` bytes.
pub unsafe fn weak_rmw(
    p: usize,
    size: usize,
    op: i32,
    v: (u64, u64),
    order: i32,
    mscope: i32,
) -> u64 {
    // SAFETY: the caller's contract; held-back stores as in `weak_sync`.
    with_weak(|d, me| unsafe { d.rmw(me, p, size, op, v.0, v.1, order, mscope) })
        .unwrap_or_else(|| unsafe { weak::plain_rmw(p, size, op, v.0, v.1, order) })
}

/// A fence, as `weak_load`.
pub fn weak_fence(order: i32, mscope: i32) {
    if weak::releases(order, false) {
        // SAFETY: held-back stores as in `weak_sync`.
        with_weak(|d, me| unsafe { d.release(me, mscope) });
    }
    weak::plain_fence(order);
}

/// A data copy of `n` bytes, as `weak_load`.
///
/// # Safety
/// `src` is valid for reading and `dst` for writing `n` bytes until the
/// caller's work item ends, and they do not overlap.
pub unsafe fn weak_copy(dst: usize, src: usize, n: usize) {
    // SAFETY: the caller's contract.
    with_weak(|d, me| unsafe { d.copy(me, dst, src, n) }).unwrap_or_else(|| unsafe {
        std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, n)
    });
}

/// Puts back a thread's position and launch as they were before a work
/// item ran on it, when the kernel returns or unwinds: a pooled thread is
/// then outside any launch, and a launching thread what it was before.
struct ItemExit {
    item: fi_xpu_host_item,
    launch: Option<Arc<Launch>>,
}

impl Drop for ItemExit {
    fn drop(&mut self) {
        // The end of a work item releases everything it held back.
        weak_sync();
        LAUNCH.with(|l| *l.borrow_mut() = self.launch.take());
        ITEM.with(|c| c.set(self.item));
    }
}

/// Work item `global` of a launch, on the calling thread.
fn run_item(
    shared: &Arc<Launch>,
    item: fi_xpu_host_item,
    global: u32,
    kernel: &(impl Fn() + Sync),
) {
    let _exit = ItemExit {
        item: ITEM.with(|c| c.replace(item)),
        launch: LAUNCH.with(|l| l.borrow_mut().replace(Arc::clone(shared))),
    };
    let gpu = shared
        .gpu
        .as_ref()
        .map(|g| (g, shared.lanes(&item).expect("the launch's subgroup")));
    if let Some((g, lanes)) = gpu {
        g.residency.enter(item.group_id);
        g.residency.set(global, Doing::Turn);
        lanes.start(item.lane_id);
        g.residency.set(global, Doing::Running);
    }
    kernel();
    if let Some((g, lanes)) = gpu {
        lanes.exit(item.lane_id);
        g.residency.leave(global);
    }
}

/// Runs `kernel` once for each of `shape.items()` work items, each on a
/// thread of its own, and returns when all have finished. The threads are
/// kept between launches (`pool`), and the calling thread runs work item 0
/// itself, so a launch costs a wake-up per other work item. In the
/// GPU-like mode the caller watches for hangs instead and every work item
/// runs on a pooled thread.
///
/// `-FI_EAGAIN` if the threads cannot be created (then the kernel has run
/// nowhere). In the GPU-like mode, `-FI_ETIMEDOUT` when the kernel waited
/// on groups that could not become resident (it was reported, and those
/// groups then ran so that the launch could end), or a subgroup or work
/// group waited in a call for members that had returned (reported by
/// `partial`; the members that waited got `-FI_ETIMEDOUT`).
pub fn launch(shape: &Shape, kernel: impl Fn() + Sync) -> Result<()> {
    // A work item that launches releases what it held back first.
    weak_sync();
    let shared = Arc::new(Launch::new(shape));
    let kernel = &kernel;
    let on_caller = shared.gpu.is_none();
    let items: Vec<pool::Body<'_>> = (u32::from(on_caller)..shape.items())
        .map(|global| {
            let shared = Arc::clone(&shared);
            Box::new(move || run_item(&shared, shape.item(global), global, kernel))
                as pool::Body<'_>
        })
        .collect();
    let hung = pool::run(items, || match &shared.gpu {
        Some(g) => {
            let every = g.partial.as_ref().map(|p| p.every());
            let hung = g.residency.watch(every, || {
                if let Some(p) = &g.partial {
                    p.check(&shared, g);
                }
            });
            hung || g.partial.as_ref().is_some_and(partial::Partial::gave_up)
        }
        None => {
            run_item(&shared, shape.item(0), 0, kernel);
            false
        }
    })?;
    if let Some(w) = &shared.weak {
        if w.stalls() > 0 {
            crate::info!(
                "weak-ordering mode: {} stores or RMWs reached memory ahead of stores still hidden from the host",
                w.stalls()
            );
        }
    }
    if hung {
        return Err(Error::TIMEDOUT);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::AssertUnwindSafe;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    fn attr(g: u32, n: u32, sg: u32) -> fi_xpu_host_launch_attr {
        fi_xpu_host_launch_attr {
            num_groups: g,
            group_size: n,
            subgroup_size: sg,
            flags: 0,
        }
    }

    /// A work item's panic reaches the launching thread once every work
    /// item has returned; the threads stay usable, and the launching
    /// thread (which ran work item 0) is outside any launch again.
    #[test]
    fn a_panic_in_a_work_item_reaches_the_launcher_after_the_others() {
        let s = Shape::new(&attr(2, 3, 0)).unwrap();
        let finished = AtomicU32::new(0);
        let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
            launch(&s, || {
                if current_item().local_id == 2 && current_item().group_id == 1 {
                    panic!("item 5");
                }
                std::thread::sleep(Duration::from_millis(20));
                finished.fetch_add(1, Ordering::SeqCst);
            })
        }));
        let msg = r.unwrap_err();
        assert_eq!(msg.downcast_ref::<&str>(), Some(&"item 5"));
        assert_eq!(finished.load(Ordering::SeqCst), 5);
        assert_eq!(current_item(), SINGLE);
        let ran = AtomicU32::new(0);
        launch(&s, || {
            ran.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 6);
    }

    /// A work item that launches a kernel of its own gets its position and
    /// its barriers back when that launch returns.
    #[test]
    fn a_nested_launch_leaves_the_outer_work_item_as_it_was() {
        let outer = Shape::new(&attr(2, 2, 0)).unwrap();
        let inner = Shape::new(&attr(1, 3, 0)).unwrap();
        let inner_items = AtomicU32::new(0);
        launch(&outer, || {
            let before = current_item();
            launch(&inner, || {
                assert_eq!(current_item().group_size, 3);
                barrier(FI_XPU_WORK_GROUP).unwrap();
                inner_items.fetch_add(1, Ordering::SeqCst);
            })
            .unwrap();
            assert_eq!(current_item(), before);
            // The outer launch's device barrier still counts 4 members.
            barrier(FI_XPU_DEVICE).unwrap();
        })
        .unwrap();
        assert_eq!(inner_items.load(Ordering::SeqCst), 12);
    }

    #[test]
    fn shape_errors() {
        assert_eq!(Shape::new(&attr(0, 4, 0)), Err(Error::INVAL));
        assert_eq!(Shape::new(&attr(4, 0, 0)), Err(Error::INVAL));
        assert_eq!(Shape::new(&attr(65, 64, 0)), Err(Error::E2BIG));
        assert_eq!(Shape::new(&attr(u32::MAX, u32::MAX, 0)), Err(Error::E2BIG));
        let mut a = attr(1, 1, 0);
        a.flags = 2;
        assert_eq!(Shape::new(&a), Err(Error::BADFLAGS));
        assert_eq!(Shape::new(&attr(2, 3, 0)).unwrap().subgroup_size, 32);
    }

    #[test]
    fn gpu_like_mode_from_the_flag_or_the_environment() {
        let env = GpuEnv::default();
        let plain = Shape::with_env(&attr(2, 32, 0), &env).unwrap();
        assert_eq!((plain.gpu, plain.subgroup_size), (None, 32));
        let mut a = attr(2, 32, 0);
        a.flags = FI_XPU_HOST_LAUNCH_GPU;
        let s = Shape::with_env(&a, &env).unwrap();
        let mode = s.gpu.unwrap();
        assert_eq!((mode.resident, mode.seed, s.subgroup_size), (2, 1, 64));
        assert_eq!(mode.hang, Duration::from_millis(5000));
        assert_eq!(mode.partial, Some(Duration::from_millis(5000)));
        let every = GpuEnv {
            every_launch: Some(5),
            hang_ms: 7,
            seed: 9,
            subgroup: 16,
            group_ms: 0,
        };
        let s = Shape::with_env(&attr(2, 32, 0), &every).unwrap();
        assert_eq!(
            s.gpu,
            Some(GpuLike {
                resident: 5,
                hang: Duration::from_millis(7),
                seed: 9,
                partial: None,
            })
        );
        assert_eq!(s.subgroup_size, 16);
        // A width the launch names is kept.
        assert_eq!(
            Shape::with_env(&attr(2, 32, 8), &every)
                .unwrap()
                .subgroup_size,
            8
        );
        // A group of 32 in 64-lane subgroups: one partial subgroup.
        let s = Shape::with_env(&a, &env).unwrap();
        assert_eq!((s.item(5).subgroup_items, s.subgroups_per_group()), (32, 1));
    }

    /// Two of four groups at once; a group that waits for all the others
    /// is reported and the launch ends with -FI_ETIMEDOUT.
    #[test]
    fn gpu_like_launch_reports_a_wait_on_non_resident_groups() {
        let env = GpuEnv {
            every_launch: Some(2),
            hang_ms: 100,
            ..GpuEnv::default()
        };
        let s = Shape::with_env(&attr(4, 2, 0), &env).unwrap();
        let running = AtomicU32::new(0);
        let most = AtomicU32::new(0);
        launch(&s, || {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            running.fetch_sub(1, Ordering::SeqCst);
        })
        .unwrap();
        assert!(most.load(Ordering::SeqCst) <= 4);
        let arrived = AtomicU32::new(0);
        let r = launch(&s, || {
            arrived.fetch_add(1, Ordering::SeqCst);
            while arrived.load(Ordering::SeqCst) < 8 {
                pause();
            }
        });
        assert_eq!(r, Err(Error::TIMEDOUT));
        assert_eq!(arrived.load(Ordering::SeqCst), 8);
    }

    /// The weak-ordering mode: a copy is seen by its own work item only;
    /// a device-scope release shows it to the launch but not in memory; a
    /// relaxed store overtakes it (and the work item stops for the window);
    /// a system-scope release writes it; an RMW reads held-back bytes.
    #[test]
    fn weak_ordering_holds_stores_back_until_a_release_of_their_scope() {
        let mut s = Shape::new(&attr(1, 2, 0)).unwrap();
        s.weak = Some(Duration::from_millis(1));
        let data = AtomicU64::new(0);
        let flag = AtomicU64::new(0);
        let word = AtomicU64::new(0);
        let step = AtomicU32::new(0);
        let bad = AtomicU32::new(0);
        let (d, f, w) = (
            data.as_ptr() as usize,
            flag.as_ptr() as usize,
            word.as_ptr() as usize,
        );
        let wait = |n: u32| {
            while step.load(Ordering::SeqCst) < n {
                std::thread::yield_now();
            }
        };
        let check = |ok: bool| {
            if !ok {
                bad.fetch_add(1, Ordering::SeqCst);
            }
        };
        launch(&s, || {
            let value = 0x1122_3344_5566_7788u64.to_ne_bytes();
            // SAFETY: `data`, `flag` and `word` outlive the launch; `value`
            // outlives the copy's release (each step releases before the
            // work item returns).
            unsafe {
                if current_item().local_id == 0 {
                    weak_copy(d, value.as_ptr() as usize, 8);
                    check(weak_load(d, 8, 0) == 0x1122_3344_5566_7788);
                    check(data.load(Ordering::SeqCst) == 0);
                    weak_store(f, 8, 1, 0, weak::MS_SYSTEM);
                    check(flag.load(Ordering::SeqCst) == 1 && data.load(Ordering::SeqCst) == 0);
                    weak_fence(3, 0);
                    check(data.load(Ordering::SeqCst) == 0);
                    step.store(1, Ordering::SeqCst);
                    wait(2);
                    weak_fence(5, weak::MS_SYSTEM);
                    check(data.load(Ordering::SeqCst) == 0x1122_3344_5566_7788);
                    weak_copy(w, value.as_ptr() as usize, 8);
                    check(
                        weak_rmw(w, 8, FI_XPU_HOST_WEAK_ADD, (1, 0), 4, weak::MS_SYSTEM)
                            == 0x1122_3344_5566_7788,
                    );
                    check(word.load(Ordering::SeqCst) == 0x1122_3344_5566_7789);
                } else {
                    wait(1);
                    check(weak_load(d, 8, 2) == 0x1122_3344_5566_7788);
                    check(data.load(Ordering::SeqCst) == 0);
                    step.store(2, Ordering::SeqCst);
                }
            }
        })
        .unwrap();
        assert_eq!(bad.load(Ordering::SeqCst), 0);
        // Outside the mode the same calls are the plain operations.
        // SAFETY: as above.
        unsafe {
            weak_copy(d, w, 8);
            assert_eq!(weak_load(d, 8, 0), 0x1122_3344_5566_7789);
        }
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
