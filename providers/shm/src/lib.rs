//! The shm provider: intra-node and device-direct. The device moves data
//! itself through peers' memory mapped into its address space; the host side
//! here only sets up, shares and maps memory (see fi_xpu_shm(7)).
//!
//! This file maps the plugin ABI, through the provider SDK, onto the safe
//! code in the other modules.
use fi_xpu_prov_sdk::{Error, Result};
mod agent;
mod control;
mod core;
mod device;
mod domain;
#[cfg(test)]
mod fuzz;
mod layout;
mod objects;
mod sealed;
mod table;
mod wire;

use domain::{Domain, ADDR_LEN};
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::services::CoreCtx;
use fi_xpu_prov_sdk::{lock, Bind, HostCqBuf, Provider};
use objects::{Av, Counter, Cq, Ep, Mr, XpuCtx};
use std::ffi::CStr;
use std::sync::{Arc, Mutex};

pub struct Shm;

impl Provider for Shm {
    const NAME: &'static CStr = c"shm";
    const VERSION: u32 = 1;
    const PROV_ID: u32 = FI_XPU_PROV_SHM;
    const CAPS: u64 = FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR | FI_XPU_CAP_WR;
    /// `FI_HMEM_CUDA` through the built-in backend only (`XpuCtx::open`).
    const IFACES: u64 = (1 << FI_HMEM_SYSTEM) | (1 << FI_HMEM_CUDA);
    const ADDRLEN: usize = ADDR_LEN;
    /// Receives posted at once: the fixed `MAX_POSTED` (a larger `rx_size`
    /// gets it too). Sends queue in the receiver's inbox, not here;
    /// messages and RMA have no bound of their own.
    const LIMITS: fi_xpu_limits = fi_xpu_limits {
        cq_size: objects::MAX_CQ_SIZE as u64,
        tx_depth: 0,
        rx_depth: layout::MAX_POSTED as u64,
        msg_size: 0,
    };

    type Domain = Domain;
    // Objects opened on a context, and an endpoint's bound AV and CQs, hold
    // them by Arc: the core closes them last, and the Arc keeps them valid.
    type Ctx = Arc<XpuCtx>;
    type Av = Arc<Av>;
    type Mr = Mr;
    type Cq = Arc<Cq>;
    type Cntr = Counter;
    type Ep = Mutex<Ep>;

    fn init() -> Result<()> {
        for (name, default, help) in objects::PARAMS {
            fi_xpu_prov_sdk::services::param_define(name, default, help)?;
        }
        Ok(())
    }

    fn domain_open(attr: &fi_xpu_domain_attr) -> Result<Domain> {
        Domain::open(attr.flags & FI_XPU_DOMAIN_HOST_PROGRESS != 0 || objects::host_progress())
    }

    fn ctx_open(d: &Domain, args: &fi_xpu_prov_ctx_args) -> Result<Arc<XpuCtx>> {
        XpuCtx::open(&d.inner, CoreCtx::of(args), args.iface).map(Arc::new)
    }

    fn ctx_query(_ctx: &Arc<XpuCtx>) -> Result<fi_xpu_ctx_info> {
        Ok(fi_xpu_ctx_info {
            caps: Self::CAPS,
            av_addr_size: 8,
            mr_desc_size: 32,
            // Prepared work requests (fi_xpu/wr.h), the same on every provider.
            max_tx_wr_desc_size: FI_XPU_WR_SIZE,
            max_rx_wr_desc_size: FI_XPU_WR_SIZE,
        })
    }

    fn ctx_close(c: &mut Arc<XpuCtx>) -> Result<()> {
        c.close()
    }

    fn av_open(d: &Domain, _attr: &fi_xpu_av_attr) -> Result<Arc<Av>> {
        Ok(Arc::new(Av {
            dom: d.inner.clone(),
            id: d.inner.next_obj(),
            entries: Mutex::new(Vec::new()),
            tables: Mutex::new(Vec::new()),
        }))
    }

    fn av_insert(av: &Arc<Av>, addr: &[u8], _flags: u64) -> Result<fi_addr_t> {
        av.insert(addr)
    }

    fn av_remove(av: &Arc<Av>, fi_addr: fi_addr_t, _flags: u64) -> Result<()> {
        av.remove(fi_addr)
    }

    fn av_lookup(av: &Arc<Av>, fi_addr: fi_addr_t, c: &Arc<XpuCtx>, _f: u64) -> Result<Vec<u8>> {
        Ok(av.lookup(fi_addr, c)?.to_ne_bytes().to_vec())
    }

    fn av_close(av: &mut Arc<Av>) -> Result<()> {
        av.close();
        Ok(())
    }

    fn mr_reg(d: &Domain, c: Option<&Arc<XpuCtx>>, args: &fi_xpu_prov_mr_args) -> Result<Mr> {
        let Some(c) = c else {
            core::warn("fi_xpu_mr_reg: shm needs the XPU context the memory was allocated on");
            return Err(Error::OPNOTSUPP);
        };
        Mr::reg(&d.inner, c, args)
    }

    fn mr_key(mr: &Mr) -> Result<u64> {
        Ok(mr.key)
    }

    fn mr_desc(mr: &Mr, _ctx: &Arc<XpuCtx>, _flags: u64) -> Result<Vec<u8>> {
        Ok(mr.desc().iter().flat_map(|w| w.to_ne_bytes()).collect())
    }

    fn mr_close(mr: &mut Mr) -> Result<()> {
        mr.close();
        Ok(())
    }

    fn cq_open(_d: &Domain, c: Option<&Arc<XpuCtx>>, attr: &fi_xpu_cq_attr) -> Result<Arc<Cq>> {
        Cq::open(c, attr).map(Arc::new)
    }

    fn cq_export(cq: &Arc<Cq>, _flags: u64) -> Result<u64> {
        Ok(cq.dev as u64)
    }

    fn cq_host_read(cq: &Arc<Cq>, mut out: HostCqBuf<'_>) -> Result<usize> {
        let (n, src) = (out.count(), out.src());
        // SAFETY: `out` holds `n` entries in this CQ's format and `src` is
        // NULL or has `n` slots (HostCqBuf's contract).
        unsafe { cq.host_read(out.as_mut_ptr(), n, src) }
    }

    fn cq_host_readerr(cq: &Arc<Cq>, e: &mut fi_cq_err_entry, _flags: u64) -> Result<usize> {
        cq.host_readerr(e)
    }

    fn cntr_open(
        _d: &Domain,
        c: Option<&Arc<XpuCtx>>,
        _attr: &fi_xpu_cntr_attr,
    ) -> Result<Counter> {
        Counter::open(c)
    }

    fn cntr_export(c: &Counter, _flags: u64) -> Result<u64> {
        Ok(c.dev as u64)
    }

    fn cntr_host_read(c: &Counter) -> Result<(u64, u64)> {
        Ok(c.read())
    }

    fn cntr_host_update(c: &Counter, how: u32, value: u64) -> Result<()> {
        c.update(how, value)
    }

    fn ep_open(_d: &Domain, c: &Arc<XpuCtx>, attr: &fi_xpu_ep_attr) -> Result<Mutex<Ep>> {
        Ep::open(c, attr.caps).map(Mutex::new)
    }

    fn ep_bind(e: &Mutex<Ep>, obj: Bind<'_, Self>, flags: u64) -> Result<()> {
        let mut e = lock(e);
        match obj {
            Bind::Av(av) => {
                e.bind_av(av);
                Ok(())
            }
            Bind::Cq(cq) => e.bind_cq(cq, flags),
            Bind::Cntr(c) => e.bind_cntr(c, flags),
        }
    }

    fn ep_enable(e: &Mutex<Ep>) -> Result<()> {
        let mut e = lock(e);
        e.enabled = true;
        if let Some(a) = &e.ctx.dom.agent {
            a.add(e.dev);
        }
        Ok(())
    }

    fn ep_getname(e: &Mutex<Ep>) -> Result<Vec<u8>> {
        Ok(lock(e).name().to_vec())
    }

    fn ep_export(e: &Mutex<Ep>, _flags: u64) -> Result<u64> {
        Ok(lock(e).dev as u64)
    }

    fn ep_close(e: &mut Mutex<Ep>) -> Result<()> {
        e.get_mut().unwrap_or_else(|p| p.into_inner()).close();
        Ok(())
    }
}

fi_xpu_prov_sdk::export_provider!(Shm);
