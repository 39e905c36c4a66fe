//! blackbox infers the causal paths of requests through a distributed system of black
//! boxes from message traces alone, and tells which node on which path adds latency.
//!
//! The pipeline: [`trace`] reads per-host observations (text traces now, captures
//! later) and merges both ends of each message into one time-ordered [`trace::Trace`];
//! [`nesting`] pairs calls with returns, scores every plausible parent of each call
//! against the delays seen across the whole trace, chooses one parent per call, and
//! aggregates the resulting trees into ranked path patterns with latency
//! distributions; [`report`] renders those patterns as a table, Graphviz dot, JSON, or
//! per-call parent assignments.
#![deny(missing_docs)]

pub mod align;
pub mod capture;
pub mod convolution;
pub mod eval;
pub mod exit;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod input;
pub mod nesting;
pub mod progress;
pub mod report;
pub mod trace;
