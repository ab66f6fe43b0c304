//! XPU counters: private words, a shared block for remote events.
use super::ctx::XpuCtx;
use super::home::{retire, Home, HostBuf};
use crate::core;
use crate::domain::{load, store};
use crate::layout::*;
use fi_xpu_abi::*;
use fi_xpu_prov_sdk::{Error, Result};
use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A counter's words are private to its process, like a CQ's ring: peers
/// cannot rewrite them. A counter that takes remote events (bound for
/// `FI_REMOTE_WRITE` or `FI_REMOTE_READ`) gets a second `Cntr` block in the
/// shared heap, the only part of it peers can write, which their remote
/// events increment; the counter is the sum of the two. Both sit behind a
/// local `CntrDev`, which is what the exported handle points to.
pub struct Counter {
    home: Home,
    pub addr: usize,
    dev_home: Home,
    pub dev: usize,
    /// The context of a device counter (`None`: a host counter).
    ctx: Option<Arc<XpuCtx>>,
    /// The block peers' remote events increment: (address, heap offset),
    /// created at the first bind for remote events, kept until close.
    remote: Mutex<Option<(usize, u64)>>,
}

impl Counter {
    pub fn open(ctx: Option<&Arc<XpuCtx>>) -> Result<Counter> {
        let sz = size_of::<Cntr>() as u64;
        let live = fi_xpu_handle_word(FI_XPU_HANDLE_CNTR, FI_XPU_HANDLE_LIVE);
        let k = match ctx {
            None => {
                let h = HostBuf::new(sz as usize)?;
                let d = HostBuf::new(size_of::<CntrDev>())?;
                let (a, dv) = (h.addr(), d.addr());
                Counter {
                    home: Home::Host(h),
                    addr: a,
                    dev_home: Home::Host(d),
                    dev: dv,
                    ctx: None,
                    remote: Mutex::new(None),
                }
            }
            Some(c) => {
                let a = c.local_alloc(sz)?;
                let dv = match c.local_alloc(size_of::<CntrDev>() as u64) {
                    Ok(x) => x,
                    Err(e) => {
                        c.local_free(a);
                        return Err(e);
                    }
                };
                // SAFETY: `dv` was just allocated at a CntrDev's size.
                unsafe {
                    store(
                        dv + offset_of!(CntrDev, abort),
                        core::ctx_abort_word(c.core),
                    )
                };
                Counter {
                    home: Home::Local {
                        ctx: c.clone(),
                        addr: a,
                    },
                    addr: a,
                    dev_home: Home::Local {
                        ctx: c.clone(),
                        addr: dv,
                    },
                    dev: dv,
                    ctx: Some(c.clone()),
                    remote: Mutex::new(None),
                }
            }
        };
        // SAFETY: the counter and its device block, both just allocated at
        // their sizes; their fields.
        unsafe {
            store(k.addr + offset_of!(Cntr, magic), live);
            store(k.dev + offset_of!(CntrDev, cntr), k.addr as u64);
            store(k.dev + offset_of!(CntrDev, magic), live);
        }
        Ok(k)
    }

    pub fn is_host(&self) -> bool {
        matches!(self.home, Home::Host(_))
    }

    fn remote_guard(&self) -> std::sync::MutexGuard<'_, Option<(usize, u64)>> {
        self.remote.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Heap offset of the block peers' remote events increment, created
    /// on first use (device counters only).
    pub fn remote_block(&self) -> Result<u64> {
        let mut g = self.remote_guard();
        if let Some((_, off)) = *g {
            return Ok(off);
        }
        let Some(c) = &self.ctx else {
            return Err(Error::INVAL);
        };
        let (r, off) = c.heap_alloc(size_of::<Cntr>() as u64)?;
        // SAFETY: `self.dev` is this counter's live CntrDev. Published
        // once the block is zeroed (heap_alloc): device readers add it in
        // from then on.
        unsafe { store(self.dev + offset_of!(CntrDev, rcntr), r as u64) };
        *g = Some((r, off));
        Ok(off)
    }

    /// Word `err` of the counter's own block.
    fn word(&self, err: bool) -> &AtomicU64 {
        // SAFETY: addr points to a live Cntr; both words are 8-byte aligned.
        unsafe { AtomicU64::from_ptr((self.addr + if err { 8 } else { 0 }) as *mut u64) }
    }

    /// Word `err` of the remote block, read once (0 without one).
    fn remote_word(&self, err: bool) -> u64 {
        let Some((r, _)) = *self.remote_guard() else {
            return 0;
        };
        let w = r + if err { 8 } else { 0 };
        match &self.ctx {
            // The remote block stays in the heap until the counter is
            // dropped; both words are 8-byte aligned.
            Some(c) => core::heap_load(c.core, w),
            // SAFETY: as above (a block of the unit tests).
            None => unsafe { load(w) },
        }
    }

    /// The counter's value and error count: its own words plus, for a
    /// counter that takes remote events, those peers increment (wrapping).
    pub fn read(&self) -> (u64, u64) {
        let v = self.word(false).load(Ordering::Acquire);
        let e = self.word(true).load(Ordering::Acquire);
        (
            v.wrapping_add(self.remote_word(false)),
            e.wrapping_add(self.remote_word(true)),
        )
    }

    /// An add goes to the counter's own word. A set stores the value less
    /// what peers counted there, so that a read right after returns it;
    /// remote events that land while it runs may be missed, as libfabric
    /// does not order a set against them either.
    pub fn update(&self, how: u32, v: u64) -> Result<()> {
        let err = how & FI_XPU_CNTR_ERR != 0;
        let w = self.word(err);
        match how & !FI_XPU_CNTR_ERR {
            FI_XPU_CNTR_ADD => {
                w.fetch_add(v, Ordering::AcqRel);
            }
            FI_XPU_CNTR_SET => w.store(v.wrapping_sub(self.remote_word(err)), Ordering::Release),
            _ => return Err(Error::INVAL),
        }
        Ok(())
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        retire(&self.home, self.addr + offset_of!(Cntr, magic));
        retire(&self.dev_home, self.dev + offset_of!(CntrDev, magic));
        let remote = *self.remote.get_mut().unwrap_or_else(|p| p.into_inner());
        if let (Some((_, off)), Some(c)) = (remote, &self.ctx) {
            // SAFETY: the retired CntrDev stays mapped; a stale handle
            // finds no remote block once it is freed.
            unsafe { store(self.dev + offset_of!(CntrDev, rcntr), 0) };
            c.heap_free(off, size_of::<Cntr>() as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter whose remote block is host memory the test increments the
    /// way peers do (device counters get theirs from the heap).
    fn counter_with_remote() -> (Counter, HostBuf) {
        let k = Counter::open(None).unwrap();
        let r = HostBuf::new(size_of::<Cntr>()).unwrap();
        *k.remote_guard() = Some((r.addr(), 64));
        (k, r)
    }

    /// A peer's remote event: an atomic add to the remote block's word.
    fn remote_add(r: &HostBuf, err: bool, v: u64) {
        // SAFETY: the block's words live as long as `r`.
        let w = unsafe { AtomicU64::from_ptr((r.addr() + if err { 8 } else { 0 }) as *mut u64) };
        w.fetch_add(v, Ordering::AcqRel);
    }

    fn own(k: &Counter) -> (u64, u64) {
        (
            k.word(false).load(Ordering::Acquire),
            k.word(true).load(Ordering::Acquire),
        )
    }

    #[test]
    fn a_counter_reads_its_own_and_its_remote_events() {
        let (k, r) = counter_with_remote();
        remote_add(&r, false, 5);
        k.update(FI_XPU_CNTR_ADD, 3).unwrap();
        assert_eq!(k.read(), (8, 0));
        remote_add(&r, true, 2);
        k.update(FI_XPU_CNTR_ADD | FI_XPU_CNTR_ERR, 1).unwrap();
        assert_eq!(k.read(), (8, 3));
        // Adds go to the counter's own words only.
        assert_eq!(own(&k), (3, 1));
    }

    #[test]
    fn a_set_reads_back_and_later_remote_events_add_to_it() {
        let (k, r) = counter_with_remote();
        remote_add(&r, false, 7);
        k.update(FI_XPU_CNTR_SET, 100).unwrap();
        assert_eq!(k.read().0, 100);
        assert_eq!(own(&k).0, 93);
        remote_add(&r, false, 2);
        assert_eq!(k.read().0, 102);
        remote_add(&r, true, 4);
        k.update(FI_XPU_CNTR_SET | FI_XPU_CNTR_ERR, 1).unwrap();
        assert_eq!(k.read(), (102, 1));
        k.update(FI_XPU_CNTR_ADD, 1).unwrap();
        assert_eq!(k.read(), (103, 1));
    }

    #[test]
    fn counter_arithmetic_wraps() {
        let (k, r) = counter_with_remote();
        // Set below what peers counted: the own word wraps below zero.
        remote_add(&r, false, 10);
        k.update(FI_XPU_CNTR_SET, 3).unwrap();
        assert_eq!(own(&k).0, 3u64.wrapping_sub(10));
        assert_eq!(k.read().0, 3);
        k.update(FI_XPU_CNTR_SET, 0).unwrap();
        assert_eq!(k.read().0, 0);
        remote_add(&r, false, 1);
        assert_eq!(k.read().0, 1);
        // A sum past 2^64 wraps, as the words themselves do.
        k.update(FI_XPU_CNTR_SET, u64::MAX).unwrap();
        assert_eq!(k.read().0, u64::MAX);
        remote_add(&r, false, 2);
        assert_eq!(k.read().0, 1);
        // Remote words near 2^64 (a peer may write anything there).
        remote_add(&r, true, u64::MAX - 1);
        k.update(FI_XPU_CNTR_ADD | FI_XPU_CNTR_ERR, 5).unwrap();
        assert_eq!(k.read().1, 3);
        k.update(FI_XPU_CNTR_SET | FI_XPU_CNTR_ERR, 7).unwrap();
        assert_eq!(k.read().1, 7);
        assert_eq!(own(&k).1, 9);
    }

    #[test]
    fn a_counter_without_a_remote_block_is_its_own_words() {
        let k = Counter::open(None).unwrap();
        k.update(FI_XPU_CNTR_ADD, 4).unwrap();
        k.update(FI_XPU_CNTR_SET | FI_XPU_CNTR_ERR, 2).unwrap();
        assert_eq!(k.read(), (4, 2));
        assert_eq!(own(&k), (4, 2));
        k.update(FI_XPU_CNTR_SET, 9).unwrap();
        assert_eq!(k.read(), (9, 2));
        assert_eq!(k.update(7, 1), Err(Error::INVAL));
        // A host counter never gets one: peers cannot reach host memory.
        assert_eq!(k.remote_block(), Err(Error::INVAL));
    }
}
