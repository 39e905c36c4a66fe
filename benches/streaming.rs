//! Nesting long text traces in bounded memory (issue 28): `blackbox nest -q` on
//! multi-tier traces of 10 M and 100 M messages, its wall time per message and its peak
//! resident memory, which must stay under 2 GB and flat with the trace's length; and
//! beside it the whole trace held at once (`--segment-lines 0`), today's speed per
//! message, on the smallest.
//!
//! Then the same for a capture set (`BLACKBOX_STREAM_CAPTURES`, a directory of one
//! capture per host, e.g. `target/bench-captures/multitier-1100mb` as `cargo bench
//! --bench capture` makes it, or bigger with `BLACKBOX_CAPTURE_MB`): nested in
//! segments (read once, their messages kept on disk) and whole.
//!
//! `cargo bench --bench streaming` — generates the traces once with maketrace (cached
//! under `target/bench-traces/`, 6.4 GB for 100 M messages), then prints one line per
//! run. `BLACKBOX_STREAM_MESSAGES` (default `10000000,100000000`) sets the lengths,
//! `BLACKBOX_STREAM_CONFIG` the system (default `multitier`; `shop` is the 40-client
//! shop), and `BLACKBOX_STREAM_WHOLE=all` holds the whole trace at every length too
//! (11.5 GB at 100 M messages).

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;
use support::runs::{finished, generated_trace, peak_bytes};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` probes every bench target
    }
    let lengths: Vec<u64> = std::env::var("BLACKBOX_STREAM_MESSAGES")
        .unwrap_or_else(|_| "10000000,100000000".into())
        .split(',')
        .map(|n| {
            n.trim()
                .parse()
                .expect("lengths in messages, comma separated")
        })
        .collect();
    let config = std::env::var("BLACKBOX_STREAM_CONFIG").unwrap_or_else(|_| "multitier".into());
    let whole_everywhere = std::env::var("BLACKBOX_STREAM_WHOLE").is_ok_and(|v| v == "all");
    println!("{config}: blackbox nest -q FILE, 2 cores");
    println!(
        "{:>12}  {:<26} {:>9} {:>11} {:>12} {:>11}",
        "messages", "nested", "wall", "µs/message", "peak memory", "bytes/msg"
    );
    for (k, &messages) in lengths.iter().enumerate() {
        let trace = generated_trace(&config, messages);
        let mut runs = vec![("in segments (default)", vec![])];
        if k == 0 || whole_everywhere {
            runs.push(("whole (--segment-lines 0)", vec!["--segment-lines", "0"]));
        }
        for (name, flags) in runs {
            let (seconds, peak) = run(std::slice::from_ref(&trace), &flags);
            println!(
                "{messages:>12}  {name:<26} {seconds:>8.1}s {:>11.2} {:>9.0} MB {:>11.1}",
                seconds * 1e6 / messages as f64,
                peak as f64 / 1e6,
                peak as f64 / messages as f64,
            );
        }
    }
    if let Ok(dir) = std::env::var("BLACKBOX_STREAM_CAPTURES") {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| {
                path.extension()
                    .is_some_and(|e| e == "pcap" || e == "pcapng")
            })
            .collect();
        files.sort();
        let bytes: u64 = files
            .iter()
            .map(|f| std::fs::metadata(f).unwrap().len())
            .sum();
        println!(
            "{dir}: {} captures, {:.1} GB",
            files.len(),
            bytes as f64 / 1e9
        );
        for (name, flags) in [
            ("in segments (default)", vec![]),
            ("whole (--segment-lines 0)", vec!["--segment-lines", "0"]),
        ] {
            let (seconds, peak) = run(&files, &flags);
            println!(
                "{:>12}  {name:<26} {seconds:>8.1}s {:>9.0} MB/s {:>9.0} MB",
                "",
                bytes as f64 / 1e6 / seconds,
                peak as f64 / 1e6,
            );
        }
    }
}

/// Wall seconds and peak resident bytes of `blackbox nest -q FILES FLAGS`.
fn run(files: &[PathBuf], flags: &[&str]) -> (f64, u64) {
    let start = Instant::now();
    // Waited for by `finished` (wait4, for its rusage); std's wait would find it gone.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(env!("CARGO_BIN_EXE_blackbox"))
        .args(["nest", "-q"])
        .args(files)
        .args(flags)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (_, usage) = finished(child);
    (start.elapsed().as_secs_f64(), peak_bytes(&usage))
}
