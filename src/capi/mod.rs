//! The `extern "C"` surface: argument checks, conversions, and calls into safe
//! Rust. Every body is a `boundary!` (see `boundary`), so no panic crosses
//! into C and each error becomes the value the return type gives for it.
//! One file per object kind (`domain`, `ctx`, `av`, `mr`, `cq`, `cntr`,
//! `ep`) and per area (`info`, `memory`, `launcher`, `wr`, `world`,
//! `services`); what every fid shares (export, close, the `fi_ops` its
//! shell points at) is in `fid`, the argument checks they share in `args`.
#[macro_use]
pub mod boundary;
mod args;

// cbindgen lists the functions in the order of these modules, which is
// the order of `fi_xpu.h`: keep it (each group is sorted on its own).
pub mod info;
mod launcher;
mod memory;

mod domain;

mod ctx;

mod av;
mod mr;

mod cq;

mod cntr;

mod ep;
mod fid;

mod services;
mod world;
mod wr;
