//! The flag words each call accepts, as `bitflags` sets of the C ABI's
//! constants (the ABI itself keeps plain `uint64_t` and the same values).
//! A word with a bit outside its set is refused with `-FI_EBADFLAGS`.
use crate::error::{Error, Result};
use bitflags::{bitflags, Flags};
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;

bitflags! {
    /// `fi_xpu_alloc`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct AllocFlags: u64 {
        const DMABUF = FI_XPU_ALLOC_DMABUF;
        const HOST = FI_XPU_ALLOC_HOST;
    }

    /// `fi_xpu_import`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ImportFlags: u64 {
        const IOMEMORY = FI_XPU_IMPORT_IOMEMORY;
        const DEVICEMAP = FI_XPU_IMPORT_DEVICEMAP;
        const DMABUF = FI_XPU_IMPORT_DMABUF;
    }

    /// `fi_xpu_domain`'s attribute flags.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct DomainFlags: u64 {
        const HOST_PROGRESS = FI_XPU_DOMAIN_HOST_PROGRESS;
    }

    /// `fi_xpu_ctx_abort`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct AbortFlags: u64 {
        const CLEAR = FI_XPU_ABORT_CLEAR;
    }

    /// `fi_xpu_av_lookup` and `fi_xpu_mr_desc`: `FI_XPU` is what
    /// libfabric's callers pass to ask for the XPU form.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct XpuFormFlags: u64 {
        const XPU = FI_XPU;
    }

    /// `fi_xpu_mr_reg`'s access.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct MrAccess: u64 {
        const READ = FI_READ;
        const WRITE = FI_WRITE;
        const REMOTE_READ = FI_REMOTE_READ;
        const REMOTE_WRITE = FI_REMOTE_WRITE;
        const SEND = FI_SEND;
        const RECV = FI_RECV;
    }

    /// `fi_xpu_endpoint`'s capabilities.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct EpCaps: u64 {
        const MSG = FI_MSG;
        const TAGGED = FI_TAGGED;
        const RMA = FI_RMA;
        const ATOMIC = FI_ATOMIC;
    }

    /// `fi_xpu_ep_bind` of a CQ.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CqBind: u64 {
        const TRANSMIT = FI_TRANSMIT;
        const RECV = FI_RECV;
    }

    /// `fi_xpu_ep_bind` of a counter.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct CntrBind: u64 {
        const SEND = FI_SEND;
        const RECV = FI_RECV;
        const READ = FI_READ;
        const WRITE = FI_WRITE;
        const REMOTE_READ = FI_REMOTE_READ;
        const REMOTE_WRITE = FI_REMOTE_WRITE;
    }

    /// Operation flags of a work request (`fi_xpu/device_check.h`); each
    /// operation takes a subset (`capi::wr`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct OpFlags: u64 {
        const COMPLETION = FI_COMPLETION;
        const MORE = FI_MORE;
        const INJECT = FI_INJECT;
        const DELIVERY_COMPLETE = FI_DELIVERY_COMPLETE;
        const REMOTE_CQ_DATA = FI_REMOTE_CQ_DATA;
    }
}

/// `bits` as the set `F`; `-FI_EBADFLAGS` when a bit lies outside it.
pub fn accept<F: Flags<Bits = u64>>(bits: u64) -> Result<F> {
    F::from_bits(bits).ok_or(Error::BADFLAGS)
}

/// `accept`, also refusing an empty word (binds name at least one
/// direction).
pub fn accept_some<F: Flags<Bits = u64>>(bits: u64) -> Result<F> {
    accept::<F>(bits).and_then(|f| {
        if f.is_empty() {
            Err(Error::BADFLAGS)
        } else {
            Ok(f)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_bits_are_refused() {
        assert_eq!(accept::<AllocFlags>(0), Ok(AllocFlags::empty()));
        assert_eq!(
            accept::<AllocFlags>(FI_XPU_ALLOC_DMABUF | FI_XPU_ALLOC_HOST),
            Ok(AllocFlags::all())
        );
        assert_eq!(accept::<AllocFlags>(1 << 40), Err(Error::BADFLAGS));
        assert_eq!(accept::<CqBind>(FI_TRANSMIT), Ok(CqBind::TRANSMIT));
        assert_eq!(accept::<CqBind>(FI_WRITE), Err(Error::BADFLAGS));
        assert_eq!(accept_some::<CntrBind>(0), Err(Error::BADFLAGS));
        assert_eq!(accept_some::<CntrBind>(FI_WRITE), Ok(CntrBind::WRITE));
        assert_eq!(accept::<EpCaps>(FI_MSG | FI_HMEM), Err(Error::BADFLAGS));
    }
}
