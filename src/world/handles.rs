//! The application's handles of worlds and windows: small C-visible shells
//! (a libfabric `struct fid`, so `fi_close` works on them) in the one
//! registry of live handles (`crate::object`), looked up before anything
//! else happens, as for every other host object. Shells come from the same
//! recycled arena as the other objects' shells (`crate::shell`), so a
//! closed handle stays an unknown key.
use super::window::Window;
use super::World;
use crate::error::{Error, Result};
use crate::object;
use fi_xpu_abi::*;
use std::any::Any;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

/// A live world: the world itself (taken out when it closes) and its
/// windows by shell address. Calls on one world run one at a time.
pub struct Entry {
    pub world: Mutex<Option<World>>,
    pub windows: Mutex<HashMap<usize, Window>>,
}

/// A world's entry, as the registry keeps it.
fn entry(value: Arc<dyn Any + Send + Sync>) -> Result<Arc<Entry>> {
    value.downcast::<Entry>().map_err(|_| Error::INVAL)
}

pub fn add_world(w: World, ops: &'static fi_ops, context: *mut c_void) -> Result<*mut fid> {
    let e = Arc::new(Entry {
        world: Mutex::new(Some(w)),
        windows: Mutex::default(),
    });
    object::register_other(FI_XPU_CLASS_WORLD, ops, context, 0, e)
}

pub fn world(p: *const c_void) -> Result<Arc<Entry>> {
    entry(object::lookup_other(p, FI_XPU_CLASS_WORLD)?.0)
}

/// Takes a world out of the registry: `-FI_EBUSY` while it has windows.
pub fn remove_world(p: *const c_void) -> Result<Arc<Entry>> {
    entry(object::remove_other(p, FI_XPU_CLASS_WORLD)?.0)
}

/// Registers the window `w` of the world `world` (its world's entry is
/// the value a window keeps in the registry).
pub fn add_window(world: *const c_void, w: Window, ops: &'static fi_ops) -> Result<*mut fid> {
    let e = self::world(world)?;
    let s = object::register_other(
        FI_XPU_CLASS_WINDOW,
        ops,
        std::ptr::null_mut(),
        world as usize,
        e.clone(),
    )?;
    e.windows.lock().unwrap().insert(s as usize, w);
    Ok(s)
}

/// Takes a window out of the registry, with its world.
pub fn remove_window(p: *const c_void) -> Result<(Arc<Entry>, Window)> {
    let e = entry(object::remove_other(p, FI_XPU_CLASS_WINDOW)?.0)?;
    let w = e.windows.lock().unwrap().remove(&(p as usize));
    Ok((e, w.ok_or(Error::INVAL)?))
}
