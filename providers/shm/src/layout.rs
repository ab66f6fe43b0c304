//! Memory layouts shared with the shm provider's device code. Every struct
//! here is `struct fi_xpu_shm_<name>` and every constant `FI_XPU_SHM_<NAME>`
//! in `include/fi_xpu/shm/shm__types.h`, which is generated from this file
//! (`cargo xtask headers`; `tests/headers.rs` fails when it is stale), so C
//! has no copy of its own; the test below still compiles the header and
//! compares it field by field.
//!
//! "Heap" structs live in a context's shared heap, which every connected peer
//! maps; "local" structs are device-visible but never shared, so that the
//! pointers the owner follows cannot be changed by another process.

/// Regions a domain can share (heaps plus registrations).
pub const MAX_REGIONS: usize = 256;
/// Connections a domain can hold.
pub const MAX_CONNS: usize = 64;
/// Raw peer addresses (`fi_xpu_av_lookup` results) per context.
pub const PEER_ADDRS: usize = 1024;
/// Registration slots per context heap.
pub const MR_SLOTS: usize = 1024;
/// Inbox slots per endpoint.
pub const INBOX_SLOTS: u64 = 64;
/// Bytes per inbox slot, header included.
pub const SLOT_SIZE: u64 = 4096;
/// Posted receives and outstanding rendezvous sends per endpoint.
pub const MAX_POSTED: usize = 64;
/// Staging lanes per endpoint: large sends from unregistered memory stream
/// through one lane each, so this many may be under way at once.
pub const STAGE_LANES: u64 = 4;
/// Bytes per staging lane (a byte ring the receiver drains).
pub const STAGE_LANE_SIZE: u64 = 64 * 1024;
/// Bytes of an endpoint's staging lanes.
pub const STAGE_BYTES: u64 = STAGE_LANES * STAGE_LANE_SIZE;
/// Bytes of an endpoint's `EpInfo`, which follows its lanes.
pub const INFO_BYTES: u64 = std::mem::size_of::<EpInfo>() as u64;
/// Where the staging area starts in a context's table region: after the
/// header and the registration table.
pub const STAGE_START: u64 = 64 + MR_SLOTS as u64 * 64;
/// Endpoints whose receive side a CQ drives when it is read.
pub const MAX_PROGRESS: usize = 8;

pub const HEAP_MAGIC: u64 = 0x6669_7870_7568_6570; // "fixpuhep"
pub const EP_MAGIC: u64 = 0x6669_7870_7565_7062; // "fixpuepb"

/// Start of every context heap.
#[repr(C)]
pub struct HeapHdr {
    pub magic: u64,
    pub size: u64,
    pub mr_off: u64,
    pub mr_slots: u64,
    /// In a context heap's header: how many events that may leave one of
    /// the context's CQs non-empty device code published (entries and
    /// overflows of CQ rings, inbox messages, endpoints turned busy); CQ
    /// polls compare it with `CqDev::bseen`. Peers ring it too.
    pub bell: u64,
    pub _pad: [u64; 3],
}

/// One registration as peers see it. `gen` is 0 while the slot is free; a
/// key carries the generation it was issued with.
#[repr(C)]
pub struct MrEntry {
    pub gen: u64,
    pub base: u64,
    pub len: u64,
    pub access: u64,
    pub region: u64,
    pub key: u64,
    pub _pad: [u64; 2],
}

/// Completion ring header (private to the CQ's process, or in the heap for
/// the ring that takes remote completions); `size` entries of `Cqe` follow
/// at +192.
#[repr(C)]
pub struct CqRing {
    pub head: u64,
    pub _p0: [u64; 7],
    pub tail: u64,
    pub _p1: [u64; 7],
    pub size: u64,
    pub format: u64,
    /// Completions that found the ring full.
    pub overflow: u64,
    /// Of those, how many an `FI_EOVERRUN` error entry has reported.
    pub overflow_seen: u64,
    pub _p2: [u64; 4],
}
pub const CQ_HDR: u64 = 192;

/// One completion; `seq` is written last (release) and equals the claimed
/// position plus one.
#[repr(C)]
pub struct Cqe {
    pub seq: u64,
    pub flags: u64,
    pub context: u64,
    pub len: u64,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    pub err: i64,
    pub olen: u64,
    pub src_nonce: u64,
    pub src_ep: u64,
    /// Non-zero for an error entry.
    pub is_err: u64,
    /// Entries of a ring that takes remote completions: the id the
    /// receiver gave the sender's connection, and the sender's stamp over
    /// the entry (see `MsgHdr::stamp`). The receiver takes the source from
    /// that connection, never from `src_nonce`.
    pub src_conn: u64,
    pub stamp: u64,
}

/// Counter words: a counter's own block (private memory, or host memory
/// for a host counter), and for a counter bound for remote events a second
/// block in the shared heap that peers increment.
#[repr(C)]
pub struct Cntr {
    pub value: u64,
    pub err: u64,
    /// Validity word (`fi_xpu_handle_word`) of the counter's own block; 0
    /// in a heap block.
    pub magic: u64,
    pub _pad: [u64; 5],
}

/// Endpoint information (table region, which peers map read-only): what
/// peers need to deliver to this endpoint. Only its owner writes it.
#[repr(C)]
pub struct EpInfo {
    pub magic: u64,
    pub nonce: u64,
    pub ep_id: u64,
    pub caps: u64,
    /// Heap offsets (0: none) of what remote operations complete into:
    /// the remote-completion ring of the receive CQ, counters.
    pub rx_cq: u64,
    pub rem_write_cntr: u64,
    pub rem_read_cntr: u64,
    /// The heap's region id, and the heap offset of the endpoint block.
    pub heap_region: u64,
    pub block_off: u64,
    /// The device the endpoint's context is on (`device::DeviceId`).
    pub device: [u64; 3],
    pub _pad: [u64; 4],
}

/// Endpoint block (heap): the inbox's head, which senders move, and tail,
/// which the owner moves; `INBOX_SLOTS` slots of `SLOT_SIZE` follow.
#[repr(C)]
pub struct EpBlock {
    pub head: u64,
    pub _p1: [u64; 7],
    pub tail: u64,
    pub _p2: [u64; 7],
}

/// Per-connection map of a peer's regions into this context (local).
#[repr(C)]
pub struct PeerMap {
    /// 1 alive, 2 the peer is gone.
    pub state: u64,
    /// Generation of the connection id this map serves: messages carry
    /// the generation they were sent under, so a late one from a departed
    /// peer never resolves against the peer that reused its id.
    pub gen: u64,
    pub base: [u64; MAX_REGIONS],
    pub size: [u64; MAX_REGIONS],
    /// The peer's domain nonce as this domain attested it (0: not
    /// attested): what entries arriving through this connection are
    /// attributed to.
    pub nonce: u64,
    /// The key this domain gave the peer for this connection alone: it
    /// stamps every inbox entry and remote completion it sends here.
    pub key: [u64; 2],
    /// The same of the generation before `gen`: a departed peer's entries
    /// still in an inbox or ring are attributed to it after its id was
    /// given to another.
    pub prev_gen: u64,
    pub prev_nonce: u64,
    pub prev_key: [u64; 2],
    /// Regions mapped read-only (bit `rid % 64` of word `rid / 64`): no
    /// store is ever aimed at them.
    pub ro: [u64; RO_WORDS],
    /// Moves (release) after every change that can make a resolution
    /// through this map stale: a region withdrawn, the peer gone, the id
    /// given to another peer. A resolve entry (`ResolveEnt`) holds the
    /// value it was made under and is used only while the two agree.
    pub epoch: u64,
}
/// Words of `PeerMap::ro`: one bit per region.
pub const RO_WORDS: usize = MAX_REGIONS / 64;
pub const PEER_ALIVE: u64 = 1;
pub const PEER_DEAD: u64 = 2;

/// What a raw AV address points to (local).
#[repr(C)]
pub struct PeerAddr {
    pub map: u64,
    /// Where the peer endpoint's `EpInfo` lies: region and offset.
    pub info_region: u64,
    pub info_off: u64,
    pub nonce: u64,
    pub ep_id: u64,
    /// The id this domain's connection has at the peer, and its generation.
    pub conn_at_peer: u64,
    pub conn_gen: u64,
    /// Generation of `map` this record is valid for.
    pub map_gen: u64,
    /// The key the peer gave this domain's connection: stamps what is sent
    /// to it.
    pub key: [u64; 2],
    /// The memory scope of what device code writes into the peer (data,
    /// inbox slots, signal words): `SCOPE_DEV` only when both contexts
    /// are on one device with their heaps in its memory
    /// (`device::scope_for_peer_pair`); `SCOPE_SYS` otherwise.
    pub scope: u64,
}

/// Scope words of the shared layouts (`PeerAddr::scope`); 0, what a zeroed
/// record holds, is system scope.
pub const SCOPE_SYS: u64 = 0;
pub const SCOPE_DEV: u64 = 1;

/// A context's device-visible root (local).
#[repr(C)]
pub struct CtxDev {
    pub heap_base: u64,
    pub heap_region: u64,
    pub nonce: u64,
    /// The context's table of `PEER_ADDRS` raw peer addresses (`PeerAddr`):
    /// device code follows a raw address only if it points into it.
    pub peer_addrs: u64,
    pub maps: [u64; MAX_CONNS],
    /// The context's abort word (`fi_xpu_ctx_abort`), 0 when none.
    pub abort: u64,
    /// The context's resolve table: `RESOLVE_SLOTS` entries (`ResolveEnt`)
    /// in memory of the context that only its kernels touch (device
    /// memory on a device context), zeroed by the host at open.
    pub resolve: u64,
}

/// Entries of a context's resolve table.
pub const RESOLVE_SLOTS: usize = 256;

/// One entry of a context's resolve table, written by device code: what
/// an RMA to (raw peer address, key) resolved to, so that the next one
/// costs the checks that can change and the copy. Written under `seq`
/// (odd while a writer fills it, even and non-zero once complete); the
/// raw address's record as it was (`map`, `map_gen`, `info_*`), the
/// key (whose low 32 bits are the registration's generation), the peer
/// map's `epoch`, the address of the registration's generation word in
/// the peer's table, where the registration's base is mapped here, its
/// base, length and the accesses checked, and the peer endpoint's
/// information and heap.
#[allow(dead_code)]
#[repr(C)]
pub struct ResolveEnt {
    pub seq: u64,
    pub pa: u64,
    pub map: u64,
    pub map_gen: u64,
    pub info_region: u64,
    pub info_off: u64,
    pub key: u64,
    pub epoch: u64,
    pub genp: u64,
    pub mem: u64,
    pub base: u64,
    pub len: u64,
    pub access: u64,
    pub heap: u64,
    pub heap_size: u64,
    pub info: u64,
}

/// A posted receive; once matched to a streamed message it stays busy
/// (with the message's length, tag, data and source copied in) until the
/// last byte arrived. Only device code touches it.
#[allow(dead_code)]
#[repr(C)]
pub struct Posted {
    pub state: u64,
    pub buf: u64,
    pub len: u64,
    pub tag: u64,
    pub ignore: u64,
    pub context: u64,
    pub flags: u64,
    pub seq: u64,
    pub slot: u64,
    pub src_nonce: u64,
    pub src_ep: u64,
    pub mlen: u64,
    pub done: u64,
    pub stage: u64,
    pub data: u64,
    /// The sender's peer map, checked for liveness (device code only).
    pub map: u64,
    /// Streamed: the message's inbox position, and the stamp of the
    /// consumed position last published.
    pub pos: u64,
    pub cst: u64,
}

/// An outstanding rendezvous or streamed send; `map` and `gen` name the
/// receiver's connection, checked for liveness. Only device code touches it.
#[allow(dead_code)]
#[repr(C)]
pub struct Rdv {
    pub slot: u64,
    pub context: u64,
    pub len: u64,
    pub flags: u64,
    pub buf: u64,
    pub sent: u64,
    pub lane: u64,
    pub kind: u64,
    pub map: u64,
    pub gen: u64,
    /// The receiver's inbox position and endpoint id, the key the receiver
    /// gave this domain's connection, and the receiver's last consumed
    /// position that carried its stamp (`fi_xpu_shm_flow_stamp`): only the
    /// receiver's stamped word ends the send or frees its lane.
    pub pos: u64,
    pub rep: u64,
    pub key: [u64; 2],
    pub acked: u64,
    /// The receiver's stamp last accepted; the stamp of `sent` published.
    pub cseen: u64,
    pub pst: u64,
}

/// Endpoint device state (local); `fid_xpu.prov_ctx` points here.
#[repr(C)]
pub struct EpDev {
    pub block: u64,
    pub ctx: u64,
    pub nonce: u64,
    pub ep_id: u64,
    pub caps: u64,
    pub tx_cq: u64,
    pub rx_cq: u64,
    /// send, recv, read, write, remote read, remote write (local counter pointers)
    pub cntr: [u64; 6],
    pub av_tab: u64,
    pub av_count: u64,
    pub lock: u64,
    pub post_seq: u64,
    /// Busy staging lanes (bit mask).
    pub lanes: u64,
    /// Validity word (`fi_xpu_handle_word`), checked by device code.
    pub magic: u64,
    /// Testing only: nanoseconds between the pieces of a put-with-signal's
    /// data, placed last piece first (`test_delay_us`); 0 otherwise.
    pub test_delay_ns: u64,
    /// Its staging lanes (`STAGE_LANES` of `STAGE_LANE_SIZE` bytes): where
    /// this process writes them, and the region and offset peers read
    /// them at (the context's table region, which peers map read-only).
    pub stage: u64,
    pub stage_region: u64,
    pub stage_off: u64,
    /// Set by device code when a rendezvous or streamed send starts or a
    /// posted receive turns active, cleared by its progress when none is
    /// left: with the inbox empty, a CQ poll skips progress while it is 0.
    pub busy: u64,
    pub posted: [Posted; MAX_POSTED],
    pub rdv: [Rdv; MAX_POSTED],
}

/// CQ device state (local); `fid_xpu.prov_ctx` points here. `ring` is
/// private; `rring` (0 until the CQ takes remote events) is the ring of
/// `size` entries in the shared heap that peers push remote completions
/// into, drained by readers from position `rtail`; `rseen` is how many of
/// its overflows have been carried over.
#[repr(C)]
pub struct CqDev {
    pub ring: u64,
    pub size: u64,
    pub format: u64,
    pub timeout_ms: i64,
    pub nprog: u64,
    pub prog: [u64; MAX_PROGRESS],
    pub rring: u64,
    pub rtail: u64,
    pub rseen: u64,
    /// Validity word (`fi_xpu_handle_word`), checked by device code.
    pub magic: u64,
    /// The context's abort word (`fi_xpu_ctx_abort`), 0 when none.
    pub abort: u64,
    /// The context's device root (`CtxDev`), whose peer maps attribute
    /// remote completions; 0 for a host CQ.
    pub ctx: u64,
    /// Heap offset of `rring`, which stamps name.
    pub roff: u64,
    /// The context heap's `HeapHdr::bell` (0: a host CQ), and its value
    /// when a device read last found the CQ idle; `BSEEN_NONE` makes the
    /// next poll read in full.
    pub bell: u64,
    pub bseen: u64,
}

/// `CqDev::bseen` that no bell value matches.
pub const BSEEN_NONE: u64 = u64::MAX;

/// Counter device state (local); `fid_xpu.prov_ctx` points here. `cntr`
/// is the counter's own `Cntr` block, private to its process, which its
/// own events update; `rcntr` (0 until the counter is bound for remote
/// events) is the `Cntr` block in the shared heap that peers' remote
/// events increment. The counter is the sum of the two.
#[repr(C)]
pub struct CntrDev {
    /// Validity word (`fi_xpu_handle_word`), checked by device code.
    pub magic: u64,
    pub cntr: u64,
    /// The context's abort word (`fi_xpu_ctx_abort`), 0 when none.
    pub abort: u64,
    pub rcntr: u64,
    pub _pad: [u64; 4],
}

/// One AV entry as the device sees it (for `readfrom`).
#[repr(C)]
pub struct AvEnt {
    pub nonce: u64,
    pub ep_id: u64,
}

/// Raw MR descriptor (`fi_xpu_mr_desc`); written field by field in mr.rs.
#[allow(dead_code)]
#[repr(C)]
pub struct MrDesc {
    pub region: u64,
    pub base: u64,
    pub len: u64,
    pub key: u64,
}

/// Inbox slot header; the payload follows at +128. Only device code
/// touches it; the host sizes the inbox with `SLOT_SIZE`.
#[allow(dead_code)]
#[repr(C)]
pub struct MsgHdr {
    pub seq: u64,
    pub state: u64,
    pub len: u64,
    pub tag: u64,
    pub data: u64,
    pub flags: u64,
    /// Rendezvous and streamed messages: the receiver's stamp over
    /// `consumed` (`fi_xpu_shm_flow_stamp`).
    pub cstamp: u64,
    pub src_ep: u64,
    pub src_conn: u64,
    pub src_region: u64,
    pub src_off: u64,
    /// Streamed messages: bytes the sender has staged, bytes the receiver
    /// has taken (or, for a rendezvous, the whole length once it is taken).
    pub produced: u64,
    pub consumed: u64,
    pub src_gen: u64,
    /// SipHash-1-3, under the key of the connection `src_conn` names, of
    /// the inbox position, the receiving endpoint and what says where the
    /// data is (`fi_xpu_shm_stamp`): only that connection's peer can make
    /// it, so the receiver attributes the entry to that peer or refuses it.
    pub stamp: u64,
    /// Eager messages: SipHash-1-3 of the inbox position and the bytes
    /// (`fi_xpu_shm_bytes_stamp`), checked by the receiver over its copy;
    /// streamed messages: the sender's stamp over `produced`.
    pub pstamp: u64,
}
#[allow(dead_code)]
pub const MSG_HDR: u64 = 128;

pub const CNTR_SEND: usize = 0;
pub const CNTR_RECV: usize = 1;
pub const CNTR_READ: usize = 2;
pub const CNTR_WRITE: usize = 3;
pub const CNTR_REM_READ: usize = 4;
pub const CNTR_REM_WRITE: usize = 5;
// The SDK's CNTR_BIND_FLAGS numbers the counters the same way.
const _: () = assert!(matches!(
    [
        CNTR_SEND,
        CNTR_RECV,
        CNTR_READ,
        CNTR_WRITE,
        CNTR_REM_READ,
        CNTR_REM_WRITE
    ],
    [0, 1, 2, 3, 4, 5]
));

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// One definition: every struct here is what the generated
    /// include/fi_xpu/shm/shm__types.h declares, checked field by field
    /// against the compiled C header.
    #[test]
    fn c_header_matches_field_by_field() {
        let items = fi_xpu_prov_sdk::layout_items! {
            HeapHdr = "fi_xpu_shm_heap_hdr" { magic, size, mr_off, mr_slots, bell }
            MrEntry = "fi_xpu_shm_mr_entry" { gen, base, len, access, region, key }
            CqRing = "fi_xpu_shm_cq_ring" { head, tail, size, format, overflow, overflow_seen }
            Cqe = "fi_xpu_shm_cqe" {
                seq, flags, context, len, buf, data, tag, err, olen, src_nonce, src_ep, is_err,
                src_conn, stamp
            }
            Cntr = "fi_xpu_shm_cntr" { value, err, magic }
            EpInfo = "fi_xpu_shm_ep_info" {
                magic, nonce, ep_id, caps, rx_cq, rem_write_cntr, rem_read_cntr, heap_region,
                block_off, device
            }
            EpBlock = "fi_xpu_shm_ep_block" { head, tail }
            PeerMap = "fi_xpu_shm_peer_map" {
                state, gen, base, size, nonce, key, prev_gen, prev_nonce, prev_key, ro, epoch
            }
            PeerAddr = "fi_xpu_shm_peer_addr" {
                map, info_region, info_off, nonce, ep_id, conn_at_peer, conn_gen, map_gen, key,
                scope
            }
            CtxDev = "fi_xpu_shm_ctx_dev" {
                heap_base, heap_region, nonce, peer_addrs, maps, abort, resolve
            }
            ResolveEnt = "fi_xpu_shm_resolve_ent" {
                seq, pa, map, map_gen, info_region, info_off, key, epoch, genp, mem, base, len,
                access, heap, heap_size, info
            }
            Posted = "fi_xpu_shm_posted" {
                state, buf, len, tag, ignore, context, flags, seq, slot, src_nonce, src_ep,
                mlen, done, stage, data, map, pos, cst
            }
            Rdv = "fi_xpu_shm_rdv" {
                slot, context, len, flags, buf, sent, lane, kind, map, gen, pos, rep, key, acked,
                cseen, pst
            }
            EpDev = "fi_xpu_shm_ep_dev" {
                block, ctx, nonce, ep_id, caps, tx_cq, rx_cq, cntr, av_tab, av_count, lock,
                post_seq, lanes, magic, test_delay_ns, stage, stage_region, stage_off, busy, posted,
                rdv
            }
            CqDev = "fi_xpu_shm_cq_dev" {
                ring, size, format, timeout_ms, nprog, prog, rring, rtail, rseen, magic, abort,
                ctx, roff, bell, bseen
            }
            CntrDev = "fi_xpu_shm_cntr_dev" { magic, cntr, abort, rcntr }
            AvEnt = "fi_xpu_shm_av_ent" { nonce, ep_id }
            MrDesc = "fi_xpu_shm_mr_desc" { region, base, len, key }
            MsgHdr = "fi_xpu_shm_msg" {
                seq, state, len, tag, data, flags, cstamp, src_ep, src_conn, src_region,
                src_off, produced, consumed, src_gen, stamp, pstamp
            }
        };
        fi_xpu_prov_sdk::layout_check::check(
            "fi_xpu/shm/shm__types.h",
            include_str!("layout.rs"),
            &items,
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(size_of::<HeapHdr>(), 64);
        assert_eq!(size_of::<MrEntry>(), 64);
        assert_eq!(size_of::<CqRing>() as u64, CQ_HDR);
        assert_eq!(size_of::<Cqe>(), 112);
        assert_eq!(size_of::<Cntr>(), 64);
        assert_eq!(size_of::<EpInfo>(), 128);
        assert_eq!(size_of::<EpBlock>(), 128);
        assert_eq!(size_of::<MsgHdr>() as u64, MSG_HDR);
        assert_eq!(size_of::<PeerAddr>(), 88);
        assert_eq!(size_of::<MrDesc>(), 32);
        assert_eq!(size_of::<EpDev>(), 192 + 64 * 144 + 64 * 136);
        assert_eq!(size_of::<CqDev>(), 176);
        assert_eq!(size_of::<CntrDev>(), 64);
        assert_eq!(size_of::<CtxDev>(), 48 + 8 * MAX_CONNS);
        assert_eq!(size_of::<ResolveEnt>(), 128);
        assert_eq!(
            size_of::<PeerMap>(),
            16 + 16 * MAX_REGIONS + 56 + MAX_REGIONS / 8 + 8
        );
    }
}
