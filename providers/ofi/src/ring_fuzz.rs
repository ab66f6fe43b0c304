//! Fuzzing of the ring-entry checks (`ring::check`): entries come from
//! device-written memory, so every byte of them is untrusted. Random entries
//! and entries mutated from valid ones are checked; no input may panic, and
//! every accepted entry must satisfy what the proxy relies on before it calls
//! libfabric.
use crate::layout::*;
use crate::ring::{
    check, check_atomic, has_source, local_buffers, Limits, MrRange, SIGNAL_ADD, WQE_FLAGS,
};
use fi_xpu_abi::datatype::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::op::*;

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Mostly small or edge values, sometimes anything.
    fn word(&mut self) -> u64 {
        match self.next() % 6 {
            0 => 0,
            1 => u64::MAX - self.next() % 4,
            2 => self.next() % 16,
            3 => 0x1000 + self.next() % 0x3000,
            4 => 1u64 << (self.next() % 64),
            _ => self.next(),
        }
    }
}

const REGIONS: [MrRange; 3] = [
    MrRange {
        base: 0x1000,
        len: 0x1000,
    },
    MrRange {
        base: 0x2000,
        len: 0x800,
    },
    MrRange {
        base: 0x3000,
        len: 1 << 20,
    },
];
const PEERS: u64 = 4;

fn mr(id: u64) -> Option<MrRange> {
    REGIONS.get(id.checked_sub(1)? as usize).copied()
}

fn addr_ok(addr: u64) -> bool {
    addr < PEERS
}

fn limits() -> Limits {
    Limits {
        max_msg: 1 << 20,
        has_atomic: true,
    }
}

fn valid(rng: &mut Rng) -> Wqe {
    let op = 1 + (rng.next() % OP_LAST as u64) as u32;
    let mut w = Wqe {
        op,
        addr: rng.next() % PEERS,
        buf: 0x3000 + rng.next() % 0x100,
        len: 1 + rng.next() % 64,
        desc: 3,
        flags: FI_COMPLETION,
        ..Default::default()
    };
    if matches!(op, OP_ATOMIC | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC) {
        let (dt, o) = match op {
            OP_COMPARE_ATOMIC => (FI_UINT64, FI_CSWAP),
            _ => (FI_INT32, FI_SUM),
        };
        w.atomic = dt as u32 | (o as u32) << 16;
        w.len = 1 + rng.next() % 8;
        w.result = 0x3800;
        w.result_desc = 3;
        w.compare = 0x3c00;
    }
    if op == OP_PUT_SIGNAL {
        w.tag = 0x4000 + 8 * (rng.next() % 16);
        w.ignore = rng.next();
        w.atomic = (rng.next() % 2) as u32;
    }
    w
}

fn mutate(rng: &mut Rng, mut w: Wqe) -> Wqe {
    for _ in 0..1 + rng.next() % 3 {
        let v = rng.word();
        match rng.next() % 13 {
            0 => w.op = v as u32,
            1 => w.atomic = v as u32,
            2 => w.flags = v,
            3 => w.addr = v,
            4 => w.buf = v,
            5 => w.len = v,
            6 => w.desc = v % 6,
            7 => w.result = v,
            8 => w.result_desc = v % 6,
            9 => w.compare = v,
            10 => w.flags ^= 1 << (v % 64),
            11 => w.tag = v,
            _ => w.len = w.len.wrapping_add(v % 3).wrapping_sub(1),
        }
    }
    w
}

fn random(rng: &mut Rng) -> Wqe {
    Wqe {
        seq: rng.next(),
        op: rng.word() as u32,
        atomic: rng.word() as u32,
        flags: rng.word(),
        addr: rng.word(),
        buf: rng.word(),
        len: rng.word(),
        desc: rng.word() % 6,
        raddr: rng.word(),
        rkey: rng.word(),
        context: rng.word(),
        data: rng.word(),
        tag: rng.word(),
        ignore: rng.word(),
        compare: rng.word(),
        result: rng.word(),
        result_desc: rng.word() % 6,
    }
}

fn within(id: u64, buf: u64, len: u64) -> bool {
    id == 0
        || mr(id).is_some_and(|r| {
            buf >= r.base && buf - r.base <= r.len && len <= r.len - (buf - r.base)
        })
}

/// What the proxy relies on once `check` accepted `w`.
fn invariants(w: &Wqe) {
    assert!((1..=OP_LAST).contains(&w.op), "{w:?}");
    assert_eq!(w.flags & !WQE_FLAGS, 0, "{w:?}");
    if w.op == OP_NOP || w.op == OP_FENCE {
        return;
    }
    if w.op == OP_PUT_SIGNAL {
        // The signal: an aligned word, a known operation, no CQ data in
        // the field that carries its value, atomics on the transport.
        assert!(w.tag.is_multiple_of(8) && w.atomic <= SIGNAL_ADD, "{w:?}");
        assert_eq!(w.flags & (FI_REMOTE_CQ_DATA | FI_INJECT), 0, "{w:?}");
    }
    let atomic = matches!(w.op, OP_ATOMIC | OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC);
    let bytes = if atomic {
        check_atomic(w).expect("accepted atomic").2
    } else {
        w.len
    };
    assert!(bytes <= limits().max_msg, "{w:?}");
    let read_only = w.op == OP_FETCH_ATOMIC && (w.atomic >> 16) as i32 == FI_ATOMIC_READ;
    // An injected source is read from the entry's staging slot, never from
    // `buf` or `compare`: only its size matters.
    let inject = w.flags & FI_INJECT != 0;
    if inject {
        assert!(has_source(w.op), "{w:?}");
        assert!(read_only || bytes <= INJECT_SIZE, "{w:?}");
    }
    // Every buffer libfabric will be given is one `local_buffers` lists
    // (and the proxy checks against the context's memory).
    let listed = local_buffers(w);
    let listed = listed.as_slice();
    if !read_only && !inject && bytes > 0 {
        assert!(listed.contains(&(w.buf, bytes)), "{w:?}");
    }
    if !read_only && !inject {
        assert!(w.buf.checked_add(bytes).is_some(), "{w:?}");
        assert!(within(w.desc, w.buf, bytes), "{w:?}");
    }
    if matches!(w.op, OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC) {
        assert!(
            w.result != 0 && within(w.result_desc, w.result, bytes),
            "{w:?}"
        );
    }
    if matches!(w.op, OP_FETCH_ATOMIC | OP_COMPARE_ATOMIC) {
        assert!(listed.contains(&(w.result, bytes)), "{w:?}");
    }
    if w.op == OP_COMPARE_ATOMIC && !inject {
        assert!(listed.contains(&(w.compare, bytes)), "{w:?}");
        assert!(
            w.compare != 0 && w.compare.checked_add(bytes).is_some(),
            "{w:?}"
        );
    }
    if !matches!(w.op, OP_RECV | OP_TRECV) || w.addr != u64::MAX {
        assert!(addr_ok(w.addr), "{w:?}");
    }
}

#[test]
fn ring_entries_never_panic_and_accepted_ones_are_safe() {
    let lim = limits();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted_random, mut accepted_mutated) = (0u32, 0u32);
    for _ in 0..200_000 {
        let w = random(&mut rng);
        if check(&w, &lim, &mr, &addr_ok).is_ok() {
            invariants(&w);
            accepted_random += 1;
        }
        let base = valid(&mut rng);
        assert_eq!(check(&base, &lim, &mr, &addr_ok), Ok(()), "{base:?}");
        let m = mutate(&mut rng, base);
        if check(&m, &lim, &mr, &addr_ok).is_ok() {
            invariants(&m);
            accepted_mutated += 1;
        }
    }
    // Both paths ran: many mutants stay valid, most random entries do not.
    assert!(accepted_mutated > 20_000, "{accepted_mutated}");
    assert!(accepted_random < 100_000, "{accepted_random}");
}
