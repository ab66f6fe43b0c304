//! One pool of compiler slots for the whole matrix: every compiler the
//! tests of this binary run takes a slot for as long as it runs, and there
//! are as many slots as CPUs. The tests run as threads of one process and
//! each fans its compiles out, so without the pool two tests of four
//! compiles each would put eight compilers on two CPUs.
use std::process::{Command, Output};
use std::sync::{Condvar, Mutex};

struct Pool {
    free: Mutex<usize>,
    freed: Condvar,
}

static POOL: Pool = Pool {
    free: Mutex::new(usize::MAX),
    freed: Condvar::new(),
};

/// The number of slots: the CPUs this process may use.
pub fn slots() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `n` slots (at most all of them), held until dropped.
struct Held(usize);

fn take(n: usize) -> Held {
    let n = n.clamp(1, slots());
    let mut free = POOL.free.lock().unwrap_or_else(|e| e.into_inner());
    if *free == usize::MAX {
        *free = slots();
    }
    while *free < n {
        free = POOL.freed.wait(free).unwrap_or_else(|e| e.into_inner());
    }
    *free -= n;
    Held(n)
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut free = POOL.free.lock().unwrap_or_else(|e| e.into_inner());
        *free += self.0;
        POOL.freed.notify_all();
    }
}

/// Runs `cmd` to its end in one slot.
pub fn output(cmd: &mut Command) -> std::io::Result<Output> {
    let _slot = take(1);
    cmd.output()
}

/// Runs `run` on every job, as many at a time as there are slots; what
/// the jobs run through `output` waits for a slot of the pool. A job's
/// panic fails the caller (its message is printed as it happens).
pub fn each<J: Sync>(jobs: &[J], run: impl Fn(usize, &J) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..slots().min(jobs.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(job) = jobs.get(i) else {
                    break;
                };
                run(i, job);
            });
        }
    });
}
