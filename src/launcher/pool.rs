//! The threads work items run on, kept between launches.
//!
//! A launch takes idle threads (starting more when there are too few),
//! gives each one work item and waits until all have returned; a thread is
//! idle again as soon as its work item returns. A launch then costs
//! wake-ups instead of creating and joining a thread per work item. A
//! thread left idle for `IDLE` ends. A process forked from one with idle
//! threads starts with none: they do not exist in the child.
use super::clock::SPIN;
use super::monitor::Monitor;
use crate::error::{Error, Result};
use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

/// How long a thread waits for a work item before it ends.
const IDLE: Duration = Duration::from_secs(2);

/// A work item: runs once, on a pooled thread.
pub(super) type Body<'a> = Box<dyn FnOnce() + Send + 'a>;

struct Job {
    body: Body<'static>,
    /// In the launching thread's frame: the thread's last use of it is the
    /// unlock after counting its body down, so the launching thread, which
    /// returns only after seeing the count at 0, is the one to drop it.
    done: &'static Monitor<Done>,
}

/// A launch's count of work items still running, and the first panic.
struct Done {
    left: usize,
    panic: Option<Box<dyn Any + Send>>,
}

/// Where one thread receives its next work item.
type Mailbox = Arc<Monitor<Option<Job>>>;

struct Idle {
    /// The process the threads belong to (0 before the first launch).
    pid: u32,
    threads: Vec<Mailbox>,
}

static IDLE_THREADS: Monitor<Idle> = Monitor::new(Idle {
    pid: 0,
    threads: Vec::new(),
});

/// Runs every body on a thread of its own and returns when all have
/// returned, with what `meanwhile` returned (it runs on the caller while
/// the bodies run). A body's panic is resumed here once all have returned.
/// `-FI_EAGAIN` when threads cannot be started: then no body has run.
pub(super) fn run<R>(bodies: Vec<Body<'_>>, meanwhile: impl FnOnce() -> R) -> Result<R> {
    let threads = take(bodies.len())?;
    let done = Monitor::new(Done {
        left: bodies.len(),
        panic: None,
    });
    // SAFETY: only the lifetime changes. `done` lives until this function
    // returns, which it does not (nor unwinds) before `left` is 0, and a
    // thread's last use of it is the unlock after its count down.
    let done_ref = unsafe { std::mem::transmute::<&Monitor<Done>, &'static Monitor<Done>>(&done) };
    for (mailbox, body) in threads.iter().zip(bodies) {
        // SAFETY: only the lifetime changes. The body may borrow from the
        // caller's frame; this function neither returns nor unwinds before
        // `left` is 0, and a thread counts its body down only after the
        // body has returned (or unwound) and been dropped.
        let body = unsafe { std::mem::transmute::<Body<'_>, Body<'static>>(body) };
        *mailbox.lock() = Some(Job {
            body,
            done: done_ref,
        });
        mailbox.notify_all();
    }
    let out = panic::catch_unwind(AssertUnwindSafe(meanwhile));
    let mut d = done.lock();
    let spin = Instant::now();
    while d.left > 0 && spin.elapsed() < SPIN {
        drop(d);
        std::thread::yield_now();
        d = done.lock();
    }
    while d.left > 0 {
        d.wait();
    }
    if let Some(p) = d.panic.take() {
        drop(d);
        panic::resume_unwind(p);
    }
    drop(d);
    match out {
        Ok(r) => Ok(r),
        Err(p) => panic::resume_unwind(p),
    }
}

/// `n` threads waiting for a work item each: idle ones first (the most
/// recently idle), new ones for the rest.
fn take(n: usize) -> Result<Vec<Mailbox>> {
    static AT_FORK: Once = Once::new();
    // SAFETY: the handlers only lock and unlock the idle list's mutex.
    AT_FORK.call_once(|| unsafe {
        libc::pthread_atfork(Some(before_fork), Some(after_fork), Some(after_fork));
    });
    let mut got = {
        let mut idle = IDLE_THREADS.lock();
        let pid = std::process::id();
        if idle.pid != pid {
            // A forked child: its parent's threads are not here.
            idle.pid = pid;
            idle.threads.clear();
        }
        let keep = idle.threads.len().saturating_sub(n);
        idle.threads.split_off(keep)
    };
    while got.len() < n {
        match start() {
            Ok(m) => got.push(m),
            Err(e) => {
                crate::warn!("host launch: cannot start thread {}: {e}", got.len());
                idle_again(got);
                return Err(Error::AGAIN);
            }
        }
    }
    Ok(got)
}

/// A thread that forks holds the idle list's lock across the fork, so that
/// the child never starts with it held by a thread it does not have.
extern "C" fn before_fork() {
    std::mem::forget(IDLE_THREADS.lock());
}

extern "C" fn after_fork() {
    // SAFETY: `before_fork` locked it on this thread and forgot the guard.
    unsafe { IDLE_THREADS.unlock_forgotten() };
}

fn idle_again(threads: Vec<Mailbox>) {
    let mut idle = IDLE_THREADS.lock();
    if idle.pid == std::process::id() {
        idle.threads.extend(threads);
    }
}

fn start() -> std::io::Result<Mailbox> {
    let mailbox: Mailbox = Arc::new(Monitor::new(None));
    let mine = Arc::clone(&mailbox);
    std::thread::Builder::new()
        .name("fi_xpu worker".into())
        .spawn(move || serve(&mine))?;
    Ok(mailbox)
}

/// A pooled thread's life: work items until it stays idle for `IDLE`.
fn serve(mailbox: &Mailbox) {
    while let Some(job) = next(mailbox) {
        let body = job.body;
        let caught = panic::catch_unwind(AssertUnwindSafe(body)).err();
        // Idle before the launch can return, so that the next launch finds
        // this thread instead of starting another.
        idle_again(vec![Arc::clone(mailbox)]);
        let mut d = job.done.lock();
        d.left -= 1;
        if let Some(p) = caught {
            d.panic.get_or_insert(p);
        }
        if d.left == 0 {
            job.done.notify_all();
        }
    }
}

/// The next work item, or `None` when the thread has been idle for `IDLE`
/// and no launch took it meanwhile (then it is off the idle list).
fn next(mailbox: &Mailbox) -> Option<Job> {
    let spin = Instant::now();
    while spin.elapsed() < SPIN {
        if let Some(job) = mailbox.lock().take() {
            return Some(job);
        }
        std::thread::yield_now();
    }
    loop {
        {
            let mut slot = mailbox.lock();
            if let Some(job) = slot.take() {
                return Some(job);
            }
            if !slot.wait_for(IDLE) {
                continue;
            }
            if let Some(job) = slot.take() {
                return Some(job);
            }
        }
        let mut idle = IDLE_THREADS.lock();
        if let Some(i) = idle.threads.iter().position(|m| Arc::ptr_eq(m, mailbox)) {
            idle.threads.swap_remove(i);
            return None;
        }
        // A launch took this thread: its work item is on the way.
    }
}
