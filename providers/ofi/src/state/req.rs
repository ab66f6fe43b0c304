//! A request: one outstanding libfabric operation of a ring entry, whose
//! first bytes are the `fi_context2` libfabric uses while it runs; the
//! signal of a put-with-signal; and a request whose libfabric call waits.
use crate::layout::*;
use std::time::Instant;

/// One outstanding libfabric operation. The first 64 bytes are the
/// `struct fi_context2` libfabric may use while it runs.
#[repr(C)]
pub struct Req {
    pub fi_ctx: [u64; 8],
    pub pos: u64,
    pub op: u32,
    /// The peer (libfabric address) of a transmit operation.
    pub peer: u64,
    pub context: u64,
    pub buf: u64,
    pub len: u64,
    pub tag: u64,
    /// An `FI_INJECT` entry's source (and compare) bytes, copied out of its
    /// staging slot before the slot can be reused; libfabric reads them
    /// from here.
    pub inject: [u8; STAGE_SLOT as usize],
    /// Where the values of a non-fetching atomic posted as a fetching one
    /// land (see `DomInner::dc_atomic_as_fetch`); never read.
    pub discard: Option<Box<[u8]>>,
    /// When libfabric took it.
    pub issued: Instant,
    /// Failed with `-FI_ETIMEDOUT` (see `expire`): a completion libfabric
    /// reports for it later is dropped.
    pub timed_out: bool,
    /// The data part of a put-with-signal: its signal, posted once the
    /// data is complete at the target.
    pub signal: Option<Signal>,
    /// One of the two parts of a put-with-signal whose signal was posted
    /// fenced behind its data: the put completes when both did.
    pub joint: bool,
    /// The data of a put-with-signal, posted with `FI_INJECT` on a
    /// transport that places it before later writes and atomics: the
    /// signal follows at once (see `DomInner::ordered_inject`).
    pub ordered: bool,
}

impl Req {
    /// A request for no entry yet.
    pub fn blank() -> Req {
        Req {
            fi_ctx: [0; 8],
            pos: 0,
            op: 0,
            peer: 0,
            context: 0,
            buf: 0,
            len: 0,
            tag: 0,
            inject: [0; STAGE_SLOT as usize],
            discard: None,
            issued: Instant::now(),
            timed_out: false,
            signal: None,
            joint: false,
            ordered: false,
        }
    }

    /// A second request for the same ring entry (a put-with-signal's
    /// signal).
    pub fn part_of(r: &Req) -> Box<Req> {
        Box::new(Req {
            pos: r.pos,
            op: r.op,
            peer: r.peer,
            context: r.context,
            buf: r.buf,
            len: r.len,
            tag: r.tag,
            ..Req::blank()
        })
    }
}

/// The signal word update of a put-with-signal.
#[derive(Clone, Copy)]
pub struct Signal {
    pub addr: u64,
    pub raddr: u64,
    pub rkey: u64,
    pub value: u64,
    pub add: bool,
}

/// A request whose libfabric call waits: the testing-only delay of write
/// data (until `due`), or a signal libfabric refused with `-FI_EAGAIN`.
pub struct Waiting {
    pub due: Instant,
    pub req: Box<Req>,
    pub w: Wqe,
}

/// What `fail` needs of a request.
pub fn req_wqe(r: &Req) -> Wqe {
    Wqe {
        op: r.op,
        context: r.context,
        buf: r.buf,
        len: r.len,
        tag: r.tag,
        ..Default::default()
    }
}
