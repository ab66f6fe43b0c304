//! Types of the world API (extensions): a fixed set of ranks that find each
//! other through a bootstrap, reach each other through whichever provider
//! fits each pair (shm on one node, ofi across nodes), and allocate
//! symmetric windows collectively. The device-side tables those calls
//! return are defined in `<fi_xpu/device_world.h>`.
use crate::libfabric::fid;
use crate::public::fi_xpu_ctx_open_attr;
use std::ffi::{c_char, c_int, c_void};

/// `fid.fclass` of a world and of a window (values no libfabric class has).
pub const FI_XPU_CLASS_WORLD: usize = 0x5843_5801;
pub const FI_XPU_CLASS_WINDOW: usize = 0x5843_5802;

/// A bootstrap the application supplies (`fi_xpu_world_attr.bootstrap_ops`),
/// and what a bootstrap module fills in. `size` versions it.
///
/// `allgather` copies every rank's `len` bytes at `mine` into `all`
/// (`len * nranks` bytes, in rank order) and returns 0 or a negative
/// `FI_E*` value; every rank passes the same `len`. The world calls it from
/// one thread at a time, in the same order on every rank. `finalize`, if
/// set, is called once when the world is closed (or fails to open).
#[repr(C)]
pub struct fi_xpu_bootstrap_ops {
    pub size: usize,
    pub rank: c_int,
    pub nranks: c_int,
    pub context: *mut c_void,
    pub allgather: Option<
        unsafe extern "C" fn(
            context: *mut c_void,
            mine: *const c_void,
            all: *mut c_void,
            len: usize,
        ) -> c_int,
    >,
    pub finalize: Option<unsafe extern "C" fn(context: *mut c_void)>,
}

/// Input to `fi_xpu_world_open`. Fields left 0 or NULL take their value
/// from the environment (see fi_xpu_world(3)).
#[repr(C)]
pub struct fi_xpu_world_attr {
    /// `sizeof(struct fi_xpu_world_attr)`.
    pub size: usize,
    /// This process's rank; -1: `FI_XPU_BOOTSTRAP_RANK`.
    pub rank: c_int,
    /// Number of ranks; 0: `FI_XPU_BOOTSTRAP_SIZE`.
    pub nranks: c_int,
    /// "tcp" or "mpi"; NULL: `FI_XPU_BOOTSTRAP`, else "tcp".
    pub bootstrap: *const c_char,
    /// tcp: rank 0's `host:port`; NULL: `FI_XPU_BOOTSTRAP_ADDR`.
    pub addr: *const c_char,
    /// tcp: a job key every rank must share; NULL: `FI_XPU_BOOTSTRAP_KEY`.
    pub key: *const c_char,
    /// How long a set-up step waits for the other ranks; 0:
    /// `FI_XPU_BOOTSTRAP_TIMEOUT_MS` (default 60000).
    pub timeout_ms: u64,
    /// The application's own bootstrap; when set, the four fields above
    /// and `rank`/`nranks` are ignored.
    pub bootstrap_ops: *const fi_xpu_bootstrap_ops,
    /// The device of the world's XPU contexts; NULL: the host XPU
    /// (`FI_HMEM_SYSTEM`, device 0).
    pub xpu: *const fi_xpu_ctx_open_attr,
    pub flags: u64,
}

/// Output of `fi_xpu_world_query`.
#[repr(C)]
pub struct fi_xpu_world_info {
    pub rank: c_int,
    pub nranks: c_int,
    /// This rank's node (0 .. nnodes-1, numbered by lowest rank).
    pub node: c_int,
    pub nnodes: c_int,
    /// The world's device table (`struct fi_xpu_world_dev *`) for kernels.
    pub dev: *mut c_void,
}

/// Host object: a world.
#[repr(C)]
pub struct fid_xpu_world {
    pub fid: fid,
}

/// Host object: one symmetric window of a world.
#[repr(C)]
pub struct fid_xpu_window {
    pub fid: fid,
}
