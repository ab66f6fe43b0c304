//! The GPU-like mode's check for a group call that only some members reach.
//!
//! A subgroup or work-group call (barrier, broadcast, and every group call
//! of the device API built on them) is collective: on a GPU, a member that
//! returned or went elsewhere leaves the others waiting for ever, with
//! nothing to say why. Here the launching thread looks, while it watches
//! the launch, for a work item that has waited in such a call for longer
//! than the limit (`FI_XPU_HOST_GPU_GROUP_MS`) while members of its
//! instance are elsewhere. It reports the instance once: the call, the
//! members that arrived and those missing with what each is doing. When
//! every missing member has returned from the kernel, nobody can complete
//! the call: the instance is given up (its members' calls return
//! `-FI_ETIMEDOUT`, now and later) and so does the launch. Otherwise the
//! members keep waiting, since the missing ones may still come.
use super::clock::clock_ns;
use super::residency::{Doing, Residency, Seen};
use super::shape::Shape;
use fi_xpu_abi::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub(super) struct Partial {
    limit: Duration,
    /// Instances already reported: (scope, group, subgroup).
    reported: Mutex<HashSet<(i32, u32, u32)>>,
    gave_up: AtomicBool,
}

impl Partial {
    pub(super) fn new(limit: Duration) -> Partial {
        Partial {
            limit,
            reported: Mutex::new(HashSet::new()),
            gave_up: AtomicBool::new(false),
        }
    }

    /// How often the watch should look.
    pub(super) fn every(&self) -> Duration {
        self.limit / 4
    }

    /// Whether an instance was given up (the launch then fails).
    pub(super) fn gave_up(&self) -> bool {
        self.gave_up.load(Ordering::Relaxed)
    }

    /// Looks at every work item once; reports partial instances, and gives
    /// up on the hopeless ones through `abandon(scope, group, subgroup)`.
    pub(super) fn check(
        &self,
        shape: &Shape,
        residency: &Residency,
        abandon: impl Fn(i32, u32, u32),
    ) {
        let now = clock_ns();
        let limit = self.limit.as_nanos() as u64;
        for global in 0..shape.items() {
            let me = residency.seen(global, self.limit);
            let scope = match me.doing {
                Doing::SubgroupBarrier => FI_XPU_SUBGROUP,
                Doing::GroupBarrier => FI_XPU_WORK_GROUP,
                _ => continue,
            };
            if now.saturating_sub(me.since) < limit {
                continue;
            }
            let it = shape.item(global);
            let sg = if scope == FI_XPU_SUBGROUP {
                it.subgroup_id
            } else {
                0
            };
            let key = (scope, it.group_id, sg);
            if self.reported.lock().is_ok_and(|r| r.contains(&key)) {
                continue;
            }
            // Members: (rank in the instance, global id).
            let base = it.group_id * shape.group_size;
            let members: Vec<(u32, u32)> = if scope == FI_XPU_SUBGROUP {
                (0..it.subgroup_items)
                    .map(|l| (l, base + sg * shape.subgroup_size + l))
                    .collect()
            } else {
                (0..shape.group_size).map(|l| (l, base + l)).collect()
            };
            let seen: Vec<(u32, Seen)> = members
                .iter()
                .map(|&(rank, g)| (rank, residency.seen(g, self.limit)))
                .collect();
            let Some(report) = report(scope, &it, me, &seen, self.limit) else {
                continue;
            };
            if let Ok(mut r) = self.reported.lock() {
                r.insert(key);
            }
            crate::warn!("{}", report.text);
            if report.hopeless {
                self.gave_up.store(true, Ordering::Relaxed);
                abandon(scope, it.group_id, sg);
            }
        }
    }
}

struct Report {
    text: String,
    /// Every missing member returned: the call can never complete.
    hopeless: bool,
}

fn scope_name(scope: i32) -> &'static str {
    match scope {
        FI_XPU_SUBGROUP => "FI_XPU_SUBGROUP",
        FI_XPU_WORK_GROUP => "FI_XPU_WORK_GROUP",
        _ => "FI_XPU_DEVICE",
    }
}

/// What a missing member is doing.
fn doing(s: &Seen) -> &'static str {
    match s.doing {
        Doing::Done => "returned from the kernel",
        Doing::SubgroupBarrier => "in a FI_XPU_SUBGROUP call",
        Doing::GroupBarrier => "in a FI_XPU_WORK_GROUP call",
        Doing::DeviceBarrier => "in a FI_XPU_DEVICE call",
        _ if s.spinning => "spinning (fi_xpu_arch_pause)",
        _ => "running",
    }
}

/// `0-2, 5, 7-8`
fn ranges(ids: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            ids[i].to_string()
        } else {
            format!("{}-{}", ids[i], ids[j])
        });
        i = j + 1;
    }
    out.join(", ")
}

/// The report for the instance of `scope` around the work item `it`, which
/// waits in `me`; `None` when nobody is missing (the call is completing).
fn report(
    scope: i32,
    it: &fi_xpu_host_item,
    me: Seen,
    members: &[(u32, Seen)],
    limit: Duration,
) -> Option<Report> {
    let arrived: Vec<u32> = members
        .iter()
        .filter(|(_, s)| s.doing == me.doing)
        .map(|(r, _)| *r)
        .collect();
    if arrived.len() == members.len() {
        return None;
    }
    // Missing members grouped by what they do, in the order first seen.
    let mut missing: Vec<(&'static str, Vec<u32>)> = Vec::new();
    for (r, s) in members.iter().filter(|(_, s)| s.doing != me.doing) {
        let what = doing(s);
        match missing.iter_mut().find(|(w, _)| *w == what) {
            Some((_, v)) => v.push(*r),
            None => missing.push((what, vec![*r])),
        }
    }
    let hopeless = missing
        .iter()
        .all(|(w, _)| *w == "returned from the kernel");
    let (instance, one, many) = if scope == FI_XPU_SUBGROUP {
        (
            format!("subgroup {} of work group {}", it.subgroup_id, it.group_id),
            "lane",
            "lanes",
        )
    } else {
        (
            format!("work group {}", it.group_id),
            "work item",
            "work items",
        )
    };
    let who = |v: &[u32]| if v.len() == 1 { one } else { many };
    let missing: Vec<String> = missing
        .iter()
        .map(|(w, v)| format!("{} {} {w}", who(v), ranges(v)))
        .collect();
    let then = if hopeless {
        "The members that arrived return -FI_ETIMEDOUT from it, and so does the launch"
    } else {
        "Still waiting for them"
    };
    Some(Report {
        text: format!(
            "host launch (GPU-like mode): {}({}) in {instance} waited {} ms for members that \
             did not come: {} {} of {} arrived; missing: {}; on a GPU this kernel hangs \
             here. {then}",
            me.call.name(),
            scope_name(scope),
            limit.as_millis(),
            who(&arrived),
            ranges(&arrived),
            members.len(),
            missing.join("; "),
        ),
        hopeless,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launcher::residency::Call;

    #[test]
    fn ranges_are_compact() {
        assert_eq!(ranges(&[0, 1, 2, 5, 7, 8]), "0-2, 5, 7-8");
        assert_eq!(ranges(&[3]), "3");
        assert_eq!(ranges(&[]), "");
    }

    #[test]
    fn a_member_that_returned_makes_the_call_hopeless() {
        let at = |doing| Seen {
            doing,
            call: Call::Broadcast,
            since: 0,
            spinning: false,
        };
        let it = fi_xpu_host_item {
            local_id: 0,
            group_size: 4,
            group_id: 1,
            num_groups: 2,
            lane_id: 0,
            subgroup_id: 0,
            subgroup_size: 4,
            subgroup_items: 4,
        };
        let b = at(Doing::GroupBarrier);
        let seen = |members: &[(u32, Seen)]| {
            report(FI_XPU_WORK_GROUP, &it, b, members, Duration::from_millis(7))
        };
        let r = seen(&[
            (0, b),
            (1, at(Doing::Done)),
            (2, b),
            (3, at(Doing::Running)),
        ])
        .unwrap();
        assert!(!r.hopeless);
        assert_eq!(
            r.text,
            "host launch (GPU-like mode): fi_xpu_host_broadcast(FI_XPU_WORK_GROUP) in work \
             group 1 waited 7 ms for members that did not come: work items 0, 2 of 4 arrived; \
             missing: work item 1 returned from the kernel; work item 3 running; on a GPU \
             this kernel hangs here. Still waiting for them"
        );
        let r = seen(&[(0, b), (1, at(Doing::Done)), (2, b), (3, b)]).unwrap();
        assert!(r.hopeless);
        assert!(seen(&[(0, b), (1, b), (2, b), (3, b)]).is_none());
    }
}
