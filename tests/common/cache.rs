//! C programs and plugins built once per content: a compile's output is
//! kept under `target/c-cache/<hash>`, the hash taken over the compiler
//! (its path and `--version`), every argument, the content of every
//! argument that names a file (the sources), and of every header in the
//! directories the compile includes from (`-I`, and each source's own).
//! A second compile of the same content, in this test binary, another, or a
//! later run, takes the kept output. Concurrent builders are safe: each
//! compiles into a directory of its own and renames it into place; the
//! first rename wins and the others take its output.
#![allow(dead_code)]
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// What the caller gets at `out`.
#[derive(Clone, Copy, PartialEq)]
pub enum Place {
    /// A hard link to the kept file: for programs the caller runs and
    /// leaves as they are. (A copy is open for writing for a moment, and a
    /// child another thread forks in that moment makes running it fail
    /// with ETXTBSY.)
    Link,
    /// A copy: for files the caller may change (their mode, their bytes).
    Copy,
}

/// `target/c-cache`.
pub fn dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is target/tmp.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("c-cache")
}

/// Runs the compile `cmd` (every argument but `-o`) with its output at
/// `out`, unless the same content was compiled before; panics with the
/// compiler's messages when it fails (failures are not kept).
pub fn compile(cmd: &mut Command, out: &Path) {
    place(cmd, out, Place::Link)
}

/// As `compile`, with the output placed as `how` says.
pub fn place(cmd: &mut Command, out: &Path, how: Place) {
    let key = key(cmd);
    let kept = dir().join(&key).join("out");
    if !kept.is_file() {
        build(cmd, &key);
    }
    let _ = std::fs::remove_file(out);
    let placed = match how {
        Place::Link => std::fs::hard_link(&kept, out).or_else(|_| copy(&kept, out)),
        Place::Copy => copy(&kept, out),
    };
    placed.unwrap_or_else(|e| panic!("placing {} at {}: {e}", kept.display(), out.display()));
}

fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::copy(from, to).map(|_| ())
}

/// Compiles into a fresh directory and renames it to `c-cache/<key>`.
fn build(cmd: &mut Command, key: &str) {
    let tmp = fresh("build");
    cmd.arg("-o").arg(tmp.join("out"));
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !o.status.success() {
        let _ = std::fs::remove_dir_all(&tmp);
        panic!("cc failed: {cmd:?}\n{}", String::from_utf8_lossy(&o.stderr));
    }
    publish(&tmp, &dir().join(key));
}

/// A fresh, empty directory beside the kept ones, unique in the process
/// (`.<what>-<pid>-<n>`), for a compile to write into before `publish`.
fn fresh(what: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let tmp = dir().join(format!(
        ".{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    tmp
}

/// Renames a finished `fresh` directory to `kept`. Another builder of the
/// same content may have won: its output is the same, ours goes.
fn publish(tmp: &Path, kept: &Path) {
    if std::fs::rename(tmp, kept).is_err() {
        let _ = std::fs::remove_dir_all(tmp);
    }
}

/// The hash naming a compile's output.
fn key(cmd: &Command) -> String {
    let args: Vec<OsString> = cmd.get_args().map(|a| a.to_os_string()).collect();
    let mut parts: Vec<Vec<u8>> = vec![compiler_id(cmd.get_program())];
    let mut dirs: Vec<PathBuf> = Vec::new();
    for a in &args {
        parts.push(a.as_encoded_bytes().to_vec());
        let s = a.to_string_lossy();
        if let Some(inc) = s.strip_prefix("-I") {
            dirs.push(PathBuf::from(inc));
        } else if !s.starts_with('-') && Path::new(&*s).is_file() {
            parts.push(std::fs::read(&*s).unwrap_or_default());
            if let Some(parent) = Path::new(&*s).parent() {
                dirs.push(parent.to_path_buf());
            }
        }
    }
    for d in dirs {
        parts.push(headers_of(&d).into_bytes());
    }
    // Two 64-bit hashes with different seeds: 128 bits.
    let h = |seed: u8| {
        let mut h = DefaultHasher::new();
        seed.hash(&mut h);
        parts.hash(&mut h);
        h.finish()
    };
    format!("{:016x}{:016x}", h(1), h(2))
}

/// The compiler: its path as found, and what `--version` says (once per
/// compiler and process).
fn compiler_id(program: &std::ffi::OsStr) -> Vec<u8> {
    static IDS: Mutex<Vec<(OsString, Vec<u8>)>> = Mutex::new(Vec::new());
    let mut ids = IDS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, id)) = ids.iter().find(|(p, _)| p == program) {
        return id.clone();
    }
    let mut id = program.as_encoded_bytes().to_vec();
    if let Ok(o) = Command::new("sh")
        .arg("-c")
        .arg("command -v \"$0\"")
        .arg(program)
        .output()
    {
        let found = String::from_utf8_lossy(&o.stdout).trim().to_string();
        id.extend(
            std::fs::canonicalize(found)
                .unwrap_or_default()
                .as_os_str()
                .as_encoded_bytes(),
        );
    }
    if let Ok(o) = Command::new(program).arg("--version").output() {
        id.extend(o.stdout);
    }
    ids.push((program.to_os_string(), id.clone()));
    id
}

/// A hash of every header under `dir` (its path and content), once per
/// directory and process: the tree does not change while the tests run.
/// The build directory and version control's are not walked.
fn headers_of(dir: &Path) -> String {
    static SEEN: Mutex<Option<HashMap<PathBuf, String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(HashMap::new);
    if let Some(h) = seen.get(dir) {
        return h.clone();
    }
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name();
            if name == "target" || name.to_string_lossy().starts_with('.') {
                continue;
            }
            if p.is_dir() {
                walk(&p, files);
            } else if p
                .extension()
                .is_some_and(|x| ["h", "hpp", "cuh", "inc"].iter().any(|h| x == *h))
            {
                files.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(dir, &mut files);
    files.sort();
    let mut h = DefaultHasher::new();
    for f in &files {
        f.hash(&mut h);
        std::fs::read(f).unwrap_or_default().hash(&mut h);
    }
    let v = format!("{:016x}", h.finish());
    seen.insert(dir.to_path_buf(), v.clone());
    v
}

/// A compile whose text the caller reads as well as its output (a
/// compiler's report, the listing of the code it made), kept as
/// `compile` keeps outputs. The hash is taken over `cmd` (every argument
/// but the output's; its program, the files its arguments name and the
/// headers where they include from, as for `compile`) and `salt`
/// (anything else that makes the text: a disassembler's name). Unless the
/// same was kept before, `make` runs `cmd` with a fresh path for the
/// output and returns the text, panicking when the compile fails (nothing
/// is kept then). The output is placed at `out` as `Place::Link` places
/// it (the caller leaves it as it is); the text is returned.
pub fn kept(
    cmd: &mut Command,
    salt: &str,
    out: &Path,
    make: impl FnOnce(&mut Command, &Path) -> String,
) -> String {
    let key = format!("{}-{:016x}", key(cmd), {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        h.finish()
    });
    let kept = dir().join(&key);
    if !(kept.join("out").is_file() && kept.join("text").is_file()) {
        let tmp = fresh("kept");
        let text = make(cmd, &tmp.join("out"));
        std::fs::write(tmp.join("text"), &text).unwrap();
        publish(&tmp, &kept);
    }
    let _ = std::fs::remove_file(out);
    let from = kept.join("out");
    std::fs::hard_link(&from, out)
        .or_else(|_| copy(&from, out))
        .unwrap_or_else(|e| panic!("placing {} at {}: {e}", from.display(), out.display()));
    std::fs::read_to_string(kept.join("text")).unwrap()
}
