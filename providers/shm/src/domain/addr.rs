//! Endpoint addresses, the listening socket's name, random bytes, the
//! boot id, constant-time comparison.
use crate::layout::*;
use fi_xpu_prov_sdk::{Error, Result};

pub const ADDR_LEN: usize = 64;
const ADDR_MAGIC: u32 = 0x4858_5346; // "FSXH"
const ADDR_VERSION: u16 = 2;

/// An endpoint address (`fi_xpu_getname`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Addr {
    pub boot_id: [u8; 16],
    pub pid: u32,
    pub ep_id: u32,
    pub nonce: u64,
    pub secret: [u8; 16],
    pub ep_region: u32,
    pub ep_off: u32,
}

impl Addr {
    pub fn encode(&self) -> [u8; ADDR_LEN] {
        let mut o = [0u8; ADDR_LEN];
        o[0..4].copy_from_slice(&ADDR_MAGIC.to_le_bytes());
        o[4..6].copy_from_slice(&ADDR_VERSION.to_le_bytes());
        o[8..24].copy_from_slice(&self.boot_id);
        o[24..28].copy_from_slice(&self.pid.to_le_bytes());
        o[28..32].copy_from_slice(&self.ep_id.to_le_bytes());
        o[32..40].copy_from_slice(&self.nonce.to_le_bytes());
        o[40..56].copy_from_slice(&self.secret);
        o[56..60].copy_from_slice(&self.ep_region.to_le_bytes());
        o[60..64].copy_from_slice(&self.ep_off.to_le_bytes());
        o
    }

    /// Parses an address the application got from somewhere else.
    pub fn decode(b: &[u8]) -> Result<Addr> {
        if b.len() < ADDR_LEN
            || u32::from_le_bytes(b[0..4].try_into().unwrap()) != ADDR_MAGIC
            || u16::from_le_bytes(b[4..6].try_into().unwrap()) != ADDR_VERSION
        {
            return Err(Error::INVAL);
        }
        let u32at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let mut a = Addr {
            pid: u32at(24),
            ep_id: u32at(28),
            nonce: u64::from_le_bytes(b[32..40].try_into().unwrap()),
            ep_region: u32at(56),
            ep_off: u32at(60),
            ..Default::default()
        };
        a.boot_id.copy_from_slice(&b[8..24]);
        a.secret.copy_from_slice(&b[40..56]);
        if a.ep_region as usize >= MAX_REGIONS || a.ep_region == 0 {
            return Err(Error::INVAL);
        }
        Ok(a)
    }

    pub fn socket_name(&self) -> String {
        socket_name(self.pid, self.nonce)
    }
}

pub(super) fn socket_name(pid: u32, nonce: u64) -> String {
    format!("fi_xpu_shm.{pid}.{nonce:016x}")
}

pub fn random_bytes(out: &mut [u8]) -> Result<()> {
    use fi_xpu_os::rustix::{io::Errno, rand};
    let mut got = 0;
    while got < out.len() {
        match rand::getrandom(&mut out[got..], rand::GetRandomFlags::empty()) {
            Ok(n) => got += n,
            Err(Errno::INTR) => {}
            Err(_) => return Err(Error::IO),
        }
    }
    Ok(())
}

/// This node's boot id; two processes share it only on the same kernel.
pub fn boot_id() -> [u8; 16] {
    let mut id = [0u8; 16];
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") {
        let hex: Vec<u8> = s.trim().bytes().filter(|c| c.is_ascii_hexdigit()).collect();
        for (i, pair) in hex.chunks(2).take(16).enumerate() {
            let s = std::str::from_utf8(pair).unwrap_or("0");
            id[i] = u8::from_str_radix(s, 16).unwrap_or(0);
        }
    }
    id
}

pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addr_round_trip_and_rejects() {
        let a = Addr {
            boot_id: [3; 16],
            pid: 77,
            ep_id: 5,
            nonce: 0x1234,
            secret: [9; 16],
            ep_region: 2,
            ep_off: 4096,
        };
        assert_eq!(Addr::decode(&a.encode()), Ok(a));
        let mut b = a.encode();
        b[0] ^= 0xff;
        assert_eq!(Addr::decode(&b), Err(Error::INVAL));
        let mut z = a;
        z.ep_region = 0;
        assert_eq!(Addr::decode(&z.encode()), Err(Error::INVAL));
        assert_eq!(Addr::decode(&a.encode()[..10]), Err(Error::INVAL));
    }

    #[test]
    fn boot_id_is_stable() {
        assert_eq!(boot_id(), boot_id());
    }
}
