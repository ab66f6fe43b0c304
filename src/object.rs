//! Host objects and the registry of live ones.
//!
//! Every object the application holds is a small C-visible shell (a
//! libfabric `struct fid`) plus a Rust `Object` in the registry, keyed by the
//! shell's address. Handles are looked up in the registry before anything
//! else happens, so NULL, unknown, wrong-class and closed handles are refused
//! without touching memory. A closed object's shell is recycled under a new
//! generation that gives it another address (`crate::shell`), so a stale
//! handle stays an unknown key even after its slot is reused.
//!
//! A lookup returns a `Use`: the object stays open while it is held. Every
//! host call holds one for its whole duration, so `close` first marks the
//! object closing (new lookups fail with `FI_EINVAL`), then waits until the
//! calls already in flight have returned, and only then asks the provider to
//! close it. A thread that closes an object it is itself inside a call on (a
//! memory callback closing its own context) gets `FI_EBUSY` instead of
//! waiting for itself.
use crate::error::{Error, Result};
use crate::fork::{self, ForkSafe, Rank};
use crate::memory::Memory;
use crate::provider::{Handle, Provider};
use fi_xpu_abi::class::*;
use fi_xpu_abi::*;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Domain,
    Ctx,
    Av,
    Mr,
    Cq,
    Cntr,
    Ep,
}

impl Kind {
    pub fn fclass(self) -> usize {
        match self {
            Kind::Domain => FI_CLASS_DOMAIN,
            Kind::Ctx => FI_XPU_CLASS_CTX,
            Kind::Av => FI_CLASS_AV,
            Kind::Mr => FI_CLASS_MR,
            Kind::Cq => FI_CLASS_CQ,
            Kind::Cntr => FI_CLASS_CNTR,
            Kind::Ep => FI_CLASS_EP,
        }
    }

    /// The name a libfabric user knows the object by, for log lines.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Domain => "domain",
            Kind::Ctx => "ctx",
            Kind::Av => "av",
            Kind::Mr => "mr",
            Kind::Cq => "cq",
            Kind::Cntr => "cntr",
            Kind::Ep => "ep",
        }
    }
}

/// A live host object.
pub struct Object {
    pub kind: Kind,
    pub prov: Arc<Provider>,
    /// The provider's handle for this object.
    handle: AtomicUsize,
    /// Address of the C-visible shell.
    shell: usize,
    /// Objects this one holds a use on (its domain, its context, and for an
    /// endpoint whatever is bound to it).
    holds: Mutex<Vec<Arc<Object>>>,
    /// Children and bindings that hold a use on this object.
    users: AtomicUsize,
    /// Host calls in flight on this object (live `Use`s).
    in_flight: AtomicUsize,
    closing: AtomicBool,
    /// XPU contexts: their memory.
    pub memory: Option<Memory>,
    /// CQs and counters: opened with an XPU context.
    pub xpu: bool,
    /// Registrations: the registered range `[start, start + len)`.
    pub range: Option<(usize, usize)>,
    /// Endpoints: enabled (`fi_xpu_enable` succeeded).
    pub enabled: AtomicBool,
    /// Endpoints: the `FI_TRANSMIT` and `FI_RECV` bits of the CQs bound.
    pub cq_bound: AtomicU64,
}

impl Object {
    pub fn handle(&self) -> Handle {
        Handle::from_raw(self.handle.load(Ordering::Acquire) as *mut c_void)
    }

    pub fn shell(&self) -> *mut fid {
        self.shell as *mut fid
    }

    /// The XPU context this object belongs to, if any.
    pub fn ctx(&self) -> Option<Arc<Object>> {
        if self.kind == Kind::Ctx {
            return None;
        }
        self.holds
            .lock()
            .unwrap()
            .iter()
            .find(|o| o.kind == Kind::Ctx)
            .cloned()
    }

    pub fn domain(&self) -> Option<Arc<Object>> {
        self.holds
            .lock()
            .unwrap()
            .iter()
            .find(|o| o.kind == Kind::Domain)
            .cloned()
    }

    pub fn memory_iface(&self) -> fi_hmem_iface {
        self.memory.as_ref().map_or(FI_HMEM_SYSTEM, |m| m.iface)
    }

    pub fn memory_device(&self) -> u64 {
        self.memory.as_ref().map_or(0, |m| m.device)
    }

    /// `cq 0x5581...`: the kind and the application's handle, as log
    /// lines name an object.
    pub fn describe(&self) -> String {
        format!("{} {:#x}", self.kind.name(), self.shell)
    }

    pub fn same_domain(&self, other: &Object) -> bool {
        match (self.domain(), other.domain()) {
            (Some(a), Some(b)) => Arc::ptr_eq(&a, &b),
            _ => false,
        }
    }
}

/// Every live handle the application holds, by shell address: host
/// objects, and the worlds and windows `world::handles` keeps (a shell
/// whose value this module does not look into).
#[derive(Default)]
struct Registry {
    objects: HashMap<usize, Arc<Object>>,
    others: HashMap<usize, Other>,
}

/// A world or a window in the registry.
struct Other {
    fclass: usize,
    /// The shell this one belongs to (a window's world), 0 for none.
    owner: usize,
    value: Arc<dyn Any + Send + Sync>,
}

static REGISTRY: ForkSafe<Registry> = ForkSafe::new(Rank::Objects);

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock(Registry::default)
}

/// Made at load (`crate::fork`), with the close hand-off's lock, which a
/// forking thread also holds.
fn make() {
    drop(registry());
    fork::register(Rank::CloseHandOff, &DRAINED.0);
}
fork::at_load!(make);

/// Where `close` waits for calls in flight to end; the last `Use` of a
/// closing object signals it while holding the lock, so no wake-up is lost.
static DRAINED: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());

thread_local! {
    /// Shells this thread holds a `Use` of (usually zero or a handful).
    static IN_CALL: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// A host call's hold on an object: while it exists the object is not closed
/// under the call. Dereferences to the object.
pub struct Use(Arc<Object>);

impl Use {
    /// Called with the registry locked, after checking the object is open.
    fn begin(obj: Arc<Object>) -> Use {
        obj.in_flight.fetch_add(1, Ordering::AcqRel);
        IN_CALL.with(|c| c.borrow_mut().push(obj.shell));
        Use(obj)
    }
}

impl Deref for Use {
    type Target = Arc<Object>;
    fn deref(&self) -> &Arc<Object> {
        &self.0
    }
}

impl Drop for Use {
    fn drop(&mut self) {
        IN_CALL.with(|c| {
            let mut c = c.borrow_mut();
            if let Some(i) = c.iter().rposition(|s| *s == self.0.shell) {
                c.swap_remove(i);
            }
        });
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1
            && self.0.closing.load(Ordering::Acquire)
        {
            let _lock = DRAINED.0.lock().unwrap_or_else(|e| e.into_inner());
            DRAINED.1.notify_all();
        }
    }
}

/// The live object behind `ptr`, if it is one of `kind`, held for a call.
pub fn lookup(ptr: *const c_void, kind: Kind) -> Result<Use> {
    let obj = lookup_any(ptr)?;
    if obj.kind != kind {
        return Err(Error::INVAL);
    }
    Ok(obj)
}

/// The live object behind `ptr`, of any kind, held for a call.
pub fn lookup_any(ptr: *const c_void) -> Result<Use> {
    if ptr.is_null() {
        return Err(Error::INVAL);
    }
    let reg = registry();
    let obj = reg.objects.get(&(ptr as usize)).ok_or(Error::INVAL)?;
    if obj.closing.load(Ordering::Acquire) {
        return Err(Error::INVAL);
    }
    Ok(Use::begin(obj.clone()))
}

/// Waits until no host call is inside `obj` (which is marked closing, so no
/// new call can start).
fn drain(obj: &Object) {
    let mut lock = DRAINED.0.lock().unwrap_or_else(|e| e.into_inner());
    while obj.in_flight.load(Ordering::Acquire) != 0 {
        lock = DRAINED
            .1
            .wait_timeout(lock, std::time::Duration::from_millis(10))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// Whether a live registration overlaps `[start, start + len)`.
pub fn registered(start: usize, len: usize) -> bool {
    let end = start.saturating_add(len);
    registry().objects.values().any(|o| {
        o.range
            .is_some_and(|(s, l)| s < end && start < s.saturating_add(l))
    })
}

/// Like `lookup`, but also finds an object that is being closed: providers
/// release their resources through the core while their object closes.
pub fn lookup_for_provider(ptr: *const c_void, kind: Kind) -> Result<Arc<Object>> {
    let obj = registry()
        .objects
        .get(&(ptr as usize))
        .cloned()
        .ok_or(Error::INVAL)?;
    if obj.kind != kind {
        return Err(Error::INVAL);
    }
    Ok(obj)
}

/// Takes a use on each of `objs` (refused if one is closing). The uses are
/// given back by `release` or, once the holder is registered, when it closes.
pub fn acquire(objs: &[&Arc<Object>]) -> Result<()> {
    let _reg = registry();
    if objs.iter().any(|o| o.closing.load(Ordering::Acquire)) {
        return Err(Error::INVAL);
    }
    for o in objs {
        o.users.fetch_add(1, Ordering::AcqRel);
    }
    Ok(())
}

pub fn release(objs: &[Arc<Object>]) {
    for o in objs {
        o.users.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What a new object is made of.
pub struct New {
    pub kind: Kind,
    pub prov: Arc<Provider>,
    pub handle: Handle,
    /// Uses already taken with `acquire`.
    pub holds: Vec<Arc<Object>>,
    pub memory: Option<Memory>,
    pub xpu: bool,
    pub range: Option<(usize, usize)>,
    pub context: *mut c_void,
    /// The `fi_ops` its shell points at (the C API's).
    pub ops: &'static fi_ops,
}

/// Registers a new object and returns its C handle.
pub fn register(new: New) -> *mut fid {
    insert(new, false)
}

/// Registers an object whose provider handle is not known yet (an XPU
/// context: the provider receives the application's handle while it opens).
/// Until `finish_pending` it is visible to providers only. The uses in `holds`
/// are taken here.
pub fn register_pending(
    kind: Kind,
    prov: Arc<Provider>,
    holds: Vec<Arc<Object>>,
    memory: Memory,
    context: *mut c_void,
    ops: &'static fi_ops,
) -> Result<*mut fid> {
    acquire(&holds.iter().collect::<Vec<_>>())?;
    Ok(insert(
        New {
            kind,
            prov,
            handle: Handle::NULL,
            holds,
            memory: Some(memory),
            xpu: false,
            range: None,
            context,
            ops,
        },
        true,
    ))
}

/// Completes `register_pending`: publishes the object, or withdraws it.
pub fn finish_pending(shell: *mut fid, handle: Result<Handle>) -> Result<()> {
    let obj = registry()
        .objects
        .get(&(shell as usize))
        .cloned()
        .ok_or(Error::INVAL)?;
    match handle {
        Ok(h) => {
            obj.handle.store(h.as_ptr() as usize, Ordering::Release);
            obj.closing.store(false, Ordering::Release);
            opened(&obj);
            Ok(())
        }
        Err(e) => {
            registry().objects.remove(&(shell as usize));
            crate::shell::free(shell);
            let held = std::mem::take(&mut *obj.holds.lock().unwrap());
            release(&held);
            Err(e)
        }
    }
}

fn insert(new: New, pending: bool) -> *mut fid {
    let shell = crate::shell::alloc(fid {
        fclass: new.kind.fclass(),
        context: new.context,
        ops: new.ops as *const fi_ops as *mut fi_ops,
    });
    let obj = Arc::new(Object {
        kind: new.kind,
        prov: new.prov,
        handle: AtomicUsize::new(new.handle.as_ptr() as usize),
        shell: shell as usize,
        holds: Mutex::new(new.holds),
        users: AtomicUsize::new(0),
        in_flight: AtomicUsize::new(0),
        closing: AtomicBool::new(pending),
        memory: new.memory,
        xpu: new.xpu,
        range: new.range,
        enabled: AtomicBool::new(false),
        cq_bound: AtomicU64::new(0),
    });
    if !pending {
        opened(&obj);
    }
    registry().objects.insert(shell as usize, obj);
    shell
}

/// The debug line of a new object.
fn opened(obj: &Object) {
    if !crate::log::enabled(FI_XPU_LOG_DEBUG) {
        return;
    }
    let on = match obj
        .holds
        .lock()
        .unwrap()
        .iter()
        .find(|o| o.kind != Kind::Domain)
    {
        Some(c) => format!(" on {}", c.describe()),
        None => String::new(),
    };
    let xpu = if obj.xpu && obj.kind != Kind::Ep {
        " (XPU)"
    } else {
        ""
    };
    crate::debug!(
        "opened {}{xpu}{on}, provider {}",
        obj.describe(),
        obj.prov.name
    );
}

/// Why `obj` cannot close yet, for the `FI_EBUSY` log line: what still
/// holds it.
fn busy_reason(reg: &Registry, obj: &Arc<Object>) -> String {
    let mut by: Vec<(Kind, usize)> = Vec::new();
    for o in reg.objects.values() {
        let n = o
            .holds
            .lock()
            .unwrap()
            .iter()
            .filter(|h| Arc::ptr_eq(h, obj))
            .count();
        if n == 0 {
            continue;
        }
        match by.iter_mut().find(|(k, _)| *k == o.kind) {
            Some((_, c)) => *c += n,
            None => by.push((o.kind, n)),
        }
    }
    let total: usize = by.iter().map(|(_, n)| n).sum();
    let plural = |n: usize, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
    match by.as_slice() {
        [] => format!("{} is still in use by an open in progress", obj.describe()),
        [(Kind::Ep, n)] if matches!(obj.kind, Kind::Av | Kind::Cq | Kind::Cntr) => {
            format!(
                "{} still bound to {}",
                obj.describe(),
                plural(*n, "endpoint")
            )
        }
        _ => {
            by.sort_by_key(|(k, _)| *k as u8);
            let list: Vec<String> = by
                .iter()
                .map(|(k, n)| format!("{n} {}", k.name()))
                .collect();
            format!(
                "{} still in use by {} ({}): close those first",
                obj.describe(),
                plural(total, "object"),
                list.join(", ")
            )
        }
    }
}

/// An endpoint keeps a use on what is bound to it until it closes.
pub fn add_hold(holder: &Object, held: Arc<Object>) {
    holder.holds.lock().unwrap().push(held);
}

pub fn holds(holder: &Object, kind: Kind) -> Vec<Arc<Object>> {
    holder
        .holds
        .lock()
        .unwrap()
        .iter()
        .filter(|o| o.kind == kind)
        .cloned()
        .collect()
}

/// Closes the object behind `ptr`: refused with `FI_EBUSY` while others use
/// it (children, bindings) or while this very thread is inside a call on it;
/// waits for other threads' calls in flight on it to return.
pub fn close(ptr: *const c_void) -> Result<()> {
    let obj = {
        let reg = registry();
        if ptr.is_null() {
            return Err(Error::INVAL);
        }
        let obj = reg
            .objects
            .get(&(ptr as usize))
            .cloned()
            .ok_or(Error::INVAL)?;
        if obj.closing.load(Ordering::Acquire) {
            return Err(Error::INVAL);
        }
        if obj.users.load(Ordering::Acquire) != 0 {
            crate::warn!("fi_xpu_close: {}", busy_reason(&reg, &obj));
            return Err(Error::BUSY);
        }
        if IN_CALL.with(|c| c.borrow().contains(&obj.shell)) {
            crate::warn!(
                "fi_xpu_close: {} is closed from inside a call on it (a memory callback?)",
                obj.describe()
            );
            return Err(Error::BUSY);
        }
        obj.closing.store(true, Ordering::Release);
        obj
    };
    drain(&obj);
    // The registry lock is not held here: providers call back into the core
    // (memory services look the context up) while they close.
    let h = obj.handle();
    let ret = match obj.kind {
        Kind::Domain => obj.prov.domain_close(h),
        Kind::Ctx => obj.prov.ctx_close(h),
        Kind::Av => obj.prov.av_close(h),
        Kind::Mr => obj.prov.mr_close(h),
        Kind::Cq => obj.prov.cq_close(h),
        Kind::Cntr => obj.prov.cntr_close(h),
        Kind::Ep => obj.prov.ep_close(h),
    };
    if let Err(e) = Error::check(ret) {
        obj.closing.store(false, Ordering::Release);
        crate::warn!(
            "fi_xpu_close: {}: provider {} refused: -{e:?} ({e})",
            obj.describe(),
            obj.prov.name
        );
        return Err(e);
    }
    crate::debug!("closed {}", obj.describe());
    if let Some(mem) = &obj.memory {
        mem.release_all();
    }
    registry().objects.remove(&(ptr as usize));
    crate::shell::free(ptr as *mut fid);
    let held = std::mem::take(&mut *obj.holds.lock().unwrap());
    release(&held);
    Ok(())
}

/// Number of live objects (for leak checks in tests).
pub fn live_objects() -> usize {
    registry().objects.len()
}

/// Registers a world or a window: a shell of `fclass` whose fid points at
/// `ops`, keeping `value` for `world::handles`. `owner` is the shell it
/// belongs to (0 for none), which must be a live one.
pub fn register_other(
    fclass: usize,
    ops: &'static fi_ops,
    context: *mut c_void,
    owner: usize,
    value: Arc<dyn Any + Send + Sync>,
) -> Result<*mut fid> {
    let mut reg = registry();
    if owner != 0 && !reg.others.contains_key(&owner) {
        return Err(Error::INVAL);
    }
    let shell = crate::shell::alloc(fid {
        fclass,
        context,
        ops: ops as *const fi_ops as *mut fi_ops,
    });
    let other = Other {
        fclass,
        owner,
        value,
    };
    reg.others.insert(shell as usize, other);
    Ok(shell)
}

/// The value and the owner of the live world or window of `fclass` behind
/// `ptr`.
pub fn lookup_other(
    ptr: *const c_void,
    fclass: usize,
) -> Result<(Arc<dyn Any + Send + Sync>, usize)> {
    let reg = registry();
    match reg.others.get(&(ptr as usize)) {
        Some(o) if o.fclass == fclass => Ok((o.value.clone(), o.owner)),
        _ => Err(Error::INVAL),
    }
}

/// Takes the world or window of `fclass` behind `ptr` out of the registry
/// and frees its shell: `-FI_EBUSY` while another one belongs to it.
pub fn remove_other(
    ptr: *const c_void,
    fclass: usize,
) -> Result<(Arc<dyn Any + Send + Sync>, usize)> {
    let mut reg = registry();
    let key = ptr as usize;
    if reg.others.get(&key).is_none_or(|o| o.fclass != fclass) {
        return Err(Error::INVAL);
    }
    if reg.others.values().any(|o| o.owner == key) {
        return Err(Error::BUSY);
    }
    let o = reg.others.remove(&key).ok_or(Error::INVAL)?;
    crate::shell::free(ptr as *mut fid);
    Ok((o.value, o.owner))
}
