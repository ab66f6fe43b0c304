//! The host objects of the ofi provider, one file per object as in
//! libfabric's providers: `domain` (a libfabric fabric and domain, and the
//! progress threads), `ctx` (XPU context), `av`, `mr`, `ep`. The CQ and the
//! counter are plain memory the proxy writes and kernels read: they live
//! in `state::cq` and `state::cntr`, which these objects and the proxy
//! both import. This file declares the objects and names what the plugin
//! entry points (`lib.rs`) use.
pub mod av;
pub mod ctx;
pub mod domain;
pub mod ep;
pub mod mr;

pub use crate::state::cntr::CntrShared;
pub use crate::state::cq::CqShared;
pub use av::{Av, ADDR_LEN};
pub use ctx::XpuCtx;
pub use domain::Domain;
pub use ep::Ep;
pub use mr::Mr;
