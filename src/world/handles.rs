//! The application's handles of worlds and windows: small C-visible shells
//! (a libfabric `struct fid`, so `fi_close` works on them) looked up in a
//! registry before anything else happens, as for every other host object.
//! Shells come from the same recycled arena as the other objects' shells
//! (`crate::shell`), so a closed handle stays an unknown key.
use super::window::Window;
use super::World;
use crate::error::{Error, Result};
use crate::fork::{self, ForkSafe, Rank};
use fi_xpu_abi::*;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

/// A live world: the world itself (taken out when it closes) and its
/// windows by shell address. Calls on one world run one at a time.
pub struct Entry {
    pub world: Mutex<Option<World>>,
    pub windows: Mutex<HashMap<usize, Window>>,
}

#[derive(Default)]
struct Registry {
    worlds: HashMap<usize, Arc<Entry>>,
    /// Window shell -> its world's shell.
    windows: HashMap<usize, usize>,
}

static R: ForkSafe<Registry> = ForkSafe::new(Rank::WorldHandles);

fn registry() -> MutexGuard<'static, Registry> {
    R.lock(Registry::default)
}

/// Made at load (`crate::fork`).
fn make() {
    drop(registry());
}
fork::at_load!(make);

fn shell(fclass: usize, ops: &'static fi_ops, context: *mut c_void) -> usize {
    crate::shell::alloc(fid {
        fclass,
        context,
        ops: ops as *const fi_ops as *mut fi_ops,
    }) as usize
}

pub fn add_world(w: World, ops: &'static fi_ops, context: *mut c_void) -> *mut fid {
    let s = shell(FI_XPU_CLASS_WORLD, ops, context);
    let e = Arc::new(Entry {
        world: Mutex::new(Some(w)),
        windows: Mutex::default(),
    });
    registry().worlds.insert(s, e);
    s as *mut fid
}

pub fn world(p: *const c_void) -> Result<Arc<Entry>> {
    registry()
        .worlds
        .get(&(p as usize))
        .cloned()
        .ok_or(Error::INVAL)
}

/// Takes a world out of the registry: `-FI_EBUSY` while it has windows.
pub fn remove_world(p: *const c_void) -> Result<Arc<Entry>> {
    let mut r = registry();
    let e = r.worlds.get(&(p as usize)).ok_or(Error::INVAL)?;
    if r.windows.values().any(|w| *w == p as usize) {
        return Err(Error::BUSY);
    }
    let _ = e;
    crate::shell::free(p as *mut fid);
    Ok(r.worlds.remove(&(p as usize)).unwrap())
}

pub fn add_window(world: *const c_void, w: Window, ops: &'static fi_ops) -> Result<*mut fid> {
    let mut r = registry();
    let e = r
        .worlds
        .get(&(world as usize))
        .cloned()
        .ok_or(Error::INVAL)?;
    let s = shell(FI_XPU_CLASS_WINDOW, ops, std::ptr::null_mut());
    r.windows.insert(s, world as usize);
    e.windows.lock().unwrap().insert(s, w);
    Ok(s as *mut fid)
}

/// Takes a window out of the registry, with its world.
pub fn remove_window(p: *const c_void) -> Result<(Arc<Entry>, Window)> {
    let mut r = registry();
    let world = *r.windows.get(&(p as usize)).ok_or(Error::INVAL)?;
    let e = r.worlds.get(&world).cloned().ok_or(Error::INVAL)?;
    r.windows.remove(&(p as usize));
    crate::shell::free(p as *mut fid);
    let w = e.windows.lock().unwrap().remove(&(p as usize));
    Ok((e, w.ok_or(Error::INVAL)?))
}
