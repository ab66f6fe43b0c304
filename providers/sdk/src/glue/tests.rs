//! The entry points driven as the core drives them, on a mock provider.
use super::boundary::*;
use super::*;
use crate::{services, Bind, Error, HostCqBuf, Result};
use fi_xpu_abi::class::*;
use fi_xpu_abi::errno::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A provider whose objects record what the glue did to them.
struct Mock;

#[derive(Default)]
struct Obj {
    /// A close returns this while it is non-zero.
    refuse: std::sync::atomic::AtomicI32,
    calls: AtomicUsize,
    dropped: Arc<AtomicBool>,
    panic: AtomicBool,
    bound: Mutex<Vec<&'static str>>,
}

impl Drop for Obj {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::Release);
    }
}

impl Obj {
    fn call(&self) {
        self.calls.fetch_add(1, Ordering::AcqRel);
        if self.panic.load(Ordering::Acquire) {
            panic!("provider bug");
        }
    }
    fn close(&mut self) -> Result<()> {
        match self.refuse.load(Ordering::Acquire) {
            0 => Ok(()),
            e => Err(Error::from_code(e)),
        }
    }
}

impl Provider for Mock {
    const NAME: &'static std::ffi::CStr = c"mock";
    const VERSION: u32 = 3;
    const PROV_ID: u32 = FI_XPU_PROV_USER_BASE + 9;
    const CAPS: u64 = FI_XPU_CAP_EP;
    const IFACES: u64 = 1 << FI_HMEM_SYSTEM;
    const ADDRLEN: usize = 4;
    type Domain = Obj;
    type Ctx = Obj;
    type Av = Obj;
    type Mr = Obj;
    type Cq = Obj;
    type Cntr = Obj;
    type Ep = Obj;

    fn domain_open(_: &fi_xpu_domain_attr) -> Result<Obj> {
        Ok(Obj::default())
    }
    fn domain_close(d: &mut Obj) -> Result<()> {
        d.close()
    }
    fn ctx_open(d: &Obj, _: &fi_xpu_prov_ctx_args) -> Result<Obj> {
        d.call();
        Ok(Obj::default())
    }
    fn ctx_query(c: &Obj) -> Result<fi_xpu_ctx_info> {
        c.call();
        Ok(fi_xpu_ctx_info {
            caps: Self::CAPS,
            av_addr_size: 8,
            mr_desc_size: 16,
            max_tx_wr_desc_size: 0,
            max_rx_wr_desc_size: 0,
        })
    }
    fn ctx_close(c: &mut Obj) -> Result<()> {
        c.close()
    }
    fn av_open(_: &Obj, _: &fi_xpu_av_attr) -> Result<Obj> {
        Ok(Obj::default())
    }
    fn av_insert(av: &Obj, addr: &[u8], _: u64) -> Result<fi_addr_t> {
        av.call();
        match addr {
            [1, 2, 3, 4] => Ok(7),
            _ => Err(Error::INVAL),
        }
    }
    fn av_remove(av: &Obj, a: fi_addr_t, _: u64) -> Result<()> {
        av.call();
        if a == 7 {
            Ok(())
        } else {
            Err(Error::INVAL)
        }
    }
    fn av_lookup(av: &Obj, a: fi_addr_t, _: &Obj, _: u64) -> Result<Vec<u8>> {
        av.call();
        Ok(a.to_ne_bytes().to_vec())
    }
    fn mr_reg(_: &Obj, _: Option<&Obj>, _: &fi_xpu_prov_mr_args) -> Result<Obj> {
        Ok(Obj::default())
    }
    fn mr_key(_: &Obj) -> Result<u64> {
        Ok(42)
    }
    fn mr_desc(mr: &Obj, _: &Obj, _: u64) -> Result<Vec<u8>> {
        mr.call();
        Ok(vec![9; 16])
    }
    fn cq_open(_: &Obj, ctx: Option<&Obj>, a: &fi_xpu_cq_attr) -> Result<Obj> {
        match (ctx, a.size) {
            (_, 7) => Err(Error::INVAL),
            (Some(c), _) => {
                c.call();
                Ok(Obj::default())
            }
            (None, _) => Ok(Obj::default()),
        }
    }
    fn cq_export(_: &Obj, _: u64) -> Result<u64> {
        Ok(0x1000)
    }
    fn cq_host_read(cq: &Obj, mut out: HostCqBuf<'_>) -> Result<usize> {
        cq.call();
        let n = out.count().min(2);
        // SAFETY: the test passes room for `count` u64 entries.
        unsafe { std::ptr::write_bytes(out.as_mut_ptr(), 0xab, n * 8) };
        if n == 0 {
            Err(Error::AGAIN)
        } else {
            Ok(n)
        }
    }
    fn cq_host_readerr(cq: &Obj, e: &mut fi_cq_err_entry, _: u64) -> Result<usize> {
        cq.call();
        e.err = FI_EIO;
        Ok(1)
    }
    fn cntr_open(_: &Obj, _: Option<&Obj>, _: &fi_xpu_cntr_attr) -> Result<Obj> {
        Ok(Obj::default())
    }
    fn cntr_export(_: &Obj, _: u64) -> Result<u64> {
        Err(Error::OPNOTSUPP)
    }
    fn cntr_host_read(c: &Obj) -> Result<(u64, u64)> {
        c.call();
        Ok((5, 6))
    }
    fn cntr_host_update(_: &Obj, how: u32, _: u64) -> Result<()> {
        if how == FI_XPU_CNTR_ADD {
            Ok(())
        } else {
            Err(Error::INVAL)
        }
    }
    fn ep_open(_: &Obj, _: &Obj, _: &fi_xpu_ep_attr) -> Result<Obj> {
        Ok(Obj::default())
    }
    fn ep_bind(ep: &Obj, obj: Bind<'_, Self>, _: u64) -> Result<()> {
        let what = match obj {
            Bind::Av(_) => "av",
            Bind::Cq(_) => "cq",
            Bind::Cntr(_) => "cntr",
        };
        ep.bound.lock().unwrap().push(what);
        Ok(())
    }
    fn ep_enable(ep: &Obj) -> Result<()> {
        ep.call();
        Ok(())
    }
    fn ep_getname(ep: &Obj) -> Result<Vec<u8>> {
        ep.call();
        Ok(vec![1, 2, 3, 4])
    }
    fn ep_export(_: &Obj, _: u64) -> Result<u64> {
        Ok(0x2000)
    }
    fn ep_close(ep: &mut Obj) -> Result<()> {
        ep.close()
    }
}

fn new() -> H {
    Box::into_raw(Box::new(Obj::default())) as H
}

fn calls(h: H) -> usize {
    // SAFETY: a live test object.
    unsafe { obj::<Obj>(h) }.calls.load(Ordering::Acquire)
}

#[test]
fn descriptor_carries_identity_and_every_entry_point() {
    let d = descriptor::<Mock>();
    assert_eq!((d.abi_major, d.abi_minor), (1, 5));
    assert_eq!(d.size, std::mem::size_of::<fi_xpu_prov_desc>());
    // SAFETY: the name is a static C string.
    assert_eq!(unsafe { std::ffi::CStr::from_ptr(d.name) }, c"mock");
    assert_eq!(
        (d.version, d.prov_id, d.addrlen),
        (3, FI_XPU_PROV_USER_BASE + 9, 4)
    );
    assert_eq!((d.caps, d.ifaces), (FI_XPU_CAP_EP, 1));
    assert!(d.init.is_some() && d.ep_close.is_some() && d.cq_host_readerr.is_some());
    // A provider that states no limits reports none.
    assert_eq!(d.limits, fi_xpu_limits::default());
}

#[test]
fn init_refuses_a_short_core_table() {
    // The SDK keeps the table for the life of the process, as the
    // core's own is.
    let core = Box::leak(Box::new(fi_xpu_core {
        abi_major: 1,
        abi_minor: 0,
        size: 8,
        log: None,
        log_enabled: None,
        mem_alloc: None,
        mem_import: None,
        mem_unimport: None,
        mem_free: None,
        mem_export: None,
        param_define: None,
        param_get: None,
        mem_known: None,
        ctx_abort_word: None,
        mem_retire: None,
        mem_access: None,
        ctx_device_uuid: None,
        mem_export_ipc: None,
        mem_import_ipc: None,
    }));
    let mut prov: H = 1 as H;
    // SAFETY: a valid table and out-pointer.
    assert_eq!(unsafe { init::<Mock>(core, &mut prov) }, -FI_ENOSYS);
    assert_eq!(prov, 1 as H);
    core.size = std::mem::size_of::<fi_xpu_core>();
    // SAFETY: as above.
    assert_eq!(unsafe { init::<Mock>(core, &mut prov) }, 0);
    assert!(prov.is_null());
    assert_eq!(
        services::mem_alloc(services::CoreCtx::NONE, 64, 64, 0).unwrap_err(),
        Error::NOSYS
    );
    // Without the core's registry: nothing defined, nothing read.
    assert_eq!(services::param_define("x", "1", "x"), Err(Error::NOSYS));
    assert_eq!(services::param("x"), None);
}

#[test]
fn size_queries_answer_too_small_before_asking_the_provider() {
    let (av, ctx) = (new(), new());
    let mut buf = [0xffu8; 16];
    let mut len = 4usize;
    // SAFETY: live handles; buf holds 16 >= len bytes.
    let r = unsafe { av_lookup::<Mock>(av, 7, ctx, buf.as_mut_ptr().cast(), &mut len, 0) };
    assert_eq!((r, len, calls(av)), (-FI_ETOOSMALL, 8, 0));
    assert_eq!(buf, [0xff; 16]);
    len = 16;
    // SAFETY: as above.
    let r = unsafe { av_lookup::<Mock>(av, 7, ctx, buf.as_mut_ptr().cast(), &mut len, 0) };
    assert_eq!((r, len, calls(av)), (0, 8, 1));
    assert_eq!(buf[..8], 7u64.to_ne_bytes());

    let mr = new();
    len = 15;
    // SAFETY: as above.
    let r = unsafe { mr_desc::<Mock>(mr, ctx, buf.as_mut_ptr().cast(), &mut len, 0) };
    assert_eq!((r, len, calls(mr)), (-FI_ETOOSMALL, 16, 0));

    // ep_getname has no announced size: the provider answers, the SDK
    // compares.
    let ep = new();
    let mut name = [0u8; 4];
    len = 3;
    // SAFETY: as above.
    let r = unsafe { ep_getname::<Mock>(ep, name.as_mut_ptr().cast(), &mut len) };
    assert_eq!((r, len, name), (-FI_ETOOSMALL, 4, [0; 4]));
    len = 0;
    // SAFETY: *len is 0, so buf is not touched (the core allows NULL).
    let r = unsafe { ep_getname::<Mock>(ep, std::ptr::null_mut(), &mut len) };
    assert_eq!((r, len), (-FI_ETOOSMALL, 4));
    len = 4;
    // SAFETY: as above.
    let r = unsafe { ep_getname::<Mock>(ep, name.as_mut_ptr().cast(), &mut len) };
    assert_eq!((r, len, name), (0, 4, [1, 2, 3, 4]));
}

#[test]
fn a_refused_close_keeps_the_object() {
    let ctx = new();
    // SAFETY: a live test object.
    let o = unsafe { obj::<Obj>(ctx) };
    let dropped = o.dropped.clone();
    o.refuse.store(-FI_EBUSY, Ordering::Release);
    // SAFETY: a live handle, used by nothing else.
    assert_eq!(unsafe { ctx_close::<Mock>(ctx) }, -FI_EBUSY);
    assert!(!dropped.load(Ordering::Acquire));
    let mut attr = std::mem::MaybeUninit::<fi_xpu_ctx_info>::zeroed();
    // SAFETY: still live; valid out-pointer.
    assert_eq!(unsafe { ctx_query::<Mock>(ctx, attr.as_mut_ptr()) }, 0);
    // SAFETY: ctx_query succeeded and wrote the struct.
    assert_eq!(unsafe { attr.assume_init() }.mr_desc_size, 16);
    o.refuse.store(0, Ordering::Release);
    // SAFETY: as above.
    assert_eq!(unsafe { ctx_close::<Mock>(ctx) }, 0);
    assert!(dropped.load(Ordering::Acquire));
}

#[test]
fn panics_become_fi_eother() {
    let (cq, ep) = (new(), new());
    for h in [cq, ep] {
        // SAFETY: live test objects.
        unsafe { obj::<Obj>(h) }
            .panic
            .store(true, Ordering::Release);
    }
    let mut buf = [0u64; 4];
    // SAFETY: live handle; room for 4 entries.
    let n = unsafe { cq_host_read::<Mock>(cq, buf.as_mut_ptr().cast(), 4, std::ptr::null_mut()) };
    assert_eq!(n, -FI_EOTHER as isize);
    // SAFETY: live handle.
    assert_eq!(unsafe { ep_enable::<Mock>(ep) }, -FI_EOTHER);
}

#[test]
fn counts_errors_and_out_parameters() {
    let (av, cq, cntr) = (new(), new(), new());
    let mut fa: fi_addr_t = 99;
    let bad = [0u8; 4];
    // SAFETY: live handle; ADDRLEN readable bytes; valid out-pointer.
    let r = unsafe { av_insert::<Mock>(av, bad.as_ptr().cast(), &mut fa, 0) };
    assert_eq!(r, -FI_EINVAL);
    assert_eq!(fa, 99);
    let good = [1u8, 2, 3, 4];
    // SAFETY: as above.
    let r = unsafe { av_insert::<Mock>(av, good.as_ptr().cast(), &mut fa, 0) };
    assert_eq!(r, 0);
    assert_eq!(fa, 7);
    // SAFETY: live handle.
    assert_eq!(unsafe { av_remove::<Mock>(av, 8, 0) }, -FI_EINVAL);

    let mut buf = [0u64; 4];
    // SAFETY: live handle; room for 4 entries.
    let n = unsafe { cq_host_read::<Mock>(cq, buf.as_mut_ptr().cast(), 4, std::ptr::null_mut()) };
    assert_eq!((n, buf[1], buf[2]), (2, u64::from_ne_bytes([0xab; 8]), 0));
    let mut e = std::mem::MaybeUninit::<fi_cq_err_entry>::zeroed();
    // SAFETY: live handle; valid entry.
    assert_eq!(unsafe { cq_host_readerr::<Mock>(cq, e.as_mut_ptr(), 0) }, 1);

    let (mut v, mut err) = (0u64, 0u64);
    // SAFETY: live handle; valid out-pointers.
    assert_eq!(unsafe { cntr_host_read::<Mock>(cntr, &mut v, &mut err) }, 0);
    assert_eq!((v, err), (5, 6));
    // SAFETY: live handle.
    let r = unsafe { cntr_host_update::<Mock>(cntr, FI_XPU_CNTR_SET, 1) };
    assert_eq!(r, -FI_EINVAL);
}

#[test]
fn exports_carry_class_and_prov_id() {
    let (cq, cntr, ep) = (new(), new(), new());
    let mut f = fid_xpu::default();
    // SAFETY: live handles; valid out-pointer.
    assert_eq!(unsafe { cq_export::<Mock>(cq, 0, &mut f) }, 0);
    assert_eq!(
        f,
        fid_xpu {
            fclass: FI_CLASS_CQ as u32,
            prov_id: FI_XPU_PROV_USER_BASE + 9,
            prov_ctx: 0x1000
        }
    );
    // SAFETY: as above.
    assert_eq!(unsafe { ep_export::<Mock>(ep, 0, &mut f) }, 0);
    assert_eq!(
        f,
        fid_xpu {
            fclass: FI_CLASS_EP as u32,
            prov_id: FI_XPU_PROV_USER_BASE + 9,
            prov_ctx: 0x2000
        }
    );
    // A failed export leaves the handle as it was.
    // SAFETY: as above.
    let r = unsafe { cntr_export::<Mock>(cntr, 0, &mut f) };
    assert_eq!(r, -FI_EOPNOTSUPP);
    assert_eq!(f.fclass, FI_CLASS_EP as u32);
}

#[test]
fn opens_hand_out_objects_and_pass_the_context() {
    let (dom, ctx) = (new(), new());
    let mut attr = fi_xpu_cq_attr {
        size: 7,
        flags: 0,
        format: 0,
        timeout: 0,
        xpu_ctx: std::ptr::null_mut(),
    };
    let mut out: H = 1 as H;
    // SAFETY: live handles, valid attributes and out-pointer.
    let r = unsafe { cq_open::<Mock>(dom, ctx, &attr, &mut out) };
    assert_eq!(r, -FI_EINVAL);
    assert_eq!(out, 1 as H);
    attr.size = 8;
    // SAFETY: as above; a NULL context is a host CQ.
    let r = unsafe { cq_open::<Mock>(dom, std::ptr::null_mut(), &attr, &mut out) };
    assert_eq!(r, 0);
    assert_eq!(calls(ctx), 0);
    // SAFETY: out is the CQ just opened, used by nothing else.
    assert_eq!(unsafe { cq_close::<Mock>(out) }, 0);
    // SAFETY: as above.
    assert_eq!(unsafe { cq_open::<Mock>(dom, ctx, &attr, &mut out) }, 0);
    assert_eq!(calls(ctx), 1);
    // SAFETY: as above.
    assert_eq!(unsafe { cq_close::<Mock>(out) }, 0);
}

#[test]
fn bind_dispatches_on_the_class() {
    let (ep, av, cq, cntr) = (new(), new(), new(), new());
    // SAFETY: live handles of the classes named.
    unsafe {
        assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_CQ, cq, 0), 0);
        assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_AV, av, 0), 0);
        assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_CNTR, cntr, 0), 0);
        assert_eq!(ep_bind::<Mock>(ep, FI_CLASS_MR, cntr, 0), -FI_EINVAL);
        let bound = obj::<Obj>(ep).bound.lock().unwrap().clone();
        assert_eq!(bound, ["cq", "av", "cntr"]);
    }
}
