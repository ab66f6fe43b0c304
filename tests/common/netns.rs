//! Two network namespaces joined by a veth pair, standing in for two nodes
//! (tests/ofi_netns.rs, tests/world_netns.rs). Needs root and `ip`.
use std::process::{Command, Stdio};

const ADDR: [&str; 2] = ["10.77.0.1/24", "10.77.0.2/24"];

pub fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

/// Two namespaces and the veth pair between them, deleted on drop even when
/// the test fails (deleting a namespace deletes its end of the pair).
pub struct Netns {
    pub ns: [String; 2],
    pub dev: [String; 2],
    made: Vec<String>,
}

impl Netns {
    /// Namespaces and interfaces are named from `tag` (3 letters, one per
    /// test) and the process id.
    pub fn new(tag: &str) -> Result<Netns, String> {
        let id = std::process::id();
        let mut n = Netns {
            ns: [format!("{tag}-{id}-a"), format!("{tag}-{id}-b")],
            // Interface names are limited to 15 bytes.
            dev: [
                format!("{tag}{}a", id % 1_000_000),
                format!("{tag}{}b", id % 1_000_000),
            ],
            made: Vec::new(),
        };
        for i in 0..2 {
            ip(&["netns", "add", &n.ns[i]])?;
            n.made.push(n.ns[i].clone());
        }
        ip(&[
            "link", "add", &n.dev[0], "netns", &n.ns[0], "type", "veth", "peer", "name", &n.dev[1],
            "netns", &n.ns[1],
        ])?;
        for (i, addr) in ADDR.iter().enumerate() {
            // Without IPv6 the link is silent until the test talks (no
            // router or neighbour solicitations), so its byte counters
            // measure the test's traffic only.
            let _ = Command::new("ip")
                .args(["netns", "exec", &n.ns[i], "sh", "-c"])
                .arg(format!(
                    "echo 1 > /proc/sys/net/ipv6/conf/{}/disable_ipv6",
                    n.dev[i]
                ))
                .status();
            ip(&["-n", &n.ns[i], "addr", "add", addr, "dev", &n.dev[i]])?;
            ip(&["-n", &n.ns[i], "link", "set", &n.dev[i], "up"])?;
            ip(&["-n", &n.ns[i], "link", "set", "lo", "up"])?;
        }
        // libfabric's tcp provider skips an interface whose link is not up
        // yet, and would fall back to another one.
        let start = std::time::Instant::now();
        while !(0..2).all(|i| n.sys(i, "operstate") == "up") {
            if start.elapsed() > std::time::Duration::from_secs(10) {
                return Err("the veth link did not come up".into());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Ok(n)
    }

    /// A file of side `i`'s interface under /sys/class/net, read inside
    /// its namespace.
    pub fn sys(&self, i: usize, what: &str) -> String {
        let o = Command::new("ip")
            .args(["netns", "exec", &self.ns[i], "cat"])
            .arg(format!("/sys/class/net/{}/{what}", self.dev[i]))
            .output()
            .expect("read /sys/class/net");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// (rx, tx) bytes of side `i`'s end of the link.
    pub fn bytes(&self, i: usize) -> (u64, u64) {
        let read = |what: &str| -> u64 {
            let v = self.sys(i, &format!("statistics/{what}"));
            v.parse()
                .unwrap_or_else(|_| panic!("counter {what} of {}: '{v}'", self.dev[i]))
        };
        (read("rx_bytes"), read("tx_bytes"))
    }
}

impl Netns {
    /// Side `i`'s address, without the prefix length.
    pub fn ip(&self, i: usize) -> &'static str {
        ADDR[i].split('/').next().unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in self.made.drain(..) {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                eprintln!("cleanup: {e}");
            }
        }
    }
}
