//! The group calls of device code on the host XPU: barriers and
//! broadcasts at each scope (through the launch's `Team`s, or its lanes in
//! the GPU-like mode), and pause.
use super::item::{current_item, LAUNCH};
use super::lanes::Lanes;
use super::residency::{Call, Doing};
use super::team::Team;
use super::weak_ops::weak_sync;
use crate::error::{Error, Result};
use fi_xpu_abi::*;
use std::time::{Duration, Instant};

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
