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
//!
//! Files: `shape.rs` (a launch's shape and its modes' settings), `team.rs`
//! (what the threads of one launch share), `item.rs` (a thread's position
//! and its launch), `scope.rs` (barriers, broadcasts and pause that device
//! code calls), `clock.rs` (the clock and the spin limit), `weak_ops.rs`
//! (device memory calls in the weak-ordering mode), this one (the launch
//! itself); below them `pool`, `lanes`, `residency`, `partial`, `monitor`
//! and `weak`. No file imports this one: what the others share lives
//! below it.
use crate::error::{Error, Result};
use fi_xpu_abi::*;
use std::sync::Arc;

mod clock;
mod item;
mod lanes;
mod monitor;
mod partial;
mod pool;
mod residency;
mod scope;
mod shape;
mod team;
mod weak;
mod weak_ops;

pub use clock::clock_ns;
pub use item::{current_item, current_item_ptr};
use item::{ITEM, LAUNCH};
use residency::Doing;
pub use scope::{barrier, barrier_for, broadcast, pause};
pub use shape::{GpuEnv, GpuLike, Shape, GPU_DEFAULT_RESIDENT};
use team::Launch;
use weak_ops::weak_sync;
pub use weak_ops::{weak_copy, weak_fence, weak_load, weak_rmw, weak_store};

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
                    p.check(shape, &g.residency, |scope, group, sg| {
                        if scope == FI_XPU_SUBGROUP {
                            g.lanes[(group * shared.per_group + sg) as usize].abandon();
                        } else {
                            shared.groups[group as usize].abandon();
                        }
                    });
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
mod tests;
