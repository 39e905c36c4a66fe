//! blackbox infers the causal paths of requests through a distributed system of black
//! boxes from message traces alone, and tells which node on which path adds latency.
//!
//! The pipeline: [`input`] reads the files a user names (text traces, or one packet
//! capture per host through [`capture`], their clocks aligned by [`align`]) and merges
//! both ends of each message into one time-ordered [`trace::Trace`]; [`nesting`] pairs
//! calls with returns, scores every plausible parent of each call against the delays
//! seen across the whole trace, chooses one parent per call, and aggregates the
//! resulting trees into ranked path patterns with latency distributions; [`report`]
//! renders those patterns as a table, Graphviz dot, JSON, HTML, OTLP or per-call parent
//! assignments; [`convolution`] follows free-form messages instead; [`eval`] scores an
//! inference against ground truth.
#![deny(missing_docs)]

pub mod align;
pub mod brokers;
pub mod capture;
pub mod collect;
pub mod compare;
pub mod convolution;
pub mod eval;
pub mod exit;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod input;
pub mod nat;
pub mod nesting;
pub mod progress;
pub mod report;
pub mod streaming;
pub mod trace;
pub mod windows;
pub mod words;
