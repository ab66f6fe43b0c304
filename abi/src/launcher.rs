//! Host XPU launcher types (see `fi_xpu_host_launch` in fi_xpu(7)).
//!
//! With `iface = FI_HMEM_SYSTEM` the "device" is a set of CPU threads. The
//! launcher runs a kernel function as `num_groups` work groups of
//! `group_size` work items, one thread per work item, and publishes each
//! thread's position in a `fi_xpu_host_item` that the host branch of
//! `fi_xpu/device_arch.h` reads.
use std::ffi::c_int;

/// Most work items (threads) one launch may start.
pub const FI_XPU_HOST_MAX_ITEMS: u32 = 4096;
/// Subgroup width used when `fi_xpu_host_launch_attr.subgroup_size` is 0.
pub const FI_XPU_HOST_DEFAULT_SUBGROUP: u32 = 32;
/// `fi_xpu_host_launch_attr.flags`: run the launch in the GPU-like mode
/// (fi_xpu_host_launch(3)).
pub const FI_XPU_HOST_LAUNCH_GPU: u32 = 1 << 0;

/// Shape of a host launch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct fi_xpu_host_launch_attr {
    /// Work groups (G), at least 1.
    pub num_groups: u32,
    /// Work items per group (N), at least 1; `num_groups * group_size` is
    /// at most `FI_XPU_HOST_MAX_ITEMS`.
    pub group_size: u32,
    /// Lanes per subgroup; 0 selects `FI_XPU_HOST_DEFAULT_SUBGROUP`. A group
    /// whose size is not a multiple of it ends with a partial subgroup.
    pub subgroup_size: u32,
    /// 0 or `FI_XPU_HOST_LAUNCH_GPU`.
    pub flags: u32,
}

/// Where the calling thread sits in the current launch. A thread outside
/// any launch is a single work item: every size is 1, every id 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fi_xpu_host_item {
    /// Work item within the work group.
    pub local_id: u32,
    /// Work items per work group.
    pub group_size: u32,
    /// Work group within the launch.
    pub group_id: u32,
    /// Work groups in the launch.
    pub num_groups: u32,
    /// Lane within the subgroup (`local_id % subgroup_size`).
    pub lane_id: u32,
    /// Subgroup within the work group (`local_id / subgroup_size`).
    pub subgroup_id: u32,
    /// Configured subgroup width (the last subgroup of a group may have
    /// fewer lanes).
    pub subgroup_size: u32,
    /// Lanes this work item's subgroup really has.
    pub subgroup_items: u32,
}

impl fi_xpu_host_item {
    /// The position of a thread outside any launch: a group of one.
    pub const fn single() -> fi_xpu_host_item {
        fi_xpu_host_item {
            local_id: 0,
            group_size: 1,
            group_id: 0,
            num_groups: 1,
            lane_id: 0,
            subgroup_id: 0,
            subgroup_size: 1,
            subgroup_items: 1,
        }
    }
}

impl Default for fi_xpu_host_item {
    fn default() -> Self {
        Self::single()
    }
}

/// `fi_xpu_host_weak_rmw` operations: the read-modify-writes of the device
/// arch layer, instrumented for the weak-ordering mode
/// (fi_xpu_host_launch(3)).
pub const FI_XPU_HOST_WEAK_XCHG: c_int = 0;
pub const FI_XPU_HOST_WEAK_ADD: c_int = 1;
pub const FI_XPU_HOST_WEAK_OR: c_int = 2;
pub const FI_XPU_HOST_WEAK_AND: c_int = 3;
/// Compare-and-swap: `v` is the expected value, `desired` the new one.
pub const FI_XPU_HOST_WEAK_CAS: c_int = 4;
