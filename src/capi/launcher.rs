//! Host XPU launcher entry points (see `crate::launcher`).
