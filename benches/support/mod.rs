//! Shared by the benchmarks: the synthetic trace generator.
pub mod multitier;
