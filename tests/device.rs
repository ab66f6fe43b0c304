//! The device API on the host XPU: kernels on CPU threads, signals, work
//! requests, in-flight operations and the MoE example.
//!
//! One test binary for this part of the system: each file below was a
//! test binary of its own; its tests keep their names under its module
//! (`cargo test --test device -- <file>::`).
mod common;

#[path = "device_converged.rs"]
mod device_converged;
#[path = "device_gpu_like.rs"]
mod device_gpu_like;
#[path = "device_host.rs"]
mod device_host;
#[path = "device_signal.rs"]
mod device_signal;
#[path = "device_split.rs"]
mod device_split;
#[path = "inflight.rs"]
mod inflight;
#[path = "moe_example.rs"]
mod moe_example;
#[path = "weak_order.rs"]
mod weak_order;
#[path = "wr.rs"]
mod wr;
