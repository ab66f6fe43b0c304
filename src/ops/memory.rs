//! Memory of an XPU context, as `fi_xpu_alloc`, `fi_xpu_import`,
//! `fi_xpu_unimport` and `fi_xpu_free` do it once their arguments are
//! checked: the C API and worlds call these for the application
//! (`Owner::App`), the plugin services for a provider (`Owner::Provider`).
use crate::error::{Error, Result};
use crate::memory::{Allocation, Memory, Owner};
use crate::object::Object;

/// The memory of the context `c` (`-FI_EINVAL` for an object that has
/// none).
pub fn of(c: &Object) -> Result<&Memory> {
    c.memory.as_ref().ok_or(Error::INVAL)
}

/// `size` bytes of the context's memory, for `owner`.
pub fn alloc(
    c: &Object,
    size: u64,
    alignment: u64,
    flags: u64,
    owner: Owner,
) -> Result<Allocation> {
    of(c)?.alloc(size, alignment, flags, owner)
}

/// An import for `owner`; returns the address on the device. Only the
/// application's may be exported again (see `memory::Import::exportable`):
/// a provider's own imports (a peer's memory) keep no fd.
pub fn import(
    c: &Object,
    host_addr: usize,
    fd: i32,
    offset: u64,
    size: u64,
    flags: u64,
    owner: Owner,
) -> Result<usize> {
    of(c)?.import(host_addr, fd, offset, size, flags, owner)
}

/// Undoes one of `owner`'s imports. The application's: `FI_EBUSY` while a
/// registration overlaps the memory and this is the last import at that
/// address.
pub fn unimport(c: &Object, dev: usize, owner: Owner) -> Result<()> {
    let mem = of(c)?;
    if owner == Owner::App {
        if let Some((size, true)) = mem.import_to_undo(dev, owner) {
            refuse_if_registered("fi_xpu_unimport", dev, size)?;
        }
    }
    mem.unimport(dev, owner)
}

/// Frees one of `owner`'s allocations. The application's: `FI_EBUSY`
/// while a registration overlaps it.
pub fn free(c: &Object, addr: usize, owner: Owner) -> Result<()> {
    let mem = of(c)?;
    if owner == Owner::App {
        if let Some(size) = mem.alloc_size(addr, owner) {
            refuse_if_registered("fi_xpu_free", addr, size)?;
        }
    }
    mem.free(addr, owner)
}

/// The application's memory stays while a registration covers it: peers
/// may still write it. (A provider orders its own releases: its memory is
/// not checked.)
fn refuse_if_registered(what: &str, start: usize, size: u64) -> Result<()> {
    if crate::object::registered(start, size as usize) {
        crate::warn!("{what}: [{start:#x}, +{size}) is still registered; close the MR first");
        return Err(Error::BUSY);
    }
    Ok(())
}
