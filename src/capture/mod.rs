//! Packet captures in: pcap and pcapng files, one per host, to the messages of a
//! [`Trace`](crate::trace::Trace). The pipeline per file is [`file`] (container
//! formats) → [`decode`] (link, IP, TCP/UDP) → [`flows`] (connections, in-order bytes)
//! → [`protocol`] (messages, calls and returns); [`own`] then decides which of a file's
//! addresses are the capturing host's own, and [`naming`] names nodes and hands each
//! message end to the trace builder, which merges the ends seen in two hosts' captures,
//! each time turned by the clock correction it is given. Owns the capture options and
//! errors, and the stamps of TCP segments that [`crate::align`] pairs; knows nothing
//! of how clocks are fitted, or of inference.

pub mod cluster;
pub mod decode;
pub mod ends;
pub mod file;
pub mod filter;
pub mod flows;
mod naming;
pub mod own;
pub mod protocol;
pub mod spill;
pub mod stats;
pub mod transport;
mod tunnel;
pub mod write;

pub use decode::link_type_name;
pub(crate) use naming::node_names;
pub use naming::{add_to_trace, same_clock};

use flows::{CaptureMessage, Flows, ProtocolChoice};
use hashbrown::HashMap;
pub use own::Uncertain;
use own::{decide_local_addresses, fresh_ttl, local_addresses};
use protocol::ProtocolName;
use rayon::prelude::*;
use stats::FileStats;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

/// Problems that stop a capture from being read at all.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    /// The file could not be opened or read.
    // The cause follows in the error chain.
    #[error("cannot read {}", crate::input::source::name(path))]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a pcap or pcapng capture.
    #[error(
        "{} is not a pcap or pcapng capture: {reason}",
        crate::input::source::name(path)
    )]
    NotACapture {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// Its messages could not be kept on disk ([`CaptureOptions::spill_messages`]).
    #[error(
        "cannot keep the messages of {} on disk in {} (TMPDIR chooses the directory)",
        path.display(),
        directory.display()
    )]
    Spill {
        /// The capture.
        path: PathBuf,
        /// Where they were being kept.
        directory: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Another process of a cluster, which holds the capture, could not read it for us
    /// ([`crate::input::elsewhere`]).
    #[error("process {process} of the cluster could not read {}: {why}", path.display())]
    Elsewhere {
        /// The capture, as that process names it.
        path: PathBuf,
        /// The process.
        process: usize,
        /// Why, as it said.
        why: String,
    },
    /// A names or truth file has a bad line.
    #[error("{}:{line}: {problem}", path.display())]
    Names {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        problem: String,
    },
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum NodeBy {
    /// A host (an IP address, or its name).
    #[default]
    Host,
    /// A service: a host and the port it serves on. A call a host makes comes from its
    /// one service when it serves on exactly one port, else from the host.
    Service,
    /// A service, and in patterns the operation called on it
    /// (`catalog:50051[/shop.Catalog/GetItem]`): nodes are named as for `Service`;
    /// the operations are added when patterns are formed
    /// ([`crate::nesting::NestOptions::by_operation`]).
    Operation,
    /// A host, as `Host`, but replicas of one service ([`HostCapture::replica_of`])
    /// apart: each named by its own capture.
    Pod,
}

/// How captures are read.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct CaptureOptions {
    /// Protocols forced per server port.
    pub protocols: ProtocolChoice,
    /// Names for addresses (`--names`).
    pub names: BTreeMap<IpAddr, String>,
    /// Host names for files (`--host NAME=FILE`); other files are named by their stem.
    pub hosts: BTreeMap<PathBuf, String>,
    /// Each file's host's own addresses as the host itself listed them (`blackbox
    /// collect`'s manifest): trusted over the traffic's guess, not over `names`.
    pub recorded_own: BTreeMap<PathBuf, std::collections::BTreeSet<IpAddr>>,
    /// What a node is.
    pub node_by: NodeBy,
    /// Ground truth for captures: the path instance of calls by their call id (the
    /// sidecar `maketrace --pcap` writes). Inference never reads it; `eval` does.
    pub truth: BTreeMap<String, String>,
    /// Keep a stamp of every TCP segment, for joining connection ends across address
    /// translation ([`crate::nat`]) and aligning the hosts' clocks ([`crate::align`]);
    /// costs 32 bytes per segment.
    pub clock_stamps: bool,
    /// With `clock_stamps`, keep only the segments whose key is at most this (0 or
    /// `u64::MAX`: every one). Keys are equal in the sender's and the receiver's
    /// capture, so both keep the same segments: a sample that bounds memory on long
    /// captures ([`crate::streaming`]).
    pub stamp_sample: u64,
    /// With `stamp_sample`, keep also every segment that opens a connection (SYN and
    /// SYN-ACK): with the sample, what joins each connection's two ends.
    pub stamp_openings: bool,
    /// Keep the messages on disk ([`spill`]) instead of in memory: the one pass over
    /// captures nested in segments ([`crate::input::streamed`]).
    pub spill_messages: bool,
    /// Follow every packet as soon as it is read, instead of in batches: for a capture
    /// read as it is written ([`crate::input::live`]).
    #[serde(skip)]
    pub live: bool,
    /// Read only the packets this capture filter passes (`--filter`).
    pub filter: Option<filter::PacketFilter>,
    /// Read only the packets captured in this window (`--from`, `--to`).
    pub window: crate::trace::time::TimeWindow,
}

/// The share of segments (of keys, 1/8) stamped where the clocks are not to be aligned:
/// with each connection's opening segments, enough to join its ends across address
/// translation unless it began before the captures with few segments (one of 50
/// segments goes unjoined one time in 800).
const JOIN_SAMPLE: u64 = u64::MAX / 8;

impl CaptureOptions {
    /// Sets which TCP segments to stamp for `captures` captures read together: none for
    /// one; every one (or `stamp_sample`'s share) where the clocks are to be `aligned`;
    /// else only the few that join each connection's ends, at an eighth of the cost.
    pub fn stamp_for(&mut self, captures: usize, aligned: bool) {
        self.clock_stamps = captures > 1;
        if !aligned {
            self.stamp_sample = match self.stamp_sample {
                0 => JOIN_SAMPLE,
                sample => sample.min(JOIN_SAMPLE),
            };
            self.stamp_openings = true;
        }
    }
}

/// Whether a file starts with a pcap or pcapng magic number.
pub fn is_capture(path: &Path) -> bool {
    matches!(
        magic(path),
        Some(0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 | PCAPNG_MAGIC)
    )
}

/// The pcapng section header's block type, as its first four bytes read.
pub(crate) const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;

/// A file's first four bytes, little-endian, if it has four.
pub(crate) fn magic(path: &Path) -> Option<u32> {
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).ok()?;
    file.read_exact(&mut magic).ok()?;
    Some(u32::from_le_bytes(magic))
}

/// What one capture file gave, before nodes are named. Serialised (without the messages
/// kept on disk, and without what is learned from the other captures) when another
/// process of a cluster read it ([`crate::input::elsewhere`]).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct HostCapture {
    /// The file.
    pub path: PathBuf,
    /// Its size as stored, when it is a file (set by [`crate::input`], which knows it
    /// also for a capture another process read).
    #[serde(skip)]
    pub stored_bytes: Option<u64>,
    /// The host it was captured on.
    pub host: String,
    /// Counts of what was read and set aside.
    #[serde(with = "stats::as_json")]
    pub stats: FileStats,
    /// Why reading stopped early, if it did.
    pub stopped: Option<file::Stopped>,
    /// The capturing host's own addresses, as far as the traffic tells.
    pub local: BTreeSet<IpAddr>,
    /// Why `local` is only a guess, when it is: the user should name the hosts.
    pub local_uncertain: Option<Uncertain>,
    /// Packets per address pair, from which `local` is decided.
    pairs: BTreeMap<(IpAddr, IpAddr), u64>,
    /// Addresses that are not this host's own: sources whose packets mostly came with
    /// less time to live than a sender sets (they crossed a router to get here), and the
    /// far ends of packets a pcapng marks inbound or outbound.
    routed: BTreeSet<IpAddr>,
    /// Addresses named by the pcapng packet comments a capture tool wrote (ptcpdump's
    /// pod), each for the pod that sent or received its packets.
    pub pods: BTreeMap<IpAddr, String>,
    /// The names DNS responses in the capture gave addresses (the name asked for), with
    /// how many responses gave each: names for nodes nothing else names.
    #[serde(default)]
    pub dns_names: BTreeMap<IpAddr, BTreeMap<String, u64>>,
    /// The TCP segments seen, by route, when [`CaptureOptions::clock_stamps`] asks.
    pub stamps: Vec<RouteStamps>,
    endpoints: Vec<SocketAddr>,
    messages: Vec<CaptureMessage>,
    /// Messages built, kept or handed on as they were cut.
    message_count: usize,
    /// Operation names, by the index the messages carry.
    operations: Vec<String>,
    /// Propagated ids, by the index the messages carry.
    propagated: Vec<String>,
    /// The messages, when they were kept on disk instead.
    #[serde(skip)]
    spilled: Option<spill::Spilled>,
    /// Connections that address translation (NAT) stood in: a direction's (source,
    /// destination) as this capture saw it → as the two ends' own captures saw
    /// themselves, learned by [`crate::nat::learn`]. Call ids and node names use the
    /// latter, so that both ends of a message name one call.
    #[serde(skip)]
    pub translated: HashMap<(SocketAddr, SocketAddr), (SocketAddr, SocketAddr)>,
    /// The service this host is a replica of, where callers reached it and another
    /// captured host at one translated address ([`crate::nat::learn`]): the node's name
    /// unless `--node-by pod` or `--names` say otherwise.
    #[serde(skip)]
    pub replica_of: Option<String>,
    /// Connections between two other captured hosts that this capture saw only pass
    /// (a node's capture of its pods, before and after it translated them), whose ends'
    /// own captures hold them: their messages are left out here, so that each is
    /// counted once. Both directions of each; learned by [`crate::nat::learn`].
    #[serde(skip)]
    pub passed: hashbrown::HashSet<(SocketAddr, SocketAddr)>,
}

/// The TCP segments from one address to another in one capture, for finding the same
/// segment in another host's capture.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RouteStamps {
    /// Source address.
    pub from: IpAddr,
    /// Destination address.
    pub to: IpAddr,
    /// One per segment, in capture order.
    pub stamps: Vec<SegmentStamp>,
}

/// One TCP segment: what identifies it across captures, and when this host saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SegmentStamp {
    /// A digest of the sequence and acknowledgement numbers, flags and the first
    /// payload bytes: equal in the sender's and the receiver's capture, and unequal for
    /// different segments but by a 2⁻⁶⁴ chance. Neither addresses nor ports enter it,
    /// since address translation (NAT) changes them between the two ends, nor the
    /// length, since segmentation offloads cut one segment differently at each end.
    pub key: u64,
    /// When this host captured it, in its own clock.
    pub time: crate::trace::Nanos,
    /// Its source and destination ports, as this host saw them.
    pub ports: (u16, u16),
    /// Its sequence number.
    pub seq: u32,
    /// Its acknowledgement number.
    pub ack: u32,
    /// Its payload's length on the wire.
    pub len: u32,
}

impl SegmentStamp {
    /// Its source and destination as this host saw them, on `route`.
    pub fn ends(&self, route: &RouteStamps) -> (SocketAddr, SocketAddr) {
        (
            SocketAddr::new(route.from, self.ports.0),
            SocketAddr::new(route.to, self.ports.1),
        )
    }
}

/// Payload bytes in a segment's key: few enough to survive any snaplen a capture
/// keeps headers with (96 bytes for Ethernet, IPv4 and TCP with options), so two
/// captures cut at different lengths still agree.
const KEYED_PAYLOAD: usize = 16;

/// A segment's key for [`SegmentStamp`].
pub fn segment_key(segment: &decode::Segment, tcp: &decode::TcpFields) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // Fixed seeds: keys must be equal in different captures and runs.
    let mut hasher = foldhash::quality::FixedState::with_seed(0x5eed_b1ac).build_hasher();
    hasher.write_u32(tcp.seq);
    hasher.write_u32(tcp.ack);
    hasher.write_u8(
        u8::from(tcp.syn)
            | u8::from(tcp.ack_flag) << 1
            | u8::from(tcp.fin) << 2
            | u8::from(tcp.rst) << 3,
    );
    hasher.write(&segment.payload[..segment.payload.len().min(KEYED_PAYLOAD)]);
    hasher.finish()
}

impl HostCapture {
    /// A capture that holds only its own addresses and segments' stamps, as pairing
    /// sees one: for tests of what is matched across captures.
    pub fn from_stamps(host: &str, local: BTreeSet<IpAddr>, stamps: Vec<RouteStamps>) -> Self {
        HostCapture {
            path: PathBuf::from(host),
            stored_bytes: None,
            host: host.to_string(),
            stats: FileStats::default(),
            stopped: None,
            local,
            local_uncertain: None,
            pairs: BTreeMap::new(),
            routed: BTreeSet::new(),
            pods: BTreeMap::new(),
            dns_names: BTreeMap::new(),
            stamps,
            endpoints: Vec::new(),
            messages: Vec::new(),
            message_count: 0,
            operations: Vec::new(),
            propagated: Vec::new(),
            spilled: None,
            translated: HashMap::new(),
            replica_of: None,
            passed: hashbrown::HashSet::new(),
        }
    }

    /// Whether every message held in memory is on a connection this capture saw only
    /// pass ([`HostCapture::passed`]).
    pub fn only_passed(&self) -> bool {
        self.messages.iter().all(|m| {
            let ends = (
                self.endpoints[m.client as usize],
                self.endpoints[m.server as usize],
            );
            self.passed.contains(&ends)
        })
    }

    /// Messages built from this file.
    pub fn messages(&self) -> usize {
        self.message_count
    }
}

/// The host name for a file: given by `--host`, else the file's stem (without a `.gz`),
/// or `stdin` for standard input.
pub fn host_name(path: &Path, options: &CaptureOptions) -> String {
    options.hosts.get(path).cloned().unwrap_or_else(|| {
        if path.as_os_str() == "-" {
            return "stdin".to_owned();
        }
        // `web.pcap.gz` is web's, like `web.pcap`.
        let path = match path.extension() {
            Some(gz) if gz == "gz" => Path::new(path.file_stem().unwrap_or_default()),
            _ => path,
        };
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string())
    })
}

/// Reads one capture from `input`.
pub fn read_capture<R: Read + Send>(
    path: &Path,
    host: String,
    input: R,
    options: &CaptureOptions,
) -> Result<HostCapture, CaptureError> {
    if !options.spill_messages {
        return read_capture_into(path, host, input, options, None);
    }
    let mut spill = spill::SpillWriter::new().map_err(|e| spill::error(path, e))?;
    // The sink cannot fail the read: the first error is kept and told after.
    let mut failed = None;
    let mut sink = |batch: &MessageBatch<'_>| {
        if failed.is_none() {
            failed = spill.write(batch).err();
        }
    };
    let mut read = read_capture_into(path, host, input, options, Some(&mut sink))?;
    if let Some(source) = failed {
        return Err(spill::error(path, source));
    }
    read.spilled = Some(spill.finish().map_err(|e| spill::error(path, e))?);
    Ok(read)
}

/// Messages a capture's flows cut, with the tables their indexes point into.
pub struct MessageBatch<'a> {
    /// The messages, in the order they completed.
    pub messages: &'a [CaptureMessage],
    /// Every endpoint seen so far, by index.
    pub endpoints: &'a [SocketAddr],
    /// Operation names so far, by index.
    pub operations: &'a [String],
    /// Propagated ids so far, by index.
    pub propagated: &'a [String],
}

/// Where messages go as they are cut, instead of into the [`HostCapture`].
pub type MessageSink<'s> = dyn FnMut(&MessageBatch<'_>) + 's;

/// [`read_capture`], handing the messages to `sink` as they are cut when one is given
/// (the capture then keeps none, only their count).
pub fn read_capture_into<R: Read + Send>(
    path: &Path,
    host: String,
    input: R,
    options: &CaptureOptions,
    mut sink: Option<&mut MessageSink<'_>>,
) -> Result<HostCapture, CaptureError> {
    // Two stages on two threads: reading and decoding packets, and following their
    // connections. Decoded segments travel in batches, their payloads copied into one
    // buffer per batch; the bounded channel keeps memory flat, and emptied batches go
    // back to be filled again, so that no batch's memory is ever touched for the first
    // time twice (fresh pages cost a fault each: 8% of the time before).
    let (sender, receiver) = std::sync::mpsc::sync_channel::<SegmentBatch>(4);
    let (recycle, recycled) = std::sync::mpsc::channel::<SegmentBatch>();
    let (read, followed) = std::thread::scope(|scope| {
        let stamps = options.clock_stamps.then_some(Stamping {
            most: match options.stamp_sample {
                0 => u64::MAX,
                sample => sample,
            },
            openings: options.stamp_openings,
        });
        let selection = Selection {
            filter: options.filter.as_ref(),
            window: options.window,
        };
        let batch_records = match options.live {
            true => 1,
            false => BATCH_RECORDS,
        };
        let reading = scope.spawn(move || {
            read_segments(
                path,
                input,
                (stamps, selection, batch_records),
                sender,
                recycled,
            )
        });
        let mut stats = FileStats::default();
        let mut flows = Flows::new(&options.protocols);
        let mut handed_on = 0usize;
        for batch in receiver {
            for record in &batch.records {
                let segment = decode::Segment {
                    from: record.from,
                    to: record.to,
                    transport: record.transport,
                    payload: &batch.payloads[record.payload.clone()],
                    wire_len: record.wire_len,
                    ttl: record.ttl,
                };
                flows.segment(record.time, &segment, &mut stats);
            }
            let mut batch = batch;
            batch.records.clear();
            batch.payloads.clear();
            // The reader may have finished already; the batch is then dropped here.
            let _ = recycle.send(batch);
            if let Some(sink) = sink.as_deref_mut() {
                handed_on += flows.messages.len();
                sink(&flows.batch());
                flows.messages.clear();
            }
        }
        let mut followed = flows.finish(&mut stats);
        if let Some(sink) = sink {
            handed_on += followed.messages.len();
            sink(&followed.batch());
            followed.messages = Vec::new();
        }
        let read = reading.join().expect("the reading thread does not panic");
        (read, (followed, stats, handed_on))
    });
    let (stopped, pairs, routed, (pods, dns_names), stamps, mut stats) = read?;
    let (followed, flow_stats, handed_on) = followed;
    stats.add(&flow_stats);
    Ok(HostCapture {
        path: path.to_path_buf(),
        stored_bytes: None,
        host,
        stats,
        stopped,
        local: local_addresses(&pairs, &BTreeSet::new()).0,
        local_uncertain: None,
        pairs,
        routed,
        pods,
        dns_names,
        stamps,
        endpoints: followed.endpoints,
        message_count: handed_on + followed.messages.len(),
        messages: followed.messages,
        operations: followed.operations,
        propagated: followed.propagated,
        spilled: None,
        translated: HashMap::new(),
        replica_of: None,
        passed: hashbrown::HashSet::new(),
    })
}

/// Decoded segments with their payloads in one buffer.
#[derive(Default)]
struct SegmentBatch {
    records: Vec<SegmentRecord>,
    payloads: Vec<u8>,
}

struct SegmentRecord {
    time: crate::trace::Nanos,
    from: SocketAddr,
    to: SocketAddr,
    transport: decode::Transport,
    payload: std::ops::Range<usize>,
    wire_len: usize,
    ttl: u8,
}

/// Payload bytes per batch before it is sent on.
const BATCH_BYTES: usize = 1 << 20;
/// Segments per batch before it is sent on.
const BATCH_RECORDS: usize = 16_384;

/// What the first stage gives: why reading stopped, packets per address pair, the
/// routed source addresses, pods named by packet comments and addresses by DNS
/// answers, stamps, counts.
type ReadSegments = (
    Option<file::Stopped>,
    BTreeMap<(IpAddr, IpAddr), u64>,
    BTreeSet<IpAddr>,
    (
        BTreeMap<IpAddr, String>,
        BTreeMap<IpAddr, BTreeMap<String, u64>>,
    ),
    Vec<RouteStamps>,
    FileStats,
);

/// The port DNS servers answer from: their responses name addresses.
const DNS_PORT: u16 = 53;

/// Which packets the first stage reads.
#[derive(Clone, Copy)]
struct Selection<'f> {
    filter: Option<&'f filter::PacketFilter>,
    window: crate::trace::time::TimeWindow,
}

/// Which TCP segments the first stage stamps.
#[derive(Clone, Copy)]
struct Stamping {
    /// Those whose key is at most this.
    most: u64,
    /// And those that open their connection.
    openings: bool,
}

/// The pod a packet comment names (ptcpdump's `PodName: NAME`, with its namespace
/// where given: `PodNamespace: NS` makes `NS/NAME`), if it names one.
fn commented_pod(comment: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(comment).ok()?;
    let field = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(key))
            .map(str::trim)
            .filter(|v| {
                !v.is_empty() && !v.contains(['(', ')', ',']) && !v.contains(char::is_whitespace)
            })
    };
    let pod = field("PodName:")?;
    Some(match field("PodNamespace:") {
        Some(namespace) => format!("{namespace}/{pod}"),
        None => pod.to_string(),
    })
}

/// The first stage: reads and decodes every packet, counts packets per address pair,
/// and sends the segments on in batches.
fn read_segments<R: Read + Send>(
    path: &Path,
    input: R,
    (stamping, selection, batch_records): (Option<Stamping>, Selection<'_>, usize),
    sender: std::sync::mpsc::SyncSender<SegmentBatch>,
    recycled: std::sync::mpsc::Receiver<SegmentBatch>,
) -> Result<ReadSegments, CaptureError> {
    let mut routes: Vec<RouteStamps> = Vec::new();
    let mut route_index: HashMap<(IpAddr, IpAddr), usize> = HashMap::new();
    let mut last_route: Option<((IpAddr, IpAddr), usize)> = None;
    let mut stats = FileStats::default();
    // Packets per address pair: which addresses are the host's own is decided from
    // these once the whole file is read. Runs of packets between the same two addresses
    // are counted before they are hashed: a host's capture is mostly long runs.
    let mut pairs: HashMap<(IpAddr, IpAddr), u64> = HashMap::new();
    let mut run: Option<((IpAddr, IpAddr), u64)> = None;
    // Packets per source address with a time to live a sender sets, and with less,
    // counted in runs as the pairs are.
    let mut ttls: HashMap<IpAddr, [u64; 2]> = HashMap::new();
    // The pod each address belongs to, as packet comments say (the first to say).
    let mut pods: BTreeMap<IpAddr, String> = BTreeMap::new();
    let mut dns_names: BTreeMap<IpAddr, BTreeMap<String, u64>> = BTreeMap::new();
    let mut far_ends: BTreeSet<IpAddr> = BTreeSet::new();
    let mut last_far: Option<IpAddr> = None;
    let mut ttl_run: Option<(IpAddr, bool, u64)> = None;
    let mut batch = SegmentBatch::default();
    let mut receiver_gone = false;
    let mut programs = selection.filter.map(filter::PacketFilter::programs);
    let mut window: Option<(crate::trace::Nanos, crate::trace::Nanos)> = None;
    let stopped = file::read_frames(path, input, &mut stats, |frame, stats| {
        stats.packets += 1;
        if selection.window.is_set() {
            let (from, to) = *window.get_or_insert_with(|| selection.window.bounds(frame.time));
            if frame.time < from {
                return stats.skip("captured before --from");
            }
            if frame.time >= to {
                return stats.skip("captured at or after --to");
            }
        }
        if let Some(programs) = &mut programs {
            match programs.passes(frame) {
                Ok(true) => {}
                Ok(false) => return stats.skip("left out by --filter"),
                Err(reason) => {
                    let linktype = decode::link_type_name(frame.linktype.0);
                    return stats.skip(&format!(
                        "--filter means nothing on {linktype} frames ({reason})"
                    ));
                }
            }
        }
        let Some(segment) = decode::decode(frame, stats) else {
            return;
        };
        let (a, b) = (segment.from.ip(), segment.to.ip());
        let pair = (a.min(b), a.max(b));
        if segment.from.port() == DNS_PORT && matches!(segment.transport, decode::Transport::Udp) {
            if let Some((name, addresses)) = protocol::dns::answered_addresses(segment.payload) {
                for address in addresses {
                    let names = dns_names.entry(address).or_default();
                    *names.entry(name.clone()).or_insert(0) += 1;
                }
            }
        }
        let fresh = fresh_ttl(segment.ttl);
        if let Some(outbound) = frame.outbound {
            // The far end of a packet the pcapng says left or arrived is not this
            // host's.
            let far = if outbound { b } else { a };
            if last_far != Some(far) {
                last_far = Some(far);
                far_ends.insert(far);
            }
        }
        if let (Some(comment), Some(outbound)) = (frame.comment, frame.outbound) {
            let own = if outbound { a } else { b };
            if let std::collections::btree_map::Entry::Vacant(vacant) = pods.entry(own) {
                if let Some(pod) = commented_pod(comment) {
                    vacant.insert(pod);
                }
            }
        }
        match &mut run {
            Some((current, n)) if *current == pair => *n += 1,
            _ => {
                if let Some((done, n)) = run.replace((pair, 1)) {
                    *pairs.entry(done).or_default() += n;
                }
            }
        }
        match &mut ttl_run {
            Some((source, was_fresh, n)) if *source == a && *was_fresh == fresh => *n += 1,
            _ => {
                if let Some((source, was_fresh, n)) = ttl_run.replace((a, fresh, 1)) {
                    ttls.entry(source).or_default()[usize::from(was_fresh)] += n;
                }
            }
        }
        if let (Some(stamping), decode::Transport::Tcp(tcp)) = (stamping, &segment.transport) {
            let key = segment_key(&segment, tcp);
            if key <= stamping.most || (stamping.openings && tcp.syn) {
                let route = (a, b);
                let index = match last_route {
                    Some((last, index)) if last == route => index,
                    _ => {
                        let index = *route_index.entry(route).or_insert_with(|| {
                            routes.push(RouteStamps {
                                from: a,
                                to: b,
                                stamps: Vec::new(),
                            });
                            routes.len() - 1
                        });
                        last_route = Some((route, index));
                        index
                    }
                };
                routes[index].stamps.push(SegmentStamp {
                    key,
                    time: frame.time,
                    ports: (segment.from.port(), segment.to.port()),
                    seq: tcp.seq,
                    ack: tcp.ack,
                    len: u32::try_from(segment.wire_len).unwrap_or(u32::MAX),
                });
            }
        }
        let start = batch.payloads.len();
        batch.payloads.extend_from_slice(segment.payload);
        batch.records.push(SegmentRecord {
            time: frame.time,
            from: segment.from,
            to: segment.to,
            transport: segment.transport,
            payload: start..batch.payloads.len(),
            wire_len: segment.wire_len,
            ttl: segment.ttl,
        });
        if batch.payloads.len() >= BATCH_BYTES || batch.records.len() >= batch_records {
            let empty = recycled.try_recv().unwrap_or_default();
            let full = std::mem::replace(&mut batch, empty);
            receiver_gone |= sender.send(full).is_err();
        }
    });
    if !batch.records.is_empty() && !receiver_gone {
        let _ = sender.send(batch);
    }
    let stopped = stopped?;
    if let Some((done, n)) = run {
        *pairs.entry(done).or_default() += n;
    }
    if let Some((source, fresh, n)) = ttl_run {
        ttls.entry(source).or_default()[usize::from(fresh)] += n;
    }
    let routed = ttls
        .into_iter()
        .filter(|(_, [aged, fresh])| aged > fresh)
        .map(|(address, _)| address)
        .chain(far_ends)
        .collect();
    routes.sort_by_key(|r| (r.from, r.to));
    stats.dns_named = dns_names.len() as u64;
    Ok((
        stopped,
        pairs.into_iter().collect(),
        routed,
        (pods, dns_names),
        routes,
        stats,
    ))
}

/// Reads every capture (in parallel) from its stream, named by its path, and decides
/// each one's own addresses. Returns each file's capture, in the order given.
pub fn read_captures(
    inputs: Vec<(PathBuf, Box<dyn Read + Send>)>,
    options: &CaptureOptions,
) -> Result<Vec<HostCapture>, CaptureError> {
    let mut captures = read_each(inputs, options)?;
    decide_own_addresses(&mut captures, options);
    Ok(captures)
}

/// [`read_captures`] without deciding the captures' own addresses, which needs every
/// capture: for a share of them ([`crate::input::elsewhere`]).
pub fn read_each(
    inputs: Vec<(PathBuf, Box<dyn Read + Send>)>,
    options: &CaptureOptions,
) -> Result<Vec<HostCapture>, CaptureError> {
    inputs
        .into_par_iter()
        .map(|(path, input)| {
            // No BufReader: the capture reader reads in blocks of megabytes itself.
            read_capture(&path, host_name(&path, options), input, options)
        })
        .collect()
}

/// Decides each capture's own addresses, from all of them ([`read_each`]'s).
pub fn decide_own_addresses(captures: &mut [HostCapture], options: &CaptureOptions) {
    decide_local_addresses(captures, &options.names, &options.recorded_own);
}

/// Reads a names file: one `address name` per line, `#` comments; or the JSON of
/// `kubectl get pods,services,endpointslices -o json` ([`cluster`]), each pod named
/// for its Service, or for itself `by_pod`.
pub fn read_names(path: &Path, by_pod: bool) -> Result<BTreeMap<IpAddr, String>, CaptureError> {
    let text = std::fs::read_to_string(path).map_err(|source| CaptureError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if text.trim_start().starts_with('{') {
        return cluster::names(&text, path, by_pod);
    }
    let mut names = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let problem = |problem: String| CaptureError::Names {
            path: path.to_path_buf(),
            line: index + 1,
            problem,
        };
        let mut words = line.split_whitespace();
        let (Some(address), Some(name), None) = (words.next(), words.next(), words.next()) else {
            return Err(problem("expected `address name`".into()));
        };
        let address: IpAddr = address
            .parse()
            .map_err(|_| problem(format!("`{address}` is not an IP address")))?;
        if name.contains(['(', ')', ',']) {
            return Err(problem(format!(
                "node name `{name}` contains a parenthesis or comma"
            )));
        }
        names.insert(address, name.to_string());
    }
    Ok(names)
}

/// Reads a truth sidecar: one `call-id<TAB>instance` per line; gzip'd or not.
pub fn read_truth_ids(path: &Path) -> Result<BTreeMap<String, String>, CaptureError> {
    let io = |source| CaptureError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    let file = std::fs::File::open(path).map_err(io)?;
    if crate::input::source::is_gzip(path) {
        flate2::read::MultiGzDecoder::new(file).read_to_string(&mut text)
    } else {
        std::io::BufReader::new(file).read_to_string(&mut text)
    }
    .map_err(io)?;
    let mut truth = BTreeMap::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(call), Some(instance), None) = (words.next(), words.next(), words.next()) else {
            return Err(CaptureError::Names {
                path: path.to_path_buf(),
                line: index + 1,
                problem: "expected `call-id instance`".into(),
            });
        };
        truth.insert(call.to_string(), instance.to_string());
    }
    Ok(truth)
}

/// Parses `--protocol PORT=NAME`.
pub fn parse_protocol_override(text: &str) -> Result<(u16, ProtocolName), String> {
    let (port, name) = text
        .split_once('=')
        .ok_or_else(|| format!("expected PORT=NAME, got `{text}`"))?;
    let port: u16 = port
        .trim()
        .parse()
        .map_err(|_| format!("`{port}` is not a port number"))?;
    let protocol = ProtocolName::parse(name.trim()).ok_or_else(|| {
        let known: Vec<&str> = ProtocolName::all().map(ProtocolName::as_str).collect();
        format!("unknown protocol `{name}` (known: {})", known.join(", "))
    })?;
    Ok((port, protocol))
}
