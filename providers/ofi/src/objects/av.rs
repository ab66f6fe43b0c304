//! The AV: a libfabric AV, and endpoint names (a header and the
//! libfabric name) in and out of it.
use crate::core;
use crate::fabric::{check, Fid};
use crate::ffi;
use crate::state::av::AvInner;
use crate::state::dom::DomInner;
use fi_xpu_prov_sdk::{Error, Result};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Size of an endpoint name (`fi_xpu_getname`): a header and the libfabric
/// name.
pub const ADDR_LEN: usize = 64;
const ADDR_MAGIC: u32 = 0x4158_4f46; // "FOXA"
pub const ADDR_HDR: usize = 8;

pub struct Av {
    pub inner: Arc<AvInner>,
}

/// An endpoint name: magic, length of the libfabric name, then the name.
pub fn encode_name(raw: &[u8]) -> Result<[u8; ADDR_LEN]> {
    if raw.len() > ADDR_LEN - ADDR_HDR {
        return Err(Error::OVERFLOW);
    }
    let mut o = [0u8; ADDR_LEN];
    o[0..4].copy_from_slice(&ADDR_MAGIC.to_le_bytes());
    o[4..6].copy_from_slice(&1u16.to_le_bytes());
    o[6..8].copy_from_slice(&(raw.len() as u16).to_le_bytes());
    o[ADDR_HDR..ADDR_HDR + raw.len()].copy_from_slice(raw);
    Ok(o)
}

/// The libfabric name inside an endpoint name.
pub fn decode_name(b: &[u8]) -> Result<&[u8]> {
    if b.len() < ADDR_LEN || u32::from_le_bytes(b[0..4].try_into().unwrap()) != ADDR_MAGIC {
        return Err(Error::INVAL);
    }
    if u16::from_le_bytes(b[4..6].try_into().unwrap()) != 1 {
        return Err(Error::INVAL);
    }
    let n = u16::from_le_bytes(b[6..8].try_into().unwrap()) as usize;
    if n == 0 || n > ADDR_LEN - ADDR_HDR {
        return Err(Error::INVAL);
    }
    Ok(&b[ADDR_HDR..ADDR_HDR + n])
}

impl Av {
    pub fn open(dom: &Arc<DomInner>, count: usize) -> Result<Av> {
        let mut av = std::ptr::null_mut();
        // SAFETY: live domain; valid out-pointer.
        check(unsafe { ffi::xo_av_open(dom.domain.ptr(), count, &mut av) } as i64)?;
        Ok(Av {
            inner: Arc::new(AvInner {
                fid: Fid(av),
                live: Mutex::new(Default::default()),
                gen: AtomicU64::new(0),
            }),
        })
    }

    pub fn insert(&self, name: &[u8]) -> Result<u64> {
        let raw = decode_name(name)?;
        let mut out = 0u64;
        // SAFETY: `raw` is a libfabric name of this provider's format, as
        // long as the peer uses the same libfabric provider; libfabric
        // parses it.
        let r = unsafe {
            ffi::xo_av_insert(
                self.inner.fid.ptr(),
                raw.as_ptr() as *const c_void,
                &mut out,
            )
        };
        if r != 0 {
            core::warn(&format!("fi_av_insert failed: {}", ffi::strerror(r)));
            return Err(Error::from_code(r));
        }
        let mut live = self.inner.live.lock().unwrap();
        live.insert(out);
        self.inner.gen.fetch_add(1, Ordering::Release);
        Ok(out)
    }

    pub fn remove(&self, fi_addr: u64) -> Result<()> {
        {
            let mut live = self.inner.live.lock().unwrap();
            if !live.remove(&fi_addr) {
                return Err(Error::INVAL);
            }
            self.inner.gen.fetch_add(1, Ordering::Release);
        }
        // SAFETY: live AV; the address was inserted.
        check(unsafe { ffi::xo_av_remove(self.inner.fid.ptr(), fi_addr) } as i64)
    }

    pub fn lookup(&self, fi_addr: u64) -> Result<u64> {
        if self.inner.live.lock().unwrap().contains(&fi_addr) {
            Ok(fi_addr)
        } else {
            Err(Error::INVAL)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let raw = [1u8, 2, 3, 4, 5];
        let n = encode_name(&raw).unwrap();
        assert_eq!(decode_name(&n).unwrap(), &raw);
        let mut bad = n;
        bad[0] ^= 1;
        assert_eq!(decode_name(&bad), Err(Error::INVAL));
        let mut long = n;
        long[6..8].copy_from_slice(&200u16.to_le_bytes());
        assert_eq!(decode_name(&long), Err(Error::INVAL));
        assert_eq!(decode_name(&n[..20]), Err(Error::INVAL));
        assert_eq!(encode_name(&[7u8; 56]).map(|n| n[63]), Ok(7));
        assert_eq!(encode_name(&[0u8; 200]), Err(Error::OVERFLOW));
    }
}
