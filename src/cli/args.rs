//! The command line as clap structs: the five commands and their flags, the groups of
//! flags they share (inputs, algorithm; how captures are read is [`super::reading`]'s),
//! and the CLI's own value enums mapped onto the library's options. Parsing only; running is [`super::commands`]'.

use anyhow::Result;
use blackbox::input::InputOptions;
use blackbox::nesting::{joint::Reweighing, Algorithm, NestOptions, Penalties};
use blackbox::report::SortKey;
use blackbox::trace::time;
use blackbox::trace::Nanos;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

pub(super) use super::reading::{CaptureArgs, NodeByArg};

/// The help heading of eval's convolution options.
const CONVOLUTION: &str = "Convolution (--convolve)";

/// What every command's help says of how it ends (`blackbox::exit`), before its examples.
macro_rules! exit_status {
    () => {
        "Exit status: 0 when done (or when a reader of its output, such as `head`, stopped \
reading); 2 when an input or the command line is at fault (a file that is missing, \
damaged or holds nothing to read, flags that cannot go together); 1 when writing an \
output or the machine failed (a file that cannot be created, a full disk, a lost \
process).

"
    };
}

/// Infer the causal paths of requests through a distributed system of black boxes from
/// packet captures (one per host) or message traces, and see which node on which path
/// adds the latency.
#[derive(Parser)]
#[command(
    name = "blackbox",
    version,
    propagate_version = true,
    max_term_width = 100,
    after_help = concat!(exit_status!(), "Examples:
  blackbox nest traces/shop/*.pcap*          the paths of a captured 4-tier shop
  blackbox nest traces/multitier.trace       the same from a text trace
  blackbox convolve traces/freeform.trace    free-form messages, by convolution
  blackbox nest --help                       every flag, with more examples")
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// Infer call-path patterns from RPC traces with the nesting algorithm (paper §5.1).
    ///
    /// Reads packet captures (pcap/pcapng, one per host: messages are cut from their TCP
    /// and UDP flows) or text traces (`<timestamp> <op> <sender> <receiver> <call-id>
    /// [<truth>]`, one message end per line); several files are merged into one trace.
    /// It pairs calls with returns, scores
    /// every call's possible parents against the delays seen in the whole trace, and
    /// prints the path patterns ranked, with their latencies and what adds the most to
    /// each: a node's own time, or (from captures) an edge's time in transit between the
    /// first and last byte of its messages, and why where TCP held them back. A summary
    /// of what was read and skipped goes to stderr.
    #[command(after_long_help = concat!(exit_status!(), "Examples:
  blackbox nest traces/shop/*.pcap*
  blackbox nest -q traces/shop/*.pcap* --html report.html --svg graphs/
  blackbox nest traces/k8s/*.pcap.gz --names traces/k8s/cluster.json
  blackbox nest -q traces/grpc/*.pcap --keep-messages g.trace && blackbox nest --workers 2 g.trace
"))]
    Nest(NestArgs),
    /// Score the nesting algorithm, or the convolution's paths, against ground truth (paper §7.5).
    ///
    /// With the trace's truth column (a path-instance id on every message, as maketrace
    /// writes): false positives and negatives by patterns, instances and messages, the
    /// top-N true patterns missing from the inferred top N, and the latency error of
    /// correctly inferred patterns. With --truth FILE (true parents in the assignments
    /// format): the fraction of calls given their true parent and of requests whose
    /// whole tree is right. With --convolve: the convolution algorithm's paths against
    /// the true chains of messages (with --mbox, of an mbox's emails).
    #[command(after_long_help = concat!(exit_status!(), "Examples:
  blackbox eval -q --algorithm paper --top-n 5 traces/multitier.trace
  blackbox eval -q traces/multitier.trace --json scores.json
  blackbox eval --convolve --min-paths 100 traces/freeform.trace
  blackbox eval --convolve --mbox --quantum 1s --max-delay 1h --min-paths 1 tests/data/sample.mbox
"),
        // convolve lists its finer knobs as advanced; here they are told apart from the
        // nesting's, with the rest of --convolve's.
        mut_arg("variance", |a| a.help_heading(CONVOLUTION)),
        mut_arg("spike_sigma", |a| a.help_heading(CONVOLUTION)),
        mut_arg("gap_sigma", |a| a.help_heading(CONVOLUTION)),
        mut_arg("max_depth", |a| a.help_heading(CONVOLUTION)),
        mut_arg("max_repeats", |a| a.help_heading(CONVOLUTION)),
        mut_arg("max_correlations", |a| a.help_heading(CONVOLUTION))
    )]
    Eval(EvalArgs),
    /// Infer message paths with the convolution algorithm (paper §5.2), for any messages.
    ///
    /// For each root, follows the messages a node sends after it receives: arrivals and
    /// departures become signals (√count per quantum), and the delays at which their
    /// cross-correlation spikes are the node's causal delays. Calls and returns count as
    /// plain messages, so RPC traces work too. Reads captures or text traces, as nest
    /// does. Prints the paths, most followed first, with each node's median delay (and
    /// its spikes, where there are several).
    #[command(after_long_help = concat!(exit_status!(), "Examples:
  blackbox convolve traces/freeform.trace
  blackbox convolve -q --quantum 5ms --max-delay 500ms --json - traces/freeform.trace
  blackbox records --mbox tests/data/sample.mbox | blackbox convolve --quantum 1min --max-delay 1h -
"))]
    Convolve(ConvolveArgs),
    /// Say what changed between two runs of a system: patterns, shares, own times.
    ///
    /// Nests BEFORE and AFTER (each a set of captures or text traces, read as nest
    /// reads them), lines their patterns up by signature, and says which appeared or
    /// vanished, which common pattern's share of requests changed, and, for each node of
    /// each common pattern, whether its own time (its latency not covered by its calls)
    /// changed beyond noise: a two-sided Mann-Whitney U test per node and per share, the
    /// level divided among all the tests (Bonferroni). Patterns of fewer than 5 requests
    /// on a side are lined up but not tested.
    #[command(after_long_help = concat!(exit_status!(), "Examples:
  blackbox diff -q --before traces/multitier.trace --after traces/multitier-added-delay.trace
  blackbox diff -q --before traces/shop-16/*.pcap* --after traces/shop-32/*.pcap* --json - | head -3
  blackbox diff -q traces/multitier.trace --before 0s-2s --after 2s-4s
"))]
    Diff(DiffArgs),
    /// Turn captures or other records into a text trace.
    ///
    /// Packet captures (one per host) become their messages, each end at its host's
    /// time, with the summary of what was read and skipped on stderr. With --mbox, every
    /// Received header of every email becomes one hop, from the host after `from`
    /// to the host after `by`, at the header's date (the receiving host's clock,
    /// corrected where the emails' chains of headers prove it off: see --align), with
    /// the email's Message-ID as the truth column. Headers with unreadable dates,
    /// generic hosts (localhost, unknown) or a missing host are skipped and counted on
    /// stderr, as are the relays' clock corrections. The trace suits `blackbox convolve`.
    #[command(after_long_help = concat!(exit_status!(), "Examples:
  blackbox records traces/shop/*.pcap* -o shop.trace
  blackbox records -q traces/shop/web.pcap | head -3
  blackbox records --mbox tests/data/sample.mbox
"))]
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
    ///
    /// With --mbox, the relays' clocks of an mbox instead, from the delays between its
    /// emails' consecutive Received headers (records --mbox and eval --convolve --mbox
    /// apply the same correction): every relay corrected, with its offset against the
    /// others and the pairs and delays it rests on.
    #[command(
        override_usage = "blackbox align [OPTIONS] <CAPTURE>...\n       blackbox align [OPTIONS] --mbox <FILE>",
        after_long_help = concat!(exit_status!(), "Examples:
  blackbox align traces/shop/*.pcap*
  blackbox align traces/shop/*.pcap* --json - > clocks.json
  blackbox align traces/shop/*.pcap* --write aligned/
  blackbox align --mbox tests/data/sample.mbox
"),
        // What names nodes, the truth and repairs are of the merged trace, which align
        // does not build: refused when given (commands::align), unlisted here.
        mut_arg("node_by", |a| a.hide(true)),
        mut_arg("truth_ids", |a| a.hide(true)),
        mut_arg("repair", |a| a.hide(true)),
        mut_arg("min_latency", |a| a.hide(true))
    )]
    Align(AlignArgs),
    /// Capture on every host at once, through ssh, a namespace or kubectl, with a record
    /// of what was lost.
    ///
    /// Runs tcpdump (or dumpcap) on every host at the same time through a transport
    /// command (`--via 'ssh {host}'`), streams each capture back into DIR/HOST.pcap,
    /// and stops them all at once after --duration or on Ctrl-C. DIR/manifest.json
    /// records per host how it was captured, what was dropped (the kernel's and the
    /// interface's counters), packets cut short, segmentation offloads, the clock's
    /// state, each file's SHA-256 and which address is which host; `blackbox nest DIR`
    /// reads it, names the hosts from it and warns of what was lost.
    Collect(super::collect::CollectArgs),
}

#[derive(Args)]
pub(super) struct AlignArgs {
    /// Packet captures (pcap/pcapng, gzip'd or not), one per host; `-` for standard
    /// input.
    #[arg(
        value_name = "CAPTURE",
        required_unless_present = "mbox",
        conflicts_with = "mbox"
    )]
    pub(super) files: Vec<PathBuf>,

    /// An mbox file instead: its relays' clocks, from its emails' Received headers.
    #[arg(long, value_name = "FILE", conflicts_with = "write")]
    pub(super) mbox: Option<PathBuf>,

    #[command(flatten)]
    pub(super) capture: CaptureArgs,

    /// Write the alignment as JSON to FILE (`-` for stdout, instead of the table).
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,

    /// Write every capture, its times in the reference's clock, to DIR (same file
    /// names; nanosecond pcap or pcapng, as read).
    #[arg(long, value_name = "DIR")]
    pub(super) write: Option<PathBuf>,
}

#[derive(Args)]
#[command(
    override_usage = "blackbox records [OPTIONS] <FILE>...\n       blackbox records [OPTIONS] --mbox <FILE>"
)]
pub(super) struct RecordsArgs {
    /// Packet captures (pcap/pcapng, one per host) or text traces; gzip'd or not; `-`
    /// for standard input.
    #[arg(
        value_name = "FILE",
        required_unless_present = "mbox",
        conflicts_with = "mbox"
    )]
    pub(super) files: Vec<PathBuf>,

    /// An mbox file instead: its Received headers become hops
    ///
    /// An mbox file instead: its Received headers become hops, tagged with their email's
    /// Message-ID, in the relays' clocks corrected from the emails' chains of headers
    /// (--align off keeps the clocks as written).
    #[arg(long, value_name = "FILE")]
    pub(super) mbox: Option<PathBuf>,

    /// Do not print the summary of what was read and skipped.
    #[arg(long, short)]
    pub(super) quiet: bool,

    #[command(flatten)]
    pub(super) capture: CaptureArgs,

    /// Write the trace to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
}

#[derive(Args)]
pub(super) struct ConvolveArgs {
    #[command(flatten)]
    pub(super) settings: ConvolveSettings,

    /// Show only the first N paths.
    #[arg(long, value_name = "N", help_heading = "Output")]
    pub(super) top: Option<usize>,

    #[command(flatten)]
    pub(super) graphs: GraphArgs,

    /// Write the paths and counts as JSON to FILE (`-`: stdout, the table then goes to
    /// stderr).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(super) json: Option<PathBuf>,

    /// Write a self-contained HTML report (`-`: stdout)
    ///
    /// Write a self-contained HTML report: the path table, each path drawn with the
    /// delay spikes at each node, what was read and skipped, and the clock alignment
    /// (`-`: stdout).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(super) html: Option<PathBuf>,

    #[command(flatten)]
    pub(super) input: InputArgs,
}

/// The convolution algorithm's settings, for `convolve` and `eval --convolve`.
#[derive(Args)]
pub(super) struct ConvolveSettings {
    /// Time quantum of the signals (seconds, or with a unit).
    #[arg(long, value_name = "DURATION", default_value = "0.01", value_parser = duration)]
    pub(super) quantum: Nanos,

    /// Longest causal delay to look for.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    pub(super) max_delay: Nanos,

    /// Start paths here (repeatable); default: the nodes that send before they receive,
    /// and nodes whose own sends no arrival explains.
    #[arg(long, value_name = "NODE")]
    pub(super) root: Vec<String>,

    /// A message counts as caused at delay d when it leaves d ± this after an arrival
    /// (default: one quantum).
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Advanced")]
    pub(super) variance: Option<Nanos>,

    /// Drop edges with fewer messages than this, as noise.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(super) min_count: u64,

    /// A spike stands this many standard deviations above the mean.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 4.0,
        help_heading = "Advanced"
    )]
    pub(super) spike_sigma: f64,

    /// Spikes are separated by a point under this many standard deviations.
    #[arg(
        long,
        value_name = "S",
        default_value_t = 3.0,
        help_heading = "Advanced"
    )]
    pub(super) gap_sigma: f64,

    /// Longest path, in hops; longer ones stop and are counted.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 24,
        help_heading = "Advanced"
    )]
    pub(super) max_depth: usize,

    /// Most times one hop may occur on a path (a cycle of coincidences stops there).
    #[arg(long, value_name = "N", default_value_t = 3, help_heading = "Advanced")]
    pub(super) max_repeats: usize,

    /// Stop the search after this many correlations, counting the paths cut short.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20_000,
        help_heading = "Advanced"
    )]
    pub(super) max_correlations: u64,
}

impl ConvolveSettings {
    pub(super) fn options(&self) -> blackbox::convolution::ConvolveOptions {
        blackbox::convolution::ConvolveOptions {
            quantum: self.quantum,
            max_delay: self.max_delay,
            spike_sigma: self.spike_sigma,
            gap_sigma: self.gap_sigma,
            variance: self.variance,
            min_count: self.min_count,
            max_depth: self.max_depth,
            max_repeats: self.max_repeats,
            max_correlations: self.max_correlations,
            roots: self.root.clone(),
        }
    }
}

#[derive(Args)]
pub(super) struct EvalArgs {
    #[command(flatten)]
    pub(super) input: InputArgs,

    /// Score call by call against a file of true parents
    ///
    /// Score call by call against true parents in the assignments format instead of the
    /// truth column.
    #[arg(long, value_name = "FILE")]
    pub(super) truth: Option<PathBuf>,

    /// Score against the system's own request ids, hidden from the inference
    ///
    /// Where calls carry request ids or trace contexts (`traceparent`, `X-Request-ID`,
    /// ... as `nest` reads them), infer the parents without them, then score each call
    /// whose id names its parent: how far to trust blackbox on this system, per node,
    /// and whether its confidence means what it says. Needs no truth.
    #[arg(long, conflicts_with_all = ["truth", "start_from_truth", "true_signatures"])]
    pub(super) against_ids: bool,

    /// Score each request's pattern against a file of true signatures by request id
    ///
    /// Lines `request-id<TAB>signature`: each request named by the id its root call
    /// carries (`X-Request-ID`, `traceparent`, ... as `nest` reads them), with its true
    /// pattern as `nest` writes it. Scores the share of requests in their true pattern
    /// and each true pattern's rank. For systems whose requests can be named but not
    /// every call (`traces/brokers/signatures.py` writes one from the programs' logs).
    /// Add --ignore-ids to infer without the ids.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["truth", "start_from_truth"])]
    pub(super) true_signatures: Option<PathBuf>,

    /// Compare the top N patterns for N = 1..K.
    #[arg(long, value_name = "K", default_value_t = 20)]
    pub(super) top_n: usize,

    /// Also write the scores as JSON to FILE (`-`: stdout, the scores' table then goes
    /// to stderr).
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,

    /// Start the joint search from the true parents: a bound on the search, not a result
    ///
    /// Start the joint search from the true parents instead of the greedy answer (the
    /// model is then learned from them). What it still gets wrong, the model itself
    /// prefers wrong: a bound on what a better search could reach, not a result.
    #[arg(long, help_heading = "Advanced")]
    pub(super) start_from_truth: bool,

    /// Score the nesting `nest` makes of a trace longer than N lines: in segments of
    /// about N lines (0: always whole)
    #[arg(long, value_name = "N", default_value_t = blackbox::streaming::SEGMENT_LINES, help_heading = "Advanced")]
    pub(super) segment_lines: usize,

    #[command(flatten)]
    pub(super) algorithm: AlgorithmArgs,

    /// Score the convolution algorithm's paths against the true chains instead
    ///
    /// Score the convolution algorithm's paths (run with the settings below) against
    /// the true chains: each instance's hops in time order, or with --mbox each email's
    /// Received headers in their order, cut where a hop leaves another node than the one
    /// the hop before reached. Per threshold: true paths found exactly, only as the
    /// start of a longer path, inside one, or nowhere; reported paths no chain
    /// followed; and at each hop of an exact one, the main delay spike against the true
    /// median.
    #[arg(long, help_heading = CONVOLUTION, conflicts_with_all = ["truth", "against_ids", "start_from_truth"])]
    pub(super) convolve: bool,

    /// FILE is an mbox: score against its emails' own chains of Received headers.
    #[arg(long, requires = "convolve", help_heading = CONVOLUTION)]
    pub(super) mbox: bool,

    /// Score paths followed (true) or carried (reported) at least N times (repeatable;
    /// default: --min-count).
    #[arg(
        long,
        value_name = "N",
        requires = "convolve",
        help_heading = CONVOLUTION
    )]
    pub(super) min_paths: Vec<u64>,

    #[command(flatten, next_help_heading = CONVOLUTION)]
    pub(super) convolution: ConvolveSettings,
}

#[derive(Args)]
pub(super) struct NestArgs {
    /// Show only the first N patterns.
    #[arg(long, value_name = "N", help_heading = "Output")]
    pub(super) top: Option<usize>,

    /// Order of the patterns, most first.
    #[arg(long, value_enum, default_value_t = SortArg::Count, help_heading = "Output")]
    pub(super) sort: SortArg,

    /// Hide patterns seen fewer than N times.
    #[arg(long, value_name = "N", default_value_t = 1, help_heading = "Output")]
    pub(super) min_count: u64,

    /// Also show the requests by time window of this width (`60s`, `5min`)
    ///
    /// After the table, one table per window (aligned to the clock: 60 s windows start on
    /// the minute) of the requests whose root call arrived in it: each pattern's count,
    /// median and p99 latency, and the node adding the most with its own time. The
    /// parents are chosen over the whole trace. --json gets `windows`, a time series of
    /// each pattern's latency and each node's own time.
    #[arg(long, value_name = "DURATION", value_parser = duration, help_heading = "Output")]
    pub(super) window: Option<Nanos>,

    #[command(flatten)]
    pub(super) graphs: GraphArgs,

    /// Write the patterns, latency distributions and input counts as JSON to FILE (`-`:
    /// stdout, the table then goes to stderr).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(super) json: Option<PathBuf>,

    /// Write the parent chosen for every call, with its confidence, as TSV (`-`: stdout)
    ///
    /// Write the parent chosen for every call (tab separated: sender receiver call_id
    /// call_time parent_sender parent_receiver parent_call_id, `-` for roots; then the
    /// confidence of the choice, 0 to 1); `-`: stdout.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(super) assignments: Option<PathBuf>,

    /// Write a self-contained HTML report (`-`: stdout)
    ///
    /// Write a self-contained HTML report: the sortable pattern table, and for each
    /// pattern its call tree, the node that adds the most latency, a timeline and
    /// latency histograms; then what was read and skipped, and the clock alignment
    /// (`-`: stdout).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(super) html: Option<PathBuf>,

    /// Write every path instance as an OpenTelemetry trace, in OTLP/JSON (`-`: stdout)
    ///
    /// Write every inferred path instance as an OpenTelemetry trace in OTLP/JSON (one
    /// span per call, on the service it entered, parented to the call it was nested in),
    /// for Jaeger, Grafana Tempo or an OpenTelemetry Collector to import (`-`: stdout).
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(super) otlp: Option<PathBuf>,

    /// Instead of the pattern table, show why CALL got its parent (a call id, or
    /// "SENDER RECEIVER TIME")
    ///
    /// Instead of the pattern table, show why CALL got its parent: how its time splits
    /// (its callee's own time, waiting on its calls, its messages in transit), its
    /// candidate parents with each one's scoreboard value, penalties and final score. CALL is a
    /// call id (every call carrying it), or "SENDER RECEIVER TIME" in one argument (the
    /// call between those nodes sent nearest to TIME, in seconds).
    #[arg(long, value_name = "CALL")]
    pub(super) explain: Option<String>,

    /// Also write the messages read from captures to FILE as a text trace, for reruns
    ///
    /// Also write the messages read from the captures to FILE as a text trace (one line
    /// per message end, in the aligned clock, with operations, statuses and request
    /// ids): `blackbox nest FILE` then gives the same patterns without reading the
    /// captures again. Captures nested in segments are written as they stream; the
    /// file is FILE.partial until it is whole.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(super) keep_messages: Option<PathBuf>,

    /// Nest traces longer than N lines in segments, in bounded memory (0: never)
    ///
    /// A text trace of more than N lines is read in time order and nested in segments
    /// of about N lines, each with a margin of twice the longest call on either side:
    /// memory stays bounded however long the trace. Captures larger than 4 KB per line
    /// (8 GB at the default) with more than N message ends are nested the same way:
    /// read once for addresses and clocks, their messages kept on disk meanwhile (in
    /// TMPDIR, about 41 bytes a message end). Percentiles of patterns with more than
    /// 512 requests are then within 0.1%. --html, --otlp, --assignments, --explain, --window and
    /// --repair need every call held at once and read the whole trace. 0 always reads
    /// the whole trace.
    #[arg(long, value_name = "N", default_value_t = blackbox::streaming::SEGMENT_LINES, help_heading = "Advanced")]
    pub(super) segment_lines: usize,

    #[command(flatten)]
    pub(super) input: InputArgs,

    #[command(flatten)]
    pub(super) algorithm: AlgorithmArgs,
}

/// Where nest and convolve draw what they show.
#[derive(Args)]
pub(super) struct GraphArgs {
    /// Write a Graphviz dot file per shown pattern or path into DIR
    ///
    /// Write one Graphviz file per shown pattern or path (pattern-001.dot or
    /// path-001.dot, ...) into DIR, in the paper's style (Figure 8 for nest, Figure 9
    /// for convolve).
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub(super) dot: Option<PathBuf>,

    /// Write the graphs into DIR as dot files and SVG pictures (needs Graphviz)
    ///
    /// Write the graphs into DIR as dot files and as SVG pictures drawn by Graphviz's
    /// `dot` (when it is not installed, the dot files only, and a note).
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    pub(super) svg: Option<PathBuf>,
}

/// The inputs of nest, eval and convolve: the files, how captures are read, and whether
/// the summary of what was read is shown.
#[derive(Args)]
pub(super) struct InputArgs {
    /// Text traces or packet captures (pcap/pcapng, one per host; told apart by their
    /// first bytes; gzip'd or not; `-` for standard input), merged into one trace.
    #[arg(required = true, value_name = "FILE")]
    pub(super) files: Vec<PathBuf>,

    /// Do not print the summary of what was read and skipped.
    #[arg(long, short)]
    pub(super) quiet: bool,

    #[command(flatten)]
    pub(super) capture: CaptureArgs,
}

/// What orders the patterns, always descending.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum SortArg {
    /// Number of path instances (the paper's order).
    Count,
    /// Sum of the root latency over all instances: where the time goes overall.
    Total,
    /// Mean root latency: the slowest kinds of request.
    Mean,
}

impl SortArg {
    pub(super) fn key(self) -> SortKey {
        match self {
            SortArg::Count => SortKey::Count,
            SortArg::Total => SortKey::Total,
            SortArg::Mean => SortKey::Mean,
        }
    }
}

/// Which parent choice runs after the paper's candidates and scoreboard.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum AlgorithmArg {
    /// The paper's greedy choice with fixed penalties (§5.1.1.3), kept reproducible.
    Paper,
    /// The paper's answer improved jointly per node under a model, learned from the
    /// trace, of what each call does while it is open.
    Joint,
}

impl InputArgs {
    /// How nest, eval and convolve read their inputs.
    pub(super) fn options(&self) -> Result<InputOptions> {
        self.capture.input_options(self.quiet)
    }

    /// Whether patterns name the operation called on each node.
    pub(super) fn by_operation(&self) -> bool {
        matches!(self.capture.node_by, NodeByArg::Operation)
    }
}

#[derive(Args)]
pub(super) struct DiffArgs {
    /// One run's captures or traces, to compare two time ranges of it (--before and
    /// --after then name the ranges)
    #[arg(value_name = "FILE")]
    pub(super) files: Vec<PathBuf>,

    /// The run before: captures (one per host) or text traces; with FILEs, a time range
    /// of them: `HH:MM[:SS]-HH:MM[:SS]` (UTC, on the day the trace starts) or
    /// `DURATION-DURATION` from its start (`0s-5min`)
    #[arg(long, required = true, num_args = 1.., value_name = "FILE|RANGE")]
    pub(super) before: Vec<PathBuf>,

    /// The run after, as --before
    #[arg(long, required = true, num_args = 1.., value_name = "FILE|RANGE")]
    pub(super) after: Vec<PathBuf>,

    /// The level of all the tests together: the chance that two runs of an unchanged
    /// system show any change
    #[arg(long, value_name = "P", default_value_t = 0.01, value_parser = level)]
    pub(super) alpha: f64,

    /// Also write the comparison as JSON to FILE (`-`: stdout, the text then goes to
    /// stderr).
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<PathBuf>,

    /// Do not print the summaries of what was read and skipped.
    #[arg(long, short)]
    pub(super) quiet: bool,

    #[command(flatten)]
    pub(super) capture: CaptureArgs,

    #[command(flatten)]
    pub(super) algorithm: AlgorithmArgs,
}

fn level(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!("`{text}` is not a level between 0 and 1")),
    }
}

#[derive(Args)]
pub(super) struct AlgorithmArgs {
    /// Threads to work on (0: one per core)
    ///
    /// Threads to work on: reading, pairing and each node's parent choice, which runs as
    /// a timely dataflow with one worker per thread (0, the default: one per core).
    /// The answer is the same whatever the number.
    #[arg(long, value_name = "N", default_value_t = 0, help_heading = "Workers")]
    pub(super) workers: usize,

    /// Run as one of several processes, FILE listing each one's host:port
    ///
    /// Run as one of several processes, on one machine or many: FILE lists one
    /// `host:port` per process (process 0 first; `#` starts a comment), and each runs
    /// the command with its own --process. Each process reads the captures it is given
    /// (those on its machine) and sends their messages to process 0; a path several
    /// processes name is one file on a shared path, read by one of them. Process 0
    /// reads text traces, goes on as if it had read every capture itself (its own
    /// first, then process 1's, ...), and writes every output; the others lend it their
    /// --workers threads for the parent choice and exit when it is done. A process that
    /// does not come within 60 s, or is lost mid-run, fails the run with an error
    /// naming it. The answer is the same as one process's given every capture.
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Workers",
        requires = "process"
    )]
    pub(super) cluster: Option<PathBuf>,

    /// This process's line in --cluster's FILE, from 0
    #[arg(long, value_name = "I", help_heading = "Workers", requires = "cluster")]
    pub(super) process: Option<usize>,

    /// Parent choice: joint (learned per node), or paper (the paper's greedy choice)
    ///
    /// Parent choice: `joint` improves the paper's greedy answer per node under a model
    /// learned from the trace of what each call does while it is open (when it calls
    /// out after its arrival, its previous call leaving or returning, when it answers,
    /// how many calls of each kind it makes in which order), and gives a call that no
    /// call encloses, where calls of its kind nearly always are enclosed, one of the
    /// calls open when it left (a late timestamp; counted as "late returns"); `paper`
    /// is the paper's greedy choice alone, for reproducing its results.
    #[arg(long, value_enum, default_value_t = AlgorithmArg::Joint)]
    pub(super) algorithm: AlgorithmArg,

    /// Loosen the test "parent encloses child" by this much, to tolerate clock skew
    /// between hosts when messages were seen at one end only (e.g. 30ms; paper §7.5.6).
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration, help_heading = "Advanced")]
    pub(super) skew_window: Nanos,

    /// Let a call out of a node have a parent that did not wait for it
    ///
    /// A call into the node that was open when it left and answered before it returned
    /// (fire and forget), or that answered at most DURATION before it left (write-back
    /// caches, queued work; paper §5.3.1). Such a parent is kept only where the node's own
    /// sequences (how often it answers without waiting, how long after an answer it calls
    /// on, to whom) make it likelier than any other candidate by odds of 100 to 1; the
    /// others stay roots, counted in the summary. With `eval`, the truth then gives such a
    /// call its own path instance's call. Off (0) by default.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration, help_heading = "Advanced")]
    pub(super) async_window: Nanos,

    /// Smooth each delay histogram with a Gaussian of this many bins (0 = off); helps
    /// with skewed clocks.
    #[arg(
        long,
        value_name = "BINS",
        default_value_t = 0.0,
        help_heading = "Advanced"
    )]
    pub(super) smooth: f64,

    /// Overlapping-child penalty exponent (paper §5.1.1.3)
    ///
    /// Overlapping-child penalty exponent x: a parent's score is multiplied by (1+n)^-x
    /// where n of its children already overlap the call in time.
    #[arg(
        long,
        value_name = "X",
        default_value_t = 2.0,
        help_heading = "Advanced"
    )]
    pub(super) overlap_penalty: f64,

    /// Same-child penalty exponent y: (1+n)^-y for n children already calling the same node.
    #[arg(
        long,
        value_name = "Y",
        default_value_t = 0.0,
        help_heading = "Advanced"
    )]
    pub(super) same_penalty: f64,

    /// Generic-child penalty exponent z: (1+n)^-z for n children already assigned.
    #[arg(
        long,
        value_name = "Z",
        default_value_t = 0.0,
        help_heading = "Advanced"
    )]
    pub(super) generic_penalty: f64,

    /// Ratio between successive delay bins of the scoreboard.
    #[arg(
        long,
        value_name = "RATIO",
        default_value_t = 1.05,
        help_heading = "Advanced"
    )]
    pub(super) bin_base: f64,

    /// Delays below this share the first bin.
    #[arg(long, value_name = "DURATION", default_value = "1us", value_parser = duration, help_heading = "Advanced")]
    pub(super) bin_floor: Nanos,

    /// Delays above this share the last bin.
    #[arg(long, value_name = "DURATION", default_value = "7200s", value_parser = duration, help_heading = "Advanced")]
    pub(super) bin_ceiling: Nanos,

    /// Calls out of a node that the joint choice learns its starts on (0: all)
    ///
    /// With the joint choice, settle its three starts on the first N calls out of each node
    /// and carry the end kept over the rest (learning the model again from all of them), and
    /// where an instant with no call open across it leaves N calls out on each side, settle
    /// those after it on the other core: the same answers on nodes with no more than N calls
    /// out, and up to three times faster on large busy ones. 0 settles every start on every call.
    #[arg(long, value_name = "N", default_value_t = blackbox::nesting::joint::LEARN_WINDOW, help_heading = "Advanced")]
    pub(super) learn_window: usize,

    /// Ignore the connections calls travelled on
    ///
    /// By default, where captures name them, the joint choice learns per node how the
    /// connections of its calls out follow the connection of the call they serve (a
    /// worker's own Redis or database connection), and a node whose connections show no
    /// such affinity learns none.
    #[arg(long, help_heading = "Advanced")]
    pub(super) ignore_connections: bool,

    /// Ignore the request ids and trace contexts calls carry
    ///
    /// By default, where calls carry `traceparent`, `b3`, `X-B3-TraceId`,
    /// `uber-trace-id` or `X-Request-ID` (HTTP headers, gRPC metadata, sqlcommenter
    /// comments in SQL) and a node passes them on to the calls it makes, a call's
    /// parent is the call carrying the same id, and the rest are inferred with what
    /// those links teach. The summary says how many calls carried one.
    #[arg(long, help_heading = "Advanced")]
    pub(super) ignore_ids: bool,

    /// Leave out the starts for saturation: the pinned one and those ordered by returns
    /// and by arrivals
    ///
    /// Where requests queue for workers, pools or proxies, hard EM can pile calls onto a
    /// few requests and leave the rest with none (the 80-client shop of
    /// traces/configs/shop.toml: 0.0% of requests exactly right without the pinned
    /// start). Where the answer it reached makes counts of calls per request vary more
    /// than their means need, the choice also settles a start that holds each service to
    /// about as many calls of each kind per request as on average, and keeps its answer
    /// where clearly likelier, in its counts too (the same shop: 53.0%). Where that
    /// answer is not kept and services make at most one call of each kind per request,
    /// it also tries giving each call out to the request answered first after it
    /// returned (a gRPC proxy whose queue held requests 56 ms: 0.0% → 77.0%); and where
    /// a kind of call is made once per request, giving each call out to the request
    /// whose place among arrivals is nearest the call's among calls out, for queues
    /// served first in, first out (a saturated gRPC proxy with 16 workers at 64 streams:
    /// 0.0% → 26.7%). This flag shows the answer without them, for comparison.
    #[arg(long, help_heading = "Advanced")]
    pub(super) no_pinned_start: bool,
}

pub(super) fn duration(text: &str) -> Result<Nanos, String> {
    time::parse_duration(text).map_err(|e| format!("`{text}`: {e}"))
}

impl AlgorithmArgs {
    pub(super) fn options(&self) -> NestOptions {
        let a = self;
        NestOptions {
            algorithm: match a.algorithm {
                AlgorithmArg::Paper => Algorithm::Paper,
                AlgorithmArg::Joint => Algorithm::Joint,
            },
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
            reweighing: Reweighing::default(),
            learn_window: match a.learn_window {
                0 => usize::MAX,
                n => n,
            },
            by_operation: false,
            connections: !a.ignore_connections,
            ids: !a.ignore_ids,
            pinned_start: !a.no_pinned_start,
            workers: super::workers::workers(),
        }
    }
}
