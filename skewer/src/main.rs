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

/// Add per-node clock skew to a text trace or to per-host captures, or remove a known
/// skew (paper §7.5.6).
///
/// Each node's clock reads t + offset + drift·(t − t0) [+ wander·sin(2π(t − t0)/period)].
/// In a text trace a `_SENT` line's time moves by its sender's skew, a `_RECV` line's by
/// its receiver's; everything else on a line is copied as it was, in the same order.
/// Captures (pcap/pcapng, one per host, the host named by the file name without its
/// extension) have every packet's time moved by their host's skew and are written to
/// --output DIR as nanosecond pcap or pcapng, as read. The table applied is written with
/// --write-table (and summarised on stderr); `--invert --table FILE` removes it again
/// (exactly for text traces without wander).
#[derive(Parser)]
#[command(name = "skewer", version, max_term_width = 100)]
struct Cli {
    /// The text trace, or packet captures (one per host).
    #[arg(required = true, value_name = "INPUT")]
    inputs: Vec<PathBuf>,

    /// Write the trace here instead of stdout; for captures, the directory to write
    /// them to (required).
    #[arg(short, long, value_name = "FILE|DIR")]
    output: Option<PathBuf>,

    /// Skew one node: NODE=OFFSET[,DRIFT_PPM[,WANDER,PERIOD]], e.g. WS2=30ms,
    /// app1=-45.7ms,-40 or db=2s,80,20us,10min (a 20 µs wander every 10 minutes).
    #[arg(long, value_name = "NODE=OFFSET[,PPM[,WANDER,PERIOD]]")]
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
    if cli.inputs.iter().any(|p| blackbox::capture::is_capture(p)) {
        return run_captures(&cli);
    }
    let [input] = cli.inputs.as_slice() else {
        bail!(usage(format!(
            "{} inputs: skewer reads one text trace, or captures only",
            cli.inputs.len()
        )));
    };
    let file = File::open(input).map_err(|source| SkewError::Io {
        path: input.clone(),
        source,
    })?;
    let trace = TraceLines::read(input, BufReader::new(file))?;
    let table = read_or_build_table(&cli, || {
        Ok((
            trace
                .earliest()?
                .ok_or_else(|| usage("the trace has no messages".into()))?,
            trace.nodes()?,
        ))
    })?;
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

/// Skews every capture into the output directory.
fn run_captures(cli: &Cli) -> Result<()> {
    if let Some(text) = cli
        .inputs
        .iter()
        .find(|p| !blackbox::capture::is_capture(p))
    {
        bail!(usage(format!(
            "{} is not a capture: give either one text trace or captures only",
            text.display()
        )));
    }
    let Some(dir) = &cli.output else {
        bail!(usage(
            "captures need --output DIR to write the skewed captures to".into()
        ));
    };
    // Hosts are named as blackbox names them: by the file name without its extension.
    let default_names = blackbox::capture::CaptureOptions::default();
    let host = |path: &PathBuf| blackbox::capture::host_name(path, &default_names);
    let table = read_or_build_table(cli, || {
        let mut earliest: Option<Nanos> = None;
        for path in &cli.inputs {
            if let Some(t) = skewer::earliest_packet(path)? {
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
            }
        }
        let mut hosts: Vec<String> = cli.inputs.iter().map(host).collect();
        hosts.sort();
        Ok((
            earliest.ok_or_else(|| usage("the captures have no packets".into()))?,
            hosts,
        ))
    })?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for input in &cli.inputs {
        let output = dir.join(input.file_name().expect("a file has a name"));
        if output.canonicalize().ok() == input.canonicalize().ok() {
            bail!(usage(format!(
                "--output {} would overwrite {}",
                dir.display(),
                input.display()
            )));
        }
        let name = host(input);
        let skew = table.nodes.get(&name).copied().unwrap_or_default();
        let done = skewer::skew_capture(input, &output, &skew, table.t0, cli.invert)?;
        if let Some(stopped) = &done.stopped {
            eprintln!(
                "warning: {}: packet {} at byte {}: {}; the packets before it are written",
                input.display(),
                stopped.packet,
                stopped.offset,
                stopped.reason
            );
        }
        eprintln!(
            "skewer: {} -> {} ({} packets, host {name}{})",
            input.display(),
            output.display(),
            done.frames,
            if table.nodes.contains_key(&name) {
                ""
            } else {
                ", not in the table: unchanged"
            }
        );
    }
    Ok(())
}

/// The table from --table, or built from the flags for the nodes and default t0 that
/// `inputs` gives; summarised on stderr and written with --write-table.
fn read_or_build_table(
    cli: &Cli,
    inputs: impl FnOnce() -> Result<(Nanos, Vec<String>)>,
) -> Result<SkewTable> {
    let table = match &cli.table {
        Some(path) => {
            let file = File::open(path).map_err(|source| SkewError::Io {
                path: path.clone(),
                source,
            })?;
            SkewTable::read(path, BufReader::new(file))?
        }
        None => build_table(cli, inputs()?)?,
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
    Ok(table)
}

fn build_table(cli: &Cli, (earliest, nodes): (Nanos, Vec<String>)) -> Result<SkewTable> {
    let t0 = match &cli.t0 {
        Some(text) => {
            parse_seconds(text.as_bytes()).map_err(|e| usage(format!("--t0 `{text}`: {e}")))?
        }
        None => earliest,
    };
    let mut table = SkewTable {
        t0,
        nodes: Default::default(),
    };
    for spec in &cli.skew {
        let (node, rest) = spec
            .split_once('=')
            .ok_or_else(|| usage(format!("--skew `{spec}`: expected NODE=OFFSET[,PPM]")))?;
        let parts: Vec<&str> = rest.split(',').collect();
        if parts.len() > 4 || parts.len() == 3 {
            bail!(usage(format!(
                "--skew `{spec}`: expected NODE=OFFSET[,PPM[,WANDER,PERIOD]]"
            )));
        }
        let offset =
            parse_duration(parts[0]).map_err(|e| usage(format!("--skew `{spec}`: offset: {e}")))?;
        let drift = parse_drift_ppm(parts.get(1).copied().unwrap_or("0"))
            .map_err(|e| usage(format!("--skew `{spec}`: {e}")))?;
        let (wander, wander_period) = match parts.get(2..4) {
            Some([wander, period]) => (
                parse_duration(wander)
                    .map_err(|e| usage(format!("--skew `{spec}`: wander: {e}")))?,
                parse_duration(period)
                    .map_err(|e| usage(format!("--skew `{spec}`: period: {e}")))?,
            ),
            _ => (0, 0),
        };
        if wander != 0 && wander_period <= 0 {
            bail!(usage(format!(
                "--skew `{spec}`: a wander needs a positive period"
            )));
        }
        table.nodes.insert(
            node.to_owned(),
            Skew {
                offset,
                drift,
                wander,
                wander_period,
            },
        );
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
        for node in nodes {
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
            table.nodes.insert(
                node,
                Skew {
                    offset,
                    drift,
                    ..Skew::default()
                },
            );
        }
    }
    Ok(table)
}
