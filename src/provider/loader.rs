//! Finds, opens and checks provider plugins (`libfi_xpu-<name>.so`).
//!
//! Search order: `FI_XPU_PROVIDER_PATH` (colon-separated), `fi_xpu/`
//! beside the loaded fi_xpu library (the installed layout, wherever the
//! prefix was moved to; for a program the core is linked into statically,
//! also `../lib*/fi_xpu` from the program's directory), the directory
//! the install wrote into this file (`INSTALLED_PROVIDER_DIR`), then the
//! directory of the library itself.
//! A second copy of a loaded plugin (the same bytes) is skipped with a
//! debug line; a different file of a loaded name is refused. Every refusal is logged with its reason
//! and recorded for `fi_xpu_info`; none aborts the process. Plugins are never unloaded.
//! Relative directories in the path are refused: they would make the
//! plugins depend on the working directory. Each file is opened and checked
//! once and loaded through that descriptor (`plugin_file`).
use super::plugin_file::{self, PluginFile};
use crate::dl::Library;
use crate::error::strerror;
use crate::filter::Filter;
use crate::fork::{self, ForkSafe, Rank};
use crate::param;
use crate::{debug, info, warn};
use fi_xpu_abi::*;
use std::ffi::{c_void, CStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, OnceLock};

/// A loaded, checked and initialised provider.
pub struct Provider {
    pub name: String,
    pub path: PathBuf,
    desc: &'static fi_xpu_prov_desc,
    handle: usize,
}

// SAFETY: the descriptor is immutable static data of a plugin that is never
// unloaded, and plugins must accept calls from any thread (plugin ABI rule).
unsafe impl Send for Provider {}
// SAFETY: as above; the core never mutates the descriptor.
unsafe impl Sync for Provider {}

impl Provider {
    pub fn desc(&self) -> &fi_xpu_prov_desc {
        self.desc
    }

    /// The provider's own handle from `init`.
    pub fn handle(&self) -> super::handle::Handle {
        super::handle::Handle::from_raw(self.handle as *mut c_void)
    }

    pub fn log(&self, level: i32, msg: &str) {
        crate::log::write(level, &self.name, msg);
    }
}

/// A plugin that was found but not used, and why.
#[derive(Clone, Debug)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

#[derive(Default)]
pub struct Providers {
    pub loaded: Vec<Arc<Provider>>,
    pub skipped: Vec<Skipped>,
    pub searched: Vec<PathBuf>,
}

/// The provider listed first when it is usable: it needs no service,
/// device or network.
pub const DEFAULT_PROVIDER: &str = "shm";

impl Providers {
    /// Indexes into `loaded` in the order `fi_xpu_getinfo` lists them: the
    /// default provider first, the others in load order.
    pub fn listing_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.loaded.len()).collect();
        order.sort_by_key(|&i| self.loaded[i].name != DEFAULT_PROVIDER);
        order
    }
}

/// The providers of this process, loaded on first use.
///
/// Loaded by the first thread that needs them, outside any lock: a child
/// forked while another thread of its parent was loading them (a thread it
/// does not have) loads them itself, where a `OnceLock` being initialised
/// would have made its first call wait forever.
///
/// `services` is the table each plugin's `init` receives (the C API's,
/// `capi::services`); the first load's is the one used.
pub fn providers(services: &'static fi_xpu_core) -> &'static Providers {
    if let Some(p) = LOADED.get() {
        return p;
    }
    let mut st = LOADING.lock(Loading::default);
    loop {
        if let Some(p) = LOADED.get() {
            return p;
        }
        if !st.busy {
            break;
        }
        st = CHANGED.wait(st).unwrap_or_else(|e| e.into_inner());
    }
    st.busy = true;
    drop(st);
    let done = NotBusy;
    let p: &'static Providers = Box::leak(Box::new(load_all(services)));
    // Set under the lock, so that no fork sees it half set.
    let held = LOADING.lock(Loading::default);
    let _ = LOADED.set(p);
    drop(held);
    drop(done);
    p
}

/// The loaded providers; set once, under `LOADING`'s lock (so never while
/// a thread forks).
static LOADED: OnceLock<&'static Providers> = OnceLock::new();
/// Whether a thread is loading them now.
/// In a forked child, a load another thread of the parent was making will
/// never end.
static LOADING: ForkSafe<Loading> =
    ForkSafe::with_child_hook(Rank::ProviderLoad, forget_load_in_child);
/// Signalled when a load ends.
static CHANGED: Condvar = Condvar::new();

#[derive(Default)]
struct Loading {
    busy: bool,
}

/// Ends a load, also one that unwinds (a waiting thread then loads
/// itself), and wakes the waiting threads.
struct NotBusy;

impl Drop for NotBusy {
    fn drop(&mut self) {
        LOADING.lock(Loading::default).busy = false;
        CHANGED.notify_all();
    }
}

/// Made at load (`crate::fork`).
fn make() {
    drop(LOADING.lock(Loading::default));
}
fork::at_load!(make);

/// In a forked child, with the lock still held: a load another thread of
/// the parent was making will never end here.
fn forget_load_in_child(st: &mut Loading) {
    st.busy = false;
}

/// The directories to search, and the refused entries of
/// `FI_XPU_PROVIDER_PATH`.
pub(crate) fn search_dirs() -> (Vec<PathBuf>, Vec<Skipped>) {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut refused = Vec::new();
    if let Some(path) = param::core(param::PROVIDER_PATH) {
        for d in path.split(':').filter(|d| !d.is_empty()).map(PathBuf::from) {
            if d.is_absolute() {
                dirs.push(d);
            } else {
                refused.push(Skipped {
                    path: d,
                    reason: "relative directory in FI_XPU_PROVIDER_PATH refused".into(),
                });
            }
        }
    }
    let own = own_object();
    // The installed layout wherever the prefix lies now: `fi_xpu/` beside
    // the library, or, for a program the core is linked into statically
    // (`bin/fi_xpu_info`), `../lib*/fi_xpu` from the program's directory.
    if let Some((dir, exe)) = &own {
        dirs.push(dir.join("fi_xpu"));
        if *exe {
            dirs.extend(beside_libdirs(dir));
        }
    }
    if let Some(installed) = installed_provider_dir() {
        dirs.push(installed);
    }
    if let Some((dir, _)) = own {
        dirs.push(dir);
    }
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let key = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
        if seen.contains(&key) {
            false
        } else {
            seen.push(key);
            true
        }
    });
    (dirs, refused)
}

/// What precedes the installed provider directory in the library's file.
/// `cargo xtask install` (xtask/src/install.rs, `patch_provider_dir`) finds
/// it in the installed library, static archive and `fi_xpu_info` and writes
/// the prefix's provider directory after it, NUL-terminated, so that one
/// build serves every prefix.
const PROVIDER_DIR_MARKER: &[u8; 36] = b"fi_xpu installed provider directory:";
/// Room for the directory: PATH_MAX, its NUL included.
const PROVIDER_DIR_ROOM: usize = 4096;
/// Where the directory starts. A number, so that no copy of the marker
/// but the slot's own lies in the file (an unoptimised build would
/// materialise the array for a `.len()` at run time).
const PROVIDER_DIR_AT: usize = PROVIDER_DIR_MARKER.len();

/// The marker, then zeros (a build tree: no installed directory) or the
/// directory written by the install.
#[used]
static INSTALLED_PROVIDER_DIR: [u8; PROVIDER_DIR_AT + PROVIDER_DIR_ROOM] = {
    let mut slot = [0u8; PROVIDER_DIR_AT + PROVIDER_DIR_ROOM];
    let mut i = 0;
    while i < PROVIDER_DIR_AT {
        slot[i] = PROVIDER_DIR_MARKER[i];
        i += 1;
    }
    slot
};

/// The provider directory the install wrote into this file, if any.
fn installed_provider_dir() -> Option<PathBuf> {
    // SAFETY: a reference to a static is valid for reads; the volatile read
    // keeps the compiler from folding in the zeros it was built with (the
    // install changes the file's bytes after the build).
    let slot = unsafe { std::ptr::read_volatile(&INSTALLED_PROVIDER_DIR) };
    let dir = &slot[PROVIDER_DIR_AT..];
    let len = dir.iter().position(|&b| b == 0)?;
    (len > 0).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&dir[..len])))
}

/// `fi_xpu/` in each library directory next to a program's directory
/// `bin`: `../lib*/fi_xpu` and the multiarch `../lib/<tuple>/fi_xpu`,
/// those that exist, in name order.
fn beside_libdirs(bin: &Path) -> Vec<PathBuf> {
    let Some(prefix) = bin.parent() else {
        return Vec::new();
    };
    let subdirs = |dir: &Path, keep: &dyn Fn(&str) -> bool| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_str().is_some_and(keep))
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        v
    };
    let mut libdirs = subdirs(prefix, &|n| n.starts_with("lib"));
    libdirs.extend(subdirs(&prefix.join("lib"), &|n| n.contains("-linux-")));
    libdirs
        .into_iter()
        .map(|d| d.join("fi_xpu"))
        .filter(|d| d.is_dir())
        .collect()
}

/// Directory of the object (shared library or executable) this code is in,
/// and whether that object is the program itself (the core linked in
/// statically).
fn own_object() -> Option<(PathBuf, bool)> {
    let mut info: libc::Dl_info = unsafe_zeroed_dl_info();
    let addr = own_object as *const c_void;
    // SAFETY: dladdr only reads the loader's tables; `info` is a valid out-parameter.
    let found = unsafe { libc::dladdr(addr, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the dynamic loader.
    let fname = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = Path::new(std::ffi::OsStr::from_bytes(fname.to_bytes()));
    let path = std::fs::canonicalize(path).ok()?;
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .is_ok_and(|e| e == path);
    Some((path.parent()?.to_path_buf(), exe))
}

fn unsafe_zeroed_dl_info() -> libc::Dl_info {
    libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    }
}

/// The `FI_XPU_PROVIDER` filter, when set.
fn provider_filter() -> Option<Filter> {
    Filter::parse(&param::core(param::PROVIDER)?)
}

/// `libfi_xpu-<name>.so` → `<name>`, for names of `[a-z0-9_]`.
fn plugin_name(file: &str) -> Option<&str> {
    let name = file.strip_prefix("libfi_xpu-")?.strip_suffix(".so")?;
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    ok.then_some(name)
}

fn load_all(services: &'static fi_xpu_core) -> Providers {
    let filter = provider_filter();
    let (searched, refused) = search_dirs();
    for s in &refused {
        warn!("{}: {}", s.path.display(), s.reason);
    }
    let mut out = Providers {
        searched,
        skipped: refused,
        ..Default::default()
    };
    // The names of every plugin file seen, loaded or not, and how many
    // files the filter let through.
    let mut found: Vec<String> = Vec::new();
    let mut passed = 0;
    for dir in out.searched.clone() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        if let Err(reason) = plugin_file::check_dir(&dir) {
            let reason = format!("directory refused: {reason}");
            warn!("{}: {reason}", dir.display());
            out.skipped.push(Skipped {
                path: dir.clone(),
                reason,
            });
            continue;
        }
        let mut files: Vec<(String, PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let file = e.file_name().to_str()?.to_string();
                plugin_name(&file)?;
                Some((file, e.path()))
            })
            .collect();
        files.sort();
        for (file, path) in files {
            let name = plugin_name(&file).expect("filtered above").to_string();
            if !found.contains(&name) {
                found.push(name.clone());
            }
            if let Some(f) = &filter {
                if !f.allows(&name) {
                    info!("{}: excluded by FI_XPU_PROVIDER", path.display());
                    continue;
                }
            }
            passed += 1;
            // A second copy of a loaded plugin (a moved prefix, whose
            // original still lies at the installed directory) is no
            // conflict; a different file of the same name still is.
            if let Some(other) = out.loaded.iter().find(|p| p.name == name) {
                if same_content(&path, &other.path) {
                    debug!(
                        "{}: the same file as the loaded {}: skipped",
                        path.display(),
                        other.path.display()
                    );
                    continue;
                }
            }
            let requested = filter.as_ref().is_some_and(|f| f.requests(&name));
            match load_one(&path, &name, &out.loaded, services, requested) {
                Ok(p) => {
                    info!("loaded provider {} from {}", p.name, path.display());
                    out.loaded.push(Arc::new(p));
                }
                Err(Refusal { reason, absent }) => {
                    if absent {
                        info!("{}: plugin refused: {reason}", path.display());
                    } else {
                        warn!("{}: plugin refused: {reason}", path.display());
                    }
                    out.skipped.push(Skipped { path, reason });
                }
            }
        }
    }
    say_what_is_missing(&out, &found, filter.as_ref(), passed);
    out
}

/// Warns when a `FI_XPU_PROVIDER` keep-list names a provider that is not
/// there (listing those that are), and when no plugin was found at all
/// (listing the directories searched).
fn say_what_is_missing(out: &Providers, found: &[String], filter: Option<&Filter>, passed: usize) {
    let listed = if found.is_empty() {
        "none".to_string()
    } else {
        found.join(", ")
    };
    if let Some(f) = filter {
        let unmatched = f.unmatched(found);
        let spec = param::core(param::PROVIDER).unwrap_or_default();
        if !unmatched.is_empty() {
            warn!(
                "{}={spec:?}: no provider named {}; found: {listed}",
                param::PROVIDER,
                unmatched.join(", ")
            );
        } else if passed == 0 && !found.is_empty() {
            warn!(
                "{}={spec:?} leaves no provider; found: {listed}",
                param::PROVIDER
            );
        }
    }
    if found.is_empty() {
        let dirs: Vec<String> = out
            .searched
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        warn!(
            "no provider plugin (libfi_xpu-<name>.so) found in {}: set {} to the directory that holds them",
            dirs.join(", "),
            param::PROVIDER_PATH
        );
    }
}

/// Whether two files hold the same bytes (the same file, or a copy).
fn same_content(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    let (Ok(fa), Ok(fb)) = (std::fs::File::open(a), std::fs::File::open(b)) else {
        return false;
    };
    let (Ok(ma), Ok(mb)) = (fa.metadata(), fb.metadata()) else {
        return false;
    };
    use std::os::unix::fs::MetadataExt;
    if (ma.dev(), ma.ino()) == (mb.dev(), mb.ino()) {
        return true;
    }
    if ma.len() != mb.len() {
        return false;
    }
    let (mut ra, mut rb) = (std::io::BufReader::new(fa), std::io::BufReader::new(fb));
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = match ra.read(&mut ba) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if n == 0 {
            return true;
        }
        if rb.read_exact(&mut bb[..n]).is_err() || ba[..n] != bb[..n] {
            return false;
        }
    }
}

fn duplicate_name(name: &str, loaded: &[Arc<Provider>]) -> Result<(), String> {
    match loaded.iter().find(|p| p.name == name) {
        Some(other) => Err(format!(
            "duplicate provider name '{name}' (already loaded from {})",
            other.path.display()
        )),
        None => Ok(()),
    }
}

fn duplicate_prov_id(prov_id: u32, loaded: &[Arc<Provider>]) -> Result<(), String> {
    match loaded.iter().find(|p| p.desc.prov_id == prov_id) {
        Some(other) => Err(format!(
            "duplicate prov_id {prov_id} (already used by '{}')",
            other.name
        )),
        None => Ok(()),
    }
}

/// Why `load_one` did not load a plugin; `absent` when its `init` said
/// `-FI_ENODEV` (nothing to serve on this machine, such as the ofi plugin
/// built without libfabric) and the user did not ask for it by name in
/// `FI_XPU_PROVIDER`: that is logged at info level, not as a warning.
struct Refusal {
    reason: String,
    absent: bool,
}

impl From<String> for Refusal {
    fn from(reason: String) -> Refusal {
        Refusal {
            reason,
            absent: false,
        }
    }
}

fn load_one(
    path: &Path,
    file_name: &str,
    loaded: &[Arc<Provider>],
    services: &'static fi_xpu_core,
    requested: bool,
) -> Result<Provider, Refusal> {
    let file = PluginFile::open(path)?;
    // The descriptor must carry the file's name, so a later file of a loaded
    // name is refused without running any of its code.
    duplicate_name(file_name, loaded)?;
    // So is a plugin whose ELF note says what the descriptor would: another
    // ABI, another name, a loaded prov_id. Without the note (older
    // plugins) those are known only once dlopen has run its constructors.
    let note = file.note().cloned();
    if let Some(n) = &note {
        check_header(n.abi_major, n.abi_minor, FI_XPU_PROV_MIN_SIZE)?;
        if n.name != file_name {
            return Err(format!(
                "its fi_xpu note names provider '{}' but the file is for '{file_name}'",
                n.name
            )
            .into());
        }
        if n.prov_id == 0 {
            return Err(String::from("prov_id 0 is reserved").into());
        }
        duplicate_prov_id(n.prov_id, loaded)?;
    }
    let load_path = file.load_path();
    let lib = Library::open(&load_path).map_err(|e| {
        e.replace(
            load_path.to_str().expect("an ASCII path"),
            &path.display().to_string(),
        )
    })?;
    file.keep_open();
    // SAFETY: the plugin ABI defines fi_xpu_prov_ini with this signature.
    let ini = unsafe { lib.function::<fi_xpu_prov_ini_fn>(FI_XPU_PROV_INI_SYMBOL) }
        .ok_or_else(|| format!("missing symbol {FI_XPU_PROV_INI_SYMBOL}"))?;
    // SAFETY: calling the plugin's entry point, as the ABI requires.
    let desc_ptr = unsafe { ini() };
    if desc_ptr.is_null() {
        return Err(format!("{FI_XPU_PROV_INI_SYMBOL} returned NULL").into());
    }
    // SAFETY: the header (versions and size) is read first; the rest only
    // once `size` says the plugin's struct is large enough.
    let (major, minor, size) = unsafe {
        (
            (*desc_ptr).abi_major,
            (*desc_ptr).abi_minor,
            (*desc_ptr).size,
        )
    };
    check_header(major, minor, size)?;
    let desc = full_descriptor(desc_ptr, size);
    let name = check_descriptor(desc)?;
    if name != file_name {
        return Err(format!(
            "descriptor names provider '{name}' but the file is for '{file_name}'"
        )
        .into());
    }
    if let Some(n) = note.filter(|n| n.prov_id != desc.prov_id) {
        return Err(format!(
            "descriptor's prov_id {} differs from its fi_xpu note's {}",
            desc.prov_id, n.prov_id
        )
        .into());
    }
    duplicate_prov_id(desc.prov_id, loaded)?;
    let init = desc.init.expect("checked");
    let mut handle: *mut c_void = std::ptr::null_mut();
    // What the plugin logs while it initialises waits for the outcome.
    // SAFETY: init receives the core's static service table and an out-pointer.
    let (ret, said) = crate::log::hold(&name, || unsafe { init(services, &mut handle) });
    let absent = ret == -fi_xpu_abi::errno::FI_ENODEV && !requested;
    said.release(absent);
    if ret != 0 {
        return Err(Refusal {
            reason: format!("initialisation failed: {} ({ret})", strerror(ret)),
            absent,
        });
    }
    lib.keep();
    Ok(Provider {
        name,
        path: path.to_path_buf(),
        desc,
        handle: handle as usize,
    })
}

/// The plugin's descriptor as this library's struct: the plugin's own when
/// it is as large, else a copy of its `size` bytes with the fields it
/// does not know zeroed (an older minor: no limits). Kept forever, as the
/// plugin is.
fn full_descriptor(p: *const fi_xpu_prov_desc, size: usize) -> &'static fi_xpu_prov_desc {
    let full = std::mem::size_of::<fi_xpu_prov_desc>();
    if size >= full {
        // SAFETY: `size` says the plugin's descriptor covers the whole
        // struct; the plugin stays loaded for the life of the process.
        return unsafe { &*p };
    }
    let mut copy = Box::new(std::mem::MaybeUninit::<fi_xpu_prov_desc>::zeroed());
    // SAFETY: the plugin's descriptor has `size` (< full, >= the minimum
    // check_header asked for) readable bytes; zero is a valid value of
    // every field it leaves out (integers, and `Option`s of functions).
    unsafe {
        std::ptr::copy_nonoverlapping(p as *const u8, copy.as_mut_ptr() as *mut u8, size);
        Box::leak(copy).assume_init_ref()
    }
}

fn check_header(major: u32, minor: u32, size: usize) -> Result<(), String> {
    if major != FI_XPU_PROV_ABI_MAJOR {
        return Err(format!(
            "plugin ABI {major}.{minor} is not major version {FI_XPU_PROV_ABI_MAJOR}"
        ));
    }
    if minor > FI_XPU_PROV_ABI_MINOR {
        return Err(format!(
            "plugin ABI {major}.{minor} is newer than this library's {FI_XPU_PROV_ABI_MAJOR}.{FI_XPU_PROV_ABI_MINOR}"
        ));
    }
    if size < FI_XPU_PROV_MIN_SIZE {
        return Err(format!(
            "short descriptor: {size} bytes, at least {FI_XPU_PROV_MIN_SIZE} needed"
        ));
    }
    Ok(())
}

/// Checks a descriptor's fields; returns the provider's name.
pub fn check_descriptor(d: &fi_xpu_prov_desc) -> Result<String, String> {
    if d.name.is_null() {
        return Err("descriptor has no name".into());
    }
    // SAFETY: a non-NULL name must be a NUL-terminated string (plugin ABI).
    let name = unsafe { CStr::from_ptr(d.name) }
        .to_str()
        .map_err(|_| "name is not UTF-8".to_string())?;
    if d.prov_id == 0 {
        return Err("prov_id 0 is reserved".into());
    }
    let missing = [
        ("init", d.init.is_none()),
        ("fini", d.fini.is_none()),
        ("domain_open", d.domain_open.is_none()),
        ("domain_close", d.domain_close.is_none()),
        ("ctx_open", d.ctx_open.is_none()),
        ("ctx_query", d.ctx_query.is_none()),
        ("ctx_close", d.ctx_close.is_none()),
        ("av_open", d.av_open.is_none()),
        ("av_insert", d.av_insert.is_none()),
        ("av_remove", d.av_remove.is_none()),
        ("av_lookup", d.av_lookup.is_none()),
        ("av_close", d.av_close.is_none()),
        ("mr_reg", d.mr_reg.is_none()),
        ("mr_key", d.mr_key.is_none()),
        ("mr_desc", d.mr_desc.is_none()),
        ("mr_close", d.mr_close.is_none()),
        ("cq_open", d.cq_open.is_none()),
        ("cq_export", d.cq_export.is_none()),
        ("cq_host_read", d.cq_host_read.is_none()),
        ("cq_host_readerr", d.cq_host_readerr.is_none()),
        ("cq_close", d.cq_close.is_none()),
        ("cntr_open", d.cntr_open.is_none()),
        ("cntr_export", d.cntr_export.is_none()),
        ("cntr_host_read", d.cntr_host_read.is_none()),
        ("cntr_host_update", d.cntr_host_update.is_none()),
        ("cntr_close", d.cntr_close.is_none()),
        ("ep_open", d.ep_open.is_none()),
        ("ep_bind", d.ep_bind.is_none()),
        ("ep_enable", d.ep_enable.is_none()),
        ("ep_getname", d.ep_getname.is_none()),
        ("ep_export", d.ep_export.is_none()),
        ("ep_close", d.ep_close.is_none()),
    ];
    if let Some((entry, _)) = missing.iter().find(|(_, m)| *m) {
        return Err(format!("missing entry point {entry}"));
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_file_names() {
        assert_eq!(plugin_name("libfi_xpu-shm.so"), Some("shm"));
        assert_eq!(plugin_name("libfi_xpu-ofi_2.so"), Some("ofi_2"));
        assert_eq!(plugin_name("libfi_xpu.so"), None);
        assert_eq!(plugin_name("libfi_xpu-.so"), None);
        assert_eq!(plugin_name("libfi_xpu-Shm.so"), None);
        assert_eq!(plugin_name("libfi_xpu-shm.so.1"), None);
        assert_eq!(plugin_name("libfi_xpu-a/b.so"), None);
    }

    #[test]
    fn header_checks() {
        assert!(check_header(1, 0, FI_XPU_PROV_MIN_SIZE).is_ok());
        assert!(check_header(1, FI_XPU_PROV_ABI_MINOR, FI_XPU_PROV_MIN_SIZE).is_ok());
        assert!(check_header(2, 0, FI_XPU_PROV_MIN_SIZE)
            .unwrap_err()
            .contains("major"));
        assert!(
            check_header(1, FI_XPU_PROV_ABI_MINOR + 1, FI_XPU_PROV_MIN_SIZE)
                .unwrap_err()
                .contains("newer")
        );
        assert!(check_header(1, 0, 16)
            .unwrap_err()
            .contains("short descriptor"));
    }
}
