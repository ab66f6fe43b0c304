//! Worlds of 2, 4 and 8 processes (tests/c/world.c, one process per rank,
//! started here with FI_XPU_BOOTSTRAP_RANK, _SIZE and _ADDR): collective
//! windows, device operations naming peers by rank at every scope, device
//! barriers, refusals with their exact codes and a peer that dies.
use crate::common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Output};

fn program() -> PathBuf {
    common::ofi::program("world", &[])
}

/// A rendezvous address of this call's own (rank 0 binds it).
fn free_addr() -> String {
    common::loopback_addr()
}

/// Runs `n` ranks of `world MODE`, rank r with `env(r)` added; returns
/// every rank's output.
fn run_world(
    mode: &str,
    n: usize,
    env: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<Output> {
    run_world_with(&program(), mode, n, env)
}

/// As `run_world`, with the program `exe`.
fn run_world_with(
    exe: &PathBuf,
    mode: &str,
    n: usize,
    env: impl Fn(usize) -> Vec<(&'static str, String)>,
) -> Vec<Output> {
    // A port taken between free_addr and rank 0's bind (by a listener on
    // every address): the world is started again at another address.
    for _ in 0..3 {
        let addr = free_addr();
        let kids: Vec<_> = (0..n)
            .map(|r| {
                common::memcheck::spawn(
                    Command::new("timeout")
                        .arg("120")
                        .arg(exe)
                        .arg(mode)
                        .current_dir(exe.parent().unwrap())
                        .env("FI_XPU_BOOTSTRAP_ADDR", &addr)
                        .env("FI_XPU_BOOTSTRAP_RANK", r.to_string())
                        .env("FI_XPU_BOOTSTRAP_SIZE", n.to_string())
                        .env("FI_XPU_BOOTSTRAP_TIMEOUT_MS", "60000")
                        .env("FI_XPU_BOOTSTRAP_KEY", format!("world-test-{addr}"))
                        .env("FI_XPU_LOG_LEVEL", "warn")
                        .envs(env(r)),
                )
            })
            .collect();
        let outs: Vec<Output> = kids.into_iter().map(|k| k.wait_with_output()).collect();
        if !common::bind_failed(&outs[0].stderr) {
            return outs;
        }
        eprintln!("rank 0 could not listen at {addr}: starting the world again");
    }
    panic!("rank 0 could not listen at three fresh addresses");
}

/// Panics with every rank's output unless each exited 0 and printed
/// `world rank R MODE: ok`; returns the ranks' stdout.
fn all_ok(mode: &str, outs: &[Output]) -> Vec<String> {
    let texts: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .collect();
    let bad = outs.iter().enumerate().any(|(r, o)| {
        !o.status.success() || !texts[r].contains(&format!("world rank {r} {mode}: ok"))
    });
    if bad {
        let mut msg = String::new();
        for (r, o) in outs.iter().enumerate() {
            msg += &format!(
                "--- rank {r}: {}\n{}{}",
                o.status,
                texts[r],
                String::from_utf8_lossy(&o.stderr)
            );
        }
        panic!("world {mode} failed\n{msg}");
    }
    texts
}

/// `(rank, peer) -> (rma, amo)` from the `route` lines.
fn routes(texts: &[String]) -> HashMap<(usize, usize), (String, String)> {
    let mut m = HashMap::new();
    for t in texts {
        for l in t.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() == 7 && f[0] == "world" && f[3] == "route" {
                m.insert(
                    (f[2].parse().unwrap(), f[4].parse().unwrap()),
                    (
                        f[5].trim_start_matches("rma=").into(),
                        f[6].trim_start_matches("amo=").into(),
                    ),
                );
            }
        }
    }
    m
}

fn shm_only(_: usize) -> Vec<(&'static str, String)> {
    vec![("FI_XPU_PROVIDER", "shm".into())]
}

#[test]
fn two_ranks_on_shm() {
    let t = all_ok("ops", &run_world("ops", 2, shm_only));
    let r = routes(&t);
    assert_eq!(r.len(), 4);
    assert!(r.values().all(|(a, b)| a == "shm" && b == "shm"), "{r:?}");
}

#[test]
fn four_ranks_on_shm() {
    all_ok("ops", &run_world("ops", 4, shm_only));
}

#[test]
fn eight_ranks_on_shm() {
    all_ok("ops", &run_world("ops", 8, shm_only));
}

#[test]
fn windows_and_worlds_open_and_close_twice() {
    all_ok("twice", &run_world("twice", 3, shm_only));
}

#[test]
fn refusals_with_their_codes() {
    all_ok("bad", &run_world("bad", 2, shm_only));
}

#[test]
fn a_rank_that_dies_fails_the_others() {
    let outs = run_world("dead", 4, shm_only);
    let texts: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .collect();
    for r in 0..3 {
        assert!(
            outs[r].status.success() && texts[r].contains(&format!("world rank {r} dead: ok")),
            "rank {r}: {}\n{}{}",
            outs[r].status,
            texts[r],
            String::from_utf8_lossy(&outs[r].stderr)
        );
    }
    assert!(
        texts[3].contains("world rank 3 dead: leaving"),
        "{}",
        texts[3]
    );
}

fn ofi_tcp(_: usize) -> Vec<(&'static str, String)> {
    let mut v = common::ofi::over("tcp");
    v[0].1 = "shm,ofi".into();
    v
}

/// Ranks 0..n/2 on node "a", the others on node "b" (the same machine, so
/// cross pairs go over libfabric's tcp on the loopback interface).
fn two_nodes(n: usize) -> impl Fn(usize) -> Vec<(&'static str, String)> {
    move |r| {
        let mut v = ofi_tcp(r);
        v.push((
            "FI_XPU_WORLD_NODE",
            if r < n / 2 { "a" } else { "b" }.into(),
        ));
        v
    }
}

fn only_ofi(_: usize) -> Vec<(&'static str, String)> {
    common::ofi::over("tcp")
}

#[test]
fn four_ranks_on_ofi_alone() {
    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let t = all_ok("ops", &run_world("ops", 4, only_ofi));
    let r = routes(&t);
    assert!(r.values().all(|(a, b)| a == "ofi" && b == "ofi"), "{r:?}");
}

#[test]
fn four_ranks_on_two_named_nodes() {
    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let t = all_ok("ops", &run_world("ops", 4, two_nodes(4)));
    let r = routes(&t);
    for ((me, p), (rma, amo)) in &r {
        let same = (me < &2) == (p < &2);
        assert_eq!(rma, if same { "shm" } else { "ofi" }, "{me} -> {p}");
        // The world spans nodes: every atomic goes through ofi, loopback
        // included.
        assert_eq!(amo, "ofi", "{me} -> {p}");
    }
}

#[test]
fn device_world_header_compiles_as_cxx17_and_c11() {
    let dir = common::scratch("world-cxx");
    let body = "#include <fi_xpu/device_world.h>\n\
         int post(const struct fi_xpu_window_dev *w, const struct fi_xpu_world_dev *d, void *a) {\n\
         int rc = fi_xpu_world_put(w, 1, 0, a, 8, 0, FI_XPU_WORK_GROUP);\n\
         rc |= fi_xpu_world_fetch_atomic(w, 0, 8, a, 1, a, FI_UINT64, FI_SUM, 0, FI_XPU_SUBGROUP);\n\
         return rc | fi_xpu_world_barrier(d, -1, FI_XPU_WORK_ITEM);\n}\n";
    for (compiler, std, file) in [("c++", "-std=c++17", "t.cpp"), ("cc", "-std=c11", "t.c")] {
        if !common::have(compiler) {
            continue;
        }
        let src = dir.join(file);
        std::fs::write(&src, body).unwrap();
        common::run_ok(
            Command::new(compiler)
                .args([std, "-Wall", "-Wextra", "-Werror", "-Wpedantic", "-c"])
                .arg(format!("-I{}", common::root().display()))
                .arg(format!("-I{}", common::root().join("include").display()))
                .arg(&src)
                .arg("-o")
                .arg(dir.join(format!("{file}.o"))),
        );
    }
}

/// Whether `mpirun` can start processes here (as root it needs
/// --allow-run-as-root; a container may still refuse).
fn mpirun_works() -> Result<(), String> {
    if !common::have("mpirun") {
        return Err("mpirun is not installed".into());
    }
    let o = Command::new("timeout")
        .args([
            "60",
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "-np",
            "2",
            "true",
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "mpirun cannot start processes here: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

#[test]
fn mpi_bootstrap_under_mpirun() {
    if let Err(why) = mpirun_works() {
        eprintln!("{why}: skipping the MPI bootstrap test");
        return;
    }
    let exe = program();
    let module = common::lib_dir().join("fi_xpu_bootstrap_mpi.so");
    assert!(
        module.exists(),
        "mpirun is here but {} was not built",
        module.display()
    );
    for n in ["2", "4"] {
        let o = common::run(
            Command::new("timeout")
                .args([
                    "120",
                    "mpirun",
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "-np",
                    n,
                ])
                .args(["-x", "FI_XPU_BOOTSTRAP=mpi", "-x", "FI_XPU_PROVIDER=shm"])
                .arg(&exe)
                .arg("ops")
                .env("FI_XPU_BOOTSTRAP", "mpi")
                .env("FI_XPU_PROVIDER", "shm"),
        );
        let out = String::from_utf8_lossy(&o.stdout);
        let n: usize = n.parse().unwrap();
        for r in 0..n {
            assert!(
                o.status.success() && out.contains(&format!("world rank {r} ops: ok")),
                "mpirun -np {n}: {}\n{out}\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr)
            );
        }
        assert!(out.contains(&format!("of {n} on node 0 of 1")), "{out}");
    }
}

#[test]
fn mpi_bootstrap_without_its_module_is_enosys() {
    // A provider path with the plugins but not the module: the module is
    // looked for there first, then beside the library (where the build
    // put it), so point the library's own directory away by copying it.
    let dir = common::scratch("world-no-mpi");
    for f in ["libfi_xpu.so", "libfi_xpu-shm.so"] {
        std::fs::copy(common::lib_dir().join(f), dir.join(f)).unwrap();
    }
    std::os::unix::fs::symlink("libfi_xpu.so", dir.join("libfi_xpu.so.0")).unwrap();
    let src = dir.join("t.c");
    std::fs::write(
        &src,
        "#include <fi_xpu.h>\n#include <stdio.h>\n\
         int main(void) {\n\
         struct fi_xpu_world_attr a = { sizeof(a), -1, 0, \"mpi\", 0, 0, 0, 0, 0, 0 };\n\
         struct fid_xpu_world *w;\n\
         printf(\"rc %d\\n\", fi_xpu_world_open(&a, &w, NULL));\n return 0;\n}\n",
    )
    .unwrap();
    let exe = dir.join("t");
    common::cc(&[&src], &exe, &[]);
    let o = common::run_ok(
        Command::new(&exe)
            .env("LD_LIBRARY_PATH", &dir)
            .env("FI_XPU_PROVIDER_PATH", &dir)
            .env("FI_XPU_LOG_LEVEL", "none"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("rc -38"), "{out}");
}

/// `world open`'s return code per rank.
fn open_codes(outs: &[Output]) -> Vec<i32> {
    outs.iter()
        .map(|o| {
            let t = String::from_utf8_lossy(&o.stdout);
            t.lines()
                .find_map(|l| l.strip_prefix("world open rc "))
                .unwrap_or_else(|| panic!("no rc: {t}{}", String::from_utf8_lossy(&o.stderr)))
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

const FI_ETIMEDOUT: i32 = 110;
const FI_EKEYREJECTED: i32 = 129;

#[test]
fn nobody_at_the_rendezvous_times_out() {
    // Rank 1 of 2 alone: rank 0 never listens.
    let outs = run_world("open", 2, |r| {
        let mut v = shm_only(r);
        v.push(("FI_XPU_BOOTSTRAP_TIMEOUT_MS", "700".into()));
        if r == 0 {
            // Rank 0 is pointed at another job: it never listens where
            // rank 1 looks.
            v.push(("FI_XPU_BOOTSTRAP_ADDR", free_addr()));
        }
        v
    });
    assert_eq!(open_codes(&outs), [-FI_ETIMEDOUT, -FI_ETIMEDOUT]);
}

/// Strangers that connect to rank 0 first and say nothing, more than it
/// holds at once, do not stall the world: rank 0 starts, 80 silent
/// connections reach it, then rank 1 starts, and both open the world
/// within a bootstrap timeout shorter than one stranger's 5 s allowance to
/// speak.
#[test]
fn silent_strangers_do_not_stall_a_world() {
    let exe = program();
    let addr = free_addr();
    let rank = |r: usize| {
        common::memcheck::spawn(
            Command::new("timeout")
                .arg("120")
                .arg(&exe)
                .arg("open")
                .current_dir(exe.parent().unwrap())
                .env("FI_XPU_BOOTSTRAP_ADDR", &addr)
                .env("FI_XPU_BOOTSTRAP_RANK", r.to_string())
                .env("FI_XPU_BOOTSTRAP_SIZE", "2")
                .env("FI_XPU_BOOTSTRAP_TIMEOUT_MS", "4000")
                .env("FI_XPU_LOG_LEVEL", "warn")
                .envs(shm_only(r)),
        )
    };
    let zero = rank(0);
    let mut held = Vec::new();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while held.len() < 80 && std::time::Instant::now() < give_up {
        match std::net::TcpStream::connect(&addr) {
            Ok(s) => held.push(s),
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
    assert_eq!(held.len(), 80, "rank 0 did not listen");
    let one = rank(1);
    let outs = [zero.wait_with_output(), one.wait_with_output()];
    drop(held);
    assert_eq!(open_codes(&outs), [0, 0]);
}

#[test]
fn a_rank_of_another_job_is_refused() {
    let outs = run_world("open", 2, |r| {
        let mut v = shm_only(r);
        v.push(("FI_XPU_BOOTSTRAP_TIMEOUT_MS", "2000".into()));
        v.push((
            "FI_XPU_BOOTSTRAP_KEY",
            if r == 0 { "job-a" } else { "job-b" }.into(),
        ));
        v
    });
    // Rank 1 hears the refusal; rank 0 waits for the right rank 1 in vain.
    assert_eq!(open_codes(&outs), [-FI_ETIMEDOUT, -FI_EKEYREJECTED]);
}

#[test]
fn barrier_waits_for_writes_placed_late() {
    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    // ofi places every write's data 150 ms late (testing hook), atomics at
    // once: a barrier that did not wait for the writes' completion would
    // let its own atomics overtake them, and the data checked after it
    // would be missing.
    all_ok(
        "ops",
        &run_world("ops", 2, |r| {
            let mut v = only_ofi(r);
            v.push(("FI_XPU_OFI_TEST_DELAY_MS", "150".into()));
            v
        }),
    );
}

#[test]
fn refusals_and_operations_under_asan() {
    if !common::asan_works() {
        eprintln!("AddressSanitizer is not available: skipping");
        return;
    }
    let exe = common::ofi::program("world", &["-fsanitize=address", "-fno-omit-frame-pointer"]);
    for (mode, n) in [("bad", 2), ("twice", 2), ("ops", 3)] {
        all_ok(
            mode,
            &run_world_with(&exe, mode, n, |r| {
                let mut v = shm_only(r);
                v.push(("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0".into()));
                v
            }),
        );
    }
}

#[test]
fn eight_ranks_on_ofi_alone() {
    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: skipping");
        return;
    }
    let t = all_ok("ops", &run_world("ops", 8, only_ofi));
    let r = routes(&t);
    assert_eq!(r.len(), 64);
    assert!(r.values().all(|(a, b)| a == "ofi" && b == "ofi"), "{r:?}");
}
