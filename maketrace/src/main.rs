//! The `maketrace` command: flags to library calls; errors to exit codes (2 for a bad
//! config or flag, 1 otherwise, 0 when stdout closes early).

use anyhow::{Context, Result};
use blackbox::trace::time::{human_duration, parse_duration, parse_seconds, Nanos};
use clap::Parser;
use maketrace::{config, generate, loss};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

/// Generate a synthetic message trace with ground truth from a tracelet config.
///
/// Writes blackbox's text trace format with the path-instance id of every message as the
/// last column; `blackbox eval` scores inference against it. The same config and seed
/// always give the same trace.
///
/// Hosts may have bounded worker pools, so that requests queue when clients outnumber
/// workers (a proxy is a pooled host whose steps forward each call as one call out):
///
///     [hosts.app]
///     workers = 8              # calls into app served at once; the rest wait in a queue,
///     queue_jitter = "0.2ms"   # first in, first out (optional: each waiting call keyed
///                              # by its arrival plus a uniform draw in [0, 0.2 ms])
///
/// A pooled host acts for a call (its calls out, its answer) only once a worker took it,
/// and the worker is busy until the host answers. The summary gives each pooled host's
/// mean and p99 wait. With --pcap --connections worker-pool, a pooled host's calls out go
/// on the connections of the worker that took their request. The full syntax is in
/// maketrace/src/config.rs; traces/configs/shop-pool.toml is an example.
#[derive(Parser)]
#[command(
    name = "maketrace",
    version,
    max_term_width = 100,
    verbatim_doc_comment
)]
struct Cli {
    /// The tracelet configuration (TOML).
    config: PathBuf,

    /// Write the trace here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,

    /// Seed of the random generator (ChaCha8: the same on every platform).
    #[arg(long, default_value_t = 1)]
    seed: u64,

    /// Stop starting instances after this long (e.g. 60s).
    #[arg(long, value_name = "DURATION", value_parser = duration, conflicts_with = "messages")]
    duration: Option<Nanos>,

    /// Stop starting instances once this many messages were made.
    #[arg(long, value_name = "N")]
    messages: Option<u64>,

    /// Trace start, seconds since the epoch.
    #[arg(long, value_name = "SECONDS", default_value = "1700000000", value_parser = seconds)]
    start: Nanos,

    /// Network delay per message, `MEAN[±SD]` (e.g. 100us±20us): each message is then
    /// written at both ends, CALL_SENT at the sender and CALL_RECV at the receiver.
    #[arg(long, value_name = "DELAY")]
    network_delay: Option<String>,

    /// Round times to a multiple of this.
    #[arg(long, value_name = "DURATION", default_value = "1us", value_parser = duration)]
    resolution: Nanos,

    /// Drop each observation with this probability.
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    drop_rate: f64,

    /// Model a sniffer capturing at most this many observations per second; bursts that
    /// overflow its queue are lost (paper §7.5.5).
    #[arg(long, value_name = "PER_SECOND")]
    sniffer_rate: Option<f64>,

    /// The sniffer's queue length.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 64,
        requires = "sniffer_rate"
    )]
    sniffer_queue: usize,

    /// Multiply every tracelet's parallel instances by this (the parallelism study).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    parallel_factor: f64,

    /// Multiply every delay's standard deviation by this (the delay-variation study).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0)]
    sd_factor: f64,

    /// Write packet captures instead of a text trace: one per host, `DIR/<node>.pcap`,
    /// with real Ethernet/IPv4/TCP (one connection per call, or see --connections; with
    /// --payload grpc one per pair of hosts, a stream per call) and `DIR/truth.tsv`, the
    /// path instance of every call by its capture call id. A text trace is still
    /// written when -o is given.
    #[arg(long, value_name = "DIR")]
    pcap: Option<PathBuf>,

    /// What the calls in captures carry.
    #[arg(long, value_enum, default_value_t = PayloadArg::Http, requires = "pcap")]
    payload: PayloadArg,

    /// Write pcapng instead of pcap.
    #[arg(long, requires = "pcap")]
    pcapng: bool,

    /// Which connection each HTTP or ONC RPC call in captures travels on.
    #[arg(long, value_enum, default_value_t = ConnectionsArg::PerCall, requires = "pcap")]
    connections: ConnectionsArg,

    /// Each HTTP or gRPC call in captures carries its path instance's request id in
    /// this header, as a system that propagates one does (ONC RPC calls carry none).
    #[arg(long, value_enum, value_name = "HEADER", requires = "pcap")]
    ids: Option<IdsArg>,

    /// The share of path instances whose calls carry an id (with --ids).
    #[arg(long, value_name = "SHARE", default_value_t = 1.0, requires = "ids", value_parser = share)]
    id_share: f64,

    /// Do not print the summary on stderr.
    #[arg(long, short)]
    quiet: bool,
}

fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(share) if (0.0..=1.0).contains(&share) => Ok(share),
        _ => Err(format!("`{text}` is not a share between 0 and 1")),
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum IdsArg {
    /// W3C trace context: traceparent: 00-<trace id>-<span id>-01.
    Traceparent,
    /// X-Request-ID: <tracelet>-<instance>.
    XRequestId,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ConnectionsArg {
    /// A new connection per call.
    PerCall,
    /// Each host serves a call on its first free worker, whose calls out go on
    /// keep-alive connections of its own: a request's calls follow its worker (at a host
    /// with a [hosts] pool, the pool's worker that took the request).
    WorkerPool,
    /// A host's calls out take the first free keep-alive connection to their callee,
    /// whatever request they serve.
    SharedPool,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum PayloadArg {
    /// HTTP/1.1 on port 80.
    Http,
    /// ONC RPC (record marking) on port 111.
    OncRpc,
    /// gRPC over HTTP/2 on port 50051: one connection per pair of hosts, every call a
    /// stream, so that concurrent calls multiplex.
    Grpc,
}

fn duration(text: &str) -> Result<Nanos, String> {
    parse_duration(text).map_err(|e| format!("`{text}`: {e}"))
}

fn seconds(text: &str) -> Result<Nanos, String> {
    parse_seconds(text.as_bytes()).map_err(|e| format!("`{text}`: {e}"))
}

/// A bad config or flag value: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Usage(String);

fn main() -> ExitCode {
    blackbox::exit::finish("maketrace", run(), |cause| {
        cause.is::<Usage>() || cause.is::<config::ConfigError>()
    })
}

fn run() -> Result<()> {
    let cli = Cli::parse();
    let text = std::fs::read_to_string(&cli.config)
        .with_context(|| format!("cannot read {}", cli.config.display()))?;
    let mut model = config::parse(&text).with_context(|| format!("{}", cli.config.display()))?;
    if !(cli.parallel_factor > 0.0 && cli.sd_factor >= 0.0) {
        return Err(Usage(
            "--parallel-factor must be positive and --sd-factor not negative".into(),
        )
        .into());
    }
    model.scale_parallel(cli.parallel_factor);
    model.scale_sd(cli.sd_factor);
    if !(0.0..1.0).contains(&cli.drop_rate) {
        return Err(Usage(format!(
            "--drop-rate {} is not a probability below 1",
            cli.drop_rate
        ))
        .into());
    }
    if cli.resolution <= 0 {
        return Err(Usage("--resolution must be positive".into()).into());
    }
    let network = match &cli.network_delay {
        None => None,
        Some(text) => {
            Some(config::parse_delay(text).map_err(|e| Usage(format!("--network-delay: {e}")))?)
        }
    };
    let sniffer = match cli.sniffer_rate {
        Some(rate) if rate > 0.0 && cli.sniffer_queue > 0 => Some(loss::Sniffer {
            rate,
            queue: cli.sniffer_queue,
        }),
        Some(_) => {
            return Err(Usage("--sniffer-rate and --sniffer-queue must be positive".into()).into())
        }
        None => None,
    };
    let stop = match (cli.duration, cli.messages) {
        (_, Some(n)) => generate::Stop::Messages(n),
        (Some(d), None) => generate::Stop::Duration(d),
        (None, None) => generate::Stop::Duration(60_000_000_000),
    };
    let options = generate::Options {
        start: cli.start,
        stop,
        network,
        resolution: cli.resolution,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(cli.seed);
    let mut trace = generate::generate(&model, &options, &mut rng);
    let observations = trace.lines.len();
    let dropped = loss::apply(&mut trace.lines, cli.drop_rate, sniffer, &mut rng);
    if !cli.quiet {
        let lost = dropped.random + dropped.sniffer;
        eprintln!(
            "maketrace: {} instances of {} tracelet{}, {} messages, {} observations; dropped {} ({:.2}%): {} at random, {} by the sniffer queue",
            trace.instances,
            model.tracelets.len(),
            if model.tracelets.len() == 1 { "" } else { "s" },
            trace.messages,
            observations,
            lost,
            100.0 * lost as f64 / observations.max(1) as f64,
            dropped.random,
            dropped.sniffer
        );
        for pool in &trace.pools {
            eprintln!(
                "maketrace: {} ({} worker{}): {} calls took a worker, {} ({:.1}%) waited for one; wait mean {}, p99 {}, max {}",
                pool.host,
                pool.workers,
                if pool.workers == 1 { "" } else { "s" },
                pool.requests,
                pool.waited,
                100.0 * pool.waited as f64 / pool.requests.max(1) as f64,
                human_duration(pool.mean_wait),
                human_duration(pool.p99_wait as f64),
                human_duration(pool.max_wait as f64)
            );
        }
    }
    if let Some(dir) = &cli.pcap {
        let payload = match cli.payload {
            PayloadArg::Http => maketrace::capture::Payload::Http,
            PayloadArg::OncRpc => maketrace::capture::Payload::OncRpc,
            PayloadArg::Grpc => maketrace::capture::Payload::Grpc,
        };
        let container = if cli.pcapng {
            maketrace::capture::Container::PcapNg
        } else {
            maketrace::capture::Container::Pcap
        };
        let connections = match cli.connections {
            ConnectionsArg::PerCall => maketrace::capture::Connections::PerCall,
            ConnectionsArg::WorkerPool => maketrace::capture::Connections::WorkerPool,
            ConnectionsArg::SharedPool => maketrace::capture::Connections::SharedPool,
        };
        let ids = cli.ids.map(|header| maketrace::capture::Ids {
            header: match header {
                IdsArg::Traceparent => maketrace::capture::IdHeader::TraceParent,
                IdsArg::XRequestId => maketrace::capture::IdHeader::RequestId,
            },
            share: cli.id_share,
        });
        let servers = maketrace::capture::Servers { connections, ids };
        let written =
            maketrace::capture::write_with(&trace, dir, payload, container, None, servers)
                .with_context(|| format!("writing captures to {}", dir.display()))?;
        if !cli.quiet {
            eprintln!(
                "maketrace: {} captures in {}: {} packets, {} calls{}",
                written.files.len(),
                dir.display(),
                written.packets,
                written.calls,
                if written.free_messages_left_out > 0 {
                    format!(
                        "; {} free-form messages left out (captures carry calls only)",
                        written.free_messages_left_out
                    )
                } else {
                    String::new()
                }
            );
        }
        if cli.output.is_none() {
            return Ok(());
        }
    }
    match &cli.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = BufWriter::new(file);
            maketrace::write_text(&trace, &mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", path.display()))
        }
        None => {
            let mut out = BufWriter::new(io::stdout().lock());
            maketrace::write_text(&trace, &mut out)?;
            out.flush()?;
            Ok(())
        }
    }
}
