//! Deterministic fuzzing of the parsers of bytes that come from another
//! process: endpoint addresses and control records. Random and
//! mutated-from-valid inputs; nothing may panic, and whatever is accepted
//! must round-trip.
use crate::domain::{Addr, ADDR_LEN};
use crate::layout::MAX_REGIONS;
use crate::wire::{self, Msg};

/// xorshift64*: small, fast, and the same sequence on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }

    /// Flips, overwrites, truncates or extends a valid input.
    fn mutate(&mut self, valid: &[u8]) -> Vec<u8> {
        let mut v = valid.to_vec();
        for _ in 0..1 + self.below(4) {
            match self.below(5) {
                0 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] ^= 1 << self.below(8);
                }
                1 if !v.is_empty() => {
                    let i = self.below(v.len());
                    v[i] = self.next() as u8;
                }
                2 => v.truncate(self.below(v.len() + 1)),
                3 => v.push(self.next() as u8),
                _ if !v.is_empty() => {
                    // Interesting values at a word boundary.
                    let i = self.below(v.len()) & !7;
                    let w = [0u64, 1, u64::MAX, 1 << 63, MAX_REGIONS as u64][self.below(5)];
                    for (k, b) in w.to_le_bytes().iter().enumerate() {
                        if i + k < v.len() {
                            v[i + k] = *b;
                        }
                    }
                }
                _ => {}
            }
        }
        v
    }
}

const ROUNDS: usize = 100_000;

fn check_addr(input: &[u8]) -> bool {
    let Ok(a) = Addr::decode(input) else {
        return false;
    };
    assert!(input.len() >= ADDR_LEN);
    assert!(a.ep_region != 0 && (a.ep_region as usize) < MAX_REGIONS);
    let e = a.encode();
    // Bytes 6 and 7 are reserved and ignored; everything else round-trips.
    for (i, (x, y)) in e.iter().zip(input).enumerate() {
        if i != 6 && i != 7 {
            assert_eq!(x, y, "byte {i} of an accepted address");
        }
    }
    assert_eq!(Addr::decode(&e), Ok(a));
    true
}

fn check_msg(input: &[u8]) -> bool {
    let Some(m) = Msg::decode(input) else {
        return false;
    };
    assert_eq!(&m.encode()[..], input);
    assert!((wire::HELLO..=wire::ACK).contains(&m.kind));
    true
}

#[test]
fn addresses() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let valid = Addr {
        boot_id: [7; 16],
        pid: 4242,
        ep_id: 3,
        nonce: 0xfeed,
        secret: [1; 16],
        ep_region: 1,
        ep_off: 65536,
    }
    .encode();
    let (mut random_ok, mut mutated_ok) = (0, 0);
    for _ in 0..ROUNDS {
        let len = r.below(2 * ADDR_LEN);
        random_ok += check_addr(&r.bytes(len)) as usize;
        let m = r.mutate(&valid);
        mutated_ok += check_addr(&m) as usize;
    }
    // Random bytes almost never carry the magic; mutations of a valid
    // address often stay valid. Both paths were exercised.
    assert!(random_ok < ROUNDS / 100);
    assert!(mutated_ok > ROUNDS / 10, "{mutated_ok}");
}

#[test]
fn control_records() {
    let mut r = Rng(0x1234_5678_9abc_def1);
    let mut valid = Vec::new();
    for kind in wire::HELLO..=wire::ACK {
        let mut m = Msg::new(kind, r.next(), r.next(), r.next());
        m.secret = [kind as u8; 16];
        valid.push(m.encode());
    }
    let (mut random_ok, mut mutated_ok) = (0, 0);
    for i in 0..ROUNDS {
        let len = r.below(96);
        random_ok += check_msg(&r.bytes(len)) as usize;
        let m = r.mutate(&valid[i % valid.len()]);
        mutated_ok += check_msg(&m) as usize;
    }
    assert!(random_ok < ROUNDS / 100);
    assert!(mutated_ok > ROUNDS / 10, "{mutated_ok}");
}
