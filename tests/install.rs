//! `cargo xtask install`: the installed tree works on its own and fits the
//! tools its users build with. A C program built with nothing but
//! `pkg-config --cflags --libs fi_xpu`, or a CMake project with nothing but
//! `find_package(fi_xpu)`, finds the library, and the library its plugins;
//! the prefix still works after it is moved; the static library exports only
//! `fi_xpu_*`, the shared one versions its symbols; every binary is stripped
//! with its debug information installable beside it; `man` finds a page for
//! every exported function and every device operation.
use crate::common;

use crate::man;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Exercises the installed library the way an application does; exits
/// non-zero with a message on any unexpected result.
const PROGRAM: &str = r#"
#include <fi_xpu.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call, want)                                                   \
    do {                                                                    \
        int ret_ = (call);                                                  \
        if (ret_ != (want)) {                                               \
            fprintf(stderr, "%s = %d (%s), want %d\n", #call, ret_,         \
                    fi_xpu_strerror(ret_), (want));                         \
            return 1;                                                       \
        }                                                                   \
    } while (0)

int main(void)
{
    struct fi_xpu_info *info, *i, *shm = NULL;
    struct fid_xpu_domain *domain;
    struct fid_xpu_host_ctx *ctx;
    struct fi_xpu_ctx_open_attr attr = { .iface = FI_HMEM_SYSTEM, .device = 0, .ops = NULL };
    void *buf;
    int fd = -1;
    uint64_t offset = 1;

    if (fi_xpu_version() != FI_XPU_API_VERSION) {
        fprintf(stderr, "header and library versions differ\n");
        return 1;
    }
    CHECK(fi_xpu_getinfo(FI_XPU_API_VERSION, NULL, 0, &info), 0);
    for (i = info; i; i = i->next)
        if (strcmp(i->prov_name, "shm") == 0)
            shm = i;
    if (!shm) {
        fprintf(stderr, "the installed shm provider was not found\n");
        return 1;
    }
    CHECK(fi_xpu_domain(shm, NULL, &domain, NULL), 0);
    CHECK(fi_xpu_ctx_open(domain, &attr, &ctx, NULL), 0);
    CHECK(fi_xpu_alloc(ctx, 4096, 0, FI_XPU_ALLOC_DMABUF, &buf, &fd, &offset), 0);
    if (fd < 0 || offset != 0) {
        fprintf(stderr, "DMA-BUF allocation gave fd %d offset %llu\n", fd,
                (unsigned long long)offset);
        return 1;
    }
    memset(buf, 0x5a, 4096);
    close(fd);
    CHECK(fi_xpu_free(ctx, buf), 0);
    CHECK(fi_xpu_free(ctx, buf), -FI_EINVAL);
    CHECK(fi_xpu_close(&domain->fid), -FI_EBUSY);
    CHECK(fi_xpu_close(&ctx->fid), 0);
    CHECK(fi_xpu_close(&domain->fid), 0);
    fi_xpu_freeinfo(info);
    printf("installed fi_xpu works: %s\n", fi_xpu_strerror(-FI_EINVAL));
    return 0;
}
"#;

/// A kernel-side translation unit: the device headers alone, as nvcc or
/// hipcc would compile them, here as plain C for the host "XPU".
const KERNEL: &str = r#"
#include <fi_xpu/device.h>

int kernel_put(struct fid_xpu_ep *ep, const void *buf, size_t len, void *desc,
               void *dest, uint64_t addr, uint64_t key)
{
    return fi_xpu_write(ep, buf, len, desc, 0, dest, addr, key, NULL, 0,
                        FI_XPU_WORK_ITEM);
}
"#;

/// A consumer project that knows nothing but `find_package(fi_xpu)`.
const CMAKE_PROJECT: &str = r#"
cmake_minimum_required(VERSION 3.16)
project(fi_xpu_consumer C)
set(CMAKE_C_STANDARD 11)
set(CMAKE_C_STANDARD_REQUIRED ON)
add_compile_options(-Wall -Wextra -Werror -D_GNU_SOURCE)
find_package(fi_xpu ${WANT} REQUIRED)
add_executable(smoke_shared smoke.c)
target_link_libraries(smoke_shared PRIVATE fi_xpu::fi_xpu)
add_executable(smoke_static smoke.c)
target_link_libraries(smoke_static PRIVATE fi_xpu::fi_xpu_static)
add_library(kernel STATIC kernel.c)
target_link_libraries(kernel PRIVATE fi_xpu::device)
"#;

fn xtask_install(prefix: &Path, destdir: Option<&Path>, extra: &[&str]) {
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(common::root())
        .args(["run", "--quiet", "-p", "xtask", "--", "install", "--prefix"])
        .arg(prefix)
        .args(extra);
    if let Some(d) = destdir {
        cmd.arg("--destdir").arg(d);
    }
    if !cfg!(debug_assertions) {
        cmd.arg("--release");
    }
    common::run_ok(&mut cmd);
}

fn words(o: Output) -> Vec<String> {
    String::from_utf8(o.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

fn pkg_config(libdir: &Path, args: &[&str]) -> Vec<String> {
    pkg_config_of(libdir, "fi_xpu", args)
}

fn pkg_config_of(libdir: &Path, package: &str, args: &[&str]) -> Vec<String> {
    words(common::run_ok(
        Command::new("pkg-config")
            .env("PKG_CONFIG_PATH", libdir.join("pkgconfig"))
            .env_remove("PKG_CONFIG_LIBDIR")
            .args(args)
            .arg(package),
    ))
}

/// A path pkg-config printed (relative to `${pcfiledir}`), resolved.
fn resolved(flag: &str, prefix_flag: &str) -> PathBuf {
    let path = flag
        .strip_prefix(prefix_flag)
        .unwrap_or_else(|| panic!("{flag}"));
    std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs a program built against an installed prefix with an environment
/// that cannot point anywhere else (but `plugins`, for a statically linked
/// program of a moved prefix: it has no library directory to look beside);
/// checks what it printed and returns its log (info level: which plugin
/// files it loaded).
fn run_smoke(exe: &Path, plugins: Option<&Path>) -> String {
    let mut cmd = Command::new(exe);
    cmd.env_remove("LD_LIBRARY_PATH")
        .env_remove("FI_XPU_PROVIDER_PATH")
        .env_remove("FI_XPU_PROVIDER")
        .env("FI_XPU_LOG_LEVEL", "info");
    if let Some(dir) = plugins {
        cmd.env("FI_XPU_PROVIDER_PATH", dir);
    }
    let o = common::run_ok(&mut cmd);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out, "installed fi_xpu works: Invalid argument\n");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Compiles `PROGRAM` with exactly the given flags (nothing from the source
/// tree) and runs it; returns the program and its log.
fn build_and_run(
    dir: &Path,
    name: &str,
    flags: &[String],
    plugins: Option<&Path>,
) -> (PathBuf, String) {
    let src = dir.join("smoke.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    common::run_ok(
        Command::new(cc)
            .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"])
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .args(flags),
    );
    let log = run_smoke(&exe, plugins);
    (exe, log)
}

/// Builds and runs the smoke program against the prefix whose library
/// directory is `libdir`, shared and static, with pkg-config's flags only;
/// `moved`: the prefix is not where it was installed.
fn pkg_config_consumer(dir: &Path, libdir: &Path, moved: bool) -> String {
    let plugins = libdir.join("fi_xpu");
    let static_plugins = moved.then_some(plugins.as_path());
    std::fs::create_dir_all(dir).unwrap();
    let mut flags = pkg_config(libdir, &["--cflags", "--libs"]);
    // The run path the README gives: pkg-config's libdir variable.
    let rpath = pkg_config(libdir, &["--variable=libdir"]);
    assert_eq!(resolved(&rpath[0], ""), libdir, "{rpath:?}");
    flags.push(format!("-Wl,-rpath,{}", rpath[0]));
    let (exe, log) = build_and_run(dir, "smoke-shared", &flags, None);
    assert!(readelf_dynamic(&exe).contains("Shared library: [libfi_xpu.so.0]"));

    // libfi_xpu.a with the private libraries the .pc file lists: the
    // program needs no libfi_xpu.so at all.
    let flags: Vec<String> = pkg_config(libdir, &["--cflags", "--static", "--libs"])
        .into_iter()
        .flat_map(|f| {
            if f == "-lfi_xpu" {
                vec!["-Wl,-Bstatic".into(), f, "-Wl,-Bdynamic".into()]
            } else {
                vec![f]
            }
        })
        .collect();
    let (exe, _) = build_and_run(dir, "smoke-static", &flags, static_plugins);
    assert!(!readelf_dynamic(&exe).contains("libfi_xpu"));
    log
}

/// Configures, builds and runs the CMake consumer against `prefix`.
fn cmake_consumer(dir: &Path, prefix: &Path, libdir: &Path, moved: bool) -> String {
    let plugins = libdir.join("fi_xpu");
    let static_plugins = moved.then_some(plugins.as_path());
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("CMakeLists.txt"), CMAKE_PROJECT).unwrap();
    std::fs::write(src.join("smoke.c"), PROGRAM).unwrap();
    std::fs::write(src.join("kernel.c"), KERNEL).unwrap();
    let configure = |build: &Path, want: &str| {
        Command::new("cmake")
            .arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(build)
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
            .arg(format!("-DWANT={want}"))
            .env_remove("CMAKE_PREFIX_PATH")
            .output()
            .unwrap()
    };
    // A newer major than installed is refused.
    let o = configure(&dir.join("build-too-new"), "1.0");
    assert!(!o.status.success(), "find_package(fi_xpu 1.0) succeeded");
    let build = dir.join("build");
    let o = configure(&build, "0.1");
    assert!(
        o.status.success(),
        "cmake configure: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    common::run_ok(Command::new("cmake").arg("--build").arg(&build));
    let log = run_smoke(&build.join("smoke_shared"), None);
    let shared = readelf_dynamic(&build.join("smoke_shared"));
    assert!(
        shared.contains("Shared library: [libfi_xpu.so.0]"),
        "{shared}"
    );
    run_smoke(&build.join("smoke_static"), static_plugins);
    assert!(!readelf_dynamic(&build.join("smoke_static")).contains("libfi_xpu"));
    log
}

/// `file` (a library, archive or program with the core in it) names `dir`
/// as its installed provider directory, in the room the install writes
/// (src/provider/loader.rs, `INSTALLED_PROVIDER_DIR`).
fn assert_provider_dir(file: &Path, dir: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let bytes = std::fs::read(file).unwrap();
    let mut want = b"fi_xpu installed provider directory:".to_vec();
    want.extend_from_slice(dir.as_os_str().as_bytes());
    want.push(0);
    assert!(
        bytes.windows(want.len()).any(|w| w == want),
        "{} does not name {} as its provider directory",
        file.display(),
        dir.display()
    );
}

fn readelf_dynamic(file: &Path) -> String {
    let o = common::run_ok(Command::new("readelf").arg("-d").arg(file));
    String::from_utf8(o.stdout).unwrap()
}

fn section_names(file: &Path) -> String {
    let o = common::run_ok(Command::new("readelf").arg("-SW").arg(file));
    String::from_utf8(o.stdout).unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

/// The names `libfi_xpu.map` exports.
fn map_exports() -> BTreeSet<String> {
    let map = std::fs::read_to_string(common::root().join("libfi_xpu.map")).unwrap();
    map.lines()
        .filter_map(|l| l.trim().strip_suffix(';'))
        .filter(|n| n.starts_with("fi_xpu_"))
        .map(String::from)
        .collect()
}

/// `nm`'s defined global symbols of `file` (`-D`: the dynamic ones) as
/// `(type letter, name)`, versions stripped.
fn nm_globals(file: &Path, dynamic: bool) -> BTreeSet<(String, String)> {
    let mut cmd = Command::new("nm");
    cmd.args(["-g", "--defined-only"]);
    if dynamic {
        cmd.arg("-D");
    }
    let o = common::run_ok(cmd.arg(file));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let (name, kind) = (f.next()?, f.next()?);
            let name = name.split('@').next().unwrap();
            Some((kind.to_string(), name.to_string()))
        })
        .collect()
}

/// The device operations `<fi_xpu/device.h>` (its families under
/// `fi_xpu/device/`) and `<fi_xpu/device_world.h>` define.
fn device_operations() -> Vec<String> {
    let dir = common::root().join("include/fi_xpu");
    let mut files = vec![dir.join("device.h"), dir.join("device_world.h")];
    files.extend(
        std::fs::read_dir(dir.join("device"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "h")),
    );
    let h = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect::<Vec<_>>()
        .concat();
    // The operations are the functions the headers define (the name at the
    // start of a line after `FI_XPU_FUNC int`, or on the `FI_XPU_FUNC` line),
    // not what they call (provider functions), nor internal `fi_xpu_i_`
    // helpers.
    let mut ops: Vec<String> = h
        .lines()
        .filter_map(|l| {
            let rest = match l.strip_prefix("FI_XPU_FUNC") {
                Some(r) => &r[r.find("fi_xpu_")?..],
                None => l,
            };
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            (name.starts_with("fi_xpu_")
                && !name.starts_with("fi_xpu_i_")
                && rest[name.len()..].starts_with('('))
            .then_some(name)
        })
        .collect();
    ops.sort();
    ops.dedup();
    ops
}

/// `man -M <root> -w NAME...`: the file man shows for each name.
fn man_lookup(root: &Path, names: &[String]) -> Vec<String> {
    words(common::run_ok(
        Command::new("man")
            .arg("-M")
            .arg(root)
            .arg("-w")
            .args(names)
            .env_remove("MANPATH"),
    ))
}

#[test]
fn version_script_lists_every_export() {
    let lib = common::build().join("libfi_xpu.so");
    let exported: BTreeSet<String> = nm_globals(&lib, true)
        .into_iter()
        .filter(|(kind, _)| kind == "T")
        .map(|(_, name)| name)
        .collect();
    assert!(exported.contains("fi_xpu_getinfo"), "{exported:?}");
    assert_eq!(
        map_exports(),
        exported,
        "libfi_xpu.map must list exactly the functions the core exports"
    );
}

/// Paths, relative to a prefix, that libfabric installs: those of the
/// installed libfabric packages (when dpkg knows them) and the FI_XPU files
/// of libfabric's main branch.
fn libfabric_paths() -> std::collections::BTreeSet<PathBuf> {
    let mut set: std::collections::BTreeSet<PathBuf> = [
        "include/rdma/fi_xpu.h",
        "include/rdma/fi_xpu_device.h",
        "share/man/man3/fi_xpu.3",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let o = Command::new("dpkg")
        .args(["-L", "libfabric-dev", "libfabric1", "libfabric-bin"])
        .output();
    if let Ok(o) = o {
        for l in String::from_utf8_lossy(&o.stdout).lines() {
            if let Some(rel) = l.strip_prefix("/usr/") {
                set.insert(PathBuf::from(rel.trim_end_matches(".gz")));
            }
        }
    }
    set
}

fn installed_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.is_symlink() {
            installed_files(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().to_path_buf());
        }
    }
}

/// Nothing fi_xpu installs sits where libfabric installs a file, and
/// nothing goes under libfabric's `include/rdma/`.
fn assert_nothing_at_libfabric_paths(prefix: &Path) {
    let theirs = libfabric_paths();
    assert!(theirs.contains(Path::new("include/rdma/fi_xpu.h")));
    let mut ours = Vec::new();
    installed_files(prefix, prefix, &mut ours);
    assert!(ours.len() > 10, "{ours:?}");
    let clash: Vec<&PathBuf> = ours
        .iter()
        .filter(|p| {
            theirs.contains(*p)
                || theirs.contains(&PathBuf::from(p.to_string_lossy().trim_end_matches(".gz")))
                || p.starts_with("include/rdma")
        })
        .collect();
    assert!(
        clash.is_empty(),
        "installed over libfabric's files: {clash:?}"
    );
}

/// The installed examples build with nothing but their CMakeLists.txt and
/// `find_package(fi_xpu)`, under strict C11 with every warning an error,
/// and run from the build tree: hello, and MoE dispatch and combine over
/// shm and (with libfabric) ofi over tcp.
fn installed_examples(dir: &Path, prefix: &Path) {
    let src = prefix.join("share/fi_xpu/examples");
    let build = dir.join("build");
    common::run_ok(
        Command::new("cmake")
            .arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_PREFIX_PATH={}", prefix.display()))
            .arg("-DCMAKE_C_FLAGS=-Werror")
            .env_remove("CMAKE_PREFIX_PATH"),
    );
    let o = common::run_ok(Command::new("cmake").arg("--build").arg(&build));
    let log = String::from_utf8_lossy(&o.stdout);
    assert!(!log.contains("warning"), "{log}");
    let run = |exe: &str, args: &[&str]| {
        let o = common::run_ok(
            Command::new(build.join(exe))
                .args(args)
                .current_dir(&build)
                .env("FI_TCP_IFACE", "lo")
                .env_remove("LD_LIBRARY_PATH")
                .env_remove("FI_XPU_PROVIDER_PATH")
                .env_remove("FI_XPU_PROVIDER"),
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = run("two_process", &[]);
    assert!(out.ends_with("two_process: ok\n"), "{out}");
    let out = run("hello", &[]);
    assert!(out.ends_with("hello: ok\n"), "{out}");
    let out = run("moe", &["-s", "-T", "8", "-i", "1"]);
    assert!(out.contains("on every rank: ok\n"), "{out}");
    if common::ofi::have_libfabric() {
        let out = run(
            "moe",
            &["-n", "2", "-T", "8", "-i", "1", "-p", "ofi", "-f", "tcp"],
        );
        assert!(
            out.contains("prov=ofi/tcp dtype=bf16 T=8 H=7168 E=4 K=3: ok"),
            "{out}"
        );
    }
}

/// bin/fi_xpu_perf of the prefix: every test over shm in CSV with the
/// columns fi_xpu_perf(1) lists, one in the table format, every test over
/// ofi (libfabric's tcp) in JSON that a JSON parser reads, and usage with
/// exit status 2 for a bad option.
fn installed_perf(prefix: &Path) {
    let perf = |args: &[&str]| {
        Command::new(prefix.join("bin/fi_xpu_perf"))
            .args(args)
            .env("FI_TCP_IFACE", "lo")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("FI_XPU_PROVIDER_PATH")
            .env_remove("FI_XPU_PROVIDER")
            .output()
            .unwrap()
    };
    let ok = |o: Output| {
        assert!(
            o.status.success(),
            "fi_xpu_perf: {}\n{}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        // Not a terminal, and no -P: no progress line.
        assert_eq!(String::from_utf8_lossy(&o.stderr), "");
        String::from_utf8(o.stdout).unwrap()
    };

    let csv = ok(perf(&[
        "-o", "csv", "-s", "8", "-S", "16", "-n", "5", "-w", "1", "-T", "4",
    ]));
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some(
            "test,provider,size,iterations,latency_us,bandwidth_GBps,rate_Mops,verified,\
             baseline_latency_us,baseline_GBps,baseline_Mops"
        )
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let got: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[2])).collect();
    assert_eq!(
        got[..got.len() - 1],
        [
            ("write", "8"),
            ("write", "16"),
            ("read", "8"),
            ("read", "16"),
            ("atomic", "8"),
            ("send", "8"),
            ("send", "16"),
            ("put_signal", "8"),
            ("put_signal", "16"),
        ],
        "{csv}"
    );
    assert_eq!(got.last().unwrap().0, "moe", "{csv}");
    for r in &rows {
        assert_eq!(r.len(), 11, "{r:?}");
        assert_eq!(&r[1..2], ["shm"], "{r:?}");
        assert_eq!(r[3], "5", "{r:?}");
        assert!(r[4].parse::<f64>().unwrap() > 0.0, "{r:?}");
        // Bandwidth and rate where the test streams; put_signal is a
        // ping-pong, moe has no rate.
        let (bw, rate) = match r[0] {
            "put_signal" => (false, false),
            "moe" => (true, false),
            _ => (true, true),
        };
        for (col, measured) in [(5, bw), (6, rate)] {
            if measured {
                assert!(r[col].parse::<f64>().unwrap() >= 0.0, "{r:?}");
            } else {
                assert_eq!(r[col], "", "{r:?}");
            }
        }
        assert_eq!(r[7], "ok", "{r:?}");
        // No -B: no baseline.
        assert_eq!(r[8..], ["", "", ""], "{r:?}");
    }

    // The default table: a header and one row per size, of the header's
    // eight columns.
    let table = ok(perf(&[
        "-t", "send", "-s", "8", "-S", "4096", "-n", "5", "-w", "1",
    ]));
    let mut lines = table.lines();
    let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        head,
        [
            "test",
            "provider",
            "bytes",
            "iters",
            "latency_us",
            "GB/s",
            "Mops/s",
            "verified"
        ]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    let sizes: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    assert_eq!(
        sizes,
        ["8", "16", "32", "64", "128", "256", "512", "1024", "2048", "4096"],
        "{table}"
    );
    for r in &rows {
        assert_eq!(r[..2], ["send", "shm"], "{table}");
        assert_eq!(r[3], "5", "{table}");
        assert!(r[4..7].iter().all(|v| v.parse::<f64>().is_ok()), "{table}");
        assert_eq!(r[7], "ok", "{table}");
    }

    // Two invocations, one per rank, joined by the library's tcp
    // bootstrap (as a launcher starts them): rank 0 prints.
    let addr = common::loopback_addr();
    let ranks: Vec<_> = (0..2)
        .map(|r| {
            Command::new(prefix.join("bin/fi_xpu_perf"))
                .args(["-o", "csv", "-t", "write,put_signal", "-s", "8", "-S", "8"])
                .args(["-n", "5", "-w", "1"])
                .env("FI_XPU_BOOTSTRAP_ADDR", &addr)
                .env("FI_XPU_BOOTSTRAP_RANK", r.to_string())
                .env("FI_XPU_BOOTSTRAP_SIZE", "2")
                .env(
                    "FI_XPU_BOOTSTRAP_KEY",
                    format!("perf-{}", std::process::id()),
                )
                .env_remove("LD_LIBRARY_PATH")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<String> = ranks
        .into_iter()
        .map(|c| ok(c.wait_with_output().unwrap()))
        .collect();
    let rows: Vec<&str> = outs[0]
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(rows, ["write", "put_signal"], "{}", outs[0]);
    assert!(
        outs[0].lines().skip(1).all(|l| l.contains(",ok,")),
        "{}",
        outs[0]
    );
    assert_eq!(outs[1], "");

    // -P: the progress line on standard error, erased at the end.
    let o = perf(&["-P", "-t", "atomic", "-n", "5", "-w", "1", "-o", "csv"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("\rfi_xpu_perf: [1/1] atomic 8 bytes..."),
        "{err:?}"
    );
    assert!(err.ends_with('\r'), "{err:?}");

    let o = perf(&["-x"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    assert!(String::from_utf8_lossy(&o.stderr).contains("usage: fi_xpu_perf"));
    for bad in [
        &["-o", "xml"][..],
        &["-p", "verbs"],
        &["-t", "send2"],
        &["-s", "0"],
        &["x"],
    ] {
        let o = perf(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("usage: fi_xpu_perf"),
            "{bad:?}"
        );
    }

    if !common::ofi::have_libfabric() {
        eprintln!("libfabric is not installed: fi_xpu_perf over ofi skipped");
        return;
    }
    // Every test over ofi; -B: the host-driven libfabric baselines
    // (installed in libexec/fi_xpu where libfabric's headers are) beside
    // the figures they match.
    let json = ok(perf(&[
        "-p", "ofi", "-f", "tcp", "-o", "json", "-B", "-s", "8", "-S", "8", "-n", "3", "-w", "1",
        "-T", "4",
    ]));
    if common::have("python3") {
        let mut py = Command::new("python3")
            .args([
                "-c",
                "import json, sys\n\
                 for r in json.load(sys.stdin):\n\
                 \x20   print(r['test'], r['provider'], r['size'], r['verified'],\n\
                 \x20         r['baseline_latency_us'] is not None,\n\
                 \x20         r['baseline_Mops'] is not None, sorted(r))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        py.stdin.take().unwrap().write_all(json.as_bytes()).unwrap();
        let o = py.wait_with_output().unwrap();
        assert!(o.status.success(), "not JSON:\n{json}");
        let keys = "['bandwidth_GBps', 'baseline_GBps', 'baseline_Mops', \
                    'baseline_latency_us', 'iterations', 'latency_us', 'provider', \
                    'rate_Mops', 'size', 'test', 'verified']";
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!(
                "write ofi/tcp 8 True False True {keys}\n\
                 read ofi/tcp 8 True False False {keys}\n\
                 atomic ofi/tcp 8 True False False {keys}\n\
                 send ofi/tcp 8 True False False {keys}\n\
                 put_signal ofi/tcp 8 True True False {keys}\n\
                 moe ofi/tcp 344064 True True False {keys}\n"
            ),
            "{json}"
        );
    } else {
        assert!(json.starts_with("[\n") && json.ends_with("\n]\n"), "{json}");
        assert_eq!(json.matches("\"verified\": true").count(), 6, "{json}");
    }
}

/// The EXAMPLE of fi_xpu(7) is examples/two_process.c, which the install
/// test builds from the prefix and runs: the page shows a program that
/// compiles and works.
#[test]
fn the_overview_page_shows_the_installed_example() {
    let page = std::fs::read_to_string(common::root().join("man/fi_xpu.7.md")).unwrap();
    let src = std::fs::read_to_string(common::root().join("examples/two_process.c")).unwrap();
    let example = &page[page
        .find("\n# EXAMPLE\n")
        .expect("fi_xpu(7) has an EXAMPLE")..];
    let code = example
        .split_once("```c\n")
        .and_then(|(_, rest)| rest.split_once("```\n"))
        .map(|(code, _)| code)
        .expect("a ```c block in EXAMPLE");
    assert!(
        code == src,
        "man/fi_xpu.7.md's EXAMPLE differs from examples/two_process.c: copy the file into it"
    );
}

#[test]
fn installed_tree_works_alone() {
    for tool in ["pkg-config", "cmake", "man", "nm", "objcopy"] {
        assert!(
            common::have(tool),
            "{tool} is required (.ci/run installs it: pkg-config cmake man-db binutils)"
        );
    }
    // A fixed place, held: one suite run installs here at a time.
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("install-test");
    let _held = common::lock(&base);
    let prefix = base.join("prefix");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    xtask_install(&prefix, None, &[]);
    let lib = prefix.join("lib");

    // Library files, soname and links.
    let version = env!("CARGO_PKG_VERSION");
    let real = lib.join(format!("libfi_xpu.so.{version}"));
    assert!(readelf_dynamic(&real).contains("Library soname: [libfi_xpu.so.0]"));
    assert_eq!(
        std::fs::read_link(lib.join("libfi_xpu.so.0")).unwrap(),
        Path::new(&format!("libfi_xpu.so.{version}"))
    );
    assert_eq!(
        std::fs::read_link(lib.join("libfi_xpu.so")).unwrap(),
        Path::new("libfi_xpu.so.0")
    );
    let shm = lib.join("fi_xpu/libfi_xpu-shm.so");
    assert!(shm.is_file(), "{} missing", shm.display());
    for file in [
        real.clone(),
        lib.join("libfi_xpu.a"),
        prefix.join("bin/fi_xpu_info"),
    ] {
        assert_provider_dir(&file, &lib.join("fi_xpu"));
    }
    // The loader refuses anything group- or world-writable.
    assert_eq!(mode(&lib.join("fi_xpu")), 0o755);
    assert_eq!(mode(&shm), 0o755);

    // The static library: only the exported functions are global.
    let archive = nm_globals(&lib.join("libfi_xpu.a"), false);
    let foreign: Vec<_> = archive
        .iter()
        .filter(|(_, n)| !n.starts_with("fi_xpu_"))
        .collect();
    assert!(foreign.is_empty(), "libfi_xpu.a exports {foreign:?}");
    let names: BTreeSet<String> = archive.into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, map_exports());

    // The shared library: every exported function carries the version node.
    let o = common::run_ok(Command::new("objdump").arg("-T").arg(&real));
    let table = String::from_utf8_lossy(&o.stdout);
    for name in map_exports() {
        let line = table
            .lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .unwrap_or_else(|| panic!("{name} not exported:\n{table}"));
        assert!(line.contains(" FI_XPU_0.1 "), "{line}");
    }

    // Binaries are stripped and name their separate debug information,
    // which this install left out.
    for file in [
        &real,
        &shm,
        &prefix.join("bin/fi_xpu_info"),
        &prefix.join("bin/fi_xpu_perf"),
    ] {
        let s = section_names(file);
        assert!(
            !s.contains(".debug_info"),
            "{} not stripped",
            file.display()
        );
        assert!(s.contains(".gnu_debuglink"), "{}", file.display());
        let debug = file.parent().unwrap().join(".debug");
        assert!(!debug.exists(), "{}", debug.display());
    }

    // pkg-config: paths relative to the .pc file, the prefix's own.
    let cflags = pkg_config(&lib, &["--cflags"]);
    assert_eq!(cflags.len(), 1, "{cflags:?}");
    assert_eq!(resolved(&cflags[0], "-I"), prefix.join("include"));
    // The device flags add the compatibility directory, where
    // <rdma/fi_xpu_device.h> is fi_xpu's device header: a kernel written for
    // libfabric's header compiles against the installed tree with them.
    let dflags = pkg_config_of(&lib, "fi_xpu-device", &["--cflags"]);
    assert_eq!(dflags.len(), 2, "{dflags:?}");
    assert_eq!(resolved(&dflags[0], "-I"), prefix.join("include"));
    assert_eq!(
        resolved(&dflags[1], "-I"),
        prefix.join("include/fi_xpu/compat")
    );
    common::run_ok(
        Command::new("c++")
            .args(["-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only"])
            .args(["-x", "c++"])
            .args(&dflags)
            .arg(common::root().join("tests/c/upstream_kernel.c")),
    );
    let libs = pkg_config(&lib, &["--libs"]);
    assert_eq!(libs.len(), 2, "{libs:?}");
    assert_eq!(resolved(&libs[0], "-L"), lib);
    assert_eq!(libs[1], "-lfi_xpu");
    assert_eq!(pkg_config(&lib, &["--modversion"]), [version]);
    let private = pkg_config(&lib, &["--libs", "--static"]);
    assert!(private.contains(&"-lpthread".to_string()), "{private:?}");

    let log = pkg_config_consumer(&base.join("pc"), &lib, false);
    assert!(log.contains(&format!("from {}", shm.display())), "{log}");
    let log = cmake_consumer(&base.join("cmake"), &prefix, &lib, false);
    assert!(log.contains(&format!("from {}", shm.display())), "{log}");
    installed_examples(&base.join("examples"), &prefix);
    installed_perf(&prefix);

    // fi_xpu_info finds the installed plugin.
    let o = common::run_ok(
        Command::new(prefix.join("bin/fi_xpu_info"))
            .env_remove("FI_XPU_PROVIDER_PATH")
            .env_remove("FI_XPU_PROVIDER"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("provider: shm"), "{out}");
    assert!(out.contains(&shm.display().to_string()), "{out}");

    assert_nothing_at_libfabric_paths(&prefix);

    // fi_xpu_info -e: every variable the core and the installed providers
    // read, with its default.
    let o = common::run_ok(
        Command::new(prefix.join("bin/fi_xpu_info"))
            .arg("-e")
            .env_remove("FI_XPU_PROVIDER_PATH")
            .env_remove("FI_XPU_PROVIDER"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    for (var, owner, default) in [
        ("FI_XPU_PROVIDER_PATH", "core", "(unset)"),
        ("FI_XPU_PROVIDER", "core", "(unset)"),
        ("FI_XPU_LOG_LEVEL", "core", "warn"),
        ("FI_XPU_LOG_PROV", "core", "(unset)"),
        ("FI_XPU_HUGE_PAGES", "core", "try"),
        ("FI_XPU_SHM_HEAP_SIZE", "shm", "8388608"),
        ("FI_XPU_OFI_PROVIDER", "ofi", "(unset)"),
        ("FI_XPU_OFI_PROGRESS_THREADS", "ofi", "1"),
    ] {
        let block = format!("env: {var}\n    owner: {owner}\n    default: {default}\n");
        assert!(out.contains(&block), "{block}not in:\n{out}");
    }

    // Headers, byte for byte, and one rendered man page per source.
    for (p, rel) in common::public_headers() {
        let installed = prefix.join("include").join(rel);
        assert_eq!(
            std::fs::read(&installed).unwrap(),
            std::fs::read(&p).unwrap(),
            "{}",
            installed.display()
        );
    }
    let man_root = prefix.join("share/man");
    let mut pages = 0;
    for e in std::fs::read_dir(common::root().join("man")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        let Some(page) = man::Page::from_file_name(&name) else {
            continue;
        };
        let installed = man_root.join(page.install_path());
        let text = std::fs::read_to_string(&installed)
            .unwrap_or_else(|e| panic!("{}: {e}", installed.display()));
        assert!(text.contains(".SH \"NAME\""), "{}", installed.display());
        pages += 1;
    }
    assert!(pages >= 4, "only {pages} man pages");

    // man finds a page for every exported function and device operation:
    // the page that documents it, through its alias page.
    let ops = device_operations();
    assert!(ops.contains(&"fi_xpu_write".to_string()), "{ops:?}");
    assert!(ops.contains(&"fi_xpu_world_barrier".to_string()), "{ops:?}");
    assert!(!ops.iter().any(|o| o.starts_with("fi_xpu_i_")), "{ops:?}");
    let names: Vec<String> = map_exports().into_iter().chain(ops).collect();
    let found = man_lookup(&man_root, &names);
    assert_eq!(found.len(), names.len(), "{names:?} -> {found:?}");
    for (name, want) in [
        ("fi_xpu_free", "man3/fi_xpu_alloc.3"),
        ("fi_xpu_cq_open", "man3/fi_xpu_ctx_open.3"),
        ("fi_xpu_write", "man3/fi_xpu_device.3"),
    ] {
        let path = &man_lookup(&man_root, &[name.to_string()])[0];
        assert_eq!(*path, man_root.join(want).display().to_string(), "{name}");
        let o = common::run_ok(
            Command::new("man")
                .arg("-M")
                .arg(&man_root)
                .args(["-P", "cat", name])
                .env("MANWIDTH", "200")
                .env_remove("MANPATH"),
        );
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains(name), "man {name}:\n{text}");
        assert!(text.contains("NAME"), "man {name}:\n{text}");
    }

    // A staged install with a multiarch libdir and the debug information,
    // written below DESTDIR for the final prefix, then moved elsewhere as a
    // whole: it still works from where it lies.
    let final_prefix = base.join("multiarch");
    let destdir = base.join("stage");
    xtask_install(
        &final_prefix,
        Some(&destdir),
        &["--libdir", "lib/x86_64-linux-gnu", "--debug-info"],
    );
    let staged = destdir.join(final_prefix.strip_prefix("/").unwrap());
    let moved = base.join("moved");
    std::fs::rename(&staged, &moved).unwrap();
    let lib = moved.join("lib/x86_64-linux-gnu");
    let shm = lib.join("fi_xpu/libfi_xpu-shm.so");
    assert!(shm.is_file());
    assert!(!moved.join("lib/fi_xpu").exists());
    let pc = std::fs::read_to_string(lib.join("pkgconfig/fi_xpu.pc")).unwrap();
    assert!(!pc.contains(&base.display().to_string()), "{pc}");
    // The final prefix's directory, not the staging one.
    let final_dir = final_prefix.join("lib/x86_64-linux-gnu/fi_xpu");
    for file in [
        lib.join(format!("libfi_xpu.so.{version}")),
        lib.join("libfi_xpu.a"),
    ] {
        assert_provider_dir(&file, &final_dir);
    }
    for file in [
        lib.join(format!("libfi_xpu.so.{version}")),
        shm.clone(),
        moved.join("bin/fi_xpu_info"),
    ] {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let dbg = file.parent().unwrap().join(format!(".debug/{name}.debug"));
        assert!(
            section_names(&dbg).contains(".debug_info"),
            "{}",
            dbg.display()
        );
    }
    // A copy of the first prefix elsewhere, the original still in place:
    // the copy's plugins come from beside its own library, and the
    // original's at the installed directory (the same files) are skipped
    // without a warning.
    let relocated = base.join("relocated");
    common::run_ok(Command::new("cp").arg("-a").arg(&prefix).arg(&relocated));
    let rlib = relocated.join("lib");
    let rshm = rlib.join("fi_xpu/libfi_xpu-shm.so");
    let log = pkg_config_consumer(&base.join("pc-relocated"), &rlib, true);
    assert!(log.contains(&format!("from {}", rshm.display())), "{log}");
    assert!(!log.contains("duplicate provider name"), "{log}");
    assert!(!log.contains("plugin refused"), "{log}");

    // Neither the original prefix nor the installed directory serves the moved
    // tree: its plugins come from beside its library.
    std::fs::rename(&prefix, base.join("prefix-hidden")).unwrap();
    let log = pkg_config_consumer(&base.join("pc-moved"), &lib, true);
    assert!(log.contains(&format!("from {}", shm.display())), "{log}");
    let log = cmake_consumer(&base.join("cmake-moved"), &moved, &lib, true);
    assert!(log.contains(&format!("from {}", shm.display())), "{log}");

    // The original removed: the copy still finds its own plugins, and so
    // does its fi_xpu_info, which has the core linked in statically (it
    // looks in ../lib*/fi_xpu from its own directory).
    std::fs::remove_dir_all(base.join("prefix-hidden")).unwrap();
    let log = pkg_config_consumer(&base.join("pc-relocated-alone"), &rlib, true);
    assert!(log.contains(&format!("from {}", rshm.display())), "{log}");
    let o = common::run_ok(
        Command::new(relocated.join("bin/fi_xpu_info"))
            .env_remove("FI_XPU_PROVIDER_PATH")
            .env_remove("FI_XPU_PROVIDER")
            .env("FI_XPU_LOG_LEVEL", "info"),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("provider: shm"), "{out}\n{err}");
    assert!(out.contains(&rshm.display().to_string()), "{out}\n{err}");
    assert!(!err.contains("duplicate provider name"), "{err}");
}
