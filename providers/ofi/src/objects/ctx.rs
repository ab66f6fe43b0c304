//! The XPU context: one memory interface of the core's context, served
//! by a domain whose libfabric provider can reach that memory. The blocks
//! of its objects stay mapped until it closes.
use super::domain::{Domain, Workers};
use crate::core::{self, Ctx};
use crate::state::block::{free_retired, keep_retired};
use crate::state::dom::DomInner;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::sync::Arc;

pub struct XpuCtx {
    pub dom: Arc<DomInner>,
    pub workers: Arc<Workers>,
    pub core_ctx: Ctx,
    pub iface: i32,
}

impl XpuCtx {
    pub fn open(d: &Domain, a: &fi_xpu_prov_ctx_args) -> Result<XpuCtx> {
        let dom = &d.inner;
        if a.iface != FI_HMEM_SYSTEM && !dom.has(FI_HMEM) {
            core::warn(&format!(
                "libfabric provider {} does not offer FI_HMEM: cannot serve iface {} \
                 (this libfabric was built without that interface's memory support; \
                 an FI_HMEM_SYSTEM context with host memory works)",
                dom.prov,
                fi_hmem_iface_name(a.iface)
            ));
            return Err(Error::OPNOTSUPP);
        }
        let core_ctx = Ctx::of(a);
        keep_retired(core_ctx);
        Ok(XpuCtx {
            dom: dom.clone(),
            workers: d.workers.clone(),
            core_ctx,
            iface: a.iface,
        })
    }
}

impl Drop for XpuCtx {
    fn drop(&mut self) {
        free_retired(self.core_ctx);
    }
}
