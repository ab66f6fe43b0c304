//! In-process micro-benchmarks of the ofi proxy's posting path, beside the
//! cross-process benchmarks of `cargo xtask bench`: what the proxy does with
//! one ring entry before libfabric sees it.
//!
//! - `ring_entry`: taking an entry out of its ring slot (one volatile copy of
//!   the device-written bytes, as the proxy reads it once) and listing its
//!   local buffers (`ring::local_buffers`);
//! - `validation`: `ring::check` of an 8-byte write, a fetching atomic, a
//!   put with signal, and an entry refused for an unknown flag;
//! - `registration_lookup`: `MrTable::get` of the last of 1, 64 and 254
//!   registrations (a domain holds at most 254 on shm; ofi's table grows).
//!
//! `cargo bench -p fi_xpu_ofi --bench posting` runs them; the suite's
//! clippy step only compiles them, and `cargo test -p fi_xpu_ofi --bench
//! posting` runs each once.
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use fi_xpu_abi::datatype::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::op::*;
use fi_xpu_ofi::layout::*;
use fi_xpu_ofi::mr_table::{MrRec, MrTable};
use fi_xpu_ofi::ring::{self, Limits, MrRange, SIGNAL_ADD};
use std::hint::black_box;

const BUF: u64 = 0x10_0000;

fn table(n: usize) -> MrTable {
    let t = MrTable::default();
    for i in 0..n {
        t.insert(MrRec {
            base: BUF + (i as u64) * 0x1_0000,
            len: 0x1_0000,
            desc: i,
        });
    }
    t
}

fn desc_id(index: usize) -> u64 {
    MR_MAGIC << 32 | index as u64
}

fn entries() -> Vec<(&'static str, Wqe)> {
    let write = Wqe {
        seq: 1,
        op: OP_WRITE,
        flags: FI_COMPLETION,
        addr: 1,
        buf: BUF,
        len: 8,
        desc: desc_id(0),
        raddr: 0x2000,
        rkey: 9,
        ..Default::default()
    };
    let fetch = Wqe {
        op: OP_FETCH_ATOMIC,
        atomic: FI_UINT64 as u32 | (FI_SUM as u32) << 16,
        len: 1,
        result: BUF + 64,
        result_desc: desc_id(0),
        ..write
    };
    let signal = Wqe {
        op: OP_PUT_SIGNAL,
        tag: 0x3000,
        atomic: SIGNAL_ADD,
        data: 1,
        ..write
    };
    let bad_flags = Wqe {
        flags: 1 << 62,
        ..write
    };
    vec![
        ("write_8B", write),
        ("fetch_atomic", fetch),
        ("put_signal", signal),
        ("refused_flags", bad_flags),
    ]
}

fn ring_entry(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_entry");
    let ring: Vec<Wqe> = entries()
        .into_iter()
        .map(|(_, w)| w)
        .cycle()
        .take(64)
        .collect();
    let mut pos = 0usize;
    g.bench_function("take_and_list_buffers", |b| {
        b.iter(|| {
            let slot: *const Wqe = &ring[pos & 63];
            pos = pos.wrapping_add(1);
            // SAFETY: `slot` points into `ring`, alive for the loop.
            let w = unsafe { std::ptr::read_volatile(slot) };
            black_box(ring::local_buffers(black_box(&w)))
        })
    });
    g.finish();
}

fn validation(c: &mut Criterion) {
    let mut g = c.benchmark_group("validation");
    let t = table(1);
    let lim = Limits {
        max_msg: 1 << 30,
        has_atomic: true,
    };
    let mr = |id: u64| {
        t.get(id).map(|r| MrRange {
            base: r.base,
            len: r.len,
        })
    };
    let addr_ok = |a: u64| a == 1;
    for (name, w) in entries() {
        g.bench_function(name, |b| {
            b.iter(|| ring::check(black_box(&w), &lim, &mr, &addr_ok))
        });
    }
    g.finish();
}

fn registration_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("registration_lookup");
    for n in [1usize, 64, 254] {
        let t = table(n);
        let id = desc_id(n - 1);
        g.bench_with_input(BenchmarkId::from_parameter(n), &id, |b, &id| {
            b.iter(|| t.get(black_box(id)))
        });
    }
    g.finish();
}

criterion_group!(benches, ring_entry, validation, registration_lookup);
criterion_main!(benches);
