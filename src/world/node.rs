//! Which ranks share a node. Two processes are on the same node when they
//! run on the same kernel (boot id) in the same network namespace: the shm
//! provider's sockets live in the abstract namespace of a network
//! namespace, so processes in two namespaces cannot reach each other
//! through it and are treated as two nodes (this is also how the tests
//! make two nodes on one machine). `FI_XPU_WORLD_NODE`, when set, replaces
//! the whole identity with its value.
use crate::param;
use std::os::unix::fs::MetadataExt;

pub fn identity() -> Vec<u8> {
    if let Some(v) = param::core(param::WORLD_NODE) {
        return format!("name:{v}").into_bytes();
    }
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let netns = std::fs::metadata("/proc/self/ns/net")
        .map(|m| format!("{}:{}", m.dev(), m.ino()))
        .unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("boot:{}/net:{netns}/host:{}", boot.trim(), host.trim()).into_bytes()
}

/// Each rank's node index (numbered in order of each node's lowest rank)
/// and the number of nodes, from every rank's identity.
pub fn number(ids: &[Vec<u8>]) -> (Vec<usize>, usize) {
    let mut seen: Vec<&[u8]> = Vec::new();
    let idx = ids
        .iter()
        .map(|id| match seen.iter().position(|s| *s == id.as_slice()) {
            Some(i) => i,
            None => {
                seen.push(id);
                seen.len() - 1
            }
        })
        .collect();
    (idx, seen.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbering() {
        let ids = [b"b".to_vec(), b"a".to_vec(), b"b".to_vec(), b"c".to_vec()];
        assert_eq!(super::number(&ids), (vec![0, 1, 0, 2], 3));
        assert!(!super::identity().is_empty());
    }
}
