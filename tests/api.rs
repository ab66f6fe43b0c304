//! The core library through its C API: objects, handles, memory, the plugin
//! loader, and the C headers' ABI.
//!
//! One test binary for this part of the system: each file below was a
//! test binary of its own; its tests keep their names under its module
//! (`cargo test --test api -- <file>::`).
mod common;
mod plugins;

#[path = "abi_layout.rs"]
mod abi_layout;
#[path = "bad_input.rs"]
mod bad_input;
#[path = "buffer_reuse.rs"]
mod buffer_reuse;
#[path = "close_in_use.rs"]
mod close_in_use;
#[path = "coexistence.rs"]
mod coexistence;
#[path = "handle_checks.rs"]
mod handle_checks;
#[path = "handle_recycling.rs"]
mod handle_recycling;
#[path = "loader.rs"]
mod loader;
#[path = "memory_ops.rs"]
mod memory_ops;
#[path = "object_model.rs"]
mod object_model;
#[path = "vendor_memory.rs"]
mod vendor_memory;
