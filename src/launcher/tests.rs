use super::*;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

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
    assert_eq!(current_item(), fi_xpu_host_item::single());
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
    assert_eq!(current_item(), fi_xpu_host_item::single());
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
    assert_eq!(current_item(), fi_xpu_host_item::single());
}
