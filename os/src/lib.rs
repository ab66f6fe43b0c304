//! The OS calls the core and the providers share, written once over
//! `rustix` (no `unsafe` here): what kind of file a descriptor is and how
//! it is sealed (`file`), Unix control sockets that carry a descriptor
//! (`seqpacket`), and eventfd wake-ups (`wake`). Errors are `rustix`'s
//! `Errno`; callers keep their own error codes.
#![forbid(unsafe_code)]

pub mod file;
pub mod seqpacket;
pub mod wake;

pub use rustix;
pub use rustix::io::Errno;
