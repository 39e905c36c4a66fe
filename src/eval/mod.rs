//! Scoring inferred paths against ground truth (paper §7.5.1). Owns the metrics and
//! the reading of truth files; inference is [`crate::nesting`]'s, printing is the
//! caller's. Where only whole requests can be named (by the ids their root calls carry),
//! [`signatures`] scores each request's pattern.
//!
//! Two kinds of truth: the trace's own truth column (a path-instance id on every
//! message, as `maketrace` writes), scored by [`paths`]; and a file of true parents in
//! the assignments format (real traces), scored call by call by [`calls`]. And where
//! no truth is at hand, the system's own propagated ids, hidden from the inference
//! ([`ids`]).

pub mod calls;
pub mod ids;
pub mod message_paths;
pub mod paths;
pub mod reliability;
pub mod signatures;
