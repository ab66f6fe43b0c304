//! Host XPU launcher: runs a kernel function as G groups of N work items on
//! CPU threads.
