//! Capture reading speed and memory (issue 5's targets): reading a capture of at least
//! 1 GB to messages at no less than half the speed of `tcpdump -r FILE -w /dev/null` on
//! the same file, side by side; and memory that does not grow with the capture apart
//! from open flows and the messages themselves.
//!
//! `cargo bench --bench capture` — generates the captures once with maketrace (cached
//! under `target/bench-captures/`), then prints one line per measurement: for HTTP/1.1
//! (a connection per call) and for gRPC (one HTTP/2 connection per pair of hosts, a
//! stream per call, HPACK-decoded). Set `BLACKBOX_CAPTURE_MB` to change the size
//! (default 1100) and `BLACKBOX_CAPTURE_PAYLOAD` to `http` or `grpc` for one only.

#[path = "../tests/support/generated.rs"]
mod generated;

mod support;

use blackbox::capture::{read_capture, CaptureOptions};
use generated::Generation;
use maketrace::capture::{Container, Payload};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use support::counting::{peak_above_baseline, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The multi-tier system at eight times its parallelism, written as captures until the
/// database host's capture is at least `megabytes`.
fn capture_of_at_least(megabytes: u64, payload: Payload) -> PathBuf {
    let name = match payload {
        Payload::Grpc => format!("multitier-grpc-{megabytes}mb"),
        _ => format!("multitier-{megabytes}mb"),
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/bench-captures")
        .join(name);
    let db = dir.join("DB.pcap");
    if std::fs::metadata(&db).is_ok_and(|m| m.len() >= megabytes << 20) {
        return db;
    }
    // The database host's capture grows by about 1.8 MB per second at this load (1.4
    // with gRPC, whose calls need no handshakes).
    let per_100_mb = if payload == Payload::Grpc { 80 } else { 61 };
    let seconds = (megabytes as i64 * per_100_mb / 100).max(10);
    eprintln!("generating {seconds} s of the multi-tier system as captures in {dir:?} ...");
    let trace = Generation {
        parallel: 8.0,
        network: Some((150_000, 30_000)),
        resolution: 1,
        seed: 5,
        ..Generation::seconds("multitier", seconds)
    }
    .lines();
    maketrace::capture::write(&trace, &dir, payload, Container::Pcap).unwrap();
    let size = std::fs::metadata(&db).unwrap().len();
    assert!(
        size >= megabytes << 20,
        "DB.pcap is {} MB; raise the duration estimate",
        size >> 20
    );
    db
}

fn best_of(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap()
}

fn main() {
    // Criterion's harness passes --bench; this study takes no flags.
    let megabytes: u64 = std::env::var("BLACKBOX_CAPTURE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1100);
    let which = std::env::var("BLACKBOX_CAPTURE_PAYLOAD").unwrap_or_default();
    for (name, payload) in [("http", Payload::Http), ("grpc", Payload::Grpc)] {
        if which.is_empty() || which == name {
            measure(&capture_of_at_least(megabytes, payload));
        }
    }
}

/// Reads `path` to messages, side by side with tcpdump, and measures the peak heap.
fn measure(path: &Path) {
    let path = path.to_path_buf();
    let bytes = std::fs::metadata(&path).unwrap().len();
    let options = CaptureOptions::default();

    let read = || {
        let file = std::fs::File::open(&path).unwrap();
        read_capture(&path, "DB".into(), file, &options).unwrap()
    };
    // Warm the page cache so both readers see the same storage.
    let warm = read();
    let packets = warm.stats.packets;
    let messages = warm.messages();
    drop(warm);

    let ours = best_of(3, || {
        let start = Instant::now();
        let capture = read();
        let took = start.elapsed();
        assert_eq!(capture.stats.packets, packets);
        took
    });
    let tcpdump = Command::new("tcpdump").arg("--version").output().is_ok();
    let theirs = tcpdump.then(|| {
        best_of(3, || {
            let start = Instant::now();
            let status = Command::new("tcpdump")
                .args(["-q", "-r"])
                .arg(&path)
                .args(["-w", "/dev/null"])
                .stderr(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
            start.elapsed()
        })
    });

    let mb = bytes as f64 / 1e6;
    println!(
        "capture: {} ({:.0} MB, {} packets, {} messages)",
        path.display(),
        mb,
        packets,
        messages
    );
    println!(
        "blackbox read to messages: {:.2} s = {:.0} MB/s, {:.2} M packets/s",
        ours.as_secs_f64(),
        mb / ours.as_secs_f64(),
        packets as f64 / ours.as_secs_f64() / 1e6
    );
    match theirs {
        Some(theirs) => println!(
            "tcpdump -r FILE -w /dev/null: {:.2} s = {:.0} MB/s; blackbox at {:.2}x tcpdump's speed (target >= 0.5)",
            theirs.as_secs_f64(),
            mb / theirs.as_secs_f64(),
            theirs.as_secs_f64() / ours.as_secs_f64()
        ),
        None => println!("tcpdump not installed: no side-by-side figure (apt-get install tcpdump)"),
    }

    // Memory: the peak heap of reading the whole file and its first quarter. What is
    // not messages (open flows, buffers) must not grow with the capture.
    let message_bytes = std::mem::size_of::<blackbox::capture::flows::CaptureMessage>();
    for fraction in [4u64, 1] {
        let limit = bytes / fraction;
        let (capture, peak) = peak_above_baseline(|| {
            let file = std::fs::File::open(&path).unwrap();
            read_capture(
                &path,
                "DB".into(),
                std::io::Read::take(file, limit),
                &options,
            )
            .unwrap()
        });
        // The message vector grows by doubling, so its peak is up to three times the
        // messages' own size; what matters is that the peak per message does not grow
        // with the capture.
        println!(
            "memory reading {:.0} MB: peak heap {:.1} MB for {} messages of {} B = {:.0} B per message",
            limit as f64 / 1e6,
            peak as f64 / 1e6,
            capture.messages(),
            message_bytes,
            peak as f64 / capture.messages().max(1) as f64
        );
    }
}
