//! The ofi provider over libfabric.
//!
//! One test binary for this part of the system: each file below was a
//! test binary of its own; its tests keep their names under its module
//! (`cargo test --test ofi -- <file>::`).
mod common;

#[path = "ofi_atomics.rs"]
mod ofi_atomics;
#[path = "ofi_bad_remote.rs"]
mod ofi_bad_remote;
#[path = "ofi_build_probe.rs"]
mod ofi_build_probe;
#[path = "ofi_hostile.rs"]
mod ofi_hostile;
#[path = "ofi_netns.rs"]
mod ofi_netns;
#[path = "ofi_ops.rs"]
mod ofi_ops;
#[path = "ofi_proxy_alloc.rs"]
mod ofi_proxy_alloc;
#[path = "ofi_stress.rs"]
mod ofi_stress;
#[path = "ofi_transport.rs"]
mod ofi_transport;
