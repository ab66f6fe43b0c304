//! What the host objects own and the progress threads read: the domain's
//! libfabric handles and registrations, the AV's live addresses, the XPU
//! CQ and counter blocks, the endpoint (its ring, its libfabric objects and
//! the progress thread's state of it) and the requests libfabric holds.
//!
//! This is the layer between the objects (`objects/`, which make and close
//! these) and the proxy (`proxy/`, which drains the rings and publishes
//! completions): both import it, it imports neither. Each file is one piece
//! of state; this file declares them and nothing else.
pub mod av;
pub mod block;
pub mod cntr;
pub mod cq;
pub mod dom;
pub mod ep;
pub mod req;
pub mod tables;
pub mod word;
