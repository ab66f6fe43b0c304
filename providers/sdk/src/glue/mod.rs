//! The plugin's `extern "C"` entry points, generic over the provider.
//!
//! Each one catches panics, turns the core's handles into references (see
//! the crate documentation for what the core guarantees), calls the
//! provider and writes out-parameters only on success. A handle is a
//! `Box` of the provider's object, leaked at open and dropped by a close
//! that succeeds.
//!
//! # Safety
//! Every function here is only for the core to call, through the
//! descriptor, with arguments that follow the plugin ABI.
//!
//! One file per family of entry points (`domain`: init, domain and
//! context; `av`, `mr`, `cq`, `cntr`, `ep`), each on the shared
//! `boundary` helpers; this file gathers them into the descriptor.
mod av;
mod boundary;
mod cntr;
mod cq;
mod domain;
mod ep;
mod mr;
#[cfg(test)]
mod tests;

use crate::Provider;
use av::*;
use cntr::*;
use cq::*;
use domain::*;
use ep::*;
use fi_xpu_abi::*;
use mr::*;

/// The descriptor of provider `P`: its identity and the functions above.
pub(crate) const fn descriptor<P: Provider>() -> fi_xpu_prov_desc {
    fi_xpu_prov_desc {
        abi_major: FI_XPU_PROV_ABI_MAJOR,
        abi_minor: FI_XPU_PROV_ABI_MINOR,
        size: std::mem::size_of::<fi_xpu_prov_desc>(),
        name: P::NAME.as_ptr(),
        version: P::VERSION,
        prov_id: P::PROV_ID,
        caps: P::CAPS,
        ifaces: P::IFACES,
        addrlen: P::ADDRLEN,
        init: Some(init::<P>),
        fini: Some(fini::<P>),
        domain_open: Some(domain_open::<P>),
        domain_close: Some(domain_close::<P>),
        ctx_open: Some(ctx_open::<P>),
        ctx_query: Some(ctx_query::<P>),
        ctx_close: Some(ctx_close::<P>),
        av_open: Some(av_open::<P>),
        av_insert: Some(av_insert::<P>),
        av_remove: Some(av_remove::<P>),
        av_lookup: Some(av_lookup::<P>),
        av_close: Some(av_close::<P>),
        mr_reg: Some(mr_reg::<P>),
        mr_key: Some(mr_key::<P>),
        mr_desc: Some(mr_desc::<P>),
        mr_close: Some(mr_close::<P>),
        cq_open: Some(cq_open::<P>),
        cq_export: Some(cq_export::<P>),
        cq_host_read: Some(cq_host_read::<P>),
        cq_host_readerr: Some(cq_host_readerr::<P>),
        cq_close: Some(cq_close::<P>),
        cntr_open: Some(cntr_open::<P>),
        cntr_export: Some(cntr_export::<P>),
        cntr_host_read: Some(cntr_host_read::<P>),
        cntr_host_update: Some(cntr_host_update::<P>),
        cntr_close: Some(cntr_close::<P>),
        ep_open: Some(ep_open::<P>),
        ep_bind: Some(ep_bind::<P>),
        ep_enable: Some(ep_enable::<P>),
        ep_getname: Some(ep_getname::<P>),
        ep_export: Some(ep_export::<P>),
        ep_close: Some(ep_close::<P>),
        limits: P::LIMITS,
    }
}
