//! Command-line flags and the thin glue from flags to library calls.

use anyhow::{Context, Result};
use blackbox::align::{self, fit::Method};
use blackbox::capture::{self, protocol::ProtocolName, write::Container, CaptureOptions, NodeBy};
use blackbox::convolution::{self, ConvolveOptions};
use blackbox::eval::{calls, paths};
use blackbox::nesting::explain::{self, CallQuery};
use blackbox::nesting::{self, call_pairs::CallPair, parents::Penalties, Algorithm, NestOptions};
use blackbox::report::{
    self, assignments::Assignments, json::Json, otlp::Otlp, table::Table, NestReport, Ranking,
    Render, SortKey,
};
use blackbox::trace::{text, time, Nanos, Trace, TraceBuilder};
use clap::{Args, Parser, Subcommand};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Infer the causal paths of requests through a distributed system of black boxes from
/// message traces, and see which node on which path adds the latency.
#[derive(Parser)]
#[command(
    name = "blackbox",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Infer call-path patterns from RPC traces with the nesting algorithm (paper §5.1).
    ///
    /// Reads packet captures (pcap/pcapng, one per host: messages are cut from their TCP
    /// and UDP flows) or text traces (`<timestamp> <op> <sender> <receiver> <call-id>
    /// [<truth>]`, one message end per line); several files are merged into one trace.
    /// It pairs calls with returns, scores
    /// every call's possible parents against the delays seen in the whole trace, and
    /// prints the path patterns ranked, with their latencies. A summary of what was read
    /// and skipped goes to stderr.
    Nest(NestArgs),
    /// Score the nesting algorithm against ground truth (paper §7.5.1).
    ///
    /// With the trace's truth column (a path-instance id on every message, as maketrace
    /// writes): false positives and negatives by patterns, instances and messages, the
    /// top-N true patterns missing from the inferred top N, and the latency error of
    /// correctly inferred patterns. With --truth FILE (true parents in the assignments
    /// format): the fraction of calls given their true parent and of requests whose
    /// whole tree is right.
    Eval(EvalArgs),
    /// Infer message paths with the convolution algorithm (paper §5.2), for any messages.
    ///
    /// For each root, follows the messages a node sends after it receives: arrivals and
    /// departures become signals (√count per quantum), and the delays at which their
    /// cross-correlation spikes are the node's causal delays. Calls and returns count as
    /// plain messages, so RPC traces work too. Reads captures or text traces, as nest
    /// does. Prints the paths, most followed first, with each node's delays.
    Convolve(ConvolveArgs),
    /// Turn captures or other records into a text trace.
    ///
    /// Packet captures (one per host) become their messages, each end at its host's
    /// time, with the summary of what was read and skipped on stderr. With --mbox, every
    /// Received header of every email becomes one hop, from the host after `from`
    /// to the host after `by`, at the header's date (the receiving host's clock), with
    /// the email's number as the truth column. Headers with unreadable dates, generic
    /// hosts (localhost, unknown) or a missing host are skipped and counted on stderr.
    /// The trace suits `blackbox convolve`.
    Records(RecordsArgs),
    /// Align the clocks of per-host captures onto one reference host's.
    ///
    /// The same TCP segment in the sender's and the receiver's capture is one sample of
    /// the receiver's clock offset plus a delay that is never negative. Per pair of hosts
    /// a line offset(t) = offset + drift·t is fitted (convex hulls by default: guaranteed
    /// bounds, unmoved by queueing in one direction); the reference is the host with the
    /// smallest sum of shortest-path uncertainties to the others, and every host is
    /// turned into its clock along its shortest path. Prints per host its offset and
    /// drift against the reference, the bounds, quality and samples. nest, eval,
    /// convolve and records do the same on several captures unless --align off.
    Align(AlignArgs),
}

#[derive(Args)]
struct AlignArgs {
    /// Packet captures (pcap/pcapng), one per host.
    #[arg(required = true, value_name = "CAPTURE")]
    files: Vec<PathBuf>,

    #[command(flatten)]
    capture: CaptureArgs,

    /// Write the alignment as JSON to FILE (`-` for stdout, instead of the table).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Write every capture, its times in the reference's clock, to DIR (same file
    /// names; nanosecond pcap or pcapng, as read).
    #[arg(long, value_name = "DIR")]
    write: Option<PathBuf>,
}

#[derive(Args)]
struct RecordsArgs {
    /// Packet captures (pcap/pcapng, one per host) or text traces.
    #[arg(
        value_name = "FILE",
        required_unless_present = "mbox",
        conflicts_with = "mbox"
    )]
    files: Vec<PathBuf>,

    /// An mbox file instead: its Received headers become hops.
    #[arg(long, value_name = "FILE")]
    mbox: Option<PathBuf>,

    /// Do not print the summary of what was read and skipped.
    #[arg(long, short)]
    quiet: bool,

    #[command(flatten)]
    capture: CaptureArgs,

    /// Write the trace here instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct ConvolveArgs {
    /// Text traces or packet captures (pcap/pcapng, one per host; told apart by their
    /// first bytes), merged into one trace.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,

    #[command(flatten)]
    capture: CaptureArgs,

    /// Time quantum of the signals (seconds, or with a unit).
    #[arg(long, value_name = "DURATION", default_value = "0.01", value_parser = duration)]
    quantum: Nanos,

    /// Longest causal delay to look for.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    max_delay: Nanos,

    /// Start paths here (repeatable); default: the nodes that send before they receive.
    #[arg(long, value_name = "NODE")]
    root: Vec<String>,

    /// A message counts as caused at delay d when it leaves d ± this after an arrival
    /// (default: one quantum).
    #[arg(long, value_name = "DURATION", value_parser = duration)]
    variance: Option<Nanos>,

    /// Drop edges with fewer messages than this, as noise.
    #[arg(long, value_name = "N", default_value_t = 10)]
    min_count: u64,

    /// A spike stands this many standard deviations above the mean.
    #[arg(long, value_name = "N", default_value_t = 4.0)]
    spike_sigma: f64,

    /// Spikes are separated by a point under this many standard deviations.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    gap_sigma: f64,

    /// Longest path, in hops; longer ones stop and are counted.
    #[arg(long, value_name = "N", default_value_t = 24)]
    max_depth: usize,

    /// Most times one hop may occur on a path (a cycle of coincidences stops there).
    #[arg(long, value_name = "N", default_value_t = 3)]
    max_repeats: usize,

    /// Stop the search after this many correlations, counting the paths cut short.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    max_correlations: u64,

    /// Show only the first N paths.
    #[arg(long, value_name = "N")]
    top: Option<usize>,

    /// Write one Graphviz file per shown path (path-001.dot, ...) into DIR, in the
    /// paper's Figure 9 style.
    #[arg(long, value_name = "DIR")]
    dot: Option<PathBuf>,

    /// Write the path graphs into DIR as dot files and as SVG pictures drawn by
    /// Graphviz's `dot` (when it is not installed, the dot files only, and a note).
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,

    /// Write the paths and counts as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Write a self-contained HTML report: the path table, each path drawn with the
    /// delay spikes at each node, what was read and skipped, and the clock alignment.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,

    /// Do not print the summary of what was read and skipped.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args)]
struct EvalArgs {
    /// Text traces or packet captures (pcap/pcapng, one per host; told apart by their
    /// first bytes), merged into one trace.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,

    #[command(flatten)]
    capture: CaptureArgs,

    /// Score call by call against true parents in the assignments format instead of the
    /// truth column.
    #[arg(long, value_name = "FILE")]
    truth: Option<PathBuf>,

    /// Compare the top N patterns for N = 1..K.
    #[arg(long, value_name = "K", default_value_t = 20)]
    top_n: usize,

    /// Also write the scores as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Start the joint search from the true parents instead of the greedy answer (the
    /// model is then learned from them). What it still gets wrong, the model itself
    /// prefers wrong: a bound on what a better search could reach, not a result.
    #[arg(long)]
    start_from_truth: bool,

    /// Do not print the summary of what was read and skipped.
    #[arg(long, short)]
    quiet: bool,

    #[command(flatten)]
    algorithm: AlgorithmArgs,
}

#[derive(Args)]
struct NestArgs {
    /// Text traces or packet captures (pcap/pcapng, one per host; told apart by their
    /// first bytes), merged into one trace.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,

    #[command(flatten)]
    capture: CaptureArgs,

    /// Show only the first N patterns.
    #[arg(long, value_name = "N")]
    top: Option<usize>,

    /// Order of the patterns, most first.
    #[arg(long, value_enum, default_value_t = SortKey::Count)]
    sort: SortKey,

    /// Hide patterns seen fewer than N times.
    #[arg(long, value_name = "N", default_value_t = 1)]
    min_count: u64,

    /// Write one Graphviz file per shown pattern (pattern-001.dot, ...) into DIR, in the
    /// paper's Figure 8 style.
    #[arg(long, value_name = "DIR")]
    dot: Option<PathBuf>,

    /// Write the pattern graphs into DIR as dot files and as SVG pictures drawn by
    /// Graphviz's `dot` (when it is not installed, the dot files only, and a note).
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,

    /// Write the patterns, latency distributions and input counts as JSON.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Write the parent chosen for every call (tab separated: sender receiver call_id
    /// call_time parent_sender parent_receiver parent_call_id, `-` for roots; then the
    /// confidence of the choice, 0 to 1).
    #[arg(long, value_name = "FILE")]
    assignments: Option<PathBuf>,

    /// Write a self-contained HTML report: the sortable pattern table, and for each
    /// pattern its call tree, the node that adds the most latency, a timeline and
    /// latency histograms; then what was read and skipped, and the clock alignment.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,

    /// Write every inferred path instance as an OpenTelemetry trace in OTLP/JSON (one
    /// span per call, on the service it entered, parented to the call it was nested in),
    /// for Jaeger, Grafana Tempo or an OpenTelemetry Collector to import.
    #[arg(long, value_name = "FILE")]
    otlp: Option<PathBuf>,

    /// Instead of the pattern table, show why CALL got its parent: its candidate
    /// parents with each one's scoreboard value, penalties and final score. CALL is a
    /// call id (every call carrying it), or "SENDER RECEIVER TIME" in one argument (the
    /// call between those nodes sent nearest to TIME, in seconds).
    #[arg(long, value_name = "CALL")]
    explain: Option<String>,

    /// Do not print the summary of what was read and skipped.
    #[arg(long, short)]
    quiet: bool,

    #[command(flatten)]
    algorithm: AlgorithmArgs,
}

#[derive(Args)]
#[command(next_help_heading = "Captures (pcap/pcapng)")]
struct CaptureArgs {
    /// Read connections to server PORT as protocol NAME whatever their content
    /// (repeatable). NAME: tcp (request/response by turns), http, dns, onc-rpc, redis,
    /// postgres, udp (request/response by datagrams), stream (every segment a free-form
    /// message). Otherwise the port suggests a protocol, the client's first bytes
    /// confirm it, and anything unrecognised is read by turns.
    #[arg(long = "protocol", value_name = "PORT=NAME", value_parser = capture::parse_protocol_override)]
    protocols: Vec<(u16, ProtocolName)>,

    /// Name the nodes: a file of `address name` lines. Without it a capture's own
    /// address is named after its host, other addresses stay numbers.
    #[arg(long, value_name = "FILE")]
    names: Option<PathBuf>,

    /// The host a capture was taken on (repeatable); default: the file name without
    /// its extension.
    #[arg(long = "host", value_name = "NAME=FILE")]
    hosts: Vec<String>,

    /// What a node is: a host, or a service (host:port; the calls a host makes come
    /// from its one service when it serves on a single port).
    #[arg(long, value_enum, default_value_t = NodeByArg::Host)]
    node_by: NodeByArg,

    /// Ground truth for captures: `call-id instance` lines (the `truth.tsv` that
    /// `maketrace --pcap` writes), read as the trace's truth column for `eval`.
    #[arg(long, value_name = "FILE")]
    truth_ids: Option<PathBuf>,

    /// Align the hosts' clocks from the TCP segments two captures share: hull (convex
    /// hulls, guaranteed bounds), regression (the offline-trace-sync paper's method) or
    /// off (each host keeps its own clock). Only with two or more captures.
    #[arg(long, value_enum, value_name = "METHOD", default_value_t = AlignArg::Hull)]
    align: AlignArg,

    /// Where the graph of hosts has loops, solve every host's correction over all pairs
    /// together by weighted least squares (within its route's bounds) instead of along
    /// its shortest path: better when the pairs' errors are independent, worse when
    /// queueing biases them all one way.
    #[arg(long)]
    least_squares: bool,

    /// After alignment, move receives that still come before their send (plus
    /// --min-latency) forward with the controlled logical clock: the events after them
    /// follow with a fading correction, those shortly before are smoothed toward the
    /// jump, and no send passes its receive. Also for text traces with both ends.
    #[arg(long)]
    repair: bool,

    /// The shortest time a message may take, for --repair.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration, requires = "repair")]
    min_latency: Nanos,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum AlignArg {
    Hull,
    Regression,
    Off,
}

impl AlignArg {
    fn method(self) -> Option<Method> {
        match self {
            AlignArg::Hull => Some(Method::Hull),
            AlignArg::Regression => Some(Method::Regression),
            AlignArg::Off => None,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum NodeByArg {
    Host,
    Service,
}

impl CaptureArgs {
    fn options(&self) -> Result<CaptureOptions> {
        let mut options = CaptureOptions {
            node_by: match self.node_by {
                NodeByArg::Host => NodeBy::Host,
                NodeByArg::Service => NodeBy::Service,
            },
            ..CaptureOptions::default()
        };
        options
            .protocols
            .by_port
            .extend(self.protocols.iter().copied());
        if let Some(path) = &self.truth_ids {
            options.truth = capture::read_truth_ids(path)?;
        }
        if let Some(path) = &self.names {
            options.names = capture::read_names(path)?;
        }
        for host in &self.hosts {
            let (name, file) = host
                .split_once('=')
                .with_context(|| format!("--host {host}: expected NAME=FILE"))?;
            options.hosts.insert(PathBuf::from(file), name.to_string());
        }
        Ok(options)
    }
}

#[derive(Args)]
#[command(next_help_heading = "Algorithm (paper defaults)")]
struct AlgorithmArgs {
    /// Parent choice: `joint` improves the paper's greedy answer per node under a model
    /// learned from the trace of what each call does while it is open (when it calls out
    /// after its arrival, its previous call leaving or returning, when it answers, how
    /// many calls of each kind it makes in which order), and gives a call that no call
    /// encloses, where calls of its kind nearly always are enclosed, one of the calls open
    /// when it left (a late timestamp; counted as "late returns"); `paper` is the paper's
    /// greedy choice alone, for reproducing its results.
    #[arg(long, value_enum, default_value_t = Algorithm::Joint)]
    algorithm: Algorithm,

    /// Loosen the test "parent encloses child" by this much, to tolerate clock skew
    /// between hosts when messages were seen at one end only (e.g. 30ms; paper §7.5.6).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration)]
    skew_window: Nanos,

    /// Let a call out of a node have a parent that did not wait for it: a call into the
    /// node that was open when it left and answered before it returned (fire and forget),
    /// or that answered at most DURATION before it left (write-back caches, queued work;
    /// paper §5.3.1). Such a parent is kept only where the node's own sequences (how
    /// often it answers without waiting, how long after an answer it calls on, to whom)
    /// make it likelier than any other candidate by odds of 100 to 1; the others stay
    /// roots, counted in the summary. With `eval`, the truth then gives such a call its
    /// own path instance's call. Off (0) by default.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration)]
    async_window: Nanos,

    /// Smooth each delay histogram with a Gaussian of this many bins (0 = off); helps
    /// with skewed clocks.
    #[arg(long, value_name = "BINS", default_value_t = 0.0)]
    smooth: f64,

    /// Overlapping-child penalty exponent x: a parent's score is multiplied by (1+n)^-x
    /// where n of its children already overlap the call in time.
    #[arg(long, value_name = "X", default_value_t = 2.0)]
    overlap_penalty: f64,

    /// Same-child penalty exponent y: (1+n)^-y for n children already calling the same node.
    #[arg(long, value_name = "Y", default_value_t = 0.0)]
    same_penalty: f64,

    /// Generic-child penalty exponent z: (1+n)^-z for n children already assigned.
    #[arg(long, value_name = "Z", default_value_t = 0.0)]
    generic_penalty: f64,

    /// Ratio between successive delay bins of the scoreboard.
    #[arg(long, value_name = "RATIO", default_value_t = 1.05)]
    bin_base: f64,

    /// Delays below this share the first bin.
    #[arg(long, value_name = "DURATION", default_value = "1us", value_parser = duration)]
    bin_floor: Nanos,

    /// Delays above this share the last bin.
    #[arg(long, value_name = "DURATION", default_value = "7200s", value_parser = duration)]
    bin_ceiling: Nanos,
}

fn duration(text: &str) -> Result<Nanos, String> {
    time::parse_duration(text).map_err(|e| format!("`{text}`: {e}"))
}

/// Parses the command line and runs the command.
pub fn run() -> Result<()> {
    match Cli::parse().command {
        Command::Nest(args) => nest(args),
        Command::Eval(args) => eval(args),
        Command::Convolve(args) => convolve(args),
        Command::Records(args) => records(args),
        Command::Align(args) => align_command(args),
    }
}

fn align_command(args: AlignArgs) -> Result<()> {
    if let Some(text) = args.files.iter().find(|p| !capture::is_capture(p)) {
        return Err(Usage(format!(
            "{} is not a pcap or pcapng capture: align reads captures only",
            text.display()
        ))
        .into());
    }
    let Some(method) = args.capture.align.method() else {
        return Err(
            Usage("--align off leaves nothing to do: choose hull or regression".into()).into(),
        );
    };
    if args.capture.repair {
        return Err(Usage(
            "--repair mends the merged trace: use it with nest, eval, convolve or records".into(),
        )
        .into());
    }
    let mut options = args.capture.options()?;
    options.clock_stamps = true;
    let captures = capture::read_captures(&args.files, &options)?;
    let alignment = align::align_with(&captures, method, args.capture.least_squares);
    match args.json.as_deref() {
        Some(path) if path == Path::new("-") => write_out(None, |w| write_json(&alignment, w))?,
        Some(path) => {
            write_out(Some(path), |w| write_json(&alignment, w))?;
            write_out(None, |w| report::alignment::write_alignment(&alignment, w))?;
        }
        None => write_out(None, |w| report::alignment::write_alignment(&alignment, w))?,
    }
    if let Some(dir) = &args.write {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (index, host) in captures.iter().enumerate() {
            let name = host.path.file_name().map(PathBuf::from).unwrap_or_else(|| {
                PathBuf::from(format!(
                    "{}.{}",
                    host.host,
                    Container::of(&host.path).extension()
                ))
            });
            let output = dir.join(name);
            if output.canonicalize().ok() == host.path.canonicalize().ok() {
                return Err(Usage(format!(
                    "--write {} would overwrite {}: choose another directory",
                    dir.display(),
                    host.path.display()
                ))
                .into());
            }
            let written = capture::write::rewrite_times(
                &host.path,
                &output,
                Container::of(&host.path),
                |_, t| alignment.to_reference(index, t),
            )?;
            eprintln!("wrote {} ({} packets)", output.display(), written.frames);
        }
    }
    Ok(())
}

/// A request that cannot be carried out as asked (exit code 2, like bad input).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(String);

fn write_json(value: &impl serde::Serialize, w: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value)?;
    writeln!(w)
}

fn records(args: RecordsArgs) -> Result<()> {
    let Some(mbox) = &args.mbox else {
        let Loaded { trace, .. } = load(&args.files, &args.capture, args.quiet)?;
        return write_out(args.output.as_deref(), |mut w| text::write(&trace, &mut w));
    };
    let file = File::open(mbox).map_err(|source| text::TraceError::Io {
        path: mbox.clone(),
        source,
    })?;
    let mut builder = TraceBuilder::new();
    let stats = blackbox::trace::mbox::read(
        mbox,
        io::BufReader::with_capacity(1 << 20, file),
        &mut builder,
    )?;
    eprintln!(
        "{}: {} emails, {} Received headers -> {} hops; skipped {} with unreadable dates, {} naming a generic host, {} missing a host",
        mbox.display(),
        stats.emails,
        stats.received_headers,
        stats.hops,
        stats.unparseable_date,
        stats.generic_host,
        stats.missing_host
    );
    let trace = builder.finish();
    write_out(args.output.as_deref(), |mut w| text::write(&trace, &mut w))
}

fn convolve(args: ConvolveArgs) -> Result<()> {
    let options = ConvolveOptions {
        quantum: args.quantum,
        max_delay: args.max_delay,
        spike_sigma: args.spike_sigma,
        gap_sigma: args.gap_sigma,
        variance: args.variance,
        min_count: args.min_count,
        max_depth: args.max_depth,
        max_repeats: args.max_repeats,
        max_correlations: args.max_correlations,
        roots: args.root.clone(),
    };
    let loaded = load(&args.files, &args.capture, args.quiet)?;
    let trace = &loaded.trace;
    let result = convolution::convolve(trace, &options).with_context(|| describe(&args.files))?;
    let mut summary = Vec::new();
    report::paths::write_summary(trace, &result, &mut summary)?;
    if !args.quiet {
        io::stderr().write_all(&summary)?;
    }
    if let Some(path) = &args.html {
        let notes = input_notes(&args.files, &loaded, summary);
        write_out(Some(path), |w| {
            report::html::write_convolution(trace, &result, args.top, &notes, w)
        })?;
    }
    if let Some(path) = &args.json {
        write_out(Some(path), |w| {
            report::paths::write_json(trace, &result, &options, w)
        })?;
    }
    if let Some(dir) = &args.dot {
        report::paths::write_dot_dir(trace, &result, args.top, dir)
            .with_context(|| format!("writing dot files to {}", dir.display()))?;
    }
    if let Some(dir) = &args.svg {
        let dots = report::paths::write_dot_dir(trace, &result, args.top, dir)
            .with_context(|| format!("writing dot files to {}", dir.display()))?;
        report::svg::draw_and_tell(&dots, dir)
            .with_context(|| format!("drawing SVG pictures in {}", dir.display()))?;
    }
    write_out(None, |w| {
        report::paths::write_table(trace, &result, args.top, w)
    })
}

fn eval(args: EvalArgs) -> Result<()> {
    let options = args.algorithm.options();
    let Loaded { trace, .. } = load(&args.files, &args.capture, args.quiet)?;
    let truth = match &args.truth {
        Some(path) => {
            let file =
                File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            EvalTruth::Parents(calls::read_truth(path, io::BufReader::new(file))?)
        }
        None => EvalTruth::Column(
            paths::ground_truth(&trace, &options).with_context(|| describe(&args.files))?,
        ),
    };
    let nesting = if args.start_from_truth {
        let start = |pairs: &[CallPair]| match &truth {
            EvalTruth::Parents(parents) => calls::true_parent_indexes(&trace, pairs, parents),
            EvalTruth::Column(truth) => truth.parent.clone(),
        };
        nesting::nest_from(&trace, &options, &start)
    } else {
        nesting::nest(&trace, &options)
    }
    .with_context(|| describe(&args.files))?;
    if !args.quiet {
        report::summary::write(
            &trace.stats,
            &nesting.stats,
            nesting.patterns.len(),
            &mut io::stderr().lock(),
        )?;
    }
    let start = if args.start_from_truth {
        "true parents"
    } else {
        "greedy"
    };
    let json = match &truth {
        EvalTruth::Parents(parents) => {
            let scores = calls::evaluate(&trace, &nesting, parents);
            write_out(None, |w| {
                write_start(args.start_from_truth, w)?;
                report::evaluation::write_calls(&scores, w)
            })?;
            serde_json::json!({ "algorithm": "nesting", "start": start, "truth": args.truth, "calls": scores })
        }
        EvalTruth::Column(truth) => {
            let scores = paths::evaluate(&trace, &nesting, truth, args.top_n);
            write_out(None, |w| {
                write_start(args.start_from_truth, w)?;
                report::evaluation::write_paths(&scores, w)
            })?;
            serde_json::json!({ "algorithm": "nesting", "start": start, "truth": "truth column", "paths": scores })
        }
    };
    if let Some(path) = &args.json {
        write_out(Some(path), |w| {
            serde_json::to_writer_pretty(&mut *w, &json)?;
            writeln!(w)
        })?;
    }
    Ok(())
}

/// What `eval` scores against.
enum EvalTruth {
    /// A file of true parents (`--truth`).
    Parents(calls::TrueParents),
    /// The trace's truth column, as the nesting it implies.
    Column(nesting::Nesting),
}

/// Says, above the scores, that the search started from the truth.
fn write_start(from_truth: bool, w: &mut dyn Write) -> io::Result<()> {
    if from_truth {
        writeln!(
            w,
            "search started from the true parents: a bound on the search, not a result"
        )?;
    }
    Ok(())
}

impl AlgorithmArgs {
    fn options(&self) -> NestOptions {
        let a = self;
        NestOptions {
            algorithm: a.algorithm,
            skew_window: a.skew_window,
            async_window: a.async_window,
            bin_base: a.bin_base,
            bin_floor: a.bin_floor,
            bin_ceiling: a.bin_ceiling,
            smoothing: a.smooth,
            penalties: Penalties {
                overlap: a.overlap_penalty,
                same_callee: a.same_penalty,
                any_child: a.generic_penalty,
            },
            same_truth_only: false,
        }
    }
}

fn nest(args: NestArgs) -> Result<()> {
    let options = args.algorithm.options();
    let query = args
        .explain
        .as_deref()
        .map(CallQuery::parse)
        .transpose()
        .map_err(|e| Usage(e.to_string()))?;
    let loaded = load(&args.files, &args.capture, args.quiet)?;
    let trace = &loaded.trace;
    let nesting = nesting::nest(trace, &options).with_context(|| describe(&args.files))?;
    let ranking = Ranking {
        sort: args.sort,
        top: args.top,
        min_count: args.min_count,
    };
    let report = NestReport::new(trace, &nesting, &options, ranking);

    let mut summary = Vec::new();
    report::summary::write(
        &trace.stats,
        &nesting.stats,
        nesting.patterns.len(),
        &mut summary,
    )?;
    if !args.quiet {
        io::stderr().write_all(&summary)?;
    }
    if let Some(path) = &args.html {
        let notes = input_notes(&args.files, &loaded, summary);
        write_out(Some(path), |w| {
            report::html::write_nesting(&report, &notes, w)
        })?;
    }
    if let Some(path) = &args.json {
        write_out(Some(path), |w| Json.render(&report, w))?;
    }
    if let Some(path) = &args.assignments {
        write_out(Some(path), |w| Assignments.render(&report, w))?;
    }
    if let Some(path) = &args.otlp {
        write_out(Some(path), |w| Otlp.render(&report, w))?;
    }
    if let Some(dir) = &args.dot {
        report::dot::write_dir(&report, dir)
            .with_context(|| format!("writing dot files to {}", dir.display()))?;
    }
    if let Some(dir) = &args.svg {
        let dots = report::dot::write_dir(&report, dir)
            .with_context(|| format!("writing dot files to {}", dir.display()))?;
        report::svg::draw_and_tell(&dots, dir)
            .with_context(|| format!("drawing SVG pictures in {}", dir.display()))?;
    }
    match query {
        Some(query) => {
            let calls = explain::find_calls(trace, &nesting, &query)?;
            let explanations: Vec<_> = calls
                .iter()
                .map(|&call| explain::explain(trace, &nesting, &options, call))
                .collect();
            write_out(None, |w| {
                report::explanation::write(trace, &nesting, options.penalties, &explanations, w)
            })
        }
        None => write_out(None, |w| Table.render(&report, w)),
    }
}

/// What the HTML report says about the input: the files, the run summary and what
/// loading reported.
fn input_notes(files: &[PathBuf], loaded: &Loaded, summary: Vec<u8>) -> report::html::InputNotes {
    report::html::InputNotes {
        files: files.iter().map(|f| f.display().to_string()).collect(),
        summary: String::from_utf8_lossy(&summary).into_owned(),
        captures: loaded.captures.clone(),
        warnings: loaded.warnings.clone(),
        alignment: loaded.alignment.clone(),
    }
}

fn describe(files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    names.join(", ")
}

/// A merged trace and what reading it reported.
struct Loaded {
    trace: Trace,
    /// Per-capture summaries and the repair line, as printed on stderr.
    captures: String,
    /// Warnings, one per line, printed even with `--quiet`.
    warnings: String,
    /// The clock alignment table, when captures were aligned.
    alignment: Option<String>,
}

/// Reads and merges text traces and captures (told apart by their magic numbers),
/// printing each capture's summary on stderr unless `quiet` (warnings always).
fn load(files: &[PathBuf], capture_args: &CaptureArgs, quiet: bool) -> Result<Loaded> {
    let mut loaded = read_inputs(files, capture_args, quiet)?;
    let mut stderr = io::stderr().lock();
    stderr.write_all(loaded.warnings.as_bytes())?;
    if !quiet {
        stderr.write_all(loaded.captures.as_bytes())?;
        if let Some(table) = &loaded.alignment {
            stderr.write_all(table.as_bytes())?;
        }
    }
    if capture_args.repair {
        let options = align::repair::RepairOptions {
            min_latency: capture_args.min_latency,
            ..align::repair::RepairOptions::default()
        };
        let report = align::repair::repair(&mut loaded.trace, &options);
        let line = format!(
            "causality repair: {} of {} messages seen at both ends arrived before they left (+{}); after repair {}; {} event times moved, by {} at most, {} on average\n",
            report.violations_before,
            report.messages,
            time::human_duration(capture_args.min_latency as f64),
            report.violations_after,
            report.moved,
            time::human_duration(report.largest_move_ns as f64),
            time::human_duration(report.mean_move_ns),
        );
        if !quiet {
            stderr.write_all(line.as_bytes())?;
        }
        loaded.captures.push_str(&line);
    }
    Ok(loaded)
}

/// [`load`] without printing or repairing.
fn read_inputs(files: &[PathBuf], capture_args: &CaptureArgs, quiet: bool) -> Result<Loaded> {
    use std::fmt::Write as _;
    let (captures, texts): (Vec<PathBuf>, Vec<PathBuf>) = files
        .iter()
        .cloned()
        .partition(|path| capture::is_capture(path));
    let mut builder = TraceBuilder::new();
    // Progress bars appear only on a terminal, and not with --quiet.
    let progress = blackbox::progress::Progress::reading("reading text traces", &texts, !quiet);
    text::read_files_showing(&texts, &mut builder, &progress)?;
    progress.finish();
    let mut summaries = String::new();
    let mut warnings_text = String::new();
    let mut table = None;
    if !captures.is_empty() {
        let mut options = capture_args.options()?;
        options.progress = !quiet;
        let method = capture_args.align.method().filter(|_| captures.len() > 1);
        options.clock_stamps = method.is_some();
        let read = capture::read_captures(&captures, &options)?;
        let alignment =
            method.map(|method| align::align_with(&read, method, capture_args.least_squares));
        match &alignment {
            Some(alignment) => capture::add_to_trace(
                &read,
                &options,
                |host, t| alignment.to_reference(host, t),
                &mut builder,
            ),
            None => capture::add_to_trace(&read, &options, capture::same_clock, &mut builder),
        }
        let mut warnings = Vec::new();
        for host in &read {
            if let Some(stopped) = &host.stopped {
                warnings.push(format!(
                    "warning: {}: packet {} at byte {}: {}; the {} packets before it are used",
                    host.path.display(),
                    stopped.packet,
                    stopped.offset,
                    stopped.reason,
                    host.stats.packets
                ));
            }
        }
        for host in &read {
            let own: Vec<String> = host.local.iter().map(|a| a.to_string()).collect();
            // Writing to a String cannot fail.
            let _ = writeln!(
                summaries,
                "{} (host {}, own address {}): {}",
                host.path.display(),
                host.host,
                if own.is_empty() {
                    "unknown".to_string()
                } else {
                    own.join(", ")
                },
                host.stats
            );
        }
        if let Some(alignment) = &alignment {
            let mut text = Vec::new();
            report::alignment::write_alignment(alignment, &mut text)?;
            table = Some(String::from_utf8_lossy(&text).into_owned());
            let unaligned = alignment.unaligned();
            if !unaligned.is_empty() {
                warnings.push(format!(
                    "warning: no TCP segment links {} to the other captures; their clocks stay their own",
                    unaligned.join(", ")
                ));
            }
            for check in alignment.loops.iter().filter(|c| c.disagrees) {
                warnings.push(format!(
                    "warning: the clock fits around {}–{} disagree by {}: one of them is wrong",
                    check.hosts.0,
                    check.hosts.1,
                    time::human_duration(check.residual_ns)
                ));
            }
        }
        for warning in warnings {
            let _ = writeln!(warnings_text, "{warning}");
        }
        let mut all = capture::stats::FileStats::default();
        for host in &read {
            all.add(&host.stats);
        }
        builder.stats_mut().capture = Some(all);
    }
    Ok(Loaded {
        trace: builder.finish(),
        captures: summaries,
        warnings: warnings_text,
        alignment: table,
    })
}

/// Writes through a buffer to `path`, or to stdout for `None`; errors name the file, and
/// a closed stdout stays an I/O error in the chain so that `main` can end quietly.
fn write_out(
    path: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    match path {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = BufWriter::new(file);
            write(&mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", path.display()))
        }
        None => {
            let mut out = BufWriter::new(io::stdout().lock());
            write(&mut out)?;
            out.flush()?;
            Ok(())
        }
    }
}
