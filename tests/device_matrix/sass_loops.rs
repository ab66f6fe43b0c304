//! The loops kernels spend their time in, read from NVIDIA SASS
//! (`cuobjdump -sass` of nvcc's cubins for sm_90 and sm_100):
//!
//! - the poll loops of a CQ read, a blocking CQ read, a counter wait and a
//!   signal wait hold no `CCTL.IVALL` (what ptxas makes of an acquire at
//!   system scope: it invalidates the whole L1 on every turn). Polls read
//!   relaxed and fence once when they found something; the work behind a
//!   CQ entry is a subroutine the loop calls, outside it.
//! - the main loop of the copies (cooperative copy, cooperative write,
//!   put-with-signal, its cooperative and split forms) issues at least four 16-byte loads (`LDG.E*.128`)
//!   before its first store, so a lane waits for memory once per four
//!   units.
//!
//! A kernel's body is its instructions before the first subroutine a
//! `CALL` enters (ptxas places called functions after the kernel); a loop
//! is the range from a backward branch's target to the branch.
use super::common::scratch;
use super::sass::compiled_sass;
use super::vendor::cuda_or_skip;
use std::collections::BTreeMap;

/// The architectures the checks cover.
const ARCHS: &[&str] = &["sm_90", "sm_100"];

/// One SASS instruction: address, opcode (without predicate), arguments.
#[derive(Debug, Clone)]
struct Ins {
    addr: u64,
    op: String,
    args: String,
}

fn parse(line: &str) -> Option<Ins> {
    let rest = line.trim_start().strip_prefix("/*")?;
    let (addr, rest) = rest.split_once("*/")?;
    let addr = u64::from_str_radix(addr, 16).ok()?;
    let ins = rest.split(';').next()?.trim();
    let ins = match ins.strip_prefix('@') {
        Some(p) => p.split_once(char::is_whitespace)?.1.trim_start(),
        None => ins,
    };
    let (op, args) = ins.split_once(char::is_whitespace).unwrap_or((ins, ""));
    (!op.is_empty()).then(|| Ins {
        addr,
        op: op.to_string(),
        args: args.trim().to_string(),
    })
}

/// The last `0x...` argument: a branch's or call's target.
fn target(args: &str) -> Option<u64> {
    args.split([' ', ','])
        .filter_map(|w| w.strip_prefix("0x"))
        .next_back()
        .and_then(|h| u64::from_str_radix(h, 16).ok())
}

/// Every function of a listing with all its instructions.
fn functions(sass: &str) -> BTreeMap<String, Vec<Ins>> {
    let mut out: BTreeMap<String, Vec<Ins>> = BTreeMap::new();
    let mut cur = None;
    for line in sass.lines() {
        if let Some(name) = line.trim().strip_prefix("Function : ") {
            cur = Some(name.trim().to_string());
            out.entry(name.trim().to_string()).or_default();
            continue;
        }
        if let (Some(f), Some(i)) = (cur.as_ref(), parse(line)) {
            out.get_mut(f).unwrap().push(i);
        }
    }
    out
}

/// The kernel's own instructions: those before the first called subroutine.
fn body(all: &[Ins]) -> Vec<Ins> {
    let first_sub = all
        .iter()
        .filter(|i| i.op.starts_with("CALL"))
        .filter_map(|i| target(&i.args))
        .min()
        .unwrap_or(u64::MAX);
    all.iter().filter(|i| i.addr < first_sub).cloned().collect()
}

/// [start, end] of every loop of `body`: a backward branch and its target.
fn loops(body: &[Ins]) -> Vec<(u64, u64)> {
    body.iter()
        .filter(|i| i.op.starts_with("BRA"))
        .filter_map(|i| {
            target(&i.args)
                .filter(|&t| t <= i.addr)
                .map(|t| (t, i.addr))
        })
        .collect()
}

/// What the poll check found in one kernel.
#[derive(Debug, Default, PartialEq)]
struct Polls {
    loops: usize,
    /// `CCTL.IVALL` inside a loop of the body.
    invalidations_in_loops: usize,
}

fn polls(all: &[Ins]) -> Polls {
    let b = body(all);
    let l = loops(&b);
    Polls {
        loops: l.len(),
        invalidations_in_loops: b
            .iter()
            .filter(|i| i.op == "CCTL.IVALL")
            .filter(|i| l.iter().any(|&(s, e)| (s..=e).contains(&i.addr)))
            .count(),
    }
}

fn is_vector_load(op: &str) -> bool {
    op.starts_with("LDG.E") && op.contains(".128")
}

fn is_global_store(op: &str) -> bool {
    op.starts_with("STG") || op.starts_with("ST.E")
}

/// Over the loops of the body that load 16-byte vectors: the most such
/// loads one of them issues before its first store.
fn loads_before_first_store(all: &[Ins]) -> usize {
    let b = body(all);
    loops(&b)
        .iter()
        .map(|&(s, e)| {
            b.iter()
                .filter(|i| (s..=e).contains(&i.addr))
                .take_while(|i| !is_global_store(&i.op))
                .filter(|i| is_vector_load(&i.op))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// Static counts over a whole function (subroutines included): system
/// scope loads, L1 invalidations, memory barriers.
fn counts(all: &[Ins]) -> (usize, usize, usize) {
    let n = |f: &dyn Fn(&str) -> bool| all.iter().filter(|i| f(&i.op)).count();
    (
        n(&|op| op.starts_with("LD") && op.contains("STRONG.SYS")),
        n(&|op| op == "CCTL.IVALL"),
        n(&|op| op.starts_with("MEMBAR")),
    )
}

#[test]
fn loop_reading_finds_invalidations_and_copies() {
    // A poll loop with an acquire in it; a second whose hit path is a
    // subroutine (the invalidation after the kernel's EXIT is not in it).
    let sass = "\t\tFunction : bad\n\
        /*0000*/ LD.E.64.STRONG.SYS R2, desc[UR4][R4.64] ;\n\
        /*0010*/ CCTL.IVALL ;\n\
        /*0020*/ @P0 BRA 0x0 ;\n\
        /*0030*/ EXIT ;\n\
        \t\tFunction : good\n\
        /*0000*/ LD.E.64.STRONG.SYS R2, desc[UR4][R4.64] ;\n\
        /*0010*/ @P0 CALL.REL.NOINC 0x60 ;\n\
        /*0020*/ @!P1 BRA P2, 0x0 ;\n\
        /*0030*/ EXIT ;\n\
        /*0060*/ MEMBAR.ALL.SYS ;\n\
        /*0070*/ CCTL.IVALL ;\n\
        /*0080*/ @P0 BRA 0x60 ;\n\
        /*0090*/ RET.REL.NODEC R2 0x0 ;\n\
        \t\tFunction : alternating\n\
        /*0000*/ LDG.E.128 R4, desc[UR4][R2.64] ;\n\
        /*0010*/ STG.E.128 desc[UR4][R6.64], R4 ;\n\
        /*0020*/ LDG.E.128 R4, desc[UR4][R2.64+0x10] ;\n\
        /*0030*/ STG.E.128 desc[UR4][R6.64+0x10], R4 ;\n\
        /*0040*/ @P0 BRA 0x0 ;\n\
        \t\tFunction : unrolled\n\
        /*0000*/ LDG.E.NA.128 R4, desc[UR4][R2.64] ;\n\
        /*0010*/ LDG.E.NA.128 R8, desc[UR4][R2.64+0x10] ;\n\
        /*0020*/ LDG.E.NA.128 R12, desc[UR4][R2.64+0x20] ;\n\
        /*0030*/ LDG.E.NA.128 R16, desc[UR4][R2.64+0x30] ;\n\
        /*0040*/ STG.E.128 desc[UR4][R6.64], R4 ;\n\
        /*0050*/ @P0 BRA 0x0 ;\n";
    let f = functions(sass);
    assert_eq!(
        polls(&f["bad"]),
        Polls {
            loops: 1,
            invalidations_in_loops: 1
        }
    );
    assert_eq!(
        polls(&f["good"]),
        Polls {
            loops: 1,
            invalidations_in_loops: 0
        }
    );
    assert_eq!(counts(&f["good"]), (1, 1, 1));
    assert_eq!(loads_before_first_store(&f["alternating"]), 1);
    assert_eq!(loads_before_first_store(&f["unrolled"]), 4);
}

/// Kernels that poll, each in the loop a user writes or the one the
/// blocking call has inside.
const POLLS: &str = r#"
#include <fi_xpu/device.h>
extern "C" __global__ void poll_cq_read(struct fid_xpu_cq *cq, int64_t *out)
{
	struct fi_cq_tagged_entry e;
	int64_t rc;
	do
		rc = fi_xpu_cq_read(cq, &e, 1, FI_XPU_WORK_ITEM);
	while (rc == -FI_EAGAIN);
	out[0] = rc;
}
extern "C" __global__ void poll_cq_sread(struct fid_xpu_cq *cq, int64_t *out)
{
	struct fi_cq_tagged_entry e;
	out[0] = fi_xpu_cq_sread(cq, &e, 1, 1, FI_XPU_WORK_ITEM);
}
extern "C" __global__ void poll_cntr_wait(struct fid_xpu_cntr *c, int64_t *out)
{
	out[0] = fi_xpu_cntr_wait_status(c, 5, -1, FI_XPU_WORK_ITEM);
}
extern "C" __global__ void poll_signal_wait(struct fid_xpu_ep *ep, const uint64_t *sig,
					    int64_t *out)
{
	out[0] = fi_xpu_signal_wait_until(ep, sig, FI_XPU_CMP_GE, 1, -1, FI_XPU_WORK_ITEM);
}
extern "C" __global__ void put_8_bytes(struct fid_xpu_ep *ep, const void *buf, void *peer,
				       uint64_t addr, uint64_t key, int64_t *out)
{
	out[0] = fi_xpu_write(ep, buf, 8, 0, 0, peer, addr, key, 0, 0, FI_XPU_WORK_ITEM);
}
extern "C" __global__ void copy_coop(void *dst, const void *src, size_t len)
{
	(void)fi_xpu_coop_copy(dst, src, len, FI_XPU_WORK_GROUP, FI_XPU_ARCH_MS_SYSTEM);
}
extern "C" __global__ void copy_coop_write(struct fid_xpu_ep *ep, const void *buf, size_t len,
				      void *peer, uint64_t addr, uint64_t key, int64_t *out)
{
	out[0] = fi_xpu_coop_write(ep, buf, len, 0, 0, peer, addr, key, 0, 0, FI_XPU_WORK_GROUP);
}
extern "C" __global__ void copy_put_signal(struct fid_xpu_ep *ep, const void *buf, size_t len,
					   void *peer, uint64_t addr, uint64_t key, uint64_t sig,
					   int64_t *out)
{
	out[0] = fi_xpu_put_signal(ep, buf, len, 0, peer, addr, key, sig, key, 1,
				   FI_XPU_SIGNAL_SET, 0, 0, FI_XPU_WORK_ITEM);
}
extern "C" __global__ void copy_coop_put_signal(struct fid_xpu_ep *ep, const void *buf,
						size_t len, void *peer, uint64_t addr,
						uint64_t key, uint64_t sig, int64_t *out)
{
	out[0] = fi_xpu_coop_put_signal(ep, buf, len, 0, peer, addr, key, sig, key, 1,
					FI_XPU_SIGNAL_SET, 0, 0, FI_XPU_WORK_GROUP);
}
extern "C" __global__ void copy_split_put_signal(struct fid_xpu_ep *ep, const void *buf,
						 size_t len, void *peer, uint64_t addr,
						 uint64_t key, uint64_t sig, int64_t *out)
{
	out[0] = fi_xpu_coop_put_signal_part(ep, buf, len, 0, peer, addr, key, sig, key, 1,
					     FI_XPU_SIGNAL_ADD, 0, 0, blockIdx.x, gridDim.x,
					     FI_XPU_WORK_GROUP);
}
"#;

/// `source` (written to `file` in a scratch directory named `scratch_name`)
/// compiled to SASS for every arch of `ARCHS`, in parallel.
fn sass_for_every_arch(
    cuda: &std::path::Path,
    scratch_name: &str,
    file: &str,
    source: &str,
) -> Vec<(&'static str, String)> {
    let dir = scratch(scratch_name);
    let src = super::stable_source(file, source);
    std::thread::scope(|s| {
        let jobs: Vec<_> = ARCHS
            .iter()
            .map(|&arch| {
                let (dir, src) = (&dir, &src);
                s.spawn(move || {
                    let out = dir.join(format!("{arch}.cubin"));
                    (arch, compiled_sass(cuda, src, arch, &[], &out, false))
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    })
}

/// The poll loops hold no L1 invalidation, and the copies keep four
/// 16-byte loads in flight, on sm_90 and sm_100. Prints, per kernel, the
/// static counts of system-scope loads, invalidations and barriers.
#[test]
fn poll_loops_and_copy_loops_in_sass() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let listings = sass_for_every_arch(&cuda, "sass-loops", "loops.cu", POLLS);
    eprintln!("| arch | kernel | loops | CCTL.IVALL in loops | LD STRONG.SYS | CCTL.IVALL | MEMBAR | 16-byte loads before a store |");
    let mut errors = Vec::new();
    for (arch, sass) in &listings {
        let f = functions(sass);
        for (name, ins) in &f {
            let p = polls(ins);
            let (sys, cctl, membar) = counts(ins);
            let ahead = loads_before_first_store(ins);
            eprintln!(
                "| {arch} | {name} | {} | {} | {sys} | {cctl} | {membar} | {ahead} |",
                p.loops, p.invalidations_in_loops
            );
            if name.starts_with("poll_") {
                if p.loops == 0 {
                    errors.push(format!("{arch} {name}: no poll loop found"));
                }
                if p.invalidations_in_loops != 0 {
                    errors.push(format!(
                        "{arch} {name}: {} CCTL.IVALL inside its poll loop",
                        p.invalidations_in_loops
                    ));
                }
            }
            if name.starts_with("copy_") && ahead < 4 {
                errors.push(format!(
                    "{arch} {name}: {ahead} 16-byte loads before the copy loop's first store"
                ));
            }
        }
        for k in [
            "poll_cq_read",
            "poll_cq_sread",
            "poll_cntr_wait",
            "poll_signal_wait",
            "copy_coop",
            "copy_coop_write",
            "copy_put_signal",
            "copy_coop_put_signal",
            "copy_split_put_signal",
        ] {
            if !f.contains_key(k) {
                errors.push(format!("{arch}: kernel {k} not in the listing"));
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// Kernels of the shm provider alone (no dispatch to another), built
/// with every object's scope fixed at device scope (`FI_XPU_I_SHM_SCOPE`):
/// the code a pair on one GPU runs, separate from the system-scope one.
const SHM_DEVICE_SCOPE: &str = r#"
#define FI_XPU_DEVICE_PROVIDERS(P) P(shm)
#define FI_XPU_I_SHM_SCOPE FI_XPU_ARCH_MS_DEVICE
#include <fi_xpu/device.h>
extern "C" __global__ void empty_cq_poll(struct fid_xpu_cq *cq, int64_t *out)
{
	struct fi_cq_tagged_entry e;
	out[0] = fi_xpu_cq_read(cq, &e, 1, FI_XPU_WORK_ITEM);
}
extern "C" __global__ void device_scope_put_8_bytes(struct fid_xpu_ep *ep, const void *buf,
						    void *peer, uint64_t addr, uint64_t key,
						    int64_t *out)
{
	out[0] = fi_xpu_write(ep, buf, 8, 0, 0, peer, addr, key, 0, 0, FI_XPU_WORK_ITEM);
}
"#;

fn is_global_load(op: &str) -> bool {
    op.starts_with("LDG") || op == "LD" || op.starts_with("LD.E")
}

/// The loads of a kernel's body (what runs before it calls out): all
/// global ones, and those of shared words (`.STRONG.`: atomics, polls).
fn body_loads(all: &[Ins]) -> (usize, usize) {
    let b = body(all);
    let global = b.iter().filter(|i| is_global_load(&i.op)).count();
    let strong = b
        .iter()
        .filter(|i| is_global_load(&i.op) && i.op.contains(".STRONG."))
        .count();
    (global, strong)
}

/// System-scope loads (`LD*.STRONG.SYS`) of a kernel's body, and whether
/// the body holds an atomic and a store: the put's own work (its copy,
/// the counters, its completion), not only a call.
fn body_sys_loads(all: &[Ins]) -> (usize, bool) {
    let b = body(all);
    let sys = b
        .iter()
        .filter(|i| i.op.starts_with("LD") && i.op.contains("STRONG.SYS"))
        .count();
    let works =
        b.iter().any(|i| i.op.starts_with("ATOM")) && b.iter().any(|i| is_global_store(&i.op));
    (sys, works)
}

#[test]
fn body_loads_count_global_and_shared_words() {
    let sass = "\t\tFunction : k\n\
        /*0000*/ LDC.64 R4, c[0x0][0x210] ;\n\
        /*0010*/ LDG.E.64 R4, desc[UR4][R4.64+0x8] ;\n\
        /*0020*/ LD.E.64.STRONG.SYS R2, desc[UR4][R4.64+0xa8] ;\n\
        /*0030*/ LDS.64 R6, [R1] ;\n\
        /*0040*/ @P0 CALL.REL.NOINC 0x60 ;\n\
        /*0050*/ EXIT ;\n\
        /*0060*/ LD.E.64.STRONG.SYS R2, desc[UR4][R4.64] ;\n\
        /*0070*/ RET.REL.NODEC R2 0x0 ;\n";
    assert_eq!(body_loads(&functions(sass)["k"]), (2, 1));
    assert_eq!(body_sys_loads(&functions(sass)["k"]), (1, false));
}

/// An empty CQ poll, the path a poll loop runs turn after turn: past the
/// handle's header (read by the dispatch: class, provider, device block),
/// the CQ block's validity word (plain) and the address of its context's
/// bell, it polls two words,
/// the bell and the value it had when the CQ was last found idle; every
/// other read is a call away. The device-scope 8-byte put: its data fence
/// is a device one, and a put whose target and key resolve from the
/// resolve table (the kernel's body: the copy, the counters and the
/// completion are in it, the full resolution and a full ring's retries a
/// call away) reads at most four words at system scope: the peer map's
/// epoch, the registration's generation, the peer's remote-write counter
/// offset and the tail of the completion ring.
#[test]
fn empty_cq_poll_reads_two_words_in_sass() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let listings = sass_for_every_arch(
        &cuda,
        "sass-empty-poll",
        "shm_device_scope.cu",
        SHM_DEVICE_SCOPE,
    );
    eprintln!("| arch | kernel | global loads before a call | of them shared words | LD STRONG.SYS before a call | LD STRONG.SYS | MEMBAR *.SYS | MEMBAR *.GPU |");
    let mut errors = Vec::new();
    for (arch, sass) in &listings {
        let f = functions(sass);
        for k in ["empty_cq_poll", "device_scope_put_8_bytes"] {
            let Some(ins) = f.get(k) else {
                errors.push(format!("{arch}: kernel {k} not in the listing"));
                continue;
            };
            let (global, strong) = body_loads(ins);
            let (sys, _, _) = counts(ins);
            let membar = |s: &str| {
                ins.iter()
                    .filter(|i| i.op.starts_with("MEMBAR") && i.op.ends_with(s))
                    .count()
            };
            let (msys, mgpu) = (membar(".SYS"), membar(".GPU"));
            let (body_sys, works) = body_sys_loads(ins);
            eprintln!(
                "| {arch} | {k} | {global} | {strong} | {body_sys} | {sys} | {msys} | {mgpu} |"
            );
            if k == "empty_cq_poll" {
                if strong > 2 {
                    errors.push(format!(
                        "{arch} {k}: {strong} shared words read before the first call"
                    ));
                }
                // The handle's three header words, the CQ block's
                // validity word (a plain load: a forged or other-class
                // handle must not lead to a load through its block), the
                // bell's address, and the two words.
                if global > 7 {
                    errors.push(format!(
                        "{arch} {k}: {global} global loads before the first call"
                    ));
                }
            } else {
                if mgpu == 0 {
                    errors.push(format!("{arch} {k}: no device-scope fence"));
                }
                if body_sys > 4 {
                    errors.push(format!(
                        "{arch} {k}: {body_sys} system-scope loads on a resolved put (at most 4)"
                    ));
                }
                if !works {
                    errors.push(format!(
                        "{arch} {k}: the put's own work (an atomic, a store) is not in its body"
                    ));
                }
            }
        }
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}
