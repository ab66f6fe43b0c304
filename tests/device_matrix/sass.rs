//! The compiled NVIDIA machine code (SASS, from `cuobjdump -sass` of the
//! CUDA wheels) of the device code, for every architecture nvcc builds:
//! every publish carries its system-scope fence, and the GPU cooperative
//! copy moves 16 bytes per lane.
//!
//! Publishes (ring entries, CQ entries and handed-back CQ slots, counters,
//! shm message words, signals, lock releases) are written in the headers as
//! `FI_XPU_I_PUBLISH(kind, statement)`. Built with
//! `-DFI_XPU_I_SASS_MARKERS`, each becomes `PMTRIG 0x4000|kind`, the
//! statement, `PMTRIG 0x8000|kind`, so it can be found after inlining. What
//! ptxas makes of the orders, read from its output on sm_75 to sm_100:
//! `st.release.sys` is `MEMBAR.ALL.SYS; ERRBAR; [CGAERRBAR;]
//! ST.E.64.STRONG.SYS`, a release or acq_rel `atom.*.sys` the same MEMBAR
//! before `ATOM.E.*.STRONG.SYS`, `fence.sc.sys` is `MEMBAR.SC.SYS`, and the
//! relaxed forms are the bare `ST`/`ATOM ... .STRONG.SYS`. So in each marked
//! region, every store or atomic must be system-scope (`.STRONG.SYS`) and
//! have a `MEMBAR.ALL.SYS` or `MEMBAR.SC.SYS` after the previous one; plain
//! stores are allowed only after the region's atomic, where ptxas emulates a
//! generic atomic that hits the shared or local window (after `QSPC`, or
//! after the atomic reported a non-global address).
//!
//! Message and signal publishes go into a peer at the scope the host chose
//! for that pair (`fi_xpu_shm_peer_addr.scope`): there ptxas emits both
//! forms under a predicate, and a device-scope store (`.STRONG.GPU`) passes
//! when a fence of device scope or wider (`MEMBAR.*.GPU`, `MEMBAR.*.SYS`)
//! precedes it; the region still needs its system-scope form.
use super::common::{cache, root, scratch};
use super::nvcc::{ARCHS, NVCC_FLAGS};
use super::vendor::{cuda_or_skip, run_clean};
use super::{example, include_flags, stable_source};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kinds of FI_XPU_I_PUB_* in fi_xpu/device_arch.h.
const KINDS: &[(u32, &str)] = &[
    (1, "ring"),
    (2, "cq"),
    (3, "cntr"),
    (4, "msg"),
    (5, "signal"),
    (6, "doorbell"),
    (7, "lock"),
];

fn kind_name(k: u32) -> &'static str {
    KINDS
        .iter()
        .find(|(n, _)| *n == k)
        .map_or("unknown", |(_, s)| s)
}

/// What the check found in one SASS listing.
#[derive(Debug, Default)]
pub struct Report {
    /// Marked publishes per kind name.
    pub regions: BTreeMap<&'static str, usize>,
    /// 16-byte global or generic loads and stores (LDG.E.128, LD.E.128, ...).
    pub vector_loads: usize,
    pub vector_stores: usize,
    /// One line per violation: function, kind, what, the region's opcodes.
    pub errors: Vec<String>,
}

/// The opcode of a SASS instruction line (`/*0040*/ @!P0 ST.E.64 [R2], R4 ;`),
/// without its predicate; `None` for other lines.
fn opcode(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start().strip_prefix("/*")?;
    let (addr, rest) = rest.split_once("*/")?;
    if !addr.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let ins = rest.split(';').next()?.trim();
    let ins = match ins.strip_prefix('@') {
        Some(p) => p.split_once(char::is_whitespace)?.1.trim_start(),
        None => ins,
    };
    let (op, args) = ins.split_once(char::is_whitespace).unwrap_or((ins, ""));
    (!op.is_empty()).then_some((op, args.trim()))
}

/// A store or atomic to global or generic memory (not shared, not local).
fn is_store(op: &str) -> bool {
    let head = op.split('.').next().unwrap_or("");
    matches!(head, "ST" | "STG" | "ATOM" | "ATOMG" | "RED" | "REDG")
}

fn is_sys_fence(op: &str) -> bool {
    op == "MEMBAR.ALL.SYS" || op == "MEMBAR.SC.SYS"
}

fn is_gpu_fence(op: &str) -> bool {
    op == "MEMBAR.ALL.GPU" || op == "MEMBAR.SC.GPU"
}

/// The kinds whose scope the host chooses per peer pair: msg, signal.
const PAIR_SCOPED: &[u32] = &[4, 5];

/// Checks one marked region; `ops` are its opcodes in address order.
fn check_region(func: &str, kind: u32, ops: &[&str], errors: &mut Vec<String>) {
    let mut fenced = false;
    let mut fenced_gpu = false;
    let mut atomic_seen = false;
    let mut publishes = 0;
    let mut fail = |what: String| {
        errors.push(format!(
            "{func}: {} publish: {what} in [{}]",
            kind_name(kind),
            ops.join(" ")
        ))
    };
    for &op in ops {
        if is_sys_fence(op) {
            fenced = true;
            fenced_gpu = true;
        } else if is_gpu_fence(op) {
            fenced_gpu = true;
        } else if op.starts_with("QSPC") {
            atomic_seen = true;
        } else if is_store(op) && op.contains(".STRONG.GPU") && PAIR_SCOPED.contains(&kind) {
            if !fenced_gpu {
                fail(format!("`{op}` without a device-scope fence before it"));
            }
            fenced_gpu = false;
            atomic_seen |= op.starts_with("ATOM") || op.starts_with("RED");
        } else if is_store(op) {
            if !op.contains(".STRONG.SYS") {
                if !atomic_seen {
                    fail(format!("`{op}` is not a system-scope store"));
                }
                continue;
            }
            publishes += 1;
            if !fenced {
                fail(format!("`{op}` without a system-scope fence before it"));
            }
            fenced = false;
            fenced_gpu = false;
            atomic_seen |= op.starts_with("ATOM") || op.starts_with("RED");
        }
    }
    if publishes == 0 {
        fail("no system-scope store or atomic".into());
    }
}

/// Runs the check over a `cuobjdump -sass` listing.
pub fn check_sass(sass: &str) -> Report {
    let mut r = Report::default();
    let mut func = String::new();
    let mut region: Option<(u32, Vec<&str>)> = None;
    for line in sass.lines() {
        if let Some(name) = line.trim().strip_prefix("Function : ") {
            if let Some((k, _)) = region.take() {
                r.errors
                    .push(format!("{func}: {} publish never ends", kind_name(k)));
            }
            func = name.trim().to_string();
            continue;
        }
        let Some((op, args)) = opcode(line) else {
            continue;
        };
        if op.contains(".128") && (op.starts_with("LDG.E") || op.starts_with("LD.E")) {
            r.vector_loads += 1;
        }
        if op.contains(".128") && (op.starts_with("STG.E") || op.starts_with("ST.E")) {
            r.vector_stores += 1;
        }
        if op == "PMTRIG" {
            let v = u32::from_str_radix(args.trim_start_matches("0x"), 16).unwrap_or(0);
            let kind = v & 0xff;
            if v & 0x4000 != 0 {
                if let Some((k, _)) = region.replace((kind, Vec::new())) {
                    r.errors.push(format!(
                        "{func}: {} publish inside a {} publish",
                        kind_name(kind),
                        kind_name(k)
                    ));
                }
            } else if v & 0x8000 != 0 {
                match region.take() {
                    Some((k, ops)) if k == kind => {
                        *r.regions.entry(kind_name(k)).or_default() += 1;
                        check_region(&func, k, &ops, &mut r.errors);
                    }
                    _ => r.errors.push(format!(
                        "{func}: end of a {} publish that did not begin",
                        kind_name(kind)
                    )),
                }
            }
            continue;
        }
        if let Some((_, ops)) = region.as_mut() {
            ops.push(op);
        }
    }
    if let Some((k, _)) = region {
        r.errors
            .push(format!("{func}: {} publish never ends", kind_name(k)));
    }
    r
}

/// The SASS of `cubin`.
fn disassemble(cuda: &Path, cubin: &Path) -> String {
    let bin = cuda.join("bin");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // cuobjdump runs nvdisasm, found on PATH.
    run_clean(
        Command::new(bin.join("cuobjdump"))
            .arg("-sass")
            .arg(cubin)
            .env("PATH", path),
        "cuobjdump -sass",
    )
}

/// Compiles `src` for `arch` with the publish markers to a cubin, with the
/// headers under `includes` searched first, and returns its SASS.
fn marked_sass(cuda: &Path, src: &Path, arch: &str, includes: &[PathBuf], out: &Path) -> String {
    compiled_sass(cuda, src, arch, includes, out, true)
}

/// Compiles `src` for `arch` to a cubin (with the publish markers when
/// `markers`), the headers under `includes` searched first, and returns
/// its SASS.
pub fn compiled_sass(
    cuda: &Path,
    src: &Path,
    arch: &str,
    includes: &[PathBuf],
    out: &Path,
    markers: bool,
) -> String {
    // nvcc's flags of the compile matrix (warnings as errors), the
    // mutated headers ahead of the tree's.
    let mut cmd = Command::new(cuda.join("bin/nvcc"));
    cmd.args(NVCC_FLAGS);
    for i in includes {
        cmd.arg(format!("-I{}", i.display()));
    }
    cmd.args(include_flags())
        .arg(format!("-arch={arch}"))
        .arg("-cubin")
        .args(markers.then_some("-DFI_XPU_I_SASS_MARKERS"))
        // #550 (set but never used) comes from the shm provider's scope
        // prologue (FI_XPU_GROUP_ENTER_RANK) in the examples' kernels, as in
        // tests/gpu_bundle.rs.
        .args(["-diag-suppress", "550"])
        .arg(src);
    // The listing is kept with the cubin: a rerun of the same compile
    // takes both.
    cache::kept(&mut cmd, "cuobjdump -sass", out, |cmd, to| {
        run_clean(
            cmd.arg("-o").arg(to),
            &format!("nvcc {arch} {}", src.display()),
        );
        disassemble(cuda, to)
    })
}

/// The device code the check covers: the kernel that calls every device
/// operation, and the kernels of the CUDA examples.
fn sources() -> Vec<(&'static str, PathBuf)> {
    let mut v = vec![("device_all_ops", example())];
    for (name, path) in [
        ("hello.cu", "examples/cuda/hello.cu"),
        ("pingpong.cu", "examples/cuda/pingpong.cu"),
        ("world.cu", "examples/cuda/world.cu"),
        ("moe.cu", "examples/moe/moe.cu"),
    ] {
        v.push((name, root().join(path)));
    }
    v
}

#[test]
fn sass_check_reads_publishes() {
    let good = "\t\tFunction : k\n\
        /*0010*/ PMTRIG 0x4002 ;\n\
        /*0020*/ MEMBAR.ALL.SYS ;\n\
        /*0030*/ ERRBAR;\n\
        /*0040*/ @!P0 ST.E.64.STRONG.SYS desc[UR4][R2.64], R4 ;\n\
        /*0050*/ PMTRIG 0x8002 ;\n\
        /*0060*/ PMTRIG 0x4003 ;\n\
        /*0070*/ MEMBAR.ALL.SYS ;\n\
        /*0080*/ ATOM.E.CAS.64.STRONG.SYS P0, R4, [R2], R4, R6 ;\n\
        /*0090*/ LD.E.64 R4, [R2] ;\n\
        /*00a0*/ ST.E.64 [R2], R6 ;\n\
        /*00b0*/ PMTRIG 0x8003 ;\n\
        /*00c0*/ LDG.E.128 R4, desc[UR4][R4.64] ;\n\
        /*00d0*/ STG.E.128 desc[UR4][R2.64], R4 ;\n";
    let r = check_sass(good);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    // A message published at the pair's scope: both forms, each fenced.
    let pair = "\t\tFunction : k\n\
        /*0010*/ PMTRIG 0x4004 ;\n\
        /*0020*/ @P0 MEMBAR.ALL.SYS ;\n\
        /*0030*/ @P0 ST.E.64.STRONG.SYS desc[UR4][R2.64], R4 ;\n\
        /*0040*/ @!P0 MEMBAR.ALL.GPU ;\n\
        /*0050*/ @!P0 ST.E.64.STRONG.GPU desc[UR4][R2.64], R4 ;\n\
        /*0060*/ PMTRIG 0x8004 ;\n";
    let r = check_sass(pair);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let r = check_sass(good);
    assert_eq!(r.regions.get("cq"), Some(&1));
    assert_eq!(r.regions.get("cntr"), Some(&1));
    assert_eq!((r.vector_loads, r.vector_stores), (1, 1));

    for (bad, why) in [
        // A relaxed system-scope store: no fence.
        (
            "/*0*/ PMTRIG 0x4001 ;\n/*1*/ ST.E.64.STRONG.SYS [R2], R4 ;\n/*2*/ PMTRIG 0x8001 ;\n",
            "without a system-scope fence",
        ),
        // A device-scope fence and store reach no host.
        (
            "/*0*/ PMTRIG 0x4001 ;\n/*1*/ MEMBAR.ALL.GPU ;\n/*2*/ ST.E.64.STRONG.GPU [R2], R4 ;\n/*3*/ PMTRIG 0x8001 ;\n",
            "not a system-scope store",
        ),
        // A message's device-scope form without its fence.
        (
            "/*0*/ PMTRIG 0x4004 ;\n/*1*/ MEMBAR.ALL.SYS ;\n/*2*/ ST.E.64.STRONG.SYS [R2], R4 ;\n/*3*/ ST.E.64.STRONG.GPU [R2], R4 ;\n/*4*/ PMTRIG 0x8004 ;\n",
            "without a device-scope fence",
        ),
        // A signal at device scope only: the system-scope form is missing.
        (
            "/*0*/ PMTRIG 0x4005 ;\n/*1*/ MEMBAR.ALL.GPU ;\n/*2*/ ST.E.64.STRONG.GPU [R2], R4 ;\n/*3*/ PMTRIG 0x8005 ;\n",
            "no system-scope store",
        ),
        // One fence for two publishes: the second is unordered.
        (
            "/*0*/ PMTRIG 0x4004 ;\n/*1*/ MEMBAR.ALL.SYS ;\n/*2*/ ST.E.64.STRONG.SYS [R2], R4 ;\n/*3*/ ST.E.64.STRONG.SYS [R6], R4 ;\n/*4*/ PMTRIG 0x8004 ;\n",
            "without a system-scope fence",
        ),
        // A plain store.
        (
            "/*0*/ PMTRIG 0x4005 ;\n/*1*/ MEMBAR.SC.SYS ;\n/*2*/ ST.E.64 [R2], R4 ;\n/*3*/ PMTRIG 0x8005 ;\n",
            "not a system-scope store",
        ),
        // A marker without its store.
        (
            "/*0*/ PMTRIG 0x4002 ;\n/*1*/ PMTRIG 0x8002 ;\n",
            "no system-scope store",
        ),
        ("/*0*/ PMTRIG 0x4002 ;\n", "never ends"),
        ("/*0*/ PMTRIG 0x8002 ;\n", "did not begin"),
    ] {
        let r = check_sass(bad);
        assert!(
            r.errors.iter().any(|e| e.contains(why)),
            "{bad}: expected `{why}`, got {:?}",
            r.errors
        );
    }
}

/// Every publish of the all-operations kernel and of the examples' kernels
/// is fenced at system scope on sm_75, sm_80, sm_90 and sm_100, and the
/// all-operations kernel's cooperative copies use 16-byte loads and stores.
#[test]
fn every_publish_is_fenced_in_sass() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let dir = scratch("sass-publish");
    let results: Vec<(&str, &str, Report)> = std::thread::scope(|s| {
        let jobs: Vec<_> = ARCHS
            .iter()
            .map(|&arch| {
                let (cuda, dir) = (&cuda, &dir);
                s.spawn(move || {
                    sources()
                        .into_iter()
                        .map(|(name, src)| {
                            let out = dir.join(format!("{arch}-{name}.cubin"));
                            let sass = marked_sass(cuda, &src, arch, &[], &out);
                            (arch, name, check_sass(&sass))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        jobs.into_iter().flat_map(|j| j.join().unwrap()).collect()
    });
    eprintln!("| arch | kernels of | publishes by kind | LD/ST .128 |");
    let mut errors = Vec::new();
    for (arch, name, r) in &results {
        eprintln!(
            "| {arch} | {name} | {:?} | {}/{} |",
            r.regions, r.vector_loads, r.vector_stores
        );
        errors.extend(r.errors.iter().map(|e| format!("{arch} {name}: {e}")));
        if *name == "device_all_ops" {
            // The doorbell is rung by host posters only: a GPU cannot make
            // the system call, and the proxy polls device rings.
            for kind in ["ring", "cq", "cntr", "msg", "signal", "lock"] {
                assert!(
                    r.regions.get(kind).copied().unwrap_or(0) > 0,
                    "{arch}: no {kind} publish found in device_all_ops"
                );
            }
            assert!(
                r.vector_loads > 0 && r.vector_stores > 0,
                "{arch}: no 16-byte loads and stores in device_all_ops"
            );
        }
    }
    assert!(
        errors.is_empty(),
        "{} unfenced publish(es), the first:\n{}",
        errors.len(),
        errors[..errors.len().min(5)].join("\n")
    );
}

/// A small kernel with one publish of each kind the mutations below touch.
const PROBE: &str = r#"
#include <fi_xpu/device.h>
extern "C" __global__ void sass_probe(struct fid_xpu_ep *ep, struct fid_xpu_cntr *c,
				      struct fid_xpu_cq *cq, const void *buf, size_t len,
				      void *peer, uint64_t addr, uint64_t key, uint64_t sig,
				      int64_t *out)
{
	struct fi_cq_tagged_entry e;
	out[0] = fi_xpu_write(ep, buf, len, 0, 0, peer, addr, key, 0, 0, FI_XPU_WORK_GROUP);
	out[1] = fi_xpu_cntr_add(c, 1, FI_XPU_WORK_ITEM);
	out[2] = fi_xpu_cq_read(cq, &e, 1, FI_XPU_WORK_ITEM);
	out[3] = fi_xpu_put_signal(ep, buf, len, 0, peer, addr, key, sig, key, 1,
				   FI_XPU_SIGNAL_SET, 0, 0, FI_XPU_WORK_ITEM);
	out[4] = fi_xpu_send(ep, buf, len, 0, 0, peer, 0, 0, FI_XPU_WORK_ITEM);
}
"#;

/// A copy of the tree's headers with `from` replaced by `to` in `file`,
/// in a directory named from what it holds (so a rerun finds its compile
/// in the compile cache); returns the directory to search first.
fn mutated_headers(file: &str, from: &str, to: &str) -> PathBuf {
    use std::hash::{Hash, Hasher};
    // The headers and their parts (arch/, device/, ofi/, shm/), by path
    // below include/fi_xpu; `file` is one of those paths.
    let top = root().join("include/fi_xpu");
    let (mut files, mut dirs) = (Vec::new(), vec![top.clone()]);
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            let rel = p.strip_prefix(&top).unwrap().to_owned();
            let mut text = std::fs::read_to_string(&p).unwrap();
            if rel == Path::new(file) {
                assert!(text.contains(from), "{file}: `{from}` not found");
                text = text.replacen(from, to, 1);
            }
            files.push((rel, text));
        }
    }
    files.sort();
    let mut h = std::collections::hash_map::DefaultHasher::new();
    files.hash(&mut h);
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sass-mutations");
    let inc = base.join(format!("{:016x}", h.finish()));
    if !inc.is_dir() {
        // Written aside and renamed: runs at once each write their own.
        let tmp = base.join(format!(
            ".{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(tmp.join("fi_xpu")).unwrap();
        for (rel, text) in &files {
            let path = tmp.join("fi_xpu").join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        if std::fs::rename(&tmp, &inc).is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
    }
    inc
}

/// The check fails when a fence is taken out of the headers: each mutation
/// (a publish's release order made relaxed, at the call site or in the
/// arch layer) is reported as an unfenced publish of its kind.
#[test]
fn sass_check_fails_without_a_fence() {
    let Some(cuda) = cuda_or_skip("nvcc") else {
        return;
    };
    let dir = scratch("sass-mutations");
    let src = stable_source("probe.cu", PROBE);
    let arch = "sm_90";
    let clean = check_sass(&marked_sass(
        &cuda,
        &src,
        arch,
        &[],
        &dir.join("clean.cubin"),
    ));
    assert!(clean.errors.is_empty(), "{:?}", clean.errors);
    for kind in ["ring", "cq", "cntr", "msg", "signal"] {
        assert!(
            clean.regions.contains_key(kind),
            "probe has no {kind} publish: {:?}",
            clean.regions
        );
    }
    // (file, text, replacement, the kind reported)
    let mutations: &[(&str, &str, &str, &str)] = &[
        (
            "ofi/ofi__post.h",
            "fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELEASE, FI_XPU_OFI_SYS);",
            "fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELAXED, FI_XPU_OFI_SYS);",
            "ring",
        ),
        (
            "shm/shm__base.h",
            "fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELEASE, FI_XPU_SHM_SYS);",
            "fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELAXED, FI_XPU_SHM_SYS);",
            "msg",
        ),
        // The publishes at the pair's scope: both forms lose their fence.
        (
            "shm/shm__base.h",
            "fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELEASE, ms);",
            "fi_xpu_arch_store_u64(p, v, FI_XPU_ARCH_RELAXED, ms);",
            "msg",
        ),
        (
            "shm/shm__signal.h",
            "FI_XPU_I_TEST_SIG_ORDER(FI_XPU_ARCH_RELEASE, t.ms)",
            "FI_XPU_I_TEST_SIG_ORDER(FI_XPU_ARCH_RELAXED, t.ms)",
            "signal",
        ),
        (
            "device_coop.h",
            "FI_XPU_ARCH_ACQ_REL, mscope));",
            "FI_XPU_ARCH_RELAXED, mscope));",
            "cntr",
        ),
        // The arch layer: every release store made relaxed.
        (
            "arch/arch__nvptx.h",
            "asm volatile(\"st.\" #SEM \".\" #SC",
            "asm volatile(\"st.relaxed.\" #SC",
            "ring",
        ),
    ];
    std::thread::scope(|s| {
        for (i, &(file, from, to, kind)) in mutations.iter().enumerate() {
            let (cuda, dir, src) = (&cuda, &dir, &src);
            s.spawn(move || {
                let inc = mutated_headers(file, from, to);
                let out = dir.join(format!("m{i}.cubin"));
                let r = check_sass(&marked_sass(
                    cuda,
                    src,
                    arch,
                    std::slice::from_ref(&inc),
                    &out,
                ));
                let want = format!("{kind} publish: `");
                assert!(
                    r.errors
                        .iter()
                        .any(|e| e.contains(&want) && e.contains("without a system-scope fence")),
                    "{file} with `{to}`: no unfenced {kind} publish reported: {:?}",
                    r.errors
                );
            });
        }
    });
}
