//! Writes the sample multi-tier trace that ships in `tests/data/`:
//! `cargo run --example sample_trace -- SEED REQUESTS GAP_US > tests/data/multitier-sample.trace`

#[path = "../benches/support/multitier.rs"]
mod multitier;

use std::io::{self, BufWriter, Write};

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number =
        |i: usize, default: f64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (seed, requests, gap_us) = (
        number(0, 1.0) as u64,
        number(1, 500.0) as u64,
        number(2, 6_000.0),
    );
    let events = multitier::MultiTier::generate(seed, requests, gap_us);
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    writeln!(out, "# Synthetic multi-tier system (paper Figure 10): seed {seed}, {requests} requests, mean gap {gap_us} µs.")?;
    writeln!(out, "# Made by `cargo run --example sample_trace -- {seed} {requests} {gap_us}`; the last column is the true request.")?;
    multitier::write_text(&events, &mut out)?;
    out.flush()
}
