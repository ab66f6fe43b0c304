//! Which device a context's memory is on, and whether two contexts of a
//! peer pair are on the same one.
//!
//! Each endpoint publishes its context's `DeviceId` in its information
//! (`EpInfo.device`, read-only to peers); a context decides, per peer
//! address it hands out (`fi_xpu_av_lookup`), whether that peer's context
//! is on its own device. Only then may what the two share be used at
//! device scope (kernels on one GPU, memory of that GPU); across devices,
//! or with host memory, system scope holds. Deciding per pair keeps
//! peer-to-peer links between GPUs a matter of configuration later.
use crate::core::{self, Ctx};
use crate::layout::{SCOPE_DEV, SCOPE_SYS};
use fi_xpu_abi::fi_hmem_iface;

/// `[iface | KNOWN, UUID bytes 0..8, UUID bytes 8..16]`; all zero for host
/// memory (or a device whose UUID the backend cannot tell).
pub type DeviceId = [u64; 3];

const KNOWN: u64 = 1 << 63;

/// The device of a context of `iface`.
pub fn of_ctx(ctx: Ctx, iface: fi_hmem_iface) -> DeviceId {
    match core::ctx_device_uuid(ctx) {
        Some(u) => [
            iface as u64 | KNOWN,
            u64::from_le_bytes(u[..8].try_into().unwrap()),
            u64::from_le_bytes(u[8..].try_into().unwrap()),
        ],
        None => [0; 3],
    }
}

/// Whether the two contexts of a peer pair are on one device: both name
/// a device, of the same iface and UUID. Host memory is never "one
/// device" (system scope is what the host needs).
pub fn same_device_for_peer_pair(local: &DeviceId, peer: &DeviceId) -> bool {
    local[0] & KNOWN != 0 && local == peer
}

/// The scope of what device code writes into a peer (`PeerAddr::scope`):
/// device scope only when the pair is on one device (`same`), this
/// context's heap is that device's memory (`device_heap`, so the host
/// progresses nothing here) and `FI_XPU_SHM_SCOPE=sys` does not force
/// system scope (`forced_sys`).
pub fn scope_for_peer_pair(same: bool, device_heap: bool, forced_sys: bool) -> u64 {
    if same && device_heap && !forced_sys {
        SCOPE_DEV
    } else {
        SCOPE_SYS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_scope_needs_one_device_its_heap_and_no_forcing() {
        assert_eq!(scope_for_peer_pair(true, true, false), SCOPE_DEV);
        assert_eq!(scope_for_peer_pair(true, true, true), SCOPE_SYS);
        assert_eq!(scope_for_peer_pair(true, false, false), SCOPE_SYS);
        assert_eq!(scope_for_peer_pair(false, true, false), SCOPE_SYS);
    }

    #[test]
    fn same_device_needs_one_known_device() {
        let a = [2 | KNOWN, 7, 9];
        assert!(same_device_for_peer_pair(&a, &a));
        assert!(!same_device_for_peer_pair(&a, &[2 | KNOWN, 7, 8]));
        assert!(!same_device_for_peer_pair(&a, &[3 | KNOWN, 7, 9]));
        assert!(!same_device_for_peer_pair(&[0; 3], &[0; 3]));
        assert!(!same_device_for_peer_pair(&a, &[0; 3]));
    }
}
