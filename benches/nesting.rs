//! Throughput of the nesting algorithm on a synthetic multi-tier trace of about two
//! million messages at per-node parallelism near 2 (issue 2's target: ≥ 2 M messages/s
//! through the algorithm; the paper needed 24 CPU s for 2,026,658 messages, Table 1).
//!
//! A second group times a small trace of the same system at per-node parallelism near
//! 20, where children have many candidates each and the joint choice searches from
//! three starts: its cost per message is far higher there.
//!
//! A third group, `nesting_shop`, times what issue 25 found slow: the 5-tier shop of
//! `traces/configs/shop.toml` with 10 and 40 concurrent clients (per-node parallelism
//! about 1.7 and 4), both parent choices, 400,000 messages each: app then has about
//! 85,000 calls out, past the joint choice's window, so the window and the two halves
//! are what is timed. A fourth, `nesting_length`, times the joint choice on multi-tier
//! at its own parallelism from 250,000 to 2 M messages: the same throughput at every
//! length is the linear cost. `cargo run --release --example performance` measures the
//! same end to end at 1 M messages and up, by concurrency and by length, into
//! `docs/performance.md`.
//!
//! `cargo bench --bench nesting` — throughput is reported in messages per second.

#[path = "../tests/support/generated.rs"]
mod generated;
mod support;

use blackbox::nesting::{nest, Algorithm, NestOptions};
use blackbox::trace::{text, Trace, TraceBuilder};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use generated::Generation;
use std::path::Path;
use std::time::Duration;
use support::multitier::{self, MultiTier};

/// Requests and mean gap that give about 2 M messages at per-node parallelism ≈ 2.
pub const REQUESTS: u64 = 256_000;
pub const GAP_US: f64 = 2_600.0;
/// Requests and mean gap of the dense trace: 24 times the load, 39,030 messages.
pub const DENSE_REQUESTS: u64 = 5_000;
pub const DENSE_GAP_US: f64 = GAP_US / 24.0;

/// The multi-tier trace of `events`, with its number of messages, after saying on
/// stderr how large and how parallel it is.
fn probed_trace(label: &str, events: &[multitier::Event], options: &NestOptions) -> (Trace, u64) {
    let mut builder = TraceBuilder::new();
    multitier::build(events, &mut builder);
    let trace = builder.finish();
    let messages = trace.messages.len() as u64;
    let probe = nest(&trace, options).unwrap();
    eprintln!(
        "{label}: {} messages, {} call pairs, mean per-node parallelism {:.2}",
        messages, probe.stats.call_pairs, probe.stats.mean_parallelism
    );
    (trace, messages)
}

fn bench(c: &mut Criterion) {
    let events = MultiTier::generate(7, REQUESTS, GAP_US);
    let options = NestOptions::default();
    let (trace, messages) = probed_trace("trace", &events, &options);

    let mut text_bytes = Vec::new();
    multitier::write_text(&events, &mut text_bytes).unwrap();
    drop(events);

    let mut group = c.benchmark_group("nesting");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Elements(messages));
    group.bench_function("algorithm", |b| b.iter(|| nest(&trace, &options).unwrap()));
    group.bench_function("text_to_patterns", |b| {
        b.iter(|| {
            let mut builder = TraceBuilder::new();
            text::read_with_size(
                Path::new("bench"),
                &text_bytes[..],
                text_bytes.len() as u64,
                &mut builder,
            )
            .unwrap();
            let trace = builder.finish();
            nest(&trace, &options).unwrap()
        })
    });
    group.finish();
}

fn bench_dense(c: &mut Criterion) {
    let events = MultiTier::generate(7, DENSE_REQUESTS, DENSE_GAP_US);
    let options = NestOptions::default();
    let (trace, messages) = probed_trace("dense trace", &events, &options);
    let mut group = c.benchmark_group("nesting_dense");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(40))
        .throughput(Throughput::Elements(messages));
    group.bench_function("algorithm", |b| b.iter(|| nest(&trace, &options).unwrap()));
    group.finish();
}

fn bench_shop(c: &mut Criterion) {
    let mut group = c.benchmark_group("nesting_shop");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    for (clients, factor) in [(10, 0.25), (40, 1.0)] {
        let trace = Generation {
            parallel: factor,
            ..Generation::messages("shop", 400_000)
        }
        .trace();
        group.throughput(Throughput::Elements(trace.messages.len() as u64));
        for (name, algorithm) in [("paper", Algorithm::Paper), ("joint", Algorithm::Joint)] {
            let options = NestOptions {
                algorithm,
                ..NestOptions::default()
            };
            let probe = nest(&trace, &options).unwrap();
            eprintln!(
                "shop, {clients} clients: {} messages, mean per-node parallelism {:.2}",
                trace.messages.len(),
                probe.stats.mean_parallelism
            );
            group.bench_function(format!("{name}_{clients}_clients"), |b| {
                b.iter(|| nest(&trace, &options).unwrap())
            });
        }
    }
    group.finish();
}

fn bench_length(c: &mut Criterion) {
    let mut group = c.benchmark_group("nesting_length");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(30));
    let options = NestOptions::default();
    for messages in [250_000, 500_000, 1_000_000, 2_000_000] {
        let trace = Generation::messages("multitier", messages).trace();
        group.throughput(Throughput::Elements(trace.messages.len() as u64));
        group.bench_function(format!("joint_{}k", messages / 1000), |b| {
            b.iter(|| nest(&trace, &options).unwrap())
        });
    }
    group.finish();
}

criterion_group!(benches, bench, bench_dense, bench_shop, bench_length);
criterion_main!(benches);
