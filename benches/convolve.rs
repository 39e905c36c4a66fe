//! Speed of the convolution algorithm on the paper's workload: a 500-second multi-tier
//! trace at a 10 ms quantum (Table 1: 6,684 CPU seconds; the target here is under one
//! second), 10⁸ quanta of a free-form trace with delays up to 1 s (target: under 60 s
//! and 2 GB), and the correlation engine alone on 10⁶ and 10⁷ quanta.
//!
//! `cargo bench --bench convolve`

#[path = "../tests/support/generated.rs"]
mod generated;

use blackbox::convolution::correlation::{Correlator, Signal};
use blackbox::convolution::{convolve, ConvolveOptions};
use criterion::{criterion_group, criterion_main, Criterion};
use generated::Generation;
use rand::{Rng, SeedableRng};
use std::time::Duration;

fn bench(c: &mut Criterion) {
    let trace = Generation::seconds("multitier", 500).trace();
    let options = ConvolveOptions::default();
    let probe = convolve(&trace, &options).unwrap();
    eprintln!(
        "500 s multi-tier trace: {} messages, {} correlations, {} paths",
        trace.messages.len(),
        probe.stats.correlations,
        probe.paths.len()
    );
    let mut group = c.benchmark_group("convolve");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("multitier_500s_10ms", |b| {
        b.iter(|| convolve(&trace, &options).unwrap())
    });

    // 10^8 quanta: 10,000 s of the free-form system at 0.1 ms, lags up to 1 s.
    let long = Generation::seconds("freeform", 10_000).trace();
    let fine = ConvolveOptions {
        quantum: 100_000,
        max_delay: 1_000_000_000,
        variance: Some(5_000_000),
        ..ConvolveOptions::default()
    };
    let probe = convolve(&long, &fine).unwrap();
    eprintln!(
        "10^8 quanta: {} messages, {} correlations, {} paths",
        long.messages.len(),
        probe.stats.correlations,
        probe.paths.len()
    );
    group.bench_function("freeform_1e8_quanta_lag_1s", |b| {
        b.iter(|| convolve(&long, &fine).unwrap())
    });

    // One correlation of two busy signals (a message in 30% of quanta) with lags ±1 s
    // at 10 ms (L = 100) and at 1 ms (L = 1000).
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(2);
    for (quanta, max_lag) in [(1_000_000i64, 100usize), (10_000_000, 1_000)] {
        let points: Vec<(i64, f64)> = (0..quanta)
            .filter(|_| rng.gen_bool(0.3))
            .map(|t| (t, 1.0))
            .collect();
        let s1 = Signal {
            points: points.clone(),
        };
        let s2 = Signal {
            points: points.iter().map(|&(t, v)| (t + 7, v)).collect(),
        };
        let correlator = Correlator::new(max_lag);
        group.bench_function(format!("correlate_{quanta}_quanta_lag_{max_lag}"), |b| {
            b.iter(|| correlator.correlate(&s1, &s2))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
