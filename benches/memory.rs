//! Peak heap per message of the nesting pipeline (issue 2's target: ≤ 100 bytes per
//! message; the paper used 137 MB for 2,026,658 messages, Table 1). A counting
//! allocator records the high-water mark of live heap bytes in each stage.
//!
//! `cargo bench --bench memory` — prints one line per stage.

mod support;

use blackbox::nesting::{nest, NestOptions};
use blackbox::trace::{text, TraceBuilder};
use std::path::Path;
use support::counting::{live, peak_above_baseline, Counting};
use support::multitier::{self, MultiTier};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` probes every bench target
    }
    let requests: u64 = std::env::var("BLACKBOX_BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256_000);
    let events = MultiTier::generate(7, requests, 2_600.0);
    let mut text_bytes = Vec::new();
    multitier::write_text(&events, &mut text_bytes).unwrap();
    drop(events);

    let before_read = live();
    let (trace, read_peak) = peak_above_baseline(|| {
        let mut builder = TraceBuilder::new();
        text::read_with_size(
            Path::new("bench"),
            &text_bytes[..],
            text_bytes.len() as u64,
            &mut builder,
        )
        .unwrap();
        builder.finish()
    });
    let trace_bytes = live() - before_read;
    let (nesting, nest_peak) =
        peak_above_baseline(|| nest(&trace, &NestOptions::default()).unwrap());
    let whole = read_peak.max(trace_bytes + nest_peak);
    let messages = trace.messages.len() as f64;
    let per_message = |bytes: usize| bytes as f64 / messages;
    println!(
        "messages: {messages}, call pairs: {}, mean per-node parallelism {:.2}",
        nesting.stats.call_pairs, nesting.stats.mean_parallelism
    );
    println!(
        "read text -> trace:    peak {:7.1} MB  {:6.1} bytes/message",
        read_peak as f64 / 1e6,
        per_message(read_peak)
    );
    println!(
        "trace held:                 {:7.1} MB  {:6.1} bytes/message",
        trace_bytes as f64 / 1e6,
        per_message(trace_bytes)
    );
    println!(
        "nesting beyond trace:  peak {:7.1} MB  {:6.1} bytes/message",
        nest_peak as f64 / 1e6,
        per_message(nest_peak)
    );
    println!(
        "whole pipeline:        peak {:7.1} MB  {:6.1} bytes/message",
        whole as f64 / 1e6,
        per_message(whole)
    );
}
