//! What the threads of one launch share: a `Team` (barrier and broadcast
//! slot) per scope instance, and the GPU-like mode's state.
use super::clock::SPIN;
use super::lanes::Lanes;
use super::residency::Residency;
use super::shape::Shape;
use super::{partial, weak};
use crate::error::{Error, Result};
use fi_xpu_abi::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The threads of one scope instance: a barrier and a slot for broadcasts.
///
/// The barrier counts arrivals per generation; a member that gives up
/// waiting (`wait_for`) takes its arrival back, so the team is as before for
/// the next call and a member that arrives late waits (and gives up) alone.
pub(super) struct Team {
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
    pub(super) fn new(n: u32) -> Team {
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

    pub(super) fn wait(&self) {
        // Without a limit the wait only ends when everyone arrived.
        let _ = self.wait_for(None);
    }

    /// Waits for every member, for at most `limit`. `Err(arrived)` when the
    /// time ran out: how many members (the caller included) were there.
    pub(super) fn wait_for(&self, limit: Option<Duration>) -> std::result::Result<(), u32> {
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
    pub(super) fn broadcast(&self, leader: bool, v: u64) -> std::result::Result<u64, u32> {
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
    pub(super) fn abandon(&self) {
        self.lock().broken = true;
        self.cv.notify_all();
    }
}

/// Everything the threads of one launch share.
pub(super) struct Launch {
    pub(super) device: Team,
    pub(super) groups: Vec<Team>,
    /// `subgroups[group * per_group + subgroup]`
    pub(super) subgroups: Vec<Team>,
    pub(super) per_group: u32,
    pub(super) gpu: Option<Gpu>,
    /// The weak-ordering mode's device overlay.
    pub(super) weak: Option<weak::Device>,
}

/// The GPU-like mode's state of a launch.
pub(super) struct Gpu {
    pub(super) residency: Residency,
    /// `lanes[group * per_group + subgroup]`, in place of `subgroups`.
    pub(super) lanes: Vec<Lanes>,
    /// The watch for group calls that only some members reach.
    pub(super) partial: Option<partial::Partial>,
}

impl Launch {
    pub(super) fn new(shape: &Shape) -> Launch {
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

    pub(super) fn lanes(&self, it: &fi_xpu_host_item) -> Option<&Lanes> {
        let i = (it.group_id * self.per_group + it.subgroup_id) as usize;
        self.gpu.as_ref().map(|g| &g.lanes[i])
    }

    /// The team of `scope` the work item `it` belongs to, and whether it
    /// leads it; `None` for work-item scope.
    pub(super) fn team(&self, it: &fi_xpu_host_item, scope: i32) -> Result<Option<(&Team, bool)>> {
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
