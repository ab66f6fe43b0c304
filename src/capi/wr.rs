//! The host side of the work-request API (libfabric's RFC,
//! ofiwg/libfabric#12695): `fi_xpu_prepare_wr` and the endpoint's
//! `fi_control` commands turn libfabric's `struct fi_wr_attr` into a
//! prepared request (`fi_xpu/wr.h`) that kernels modify, queue and flush.
//! The request's layout is the same on every provider: addresses and
//! registrations are converted here, through the provider's own AV lookup
//! and descriptor calls, into the raw forms device operations take.
use crate::error::{Error, Result};
use crate::flags::{self, OpFlags};
use crate::object::{self, lookup, Kind};
use fi_xpu_abi::control::{FI_FLUSH_WORK, FI_PREPARE_WORK, FI_QUEUE_WORK};
use fi_xpu_abi::errno::*;
use fi_xpu_abi::op_type::*;
use fi_xpu_abi::*;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Flags each operation takes: those of its device call
/// (`fi_xpu/device_check.h`), `FI_MORE` included.
fn allowed_flags(op: u32) -> OpFlags {
    let base = OpFlags::COMPLETION | OpFlags::MORE;
    match op {
        FI_OP_WRITE | FI_OP_SEND | FI_OP_TSEND => {
            base | OpFlags::INJECT | OpFlags::DELIVERY_COMPLETE | OpFlags::REMOTE_CQ_DATA
        }
        FI_OP_READ => base | OpFlags::DELIVERY_COMPLETE,
        FI_OP_RECV | FI_OP_TRECV => base,
        _ => base | OpFlags::INJECT | OpFlags::DELIVERY_COMPLETE,
    }
}

/// The one local buffer of an operation: (address, length, registration).
///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_xpu_prepare_wr`'s contract).
unsafe fn one<T: Copy>(items: &[T], desc: *mut *mut c_void) -> Result<Option<(T, *mut c_void)>> {
    match items.len() {
        0 => Ok(None),
        // Device operations take one buffer.
        1 => {
            // `desc` is NULL or holds the given count of valid elements (function contract).
            let d = slice!(desc as *const *mut c_void, usize::from(!desc.is_null()))?;
            Ok(Some((
                items[0],
                d.first().copied().unwrap_or(std::ptr::null_mut()),
            )))
        }
        _ => Err(Error::INVAL),
    }
}

/// What the conversion needs: the endpoint's context and AV.
struct Conv {
    ctx: Arc<object::Object>,
    av: Option<Arc<object::Object>>,
}

impl Conv {
    /// The registration `mr`'s raw descriptor into `out`; false for NULL.
    fn desc(&self, mr: *mut c_void, out: &mut [u8; FI_XPU_WR_RAW_SIZE]) -> Result<bool> {
        if mr.is_null() {
            return Ok(false);
        }
        let m = lookup(mr as *const c_void, Kind::Mr)?;
        if !m.same_domain(&self.ctx) {
            return Err(Error::INVAL);
        }
        let mut len = out.len();
        let p = out.as_mut_ptr() as *mut c_void;
        // SAFETY: `out` holds `len` bytes.
        Error::check(unsafe {
            m.prov
                .mr_desc(m.handle(), self.ctx.handle(), p, &mut len, 0)
        })?;
        Ok(true)
    }

    /// The peer `addr`'s raw AV address into `out`; false for
    /// `FI_ADDR_UNSPEC` where `any` allows it (receives from anyone).
    fn peer(&self, addr: fi_addr_t, any: bool, out: &mut [u8; FI_XPU_WR_RAW_SIZE]) -> Result<bool> {
        if any && addr == FI_ADDR_UNSPEC {
            return Ok(false);
        }
        let av = self.av.as_ref().ok_or(Error::NOAV)?;
        let mut len = out.len();
        // An address not in the AV is invalid input on every provider
        // (their lookups say -FI_ENOENT or -FI_EINVAL).
        let p = out.as_mut_ptr() as *mut c_void;
        // SAFETY: `out` holds `len` bytes.
        let rc = unsafe {
            av.prov
                .av_lookup(av.handle(), addr, self.ctx.handle(), p, &mut len, 0)
        };
        Error::check(if rc == -FI_ENOENT { -FI_EINVAL } else { rc })?;
        Ok(true)
    }
}

fn zero_wr() -> fi_xpu_wr {
    fi_xpu_wr {
        magic: FI_XPU_WR_MAGIC | FI_XPU_API_VERSION as u64,
        prov_id: 0,
        op_type: 0,
        present: 0,
        datatype: 0,
        atomic_op: 0,
        reserved: 0,
        flags: 0,
        buf: 0,
        len: 0,
        addr: 0,
        key: 0,
        data: 0,
        tag: 0,
        ignore: 0,
        context: 0,
        compare: 0,
        result: 0,
        reserved2: 0,
        peer: [0; FI_XPU_WR_RAW_SIZE],
        desc: [0; FI_XPU_WR_RAW_SIZE],
        result_desc: [0; FI_XPU_WR_RAW_SIZE],
        compare_desc: [0; FI_XPU_WR_RAW_SIZE],
    }
}

/// The common part of messages and RMA: the local buffer, its
/// registration, and the peer.
///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_xpu_prepare_wr`'s contract).
unsafe fn local(
    c: &Conv,
    w: &mut fi_xpu_wr,
    iov: *const iovec,
    count: usize,
    desc: *mut *mut c_void,
) -> Result<()> {
    // `iov` is NULL or holds the given count of valid elements (function contract).
    let iovs = slice!(iov, count)?;
    let spans: Vec<_> = iovs
        .iter()
        .map(|v| (v.iov_base as u64, v.iov_len as u64))
        .collect();
    // SAFETY: the application's pointers are passed on as this function's contract gives them.
    unsafe { set_local(c, w, &spans, desc) }?;
    Ok(())
}

/// The one local buffer of `spans` (address, length), with its
/// registration from `desc`, into `w`'s buffer, length and descriptor;
/// whether there is one.
///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_xpu_prepare_wr`'s contract).
unsafe fn set_local(
    c: &Conv,
    w: &mut fi_xpu_wr,
    spans: &[(u64, u64)],
    desc: *mut *mut c_void,
) -> Result<bool> {
    // SAFETY: the application's pointers are passed on as this function's contract gives them.
    let Some(((buf, len), mr)) = unsafe { one(spans, desc) }? else {
        return Ok(false);
    };
    w.buf = buf;
    w.len = len;
    if c.desc(mr, &mut w.desc)? {
        w.present |= FI_XPU_WR_DESC;
    }
    Ok(true)
}

fn set_peer(c: &Conv, w: &mut fi_xpu_wr, addr: fi_addr_t, any: bool) -> Result<()> {
    if c.peer(addr, any, &mut w.peer)? {
        w.present |= FI_XPU_WR_PEER;
    }
    Ok(())
}

///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_xpu_prepare_wr`'s contract).
unsafe fn atomic(c: &Conv, w: &mut fi_xpu_wr, m: &fi_msg_atomic) -> Result<()> {
    // `m.msg_iov` is NULL or holds the given count of valid elements (function contract).
    let iocs = slice!(m.msg_iov, m.iov_count)?;
    let spans: Vec<_> = iocs
        .iter()
        .map(|v| (v.addr as u64, v.count as u64))
        .collect();
    // SAFETY: the application's pointers are passed on as this function's contract gives them.
    let one = unsafe { set_local(c, w, &spans, m.desc) }?;
    // `m.rma_iov` is NULL or holds the given count of valid elements (function contract).
    let r = slice!(m.rma_iov, m.rma_iov_count)?;
    if r.len() != 1 || (one && r[0].count as u64 != w.len) {
        return Err(Error::INVAL);
    }
    if !one {
        w.len = r[0].count as u64;
    }
    w.addr = r[0].addr;
    w.key = r[0].key;
    w.datatype = m.datatype as u32;
    w.atomic_op = m.op as u32;
    w.context = m.context as u64;
    w.data = m.data;
    set_peer(c, w, m.addr, false)
}

/// One extra buffer of a fetching atomic into `w`: the result buffer
/// (`bit` is `FI_XPU_WR_RESULT_DESC`) or the compare one
/// (`FI_XPU_WR_COMPARE_DESC`): its address, and its descriptor (`bit` set
/// in `present`).
///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_xpu_prepare_wr`'s contract).
unsafe fn extra(c: &Conv, w: &mut fi_xpu_wr, f: &fi_msg_fetch, bit: u32) -> Result<()> {
    // `f.msg_iov` is NULL or holds the given count of valid elements (function contract).
    let iocs = slice!(f.msg_iov, f.iov_count)?;
    let addrs: Vec<u64> = iocs.iter().map(|v| v.addr as u64).collect();
    // SAFETY: the application's pointers are passed on as this function's contract gives them.
    let (addr, mr) = unsafe { one(&addrs, f.desc) }?.ok_or(Error::INVAL)?;
    let (to, raw) = if bit == FI_XPU_WR_RESULT_DESC {
        (&mut w.result, &mut w.result_desc)
    } else {
        (&mut w.compare, &mut w.compare_desc)
    };
    *to = addr;
    if c.desc(mr, raw)? {
        w.present |= bit;
    }
    Ok(())
}

/// Converts `attr`'s operation for endpoint `ep` into `w`.
///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_xpu_prepare_wr`'s contract).
unsafe fn convert(ep: *mut c_void, attr: &fi_wr_attr, c: &Conv, w: &mut fi_xpu_wr) -> Result<()> {
    let op = attr.op_type as u32;
    // The operation's struct, of type `$t`, for this endpoint and with
    // flags the operation allows; its flags go to `w`.
    macro_rules! op_for_ep {
        ($t:ty) => {{
            // `attr.op` is NULL or points to the fi_op_* struct that
            // `op_type` names, unchanged during the call (function contract).
            let d: &$t = borrowed!(attr.op as *const $t)?;
            if d.ep != ep {
                return Err(Error::INVAL);
            }
            if !allowed_flags(op).contains(flags::accept::<OpFlags>(d.flags)?) {
                return Err(Error::BADFLAGS);
            }
            w.flags = d.flags;
            d
        }};
    }
    match op {
        FI_OP_SEND | FI_OP_RECV => {
            let d = op_for_ep!(fi_op_msg);
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { local(c, w, d.msg.msg_iov, d.msg.iov_count, d.msg.desc) }?;
            w.context = d.msg.context as u64;
            w.data = d.msg.data;
            set_peer(c, w, d.msg.addr, op == FI_OP_RECV)?;
        }
        FI_OP_TSEND | FI_OP_TRECV => {
            let d = op_for_ep!(fi_op_tagged);
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { local(c, w, d.msg.msg_iov, d.msg.iov_count, d.msg.desc) }?;
            w.context = d.msg.context as u64;
            w.data = d.msg.data;
            w.tag = d.msg.tag;
            w.ignore = d.msg.ignore;
            set_peer(c, w, d.msg.addr, op == FI_OP_TRECV)?;
        }
        FI_OP_WRITE | FI_OP_READ => {
            let d = op_for_ep!(fi_op_rma);
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { local(c, w, d.msg.msg_iov, d.msg.iov_count, d.msg.desc) }?;
            // `d.msg.rma_iov` is NULL or holds the given count of valid elements (function contract).
            let r = slice!(d.msg.rma_iov, d.msg.rma_iov_count)?;
            if r.len() != 1 || r[0].len as u64 != w.len {
                return Err(Error::INVAL);
            }
            w.addr = r[0].addr;
            w.key = r[0].key;
            w.context = d.msg.context as u64;
            w.data = d.msg.data;
            set_peer(c, w, d.msg.addr, false)?;
        }
        FI_OP_ATOMIC => {
            let d = op_for_ep!(fi_op_atomic);
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { atomic(c, w, &d.msg) }?;
        }
        FI_OP_FETCH_ATOMIC => {
            let d = op_for_ep!(fi_op_fetch_atomic);
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { atomic(c, w, &d.msg) }?;
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { extra(c, w, &d.fetch, FI_XPU_WR_RESULT_DESC) }?;
        }
        FI_OP_COMPARE_ATOMIC => {
            let d = op_for_ep!(fi_op_compare_atomic);
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { atomic(c, w, &d.msg) }?;
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { extra(c, w, &d.fetch, FI_XPU_WR_RESULT_DESC) }?;
            // SAFETY: the application's pointers are passed on as this function's contract gives them.
            unsafe { extra(c, w, &d.compare, FI_XPU_WR_COMPARE_DESC) }?;
        }
        // Counter operations are deferred work, not work requests.
        FI_OP_CNTR_SET | FI_OP_CNTR_ADD => return Err(Error::OPNOTSUPP),
        _ => return Err(Error::INVAL),
    }
    w.op_type = op;
    Ok(())
}

/// A request that asks for a completion (`FI_COMPLETION`) needs a CQ bound
/// for its direction (`FI_RECV` for receives, `FI_TRANSMIT` otherwise):
/// without one its completion would go nowhere, and whoever waits for it
/// would wait forever.
fn completion_has_cq(e: &object::Object, op: u32, flags: u64) -> Result<()> {
    use fi_xpu_abi::flags::{FI_COMPLETION, FI_RECV, FI_TRANSMIT};
    if flags & FI_COMPLETION == 0 {
        return Ok(());
    }
    let (need, dir) = match op {
        FI_OP_RECV | FI_OP_TRECV => (FI_RECV, "FI_RECV"),
        _ => (FI_TRANSMIT, "FI_TRANSMIT"),
    };
    if e.cq_bound.load(std::sync::atomic::Ordering::Acquire) & need != 0 {
        return Ok(());
    }
    crate::warn!(
        "fi_xpu_prepare_wr: {}: FI_COMPLETION asked, but no CQ is bound with {dir} (-FI_ENOCQ)",
        e.describe()
    );
    Err(Error::NOCQ)
}

/// Sets `work->wr_len`.
///
/// # Safety
/// `work` is non-NULL and valid for writing, and no reference to it is
/// live (`fi_xpu_prepare_wr`'s contract).
unsafe fn set_len(work: *mut fi_wr_attr) {
    // SAFETY: per the function contract.
    unsafe { (*work).wr_len = FI_XPU_WR_SIZE }
}

///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_xpu_prepare_wr`'s contract).
unsafe fn prepare(ep: *mut c_void, work: *mut fi_wr_attr) -> Result<c_int> {
    let e = lookup(ep, Kind::Ep)?;
    // SAFETY: the API requires `work` to be NULL or point to a valid
    // fi_wr_attr for the call; it is copied, and written only by set_len.
    let attr = *unsafe { work.as_ref() }.ok_or(Error::INVAL)?;
    let ctx = e.ctx().ok_or(Error::INVAL)?;
    let mut info = fi_xpu_ctx_info::default();
    Error::check(ctx.prov.ctx_query(ctx.handle(), &mut info))?;
    if info.caps & FI_XPU_CAP_WR == 0 {
        return Err(Error::OPNOTSUPP);
    }
    if attr.wr_len < FI_XPU_WR_SIZE {
        // SAFETY: `work` was checked non-NULL and no reference to it is live.
        unsafe { set_len(work) };
        return Err(Error::TOOSMALL);
    }
    if attr.wr_buf.is_null() {
        return Err(Error::INVAL);
    }
    let conv = Conv {
        av: object::holds(&e, Kind::Av).into_iter().next(),
        ctx,
    };
    let mut w = zero_wr();
    w.prov_id = e.prov.desc().prov_id;
    // SAFETY: the application's pointers are passed on as this function's contract gives them.
    unsafe { convert(ep, &attr, &conv, &mut w) }?;
    completion_has_cq(&e, w.op_type, w.flags)?;
    // SAFETY: wr_buf holds wr_len >= FI_XPU_WR_SIZE writable bytes (the
    // API's contract); the request is written whole, unaligned allowed.
    unsafe { (attr.wr_buf as *mut fi_xpu_wr).write_unaligned(w) };
    // SAFETY: `work` was checked non-NULL and no reference to it is live.
    unsafe { set_len(work) };
    Ok(0)
}

/// Prepares the work request `work` describes for the device: writes it
/// into `work->wr_buf` (at least `FI_XPU_WR_SIZE` bytes, memory the
/// endpoint's device can read) and sets `work->wr_len`. libfabric's
/// `fi_prepare_wr` for an fi_xpu endpoint.
///
/// # Safety
/// `work` is NULL or valid, with the descriptors it points to.
#[no_mangle]
pub unsafe extern "C" fn fi_xpu_prepare_wr(
    ep: *mut fid_xpu_host_ep,
    work: *mut fi_wr_attr,
) -> c_int {
    // SAFETY: `work` is NULL or valid (the contract of fi_xpu_prepare_wr / FI_PREPARE_WORK).
    boundary!(unsafe { prepare(ep as *mut c_void, work) })
}

/// `fi_control` on an object's fid: the work-request commands on an
/// endpoint (`FI_PREPARE_WORK`; queueing and flushing are device calls,
/// `-FI_EOPNOTSUPP` here), `-FI_ENOSYS` for every other command.
///
/// # Safety
/// The application's pointers it is given (directly or inside the structs)
/// are NULL or valid for their counts (`fi_control`'s contract: `arg` is the fi_wr_attr of `FI_PREPARE_WORK`).
pub unsafe fn control(fid: *mut fid, command: c_int, arg: *mut c_void) -> c_int {
    match command {
        FI_PREPARE_WORK => {
            // SAFETY: `arg` is NULL or a valid fi_wr_attr (the contract of
            // fi_control with FI_PREPARE_WORK).
            boundary!(unsafe { prepare(fid as *mut c_void, arg as *mut fi_wr_attr) })
        }
        FI_QUEUE_WORK | FI_FLUSH_WORK => boundary!({
            lookup(fid as *const c_void, Kind::Ep)?;
            Err(Error::OPNOTSUPP)
        }),
        _ => -FI_ENOSYS,
    }
}
