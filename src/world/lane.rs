//! A lane: the objects a world opens on one provider (domain, XPU context,
//! AV, endpoint, a counter of its completions and a CQ of its receives),
//! made through the library's own operations (`crate::ops`) so that they
//! are ordinary objects with the same checks and lifetimes as the
//! application's.
use crate::error::{Error, Result};
use crate::memory::{Access, UserOps};
use crate::object::{lookup, Kind, Use};
use crate::ops::memory as mem;
use crate::ops::objects as obj;
use crate::ops::Face;
use crate::provider::{Provider, Providers};
use fi_xpu_abi::flags::*;
use fi_xpu_abi::*;
use std::ffi::c_void;
use std::sync::Arc;

/// The providers a world can use, as `fi_xpu_getinfo` lists them (after
/// the `FI_XPU_PROVIDER` filter).
pub struct Available(&'static Providers);

impl Available {
    /// `-FI_ENODATA` when no provider is loaded, as `fi_xpu_getinfo`.
    pub fn list(face: &Face) -> Result<Available> {
        let all = (face.providers)();
        if all.loaded.is_empty() {
            return Err(Error::NODATA);
        }
        Ok(Available(all))
    }

    /// The first provider `prov_id` serving `iface` in listing order, if
    /// any.
    pub fn find(&self, prov_id: u32, iface: fi_hmem_iface) -> Option<&Arc<Provider>> {
        let all = self.0;
        all.listing_order()
            .into_iter()
            .map(|i| &all.loaded[i])
            .find(|p| {
                let d = p.desc();
                d.prov_id == prov_id && d.ifaces & (1u64 << iface) != 0
            })
    }
}

/// The device a world's contexts are on: `fi_xpu_world_attr.xpu`, its
/// memory callbacks read (or refused) by the C API.
pub struct Device {
    pub iface: fi_hmem_iface,
    pub device: u64,
    pub user: Result<Option<UserOps>>,
}

/// One registration of a window in a lane.
pub struct Reg {
    mr: *mut fid,
    pub key: u64,
    pub desc: [u64; 4],
}

// SAFETY: the handle is a registry key of the library's own object.
unsafe impl Send for Reg {}

pub struct Lane {
    pub prov_id: u32,
    pub name: String,
    dom: *mut fid,
    pub ctx: *mut fid,
    av: *mut fid,
    cntr: *mut fid,
    cq: *mut fid,
    ep: *mut fid,
    pub dev_ep: fid_xpu,
    pub dev_cntr: fid_xpu,
    pub dev_cq: fid_xpu,
    pub caps: fi_xpu_ctx_info,
    /// The `fi_ops` of the shells of objects it opens.
    fid_ops: &'static fi_ops,
}

// SAFETY: the handles are registry keys of the library's own objects, which
// accept calls from any thread.
unsafe impl Send for Lane {}

/// Receive completions the lane's CQ holds.
const CQ_SIZE: usize = 1024;

/// The live object behind one of the lane's handles, held for one
/// operation.
fn get(h: *mut fid, kind: Kind) -> Result<Use> {
    lookup(h as *const c_void, kind)
}

impl Lane {
    /// Opens every object of a lane on provider `prov` for the device
    /// `xpu`, and enables the endpoint.
    pub fn open(prov: &Arc<Provider>, xpu: &Device, face: &Face) -> Result<Lane> {
        let ops = face.fid_ops;
        let none = std::ptr::null_mut();
        let mut l = Lane {
            prov_id: prov.desc().prov_id,
            name: prov.name.clone(),
            dom: none as *mut fid,
            ctx: none as *mut fid,
            av: none as *mut fid,
            cntr: none as *mut fid,
            cq: none as *mut fid,
            ep: none as *mut fid,
            dev_ep: fid_xpu::default(),
            dev_cntr: fid_xpu::default(),
            dev_cq: fid_xpu::default(),
            caps: fi_xpu_ctx_info::default(),
            fid_ops: ops,
        };
        // On an error, Drop closes what was opened.
        let dattr = fi_xpu_domain_attr::default();
        l.dom = obj::domain(prov.clone(), &dattr, none, ops)?;
        let dom = get(l.dom, Kind::Domain)?;
        let user = xpu.user.clone()?;
        l.ctx = obj::ctx_open(&dom, xpu.iface, xpu.device, user, none, ops)?;
        let c = get(l.ctx, Kind::Ctx)?;
        l.caps = obj::ctx_query(&c)?;
        drop(c);
        if l.caps.av_addr_size > 8 || l.caps.mr_desc_size > 32 {
            crate::warn!(
                "world: provider {} has {}-byte addresses and {}-byte descriptors; the world tables hold 8 and 32",
                l.name,
                l.caps.av_addr_size,
                l.caps.mr_desc_size
            );
            return Err(Error::OPNOTSUPP);
        }
        let ctx = l.ctx as *mut fid_xpu_host_ctx;
        let aattr = fi_xpu_av_attr { count: 0, flags: 0 };
        l.av = obj::av_open(&dom, &aattr, none, ops)?;
        let nattr = fi_xpu_cntr_attr {
            flags: 0,
            xpu_ctx: ctx,
        };
        l.cntr = obj::cntr_open(&dom, &nattr, none, ops)?;
        let qattr = fi_xpu_cq_attr {
            size: CQ_SIZE,
            flags: 0,
            format: FI_CQ_FORMAT_DATA,
            timeout: -1,
            xpu_ctx: ctx,
        };
        l.cq = obj::cq_open(&dom, &qattr, none, ops)?;
        let eattr = fi_xpu_ep_attr {
            caps: 0,
            tx_size: 0,
            rx_size: 0,
            flags: 0,
            xpu_ctx: ctx,
        };
        l.ep = obj::endpoint(&dom, &eattr, none, ops)?;
        drop(dom);
        let ep = get(l.ep, Kind::Ep)?;
        let (av, cntr, cq) = (
            get(l.av, Kind::Av)?,
            get(l.cntr, Kind::Cntr)?,
            get(l.cq, Kind::Cq)?,
        );
        obj::ep_bind(&ep, &av, 0)?;
        obj::ep_bind(&ep, &cntr, FI_WRITE | FI_READ | FI_SEND)?;
        obj::ep_bind(&ep, &cq, FI_RECV)?;
        obj::enable(&ep)?;
        l.dev_ep = obj::export(&ep, 0)?;
        l.dev_cntr = obj::export(&cntr, 0)?;
        l.dev_cq = obj::export(&cq, 0)?;
        drop((ep, av, cntr, cq));
        Ok(l)
    }

    /// The endpoint's address for the other ranks.
    pub fn getname(&self) -> Result<Vec<u8>> {
        let ep = get(self.ep, Kind::Ep)?;
        let mut probe = [0u8; 1];
        let len = match obj::getname(&ep, &mut probe[..0]) {
            Ok(len) => return Ok(probe[..len.min(1)].to_vec()),
            Err((Error::TOOSMALL, len)) => len,
            Err((e, _)) => return Err(e),
        };
        let mut name = vec![0u8; len];
        let len = obj::getname(&ep, &mut name).map_err(|(e, _)| e)?;
        name.truncate(len);
        Ok(name)
    }

    /// Inserts a peer's name; returns its raw address for kernels.
    pub fn insert(&self, name: &[u8]) -> Result<u64> {
        let av = get(self.av, Kind::Av)?;
        let mut fa: [fi_addr_t; 1] = [0];
        let n = obj::av_insert(&av, name, 1, Some(&mut fa))?;
        if n != 1 {
            return Err(Error::INVAL);
        }
        let mut raw = [0u8; 8];
        let c = get(self.ctx, Kind::Ctx)?;
        obj::av_lookup(&av, &c, fa[0], &mut raw)?;
        Ok(u64::from_ne_bytes(raw))
    }

    /// Registers `[addr, addr + len)` (memory this lane's context knows)
    /// for remote reads, writes and atomics.
    pub fn register(&self, addr: usize, len: usize) -> Result<Reg> {
        let dom = get(self.dom, Kind::Domain)?;
        let c = get(self.ctx, Kind::Ctx)?;
        let ctx = obj::attr_ctx(&dom, self.ctx as *mut fid_xpu_host_ctx)?;
        let args = obj::MrReg {
            buf: addr,
            len,
            access: FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
            offset: 0,
            requested_key: 0,
            flags: 0,
        };
        let mut r = Reg {
            mr: obj::mr_reg(&dom, ctx, &args, std::ptr::null_mut(), self.fid_ops)?,
            key: 0,
            desc: [0; 4],
        };
        drop(dom);
        let res = (|| {
            let m = get(r.mr, Kind::Mr)?;
            r.key = obj::mr_key(&m)?;
            let mut desc = [0u8; 32];
            obj::mr_desc(&m, &c, &mut desc)?;
            for (d, b) in r.desc.iter_mut().zip(desc.chunks_exact(8)) {
                *d = u64::from_ne_bytes(b.try_into().expect("8 bytes"));
            }
            Ok(())
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
        let _ = obj::close(r.mr);
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
        Ok(mem::alloc(&c, size, 4096, flags, crate::memory::Owner::App)?.addr)
    }

    /// Memory for one of the world's device tables (`len` bytes), which
    /// kernels read and count into with atomics and the host only writes,
    /// through `write_table`. Where the context's memory is a device's
    /// that the host reaches only through its driver (a GPU's), the table
    /// is that device memory, so kernels read it from their own memory
    /// rather than across the bus; otherwise host memory the device can
    /// reach, as `alloc(len, true)`.
    pub fn alloc_table(&self, len: u64) -> Result<usize> {
        let c = self.context()?;
        let flags = if Self::device_only(&c) {
            0
        } else {
            FI_XPU_ALLOC_HOST
        };
        Ok(mem::alloc(&c, len, 4096, flags, crate::memory::Owner::App)?.addr)
    }

    /// Writes `bytes` at `addr`, a table from `alloc_table`: through the
    /// device's driver when the host cannot dereference the memory, by
    /// plain stores otherwise. No kernel reads the range while it is
    /// written (tables are written before the call that returns them).
    pub fn write_table(&self, addr: usize, bytes: &[u8]) -> Result<()> {
        let c = self.context()?;
        let m = c.memory.as_ref().ok_or(Error::INVAL)?;
        match m.access(Access::Write {
            dev: addr,
            src: bytes,
        }) {
            Err(e) if e == Error::OPNOTSUPP => {
                // SAFETY: `access` checked that [addr, addr + len) lies in a
                // live allocation of this context, and the backend said the
                // host reaches it with plain stores; no kernel reads it yet.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len())
                };
                Ok(())
            }
            r => r,
        }
    }

    /// Whether the context's memory is reachable by the host only through
    /// the backend (`memory::Access`).
    fn device_only(c: &Use) -> bool {
        c.memory
            .as_ref()
            .is_some_and(|m| m.access(Access::Probe).is_ok())
    }

    pub fn free(&self, addr: usize) -> Result<()> {
        let c = self.context()?;
        mem::free(&c, addr, crate::memory::Owner::App)
    }

    /// The lane's context, held for one operation.
    fn context(&self) -> Result<Use> {
        get(self.ctx, Kind::Ctx)
    }

    /// Makes memory another lane allocated known to this lane's context;
    /// returns its address here.
    pub fn import(&self, addr: usize, size: u64) -> Result<usize> {
        let c = self.context()?;
        mem::import(
            &c,
            addr,
            -1,
            0,
            size,
            FI_XPU_IMPORT_DEVICEMAP,
            crate::memory::Owner::App,
        )
    }

    pub fn unimport(&self, addr: usize) -> Result<()> {
        let c = self.context()?;
        mem::unimport(&c, addr, crate::memory::Owner::App)
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        for f in [self.ep, self.cq, self.cntr, self.av, self.ctx, self.dom] {
            if !f.is_null() {
                if let Err(e) = obj::close(f) {
                    crate::warn!("world: closing a lane object: {e}");
                }
            }
        }
    }
}
