//! Progress threads: each drains the rings of its endpoints, issues the
//! operations on libfabric, reads libfabric's completions and publishes them
//! to the XPU CQs and counters.
//!
//! After its last activity a thread keeps polling for `Tuning::spin` (a
//! ping-pong partner answers within that; no spin by default on machines
//! too small for it), then blocks in `epoll` on its
//! eventfd (written by host-side posters that find `sleeping` set, and by
//! closers) and on the wait fds of its endpoints' libfabric CQs, after
//! `fi_trywait` said that is safe. libfabric providers with manual progress
//! (tcp, shm) place incoming RMA data only inside the target's calls and
//! signal no fd for it, and a GPU cannot write an eventfd, so the sleep is
//! bounded by `Tuning::poll` unless libfabric progresses on its own, every
//! CQ has a wait fd and every ring is filled by the host.
//!
//! The parts, in the order data flows through them: `worker` (the
//! thread, its endpoints and its sleep) runs a `pass` over each endpoint;
//! the pass hands ring entries to `post` (checked, translated and given
//! to libfabric) and reads libfabric through `complete` (completions and
//! counters published to the XPU CQs and counters, and the time limits of
//! operations libfabric does not finish); both end entries through
//! `requests` (an error completion, or the completion of a put-with-signal
//! once both of its parts ended), which writes to `crate::state` (the
//! endpoint, its requests, the CQs and counters). `gate` guards each
//! libfabric call against closers; `tuning` holds the thread's settings.
//! `complete` posts a put's signal through `post` once its data is
//! delivered. Nothing below imports what is above it. This file declares the parts
//! and names what the domain object uses.
mod complete;
mod gate;
mod pass;
mod post;
mod requests;
mod tuning;
mod worker;

pub use gate::Watch;
pub use tuning::Tuning;
pub use worker::{run, Worker};
