//! The `skewer` command: flags to library calls; errors to exit codes (2 for bad input
//! or flags, 1 otherwise, 0 when stdout closes early).

use anyhow::{bail, Context, Result};
use blackbox::trace::time::{parse_duration, parse_seconds, Nanos};
use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use skewer::{parse_drift_ppm, Skew, SkewError, SkewTable, TraceLines};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Add per-node clock skew to a text trace, or remove a known skew (paper §7.5.6).
///
/// Each node's clock reads t + offset + drift·(t − t0). A `_SENT` line's time moves by
/// its sender's skew, a `_RECV` line's by its receiver's; everything else on a line is
/// copied as it was, in the same order. The table applied is written with --write-table
/// (and summarised on stderr); `--invert --table FILE` removes it again, exactly.
#[derive(Parser)]
#[command(name = "skewer", version, max_term_width = 100)]
struct Cli {
    /// The text trace.
    trace: PathBuf,

    /// Write the result here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Skew one node: NODE=OFFSET[,DRIFT_PPM], e.g. WS2=30ms or app1=-45.7ms,-40.
    #[arg(long, value_name = "NODE=OFFSET[,PPM]")]
    skew: Vec<String>,

    /// Give every other node a random offset, uniform in [−MAX, MAX].
    #[arg(long, value_name = "MAX")]
    random_offset: Option<String>,

    /// Give every other node a random drift in ppm, uniform in [−MAX, MAX].
    #[arg(long, value_name = "MAX_PPM")]
    random_drift: Option<f64>,

    /// A node whose clock stays exact when skews are random.
    #[arg(long, value_name = "NODE")]
    reference: Option<String>,

    /// Seed of the random skews (ChaCha8, the same on every platform).
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Reference time of the drifts, seconds since the epoch (default: the trace's
    /// earliest time).
    #[arg(long, value_name = "SECONDS")]
    t0: Option<String>,

    /// Take the skews from a table written by --write-table.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["skew", "random_offset", "random_drift"])]
    table: Option<PathBuf>,

    /// Remove the skews instead of adding them (de-skewing a trace with known offsets).
    #[arg(long)]
    invert: bool,

    /// Write the table of skews applied.
    #[arg(long, value_name = "FILE")]
    write_table: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

fn main() -> ExitCode {
    blackbox::exit::finish("skewer", run(), |cause| {
        cause.is::<Usage>() || cause.is::<SkewError>()
    })
}

fn usage(message: String) -> anyhow::Error {
    Usage(message).into()
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    let file = File::open(&cli.trace).map_err(|source| SkewError::Io {
        path: cli.trace.clone(),
        source,
    })?;
    let trace = TraceLines::read(&cli.trace, BufReader::new(file))?;
    let table = match &cli.table {
        Some(path) => {
            let file = File::open(path).map_err(|source| SkewError::Io {
                path: path.clone(),
                source,
            })?;
            SkewTable::read(path, BufReader::new(file))?
        }
        None => build_table(&cli, &trace)?,
    };
    if table.nodes.is_empty() {
        bail!(usage(
            "no skew given: use --skew, --random-offset/--random-drift or --table".into()
        ));
    }
    let mut summary = Vec::new();
    table.write(&mut summary)?;
    eprint!(
        "skewer: {} this table:\n{}",
        if cli.invert { "removing" } else { "applying" },
        String::from_utf8_lossy(&summary)
    );
    if let Some(path) = &cli.write_table {
        std::fs::write(path, &summary).with_context(|| format!("writing {}", path.display()))?;
    }
    let done = match &cli.output {
        Some(path) => {
            let mut out = BufWriter::new(
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
            );
            let done = trace.rewrite(&table, cli.invert, &mut out)?;
            out.flush()
                .with_context(|| format!("writing {}", path.display()))?;
            done
        }
        None => {
            let mut out = BufWriter::new(io::stdout().lock());
            let done = trace.rewrite(&table, cli.invert, &mut out)?;
            out.flush()?;
            done
        }
    };
    eprintln!(
        "skewer: {} times moved, {} lines copied as they were (other nodes, comments){}",
        done.moved,
        done.copied,
        if done.inexact > 0 {
            format!(
                ", {} times no true nanosecond reads exactly (nearest taken)",
                done.inexact
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

fn build_table(cli: &Cli, trace: &TraceLines) -> Result<SkewTable> {
    let t0 = match &cli.t0 {
        Some(text) => {
            parse_seconds(text.as_bytes()).map_err(|e| usage(format!("--t0 `{text}`: {e}")))?
        }
        None => trace
            .earliest()?
            .ok_or_else(|| usage("the trace has no messages".into()))?,
    };
    let mut table = SkewTable {
        t0,
        nodes: Default::default(),
    };
    for spec in &cli.skew {
        let (node, rest) = spec
            .split_once('=')
            .ok_or_else(|| usage(format!("--skew `{spec}`: expected NODE=OFFSET[,PPM]")))?;
        let (offset, drift) = rest.split_once(',').unwrap_or((rest, "0"));
        let offset =
            parse_duration(offset).map_err(|e| usage(format!("--skew `{spec}`: offset: {e}")))?;
        let drift = parse_drift_ppm(drift).map_err(|e| usage(format!("--skew `{spec}`: {e}")))?;
        table.nodes.insert(node.to_owned(), Skew { offset, drift });
    }
    if cli.random_offset.is_some() || cli.random_drift.is_some() {
        let max_offset: Nanos = match &cli.random_offset {
            Some(text) => parse_duration(text)
                .map_err(|e| usage(format!("--random-offset `{text}`: {e}")))?
                .abs(),
            None => 0,
        };
        // Drift in whole parts per 10¹⁵ (about a nano-ppm), so the table prints exactly.
        let max_drift = (cli.random_drift.unwrap_or(0.0).abs() * 1e9) as i64;
        let mut rng = ChaCha8Rng::seed_from_u64(cli.seed);
        for node in trace.nodes()? {
            if table.nodes.contains_key(&node) || cli.reference.as_deref() == Some(node.as_str()) {
                continue;
            }
            let offset = if max_offset > 0 {
                rng.gen_range(-max_offset..=max_offset)
            } else {
                0
            };
            let drift = if max_drift > 0 {
                rng.gen_range(-max_drift..=max_drift)
            } else {
                0
            };
            table.nodes.insert(node, Skew { offset, drift });
        }
    }
    Ok(table)
}
