//! Peak heap per message of the nesting pipeline (issue 2's target: ≤ 100 bytes per
//! message; the paper used 137 MB for 2,026,658 messages, Table 1). A counting
//! allocator records the high-water mark of live heap bytes in each stage.
//!
//! `cargo bench --bench memory` — prints one line per stage.

mod support;

use blackbox::nesting::{nest, NestOptions};
use blackbox::trace::{text, TraceBuilder};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use support::multitier::{self, MultiTier};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
        PEAK.fetch_max(live, Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A growing realloc may copy: count the moment both blocks exist. A shrinking
        // one is done in place by glibc (split, or mremap for large blocks).
        let transient = if new_size > layout.size() {
            new_size
        } else {
            0
        };
        let live = LIVE.fetch_add(transient, Relaxed) + transient;
        PEAK.fetch_max(live, Relaxed);
        LIVE.fetch_sub(transient, Relaxed);
        LIVE.fetch_add(new_size, Relaxed);
        let out = System.realloc(ptr, layout, new_size);
        LIVE.fetch_sub(layout.size(), Relaxed);
        out
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result with the peak of live bytes above what was live
/// before it started.
fn peak_above_baseline<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let baseline = LIVE.load(Relaxed);
    PEAK.store(baseline, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed) - baseline)
}

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

    let before_read = LIVE.load(Relaxed);
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
    let trace_bytes = LIVE.load(Relaxed) - before_read;
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
