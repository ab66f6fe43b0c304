//! Worlds and their symmetric windows (extensions): `fi_xpu_world_open`,
//! the host-side collectives over its bootstrap, `fi_xpu_world_alloc` and
//! `fi_xpu_world_free`, `fi_xpu_world_close`.
use super::args::{attr_size, non_null};
use super::fid::FID_OPS;
use crate::bootstrap::{module, tcp, Bootstrap, Collectives};
use crate::env;
use crate::error::{Error, Result};
use crate::memory::UserOps;
use crate::ops::Face;
use crate::param;
use crate::warn;
use crate::world::{handles, window::Window, Device, World};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void, CStr};
use std::time::Duration;

unsafe extern "C" fn world_fid_close(f: *mut fid) -> c_int {
    fi_xpu_world_close(f as *mut fid_xpu_world)
}

unsafe extern "C" fn window_fid_close(f: *mut fid) -> c_int {
    fi_xpu_world_free(f as *mut fid_xpu_window)
}

unsafe extern "C" fn no_bind(_: *mut fid, _: *mut fid, _: u64) -> c_int {
    -FI_ENOSYS
}

static WORLD_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(world_fid_close),
    bind: Some(no_bind),
    ..FID_OPS
};

static WINDOW_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(window_fid_close),
    bind: Some(no_bind),
    ..FID_OPS
};

/// A string argument (as `borrowed_cstr!` read it), else the core
/// parameter `var`, else `default`.
fn text(arg: Option<&CStr>, var: &str, default: &str) -> String {
    match arg {
        Some(s) => s.to_string_lossy().into_owned(),
        None => param::core(var).unwrap_or_else(|| default.to_string()),
    }
}

/// A number argument when `set`, else the core parameter `var`.
fn number(set: Option<u64>, var: &str) -> Result<Option<u64>> {
    if set.is_some() {
        return Ok(set);
    }
    match env::var(var).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            warn!("{var}={v} is not a number");
            Error::INVAL
        }),
    }
}

/// The bootstrap `a` names.
///
/// # Safety
/// `a`'s strings are NULL or NUL-terminated, and `bootstrap_ops` NULL or
/// valid (`fi_xpu_world_open`'s contract).
unsafe fn bootstrap(a: &fi_xpu_world_attr) -> Result<Box<dyn Bootstrap>> {
    if !a.bootstrap_ops.is_null() {
        // SAFETY: the application's ops (API contract of the field).
        return Ok(Box::new(unsafe { module::Ops::from_raw(a.bootstrap_ops) }?));
    }
    // `a`'s strings are NULL or NUL-terminated (function contract).
    let kind = text(borrowed_cstr!(a.bootstrap), param::BOOTSTRAP, "tcp");
    let rank = number(
        (a.rank >= 0).then_some(a.rank as u64),
        param::BOOTSTRAP_RANK,
    )?;
    let size = number(
        (a.nranks > 0).then_some(a.nranks as u64),
        param::BOOTSTRAP_SIZE,
    )?;
    let timeout = number(
        (a.timeout_ms > 0).then_some(a.timeout_ms),
        param::BOOTSTRAP_TIMEOUT_MS,
    )?
    .unwrap_or(60_000);
    match kind.as_str() {
        "tcp" => {
            let (Some(rank), Some(size)) = (rank, size) else {
                warn!("fi_xpu_world_open: the tcp bootstrap needs the rank and the number of ranks (attr or FI_XPU_BOOTSTRAP_RANK/SIZE)");
                return Err(Error::INVAL);
            };
            if size == 0 || rank >= size || size > i32::MAX as u64 {
                warn!("fi_xpu_world_open: rank {rank} of {size} ranks");
                return Err(Error::INVAL);
            }
            let addr = text(borrowed_cstr!(a.addr), param::BOOTSTRAP_ADDR, "");
            if addr.is_empty() && size > 1 {
                warn!("fi_xpu_world_open: the tcp bootstrap needs rank 0's address (attr.addr or FI_XPU_BOOTSTRAP_ADDR)");
                return Err(Error::INVAL);
            }
            let cfg = tcp::Config {
                addr: if addr.is_empty() {
                    "127.0.0.1:0".into()
                } else {
                    addr
                },
                rank: rank as usize,
                size: size as usize,
                key: text(borrowed_cstr!(a.key), param::BOOTSTRAP_KEY, ""),
                timeout: Duration::from_millis(timeout),
            };
            Ok(Box::new(tcp::Tcp::join(&cfg)?))
        }
        "mpi" => module::mpi(),
        other => {
            warn!("fi_xpu_world_open: unknown bootstrap `{other}` (tcp or mpi)");
            Err(Error::INVAL)
        }
    }
}

/// Joins a world: finds the other ranks through the bootstrap, opens a
/// lane on each provider this rank needs (shm for ranks on its node, ofi
/// for the others) and connects every pair. Collective over all ranks.
///
/// # Safety
/// `attr` is NULL or valid (its strings NUL-terminated, `bootstrap_ops`
/// and `xpu` NULL or valid); `world` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_world_open(
    attr: *const fi_xpu_world_attr,
    world: *mut *mut fid_xpu_world,
    context: *mut c_void,
) -> c_int {
    boundary!({
        let out = out!(world)?;
        let defaults = fi_xpu_world_attr {
            size: std::mem::size_of::<fi_xpu_world_attr>(),
            rank: -1,
            nranks: 0,
            bootstrap: std::ptr::null(),
            addr: std::ptr::null(),
            key: std::ptr::null(),
            timeout_ms: 0,
            bootstrap_ops: std::ptr::null(),
            xpu: std::ptr::null(),
            flags: 0,
        };
        let a = borrowed_opt!(attr).unwrap_or(&defaults);
        attr_size::<fi_xpu_world_attr>("fi_xpu_world_open", "fi_xpu_world_attr", a.size)?;
        if a.flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let host = fi_xpu_ctx_open_attr {
            iface: FI_HMEM_SYSTEM,
            device: 0,
            ops: std::ptr::null_mut(),
        };
        // `a.xpu` is NULL or a valid struct, unchanged during the call (the API's contract).
        let xpu = borrowed_opt!(a.xpu).unwrap_or(&host);
        // SAFETY: `attr`'s strings and ops are as the API requires.
        let boot = unsafe { bootstrap(a) }?;
        let device = Device {
            iface: xpu.iface,
            device: xpu.device,
            user: if xpu.ops.is_null() {
                Ok(None)
            } else {
                // SAFETY: a set `ops` points to a struct of its `size` bytes
                // (the API's contract).
                unsafe { UserOps::from_raw(xpu.ops, xpu.device) }.map(Some)
            },
        };
        let face = Face {
            fid_ops: &FID_OPS,
            providers: super::info::providers,
        };
        let w = World::open(boot, &device, &face)?;
        let h = handles::add_world(w, &WORLD_OPS, context)? as *mut fid_xpu_world;
        out.put(h);
        Ok(0)
    })
}

/// Runs `f` on the open world behind `world`.
fn with_world<T>(world: *mut fid_xpu_world, f: impl FnOnce(&mut World) -> Result<T>) -> Result<T> {
    let e = handles::world(world as *const c_void)?;
    let mut g = e.world.lock().unwrap_or_else(|p| p.into_inner());
    f(g.as_mut().ok_or(Error::INVAL)?)
}

/// Rank, size, node and the world's device table.
///
/// # Safety
/// `info` is a valid out-pointer.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_world_query(
    world: *mut fid_xpu_world,
    info: *mut fi_xpu_world_info,
) -> c_int {
    boundary!({
        let out = out!(info)?;
        let i = with_world(world, |w| {
            Ok(fi_xpu_world_info {
                rank: w.rank as c_int,
                nranks: w.size as c_int,
                node: w.node[w.rank] as c_int,
                nnodes: w.nnodes as c_int,
                dev: w.dev as *mut c_void,
            })
        })?;
        out.put(i);
        Ok(0)
    })
}

/// A barrier of the host threads of all ranks, over the bootstrap.
#[no_mangle]
pub extern "C" fn fi_xpu_world_host_barrier(world: *mut fid_xpu_world) -> c_int {
    boundary!(with_world(world, |w| w.boot().barrier()).map(|_| 0))
}

/// Every rank's `len` bytes at `mine` into `all` (`len` times the number of
/// ranks, in rank order), over the bootstrap. Every rank passes the same
/// `len` (`-FI_EINVAL` on every rank otherwise).
///
/// # Safety
/// `mine` holds `len` bytes, `all` `len * nranks`.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_world_allgather(
    world: *mut fid_xpu_world,
    mine: *const c_void,
    all: *mut c_void,
    len: usize,
) -> c_int {
    boundary!({
        let mine = slice!(mine as *const u8, len)?;
        if len > 0 {
            non_null(all)?;
        }
        with_world(world, |w| {
            let v = w.boot().allgather(mine)?;
            // `all` holds len * nranks bytes (the caller's contract).
            slice_mut!(all as *mut u8, v.len())?.copy_from_slice(&v);
            Ok(0)
        })
    })
}

/// `len` bytes of rank `root`'s `buf` into every rank's `buf`.
///
/// # Safety
/// `buf` holds `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_world_bcast(
    world: *mut fid_xpu_world,
    buf: *mut c_void,
    len: usize,
    root: c_int,
) -> c_int {
    boundary!({
        let buf = slice_mut!(buf as *mut u8, len)?;
        with_world(world, |w| {
            if root < 0 || root as usize >= w.size {
                return Err(Error::INVAL);
            }
            let v = w.boot().bcast(buf, root as usize)?;
            if v.len() != len {
                return Err(Error::INVAL);
            }
            buf.copy_from_slice(&v);
            Ok(0)
        })
    })
}

/// Collective: allocates `size` bytes on every rank, registers them with
/// every lane and returns this rank's part (`*addr`), the window's device
/// table (`*dev`, a `struct fi_xpu_window_dev *` for kernels) and its
/// handle. Every rank passes the same `size` (`-FI_EINVAL` on every rank
/// otherwise).
///
/// # Safety
/// `addr`, `dev` and `win` are valid out-pointers.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_world_alloc(
    world: *mut fid_xpu_world,
    size: u64,
    flags: u64,
    addr: *mut *mut c_void,
    dev: *mut *mut c_void,
    win: *mut *mut fid_xpu_window,
) -> c_int {
    boundary!({
        let (addr, dev, win) = (out!(addr)?, out!(dev)?, out!(win)?);
        if flags != 0 {
            return Err(Error::BADFLAGS);
        }
        let w = with_world(world, |w| Window::alloc(w, size))?;
        let (a, d) = (w.addr, w.dev);
        let h = handles::add_window(world as *const c_void, w, &WINDOW_OPS)?;
        addr.put(a as *mut c_void);
        dev.put(d as *mut c_void);
        win.put(h as *mut fid_xpu_window);
        Ok(0)
    })
}

/// Collective: frees a window on every rank, after all of them stopped
/// using it. The local part is released even when a peer is gone (then
/// the bootstrap's error is returned).
#[no_mangle]
pub extern "C" fn fi_xpu_world_free(win: *mut fid_xpu_window) -> c_int {
    boundary!({
        let (e, w) = handles::remove_window(win as *const c_void)?;
        let mut g = e.world.lock().unwrap_or_else(|p| p.into_inner());
        let world = g.as_mut().ok_or(Error::INVAL)?;
        w.free(world).map(|_| 0)
    })
}

/// Collective: closes a world (`-FI_EBUSY` while it has windows). Local
/// resources are released even when a peer is gone (then the bootstrap's
/// error is returned).
#[no_mangle]
pub extern "C" fn fi_xpu_world_close(world: *mut fid_xpu_world) -> c_int {
    boundary!({
        let e = handles::remove_world(world as *const c_void)?;
        let w = e
            .world
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or(Error::INVAL)?;
        w.close().map(|_| 0)
    })
}
