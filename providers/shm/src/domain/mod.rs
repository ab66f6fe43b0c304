//! A domain: the listening socket, the control thread, the connections to
//! peer domains and the regions shared with them, and the per-context maps
//! of peer regions that device code reads. One file per concern, each
//! importing only what is below it: `addr` and `words` (addresses, shared
//! words, allocators), `state` (what the domain lock guards), `region`
//! (regions shared both ways, the peer maps, contexts joining and
//! leaving), `conn` (connections: handshake, connect, loss), `listen` (the
//! domain object, its listening socket and control thread).
mod addr;
mod conn;
mod listen;
mod region;
mod state;
mod words;

pub(crate) use addr::ct_eq;
pub use addr::{Addr, ADDR_LEN};
pub use listen::Domain;
pub use region::ipc_record;
pub use state::{ConnRef, CtxSt, Inner};
pub use words::{load, store, FreeList, Slots};
