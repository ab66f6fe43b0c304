//! The domain's state: its contexts, connections and regions under one
//! lock, and the counters that name new objects.
use super::words::{FreeList, Slots};
use crate::core::{self, Ctx};
use std::collections::{BTreeMap, HashMap};
use std::os::fd::OwnedFd;
use std::sync::{Condvar, Mutex, MutexGuard};

/// A region this domain shares with its peers.
pub struct Region {
    pub fd: OwnedFd,
    pub offset: u64,
    pub size: u64,
    /// `fd` is a legacy IPC record (`ipc_record`), not the memory.
    pub ipc: bool,
}

/// How this domain maps a region a peer shares.
pub enum PeerKind {
    /// A sealed memfd or a DMA-BUF: mapped by any context.
    File,
    /// A device memory handle (`sealed::is_device_handle`): device
    /// contexts only.
    Device,
    /// A legacy IPC handle of the peer's device memory: device contexts
    /// only, and never in the process that owns the memory (the driver
    /// refuses to open a handle there: a loopback connection leaves the
    /// region unmapped).
    Ipc(Box<[u8; core::IPC_HANDLE]>),
    /// The same, from this process itself.
    OwnIpc,
}

/// A region a peer shares: its descriptor (kept for contexts opened
/// later), range, and how it is mapped.
pub struct PeerRegion {
    pub fd: OwnedFd,
    pub off: u64,
    pub size: u64,
    pub kind: PeerKind,
}

/// One XPU context of this domain.
pub struct CtxSt {
    pub core: Ctx,
    pub dev: usize,
    /// The context's resolve table (`CtxDev::resolve`).
    pub resolve: usize,
    pub heap: usize,
    pub heap_region: u32,
    pub heap_alloc: FreeList,
    /// Device address of this context's writable import of `table`, and
    /// the free space of its staging area (offsets in the table).
    pub stage: usize,
    pub stage_alloc: FreeList,
    /// Header, registration table and staging lanes, read-only to peers
    /// (table.rs).
    pub table: crate::table::Table,
    pub table_region: u32,
    pub mr_slots: Slots,
    pub maps: HashMap<u32, usize>,
    /// Raw AV addresses handed out on this context: (av id, fi_addr) -> record.
    pub peer_addrs: HashMap<(u64, u64), usize>,
    /// Whether the peer behind each of those addresses has its context on
    /// this context's device (`device::same_device_for_peer_pair`).
    pub peer_same_device: HashMap<(u64, u64), bool>,
    /// Which slots of the context's table of raw peer addresses are in use.
    pub peer_slots: Slots,
    /// Imports of departed peers that the memory backend could not retire:
    /// kept until the context closes, so an access under way cannot fault.
    pub retired_imports: Vec<usize>,
    /// Device blocks of closed endpoints and CQs, tombstoned: kept mapped
    /// until the context closes so stale handles never reach freed memory.
    pub retired_dev: Vec<usize>,
}

impl CtxSt {
    pub fn core(&self) -> Ctx {
        self.core
    }
}

/// What an AV entry needs to know of its connection.
#[derive(Clone, Copy, Debug)]
pub struct ConnRef {
    pub cid: u32,
    pub gen: u64,
    pub at_peer: u64,
    pub at_peer_gen: u64,
    /// The key the peer gave this connection, which stamps what is sent
    /// to it.
    pub tx_key: [u64; 2],
}

/// A connection to another domain (either direction).
pub struct Conn {
    pub sock: Option<OwnedFd>,
    /// The handshake is over: the control thread serves the socket.
    pub ready: bool,
    /// This domain's regions went to the peer (the handshake's snapshot,
    /// sent under the state lock): every region shared or withdrawn since
    /// must be told to it, even before the handshake is over.
    pub announced: bool,
    pub client: bool,
    pub remote_nonce: u64,
    /// This id's generation: ids of departed peers are reused, and the
    /// generation tells the connections that held one apart.
    pub gen: u64,
    /// The id and generation the other side gave this connection (clients only).
    pub at_peer: u64,
    pub at_peer_gen: u64,
    /// The secret this connection was authenticated with (clients only).
    pub secret: [u8; 16],
    /// The key this domain drew for this connection: what the peer
    /// stamps its entries with (given to it in WELCOME; never given to
    /// anyone for a client connection, whose peer sends over its own).
    pub rx_key: [u64; 2],
    /// The key the peer gave this connection (clients only).
    pub tx_key: [u64; 2],
    /// The peer's pid as the kernel reported it on connecting.
    pub pid: i32,
    pub regions: HashMap<u32, PeerRegion>,
    pub imports: HashMap<(u64, u32), usize>,
    pub pushed: u64,
    pub acked: u64,
}

impl Conn {
    /// A connection whose handshake has not begun: nothing shared, nothing
    /// imported, no key from the peer.
    pub fn new(sock: OwnedFd, client: bool, gen: u64, rx_key: [u64; 2], pid: i32) -> Conn {
        Conn {
            sock: Some(sock),
            ready: false,
            announced: false,
            client,
            remote_nonce: 0,
            gen,
            at_peer: 0,
            at_peer_gen: 0,
            secret: [0; 16],
            rx_key,
            tx_key: [0; 2],
            pid,
            regions: HashMap::new(),
            imports: HashMap::new(),
            pushed: 0,
            acked: 0,
        }
    }
}

#[derive(Default)]
pub struct State {
    pub regions: BTreeMap<u32, Region>,
    pub ctxs: HashMap<u64, CtxSt>,
    pub conns: HashMap<u32, Conn>,
    /// Sockets of lost connections, closed by the control thread between
    /// two polls: a descriptor number the control thread may be polling
    /// must not be handed out again (to a new peer's socket or a received
    /// region) while it still acts on what that poll returned.
    pub(crate) retired_socks: Vec<OwnedFd>,
    pub(super) next_conn_gen: u64,
    pub(super) next_ctx: u64,
    pub(super) next_ep: u32,
    pub(super) next_gen: u32,
    pub(super) next_obj: u64,
    pub stop: bool,
}

pub struct Inner {
    pub nonce: u64,
    pub secret: [u8; 16],
    pub boot_id: [u8; 16],
    pub pid: u32,
    pub(crate) listener: OwnedFd,
    pub(crate) wake: OwnedFd,
    pub(super) st: Mutex<State>,
    pub(crate) cv: Condvar,
    /// The host progress agent, when the domain asked for one.
    pub agent: Option<crate::agent::Agent>,
}

impl Inner {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the control thread so it re-reads the set of connections.
    pub(super) fn poke(&self) {
        fi_xpu_os::wake::poke(&self.wake);
    }

    pub fn next_ep(&self) -> u32 {
        let mut st = self.lock();
        st.next_ep += 1;
        st.next_ep - 1
    }

    pub fn next_obj(&self) -> u64 {
        let mut st = self.lock();
        st.next_obj += 1;
        st.next_obj - 1
    }

    pub fn next_gen(st: &mut State) -> u32 {
        let g = st.next_gen;
        st.next_gen = st.next_gen.wrapping_add(1).max(1);
        g
    }
}
