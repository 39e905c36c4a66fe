//! The flags that say how inputs are read, shared by every command that reads captures:
//! protocols, names, hosts, which packets (`--filter`, `--from`, `--to`), what a node
//! is, the truth, the clocks and the repair; mapped onto the library's capture and input
//! options. Parsing only, as [`super::args`].

use anyhow::Result;
use blackbox::align::fit::Method;
use blackbox::capture::{self, protocol::ProtocolName, CaptureOptions, NodeBy};
use blackbox::collect::manifest::Collected;
use blackbox::exit::Usage;
use blackbox::input::InputOptions;
use blackbox::trace::time::{self, Moment};
use blackbox::trace::Nanos;
use clap::Args;
use std::path::PathBuf;

use super::args::duration;

#[derive(Args)]
pub(super) struct CaptureArgs {
    /// The manifests of the directories `blackbox collect` wrote that were named among
    /// the inputs ([`expand_collected`]): their hosts' names and warnings.
    #[arg(skip)]
    pub(super) collected: Vec<Collected>,

    /// Read connections to server PORT as protocol NAME whatever their content (repeatable)
    ///
    /// NAME: tcp (request/response by turns), http (HTTP/1.x), http2 (HTTP/2 and gRPC in
    /// cleartext: every stream a call), dns, onc-rpc, redis, postgres, memcached, mysql
    /// (MySQL and MariaDB), thrift, tls (counted, read by turns), the brokers nats, mqtt,
    /// amqp (0-9-1, RabbitMQ) and kafka, udp (request/response by datagrams), stream
    /// (every segment a free-form message). Otherwise the port suggests a protocol (50051
    /// http2, 3306 mysql, 443 tls, 4222 nats, 9092 kafka, ...), the client's first bytes
    /// confirm it (an HTTP/2 preface or h2c upgrade is known on any port), and anything
    /// unrecognised is read by turns.
    #[arg(long = "protocol", value_name = "PORT=NAME", value_parser = capture::parse_protocol_override, help_heading = "Captures (pcap/pcapng)")]
    pub(super) protocols: Vec<(u16, ProtocolName)>,

    /// Name the nodes: a file of `address name` lines, or the JSON of `kubectl get
    /// pods,services,endpointslices -o json` (pods named for their Service, else their
    /// workload; for themselves with --node-by pod). Without it a capture's own address
    /// is named after its host, other addresses stay numbers.
    #[arg(long, value_name = "FILE", help_heading = "Captures (pcap/pcapng)")]
    pub(super) names: Option<PathBuf>,

    /// Read only the packets this capture filter passes, in tcpdump's language
    ///
    /// Read only the packets this capture filter passes, in tcpdump's language
    /// (pcap-filter(7)): `--filter 'tcp port 80 and not host 10.0.0.9'` reads what
    /// `tcpdump -r FILE 'tcp port 80 and not host 10.0.0.9'` shows. Compiled and run by
    /// libpcap, which must be installed (tcpdump's own library: libpcap0.8 on Debian).
    /// The packets left out are counted in the summary.
    #[arg(
        long,
        value_name = "EXPRESSION",
        help_heading = "Captures (pcap/pcapng)"
    )]
    pub(super) filter: Option<String>,

    /// Read only the packets captured from this time on
    ///
    /// Read only the packets captured from this time on: a duration after the first
    /// packet of all the captures (`30s`, `5min`), a clock time on the day they start
    /// (`14:05`, `14:05:30.25`, UTC), a date and time (`2026-11-29T14:05:30Z`) or
    /// seconds since the epoch as `tcpdump -tt` prints them (`@1795961130.5`). Times are
    /// each capture's own clock's.
    #[arg(long, value_name = "TIME", value_parser = moment, help_heading = "Captures (pcap/pcapng)")]
    pub(super) from: Option<Moment>,

    /// Read only the packets captured before this time (as --from; `--from 14:00 --to
    /// 14:05`, `--to 2min`)
    #[arg(long, value_name = "TIME", value_parser = moment, help_heading = "Captures (pcap/pcapng)")]
    pub(super) to: Option<Moment>,

    /// The host a capture was taken on (repeatable); default: the file name without
    /// its extension.
    #[arg(
        long = "host",
        value_name = "NAME=FILE",
        help_heading = "Captures (pcap/pcapng)"
    )]
    pub(super) hosts: Vec<String>,

    /// What a node is: a host, a service (host:port), a service's operation, or a pod
    ///
    /// What a node is: a host, or a service (host:port; the calls a host makes come
    /// from its one service when it serves on a single port), or a service and the
    /// operation called on it, in patterns (`catalog:50051[/shop.Catalog/GetItem]`;
    /// from the protocols that name operations, or a text trace's `op=`). Hosts that
    /// callers reached at one translated address (a Kubernetes Service's ClusterIP, a
    /// load balancer) are replicas of one service and one node, named for what their
    /// names share (`app` for `app-0` and `app-1`); `pod` keeps each apart.
    #[arg(long, value_enum, default_value_t = NodeByArg::Host, help_heading = "Captures (pcap/pcapng)")]
    pub(super) node_by: NodeByArg,

    /// Ground truth for captures' calls, for eval (maketrace --pcap's truth.tsv)
    ///
    /// Ground truth for captures: `call-id instance` lines (the `truth.tsv` that
    /// `maketrace --pcap` writes), read as the trace's truth column for `eval`.
    #[arg(long, value_name = "FILE", help_heading = "Advanced")]
    pub(super) truth_ids: Option<PathBuf>,

    /// Align the hosts' clocks from the TCP segments two captures share
    ///
    /// Hull (convex hulls, guaranteed bounds), regression (the offline-trace-sync paper's
    /// method) or off (each host keeps its own clock). Only with two or more captures.
    /// An mbox (--mbox) has no shared segments: unless off, its relays' clocks are
    /// corrected from the delays between its emails' consecutive Received headers.
    #[arg(long, value_enum, value_name = "METHOD", default_value_t = AlignArg::Hull, help_heading = "Advanced")]
    pub(super) align: AlignArg,

    /// Solve the clock corrections of all hosts together (where hosts form loops)
    ///
    /// Where the graph of hosts has loops, solve every host's correction over all pairs
    /// together by weighted least squares (within its route's bounds) instead of along
    /// its shortest path: better when the pairs' errors are independent, worse when
    /// queueing biases them all one way.
    #[arg(long, help_heading = "Advanced")]
    pub(super) least_squares: bool,

    /// Move receives that still come before their send forward, after alignment
    ///
    /// After alignment, move receives that still come before their send (plus
    /// --min-latency) forward with the controlled logical clock: the events after them
    /// follow with a fading correction, those shortly before are smoothed toward the
    /// jump, and no send passes its receive. Also for text traces with both ends.
    #[arg(long, help_heading = "Advanced")]
    pub(super) repair: bool,

    /// The shortest time a message may take, for --repair.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = duration, requires = "repair", help_heading = "Advanced")]
    pub(super) min_latency: Nanos,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum AlignArg {
    Hull,
    Regression,
    Off,
}

impl AlignArg {
    pub(super) fn method(self) -> Option<Method> {
        match self {
            AlignArg::Hull => Some(Method::Hull),
            AlignArg::Regression => Some(Method::Regression),
            AlignArg::Off => None,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(super) enum NodeByArg {
    Host,
    Service,
    Operation,
    Pod,
}

impl CaptureArgs {
    /// How the files are read, aligned and repaired; `quiet` hides the progress bars.
    pub(super) fn input_options(&self, quiet: bool) -> Result<InputOptions> {
        Ok(InputOptions {
            capture: self.options()?,
            align: self.align.method(),
            least_squares: self.least_squares,
            repair: self.repair.then(|| blackbox::align::repair::RepairOptions {
                min_latency: self.min_latency,
                ..blackbox::align::repair::RepairOptions::default()
            }),
            progress: !quiet,
            collected: self.collected.clone(),
        })
    }

    pub(super) fn options(&self) -> Result<CaptureOptions> {
        let mut options = CaptureOptions {
            node_by: match self.node_by {
                NodeByArg::Host => NodeBy::Host,
                NodeByArg::Service => NodeBy::Service,
                NodeByArg::Operation => NodeBy::Operation,
                NodeByArg::Pod => NodeBy::Pod,
            },
            ..CaptureOptions::default()
        };
        options
            .protocols
            .by_port
            .extend(self.protocols.iter().copied());
        if let Some(expression) = &self.filter {
            options.filter = Some(capture::filter::PacketFilter::new(expression)?);
        }
        options.window.from = self.from;
        options.window.to = self.to;
        if let (Some(Moment::After(from)), Some(Moment::After(to))) = (self.from, self.to) {
            if to <= from {
                return Err(Usage("--to comes before --from: nothing would be read".into()).into());
            }
        }
        if let Some(path) = &self.truth_ids {
            options.truth = capture::read_truth_ids(path)?;
        }
        if let Some(path) = &self.names {
            options.names = capture::read_names(path, matches!(self.node_by, NodeByArg::Pod))?;
        }
        // What collect recorded, where the flags do not say otherwise.
        for collected in &self.collected {
            for (file, host) in collected.captures() {
                options.hosts.entry(file).or_insert(host);
            }
            for (file, own) in collected.own_addresses() {
                options.recorded_own.entry(file).or_default().extend(own);
            }
            if self.names.is_some() {
                continue;
            }
            let snapshot = collected
                .manifest
                .kubernetes
                .as_ref()
                .map(|cluster| collected.dir.join(&cluster.at_start));
            match snapshot {
                Some(path) => {
                    let by_pod = matches!(self.node_by, NodeByArg::Pod);
                    for (address, name) in capture::read_names(&path, by_pod)? {
                        options.names.entry(address).or_insert(name);
                    }
                }
                None => {
                    for named in &collected.manifest.names {
                        options
                            .names
                            .entry(named.address)
                            .or_insert_with(|| named.name.clone());
                    }
                }
            }
        }
        for host in &self.hosts {
            let (name, file) = host
                .split_once('=')
                .ok_or_else(|| Usage(format!("--host {host}: expected NAME=FILE")))?;
            options.hosts.insert(PathBuf::from(file), name.to_string());
        }
        Ok(options)
    }
}

/// A time as `--from` and `--to` take it.
fn moment(text: &str) -> Result<Moment, String> {
    time::parse_moment(text)
}

/// Replaces each directory among `files` with the captures in it: those its
/// `manifest.json` lists (what `blackbox collect` wrote), kept in `capture` for the
/// hosts' names and the warnings; without a manifest, its pcap and pcapng files
/// (gzip'd or not) in name order.
pub(super) fn expand_collected(files: &mut Vec<PathBuf>, capture: &mut CaptureArgs) -> Result<()> {
    if !files.iter().any(|file| file.is_dir()) {
        return Ok(());
    }
    let mut expanded = Vec::new();
    for file in std::mem::take(files) {
        if !file.is_dir() {
            expanded.push(file);
            continue;
        }
        if let Some(collected) = Collected::read(&file)? {
            let captures = collected.captures();
            if captures.is_empty() {
                return Err(Usage(format!(
                    "{}: its manifest lists no capture (every host failed: see {})",
                    file.display(),
                    file.join(blackbox::collect::manifest::FILE_NAME).display()
                ))
                .into());
            }
            expanded.extend(captures.into_iter().map(|(path, _)| path));
            capture.collected.push(collected);
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(&file)
            .map_err(|e| anyhow::anyhow!("cannot read the directory {}: {e}", file.display()))?
            .filter_map(|entry| Some(entry.ok()?.path()))
            .filter(|path| {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let name = name.strip_suffix(".gz").unwrap_or(name);
                path.is_file()
                    && [".pcap", ".pcapng", ".cap"]
                        .iter()
                        .any(|ext| name.ends_with(ext))
            })
            .collect();
        if found.is_empty() {
            return Err(Usage(format!(
                "{} is a directory without a manifest.json or a capture (.pcap, .pcapng, .cap, gzip'd or not)",
                file.display()
            ))
            .into());
        }
        found.sort();
        expanded.extend(found);
    }
    *files = expanded;
    Ok(())
}
