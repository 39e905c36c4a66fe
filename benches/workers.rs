//! Workers (issue 45): `blackbox nest -q --workers N` at 1 and 2 workers, and as two
//! processes of one worker each on localhost (`--cluster`), on the 40-client shop at
//! 1 M messages and the multi-tier trace at 10 M (in segments); each run's wall time,
//! CPU time, peak memory and speed-up over one worker, and whether its output is the
//! same bytes as one worker's (it must be).
//!
//! `cargo bench --bench workers` — generates the traces once with maketrace (cached
//! under `target/bench-traces/`, as `--bench streaming` does). `BLACKBOX_WORKERS_TRACES`
//! (default `shop:1000000,multitier:10000000`) sets the traces, `config:messages`,
//! comma separated; `BLACKBOX_WORKERS_CAPTURES`, a directory of one capture per host,
//! adds a capture set, run also as two processes each given half the captures (as on
//! two machines, each reading its own). Don't run it while anything else uses the
//! cores.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;
use support::runs::{finished, generated_trace, peak_bytes};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` probes every bench target
    }
    let traces = std::env::var("BLACKBOX_WORKERS_TRACES")
        .unwrap_or_else(|_| "shop:1000000,multitier:10000000".into());
    let mut inputs: Vec<(String, Vec<PathBuf>)> = traces
        .split(',')
        .map(|spec| {
            let (config, messages) = spec.trim().split_once(':').expect("config:messages");
            let messages: u64 = messages.parse().expect("messages");
            let name = format!("{config}, {} M messages", messages / 1_000_000);
            (name, vec![generated_trace(config, messages)])
        })
        .collect();
    if let Ok(dir) = std::env::var("BLACKBOX_WORKERS_CAPTURES") {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
            .collect();
        files.sort();
        inputs.push((dir, files));
    }
    println!("blackbox nest -q, 2 cores");
    println!(
        "{:<28} {:<27} {:>8} {:>8} {:>10} {:>8}  output",
        "input", "run", "wall", "CPU", "peak", "speed-up"
    );
    for (name, files) in &inputs {
        let (one, output) = run(files, Workers::Threads(1));
        let captures = files.len() > 1;
        let runs = [
            ("--workers 1", Workers::Threads(1)),
            ("--workers 2", Workers::Threads(2)),
            ("2 processes, 1 worker each", Workers::Processes(false)),
            ("2 processes, captures split", Workers::Processes(true)),
        ];
        for (label, workers) in runs {
            if matches!(workers, Workers::Processes(true)) && !captures {
                continue;
            }
            let (measured, same) = match workers {
                Workers::Threads(1) => (one, true),
                _ => {
                    let (measured, bytes) = run(files, workers);
                    (measured, bytes == output)
                }
            };
            println!(
                "{name:<28} {label:<27} {:>7.1}s {:>7.1}s {:>7.0} MB {:>7.2}×  {}",
                measured.wall,
                measured.cpu,
                measured.peak as f64 / 1e6,
                one.wall / measured.wall,
                if same { "same" } else { "DIFFERS" }
            );
        }
    }
}

#[derive(Clone, Copy)]
enum Workers {
    Threads(usize),
    /// Two processes on localhost, one worker each: the wall time is the first's, the
    /// CPU time and peak memory both's. Each given every file, or (`true`) the first
    /// half of the files to the first and the rest to the second.
    Processes(bool),
}

#[derive(Clone, Copy)]
struct Measured {
    wall: f64,
    cpu: f64,
    peak: u64,
}

/// The run's wall and CPU time and peak memory, and its stdout.
fn run(files: &[PathBuf], workers: Workers) -> (Measured, Vec<u8>) {
    let nest = |files: &[PathBuf], extra: &[String]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_blackbox"));
        command
            .args(["nest", "-q"])
            .args(files)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    };
    let start = Instant::now();
    match workers {
        Workers::Threads(n) => {
            let child = (nest(files, &["--workers".into(), n.to_string()]).spawn()).unwrap();
            let (output, usage) = finished(child);
            let wall = start.elapsed().as_secs_f64();
            (usage.measured(wall), output)
        }
        Workers::Processes(split) => {
            let dir = tempfile::tempdir().unwrap();
            let hosts = dir.path().join("cluster");
            let ports: Vec<String> = (0..2)
                .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
                .collect::<Vec<_>>()
                .iter()
                .map(|l| l.local_addr().unwrap().to_string())
                .collect();
            std::fs::write(&hosts, ports.join("\n")).unwrap();
            let flags = |process: usize| {
                [
                    "--workers",
                    "1",
                    "--cluster",
                    hosts.to_str().unwrap(),
                    "--process",
                ]
                .map(String::from)
                .into_iter()
                .chain([process.to_string()])
                .collect::<Vec<String>>()
            };
            // Process 0's captures come first: the same order as one process given all.
            let (mine, theirs) = match split {
                true => files.split_at(files.len() / 2),
                false => (files, files),
            };
            let second = nest(theirs, &flags(1)).spawn().unwrap();
            let first = nest(mine, &flags(0)).spawn().unwrap();
            let (output, usage) = finished(first);
            let wall = start.elapsed().as_secs_f64();
            let (_, other) = finished(second);
            let mut measured = usage.measured(wall);
            measured.cpu += other.cpu();
            measured.peak += peak_bytes(&other);
            (measured, output)
        }
    }
}

trait Usage {
    fn cpu(&self) -> f64;
    fn measured(&self, wall: f64) -> Measured;
}

impl Usage for libc::rusage {
    fn cpu(&self) -> f64 {
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        seconds(self.ru_utime) + seconds(self.ru_stime)
    }

    fn measured(&self, wall: f64) -> Measured {
        Measured {
            wall,
            cpu: self.cpu(),
            peak: peak_bytes(self),
        }
    }
}
