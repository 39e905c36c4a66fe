//! Clock-alignment scenarios, shared by the study (`examples/alignment.rs`) and the
//! floors in `tests/align.rs`: maketrace captures of several hosts over a network with
//! known delays, each host's clock skewed by a known offset, drift and wander (the
//! skewer library), a few timestamps taken early; then `blackbox::align` and the error
//! of every aligned pair of hosts against the truth, once a second.

use blackbox::align::{self, fit::Method, Alignment};
use blackbox::capture::{self, CaptureOptions};
use blackbox::input::{self, InputOptions};
use blackbox::trace::Nanos;
use maketrace::capture::{Container, Link, Payload};
use maketrace::{config, generate};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skewer::Skew;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One kind of network and clock.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name in tables.
    pub name: &'static str,
    /// Seconds of traffic.
    pub seconds: i64,
    /// One request a second (`true`), or a light steady load.
    pub sparse: bool,
    /// The network.
    pub link: Link,
    /// Largest amplitude of a slow wander of each clock, ns (0: linear drift).
    pub wander: Nanos,
    /// Packets per capture whose timestamps are taken 50 µs early.
    pub early: usize,
}

/// A LAN: 30 µs at least, 5 µs of jitter on average, 1 Gbit/s.
pub fn lan() -> Link {
    Link {
        base: 30_000,
        jitter: 5_000,
        per_byte: 0.0,
        queueing: 0,
        seed: 0,
    }
}

/// The scenarios of the issue, at a scale `seconds` long.
pub fn scenarios(seconds: i64) -> Vec<Scenario> {
    let base = Scenario {
        name: "symmetric light load",
        seconds,
        sparse: false,
        link: lan(),
        wander: 0,
        early: 0,
    };
    vec![
        base.clone(),
        Scenario {
            name: "asymmetric queueing (replies +60 µs mean)",
            link: Link {
                queueing: 60_000,
                ..lan()
            },
            ..base.clone()
        },
        Scenario {
            name: "packet sizes differ per direction (8 ns/byte)",
            link: Link {
                per_byte: 8.0,
                ..lan()
            },
            ..base.clone()
        },
        Scenario {
            name: "sparse (one exchange a second)",
            sparse: true,
            seconds: seconds * 4,
            ..base.clone()
        },
        Scenario {
            name: "drift not linear (30 µs wander)",
            wander: 30_000,
            seconds: seconds * 4,
            ..base.clone()
        },
        Scenario {
            name: "a few timestamps 50 µs early",
            early: 5,
            ..base
        },
    ]
}

/// The model: `hosts` nodes h0..; a chain of nested calls h0 → h1 → … and a fan from
/// h0 to every other host, so the graph of hosts has loops.
fn model(hosts: usize, sparse: bool) -> String {
    let mut chain = vec!["call h0 h1".to_string()];
    for i in 1..hosts - 1 {
        chain.push(format!("call h{i} h{} after 1ms±0.2ms", i + 1));
    }
    for i in (1..hosts).rev() {
        chain.push(format!("return h{i} h{} after 0.5ms±0.1ms", i - 1));
    }
    let mut fan = Vec::new();
    for i in 2..hosts {
        fan.push(format!("call h0 h{i} after 0.3ms±0.1ms"));
        fan.push(format!("return h{i} h0 after 0.5ms±0.1ms"));
    }
    let quote = |steps: &[String]| {
        steps
            .iter()
            .map(|s| format!("\"{s}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (parallel, think) = if sparse {
        (1, "[\"1s\", \"1s\"]")
    } else {
        (2, "[\"20ms\", \"80ms\"]")
    };
    let mut text = format!(
        "[[tracelet]]\nname = \"chain\"\nparallel = {parallel}\nthink = {think}\nsteps = [{}]\n",
        quote(&chain)
    );
    if !sparse && hosts > 2 {
        // The fan starts with a call from h0, which the chain's first call also is.
        let _ = write!(
            text,
            "\n[[tracelet]]\nname = \"fan\"\nparallel = 1\nthink = {think}\nsteps = [\"call h0 h1\", {}, \"return h1 h0 after 0.2ms±0.05ms\"]\n",
            quote(&fan)
        );
    }
    text
}

/// What one run measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// |error| of every aligned pair of hosts, once a second, ns.
    pub errors: Vec<f64>,
    /// Instants where a host's bound held its true correction, and all instants with a
    /// bound.
    pub contained: (u64, u64),
    /// Hosts that could not be aligned.
    pub unaligned: usize,
    /// The captures written, skewed.
    pub captures: Vec<PathBuf>,
    /// The skew of every host.
    pub skews: Vec<Skew>,
}

/// The start of every generated trace.
pub const START: Nanos = 1_700_000_000_000_000_000;

/// Writes the scenario's captures under `dir` for `hosts` hosts and `seed`: unskewed
/// ones in `dir/true`, skewed ones in `dir/skewed`. Returns the skewed captures and
/// the skews.
pub fn write_captures(
    scenario: &Scenario,
    hosts: usize,
    seed: u64,
    max_offset: Nanos,
    max_drift_ppm: i64,
    dir: &Path,
) -> (Vec<PathBuf>, Vec<PathBuf>, Vec<Skew>) {
    let model = config::parse(&model(hosts, scenario.sparse)).expect("the model parses");
    let options = generate::Options {
        start: START,
        stop: generate::Stop::Duration(scenario.seconds * 1_000_000_000),
        network: None,
        resolution: 1,
    };
    let trace = generate::generate(&model, &options, &mut ChaCha8Rng::seed_from_u64(seed));
    let link = Link {
        seed,
        ..scenario.link.clone()
    };
    let truth_dir = dir.join("true");
    let written =
        maketrace::capture::write_over(&trace, &truth_dir, Payload::Http, Container::Pcap, &link)
            .expect("captures are written");
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let skewed_dir = dir.join("skewed");
    std::fs::create_dir_all(&skewed_dir).unwrap();
    let mut skews = Vec::new();
    let mut skewed = Vec::new();
    let mut files = written.files.clone();
    files.sort();
    for file in &files {
        let skew = Skew {
            offset: rng.gen_range(-max_offset..=max_offset),
            drift: rng.gen_range(-max_drift_ppm..=max_drift_ppm) * 1_000_000_000,
            // Each host its own wander, so the pairs' relation is not a line.
            wander: if scenario.wander > 0 {
                rng.gen_range(-scenario.wander..=scenario.wander)
            } else {
                0
            },
            // One slow cycle over the trace: clocks bend over minutes.
            wander_period: scenario.seconds * 1_000_000_000,
        };
        let packets = count_packets(file);
        let early: Vec<u64> = (0..scenario.early)
            .map(|_| rng.gen_range(1..=packets.max(1)))
            .collect();
        let output = skewed_dir.join(file.file_name().unwrap());
        capture::write::rewrite_times(file, &output, Container::Pcap, |number, t| {
            let t = if early.contains(&number) {
                t - 50_000
            } else {
                t
            };
            skew.apply(t, START)
        })
        .expect("the capture is rewritten");
        skews.push(skew);
        skewed.push(output);
    }
    (files, skewed, skews)
}

fn count_packets(path: &Path) -> u64 {
    let mut stats = capture::stats::FileStats::default();
    let mut n = 0;
    let file = std::fs::File::open(path).unwrap();
    capture::file::read_frames(path, file, &mut stats, |_, _| n += 1).unwrap();
    n
}

/// Reads and aligns captures (`least_squares`: over all pairs where the graph has
/// loops, else along shortest paths only).
pub fn align_captures(paths: &[PathBuf], method: Method, least_squares: bool) -> Alignment {
    let captures =
        input::read_for_alignment(paths, &CaptureOptions::default()).expect("the captures read");
    align::align_with(&captures, method, least_squares)
}

/// Runs one scenario: writes, skews, aligns by each (method, least squares), and
/// measures every pair once a second.
pub fn run(
    scenario: &Scenario,
    hosts: usize,
    seed: u64,
    methods: &[(Method, bool)],
    dir: &Path,
) -> Vec<Outcome> {
    let (_, skewed, skews) = write_captures(scenario, hosts, seed, 2_000_000_000, 100, dir);
    methods
        .iter()
        .map(|&(method, least_squares)| {
            let alignment = align_captures(&skewed, method, least_squares);
            let mut outcome = measure(&alignment, &skews, scenario.seconds);
            outcome.captures = skewed.clone();
            outcome.skews = skews.clone();
            outcome
        })
        .collect()
}

/// The error of every aligned pair and the bounds' hold on the truth, once a second
/// from the second second to the second last.
pub fn measure(alignment: &Alignment, skews: &[Skew], seconds: i64) -> Outcome {
    let mut outcome = Outcome {
        unaligned: alignment.unaligned().len(),
        ..Outcome::default()
    };
    let reference = alignment.hosts.iter().position(|h| h.reference);
    let aligned: Vec<usize> = (0..skews.len())
        .filter(|&h| alignment.hosts[h].quality != align::fit::Quality::Absent)
        .collect();
    for second in 1..seconds - 1 {
        let t = START + second * 1_000_000_000;
        // Each host's clock error and its correction, at true time t.
        let at: Vec<(f64, f64)> = (0..skews.len())
            .map(|h| {
                let error = skews[h].error_at(t, START) as f64;
                let correction = alignment.correction(h, t + error as Nanos);
                (error, correction)
            })
            .collect();
        for (i, &h) in aligned.iter().enumerate() {
            for &k in &aligned[i + 1..] {
                let e = (at[h].0 + at[h].1) - (at[k].0 + at[k].1);
                outcome.errors.push(e.abs());
            }
        }
        if let Some(r) = reference {
            for &h in &aligned {
                if h == r {
                    continue;
                }
                let local = t + at[h].0 as Nanos;
                if let Some(bound) = alignment.route_bound(h, local) {
                    let truth = at[r].0 - at[h].0;
                    outcome.contained.1 += 1;
                    if (at[h].1 - truth).abs() <= bound + 1.0 {
                        outcome.contained.0 += 1;
                    }
                }
            }
        }
    }
    outcome
}

/// The `q`-quantile (nearest rank) of values.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Builds the trace of captures aligned by `method` and repairs it: the report says
/// how many messages arrived before they left, before and after.
pub fn repaired(paths: &[PathBuf], method: Method) -> align::repair::RepairReport {
    let options = InputOptions {
        align: Some(method),
        repair: Some(align::repair::RepairOptions::default()),
        ..InputOptions::default()
    };
    let input = input::read(paths, &options).expect("the captures read");
    input.repair.expect("repair was asked for").report
}
