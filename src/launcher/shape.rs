//! A launch's shape, checked, and the settings of its modes (the GPU-like
//! mode's from `FI_XPU_HOST_GPU*`, the weak-ordering mode's window).
use super::weak;
use crate::error::{Error, Result};
use crate::param;
use fi_xpu_abi::*;
use std::time::Duration;

/// The GPU-like mode's settings for one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuLike {
    /// Most groups resident at once.
    pub resident: u32,
    /// How long resident groups may make no progress while others wait.
    pub hang: Duration,
    /// Seeds the lanes' orders.
    pub seed: u64,
    /// How long a subgroup or work-group call waits for missing members
    /// before the partial group is reported (`None`: never).
    pub partial: Option<Duration>,
}

/// The GPU-like mode's parameters as the environment sets them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuEnv {
    /// `FI_XPU_HOST_GPU`: the mode for every launch, with that many groups
    /// resident.
    pub every_launch: Option<u32>,
    pub hang_ms: u64,
    pub seed: u64,
    pub subgroup: u32,
    /// `FI_XPU_HOST_GPU_GROUP_MS`; 0 turns the partial-group check off.
    pub group_ms: u64,
}

/// Resident groups of a launch that asks for the mode when
/// `FI_XPU_HOST_GPU` does not say.
pub const GPU_DEFAULT_RESIDENT: u32 = 2;

impl Default for GpuEnv {
    fn default() -> Self {
        GpuEnv {
            every_launch: None,
            hang_ms: 5000,
            seed: 1,
            subgroup: 64,
            group_ms: 5000,
        }
    }
}

impl GpuEnv {
    /// Reads the parameters; a value that is not a positive number is
    /// reported and the default used.
    pub fn read() -> GpuEnv {
        fn num(var: &str) -> Option<u64> {
            let v = param::core(var)?;
            match v.trim().parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    crate::warn!("{var}={v} is not a positive number: ignored");
                    None
                }
            }
        }
        let d = GpuEnv::default();
        let small = |n: u64| u32::try_from(n).ok();
        GpuEnv {
            every_launch: num(param::HOST_GPU).and_then(small),
            hang_ms: num(param::HOST_GPU_HANG_MS).unwrap_or(d.hang_ms),
            seed: num(param::HOST_GPU_SEED).unwrap_or(d.seed),
            subgroup: num(param::HOST_GPU_SUBGROUP)
                .and_then(small)
                .unwrap_or(d.subgroup),
            group_ms: param::core(param::HOST_GPU_GROUP_MS).map_or(d.group_ms, |v| {
                v.trim().parse::<u64>().unwrap_or_else(|_| {
                    crate::warn!("{}={v} is not a number: ignored", param::HOST_GPU_GROUP_MS);
                    d.group_ms
                })
            }),
        }
    }
}

/// The weak-ordering mode's window when `FI_XPU_HOST_WEAK_ORDER` turns it
/// on (any value but empty and `0`), else `None`.
fn weak_env() -> Option<Duration> {
    let on = param::core(param::HOST_WEAK_ORDER)?;
    if on.trim().is_empty() || on.trim() == "0" {
        return None;
    }
    Some(
        param::core(param::HOST_WEAK_WINDOW_MS).map_or(weak::DEFAULT_WINDOW, |v| {
            v.trim().parse::<u64>().map_or_else(
                |_| {
                    crate::warn!(
                        "{}={v} is not a number: ignored",
                        param::HOST_WEAK_WINDOW_MS
                    );
                    weak::DEFAULT_WINDOW
                },
                Duration::from_millis,
            )
        }),
    )
}

/// A validated launch shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub num_groups: u32,
    pub group_size: u32,
    pub subgroup_size: u32,
    /// The GPU-like mode, when on.
    pub gpu: Option<GpuLike>,
    /// The weak-ordering mode, when on: its window (`weak`).
    pub weak: Option<Duration>,
}

impl Shape {
    /// Checks an attribute: `-FI_EINVAL` for an empty launch,
    /// `-FI_EBADFLAGS` for unknown flags, `-FI_E2BIG` for more than
    /// `FI_XPU_HOST_MAX_ITEMS` threads. The GPU-like mode's parameters come
    /// from the environment.
    /// The weak-ordering mode too comes from the environment
    /// (`FI_XPU_HOST_WEAK_ORDER`, `FI_XPU_HOST_WEAK_WINDOW_MS`).
    pub fn new(attr: &fi_xpu_host_launch_attr) -> Result<Shape> {
        let mut shape = Shape::with_env(attr, &GpuEnv::read())?;
        shape.weak = weak_env();
        Ok(shape)
    }

    pub fn with_env(attr: &fi_xpu_host_launch_attr, env: &GpuEnv) -> Result<Shape> {
        if attr.flags & !FI_XPU_HOST_LAUNCH_GPU != 0 {
            return Err(Error::BADFLAGS);
        }
        if attr.num_groups == 0 || attr.group_size == 0 {
            return Err(Error::INVAL);
        }
        match attr.num_groups.checked_mul(attr.group_size) {
            Some(n) if n <= FI_XPU_HOST_MAX_ITEMS => {}
            _ => return Err(Error::E2BIG),
        }
        let gpu = match (attr.flags & FI_XPU_HOST_LAUNCH_GPU != 0, env.every_launch) {
            (_, Some(resident)) => Some(resident),
            (true, None) => Some(GPU_DEFAULT_RESIDENT),
            (false, None) => None,
        }
        .map(|resident| GpuLike {
            resident,
            hang: Duration::from_millis(env.hang_ms),
            seed: env.seed,
            partial: (env.group_ms > 0).then(|| Duration::from_millis(env.group_ms)),
        });
        let subgroup_size = match (attr.subgroup_size, gpu) {
            (0, None) => FI_XPU_HOST_DEFAULT_SUBGROUP,
            (0, Some(_)) => env.subgroup,
            (s, _) => s,
        };
        Ok(Shape {
            num_groups: attr.num_groups,
            group_size: attr.group_size,
            subgroup_size,
            gpu,
            weak: None,
        })
    }

    pub fn items(&self) -> u32 {
        self.num_groups * self.group_size
    }

    pub(super) fn subgroups_per_group(&self) -> u32 {
        self.group_size.div_ceil(self.subgroup_size)
    }

    /// Lanes of subgroup `sg` of a group (the last one may be partial).
    pub(super) fn subgroup_items(&self, sg: u32) -> u32 {
        (self.group_size - sg * self.subgroup_size).min(self.subgroup_size)
    }

    /// The position of the work item with global id `global`.
    pub fn item(&self, global: u32) -> fi_xpu_host_item {
        let local_id = global % self.group_size;
        let subgroup_id = local_id / self.subgroup_size;
        fi_xpu_host_item {
            local_id,
            group_size: self.group_size,
            group_id: global / self.group_size,
            num_groups: self.num_groups,
            lane_id: local_id % self.subgroup_size,
            subgroup_id,
            subgroup_size: self.subgroup_size,
            subgroup_items: self.subgroup_items(subgroup_id),
        }
    }
}
