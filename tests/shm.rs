//! The shm provider between processes.
//!
//! One test binary for this part of the system: each file below was a
//! test binary of its own; its tests keep their names under its module
//! (`cargo test --test shm -- <file>::`).
mod common;

#[path = "shm_fuzz.rs"]
mod shm_fuzz;
#[path = "shm_multiproc.rs"]
mod shm_multiproc;
