//! Memory of an XPU context, as `fi_xpu_alloc`, `fi_xpu_import`,
//! `fi_xpu_unimport` and `fi_xpu_free` do it once their arguments are
//! checked: the C API, the plugin services and worlds all call these.
use crate::error::{Error, Result};
use crate::memory::{Allocation, Memory, Owner};
use crate::object::Object;

fn memory_of(c: &Object) -> &Memory {
    c.memory.as_ref().expect("contexts have memory")
}

/// `size` bytes of the context's memory, for `owner`.
pub fn alloc(
    c: &Object,
    size: u64,
    alignment: u64,
    flags: u64,
    owner: Owner,
) -> Result<Allocation> {
    memory_of(c).alloc(size, alignment, flags, owner)
}

/// An application's import (see `memory::Import::exportable`); returns the
/// address on the device.
pub fn import(
    c: &Object,
    host_addr: usize,
    fd: i32,
    offset: u64,
    size: u64,
    flags: u64,
) -> Result<usize> {
    memory_of(c).import(host_addr, fd, offset, size, flags, Owner::App)
}

/// Undoes one of the application's imports; `FI_EBUSY` while a registration overlaps the memory
/// and this is the last import at that address.
pub fn unimport(c: &Object, dev: usize) -> Result<()> {
    let mem = memory_of(c);
    if let Some((size, true)) = mem.import_to_undo(dev, Owner::App) {
        refuse_if_registered("fi_xpu_unimport", dev, size)?;
    }
    mem.unimport(dev, Owner::App)
}

/// Frees one of the application's allocations; `FI_EBUSY` while a registration overlaps it.
pub fn free(c: &Object, addr: usize) -> Result<()> {
    let mem = memory_of(c);
    if let Some(size) = mem.alloc_size(addr, Owner::App) {
        refuse_if_registered("fi_xpu_free", addr, size)?;
    }
    mem.free(addr, Owner::App)
}

/// Memory that a live registration covers stays: peers may still write it.
fn refuse_if_registered(what: &str, start: usize, size: u64) -> Result<()> {
    if crate::object::registered(start, size as usize) {
        crate::warn!("{what}: [{start:#x}, +{size}) is still registered; close the MR first");
        return Err(Error::BUSY);
    }
    Ok(())
}
