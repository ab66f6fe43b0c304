//! Resident groups in the GPU-like mode, and the watch for a kernel that
//! waits on groups that cannot become resident.
//!
//! A GPU runs as many work groups at once as its multiprocessors hold;
//! the others start only when a resident one has finished. A kernel in
//! which a resident group waits for a later one (a grid-wide barrier, a
//! spin on a flag a later group sets) hangs there for ever. Here at most
//! `resident` groups run, in group order, each to its end before the next
//! is admitted; and the launching thread watches: when no resident group
//! made progress (no barrier completed, no work item returned) for the hang
//! timeout, while every live work item of the resident groups is blocked in
//! a barrier or spinning (it called the pause of a spin loop within that
//! time) and groups wait to become resident, it reports what each resident
//! group is doing, lets the waiting groups run so the launch can end, and
//! the launch returns `-FI_ETIMEDOUT`.
use super::clock::clock_ns;
use fi_xpu_abi::*;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What a work item is doing, for the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Doing {
    /// Waiting to become resident.
    Queued = 0,
    /// Running device code (or spinning: see `last_pause`).
    Running = 1,
    /// Waiting for its subgroup's turn.
    Turn = 2,
    SubgroupBarrier = 3,
    GroupBarrier = 4,
    DeviceBarrier = 5,
    Done = 6,
}

impl Doing {
    fn from_u8(v: u8) -> Doing {
        match v {
            0 => Doing::Queued,
            1 => Doing::Running,
            2 => Doing::Turn,
            3 => Doing::SubgroupBarrier,
            4 => Doing::GroupBarrier,
            5 => Doing::DeviceBarrier,
            _ => Doing::Done,
        }
    }

    pub(super) fn barrier(scope: i32) -> Doing {
        match scope {
            FI_XPU_SUBGROUP => Doing::SubgroupBarrier,
            FI_XPU_WORK_GROUP => Doing::GroupBarrier,
            _ => Doing::DeviceBarrier,
        }
    }
}

/// The group call a work item waits in, for the partial-group report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Call {
    Barrier = 0,
    Broadcast = 1,
}

impl Call {
    pub(super) fn name(self) -> &'static str {
        match self {
            Call::Barrier => "fi_xpu_host_barrier",
            Call::Broadcast => "fi_xpu_host_broadcast",
        }
    }
}

struct Item {
    doing: AtomicU8,
    /// `clock_ns` of its last pause in a spin loop (0: never).
    last_pause: AtomicU64,
    /// The call it waits in, and since when (`clock_ns`), while `doing` is
    /// a barrier.
    call: AtomicU8,
    since: AtomicU64,
}

/// What the partial-group check reads of a work item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) doing: Doing,
    pub(super) call: Call,
    /// `clock_ns` when it entered the barrier it is in.
    pub(super) since: u64,
    /// It paused in a spin loop within `recent` of the question.
    pub(super) spinning: bool,
}

pub(super) struct Residency {
    resident: u32,
    num_groups: u32,
    group_size: u32,
    hang: Duration,
    items: Vec<Item>,
    /// Barriers completed and work items returned.
    progress: AtomicU64,
    st: Mutex<State>,
    cv: Condvar,
}

struct State {
    /// Groups below it may run.
    admitted: u32,
    /// Work items of each group that have not returned.
    left: Vec<u32>,
    finished: u32,
    /// The report, once the watch found the kernel stuck.
    hung: bool,
}

impl Residency {
    pub(super) fn new(resident: u32, num_groups: u32, group_size: u32, hang: Duration) -> Self {
        Residency {
            resident,
            num_groups,
            group_size,
            hang,
            items: (0..num_groups * group_size)
                .map(|_| Item {
                    doing: AtomicU8::new(Doing::Queued as u8),
                    last_pause: AtomicU64::new(0),
                    call: AtomicU8::new(Call::Barrier as u8),
                    since: AtomicU64::new(0),
                })
                .collect(),
            progress: AtomicU64::new(0),
            st: Mutex::new(State {
                admitted: resident.min(num_groups),
                left: vec![group_size; num_groups as usize],
                finished: 0,
                hung: false,
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn set(&self, global: u32, d: Doing) {
        self.items[global as usize]
            .doing
            .store(d as u8, Ordering::Relaxed);
    }

    /// Work item `global` starts waiting in `call` at `scope`.
    pub(super) fn wait_in(&self, global: u32, scope: i32, call: Call) {
        let it = &self.items[global as usize];
        it.call.store(call as u8, Ordering::Relaxed);
        it.since.store(clock_ns(), Ordering::Relaxed);
        // After `call` and `since`, so that whoever sees the barrier sees
        // them too (`seen`).
        it.doing
            .store(Doing::barrier(scope) as u8, Ordering::Release);
    }

    /// What work item `global` is doing; `recent` as for `Seen::spinning`.
    pub(super) fn seen(&self, global: u32, recent: Duration) -> Seen {
        let it = &self.items[global as usize];
        let since_pause = clock_ns().saturating_sub(recent.as_nanos() as u64);
        Seen {
            doing: Doing::from_u8(it.doing.load(Ordering::Acquire)),
            call: if it.call.load(Ordering::Relaxed) == Call::Broadcast as u8 {
                Call::Broadcast
            } else {
                Call::Barrier
            },
            since: it.since.load(Ordering::Relaxed),
            spinning: it.last_pause.load(Ordering::Relaxed) > since_pause,
        }
    }

    pub(super) fn paused(&self, global: u32) {
        self.items[global as usize]
            .last_pause
            .store(clock_ns().max(1), Ordering::Relaxed);
    }

    pub(super) fn progressed(&self) {
        self.progress.fetch_add(1, Ordering::Relaxed);
    }

    /// Waits until `group` is resident.
    pub(super) fn enter(&self, group: u32) {
        let mut st = self.lock();
        while group >= st.admitted {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Work item `global` returned; the last of its group makes room for
    /// the next group.
    pub(super) fn leave(&self, global: u32) {
        self.set(global, Doing::Done);
        self.progressed();
        let mut st = self.lock();
        let g = (global / self.group_size) as usize;
        st.left[g] -= 1;
        if st.left[g] == 0 {
            st.finished += 1;
            if st.admitted < self.num_groups {
                st.admitted += 1;
            }
            self.cv.notify_all();
        }
    }

    /// Watches the launch until every group finished, calling `also` at
    /// least every `every` (when given) as well. `true` when it found the
    /// kernel stuck (and reported it).
    pub(super) fn watch(&self, every: Option<Duration>, mut also: impl FnMut()) -> bool {
        let step = (self.hang / 4)
            .min(every.unwrap_or(Duration::MAX))
            .clamp(Duration::from_millis(1), Duration::from_millis(250));
        let mut seen = self.progress.load(Ordering::Relaxed);
        let mut since = Instant::now();
        let mut st = self.lock();
        while st.finished < self.num_groups {
            st = self
                .cv
                .wait_timeout(st, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if every.is_some() {
                drop(st);
                also();
                st = self.lock();
            }
            let now = self.progress.load(Ordering::Relaxed);
            if now != seen {
                seen = now;
                since = Instant::now();
                continue;
            }
            if st.hung || st.admitted >= self.num_groups || since.elapsed() < self.hang {
                continue;
            }
            if let Some(report) = self.stuck(&st) {
                crate::warn!("{report}");
                st.hung = true;
                st.admitted = self.num_groups;
                self.cv.notify_all();
            }
        }
        st.hung
    }

    /// The report when every live work item of the resident groups waits
    /// (blocked, or paused in a spin loop within the hang timeout).
    fn stuck(&self, st: &State) -> Option<String> {
        let recent = clock_ns().saturating_sub(self.hang.as_nanos() as u64);
        let mut groups = Vec::new();
        for g in 0..st.admitted {
            if st.left[g as usize] == 0 {
                continue;
            }
            // [device, work group, subgroup barrier, spinning, waiting for a turn]
            let mut n = [0u32; 5];
            for i in g * self.group_size..(g + 1) * self.group_size {
                let it = &self.items[i as usize];
                let spun = it.last_pause.load(Ordering::Relaxed) > recent;
                match Doing::from_u8(it.doing.load(Ordering::Relaxed)) {
                    Doing::Done => {}
                    Doing::DeviceBarrier => n[0] += 1,
                    Doing::GroupBarrier => n[1] += 1,
                    Doing::SubgroupBarrier => n[2] += 1,
                    // A spinning lane spends most of its time waiting for
                    // its turn back.
                    Doing::Running | Doing::Queued | Doing::Turn if spun => n[3] += 1,
                    Doing::Turn => n[4] += 1,
                    // Running without spinning: it may be getting somewhere.
                    Doing::Running | Doing::Queued => return None,
                }
            }
            let what: Vec<String> = [
                "in a FI_XPU_DEVICE barrier",
                "in a FI_XPU_WORK_GROUP barrier",
                "in a FI_XPU_SUBGROUP barrier",
                "spinning (fi_xpu_arch_pause)",
                "waiting for their subgroup's turn",
            ]
            .iter()
            .zip(n)
            .filter(|(_, c)| *c > 0)
            .map(|(w, c)| format!("{c} {w}"))
            .collect();
            groups.push(format!("group {g}: {}", what.join(", ")));
        }
        if groups.is_empty() {
            return None;
        }
        let waiting = if st.admitted + 1 == self.num_groups {
            format!("group {}", st.admitted)
        } else {
            format!("groups {}-{}", st.admitted, self.num_groups - 1)
        };
        Some(format!(
            "host launch (GPU-like mode, {} of its {} groups resident at once): no resident \
             group made progress for {} ms while {waiting} waited to become resident; on a GPU \
             this kernel hangs here ({}). Letting the waiting groups run; the launch returns \
             -FI_ETIMEDOUT",
            self.resident,
            self.num_groups,
            self.hang.as_millis(),
            groups.join("; ")
        ))
    }
}
