//! Build orchestration for fi_xpu: `cargo xtask <command>`.
//!
//! Cargo builds the Rust parts; this adds what cargo does not know about:
//! plugin file names the loader looks for, the MoE demo, man pages, and a
//! `make install`-style layout with a pkg-config file.
mod bench;
mod bench_shm;
mod gpu;
mod install;
mod man;
mod stage;
mod symbols;
mod unsafe_count;

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

type Result<T = ()> = std::result::Result<T, String>;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  build [--release]          build the workspace and stage provider plugins
  headers                    regenerate the generated headers (fi_xpu.h,
                             include/fi_xpu/{provider,version,wr}.h,
                             include/fi_xpu/ofi/ofi__types.h,
                             include/fi_xpu/shm/shm__types.h)
  man [--out DIR]            render man/*.md to roff (default DIR: target/man)
  install --prefix P [--libdir L] [--destdir D] [--release] [--debug-info]
                             install library, plugins, headers, man pages,
                             pkg-config and CMake files and fi_xpu_info under P
                             (L: lib (default), lib64, lib/x86_64-linux-gnu;
                             --debug-info: also the stripped debug information)
  demo [--release] [-- ARGS] MoE dispatch and combine between 2 processes on the
                             shm provider (examples/moe/moe.c -s; ARGS: its options)
  test                       everything CI checks: fmt, clippy, build, tests
                             (first installs .ci/packages and NVIDIA's compilers
                             where it can, else says how and stops)
  bench [--quick] [--proxy] [--moe] [--launch]
                             run the benchmarks and their baselines, print a table
                             (--proxy: only the ofi proxy's, benches/ofi_proxy.c;
                             --moe: only MoE dispatch+combine, examples/moe;
                             --launch: only the host launcher's, benches/launch.c)
  bench-shm [--quick] [--copy]
                             how the shm provider's costs grow (rate, processes,
                             memory per peer, lookups) and its large copies
                             (--copy: only the large copies)
  gpu-bundle [--out DIR] [--debug]
                             pack what a GPU machine without Rust needs to run
                             the GPU check (default DIR: target/gpu-bundle)
  gpu-check [--out DIR] [--debug]
                             build the bundle and run its gpu-check.sh here if
                             an NVIDIA GPU is present; otherwise say why not
  ci-deps                    install the system packages CI needs (.ci/run --deps-only)
  unsafe-count               count unsafe blocks, fns and impls per crate (tracked files)
  valgrind [CARGO TEST ARGS]  the tests with every C test program under valgrind's memcheck
                             (FI_XPU_TEST_VALGRIND=1; default: cargo test --workspace --tests)
  asan [CARGO TEST ARGS]      the tests with every C test program built with AddressSanitizer
                             and UBSan (FI_XPU_TEST_ASAN=1; default: all tests, no fail-fast)
  weak-order                 build, then the last step of `test`: the shm device tests in the
                             launcher's weak-ordering mode (FI_XPU_HOST_WEAK_ORDER=1)
";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    };
    let result = match cmd.as_str() {
        "build" => {
            Opts::parse(rest, &["--release"], &[]).and_then(|o| build(o.release()).map(drop))
        }
        "headers" => Opts::parse(rest, &[], &[]).and_then(|_| headers()),
        "man" => Opts::parse(rest, &[], &["--out"]).and_then(|o| {
            let out = o
                .value("--out")
                .map_or_else(|| target_dir().join("man"), abs);
            let pages = render_man(&out)?;
            println!(
                "rendered {} man page(s) into {}",
                pages.len(),
                out.display()
            );
            Ok(())
        }),
        "install" => Opts::parse(
            rest,
            &["--release", "--debug-info"],
            &["--prefix", "--destdir", "--libdir"],
        )
        .and_then(install::install),
        "demo" => demo(rest),
        "test" => Opts::parse(rest, &[], &[]).and_then(|_| test()),
        "bench" => {
            Opts::parse(rest, &["--quick", "--proxy", "--moe", "--launch"], &[]).and_then(|o| {
                bench::run(
                    build(true)?,
                    o.flag("--quick"),
                    o.flag("--proxy"),
                    o.flag("--moe"),
                    o.flag("--launch"),
                )
            })
        }
        "bench-shm" => Opts::parse(rest, &["--quick", "--copy"], &[])
            .and_then(|o| bench_shm::run(build(true)?, o.flag("--quick"), o.flag("--copy"))),
        "gpu-bundle" => {
            Opts::parse(rest, &["--debug"], &["--out"]).and_then(|o| gpu::bundle(&o).map(drop))
        }
        "gpu-check" => Opts::parse(rest, &["--debug"], &["--out"]).and_then(|o| gpu::check(&o)),
        "ci-deps" => Opts::parse(rest, &[], &[]).and_then(|_| {
            run(Command::new("bash")
                .arg(root().join(".ci/run"))
                .arg("--deps-only"))
        }),
        "unsafe-count" => Opts::parse(rest, &[], &[]).and_then(|_| unsafe_count::run(&root())),
        "valgrind" => valgrind(rest),
        "asan" => asan(rest),
        "weak-order" => Opts::parse(rest, &[], &[]).and_then(|_| {
            build(false)?;
            weak_order_tests()
        }),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {cmd}: error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Parsed `--flag` and `--option VALUE` arguments.
struct Opts {
    flags: Vec<String>,
    values: Vec<(String, String)>,
}

impl Opts {
    fn parse(args: &[String], flags: &[&str], options: &[&str]) -> Result<Opts> {
        let mut o = Opts {
            flags: Vec::new(),
            values: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            if flags.contains(&a.as_str()) {
                o.flags.push(a.clone());
            } else if let Some((k, v)) = a.split_once('=').filter(|(k, _)| options.contains(k)) {
                o.values.push((k.into(), v.into()));
            } else if options.contains(&a.as_str()) {
                let v = it.next().ok_or(format!("{a} needs a value"))?;
                o.values.push((a.clone(), v.clone()));
            } else {
                return Err(format!("unexpected argument `{a}`\n{USAGE}"));
            }
        }
        Ok(o)
    }

    fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    fn release(&self) -> bool {
        self.flag("--release")
    }

    fn value(&self, key: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), abs)
}

fn abs(p: impl AsRef<Path>) -> PathBuf {
    let p = p.as_ref();
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        env::current_dir().expect("current directory").join(p)
    }
}

fn profile(release: bool) -> &'static str {
    if release {
        "release"
    } else {
        "debug"
    }
}

fn cargo() -> Command {
    let mut c = Command::new(env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

/// `program arg...` as a user would type it, for messages.
fn describe(cmd: &Command) -> String {
    let program = Path::new(cmd.get_program());
    let mut words = vec![program
        .file_name()
        .unwrap_or(program.as_os_str())
        .to_string_lossy()];
    words.extend(cmd.get_args().map(|a| a.to_string_lossy()));
    words.join(" ")
}

fn run(cmd: &mut Command) -> Result {
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run `{}`: {e}", describe(cmd)))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{}` failed ({status})", describe(cmd)))
    }
}

fn stage_providers(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut staged = stage::stage(dir).map_err(|e| format!("staging {}: {e}", dir.display()))?;
    staged.extend(mpi_module(dir)?);
    Ok(staged)
}

/// The MPI bootstrap module in `dir`, where MPI is installed.
fn mpi_module(dir: &Path) -> Result<Option<PathBuf>> {
    stage::mpi_module(&root(), dir).map_err(|e| format!("the MPI bootstrap module: {e}"))
}

fn provider_artifacts(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    stage::provider_artifacts(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// `cargo build --workspace` plus plugin staging; returns `target/<profile>`.
fn build(release: bool) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.args(["build", "--workspace"]);
    if release {
        cmd.arg("--release");
    }
    run(&mut cmd)?;
    let dir = target_dir().join(profile(release));
    let staged = stage_providers(&dir)?;
    let names: Vec<String> = staged
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    println!(
        "built {}; staged provider(s): {}",
        dir.display(),
        if names.is_empty() {
            "none".into()
        } else {
            names.join(" ")
        }
    );
    Ok(dir)
}

fn headers() -> Result {
    run(cargo().env("FI_XPU_UPDATE_HEADERS", "1").args([
        "test",
        "--test",
        "tooling",
        "--",
        "headers::",
    ]))
}

/// Renders every `man/*.md` below `out`, and an alias page for every other
/// name a page documents; returns the files written.
fn render_man(out: &Path) -> Result<Vec<PathBuf>> {
    let dir = root().join("man");
    let mut sources: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension() == Some(OsStr::new("md")))
        .collect();
    sources.sort();
    let mut written = Vec::new();
    let mut listed = Vec::new();
    for src in sources {
        let file = src.file_name().unwrap().to_string_lossy().into_owned();
        let page = man::Page::from_file_name(&file)
            .ok_or(format!("{}: not named <name>.<section>.md", src.display()))?;
        let md = fs::read_to_string(&src).map_err(|e| format!("{}: {e}", src.display()))?;
        let names = man::check(&page, &md).map_err(|e| format!("{}: {e}", src.display()))?;
        let to = out.join(page.install_path());
        write_file(
            &to,
            man::render(&page, env!("CARGO_PKG_VERSION"), &md).as_bytes(),
            0o644,
        )?;
        written.push(to);
        listed.push((page, names));
    }
    for (alias, text) in man::aliases(&listed)? {
        let to = out.join(alias.install_path());
        write_file(&to, text.as_bytes(), 0o644)?;
        written.push(to);
    }
    Ok(written)
}

fn mkdir(dir: &Path) -> Result {
    fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    // The plugin loader refuses directories other users can write; never
    // inherit a permissive umask into an install tree.
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", dir.display()))
}

fn write_file(to: &Path, bytes: &[u8], mode: u32) -> Result {
    mkdir(to.parent().unwrap())?;
    // Replace rather than overwrite: an installed library may be mapped by a
    // running process.
    let _ = fs::remove_file(to);
    fs::write(to, bytes).map_err(|e| format!("write {}: {e}", to.display()))?;
    fs::set_permissions(to, fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", to.display()))
}

fn install_file(from: &Path, to: &Path, mode: u32) -> Result {
    let bytes = fs::read(from).map_err(|e| format!("read {}: {e}", from.display()))?;
    write_file(to, &bytes, mode)
}

fn symlink(target: &str, link: &Path) -> Result {
    let _ = fs::remove_file(link);
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| format!("symlink {} -> {target}: {e}", link.display()))
}

/// Every public header with its path relative to the include directory: the
/// generated host header `fi_xpu.h` at the top of the tree, the device and
/// provider headers under `include/fi_xpu/` (with the compatibility
/// directory `include/fi_xpu/compat/`).
fn public_headers() -> Result<Vec<(PathBuf, PathBuf)>> {
    fn walk(dir: &Path, v: &mut Vec<(PathBuf, PathBuf)>) -> Result {
        for entry in fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
            let path = entry.map_err(|e| e.to_string())?.path();
            if path.is_dir() {
                walk(&path, v)?;
            } else if path.extension() == Some(OsStr::new("h")) {
                let rel = path.strip_prefix(root().join("include")).unwrap();
                v.push((path.clone(), rel.to_path_buf()));
            }
        }
        Ok(())
    }
    let mut v = vec![(root().join("fi_xpu.h"), PathBuf::from("fi_xpu.h"))];
    walk(&root().join("include/fi_xpu"), &mut v)?;
    v.sort();
    Ok(v)
}

/// The demo's run of examples/moe/moe.c: two processes, one screen (-s),
/// enough iterations for steady figures; arguments after `--` follow these
/// and so override them (`-- -n 4 -8`).
const DEMO_ARGS: [&str; 7] = ["-s", "-n", "2", "-i", "20", "-W", "2"];

/// `cargo xtask demo`: MoE dispatch and combine (examples/moe) between
/// processes on the default provider, the device code on CPU threads.
fn demo(args: &[String]) -> Result {
    let (opts, extra) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[][..]),
    };
    let release = Opts::parse(opts, &["--release"], &[])?.release();
    let lib = build(release)?;
    let exe = lib.join("examples-c/moe");
    mkdir(exe.parent().unwrap())?;
    let cc = env::var_os("CC").unwrap_or_else(|| "cc".into());
    run(Command::new(cc)
        .args(["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", root().display()))
        .arg(format!("-I{}", root().join("include").display()))
        .arg(root().join("examples/moe/moe.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .args(["-lfi_xpu", "-lpthread"]))?;
    let mut cmd = Command::new(&exe);
    cmd.args(DEMO_ARGS).args(extra);
    println!("running {}\n", describe(&cmd));
    run(&mut cmd)
}

/// The tests that launch kernels through the host launcher, as a test
/// binary and a name filter (a file's module, or one test in it): the last
/// step of `xtask test` runs them again in the launcher's GPU-like mode.
const LAUNCHING_TESTS: [(&str, &str); 8] = [
    ("device", "device_host::"),
    ("device", "device_signal::"),
    ("device", "inflight::"),
    ("device", "wr::"),
    ("device", "moe_example::"),
    ("worlds", "world::"),
    ("ofi", "ofi_stress::launcher_scopes"),
    ("shm", "shm_multiproc::every_operation"),
];

/// Tests that run once more in the launcher's weak-ordering mode
/// (`FI_XPU_HOST_WEAK_ORDER=1`: C programs built for it, device stores
/// held back until a release of the right scope; fi_xpu_host_launch(3)),
/// by exact name: put-with-signal, fence and quiet, and every shm operation
/// (RMA, atomics, messages, CQs, counters) between processes, cooperative
/// copies at every scope, the CQ ring under contention, work requests, an
/// abort, MoE dispatch and combine, a world of four ranks, and one ofi run.
/// About 25 s.
const WEAK_ORDER_TESTS: [(&str, &str); 11] = [
    ("device", "device_signal::ordered_signals_on_shm"),
    ("device", "device_host::coop_reserve_and_copy_every_scope"),
    (
        "device",
        "device_host::every_work_item_issues_its_own_operation_shm",
    ),
    (
        "device",
        "device_host::shm_cq_ring_never_looks_full_with_room_and_reports_losses_exactly",
    ),
    (
        "device",
        "device_host::every_work_item_issues_its_own_operation_ofi_over_tcp",
    ),
    ("device", "wr::work_requests_on_shm"),
    ("device", "inflight::abort_ends_every_wait_on_shm"),
    ("device", "moe_example::moe_two_ranks_on_shm"),
    (
        "shm",
        "shm_multiproc::every_operation_two_processes_every_format",
    ),
    ("shm", "shm_multiproc::every_operation_four_processes"),
    ("worlds", "world::four_ranks_on_shm"),
];

fn weak_order_tests() -> Result {
    let mut binaries: Vec<&str> = WEAK_ORDER_TESTS.iter().map(|(b, _)| *b).collect();
    binaries.dedup();
    for binary in binaries {
        let names: Vec<&str> = WEAK_ORDER_TESTS
            .iter()
            .filter(|(b, _)| *b == binary)
            .map(|(_, f)| *f)
            .collect();
        // A renamed test would drop out of an --exact run silently.
        let listed = cargo()
            .args(["test", "--test", binary, "--", "--exact", "--list"])
            .args(&names)
            .output()
            .map_err(|e| format!("cannot list the tests of {binary}: {e}"))?;
        let listed = String::from_utf8_lossy(&listed.stdout);
        for name in &names {
            if !listed.lines().any(|l| l == format!("{name}: test")) {
                return Err(format!("weak-order: no test {name} in {binary}"));
            }
        }
        run(cargo()
            .args(["test", "--test", binary, "--", "--exact"])
            .args(&names)
            .env("FI_XPU_HOST_WEAK_ORDER", "1")
            .env(BUILT_ENV, target_dir().join(profile(false))))?;
    }
    Ok(())
}

/// Resident groups of that run: as many as the widest kernel that uses
/// `FI_XPU_DEVICE` scope (a cooperative launch on a GPU) has.
const GPU_LIKE_RESIDENT: &str = "4";

fn gpu_like_tests() -> Result {
    let mut binaries: Vec<&str> = LAUNCHING_TESTS.iter().map(|(b, _)| *b).collect();
    binaries.dedup();
    for binary in binaries {
        let filters = LAUNCHING_TESTS
            .iter()
            .filter(|(b, _)| *b == binary)
            .map(|(_, f)| *f);
        run(cargo()
            .args(["test", "--test", binary, "--"])
            .args(filters)
            .env("FI_XPU_HOST_GPU", GPU_LIKE_RESIDENT)
            .env(BUILT_ENV, target_dir().join(profile(false))))?;
    }
    Ok(())
}

/// `cargo test` (by default over the workspace's integration tests) with
/// every C test program the tests run under memcheck (see
/// tests/common/memcheck.rs).
fn valgrind(args: &[String]) -> Result {
    let mut cmd = cargo();
    cmd.arg("test").env("FI_XPU_TEST_VALGRIND", "1");
    if args.is_empty() {
        cmd.args(["--workspace", "--tests"]);
    } else {
        cmd.args(args);
    }
    run(&mut cmd)
}

/// Runs the tests (all of them, or the `cargo test` arguments given) with
/// every C program they build under AddressSanitizer and UBSan; any finding
/// fails its test. Leaks are not checked: the library keeps some memory
/// for the life of the process on purpose.
fn asan(args: &[String]) -> Result {
    let mut cmd = cargo();
    cmd.arg("test")
        .env("FI_XPU_TEST_ASAN", "1")
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0")
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1");
    if args.is_empty() {
        cmd.args(["--workspace", "--tests", "--no-fail-fast"]);
    } else {
        cmd.args(args);
    }
    run(&mut cmd)
}

/// The packages .ci/packages lists (comments and blank lines dropped).
fn ci_packages() -> Result<Vec<String>> {
    let path = root().join(".ci/packages");
    let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// Whether `cmd` runs and exits 0, its output discarded.
fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The packages of `wanted` that dpkg does not list as installed; `None`
/// where there is no dpkg to ask.
fn missing_packages(wanted: &[String]) -> Option<Vec<String>> {
    let o = Command::new("dpkg-query")
        .args(["-W", "-f=${binary:Package} ${db:Status-Status}\\n"])
        .args(wanted)
        .output()
        .ok()?;
    let listed = String::from_utf8_lossy(&o.stdout);
    let installed: Vec<&str> = listed
        .lines()
        .filter_map(|l| l.strip_suffix(" installed"))
        // Multi-arch packages are listed as name:arch.
        .map(|n| n.split(':').next().unwrap_or(n))
        .collect();
    Some(
        wanted
            .iter()
            .filter(|p| !installed.contains(&p.as_str()))
            .cloned()
            .collect(),
    )
}

/// Whether this user can install system packages: root, or sudo without a
/// password.
fn can_install_packages() -> bool {
    let uid = Command::new("id").arg("-u").output();
    uid.is_ok_and(|o| o.stdout.trim_ascii() == b"0")
        || succeeds(Command::new("sudo").args(["-n", "true"]))
}

/// Before anything is built: what the suite needs beyond Rust and a C
/// compiler is installed, or installed now where this user can (the
/// packages of .ci/packages, with .ci/run as CI does; NVIDIA's compilers
/// with .ci/install-cuda, which needs no root; rustfmt and clippy with
/// rustup). Where the packages cannot be installed from here, the error
/// names the one command that installs them.
fn suite_dependencies() -> Result {
    let ci_run = root().join(".ci/run");
    let missing = match missing_packages(&ci_packages()?) {
        Some(m) => m,
        None => {
            println!(
                "xtask test: no dpkg here, the packages of .ci/packages are not checked; \
                 tests fail where one is missing"
            );
            Vec::new()
        }
    };
    if !missing.is_empty() {
        if !can_install_packages() {
            return Err(format!(
                "the test suite needs system packages that are not installed: {}.\n\
                 Install them, and NVIDIA's compilers, with this command, then run \
                 `cargo xtask test` again:\n\n    sudo {} --deps-only\n",
                missing.join(" "),
                ci_run.display()
            ));
        }
        println!(
            "xtask test: installing {} (.ci/run --deps-only)",
            missing.join(" ")
        );
        // Also NVIDIA's compilers and the Rust components.
        return run(Command::new("bash").arg(&ci_run).arg("--deps-only"));
    }
    let install_cuda = root().join(".ci/install-cuda");
    let skip_matrix = env::var("FI_XPU_SKIP_DEVICE_MATRIX").is_ok_and(|v| v == "1");
    if !skip_matrix && !succeeds(Command::new("bash").arg(&install_cuda).arg("--check")) {
        println!("xtask test: installing NVIDIA's compilers (.ci/install-cuda)");
        run(Command::new("bash")
            .arg(&install_cuda)
            .stdout(std::process::Stdio::null()))?;
    }
    for (tool, component) in [("fmt", "rustfmt"), ("clippy", "clippy")] {
        if !succeeds(cargo().args([tool, "--version"])) {
            run(Command::new("rustup").args(["component", "add", component]))?;
        }
    }
    Ok(())
}

/// Tells the test binaries that the library and the providers are built and
/// staged in the directory it names (tests/common/mod.rs, `build`), so that
/// none runs `cargo build` again.
const BUILT_ENV: &str = "FI_XPU_TEST_BUILT";

fn test() -> Result {
    let start = Instant::now();
    suite_dependencies()?;
    let built = target_dir().join(profile(false));
    let steps: [(&str, &[&str]); 6] = [
        ("fmt", &["fmt", "--all", "--", "--check"]),
        (
            "clippy",
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        ),
        ("build", &[]),
        ("test", &["test", "--workspace"]),
        ("gpu-like", &[]),
        ("weak-order", &[]),
    ];
    let mut took = Vec::new();
    for (i, (name, args)) in steps.iter().enumerate() {
        println!("==> xtask test: step {}/{}: {name}", i + 1, steps.len());
        let step = Instant::now();
        let r = if *name == "build" {
            build(false).map(drop)
        } else if *name == "gpu-like" {
            gpu_like_tests()
        } else if *name == "weak-order" {
            weak_order_tests()
        } else {
            run(cargo().args(*args).env(BUILT_ENV, &built))
        };
        if let Err(e) = r {
            println!(
                "xtask test: FAILED at step {name} ({}/{}) after {}s",
                i + 1,
                steps.len(),
                start.elapsed().as_secs()
            );
            return Err(e);
        }
        took.push(format!("{name} {}s", step.elapsed().as_secs()));
    }
    println!(
        "xtask test: all {} steps passed in {}s ({})",
        steps.len(),
        start.elapsed().as_secs(),
        took.join(", ")
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let args: Vec<String> = ["--prefix", "/p", "--release", "--destdir=/d"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let o = Opts::parse(&args, &["--release"], &["--prefix", "--destdir"]).unwrap();
        assert!(o.release());
        assert_eq!(o.value("--prefix"), Some("/p"));
        assert_eq!(o.value("--destdir"), Some("/d"));
        assert!(Opts::parse(&args[..1], &[], &["--prefix"]).is_err());
        assert!(Opts::parse(&args[2..3], &[], &[]).is_err());
    }

    #[test]
    fn ci_packages_are_names_only() {
        let p = ci_packages().unwrap();
        assert!(p.iter().any(|n| n == "libfabric-dev"), "{p:?}");
        assert!(
            p.iter().all(|n| !n.is_empty() && !n.contains([' ', '#'])),
            "{p:?}"
        );
    }

    #[test]
    fn a_package_dpkg_does_not_know_is_missing() {
        let wanted = ["fi-xpu-no-such-package".to_string()];
        if let Some(m) = missing_packages(&wanted) {
            assert_eq!(m, wanted);
        }
    }

    #[test]
    fn staging_renames_plugins_only() {
        let dir = env::temp_dir().join(format!("xtask-stage-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        for f in [
            "libfi_xpu.so",
            "libfi_xpu_shm.so",
            "libfi_xpu_abi.rlib",
            "libfi_xpu_shm.d",
        ] {
            fs::write(dir.join(f), f).unwrap();
        }
        let staged = stage::stage(&dir).unwrap();
        assert_eq!(staged, [dir.join("libfi_xpu-shm.so")]);
        assert_eq!(fs::read_to_string(&staged[0]).unwrap(), "libfi_xpu_shm.so");
        fs::remove_dir_all(&dir).unwrap();
    }
}
