//! Endpoints: the inbox, the staging lanes, the device block, bindings.
use super::av::{write_av_ent, Av, AV_TAB_CAP};
use super::cntr::Counter;
use super::cq::Cq;
use super::ctx::XpuCtx;
use super::params::test_delay_ns;
use crate::core;
use crate::domain::{store, Addr, ADDR_LEN};
use crate::layout::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{cntr_slots, Error, Result};
use std::mem::{offset_of, size_of};
use std::sync::Arc;

pub struct Ep {
    pub ctx: Arc<XpuCtx>,
    pub id: u32,
    pub block: usize,
    pub block_off: u64,
    block_size: u64,
    /// Where its staging lanes lie in the context's table region, and
    /// its `EpInfo` just behind them.
    stage_off: u64,
    info: usize,
    pub dev: usize,
    pub av: Option<Arc<Av>>,
    av_tab: usize,
    pub cqs: Vec<Arc<Cq>>,
    pub enabled: bool,
}

impl Ep {
    pub fn open(ctx: &Arc<XpuCtx>, caps: u64) -> Result<Ep> {
        let c = ctx;
        // The inbox follows the block in the heap, which peers write; the
        // staging lanes lie in the area peers only read (table.rs).
        let block_size = size_of::<EpBlock>() as u64 + INBOX_SLOTS * SLOT_SIZE;
        let (block, block_off) = c.heap_alloc(block_size)?;
        let (stage, stage_off) = match c.stage_alloc(STAGE_BYTES + INFO_BYTES) {
            Ok(x) => x,
            Err(e) => {
                c.heap_free(block_off, block_size);
                return Err(e);
            }
        };
        // Its information for peers follows its lanes, read-only to them
        // as well.
        let info = stage + STAGE_BYTES as usize;
        let dsz = size_of::<EpDev>() as u64;
        let dev = match c.local_alloc(dsz) {
            Ok(x) => x,
            Err(e) => {
                c.heap_free(block_off, block_size);
                c.stage_free(stage_off, STAGE_BYTES + INFO_BYTES);
                return Err(e);
            }
        };
        let avsz = (AV_TAB_CAP * size_of::<AvEnt>()) as u64;
        let av_tab = match c.local_alloc(avsz) {
            Ok(x) => x,
            Err(e) => {
                c.heap_free(block_off, block_size);
                c.stage_free(stage_off, STAGE_BYTES + INFO_BYTES);
                c.local_free(dev);
                return Err(e);
            }
        };
        let (stage_region, heap_region) = c
            .dom
            .lock()
            .ctxs
            .get(&c.id)
            .map_or((0, 0), |x| (x.table_region, x.heap_region));
        let id = c.dom.next_ep();
        let caps = if caps == 0 {
            FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC
        } else {
            caps
        };
        // SAFETY: fresh zeroed allocations of the right sizes.
        unsafe {
            // Area of the table that an earlier endpoint may have used.
            std::ptr::write_bytes(info as *mut u8, 0, INFO_BYTES as usize);
            let i = info as *mut EpInfo;
            (*i).nonce = c.dom.nonce;
            (*i).ep_id = id as u64;
            (*i).caps = caps;
            (*i).heap_region = heap_region as u64;
            (*i).block_off = block_off;
            (*i).device = c.device_id;
            (*i).magic = EP_MAGIC;
            let d = dev as *mut EpDev;
            (*d).block = block as u64;
            (*d).ctx = c.dev() as u64;
            (*d).nonce = c.dom.nonce;
            (*d).ep_id = id as u64;
            (*d).caps = caps;
            (*d).av_tab = av_tab as u64;
            (*d).av_count = AV_TAB_CAP as u64;
            (*d).magic = fi_xpu_handle_word(FI_XPU_HANDLE_EP, FI_XPU_HANDLE_LIVE);
            (*d).test_delay_ns = test_delay_ns();
            (*d).stage = stage as u64;
            (*d).stage_region = stage_region as u64;
            (*d).stage_off = stage_off;
        }
        for i in 0..AV_TAB_CAP {
            write_av_ent(av_tab, i, 0, u64::MAX);
        }
        Ok(Ep {
            ctx: ctx.clone(),
            id,
            block,
            block_off,
            block_size,
            stage_off,
            info,
            dev,
            av: None,
            av_tab,
            cqs: Vec::new(),
            enabled: false,
        })
    }

    pub fn bind_av(&mut self, av: &Arc<Av>) {
        let a = av;
        for (i, e) in a.entries.lock().unwrap().iter().enumerate() {
            if let Some(e) = e {
                write_av_ent(self.av_tab, i, e.addr.nonce, e.addr.ep_id as u64);
            }
        }
        a.tables.lock().unwrap().push(self.av_tab);
        self.av = Some(av.clone());
    }

    pub fn bind_cq(&mut self, cq: &Arc<Cq>, flags: u64) -> Result<()> {
        let q = cq;
        if !q.is_host() && q.ctx_id != self.ctx.id {
            return Err(Error::INVAL);
        }
        // Only a CQ bound for receive takes remote events (remote CQ data).
        let remote = match flags & FI_RECV != 0 && !q.is_host() {
            true => q.remote_ring()?,
            false => 0,
        };
        q.add_progress(self.dev)?;
        // SAFETY: this endpoint's live EpDev and endpoint block; their
        // CQ words.
        unsafe {
            if flags & FI_TRANSMIT != 0 {
                store(self.dev + 40, q.dev as u64);
            }
            if flags & FI_RECV != 0 {
                store(self.dev + 48, q.dev as u64);
                if remote != 0 {
                    store(self.info + offset_of!(EpInfo, rx_cq), remote);
                }
            }
        }
        self.cqs.push(cq.clone());
        Ok(())
    }

    pub fn bind_cntr(&mut self, c: &Counter, flags: u64) -> Result<()> {
        if c.is_host() && flags & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
            core::warn("a host counter cannot count remote accesses: peers cannot reach it");
            return Err(Error::OPNOTSUPP);
        }
        // Only a counter bound for remote events has words peers can reach.
        let remote = match flags & (FI_REMOTE_READ | FI_REMOTE_WRITE) != 0 {
            true => c.remote_block()?,
            false => 0,
        };
        // SAFETY: this endpoint's live EpDev (its six counter words) and
        // endpoint block (its remote counter offsets).
        unsafe {
            for i in cntr_slots(flags) {
                store(self.dev + 56 + 8 * i, c.addr as u64);
            }
            if flags & FI_REMOTE_WRITE != 0 {
                store(self.info + offset_of!(EpInfo, rem_write_cntr), remote);
            }
            if flags & FI_REMOTE_READ != 0 {
                store(self.info + offset_of!(EpInfo, rem_read_cntr), remote);
            }
        }
        Ok(())
    }

    pub fn name(&self) -> [u8; ADDR_LEN] {
        let c = &self.ctx;
        let region = c.dom.lock().ctxs.get(&c.id).map_or(0, |x| x.table_region);
        Addr {
            boot_id: c.dom.boot_id,
            pid: c.dom.pid,
            ep_id: self.id,
            nonce: c.dom.nonce,
            secret: c.dom.secret,
            ep_region: region,
            ep_off: (self.stage_off + STAGE_BYTES) as u32,
        }
        .encode()
    }

    pub fn close(&mut self) {
        if let Some(a) = &self.ctx.dom.agent {
            a.remove(self.dev);
        }
        for q in &self.cqs {
            q.remove_progress(self.dev);
        }
        if let Some(a) = &self.av {
            a.tables.lock().unwrap().retain(|&t| t != self.av_tab);
        }
        let c = &self.ctx;
        // SAFETY: the endpoint's information, live until freed just below; the
        // EpDev, retired (kept mapped) below, not freed.
        unsafe {
            // What remote events complete into first: a peer whose resolve
            // table still holds this endpoint (fi_xpu_shm(7) MEMORY
            // PLACEMENT) counts nothing into blocks that may be freed.
            for f in [
                offset_of!(EpInfo, rx_cq),
                offset_of!(EpInfo, rem_write_cntr),
                offset_of!(EpInfo, rem_read_cntr),
            ] {
                store(self.info + f, 0);
            }
            store(self.info + offset_of!(EpInfo, magic), 0)
        };
        c.heap_free(self.block_off, self.block_size);
        c.stage_free(self.stage_off, STAGE_BYTES + INFO_BYTES);
        // SAFETY: as above.
        unsafe {
            store(
                self.dev + offset_of!(EpDev, magic),
                fi_xpu_handle_word(0, FI_XPU_HANDLE_DEAD),
            )
        };
        c.retire_local(self.dev);
        c.local_free(self.av_tab);
    }
}
