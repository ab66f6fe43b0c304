//! Host XPU launcher types (see `fi_xpu_host_launch` in fi_xpu(7)).
