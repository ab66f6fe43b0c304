//! Worlds: collectives and the bootstrap, on one host and across network
//! namespaces.
//!
//! One test binary for this part of the system: each file below was a
//! test binary of its own; its tests keep their names under its module
//! (`cargo test --test worlds -- <file>::`).
mod common;

#[path = "world.rs"]
mod world;
#[path = "world_netns.rs"]
mod world_netns;
