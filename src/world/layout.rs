//! The device tables of a world and of its windows: what the host writes
//! and kernels read. The C definitions are in include/fi_xpu/device_world.h;
//! the test below compares them field by field with these.

/// Validity words of the tables (magic, kind, `FI_XPU_API_VERSION`).
pub const WORLD_VALID: u64 = 0x4658_5744_0000_0000 | fi_xpu_abi::FI_XPU_API_VERSION as u64;
pub const WINDOW_VALID: u64 = 0x4658_574e_0000_0000 | fi_xpu_abi::FI_XPU_API_VERSION as u64;
/// Lanes (providers) a rank uses at most: shm and ofi.
pub const LANES: usize = 2;
/// Barrier words of the control window: one per dissemination round.
pub const BARRIER_ROUNDS: usize = 64;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WorldLane {
    pub ep: fi_xpu_abi::fid_xpu,
    pub cntr: fi_xpu_abi::fid_xpu,
    pub cq: fi_xpu_abi::fid_xpu,
    pub issued: u64,
    pub errors_seen: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WorldDev {
    pub valid: u64,
    pub rank: u32,
    pub nranks: u32,
    pub nlanes: u32,
    pub flags: u32,
    pub ctl: u64,
    pub barrier_epoch: u64,
    pub abort: u64,
    pub reserved: [u64; 2],
    pub lane: [WorldLane; LANES],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Route {
    pub lane: u32,
    pub prov_id: u32,
    pub addr: u64,
    pub base: u64,
    pub key: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowPeer {
    pub rma: Route,
    pub amo: Route,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowLocal {
    pub addr: u64,
    pub desc: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct WindowDev {
    pub valid: u64,
    pub rank: u32,
    pub nranks: u32,
    pub size: u64,
    pub addr: u64,
    pub world: u64,
    pub peer: u64,
    pub reserved: [u64; 2],
    pub local: [WindowLocal; LANES],
}

/// A device table: `#[repr(C)]`, made only of `u32` and `u64` fields (and
/// arrays and tables of them) laid out without padding, as the C twin is
/// (the test below compares every field's offset).
///
/// # Safety
/// Implement only for such types: `bytes` reads every byte of the value.
pub unsafe trait Table: Copy {
    /// The value's bytes, as the C side lays them out.
    fn bytes(&self) -> &[u8] {
        // SAFETY: the trait's contract: no padding, so every byte of the
        // value is initialised; the slice borrows `self`.
        unsafe {
            std::slice::from_raw_parts(
                self as *const Self as *const u8,
                std::mem::size_of::<Self>(),
            )
        }
    }
}

// SAFETY: u64s and u32s in pairs, and WorldLanes (fid_xpu: two u32s and a
// u64, then u64s); no padding.
unsafe impl Table for WorldDev {}
// SAFETY: u64s, u32s in a pair, and WindowLocals (u64s); no padding.
unsafe impl Table for WindowDev {}
// SAFETY: Routes: two u32s, then u64s; no padding.
unsafe impl Table for WindowPeer {}

const _: () = {
    // No padding: each size is the sum of its fields'.
    assert!(std::mem::size_of::<fi_xpu_abi::fid_xpu>() == 16);
    assert!(std::mem::size_of::<WorldLane>() == 3 * 16 + 2 * 8);
    assert!(
        std::mem::size_of::<WorldDev>()
            == 8 + 4 * 4 + 3 * 8 + 2 * 8 + LANES * std::mem::size_of::<WorldLane>()
    );
    assert!(std::mem::size_of::<Route>() == 2 * 4 + 3 * 8);
    assert!(std::mem::size_of::<WindowPeer>() == 2 * std::mem::size_of::<Route>());
    assert!(std::mem::size_of::<WindowLocal>() == 5 * 8);
    assert!(
        std::mem::size_of::<WindowDev>()
            == 8 + 2 * 4 + 4 * 8 + 2 * 8 + LANES * std::mem::size_of::<WindowLocal>()
    );
};

/// `flags` of `WorldDev`: atomics on every window go through the ofi lane
/// (the world spans nodes).
pub const WORLD_ATOMICS_OFI: u32 = 1;

#[cfg(test)]
mod tests {
    use super::*;
    use fi_xpu_prov_sdk::layout_items;

    #[test]
    fn c_header_matches() {
        let items = layout_items! {
            WorldLane = "fi_xpu_world_lane" { ep, cntr, cq, issued, errors_seen }
            WorldDev = "fi_xpu_world_dev" { valid, rank, nranks, nlanes, flags, ctl, barrier_epoch, abort, reserved, lane }
            Route = "fi_xpu_world_route" { lane, prov_id, addr, base, key }
            WindowPeer = "fi_xpu_window_peer" { rma, amo }
            WindowLocal = "fi_xpu_window_local" { addr, desc }
            WindowDev = "fi_xpu_window_dev" { valid, rank, nranks, size, addr, world, peer, reserved, local }
        };
        fi_xpu_prov_sdk::layout_check::check(
            "fi_xpu/device_world.h",
            include_str!("layout.rs"),
            &items,
        );
    }
}
