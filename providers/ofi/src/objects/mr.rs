//! The MR: a libfabric registration, its key (a base address with a
//! generation where the provider addresses by offset) and the descriptor
//! device code passes in ring entries.
use crate::core;
use crate::fabric::Fid;
use crate::ffi;
use crate::layout::*;
use crate::state::dom::{DomInner, MrRec, KEY_BASE_MASK, KEY_GENERATION_SHIFT};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub struct Mr {
    pub dom: Arc<DomInner>,
    /// Deregistered on drop.
    _fid: Fid,
    pub key: u64,
    pub index: usize,
    pub base: u64,
    pub len: u64,
}

const MAX_KEY_GENERATION: u64 = 0xff;

impl Mr {
    pub fn reg(dom: &Arc<DomInner>, a: &fi_xpu_prov_mr_args) -> Result<Mr> {
        let (mut mr, mut key, mut desc) = (std::ptr::null_mut(), 0u64, std::ptr::null_mut());
        let mut access = a.access;
        // Local access rights libfabric wants for the buffer to be a source
        // or target of the endpoint's own operations.
        access |= FI_READ | FI_WRITE | FI_SEND | FI_RECV;
        // Peers address memory by virtual address. A provider that wants
        // offsets and takes the caller's key gets the base address as key,
        // so that the initiator can turn an address into an offset; other
        // providers that take keys need distinct ones.
        // With base addresses as keys, registering the same range twice (which
        // libfabric allows) would reuse a key: later ones carry a generation
        // in the bits above any user address (`KEY_BASE_MASK`).
        let mut generation = 0u64;
        let r = loop {
            let requested_key = if dom.offset_keys {
                a.buf as u64 | generation << KEY_GENERATION_SHIFT
            } else {
                match a.requested_key {
                    0 => dom.next_key.fetch_add(1, Ordering::Relaxed),
                    k => k,
                }
            };
            // SAFETY: the core checked buf/len; out-pointers are live locals.
            let r = unsafe {
                ffi::xo_mr_reg(
                    dom.domain.ptr(),
                    a.buf,
                    a.len,
                    access,
                    requested_key,
                    a.iface,
                    a.device,
                    &mut mr,
                    &mut key,
                    &mut desc,
                )
            };
            let retry = dom.offset_keys
                && r == -FI_ENOKEY
                && a.buf as u64 & !KEY_BASE_MASK == 0
                && generation < MAX_KEY_GENERATION;
            if !retry {
                break r;
            }
            generation += 1;
        };
        if r != 0 {
            core::warn(&format!("fi_mr_regattr failed: {}", ffi::strerror(r)));
            return Err(Error::from_code(r));
        }
        let rec = MrRec {
            base: a.buf as u64,
            len: a.len as u64,
            desc: desc as usize,
        };
        let index = dom.mrs.insert(rec);
        Ok(Mr {
            dom: dom.clone(),
            _fid: Fid(mr),
            key,
            index,
            base: rec.base,
            len: rec.len,
        })
    }

    pub fn desc(&self) -> MrDesc {
        MrDesc {
            id: MR_MAGIC << 32 | self.index as u64,
            key: self.key,
            base: self.base,
            len: self.len,
        }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        self.dom.mrs.remove(self.index);
    }
}
