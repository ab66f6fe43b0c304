//! Registrations: the memory peers map, the table entries they read.
use super::ctx::XpuCtx;
use crate::core;
use crate::domain::{store, Inner};
use crate::layout::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::mem::size_of;
use std::sync::Arc;

/// What peers get of a registration's memory: without `FI_REMOTE_WRITE`,
/// a read-only descriptor of the same file, sealed first (a read-only
/// descriptor cannot add seals), so that peers map it read-only and a
/// stray store into it faults in the peer instead of changing our memory.
/// A DMA-BUF cannot be opened again by path and is shared as it is, as is
/// any memory where `/proc` cannot reopen it (logged).
fn shared_view(fd: std::os::fd::OwnedFd, access: u64) -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsFd;
    if access & FI_REMOTE_WRITE != 0
        || fi_xpu_os::file::is_dmabuf(&fd)
        || crate::sealed::is_device_handle(fd.as_fd())
    {
        return Ok(fd);
    }
    crate::sealed::seal(fd.as_fd()).inspect_err(|_| {
        core::warn("cannot seal memory against resizing; peers would refuse it")
    })?;
    match fi_xpu_os::file::reopen_read_only(&fd) {
        Ok(ro) => Ok(ro),
        Err(e) => {
            core::warn(&format!(
                "fi_xpu_mr_reg: cannot open a read-only view of the memory for peers ({e}); \
                 they map it writable"
            ));
            Ok(fd)
        }
    }
}

pub struct Mr {
    pub dom: Arc<Inner>,
    pub ctx_id: u64,
    pub slot: usize,
    pub region: u32,
    pub key: u64,
    pub base: u64,
    pub len: u64,
}

impl Mr {
    pub fn reg(dom: &Arc<Inner>, ctx: &XpuCtx, args: &fi_xpu_prov_mr_args) -> Result<Mr> {
        const RULE: &str = "fi_xpu_mr_reg: shm registers only memory its context can export as an fd (from fi_xpu_alloc or fi_xpu_import on that context)";
        const DEVICE_RULE: &str = "fi_xpu_mr_reg: shm cannot share this memory with peers: on a device context it registers memory of the context (fi_xpu_alloc, or fi_xpu_import of a CUDA VMM allocation's POSIX file descriptor or of host memory), and memory from cudaMalloc/cuMemAlloc through a legacy IPC handle where the driver gives one; a DMA-BUF no other process can map into its GPU: allocate the memory with fi_xpu_alloc on the context, or cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR";
        let device = core::device_memory(ctx.core);
        let (buf, len) = (args.buf as usize, args.len as u64);
        let (fd, off, ipc) = if device && !core::known(ctx.core, buf, len) {
            // Device memory of the application's (cudaMalloc): shared
            // through a legacy IPC handle, where the driver gives one.
            let (h, off) = core::export_ipc(ctx.core, buf, len).inspect_err(|e| {
                core::warn(&format!("{DEVICE_RULE} (no IPC handle either: {e})"))
            })?;
            (crate::domain::ipc_record(&h)?, off, true)
        } else {
            let (fd, off) = core::export(ctx.core, buf, len).inspect_err(|_| core::warn(RULE))?;
            if device && fi_xpu_os::file::is_dmabuf(&fd) {
                core::warn(DEVICE_RULE);
                return Err(Error::OPNOTSUPP);
            }
            (shared_view(fd, args.access)?, off, false)
        };
        let slot = {
            let mut st = dom.lock();
            let c = st.ctxs.get_mut(&ctx.id).ok_or(Error::INVAL)?;
            c.mr_slots.take().ok_or(Error::NOSPC)?
        };
        let st = dom.lock();
        let region = match dom.share_region(st, fd, off, args.len as u64, ipc) {
            Ok(r) => r,
            Err(e) => {
                if let Some(c) = dom.lock().ctxs.get_mut(&ctx.id) {
                    c.mr_slots.give(slot);
                }
                return Err(e);
            }
        };
        let mut st = dom.lock();
        let gen = Inner::next_gen(&mut st);
        let c = st.ctxs.get(&ctx.id).ok_or(Error::INVAL)?;
        let key = ((c.table_region as u64) << 48) | ((slot as u64) << 32) | gen as u64;
        let e = c.table.addr() + 64 + slot * size_of::<MrEntry>();
        // SAFETY: slot `slot` of the context's live registration table
        // (its header, then MR_SLOTS entries); the entry's fields.
        unsafe {
            store(e + 8, args.buf as u64);
            store(e + 16, args.len as u64);
            store(e + 24, args.access);
            store(e + 32, region as u64);
            store(e + 40, key);
            // The generation is published last: a peer that sees it sees the rest.
            store(e, gen as u64);
        }
        Ok(Mr {
            dom: dom.clone(),
            ctx_id: ctx.id,
            slot,
            region,
            key,
            base: args.buf as u64,
            len: args.len as u64,
        })
    }

    pub fn close(&self) {
        let mut st = self.dom.lock();
        if let Some(c) = st.ctxs.get_mut(&self.ctx_id) {
            // SAFETY: this registration's entry of the live table.
            unsafe { store(c.table.addr() + 64 + self.slot * size_of::<MrEntry>(), 0) };
            c.mr_slots.give(self.slot);
        }
        self.dom.unshare_region(&mut st, self.region);
    }

    pub fn desc(&self) -> [u64; 4] {
        [self.region as u64, self.base, self.len, self.key]
    }
}
