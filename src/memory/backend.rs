//! What a memory backend is and what passes between it and the
//! bookkeeping in `mod.rs`: the `Backend` trait, an allocation, an import
//! request, a host access to device memory, and who owns a range.
use crate::error::{Error, Result};
use fi_xpu_abi::*;
use std::os::fd::{BorrowedFd, OwnedFd};

/// What an allocation returns.
#[derive(Debug)]
pub struct Allocation {
    pub addr: usize,
    /// Set when the allocation was asked to be exportable.
    pub fd: Option<OwnedFd>,
    pub offset: u64,
}

/// Who asked for a piece of memory. The application's memory calls
/// (`fi_xpu_free`, `fi_xpu_unimport`) reach only the application's own
/// allocations and imports; a provider's (a shm context's root and heap, a
/// peer's memory it imported) answer them as unknown addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    App,
    Provider,
}

/// An import request, checked.
pub struct Import<'a> {
    pub host_addr: usize,
    pub fd: Option<BorrowedFd<'a>>,
    pub offset: u64,
    pub size: u64,
    pub flags: u64,
    /// The application imported it (not a provider): it may be registered
    /// and exported again, so a mapping backend keeps the fd.
    pub exportable: bool,
}

/// A host access to device memory that the host does not reach through
/// pointers (`fi_xpu_core.mem_access`).
pub enum Access<'a> {
    /// Whether the backend's memory needs this way at all.
    Probe,
    Write {
        dev: usize,
        src: &'a [u8],
    },
    Read {
        dev: usize,
        dst: &'a mut [u8],
    },
    Set {
        dev: usize,
        len: usize,
        byte: u8,
    },
    /// One 64-bit store at an 8-byte aligned address.
    Store64 {
        dev: usize,
        value: u64,
    },
}

impl Access<'_> {
    /// The device range touched.
    pub(super) fn range(&self) -> Option<(usize, u64)> {
        match self {
            Access::Probe => None,
            Access::Write { dev, src } => Some((*dev, src.len() as u64)),
            Access::Read { dev, dst } => Some((*dev, dst.len() as u64)),
            Access::Set { dev, len, .. } => Some((*dev, *len as u64)),
            Access::Store64 { dev, .. } => Some((*dev, 8)),
        }
    }
}

/// One way of reaching a device's memory.
pub trait Backend: Send + Sync {
    fn alloc(&self, size: u64, alignment: u64, flags: u64) -> Result<Allocation>;
    fn free(&self, addr: usize) -> Result<()>;
    fn import(&self, req: &Import) -> Result<usize>;
    /// Undoes one import at `dev_addr`; `mapped` tells whether that import
    /// was given a DMA-BUF fd (a host import of the same address may exist).
    fn unimport(&self, dev_addr: usize, mapped: bool) -> Result<()>;
    /// Releases the memory of an import but keeps its address range
    /// mapped (to private zero pages) until the backend is dropped.
    fn retire(&self, _dev_addr: usize) -> Result<()> {
        Err(Error::OPNOTSUPP)
    }
    /// A DMA-BUF (memfd for system memory) for `[addr, addr + size)`.
    fn export(&self, addr: usize, size: u64) -> Result<(OwnedFd, u64)>;
    /// Host access to memory of this backend that the host must not
    /// dereference (device memory), in range of a live allocation or
    /// import (checked by the caller). `OPNOTSUPP`: the host reaches this
    /// backend's memory with plain loads and stores.
    fn access(&self, _access: Access) -> Result<()> {
        Err(Error::OPNOTSUPP)
    }
    /// The UUID of the device this backend allocates on; `NODATA` for
    /// host memory and callbacks.
    fn device_uuid(&self) -> Result<[u8; 16]> {
        Err(Error::NODATA)
    }
    /// A legacy IPC handle of the device allocation holding
    /// `[addr, addr + size)` (memory not of this backend), and the offset.
    fn export_ipc(&self, _addr: usize, _size: u64) -> Result<([u8; IPC_HANDLE], u64)> {
        Err(Error::OPNOTSUPP)
    }
    /// Opens a peer's legacy IPC handle; `[offset, offset + size)` must lie
    /// inside its allocation. Undone by `unimport` (mapped).
    fn import_ipc(&self, _handle: &[u8; IPC_HANDLE], _offset: u64, _size: u64) -> Result<usize> {
        Err(Error::OPNOTSUPP)
    }
}

/// Bytes of a legacy IPC handle.
pub const IPC_HANDLE: usize = FI_XPU_IPC_HANDLE_SIZE;
