//! The domain object: its listening socket and control thread, opened
//! and stopped.
use super::addr::{boot_id, random_bytes, socket_name};
use super::state::{Inner, State};
use crate::core;
use crate::wire;
use fi_xpu_prov_sdk::{Error, Result};
use std::sync::{Arc, Condvar, Mutex};

pub struct Domain {
    pub inner: Arc<Inner>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Domain {
    pub fn open(host_progress: bool) -> Result<Domain> {
        let agent = if host_progress {
            Some(crate::agent::Agent::start()?)
        } else {
            None
        };
        let mut r = [0u8; 28];
        random_bytes(&mut r)?;
        // Never 0, which peer maps use for "no attested source".
        let nonce = u64::from_le_bytes(r[0..8].try_into().unwrap()).max(1);
        let mut secret = [0u8; 16];
        secret.copy_from_slice(&r[8..24]);
        let pid = std::process::id();
        let listener = wire::listen(&socket_name(pid, nonce)).map_err(|e| {
            core::warn(&format!("cannot listen on the control socket: errno {e}"));
            Error::ADDRINUSE
        })?;
        let wake = fi_xpu_os::wake::eventfd().map_err(|_| Error::MFILE)?;
        let inner = Arc::new(Inner {
            nonce,
            secret,
            boot_id: boot_id(),
            pid,
            listener,
            wake,
            st: Mutex::new(State {
                next_conn_gen: 1,
                next_ctx: 1,
                next_ep: 1,
                // Registration keys carry the generation: from a random
                // start, two domains that register in the same order
                // still hand out different keys, so an access sent to
                // the wrong peer is refused instead of landing.
                next_gen: u32::from_le_bytes(r[24..28].try_into().unwrap()).max(1),
                next_obj: 1,
                ..Default::default()
            }),
            cv: Condvar::new(),
            agent,
        });
        let i2 = inner.clone();
        let thread = std::thread::Builder::new()
            .name("fi_xpu_shm".into())
            .spawn(move || i2.control_loop())
            .map_err(|_| Error::NOMEM)?;
        Ok(Domain {
            inner,
            thread: Some(thread),
        })
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        self.inner.lock().stop = true;
        self.inner.poke();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut st = self.inner.lock();
        st.conns.clear();
        st.regions.clear();
    }
}
