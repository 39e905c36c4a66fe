//! Shared by the benchmarks: the synthetic trace generator and the counting allocator.
pub mod counting;
pub mod multitier;
