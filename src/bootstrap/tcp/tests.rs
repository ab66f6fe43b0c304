use super::rendezvous::MAX_PENDING;
use super::*;
use crate::bootstrap::Collectives;
use std::net::TcpListener;

fn cfg(addr: &str, rank: usize, size: usize, key: &str, ms: u64) -> Config {
    Config {
        addr: addr.into(),
        rank,
        size,
        key: key.into(),
        timeout: Duration::from_millis(ms),
    }
}

/// A port free at a loopback address of this call's own (127.x.y.z
/// from the process id and a counter), so that neither the other
/// tests of this process nor another run of them can bind it between
/// this call and rank 0's bind.
fn free_addr() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let id = std::process::id().wrapping_mul(2_654_435_761) ^ n.wrapping_mul(40_503);
    let ip = std::net::Ipv4Addr::new(
        127,
        1 + (id % 254) as u8,
        (id >> 8) as u8,
        1 + ((id >> 16) % 254) as u8,
    );
    let l = TcpListener::bind((ip, 0)).unwrap();
    l.local_addr().unwrap().to_string()
}

#[test]
fn four_ranks_gather_broadcast_and_barrier() {
    let addr = free_addr();
    let threads: Vec<_> = (0..4)
        .map(|r| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut b = Tcp::join(&cfg(&addr, r, 4, "k", 20_000)).unwrap();
                let all = b.allgather(&[r as u8; 3]).unwrap();
                assert_eq!(all, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
                let v = b.allgatherv(&vec![7u8; r]).unwrap();
                assert_eq!(v.iter().map(Vec::len).collect::<Vec<_>>(), [0, 1, 2, 3]);
                assert_eq!(b.bcast(b"from two", 2).unwrap(), b"from two");
                b.barrier().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn refusals_of_a_wrong_joiner() {
    let addr = free_addr();
    let a2 = addr.clone();
    let root = std::thread::spawn(move || Tcp::join(&cfg(&a2, 0, 2, "job", 3_000)).map(|_| ()));
    // Another size, another key, rank 0 again: each refused by rank 0,
    // which then times out waiting for the real rank 1.
    assert_eq!(
        Tcp::join(&cfg(&addr, 1, 3, "job", 3_000)).err(),
        Some(Error::INVAL)
    );
    assert_eq!(
        Tcp::join(&cfg(&addr, 1, 2, "other", 3_000)).err(),
        Some(Error::KEYREJECTED)
    );
    assert_eq!(root.join().unwrap(), Err(Error::TIMEDOUT));
    assert_eq!(
        Tcp::join(&cfg(&addr, 2, 2, "job", 100)).err(),
        Some(Error::INVAL)
    );
}

#[test]
fn nobody_listening_times_out() {
    let addr = free_addr();
    assert_eq!(
        Tcp::join(&cfg(&addr, 1, 2, "", 300)).err(),
        Some(Error::TIMEDOUT)
    );
}

#[test]
fn a_peer_that_leaves_fails_everyone_and_stays_failed() {
    let addr = free_addr();
    let threads: Vec<_> = (0..3)
        .map(|r| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut b = Tcp::join(&cfg(&addr, r, 3, "", 20_000)).unwrap();
                b.barrier().unwrap();
                if r == 2 {
                    return None; // dropped: its connection closes
                }
                let first = b.barrier().err();
                assert_eq!(b.barrier().err(), first, "failure is sticky");
                first
            })
        })
        .collect();
    let got: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(got, [Some(Error::CONNRESET), Some(Error::CONNRESET), None]);
}

#[test]
fn mismatched_lengths_fail_every_rank() {
    let addr = free_addr();
    let threads: Vec<_> = (0..2)
        .map(|r| {
            let addr = addr.clone();
            std::thread::spawn(move || {
                let mut b = Tcp::join(&cfg(&addr, r, 2, "", 20_000)).unwrap();
                b.allgather(&vec![0u8; 4 + r]).err()
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), Some(Error::INVAL));
    }
}

#[test]
fn a_silent_peer_times_out() {
    let addr = free_addr();
    let a2 = addr.clone();
    let quiet = std::thread::spawn(move || {
        let b = Tcp::join(&cfg(&a2, 1, 2, "", 20_000)).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        drop(b);
    });
    let mut b = Tcp::join(&cfg(&addr, 0, 2, "", 500)).unwrap();
    assert_eq!(b.barrier().err(), Some(Error::TIMEDOUT));
    quiet.join().unwrap();
}

/// Strangers that connect and say nothing (more of them than rank 0
/// holds at once) cost the world no time: the two ranks join well
/// inside a timeout shorter than one stranger's allowance to speak.
#[test]
fn silent_strangers_do_not_stall_the_rendezvous() {
    let addr = free_addr();
    let a0 = addr.clone();
    let timeout = HELLO_WAIT.as_millis() as u64 * 3 / 5;
    let rank0 = std::thread::spawn(move || Tcp::join(&cfg(&a0, 0, 2, "k", timeout)));
    let sock: SocketAddr = addr.parse().unwrap();
    let mut silent = Vec::new();
    while silent.len() < MAX_PENDING + 16 {
        match TcpStream::connect(sock) {
            Ok(s) => silent.push(s),
            Err(_) => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let mut one = Tcp::join(&cfg(&addr, 1, 2, "k", timeout)).unwrap();
    let mut zero = rank0.join().unwrap().unwrap();
    let t = std::thread::spawn(move || one.allgather(&[1]).unwrap());
    assert_eq!(zero.allgather(&[0]).unwrap(), vec![0, 1]);
    assert_eq!(t.join().unwrap(), vec![0, 1]);
    drop(silent);
}

/// A size past what the bootstrap serves is refused before anything is
/// allocated for it.
#[test]
fn too_many_ranks_are_refused_up_front() {
    for size in [MAX_RANKS + 1, i32::MAX as usize] {
        let r = Tcp::join(&cfg("127.0.0.1:0", 0, size, "", 100));
        assert_eq!(r.err(), Some(Error::INVAL), "{size} ranks");
    }
    let r = Tcp::join(&cfg(&free_addr(), 0, MAX_RANKS, "", 100));
    assert_eq!(r.err(), Some(Error::TIMEDOUT), "the largest size is served");
}
