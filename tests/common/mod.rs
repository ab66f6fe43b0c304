//! Shared helpers of the integration tests: building the library, staging
//! provider plugins, compiling and running C programs that use the public
//! headers exactly as a user would.
#![allow(dead_code)]
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every public header in the tree with its path relative to the installed
/// include directory: `fi_xpu.h` (generated, at the top of the tree) and the
/// device and provider headers under `include/fi_xpu/`.
pub fn public_headers() -> Vec<(PathBuf, PathBuf)> {
    fn walk(dir: &Path, v: &mut Vec<(PathBuf, PathBuf)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, v);
            } else if p.extension().is_some_and(|x| x == "h") {
                let rel = p
                    .strip_prefix(root().join("include"))
                    .unwrap()
                    .to_path_buf();
                v.push((p, rel));
            }
        }
    }
    let mut v = vec![(root().join("fi_xpu.h"), PathBuf::from("fi_xpu.h"))];
    walk(&root().join("include/fi_xpu"), &mut v);
    v.sort();
    v
}

/// `target/<profile>` of this build.
pub fn lib_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is target/tmp; the profile directory sits beside it.
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let target = tmp.parent().unwrap().to_path_buf();
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    target.join(profile)
}

/// A fresh scratch directory, unique to this call: named from `name`, the
/// process id and a counter, as the tests of one binary run as threads of
/// one process and may ask for the same name (two tests building the same
/// program) at once.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A TCP address for a rendezvous (`FI_XPU_BOOTSTRAP_ADDR`) that no other
/// test of this process nor any other suite run uses: a loopback address
/// of its own in 127.0.0.0/8 (outside 127.0.*.*, from the process id and a
/// counter), with a port the kernel found free there. Between this call
/// and rank 0's bind only a listener on every address at that same port
/// can take it; `bind_failed` tells that case, to retry with a new one.
pub fn loopback_addr() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed) as u64;
    // FNV-1a over the pid and the counter, folded into 24 bits.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in (u64::from(std::process::id()) << 20 | n).to_le_bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let h = h ^ (h >> 24) ^ (h >> 48);
    let ip = std::net::Ipv4Addr::new(
        127,
        1 + (h % 254) as u8,
        (h >> 8) as u8,
        1 + ((h >> 16) % 254) as u8,
    );
    let l =
        std::net::TcpListener::bind((ip, 0)).unwrap_or_else(|e| panic!("cannot bind {ip}:0: {e}"));
    l.local_addr().unwrap().to_string()
}

/// Whether a rank 0's standard error says it could not listen at its
/// rendezvous address because something took the port meanwhile.
pub fn bind_failed(stderr: &[u8]) -> bool {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .any(|l| l.contains("bootstrap: rank 0 cannot listen at") && l.contains("in use"))
}

/// An exclusive lock on `<path>.lock`, held until the file is dropped: for
/// the few fixed scratch paths a test keeps between runs (to reuse what it
/// built), which two runs of the suite in one build directory would share.
pub fn lock(path: &Path) -> std::fs::File {
    use std::os::fd::AsRawFd;
    let mut name = path.as_os_str().to_os_string();
    name.push(".lock");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&name)
        .unwrap_or_else(|e| panic!("cannot open {name:?}: {e}"));
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(r, 0, "flock {name:?}: {}", std::io::Error::last_os_error());
    f
}

/// The name of the variable through which `cargo xtask test` says it has
/// built and staged the library and every in-tree provider (`cargo xtask
/// build`) into the directory it names, so that no test binary builds them
/// again.
pub const BUILT_ENV: &str = "FI_XPU_TEST_BUILT";

/// Builds libfi_xpu.so and every in-tree provider once per test binary, and
/// stages each provider as `libfi_xpu-<name>.so` beside libfi_xpu.so (the
/// loader's last search directory). Under `cargo xtask test`, which built
/// and staged them before running the tests (`FI_XPU_TEST_BUILT`), only
/// checks that they are there.
pub fn build() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = lib_dir();
        if std::env::var_os(BUILT_ENV).is_some_and(|d| Path::new(&d) == dir) {
            for f in ["libfi_xpu.so", "libfi_xpu-shm.so", "libfi_xpu-ofi.so"] {
                assert!(
                    dir.join(f).is_file(),
                    "{BUILT_ENV} names {} but {f} is not there",
                    dir.display()
                );
            }
            return dir;
        }
        let mut cmd = Command::new(env!("CARGO"));
        cmd.current_dir(root())
            .args(["build", "--workspace", "--lib"]);
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("cargo build");
        assert!(st.success(), "cargo build --workspace failed");
        stage_providers(&dir);
        stage::mpi_module(&root(), &dir).expect("building the MPI bootstrap module");
        dir
    })
}

#[path = "../../xtask/src/stage.rs"]
mod stage;

pub mod cache;
pub mod memcheck;
pub mod netns;
pub mod ofi;

/// Stages `dir` (plugins under the loader's names, the soname link).
pub fn stage_providers(dir: &Path) {
    stage::stage(dir).expect("staging the build directory");
}

/// The C compiler (`$CC`, else `cc`) with the flags of every C program of
/// the tests: C11, debug information, warnings as errors, the in-tree
/// headers.
fn cc_command() -> Command {
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args([
        "-std=c11",
        "-g",
        "-O1",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-D_GNU_SOURCE",
    ])
    .arg(format!("-I{}", root().display()))
    .arg(format!("-I{}", root().join("include").display()));
    cmd
}

/// Compiles C sources into `out` with warnings as errors, against the
/// in-tree headers and libfi_xpu.so. `extra` adds flags (sanitizers, -D...).
pub fn cc(sources: &[&Path], out: &Path, extra: &[&str]) {
    let lib = build();
    let mut cmd = cc_command();
    // `cargo xtask asan`: every C program under AddressSanitizer and
    // UBSan (the device code it inlines, which reads what peers write,
    // included), unless it asks for a sanitizer of its own.
    if asan_all() && !extra.iter().any(|f| f.starts_with("-fsanitize")) {
        cmd.args([
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
            "-fno-omit-frame-pointer",
        ]);
    }
    // `FI_XPU_HOST_WEAK_ORDER=1` (cargo xtask test's weak-ordering pass):
    // the device code is built for the launcher's weak-ordering mode, which
    // the same variable turns on in the program.
    if weak_order() && !extra.contains(&"-DFI_XPU_HOST_WEAK_ORDER") {
        cmd.arg("-DFI_XPU_HOST_WEAK_ORDER");
    }
    cmd.args(extra)
        .args(sources)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lfi_xpu", "-lpthread"]);
    cache::compile(&mut cmd, out);
}

/// A scratch directory that test programs run in when the test names no
/// other, so that nothing they write (crash dumps, logs) lands in the tree.
pub fn program_cwd() -> &'static Path {
    static CWD: OnceLock<PathBuf> = OnceLock::new();
    CWD.get_or_init(|| scratch("cwd"))
}

/// Runs a command to its end, in `program_cwd` unless it has a directory of
/// its own.
pub fn run(cmd: &mut Command) -> Output {
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(program_cwd());
    }
    if let Some(out) = memcheck::run(cmd) {
        return out;
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// As `run`; panics with the output unless the command exits 0.
pub fn run_ok(cmd: &mut Command) -> Output {
    let o = run(cmd);
    if !o.status.success() {
        panic!(
            "{cmd:?} failed with {}\n--- stdout\n{}\n--- stderr\n{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    o
}

/// Whether a tool is on PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether the tests run with the launcher's weak-ordering mode on
/// (`FI_XPU_HOST_WEAK_ORDER` set and not `0`): C programs are then built
/// for it.
pub fn weak_order() -> bool {
    std::env::var("FI_XPU_HOST_WEAK_ORDER").is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
}

/// Whether a test may run its program under valgrind: not when every C
/// program is built with AddressSanitizer (`cargo xtask asan`), which
/// valgrind cannot run (the test is skipped, saying so). Panics when
/// valgrind is missing.
pub fn valgrind_usable() -> bool {
    if asan_all() {
        eprintln!("skipped: the program is built with AddressSanitizer, which valgrind cannot run");
        return false;
    }
    assert!(
        have("valgrind"),
        "valgrind is missing: install it (.ci/run does)"
    );
    true
}

/// Whether `FI_XPU_TEST_ASAN=1` asks for every C program to be built with
/// AddressSanitizer and UBSan (`cargo xtask asan`), and the compiler can.
pub fn asan_all() -> bool {
    std::env::var("FI_XPU_TEST_ASAN").is_ok_and(|v| v == "1") && asan_works()
}

/// The `LD_PRELOAD` value that loads `lib` into a C test program: under
/// `cargo xtask asan` the AddressSanitizer runtime must come first in the
/// process's library list, or the program refuses to start.
pub fn preload(lib: &Path) -> String {
    if !asan_all() {
        return lib.display().to_string();
    }
    let o = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .arg("-print-file-name=libasan.so")
        .output()
        .expect("run cc -print-file-name");
    let asan = String::from_utf8_lossy(&o.stdout).trim().to_string();
    format!("{asan}:{}", lib.display())
}

/// Whether the C compiler can link with AddressSanitizer here.
pub fn asan_works() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| sanitizer_works("-fsanitize=address", "asan-probe", false))
}

/// Whether the C compiler builds an empty program with the sanitizer `flag`
/// (in the scratch directory `tag`) and, with `run`, whether it runs.
pub fn sanitizer_works(flag: &str, tag: &str, run: bool) -> bool {
    let dir = scratch(tag);
    let src = dir.join("p.c");
    std::fs::write(&src, "int main(void){return 0;}\n").unwrap();
    Command::new("cc")
        .arg(flag)
        .arg(&src)
        .arg("-o")
        .arg(dir.join("p"))
        .status()
        .is_ok_and(|s| s.success())
        && (!run
            || Command::new(dir.join("p"))
                .status()
                .is_ok_and(|s| s.success()))
}

/// Compiles the C test provider (tests/plugins/test_provider.c) into
/// `dir/file_name` with the given `-D` defines; returns the plugin's path.
pub fn test_provider(dir: &Path, file_name: &str, defines: &[&str]) -> PathBuf {
    let out = dir.join(file_name);
    let mut cmd = cc_command();
    cmd.args(["-shared", "-fPIC"])
        .args(defines)
        .arg(root().join("tests/plugins/test_provider.c"));
    // A copy: tests change a plugin's mode.
    cache::place(&mut cmd, &out, cache::Place::Copy);
    out
}

/// A log line without the pid, host and time it carries:
/// `fi_xpu:<pid>:<host>:<secs.micros>:<source>:<level>: <msg>` becomes
/// `fi_xpu:<source>:<level>: <msg>`. `None` for anything else.
pub fn log_body(line: &str) -> Option<String> {
    let rest = line.strip_prefix("fi_xpu:")?;
    let mut f = rest.splitn(4, ':');
    let (pid, host, time, tail) = (f.next()?, f.next()?, f.next()?, f.next()?);
    let (secs, micros) = time.split_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(pid) && !host.is_empty() && digits(secs) && micros.len() == 6 && digits(micros))
        .then(|| format!("fi_xpu:{tail}"))
}
