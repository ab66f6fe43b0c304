//! The ofi provider: kernels post work requests into a ring in host-visible
//! memory; progress threads issue them on a libfabric endpoint and write
//! completions and counters back (see fi_xpu_ofi(7)).
//!
//! This file maps the plugin ABI, through the provider SDK, onto the safe
//! code in the other modules.
use fi_xpu_prov_sdk::{Error, Result};
mod addr_set;
mod core;
mod fabric;
mod fence;
pub mod ffi;
mod inflight;
pub mod layout;
pub mod mr_table;
mod objects;
mod params;
mod proxy;
pub mod ring;
#[cfg(test)]
mod ring_fuzz;
mod shm_sweep;
mod state;

use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{lock, Bind, HostCqBuf, Provider};
use objects::{Av, CntrShared, CqShared, Domain, Ep, Mr, XpuCtx, ADDR_LEN};
use std::ffi::CStr;
use std::sync::{Arc, Mutex};

pub struct Ofi;

impl Provider for Ofi {
    const NAME: &'static CStr = c"ofi";
    const VERSION: u32 = 1;
    const PROV_ID: u32 = FI_XPU_PROV_OFI;
    const CAPS: u64 = FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR | FI_XPU_CAP_WR;
    const IFACES: u64 =
        1 << FI_HMEM_SYSTEM | 1 << FI_HMEM_CUDA | 1 << FI_HMEM_ROCR | 1 << FI_HMEM_ZE;
    const ADDRLEN: usize = ADDR_LEN;
    /// A transport may bound a message lower: the domain's own
    /// `max_msg_size`, which writes above it are refused against.
    const LIMITS: fi_xpu_limits = fi_xpu_limits {
        cq_size: state::cq::MAX_CQ_ENTRIES,
        tx_depth: objects::ep::MAX_RING_ENTRIES,
        rx_depth: objects::ep::MAX_RING_ENTRIES,
        msg_size: objects::domain::MAX_LEN,
    };

    type Domain = Domain;
    type Ctx = XpuCtx;
    type Av = Av;
    type Mr = Mr;
    type Cq = Arc<CqShared>;
    type Cntr = Arc<CntrShared>;
    type Ep = Mutex<Ep>;

    fn init() -> Result<()> {
        for (name, default, help) in params::PARAMS {
            fi_xpu_prov_sdk::services::param_define(name, default, help)?;
        }
        if !ffi::available() {
            // -FI_ENODEV: nothing to serve here. The loader shows this line
            // as a warning only when FI_XPU_PROVIDER names ofi; otherwise a
            // machine without libfabric is nothing wrong (info level).
            core::warn("built without libfabric (its headers were not found at build time)");
            return Err(Error::NODEV);
        }
        Ok(())
    }

    fn domain_open(attr: &fi_xpu_domain_attr) -> Result<Domain> {
        // What libfabric's shm left for endpoints of processes now gone.
        shm_sweep::sweep();
        Domain::open(Some(attr))
    }

    fn ctx_open(d: &Domain, args: &fi_xpu_prov_ctx_args) -> Result<XpuCtx> {
        XpuCtx::open(d, args)
    }

    fn ctx_query(_ctx: &XpuCtx) -> Result<fi_xpu_ctx_info> {
        Ok(fi_xpu_ctx_info {
            caps: Self::CAPS,
            av_addr_size: 8,
            mr_desc_size: std::mem::size_of::<layout::MrDesc>(),
            // Prepared work requests (fi_xpu/wr.h), the same on every provider.
            max_tx_wr_desc_size: FI_XPU_WR_SIZE,
            max_rx_wr_desc_size: FI_XPU_WR_SIZE,
        })
    }

    fn av_open(d: &Domain, attr: &fi_xpu_av_attr) -> Result<Av> {
        Av::open(&d.inner, attr.count)
    }

    fn av_insert(av: &Av, addr: &[u8], _flags: u64) -> Result<fi_addr_t> {
        av.insert(addr)
    }

    fn av_remove(av: &Av, fi_addr: fi_addr_t, _flags: u64) -> Result<()> {
        av.remove(fi_addr)
    }

    fn av_lookup(av: &Av, fi_addr: fi_addr_t, _c: &XpuCtx, _f: u64) -> Result<Vec<u8>> {
        Ok(av.lookup(fi_addr)?.to_ne_bytes().to_vec())
    }

    fn mr_reg(d: &Domain, _c: Option<&XpuCtx>, args: &fi_xpu_prov_mr_args) -> Result<Mr> {
        Mr::reg(&d.inner, args)
    }

    fn mr_key(mr: &Mr) -> Result<u64> {
        Ok(mr.key)
    }

    fn mr_desc(mr: &Mr, _ctx: &XpuCtx, _flags: u64) -> Result<Vec<u8>> {
        let d = mr.desc();
        Ok([d.id, d.key, d.base, d.len]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect())
    }

    fn cq_open(_d: &Domain, c: Option<&XpuCtx>, attr: &fi_xpu_cq_attr) -> Result<Arc<CqShared>> {
        CqShared::open(c.map(|c| c.core_ctx), attr)
    }

    fn cq_close(cq: &mut Arc<CqShared>) -> Result<()> {
        // The endpoint's proxy may hold the block a little longer; the
        // handle is refused from the close on.
        cq.tombstone();
        Ok(())
    }

    fn cq_export(cq: &Arc<CqShared>, _flags: u64) -> Result<u64> {
        Ok(cq.dev() as u64)
    }

    fn cq_host_read(cq: &Arc<CqShared>, mut out: HostCqBuf<'_>) -> Result<usize> {
        let (n, src) = (out.count(), out.src());
        // SAFETY: `out` holds `n` entries in this CQ's format and `src` is
        // NULL or has `n` slots (HostCqBuf's contract).
        unsafe { cq.host_read(out.as_mut_ptr(), n, src) }
    }

    fn cq_host_readerr(cq: &Arc<CqShared>, e: &mut fi_cq_err_entry, _flags: u64) -> Result<usize> {
        cq.host_readerr(e)
    }

    fn cntr_open(
        _d: &Domain,
        c: Option<&XpuCtx>,
        _attr: &fi_xpu_cntr_attr,
    ) -> Result<Arc<CntrShared>> {
        CntrShared::open(c.map(|c| c.core_ctx))
    }

    fn cntr_close(c: &mut Arc<CntrShared>) -> Result<()> {
        c.tombstone();
        Ok(())
    }

    fn cntr_export(c: &Arc<CntrShared>, _flags: u64) -> Result<u64> {
        Ok(c.dev() as u64)
    }

    fn cntr_host_read(c: &Arc<CntrShared>) -> Result<(u64, u64)> {
        Ok(c.read())
    }

    fn cntr_host_update(c: &Arc<CntrShared>, how: u32, value: u64) -> Result<()> {
        c.update(how, value)
    }

    fn ep_open(_d: &Domain, c: &XpuCtx, attr: &fi_xpu_ep_attr) -> Result<Mutex<Ep>> {
        Ep::open(c, attr).map(Mutex::new)
    }

    fn ep_bind(e: &Mutex<Ep>, obj: Bind<'_, Self>, flags: u64) -> Result<()> {
        let mut e = lock(e);
        match obj {
            Bind::Av(av) => e.bind_av(av),
            Bind::Cq(cq) => e.bind_cq(cq, flags),
            Bind::Cntr(c) => e.bind_cntr(c, flags),
        }
    }

    fn ep_enable(e: &Mutex<Ep>) -> Result<()> {
        lock(e).enable()
    }

    fn ep_getname(e: &Mutex<Ep>) -> Result<Vec<u8>> {
        Ok(lock(e).name()?.to_vec())
    }

    fn ep_close(e: &mut Mutex<Ep>) -> Result<()> {
        lock(e).inner.tombstone();
        Ok(())
    }

    fn ep_export(e: &Mutex<Ep>, _flags: u64) -> Result<u64> {
        Ok(lock(e).inner.dev() as u64)
    }
}

fi_xpu_prov_sdk::export_provider!(Ofi);
