//! Building the C test provider (`test_provider.c`) into plugin files, and
//! running `fi_xpu_info` against chosen plugin directories.
#![allow(dead_code)]
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::common::cache;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles the test provider with `defines` (e.g. `-DTP_SHORT`) into
/// `dir/libfi_xpu-<file_name>.so`, the way an out-of-tree provider is built:
/// the public header only, warnings as errors.
pub fn build_plugin(dir: &Path, file_name: &str, defines: &[String]) -> PathBuf {
    let out = dir.join(format!("libfi_xpu-{file_name}.so"));
    build_plugin_to(&out, defines);
    out
}

/// As `build_plugin`, to an arbitrary file name.
pub fn build_plugin_to(out: &Path, defines: &[String]) {
    let src = root().join("tests/plugins/test_provider.c");
    let mut cmd = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    cmd.args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-I{}", root().display()))
        .arg(format!("-I{}", root().join("include").display()))
        .args(defines)
        .arg(&src);
    // A copy: tests change a plugin's mode and bytes.
    cache::place(&mut cmd, out, cache::Place::Copy);
}

/// `-DTP_NAME="name"` and `-DTP_PROV_ID=id`.
pub fn named(name: &str, prov_id: u32) -> Vec<String> {
    vec![
        format!("-DTP_NAME=\"{name}\""),
        format!("-DTP_PROV_ID={prov_id}"),
    ]
}

/// A directory only the owner may write to (the loader refuses others).
pub fn private_dir(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    chmod(&dir, 0o755);
    dir
}

pub fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A copy of `fi_xpu_info` in a directory of its own. The tool links the
/// core statically, so the loader's last search directory is the tool's own;
/// the copy keeps the in-tree plugins staged beside the real one out of view.
/// Tests share this copy, so none may put plugins beside it; a test that
/// needs the tool's own directory makes its own copy with `copy_info_tool`.
pub fn info_tool() -> &'static Path {
    static TOOL: OnceLock<PathBuf> = OnceLock::new();
    TOOL.get_or_init(|| {
        // Once per process (a OnceLock): the process id makes it unique.
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("fi_xpu_info-bin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        copy_info_tool(&dir)
    })
}

/// Copies `fi_xpu_info` into `dir` (made private) and returns the copy.
pub fn copy_info_tool(dir: &Path) -> PathBuf {
    chmod(dir, 0o755);
    let tool = dir.join("fi_xpu_info");
    std::fs::copy(env!("CARGO_BIN_EXE_fi_xpu_info"), &tool).unwrap();
    tool
}

/// The directory `info_tool()` is in: searched last by the loader.
pub fn info_tool_dir() -> &'static Path {
    info_tool().parent().unwrap()
}

/// A log line without the pid, host and time it carries.
pub use crate::common::log_body;

/// What one run of `fi_xpu_info` printed.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The reason recorded for a refused path, from the `skipped:` list.
    pub fn reason(&self, path: &Path) -> Option<&str> {
        let head = format!("skipped: {}", path.display());
        let mut lines = self.stdout.lines();
        lines.find(|l| *l == head)?;
        lines.next()?.strip_prefix("    reason: ")
    }

    pub fn skipped(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("skipped: "))
            .collect()
    }

    pub fn providers(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("provider: "))
            .collect()
    }

    /// The indented lines below the line `head`, as they are.
    pub fn block(&self, head: &str) -> impl Iterator<Item = &str> + use<'_> {
        let head = head.to_owned();
        self.stdout
            .lines()
            .skip_while(move |l| *l != head)
            .skip(1)
            .take_while(|l| l.starts_with("    "))
    }

    /// The indented `key: value` lines of one provider's block.
    pub fn field(&self, provider: &str, key: &str) -> Option<&str> {
        let prefix = format!("    {key}: ");
        self.block(&format!("provider: {provider}"))
            .find_map(|l| l.strip_prefix(prefix.as_str()))
    }

    pub fn searched(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("searched: "))
            .collect()
    }

    /// The log lines of stderr as `log_body` gives them.
    pub fn log(&self) -> Vec<String> {
        self.stderr.lines().filter_map(log_body).collect()
    }

    /// Whether `line` (`fi_xpu:<source>:<level>: <msg>`) was logged.
    pub fn logged(&self, line: &str) -> bool {
        self.log().iter().any(|l| l == line)
    }

    /// The warning the loader logs for a refused plugin file.
    pub fn logged_plugin_refusal(&self, path: &Path, reason: &str) -> bool {
        self.logged(&format!(
            "fi_xpu:core:warn: {}: plugin refused: {reason}",
            path.display()
        ))
    }

    pub fn dump(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs the isolated `fi_xpu_info` with `FI_XPU_PROVIDER_PATH` = `path`
/// (None: unset), `FI_XPU_PROVIDER` = `filter` and the given arguments.
pub fn info(path: Option<&str>, filter: Option<&str>, args: &[&str]) -> Run {
    info_with(info_tool(), path, filter, args)
}

/// As `info`, running the given copy of the tool.
pub fn info_with(tool: &Path, path: Option<&str>, filter: Option<&str>, args: &[&str]) -> Run {
    info_env(tool.parent().unwrap(), tool, path, filter, args, &[])
}

/// As `info_with`, with `cwd` as the working directory and extra
/// environment variables.
pub fn info_env(
    cwd: &Path,
    tool: &Path,
    path: Option<&str>,
    filter: Option<&str>,
    args: &[&str],
    vars: &[(&str, &str)],
) -> Run {
    let mut cmd = Command::new(tool);
    cmd.current_dir(cwd)
        .args(args)
        .env_remove("FI_XPU_PROVIDER_PATH")
        .env_remove("FI_XPU_PROVIDER")
        .env_remove("FI_XPU_LOG_LEVEL")
        .env_remove("FI_XPU_LOG_PROV")
        .envs(vars.iter().copied());
    if let Some(p) = path {
        cmd.env("FI_XPU_PROVIDER_PATH", p);
    }
    if let Some(f) = filter {
        cmd.env("FI_XPU_PROVIDER", f);
    }
    let o = output_retrying_busy(&mut cmd);
    Run {
        code: o.status.code().expect("fi_xpu_info was killed by a signal"),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Runs `cmd`, retrying while its executable is busy: a copy of the tool made
/// by one test thread can still be open for writing in a child another
/// thread forked meanwhile, and exec then fails with ETXTBSY until that child
/// has exec'ed in turn.
fn output_retrying_busy(cmd: &mut Command) -> Output {
    for _ in 0..100 {
        match cmd.output() {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other.unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}")),
        }
    }
    panic!("{cmd:?} stayed busy")
}
