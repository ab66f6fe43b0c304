//! What ships beside the library: generated headers, man pages, the install
//! tree, the GPU bundle, the tree itself, and the valgrind subset.
//!
//! One test binary for this part of the system: each file below was a
//! test binary of its own; its tests keep their names under its module
//! (`cargo test --test tooling -- <file>::`).
mod common;
// The man page renderer of `cargo xtask man` (install, man_pages).
#[allow(dead_code)]
#[path = "../xtask/src/man.rs"]
mod man;

#[path = "gpu_bundle.rs"]
mod gpu_bundle;
#[path = "headers.rs"]
mod headers;
#[path = "install.rs"]
mod install;
#[path = "man_pages.rs"]
mod man_pages;
#[path = "memcheck.rs"]
mod memcheck;
#[path = "tree_hygiene.rs"]
mod tree_hygiene;
