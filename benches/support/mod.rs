//! Shared by the benchmarks: the synthetic trace generator, the counting allocator, and
//! runs of the built binary.
pub mod counting;
pub mod multitier;
pub mod runs;
