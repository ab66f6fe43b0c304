//! XPU contexts: the heap peers map, the local and staging memory, the
//! table of registrations, the resolve table.
use super::params::heap_size;
use crate::core::{self, Ctx};
use crate::device::DeviceId;
use crate::domain::{store, CtxSt, FreeList, Inner, Slots};
use crate::layout::*;
use crate::table::Table;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::collections::HashMap;
use std::mem::size_of;
use std::os::fd::AsRawFd;
use std::sync::Arc;

pub struct XpuCtx {
    pub dom: Arc<Inner>,
    pub id: u64,
    pub core: Ctx,
    /// The device the context's memory is on, as its endpoints publish it.
    pub device_id: DeviceId,
}

impl XpuCtx {
    pub fn open(dom: &Arc<Inner>, core_ctx: Ctx, iface: fi_hmem_iface) -> Result<XpuCtx> {
        let device = core::device_memory(core_ctx);
        if iface != FI_HMEM_SYSTEM && !device {
            core::warn(&format!(
                "fi_xpu_ctx_open: shm serves iface {} through the library's built-in memory \
                 backend only: with application memory callbacks the host has no way into the \
                 context's device memory; open the context without callbacks",
                fi_hmem_iface_name(iface)
            ));
            return Err(Error::OPNOTSUPP);
        }
        if device && dom.agent.is_some() {
            core::warn(
                "fi_xpu_ctx_open: shm cannot run a host progress agent (FI_XPU_DOMAIN_HOST_PROGRESS, \
                 FI_XPU_SHM_HOST_PROGRESS) over a context whose heap is device memory: the agent \
                 progresses inboxes through CPU pointers, which device memory does not have; \
                 open the domain without host progress",
            );
            return Err(Error::OPNOTSUPP);
        }
        let size = heap_size();
        // The registration table (and its header), then room for the
        // endpoints' staging lanes: what peers only read. The lanes take
        // at most as much as the heap (each endpoint's inbox there is as
        // large as its lanes).
        let table = Table::unsealed(STAGE_START + size)?;
        let table_fd = table.fd().try_clone_to_owned().map_err(|_| Error::MFILE)?;
        // The lanes are written by device code: through an import of the
        // table, made before the seal forbids writable mappings.
        let stage =
            core::import(core_ctx, table.fd().as_raw_fd(), 0, table.len()).inspect_err(|e| {
                core::warn(&format!(
                    "fi_xpu_ctx_open: shm maps memory into the context from file descriptors \
                 (fi_xpu_import with FI_XPU_IMPORT_DMABUF of a memfd), and the context's memory \
                 refused one ({e}): the application's import callback must map an fd"
                ))
            })?;
        if let Err(e) = table.seal() {
            core::unimport(core_ctx, stage);
            return Err(e);
        }
        // SAFETY: the table is a fresh writable mapping of at least 64 bytes.
        unsafe {
            let h = table.addr() as *mut HeapHdr;
            (*h).size = table.len();
            (*h).mr_off = 64;
            (*h).mr_slots = MR_SLOTS as u64;
            (*h).magic = HEAP_MAGIC;
        }
        let (heap, fd) = match core::alloc(core_ctx, size, true) {
            Ok((heap, Some(fd))) => (heap, fd),
            Ok((heap, None)) => {
                core::warn(
                    "fi_xpu_ctx_open: shm shares the context's heap with peers as a file \
                     descriptor, and the context's memory gave none: the application's alloc \
                     callback must return an fd (a memfd or DMA-BUF) for FI_XPU_ALLOC_DMABUF",
                );
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(Error::OPNOTSUPP);
            }
            Err(e) => {
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        // The context's root, then its table of raw peer addresses.
        let dev_size = size_of::<CtxDev>() + PEER_ADDRS * size_of::<PeerAddr>();
        let (dev, _) = match core::alloc(core_ctx, dev_size as u64, false) {
            Ok(d) => d,
            Err(e) => {
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        let resolve = match core::alloc_device_only(
            core_ctx,
            (RESOLVE_SLOTS * size_of::<ResolveEnt>()) as u64,
        ) {
            Ok(r) => r,
            Err(e) => {
                core::free(core_ctx, dev);
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        // From here on the table goes with the root: `free_dev` frees both.
        let free_dev = |d: usize| {
            core::free(core_ctx, resolve);
            core::free(core_ctx, d);
        };
        // The heap's own header holds no registrations: a key naming the
        // heap finds no slot.
        let hdr = HeapHdr {
            magic: HEAP_MAGIC,
            size,
            mr_off: 0,
            mr_slots: 0,
            bell: 0,
            _pad: [0; 3],
        };
        // SAFETY: HeapHdr is plain words (repr(C), no padding).
        let hdr_bytes = unsafe {
            std::slice::from_raw_parts((&hdr as *const HeapHdr).cast::<u8>(), size_of::<HeapHdr>())
        };
        if let Err(e) = core::heap_write(core_ctx, heap, hdr_bytes) {
            free_dev(dev);
            core::free(core_ctx, heap);
            core::unimport(core_ctx, stage);
            return Err(e);
        }
        if device {
            core::debug(&format!(
                "XPU context: heap of {size} bytes in device memory ({}), reached by the host \
                 through the memory backend only",
                fi_hmem_iface_name(iface)
            ));
        }
        let st = dom.lock();
        let region = match dom.share_region(st, fd, 0, size, false) {
            Ok(r) => r,
            Err(e) => {
                free_dev(dev);
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        let st = dom.lock();
        let table_region = match dom.share_region(st, table_fd, 0, table.len(), false) {
            Ok(r) => r,
            Err(e) => {
                dom.unshare_region(&mut dom.lock(), region);
                free_dev(dev);
                core::free(core_ctx, heap);
                core::unimport(core_ctx, stage);
                return Err(e);
            }
        };
        // SAFETY: `dev` is the context's CtxDev, allocated above at its
        // size (with the table of peer addresses behind it); its fields.
        unsafe {
            store(dev, heap as u64);
            store(dev + 8, region as u64);
            store(dev + 16, dom.nonce);
            store(dev + 24, (dev + size_of::<CtxDev>()) as u64);
            store(
                dev + std::mem::offset_of!(CtxDev, abort),
                core::ctx_abort_word(core_ctx),
            );
            store(dev + std::mem::offset_of!(CtxDev, resolve), resolve as u64);
        }
        let mut st = dom.lock();
        let id = dom.add_ctx(
            &mut st,
            CtxSt {
                core: core_ctx,
                dev,
                resolve,
                heap,
                heap_region: region,
                heap_alloc: FreeList::new(size_of::<HeapHdr>() as u64, size),
                stage,
                stage_alloc: FreeList::new(STAGE_START, table.len()),
                table,
                table_region,
                mr_slots: Slots::new(MR_SLOTS),
                maps: HashMap::new(),
                peer_addrs: HashMap::new(),
                peer_same_device: HashMap::new(),
                peer_slots: Slots::new(PEER_ADDRS),
                retired_imports: Vec::new(),
                retired_dev: Vec::new(),
            },
        );
        Ok(XpuCtx {
            dom: dom.clone(),
            id,
            core: core_ctx,
            device_id: crate::device::of_ctx(core_ctx, iface),
        })
    }

    pub fn close(&self) -> Result<()> {
        let mut st = self.dom.lock();
        let c = self.dom.remove_ctx(&mut st, self.id).ok_or(Error::INVAL)?;
        self.dom.unshare_region(&mut st, c.heap_region);
        self.dom.unshare_region(&mut st, c.table_region);
        core::free(c.core(), c.resolve);
        core::free(c.core(), c.dev);
        core::free(c.core(), c.heap);
        core::unimport(c.core(), c.stage);
        Ok(())
    }

    /// Carves staging lanes of `size` bytes out of the read-only area;
    /// returns (device address, offset in the table region).
    pub fn stage_alloc(&self, size: u64) -> Result<(usize, u64)> {
        let mut st = self.dom.lock();
        let c = st.ctxs.get_mut(&self.id).ok_or(Error::INVAL)?;
        let off = c.stage_alloc.alloc(size).ok_or_else(|| {
            core::warn("context staging area exhausted; raise FI_XPU_SHM_HEAP_SIZE");
            Error::NOMEM
        })?;
        Ok((c.stage + off as usize, off))
    }

    pub fn stage_free(&self, off: u64, size: u64) {
        let mut st = self.dom.lock();
        if let Some(c) = st.ctxs.get_mut(&self.id) {
            c.stage_alloc.release(off, size);
        }
    }

    /// Carves `size` bytes out of the shared heap; returns (address, offset).
    pub fn heap_alloc(&self, size: u64) -> Result<(usize, u64)> {
        let mut st = self.dom.lock();
        let c = st.ctxs.get_mut(&self.id).ok_or(Error::INVAL)?;
        let off = c.heap_alloc.alloc(size).ok_or_else(|| {
            core::warn("context heap exhausted; raise FI_XPU_SHM_HEAP_SIZE");
            Error::NOMEM
        })?;
        let a = c.heap + off as usize;
        // [a, a+size) lies inside the heap and was free.
        if let Err(e) = core::heap_zero(c.core, a, size) {
            c.heap_alloc.release(off, size);
            return Err(e);
        }
        Ok((a, off))
    }

    /// Device memory of this context that no peer can map: what the owner
    /// follows pointers through lives here, out of other processes' reach.
    pub fn local_alloc(&self, size: u64) -> Result<usize> {
        core::alloc(self.core, size, false).map(|(a, _)| a)
    }

    pub fn local_free(&self, addr: usize) {
        core::free(self.core, addr);
    }

    /// Keeps `addr` (from `local_alloc`) allocated until the context closes.
    pub fn retire_local(&self, addr: usize) {
        let mut st = self.dom.lock();
        match st.ctxs.get_mut(&self.id) {
            Some(c) => c.retired_dev.push(addr),
            None => core::free(self.core, addr),
        }
    }

    pub fn heap_free(&self, off: u64, size: u64) {
        let mut st = self.dom.lock();
        if let Some(c) = st.ctxs.get_mut(&self.id) {
            c.heap_alloc.release(off, size);
        }
    }

    pub fn dev(&self) -> usize {
        self.dom.lock().ctxs.get(&self.id).map_or(0, |c| c.dev)
    }

    /// The address of the context's heap (its `HeapHdr` first).
    pub fn heap(&self) -> usize {
        self.dom.lock().ctxs.get(&self.id).map_or(0, |c| c.heap)
    }

    /// Whether the peer at `fi_addr` of AV `av` (once looked up on this
    /// context) has its context on this context's device: the decision,
    /// made per peer pair, that allows device scope between the two.
    #[allow(dead_code)] // read by the choice of scope per object (fi_xpu_shm(7))
    pub fn same_device_for_peer(&self, av: u64, fi_addr: u64) -> Option<bool> {
        let st = self.dom.lock();
        st.ctxs
            .get(&self.id)?
            .peer_same_device
            .get(&(av, fi_addr))
            .copied()
    }
}
