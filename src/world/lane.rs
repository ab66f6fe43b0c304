//! A lane: the objects a world opens on one provider (domain, XPU context,
//! AV, endpoint, a counter of its completions and a CQ of its receives),
//! made through the library's own C API so that they are ordinary objects
//! with the same checks and lifetimes as the application's.
use crate::capi::info::{fi_xpu_freeinfo, fi_xpu_getinfo};
use crate::capi::objects as obj;
use crate::error::{Error, Result};
use crate::object::{lookup, Kind, Use};
use crate::ops::memory as mem;
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use std::ffi::{c_void, CStr};

/// Calls a function of the C API and turns its return value into a Result.
macro_rules! call {
    ($e:expr) => {
        // SAFETY: the C API checks every handle against its registry; the
        // lane passes handles it opened, and out-pointers and buffers that
        // are locals of the calling function, valid for the call.
        Error::check(unsafe { $e })
    };
}

/// The providers a world can use, as `fi_xpu_getinfo` lists them (after
/// the `FI_XPU_PROVIDER` filter): whether each of shm and ofi is usable.
pub struct Available {
    list: *mut fi_xpu_info,
}

impl Available {
    pub fn list() -> Result<Available> {
        let mut list = std::ptr::null_mut();
        call!(fi_xpu_getinfo(
            FI_XPU_API_VERSION,
            std::ptr::null(),
            0,
            &mut list
        ))?;
        Ok(Available { list })
    }

    /// The entry of provider `prov_id` serving `iface`, if any.
    pub fn find(&self, prov_id: u32, iface: fi_hmem_iface) -> Option<&fi_xpu_info> {
        let mut i = self.list;
        while !i.is_null() {
            // SAFETY: a list from fi_xpu_getinfo, alive until dropped.
            let e = unsafe { &*i };
            if e.prov_id == prov_id && e.ifaces & (1u64 << iface) != 0 {
                return Some(e);
            }
            i = e.next;
        }
        None
    }
}

impl Drop for Available {
    fn drop(&mut self) {
        // SAFETY: the list fi_xpu_getinfo returned, freed once.
        unsafe { fi_xpu_freeinfo(self.list) }
    }
}

/// One registration of a window in a lane.
pub struct Reg {
    mr: *mut fid_xpu_mr,
    pub key: u64,
    pub desc: [u64; 4],
}

// SAFETY: the handle is a registry key of the library's own object.
unsafe impl Send for Reg {}

pub struct Lane {
    pub prov_id: u32,
    pub name: String,
    dom: *mut fid_xpu_domain,
    pub ctx: *mut fid_xpu_host_ctx,
    av: *mut fid_xpu_av,
    cntr: *mut fid_xpu_host_cntr,
    cq: *mut fid_xpu_host_cq,
    ep: *mut fid_xpu_host_ep,
    pub dev_ep: fid_xpu,
    pub dev_cntr: fid_xpu,
    pub dev_cq: fid_xpu,
    pub caps: fi_xpu_ctx_info,
}

// SAFETY: the handles are registry keys of the library's own objects, which
// accept calls from any thread.
unsafe impl Send for Lane {}

/// Receive completions the lane's CQ holds.
const CQ_SIZE: usize = 1024;

fn fid_of<T>(p: *mut T) -> *mut fid {
    p as *mut fid
}

impl Lane {
    /// Opens every object of a lane on provider `info` for the device
    /// `xpu`, and enables the endpoint.
    pub fn open(i: &fi_xpu_info, xpu: &fi_xpu_ctx_open_attr) -> Result<Lane> {
        // SAFETY: providers' names are NUL-terminated strings of the list.
        let name = unsafe { CStr::from_ptr(i.prov_name) }
            .to_string_lossy()
            .into_owned();
        let mut l = Lane {
            prov_id: i.prov_id,
            name,
            dom: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
            av: std::ptr::null_mut(),
            cntr: std::ptr::null_mut(),
            cq: std::ptr::null_mut(),
            ep: std::ptr::null_mut(),
            dev_ep: fid_xpu::default(),
            dev_cntr: fid_xpu::default(),
            dev_cq: fid_xpu::default(),
            caps: fi_xpu_ctx_info::default(),
        };
        // On an error, Drop closes what was opened.
        call!(obj::fi_xpu_domain(
            i,
            std::ptr::null(),
            &mut l.dom,
            std::ptr::null_mut()
        ))?;
        call!(obj::fi_xpu_ctx_open(
            l.dom,
            xpu,
            &mut l.ctx,
            std::ptr::null_mut()
        ))?;
        call!(obj::fi_xpu_ctx_getinfo(l.ctx, &mut l.caps))?;
        if l.caps.av_addr_size > 8 || l.caps.mr_desc_size > 32 {
            crate::warn!(
                "world: provider {} has {}-byte addresses and {}-byte descriptors; the world tables hold 8 and 32",
                l.name,
                l.caps.av_addr_size,
                l.caps.mr_desc_size
            );
            return Err(Error::OPNOTSUPP);
        }
        let aattr = fi_xpu_av_attr { count: 0, flags: 0 };
        call!(obj::fi_xpu_av_open(
            l.dom,
            &aattr,
            &mut l.av,
            std::ptr::null_mut()
        ))?;
        let nattr = fi_xpu_cntr_attr {
            flags: 0,
            xpu_ctx: l.ctx,
        };
        call!(obj::fi_xpu_cntr_open(
            l.dom,
            &nattr,
            &mut l.cntr,
            std::ptr::null_mut()
        ))?;
        let qattr = fi_xpu_cq_attr {
            size: CQ_SIZE,
            flags: 0,
            format: FI_CQ_FORMAT_DATA,
            timeout: -1,
            xpu_ctx: l.ctx,
        };
        call!(obj::fi_xpu_cq_open(
            l.dom,
            &qattr,
            &mut l.cq,
            std::ptr::null_mut()
        ))?;
        let eattr = fi_xpu_ep_attr {
            caps: 0,
            tx_size: 0,
            rx_size: 0,
            flags: 0,
            xpu_ctx: l.ctx,
        };
        call!(obj::fi_xpu_endpoint(
            l.dom,
            &eattr,
            &mut l.ep,
            std::ptr::null_mut()
        ))?;
        call!(obj::fi_xpu_ep_bind(l.ep, fid_of(l.av), 0))?;
        call!(obj::fi_xpu_ep_bind(
            l.ep,
            fid_of(l.cntr),
            FI_WRITE | FI_READ | FI_SEND
        ))?;
        call!(obj::fi_xpu_ep_bind(l.ep, fid_of(l.cq), FI_RECV))?;
        Error::check(obj::fi_xpu_enable(l.ep))?;
        call!(obj::fi_xpu_export(fid_of(l.ep), 0, &mut l.dev_ep))?;
        call!(obj::fi_xpu_export(fid_of(l.cntr), 0, &mut l.dev_cntr))?;
        call!(obj::fi_xpu_export(fid_of(l.cq), 0, &mut l.dev_cq))?;
        Ok(l)
    }

    /// The endpoint's address for the other ranks.
    pub fn getname(&self) -> Result<Vec<u8>> {
        let mut len = 0usize;
        let mut probe = [0u8; 1];
        match call!(obj::fi_xpu_getname(
            self.ep,
            probe.as_mut_ptr() as *mut c_void,
            &mut len
        )) {
            Ok(()) => return Ok(probe[..len.min(1)].to_vec()),
            Err(Error::TOOSMALL) => {}
            Err(e) => return Err(e),
        }
        let mut name = vec![0u8; len];
        call!(obj::fi_xpu_getname(
            self.ep,
            name.as_mut_ptr() as *mut c_void,
            &mut len
        ))?;
        name.truncate(len);
        Ok(name)
    }

    /// Inserts a peer's name; returns its raw address for kernels.
    pub fn insert(&self, name: &[u8]) -> Result<u64> {
        let mut fa: fi_addr_t = 0;
        // SAFETY: as for `call!`; av_insert returns the number inserted.
        let n = unsafe {
            obj::fi_xpu_av_insert(
                self.av,
                name.as_ptr() as *const c_void,
                1,
                &mut fa,
                0,
                std::ptr::null_mut(),
            )
        };
        if n != 1 {
            return Err(if n < 0 {
                Error::from_code(n as i32)
            } else {
                Error::INVAL
            });
        }
        let mut raw = 0u64;
        let mut len = std::mem::size_of::<u64>();
        call!(obj::fi_xpu_av_lookup(
            self.av,
            fa,
            &mut raw as *mut u64 as *mut c_void,
            &mut len,
            0,
            self.ctx
        ))?;
        Ok(raw)
    }

    /// Registers `[addr, addr + len)` (memory this lane's context knows)
    /// for remote reads, writes and atomics.
    pub fn register(&self, addr: usize, len: usize) -> Result<Reg> {
        let mut r = Reg {
            mr: std::ptr::null_mut(),
            key: 0,
            desc: [0; 4],
        };
        call!(obj::fi_xpu_mr_reg(
            self.dom,
            self.ctx,
            addr as *const c_void,
            len,
            FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
            0,
            0,
            0,
            &mut r.mr,
            std::ptr::null_mut()
        ))?;
        let res = (|| {
            call!(obj::fi_xpu_mr_key(r.mr, &mut r.key))?;
            let mut len = std::mem::size_of_val(&r.desc);
            call!(obj::fi_xpu_mr_desc(
                r.mr,
                r.desc.as_mut_ptr() as *mut c_void,
                &mut len,
                0,
                self.ctx
            ))
        })();
        match res {
            Ok(()) => Ok(r),
            Err(e) => {
                Self::deregister(r);
                Err(e)
            }
        }
    }

    pub fn deregister(r: Reg) {
        let _ = Error::check(obj::fi_xpu_close(fid_of(r.mr)));
    }

    /// Memory of this lane's context: `size` bytes, exportable, or in host
    /// RAM the device can reach (`host`).
    pub fn alloc(&self, size: u64, host: bool) -> Result<usize> {
        let flags = if host {
            FI_XPU_ALLOC_HOST
        } else {
            FI_XPU_ALLOC_DMABUF
        };
        // The descriptor, if any, is closed here: the mapping does not need
        // it.
        let c = self.context()?;
        Ok(mem::alloc(&c, size, 4096, flags)?.addr)
    }

    pub fn free(&self, addr: usize) -> Result<()> {
        let c = self.context()?;
        mem::free(&c, addr)
    }

    /// The lane's context, held for one operation.
    fn context(&self) -> Result<Use> {
        lookup(self.ctx as *const c_void, Kind::Ctx)
    }

    /// Makes memory another lane allocated known to this lane's context;
    /// returns its address here.
    pub fn import(&self, addr: usize, size: u64) -> Result<usize> {
        let c = self.context()?;
        mem::import(&c, addr, -1, 0, size, FI_XPU_IMPORT_DEVICEMAP)
    }

    pub fn unimport(&self, addr: usize) -> Result<()> {
        let c = self.context()?;
        mem::unimport(&c, addr)
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        for f in [
            fid_of(self.ep),
            fid_of(self.cq),
            fid_of(self.cntr),
            fid_of(self.av),
            fid_of(self.ctx),
            fid_of(self.dom),
        ] {
            if !f.is_null() {
                if let Err(e) = Error::check(obj::fi_xpu_close(f)) {
                    crate::warn!("world: closing a lane object: {e}");
                }
            }
        }
    }
}
