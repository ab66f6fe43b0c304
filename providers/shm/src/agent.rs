//! The host progress agent: an optional thread per domain that runs the
//! device-side progress of the domain's enabled endpoints, so that what
//! needs the initiator's device code to move (streamed sends refilling
//! their staging lanes, rendezvous sends reporting their completion,
//! receives matched to arrived messages) moves on while no kernel runs.
//! Enabled by `FI_XPU_DOMAIN_HOST_PROGRESS` in the domain attributes or
//! `FI_XPU_SHM_HOST_PROGRESS=1`; see fi_xpu_shm(7), PROGRESS.
use fi_xpu_prov_sdk::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

extern "C" {
    /// `fi_xpu_shm_progress` of the device header (agent/agent.c).
    fn fi_xpu_i_shm_agent_progress(ep_dev: u64);
}

/// Pause between two passes over the endpoints: the agent polls (a GPU
/// cannot wake a host thread), so this bounds both its CPU use and the
/// latency it adds to a transfer it carries.
const PASS_INTERVAL: Duration = Duration::from_micros(100);

#[derive(Default)]
struct Shared {
    /// Device blocks (`EpDev`) of the enabled endpoints.
    eps: Mutex<Vec<usize>>,
    stop: AtomicBool,
}

pub struct Agent {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Agent {
    pub fn start() -> Result<Agent> {
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fi_xpu-shm-agent".into())
            .spawn(move || run(&s))
            .map_err(|_| Error::AGAIN)?;
        Ok(Agent {
            shared,
            thread: Some(thread),
        })
    }

    /// Drives the endpoint whose device block is at `dev` from now on.
    pub fn add(&self, dev: usize) {
        let mut eps = self.shared.eps.lock().unwrap_or_else(|p| p.into_inner());
        if !eps.contains(&dev) {
            eps.push(dev);
        }
    }

    /// Stops driving `dev`; when this returns the agent is not inside its
    /// progress and never will be again, so its memory may go.
    pub fn remove(&self, dev: usize) {
        self.shared
            .eps
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&e| e != dev);
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(s: &Shared) {
    while !s.stop.load(Ordering::Acquire) {
        {
            // The list stays locked for the pass: `remove` waits for it.
            let eps = s.eps.lock().unwrap_or_else(|p| p.into_inner());
            for &e in eps.iter() {
                // SAFETY: `e` is the device block of an enabled endpoint,
                // live until `remove` (which cannot run during this pass);
                // progress takes the endpoint's own lock, shared with
                // device code, and validates what peers can write.
                unsafe { fi_xpu_i_shm_agent_progress(e as u64) };
            }
        }
        std::thread::sleep(PASS_INTERVAL);
    }
}
