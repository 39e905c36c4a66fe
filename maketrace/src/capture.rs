//! Writes a generated trace as packet captures, one per host, with real
//! Ethernet/IPv4/TCP: every call is one connection (handshake, request, acknowledgement,
//! response, close), its request and response carry HTTP/1.1 or ONC RPC; or, for gRPC,
//! every pair of hosts shares one long-lived HTTP/2 connection on which each call is a
//! stream, so that concurrent calls multiplex as gRPC's do. Each packet is stamped at its
//! sender's send time in the sender's file and at its arrival time in the receiver's
//! file. Also writes the truth as a sidecar: the capture call id of every call with its
//! path instance.

use crate::config::StepKind;
use crate::generate::Generated;
use blackbox::capture::write::CaptureWriter;
pub use blackbox::capture::write::Container;
use blackbox::trace::Nanos;
use etherparse::PacketBuilder;
use pcap_parser::Linktype;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufWriter, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// What the calls carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// HTTP/1.1 on port 80.
    Http,
    /// ONC RPC with record marking on port 111.
    OncRpc,
    /// gRPC over HTTP/2 on port 50051: one connection per pair of hosts, a stream per
    /// call.
    Grpc,
}

/// Which TCP connection each HTTP/1.1 or ONC RPC call travels on, as the servers of a
/// real system choose them. (gRPC multiplexes every call on one connection per pair of
/// hosts whatever this says.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Connections {
    /// A new connection per call, closed after its answer.
    #[default]
    PerCall,
    /// Each host serves every call that reaches it on one of its workers (the first
    /// free one), and a worker's calls out go on keep-alive connections of its own, one
    /// call at a time each: a request's calls out follow the worker that serves it. At
    /// a host with a worker pool in the config, that is the pool's worker that took the
    /// request ([`Generated::worker`]), so the connections follow the queueing.
    WorkerPool,
    /// A host's calls out take the first free keep-alive connection of one pool per
    /// callee, whatever request they serve: connections say nothing of requests.
    SharedPool,
}

/// The request id each HTTP or gRPC call carries, as a system that propagates one
/// writes it: every call of a path instance carries the instance's id, so a reader can
/// tell a call's parent from it. (ONC RPC calls carry none.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ids {
    /// The header that carries it.
    pub header: IdHeader,
    /// The share of path instances whose calls carry it (sampled tracing carries some).
    pub share: f64,
}

/// A propagated id's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdHeader {
    /// W3C trace context: `traceparent: 00-<trace id>-<span id>-01`.
    TraceParent,
    /// `X-Request-ID: <tracelet>-<instance>`.
    RequestId,
}

impl Ids {
    /// The header line's name and value for a call of path instance `truth`, if that
    /// instance carries one; `number` tells the call (its span).
    fn header(&self, truth: (u32, u64), number: u64) -> Option<(&'static str, String)> {
        let instance = mix(u64::from(truth.0) << 40 ^ truth.1);
        if (instance % 1_000_000) as f64 >= self.share * 1_000_000.0 {
            return None;
        }
        Some(match self.header {
            IdHeader::TraceParent => (
                "traceparent",
                format!(
                    "00-{:016x}{:016x}-{:016x}-01",
                    mix(instance),
                    instance,
                    mix(number) | 1
                ),
            ),
            IdHeader::RequestId => ("x-request-id", format!("{}-{}", truth.0, truth.1)),
        })
    }
}

/// How the hosts of a generated system serve calls: the connections their calls take,
/// and the ids they carry.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Servers {
    /// Which connection each HTTP/1.1 or ONC RPC call takes.
    pub connections: Connections,
    /// The request id calls carry, if any.
    pub ids: Option<Ids>,
}

/// What was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Capture files written.
    pub files: Vec<PathBuf>,
    /// Packets, over all files.
    pub packets: u64,
    /// Calls written as connections.
    pub calls: u64,
    /// Free-form messages left out (captures carry RPC only).
    pub free_messages_left_out: u64,
}

/// The gRPC server port.
const GRPC_PORT: u16 = 50051;

/// Largest TCP payload per segment.
const MSS: usize = 1448;
/// Time between a host's steps within one exchange (its reaction time).
const STEP: Nanos = 1_000;

/// A node's IPv4 address.
pub fn address(node: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, (node / 250) as u8, 0, (node % 250 + 1) as u8)
}

fn mac(node: u32) -> [u8; 6] {
    let [_, _, hi, lo] = (node + 1).to_be_bytes();
    [0x02, 0, 0, 0, hi, lo]
}

/// SplitMix64: initial sequence numbers that differ between calls but not between runs.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[derive(Default, Clone, Copy)]
struct Ends {
    sent: Option<Nanos>,
    received: Option<Nanos>,
}

#[derive(Default)]
struct Call {
    from: u32,
    to: u32,
    call: Ends,
    reply: Ends,
    truth: (u32, u64),
}

/// One side of a TCP connection being written.
struct Side {
    node: u32,
    port: u16,
    seq: u32,
}

struct Writer {
    packets: BTreeMap<u32, Vec<(Nanos, Vec<u8>)>>,
    server_port: u16,
    link: Option<(Link, ChaCha8Rng)>,
}

/// A network between the hosts for [`write_over`]: each packet's one-way delay is drawn
/// afresh, instead of every packet of a message taking the trace's network delay.
/// What clock alignment must cope with: a smallest delay, jitter, serialisation that
/// makes large packets slower, and queueing in one direction.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    /// The smallest one-way delay (propagation, stacks), ns.
    pub base: Nanos,
    /// Mean of an exponential jitter on every packet, ns.
    pub jitter: Nanos,
    /// Serialisation, ns per byte of the frame (8 at 1 Gbit/s).
    pub per_byte: f64,
    /// Mean of an exponential queueing delay on packets from servers to clients (a
    /// loaded direction), ns; 0 for none.
    pub queueing: Nanos,
    /// Seed of the draws.
    pub seed: u64,
}

impl Link {
    fn delay(&self, rng: &mut ChaCha8Rng, frame: usize, from_server: bool) -> Nanos {
        let exponential = |rng: &mut ChaCha8Rng, mean: Nanos| -> Nanos {
            if mean <= 0 {
                return 0;
            }
            let u: f64 = rng.gen_range(f64::EPSILON..1.0);
            (-u.ln() * mean as f64).round() as Nanos
        };
        let queue = if from_server {
            exponential(rng, self.queueing)
        } else {
            0
        };
        self.base
            + (self.per_byte * frame as f64).round() as Nanos
            + exponential(rng, self.jitter)
            + queue
    }
}

impl Writer {
    /// Writes one TCP segment from `from` to `to`, into the sender's capture at `sent`
    /// and the receiver's at `received` (either may be absent: lost by the capture).
    #[allow(clippy::too_many_arguments)]
    fn segment(
        &mut self,
        from: &mut Side,
        to: &Side,
        flags: &str,
        payload: &[u8],
        sent: Option<Nanos>,
        received: Option<Nanos>,
    ) {
        let mut builder = PacketBuilder::ethernet2(mac(from.node), mac(to.node))
            .ipv4(address(from.node).octets(), address(to.node).octets(), 64)
            .tcp(from.port, to.port, from.seq, 64_240);
        if flags.contains('S') {
            builder = builder.syn();
        }
        if flags.contains('A') {
            builder = builder.ack(to.seq);
        }
        if flags.contains('F') {
            builder = builder.fin();
        }
        if flags.contains('P') {
            builder = builder.psh();
        }
        let mut bytes = Vec::with_capacity(builder.size(payload.len()));
        builder
            .write(&mut bytes, payload)
            .expect("writing to a Vec cannot fail and the sizes are in range");
        let advance = payload.len() as u32 + u32::from(flags.contains('S') || flags.contains('F'));
        from.seq = from.seq.wrapping_add(advance);
        let received = match (&mut self.link, sent) {
            (Some((link, rng)), Some(at)) => {
                Some(at + link.delay(rng, bytes.len(), from.port == self.server_port))
            }
            _ => received,
        };
        if let Some(time) = sent {
            self.packets
                .entry(from.node)
                .or_default()
                .push((time, bytes.clone()));
        }
        if let Some(time) = received {
            self.packets.entry(to.node).or_default().push((time, bytes));
        }
    }

    /// The three-way handshake, ending one step before `start`, when the first request
    /// leaves; `delays` are the one-way delays (to the server, back).
    fn handshake(
        &mut self,
        client: &mut Side,
        server: &mut Side,
        start: Nanos,
        delays: (Nanos, Nanos),
    ) {
        let (forward, backward) = delays;
        let at = |t: Nanos, delay: Nanos| (Some(t), Some(t + delay));
        let syn = start - 2 * forward - backward - 3 * STEP;
        let (s, r) = at(syn, forward);
        self.segment(client, server, "S", &[], s, r);
        let (s, r) = at(syn + forward + STEP, backward);
        self.segment(server, client, "SA", &[], s, r);
        let (s, r) = at(start - STEP, forward);
        self.segment(client, server, "A", &[], s, r);
    }

    /// The client's close a step after `after`, the server's, and the last
    /// acknowledgement.
    fn close(
        &mut self,
        client: &mut Side,
        server: &mut Side,
        after: Nanos,
        delays: (Nanos, Nanos),
    ) {
        let (forward, backward) = delays;
        let at = |t: Nanos, delay: Nanos| (Some(t), Some(t + delay));
        let (s, r) = at(after + STEP, forward);
        self.segment(client, server, "FA", &[], s, r);
        let (s, r) = at(after + 2 * STEP + forward, backward);
        self.segment(server, client, "FA", &[], s, r);
        let (s, r) = at(after + 3 * STEP + forward + backward, forward);
        self.segment(client, server, "A", &[], s, r);
    }

    /// A message of any size, cut into segments; the k-th leaves k µs after the first.
    fn message(
        &mut self,
        from: &mut Side,
        to: &Side,
        payload: &[u8],
        sent: Option<Nanos>,
        received: Option<Nanos>,
    ) {
        for (k, piece) in payload.chunks(MSS).enumerate() {
            let later = k as Nanos * STEP;
            self.segment(
                from,
                to,
                "AP",
                piece,
                sent.map(|t| t + later),
                received.map(|t| t + later),
            );
        }
    }
}

fn request(
    payload: Payload,
    trace: &Generated,
    call: &Call,
    number: u64,
    ids: Option<&Ids>,
) -> Vec<u8> {
    match payload {
        Payload::Http => {
            let id = ids
                .and_then(|ids| ids.header(call.truth, number))
                .map_or(String::new(), |(name, value)| {
                    format!("{name}: {value}\r\n")
                });
            format!(
                "GET /{}/{number} HTTP/1.1\r\nHost: {}\r\nUser-Agent: maketrace\r\n{id}\r\n",
                trace.nodes[call.to as usize], trace.nodes[call.to as usize]
            )
            .into_bytes()
        }
        Payload::OncRpc => {
            let words: [u32; 10] = [number as u32, 0, 2, 100_003, 3, 1, 0, 0, 0, 0];
            record(&words)
        }
        Payload::Grpc => unreachable!("gRPC calls are written per connection"),
    }
}

fn response(payload: Payload, number: u64) -> Vec<u8> {
    let body_len = 64 + (mix(number) % 3_000) as usize;
    match payload {
        Payload::Http => {
            let mut bytes = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {body_len}\r\n\r\n"
            )
            .into_bytes();
            bytes.extend(std::iter::repeat_n(b'x', body_len));
            bytes
        }
        Payload::OncRpc => {
            let mut words = vec![number as u32, 1, 0, 0, 0, 0];
            words.extend(std::iter::repeat_n(0, body_len / 4));
            record(&words)
        }
        Payload::Grpc => unreachable!("gRPC calls are written per connection"),
    }
}

/// An ONC RPC record: one last fragment holding the words.
fn record(words: &[u32]) -> Vec<u8> {
    let mut bytes = (0x8000_0000u32 | (words.len() as u32 * 4))
        .to_be_bytes()
        .to_vec();
    for word in words {
        bytes.extend_from_slice(&word.to_be_bytes());
    }
    bytes
}

/// Writes `<dir>/<node>.pcap` (or `.pcapng`) for every node and `<dir>/truth.tsv`.
pub fn write(
    trace: &Generated,
    dir: &Path,
    payload: Payload,
    container: Container,
) -> io::Result<Written> {
    write_with(trace, dir, payload, container, None, Servers::default())
}

/// Like [`write()`], with every packet delayed by `link` on its way: a segment is stamped
/// at its send time in the sender's capture and at that time plus a fresh draw of the
/// link's delay in the receiver's.
pub fn write_over(
    trace: &Generated,
    dir: &Path,
    payload: Payload,
    container: Container,
    link: &Link,
) -> io::Result<Written> {
    write_with(
        trace,
        dir,
        payload,
        container,
        Some(link),
        Servers::default(),
    )
}

/// Like [`write()`] or [`write_over`] (with `link`), each call on the connection that
/// `servers` gives it, carrying the ids it gives.
pub fn write_with(
    trace: &Generated,
    dir: &Path,
    payload: Payload,
    container: Container,
    link: Option<&Link>,
    servers: Servers,
) -> io::Result<Written> {
    let Servers { connections, ids } = servers;
    std::fs::create_dir_all(dir)?;
    let mut written = Written::default();
    // Gather both ends of every call and its return.
    let mut calls: HashMap<u64, Call> = HashMap::new();
    for line in &trace.lines {
        let Some(id) = line.call else {
            if !line.received {
                written.free_messages_left_out += 1;
            }
            continue;
        };
        let call = calls.entry(id).or_default();
        let ends = match line.kind {
            StepKind::Call => {
                (call.from, call.to) = (line.from, line.to);
                &mut call.call
            }
            StepKind::Return => &mut call.reply,
            StepKind::Message => continue,
        };
        if line.received {
            ends.received = Some(line.time);
        } else {
            ends.sent = Some(line.time);
        }
        call.truth = (line.tracelet, line.instance);
        if line.kind == StepKind::Return {
            (call.from, call.to) = (line.to, line.from);
        }
    }
    // Without a network delay the trace has the sender's times only: the receiver sees
    // each packet at the same instant.
    let one_ended = !trace.lines.iter().any(|l| l.received);
    let mut numbers: Vec<u64> = calls.keys().copied().collect();
    numbers.sort_unstable();
    let server_port = match payload {
        Payload::Http => 80,
        Payload::OncRpc => 111,
        Payload::Grpc => GRPC_PORT,
    };
    let mut writer = Writer {
        packets: BTreeMap::new(),
        server_port,
        link: link.map(|l| (l.clone(), ChaCha8Rng::seed_from_u64(l.seed))),
    };
    let mut next_port: HashMap<u32, u16> = HashMap::new();
    let mut truth = String::new();
    if payload == Payload::Grpc {
        let ends = numbers
            .iter()
            .filter_map(|&number| {
                let call = &calls[&number];
                let (mut request, mut reply) = (call.call, call.reply);
                if one_ended {
                    request.received = request.sent;
                    reply.received = reply.sent;
                }
                request.sent.or(request.received)?;
                Some((number, request, reply))
            })
            .collect();
        written.calls = grpc::write(
            trace,
            &calls,
            (ends, ids.as_ref()),
            link,
            &mut writer,
            &mut truth,
        );
        numbers.clear();
    }
    let mut pools = Pools::new(connections, &calls, one_ended, &mut numbers);
    for number in numbers {
        let call = &calls[&number];
        let (mut request_ends, mut reply_ends) = (call.call, call.reply);
        if one_ended {
            request_ends.received = request_ends.sent;
            reply_ends.received = reply_ends.sent;
        }
        let Some(start) = request_ends.sent.or(request_ends.received) else {
            continue;
        };
        let forward = match (request_ends.sent, request_ends.received) {
            (Some(s), Some(r)) => (r - s).max(0),
            _ => 0,
        };
        let backward = match (reply_ends.sent, reply_ends.received) {
            (Some(s), Some(r)) => (r - s).max(0),
            _ => forward,
        };
        // Over a link, a host answers a handshake segment after its typical arrival.
        let (forward, backward) = match link {
            Some(l) => {
                let typical = l.base + l.jitter + (l.per_byte * 64.0) as Nanos;
                (forward.max(typical), backward.max(typical + l.queueing))
            }
            None => (forward, backward),
        };
        let (slot, reused) = pools.take(number, call, start, trace);
        let fresh = reused.is_none();
        let (mut client, mut server) = reused.unwrap_or_else(|| {
            let port = next_port.entry(call.from).or_insert(32_768);
            let client = Side {
                node: call.from,
                port: *port,
                seq: mix(number * 2) as u32,
            };
            *port = if *port >= 60_999 { 32_768 } else { *port + 1 };
            let server = Side {
                node: call.to,
                port: server_port,
                seq: mix(number * 2 + 1) as u32,
            };
            (client, server)
        });
        written.calls += 1;
        // The handshake ends one step before the request leaves.
        if fresh {
            writer.handshake(&mut client, &mut server, start, (forward, backward));
        }
        use std::fmt::Write as _;
        // Calls are keyed by their request's first byte's sequence number (ONC RPC's
        // xid only pairs the reply).
        let _ = writeln!(
            truth,
            "tcp:{}:{}>{}:{}#s{}\t{}-{}",
            address(call.from),
            client.port,
            address(call.to),
            server_port,
            client.seq,
            trace.tracelets[call.truth.0 as usize],
            call.truth.1
        );
        let at = |t: Nanos, delay: Nanos| (Some(t), Some(t + delay));
        let bytes = request(payload, trace, call, number, ids.as_ref());
        writer.message(
            &mut client,
            &server,
            &bytes,
            request_ends.sent,
            request_ends.received,
        );
        let arrived = request_ends.received.unwrap_or(start + forward);
        let answer = reply_ends
            .sent
            .or(reply_ends.received.map(|t| t - backward));
        let Some(answer) = answer else {
            continue;
        };
        if arrived + STEP < answer {
            let (s, r) = at(arrived + STEP, backward);
            writer.segment(&mut server, &client, "A", &[], s, r);
        }
        let bytes = response(payload, number);
        writer.message(
            &mut server,
            &client,
            &bytes,
            reply_ends.sent,
            reply_ends.received,
        );
        let back =
            reply_ends.received.unwrap_or(answer + backward) + (bytes.len() / MSS) as Nanos * STEP;
        match connections {
            Connections::PerCall => {
                writer.close(&mut client, &mut server, back, (forward, backward))
            }
            _ => pools.give_back(slot, client, server, back, (forward, backward)),
        }
    }
    for (mut client, mut server, last, delays) in pools.drain() {
        writer.close(&mut client, &mut server, last, delays);
    }
    for (node, mut packets) in writer.packets {
        packets.sort_by_key(|p| p.0);
        let path = dir.join(format!(
            "{}.{}",
            trace.nodes[node as usize],
            container.extension()
        ));
        let mut out = BufWriter::new(std::fs::File::create(&path)?);
        write_container(&mut out, container, &packets)?;
        out.flush()?;
        written.packets += packets.len() as u64;
        written.files.push(path);
    }
    std::fs::write(dir.join("truth.tsv"), truth)?;
    Ok(written)
}

/// The keep-alive connections of [`Connections::WorkerPool`] and
/// [`Connections::SharedPool`].
struct Pools {
    connections: Connections,
    /// Per call, the call it serves at its caller (same instance, into the caller,
    /// open when it left), for the worker pool.
    parent: HashMap<u64, u64>,
    /// Per call, the id of the connection it travelled on.
    connection_of: HashMap<u64, u64>,
    next_id: u64,
    /// Idle connections by [`Slot`]'s pool: id, sides, free from, one-way delays.
    idle: BTreeMap<(u32, u64, u32), Vec<Idle>>,
}

/// Where a call's connection comes from and goes back to: its pool, (caller, owner,
/// callee), and its id. In a worker pool a host's worker serves one connection in, for
/// as long as it is open, and owns the connections its calls out take: the owner is
/// that connection's id + 1; at a host whose config gives it a pool, the worker that
/// took the call served, [`POOL_WORKER`] + its number. In a shared pool, and for calls
/// that serve none, it is 0.
#[derive(Clone, Copy)]
struct Slot {
    pool: (u32, u64, u32),
    id: u64,
}

/// Marks an owner that is a config pool's worker rather than a connection in.
const POOL_WORKER: u64 = 1 << 63;

/// A call into a node: when it arrived, when it was answered, its number.
type Served = (Nanos, Nanos, u64);

/// An open connection between calls: its id, both sides, when it is free, and the
/// one-way delays its handshake was written with.
type Idle = (u64, Side, Side, Nanos, (Nanos, Nanos));

impl Pools {
    /// Ready for `connections`; puts `numbers` in the order the calls start when the
    /// connections are reused (each must find its connection free or not).
    fn new(
        connections: Connections,
        calls: &HashMap<u64, Call>,
        one_ended: bool,
        numbers: &mut [u64],
    ) -> Pools {
        let start = |c: &Call| c.call.sent.or(c.call.received);
        let mut parent = HashMap::new();
        if connections != Connections::PerCall {
            numbers.sort_by_key(|n| (start(&calls[n]).unwrap_or(Nanos::MAX), *n));
        }
        if connections == Connections::WorkerPool {
            // Per (node, instance), the calls into the node: arrival, answer, number.
            let mut into: HashMap<(u32, (u32, u64)), Vec<Served>> = HashMap::new();
            for &number in numbers.iter() {
                let c = &calls[&number];
                let arrived = if one_ended {
                    c.call.sent
                } else {
                    c.call.received
                };
                let answered = c.reply.sent.or(c.reply.received);
                if let (Some(a), Some(b)) = (arrived.or(start(c)), answered) {
                    into.entry((c.to, c.truth))
                        .or_default()
                        .push((a, b, number));
                }
            }
            for &number in numbers.iter() {
                let c = &calls[&number];
                let Some(left) = start(c) else { continue };
                let served = into.get(&(c.from, c.truth)).and_then(|open| {
                    open.iter()
                        .find(|&&(a, b, _)| a <= left && left <= b)
                        .map(|&(_, _, p)| p)
                });
                if let Some(p) = served {
                    parent.insert(number, p);
                }
            }
        }
        Pools {
            connections,
            parent,
            connection_of: HashMap::new(),
            next_id: 0,
            idle: BTreeMap::new(),
        }
    }

    /// Where `call` (leaving at `start`) takes its connection from, and an idle one
    /// if there is one; otherwise the caller opens one, with the id in the slot.
    fn take(
        &mut self,
        number: u64,
        call: &Call,
        start: Nanos,
        trace: &Generated,
    ) -> (Slot, Option<(Side, Side)>) {
        let pool = (call.from, 0, call.to);
        if self.connections == Connections::PerCall {
            return (Slot { pool, id: 0 }, None);
        }
        let owner = match self.connections {
            Connections::WorkerPool => match self.parent.get(&number) {
                None => 0,
                Some(&p) => match trace.worker(p) {
                    Some(worker) => POOL_WORKER | u64::from(worker),
                    None => self.connection_of.get(&p).map_or(0, |id| id + 1),
                },
            },
            _ => 0,
        };
        let pool = (call.from, owner, call.to);
        let idle = self.idle.entry(pool).or_default();
        let (id, reused) = match idle.iter().position(|&(_, _, _, free, _)| free <= start) {
            Some(at) => {
                let (id, client, server, _, _) = idle.remove(at);
                (id, Some((client, server)))
            }
            None => {
                self.next_id += 1;
                (self.next_id - 1, None)
            }
        };
        self.connection_of.insert(number, id);
        (Slot { pool, id }, reused)
    }

    /// Puts a connection back in its slot's pool, free once its answer is in (`back`).
    fn give_back(
        &mut self,
        slot: Slot,
        client: Side,
        server: Side,
        back: Nanos,
        delays: (Nanos, Nanos),
    ) {
        self.idle.entry(slot.pool).or_default().push((
            slot.id,
            client,
            server,
            back + 2 * STEP,
            delays,
        ));
    }

    /// Every connection still open, in a fixed order, with when it was last used.
    fn drain(&mut self) -> Vec<(Side, Side, Nanos, (Nanos, Nanos))> {
        std::mem::take(&mut self.idle)
            .into_values()
            .flatten()
            .map(|(_, client, server, free, delays)| (client, server, free - 2 * STEP, delays))
            .collect()
    }
}

fn write_container(
    out: &mut impl Write,
    container: Container,
    packets: &[(Nanos, Vec<u8>)],
) -> io::Result<()> {
    let mut writer = CaptureWriter::new(out, container);
    for (time, bytes) in packets {
        writer.write(Linktype::ETHERNET, *time, bytes, bytes.len() as u32)?;
    }
    writer.finish()?;
    Ok(())
}

/// gRPC: one HTTP/2 connection per pair of hosts, opened before its first call and
/// closed after its last, each call a client stream (ids in the order the requests
/// leave), headers compressed with HPACK as real peers do, so that a reader must keep
/// each direction's dynamic table.
mod grpc {
    use super::{address, mix, Call, Ends, Ids, Link, Side, Writer, GRPC_PORT, STEP};
    use crate::generate::Generated;
    use blackbox::trace::Nanos;
    use std::collections::{BTreeMap, HashMap};

    const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8], out: &mut Vec<u8>) {
        let len = payload.len();
        out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
    }

    /// A gRPC message: the length-prefixed protobuf bytes (here, filler).
    fn message(len: usize) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&(len as u32).to_be_bytes());
        bytes.extend(std::iter::repeat_n(0x2a, len));
        bytes
    }

    /// Writes every call as a stream; returns how many were written.
    pub(super) fn write(
        trace: &Generated,
        calls: &HashMap<u64, Call>,
        (ends, ids): (Vec<(u64, Ends, Ends)>, Option<&Ids>),
        link: Option<&Link>,
        writer: &mut Writer,
        truth: &mut String,
    ) -> u64 {
        type Calls = Vec<(u64, Ends, Ends)>;
        let mut by_pair: BTreeMap<(u32, u32), Calls> = BTreeMap::new();
        for end in ends {
            let call = &calls[&end.0];
            by_pair.entry((call.from, call.to)).or_default().push(end);
        }
        let mut written = 0;
        for ((from, to), mut list) in by_pair {
            let first_time = |e: &Ends| e.sent.or(e.received).expect("filtered");
            list.sort_by_key(|(number, request, _)| (first_time(request), *number));
            let mut client = Side {
                node: from,
                port: 32_768 + (to % 28_000) as u16,
                seq: mix(u64::from(from) << 32 | u64::from(to)) as u32,
            };
            let mut server = Side {
                node: to,
                port: GRPC_PORT,
                seq: mix(u64::from(to) << 32 | u64::from(from)) as u32,
            };
            let (forward, backward) = match link {
                Some(l) => {
                    let typical = l.base + l.jitter + (l.per_byte * 64.0) as Nanos;
                    (typical, typical + l.queueing)
                }
                None => {
                    let (request, reply) = (list[0].1, list[0].2);
                    let delay = |e: Ends| match (e.sent, e.received) {
                        (Some(s), Some(r)) => (r - s).max(0),
                        _ => 0,
                    };
                    (delay(request), delay(reply))
                }
            };
            let start = first_time(&list[0].1);
            writer.handshake(&mut client, &mut server, start, (forward, backward));

            let method = format!("/maketrace.{}/Call", trace.nodes[to as usize]);
            let authority = format!("{}:{GRPC_PORT}", trace.nodes[to as usize]);
            let mut encoder = loona_hpack::Encoder::new();
            let mut stream_of = HashMap::new();
            let mut last = start;
            for (k, (number, request, _)) in list.iter().enumerate() {
                let stream = 2 * k as u32 + 1;
                stream_of.insert(*number, stream);
                let mut bytes = Vec::new();
                if k == 0 {
                    bytes.extend_from_slice(PREFACE);
                    frame(4, 0, 0, &[], &mut bytes);
                }
                let id = ids.and_then(|ids| ids.header(calls[number].truth, *number));
                let mut fields = vec![
                    (&b":method"[..], &b"POST"[..]),
                    (b":scheme", b"http"),
                    (b":path", method.as_bytes()),
                    (b":authority", authority.as_bytes()),
                    (b"content-type", b"application/grpc"),
                    (b"te", b"trailers"),
                ];
                if let Some((name, value)) = &id {
                    fields.push((name.as_bytes(), value.as_bytes()));
                }
                let headers = encoder.encode(fields);
                frame(1, 0x4, stream, &headers, &mut bytes);
                frame(
                    0,
                    0x1,
                    stream,
                    &message(16 + (mix(*number) % 48) as usize),
                    &mut bytes,
                );
                writer.message(&mut client, &server, &bytes, request.sent, request.received);
                let call = &calls[number];
                use std::fmt::Write as _;
                let _ = writeln!(
                    truth,
                    "tcp:{}:{}>{}:{GRPC_PORT}#s{stream}\t{}-{}",
                    address(from),
                    client.port,
                    address(to),
                    trace.tracelets[call.truth.0 as usize],
                    call.truth.1
                );
                written += 1;
                last = last.max(first_time(request));
            }
            // Answers leave in the order the server finishes them.
            let mut answers: Vec<(Nanos, u64, Ends)> = list
                .iter()
                .filter_map(|&(number, request, reply)| {
                    let arrived = request.received.unwrap_or(first_time(&request) + forward);
                    let sent = reply.sent.or(reply.received.map(|t| t - backward))?;
                    Some((sent.max(arrived), number, reply))
                })
                .collect();
            answers.sort_by_key(|&(sent, number, _)| (sent, number));
            let mut encoder = loona_hpack::Encoder::new();
            for (k, (sent, number, reply)) in answers.into_iter().enumerate() {
                let stream = stream_of[&number];
                let mut bytes = Vec::new();
                if k == 0 {
                    frame(4, 0, 0, &[], &mut bytes);
                }
                let headers = encoder.encode([
                    (&b":status"[..], &b"200"[..]),
                    (b"content-type", b"application/grpc"),
                ]);
                frame(1, 0x4, stream, &headers, &mut bytes);
                frame(
                    0,
                    0,
                    stream,
                    &message(64 + (mix(number) % 3_000) as usize),
                    &mut bytes,
                );
                // The answer ends, and the call returns, when its trailers leave: they
                // go in a segment of their own at the reply's time, after the headers
                // and message that lead up to it.
                let lead = bytes.len().div_ceil(super::MSS) as Nanos * STEP;
                let before = |t: Option<Nanos>| t.map(|t| t - lead);
                writer.message(
                    &mut server,
                    &client,
                    &bytes,
                    before(reply.sent),
                    before(reply.received),
                );
                let mut trailers = Vec::new();
                let block = encoder.encode([(&b"grpc-status"[..], &b"0"[..])]);
                frame(1, 0x5, stream, &block, &mut trailers);
                writer.message(&mut server, &client, &trailers, reply.sent, reply.received);
                last = last.max(reply.received.unwrap_or(sent + backward));
            }
            writer.close(
                &mut client,
                &mut server,
                last + 9 * STEP,
                (forward, backward),
            );
        }
        written
    }
}
