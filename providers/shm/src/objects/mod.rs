//! Host objects of the shm provider, one file per object as in libfabric's
//! providers, laid out in the shared structures of `layout.rs`: `ctx` (XPU
//! context), `av`, `mr`, `cq`, `cntr`, `ep`; `home` is the memory a CQ or
//! counter lives in, `params` the provider's parameters. Each imports
//! only what is below it (params, ctx, home, then the objects; ep last).
//! This file declares them and names what the plugin entry points
//! (`lib.rs`) use.
mod av;
mod cntr;
mod cq;
mod ctx;
mod ep;
mod home;
mod mr;
mod params;

pub use av::Av;
pub use cntr::Counter;
pub use cq::{Cq, MAX_CQ_SIZE};
pub use ctx::XpuCtx;
pub use ep::Ep;
pub use mr::Mr;
pub use params::{host_progress, PARAMS};
