//! TCP connections and UDP port pairs of one capture: who is the client, the in-order
//! bytes of each direction (retransmissions and duplicates dropped, out-of-order
//! segments put back in order, holes reported), the choice of protocol, and the
//! messages its framer cuts. Owns per-connection state and frees it when a connection
//! closes; knows nothing of hosts or of the trace.

use super::decode::{Segment, Transport};
use super::protocol::udp::UdpPair;
use super::protocol::{Chunk, Framed, Framer, Output, ProtocolName, Side};
use super::stats::FileStats;
use crate::trace::{Kind, Nanos};
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Out-of-order segments held per direction before the hole they wait on is given up.
const MAX_HELD_SEGMENTS: usize = 256;

/// A message cut from a connection, with its endpoints as indices into
/// [`Flows::endpoints`].
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct CaptureMessage {
    /// The client's endpoint.
    pub client: u32,
    /// The server's endpoint.
    pub server: u32,
    /// Whether the connection was TCP (else UDP).
    pub tcp: bool,
    /// How the connection was read.
    pub protocol: ProtocolName,
    /// The message.
    pub framed: Framed,
    /// What TCP held back between its first segment and its last
    /// ([`super::transport`]), in whole microseconds (up to 71 minutes): it fits where the
    /// message's fields leave room, so a message costs no more for it.
    pub held_us: u32,
    /// Why, where anything was held.
    pub held_why: Option<crate::trace::Held>,
}

impl CaptureMessage {
    /// What TCP held back of it, and why.
    pub fn held(&self) -> Option<super::transport::Stall> {
        self.held_why.map(|cause| super::transport::Stall {
            waited: i64::from(self.held_us) * 1_000,
            cause,
        })
    }
}

/// Per-protocol choices the user made.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ProtocolChoice {
    /// Protocol to use for a server port, whatever the content looks like.
    pub by_port: BTreeMap<u16, ProtocolName>,
}

impl ProtocolChoice {
    fn for_port(&self, port: u16) -> Option<ProtocolName> {
        self.by_port
            .get(&port)
            .copied()
            .or_else(|| ProtocolName::by_port(port))
    }

    fn is_server_port(&self, port: u16) -> bool {
        self.for_port(port).is_some()
    }
}

#[derive(Default)]
struct Direction {
    /// Sequence number of the next byte expected.
    next: Option<u32>,
    /// Where TCP held its data back until the peer's ACK.
    watch: super::transport::Watch,
    /// Segments ahead of `next`, by their distance from it when they came.
    held: BTreeMap<u32, (Nanos, Vec<u8>, usize)>,
    fin: bool,
}

struct Connection {
    client: u32,
    server: u32,
    server_port: u16,
    framer: Option<(ProtocolName, Box<dyn Framer>)>,
    to_server: Direction,
    to_client: Direction,
}

impl Connection {
    /// The direction whose bytes `side` sends.
    fn sent_by(&mut self, side: Side) -> &mut Direction {
        match side {
            Side::Client => &mut self.to_server,
            Side::Server => &mut self.to_client,
        }
    }
}

struct UdpEntry {
    client: u32,
    pair: UdpPair,
    protocol: ProtocolName,
}

/// All flows of one capture, and the messages cut so far.
pub struct Flows<'a> {
    choice: &'a ProtocolChoice,
    /// IPv4 endpoints by [`packed`] address and port: compared and hashed as one
    /// number, since most packets are IPv4.
    v4_ids: HashMap<u64, u32>,
    v6_ids: HashMap<SocketAddr, u32>,
    /// The IPv4 endpoints met last ([`packed`]; `u64::MAX` where none).
    recent: [(u64, u32); 4],
    next_recent: usize,
    /// Every endpoint seen, by index.
    pub endpoints: Vec<SocketAddr>,
    tcp: HashMap<(u32, u32), Connection>,
    udp: HashMap<(u32, u32), UdpEntry>,
    /// Messages cut, in the order they completed.
    pub messages: Vec<CaptureMessage>,
    output: Output,
}

/// Which of two endpoints of a connection whose start was not captured is its client
/// (first) and which its server: the one on a port a protocol owns serves, else the
/// one on the lower port.
fn guess_client(
    endpoints: &[SocketAddr],
    choice: &ProtocolChoice,
    from: u32,
    to: u32,
) -> (u32, u32) {
    let (from_port, to_port) = (
        endpoints[from as usize].port(),
        endpoints[to as usize].port(),
    );
    let from_serves = choice.is_server_port(from_port);
    let to_serves = choice.is_server_port(to_port);
    if from_serves && !to_serves {
        (to, from)
    } else if to_serves && !from_serves {
        (from, to)
    } else if from_port < to_port {
        (to, from)
    } else {
        (from, to)
    }
}

/// An IPv4 address and port as one number below 2⁴⁸.
fn packed(address: std::net::SocketAddrV4) -> u64 {
    u64::from(u32::from(*address.ip())) << 16 | u64::from(address.port())
}

fn key(a: u32, b: u32) -> (u32, u32) {
    (a.min(b), a.max(b))
}

impl<'a> Flows<'a> {
    /// No flows yet.
    pub fn new(choice: &'a ProtocolChoice) -> Self {
        Flows {
            choice,
            v4_ids: HashMap::new(),
            v6_ids: HashMap::new(),
            recent: [(u64::MAX, u32::MAX); 4],
            next_recent: 0,
            endpoints: Vec::new(),
            tcp: HashMap::new(),
            udp: HashMap::new(),
            messages: Vec::new(),
            output: Output::default(),
        }
    }

    fn endpoint(&mut self, address: SocketAddr) -> u32 {
        let SocketAddr::V4(v4) = address else {
            let next = self.endpoints.len() as u32;
            return *self.v6_ids.entry(address).or_insert_with(|| {
                self.endpoints.push(address);
                next
            });
        };
        let key = packed(v4);
        // Consecutive packets mostly belong to a few connections: look there first.
        if let Some(&(_, id)) = self.recent.iter().find(|(k, _)| *k == key) {
            return id;
        }
        let next = self.endpoints.len() as u32;
        let id = *self.v4_ids.entry(key).or_insert_with(|| {
            self.endpoints.push(address);
            next
        });
        self.recent[self.next_recent] = (key, id);
        self.next_recent = (self.next_recent + 1) % self.recent.len();
        id
    }

    /// One decoded segment, captured at `time`.
    pub fn segment(&mut self, time: Nanos, segment: &Segment<'_>, stats: &mut FileStats) {
        let from = self.endpoint(segment.from);
        let to = self.endpoint(segment.to);
        match segment.transport {
            Transport::Tcp(tcp) => self.tcp_segment(time, from, to, segment, tcp, stats),
            Transport::Udp => self.datagram(time, from, to, segment, stats),
        }
        self.collect(stats);
    }

    fn tcp_segment(
        &mut self,
        time: Nanos,
        from: u32,
        to: u32,
        segment: &Segment<'_>,
        tcp: super::decode::TcpFields,
        stats: &mut FileStats,
    ) {
        let flow = key(from, to);
        let opening = tcp.syn && !tcp.ack_flag;
        if opening {
            // A SYN on a known pair is a new connection reusing the ports, unless it is
            // the same SYN again.
            if let Some(old) = self.tcp.get(&flow) {
                let same =
                    old.client == from && old.to_server.next == Some(tcp.seq.wrapping_add(1));
                if same {
                    stats.retransmitted_segments += 1;
                    return;
                }
                self.close(flow, stats);
            }
        }
        let (choice, endpoints) = (self.choice, &self.endpoints);
        // One lookup per segment: the connection, or where a new one goes.
        let connection = match self.tcp.entry(flow) {
            hashbrown::hash_map::Entry::Occupied(known) => known.into_mut(),
            hashbrown::hash_map::Entry::Vacant(new) => {
                if !tcp.syn && segment.wire_len == 0 {
                    // An acknowledgement, reset or close of a connection that is over or
                    // whose start was not captured: nothing to use.
                    return;
                }
                let (client, server) = if tcp.syn {
                    if tcp.ack_flag {
                        (to, from)
                    } else {
                        (from, to)
                    }
                } else {
                    stats.flows_without_handshake += 1;
                    guess_client(endpoints, choice, from, to)
                };
                stats.tcp_flows += 1;
                new.insert(Connection {
                    client,
                    server,
                    server_port: endpoints[server as usize].port(),
                    framer: None,
                    to_server: Direction::default(),
                    to_client: Direction::default(),
                })
            }
        };
        let side = if from == connection.client {
            Side::Client
        } else {
            Side::Server
        };
        if tcp.rst {
            self.close(flow, stats);
            return;
        }
        if tcp.ack_flag {
            // It acknowledges what the other side sent.
            let other = match side {
                Side::Client => Side::Server,
                Side::Server => Side::Client,
            };
            connection.sent_by(other).watch.acked(time, tcp.ack);
        }
        // Fields apart, not `sent_by`: the framer is borrowed beside it.
        let direction = match side {
            Side::Client => &mut connection.to_server,
            Side::Server => &mut connection.to_client,
        };
        let mut seq = tcp.seq;
        if tcp.syn {
            seq = seq.wrapping_add(1);
            if direction.next.is_none() {
                direction.next = Some(seq);
            }
        }
        if segment.wire_len > 0 {
            if connection.framer.is_none() {
                connection.framer = Some(choose(
                    choice,
                    connection.server_port,
                    side,
                    segment.payload,
                    stats,
                ));
            }
            let (protocol, framer) = connection.framer.as_mut().expect("chosen above");
            let ends = FlowEnds {
                client: connection.client,
                server: connection.server,
                protocol: *protocol,
                tcp: true,
            };
            Delivery {
                direction,
                framer: framer.as_mut(),
                side,
                output: &mut self.output,
                stats,
            }
            .deliver(seq, time, segment.payload, segment.wire_len);
            let before = self.messages.len();
            take_messages(&mut self.messages, &mut self.output, ends, stats);
            for message in &mut self.messages[before..] {
                let framed = &message.framed;
                let sent = connection.sent_by(framed.from);
                let held = sent.watch.claim(framed.first, framed.last);
                if let Some(stall) = held {
                    let micros = (stall.waited.max(0) + 500) / 1_000;
                    message.held_us = u32::try_from(micros).unwrap_or(u32::MAX);
                    message.held_why = Some(stall.cause);
                    let what = match framed.kind {
                        crate::trace::Kind::Call => "calls",
                        crate::trace::Kind::Return => "replies",
                        crate::trace::Kind::Free => "messages",
                    };
                    stats.stalled(&format!("{} {what}", message.protocol.as_str()), stall);
                }
            }
        }
        if tcp.fin {
            connection.sent_by(side).fin = true;
            if connection.to_server.fin && connection.to_client.fin {
                self.close(flow, stats);
            }
        }
    }

    fn guess_client(&self, from: u32, to: u32) -> (u32, u32) {
        guess_client(&self.endpoints, self.choice, from, to)
    }

    fn datagram(
        &mut self,
        time: Nanos,
        from: u32,
        to: u32,
        segment: &Segment<'_>,
        stats: &mut FileStats,
    ) {
        if segment.payload.len() < segment.wire_len {
            stats.skip("UDP datagrams cut short by the snaplen");
            return;
        }
        let flow = key(from, to);
        if !self.udp.contains_key(&flow) {
            let (client, server) = self.guess_client(from, to);
            let port = self.endpoints[server as usize].port();
            // TCP-only protocols (QUIC on 443 is not TLS over TCP): by datagrams.
            let protocol = self
                .choice
                .for_port(port)
                .map_or(ProtocolName::Udp, ProtocolName::over_udp);
            self.udp.insert(
                flow,
                UdpEntry {
                    client,
                    pair: UdpPair::new(protocol),
                    protocol,
                },
            );
        }
        let entry = self.udp.get_mut(&flow).expect("inserted above");
        let side = if from == entry.client {
            Side::Client
        } else {
            Side::Server
        };
        entry
            .pair
            .datagram(side, time, segment.payload, &mut self.output);
        let ends = FlowEnds {
            client: entry.client,
            server: if entry.client == from { to } else { from },
            protocol: entry.protocol,
            tcp: false,
        };
        take_messages(&mut self.messages, &mut self.output, ends, stats);
    }

    /// Counts the problems the framers met.
    fn collect(&mut self, stats: &mut FileStats) {
        for problem in self.output.problems.drain(..) {
            stats.skip(problem);
        }
        for what in self.output.housekeeping.drain(..) {
            stats.housekeeping(what);
        }
    }

    fn close(&mut self, flow: (u32, u32), stats: &mut FileStats) {
        if let Some(mut connection) = self.tcp.remove(&flow) {
            if let Some((_, framer)) = &mut connection.framer {
                // Segments still waiting on a hole: the hole will not be filled now.
                for (side, direction) in [
                    (Side::Client, &mut connection.to_server),
                    (Side::Server, &mut connection.to_client),
                ] {
                    let mut delivery = Delivery {
                        direction,
                        framer: framer.as_mut(),
                        side,
                        output: &mut self.output,
                        stats,
                    };
                    while let Some((&distance, _)) = delivery.direction.held.iter().next() {
                        delivery.skip_hole(distance);
                    }
                }
                framer.close(&mut self.output);
            }
            let protocol = connection
                .framer
                .as_ref()
                .map_or(ProtocolName::Tcp, |f| f.0);
            let ends = FlowEnds {
                client: connection.client,
                server: connection.server,
                protocol,
                tcp: true,
            };
            take_messages(&mut self.messages, &mut self.output, ends, stats);
        }
    }

    /// The messages cut so far, with the tables they point into.
    pub fn batch(&self) -> super::MessageBatch<'_> {
        super::MessageBatch {
            messages: &self.messages,
            endpoints: &self.endpoints,
            operations: &self.output.operations,
            propagated: &self.output.propagated,
        }
    }

    /// The capture ended: flush every connection and port pair, in a fixed order.
    pub fn finish(mut self, stats: &mut FileStats) -> Followed {
        let mut open: Vec<(u32, u32)> = self.tcp.keys().copied().collect();
        open.sort_unstable();
        for flow in open {
            self.close(flow, stats);
        }
        let mut pairs: Vec<(u32, u32)> = self.udp.keys().copied().collect();
        pairs.sort_unstable();
        for flow in pairs {
            let mut entry = self.udp.remove(&flow).expect("listed");
            entry.pair.close(&mut self.output);
            let ends = FlowEnds {
                client: entry.client,
                server: if entry.client == flow.0 {
                    flow.1
                } else {
                    flow.0
                },
                protocol: entry.protocol,
                tcp: false,
            };
            take_messages(&mut self.messages, &mut self.output, ends, stats);
        }
        self.collect(stats);
        Followed {
            endpoints: self.endpoints,
            messages: self.messages,
            operations: self.output.operations,
            propagated: self.output.propagated,
        }
    }
}

/// What a capture's flows gave.
pub struct Followed {
    /// Every endpoint seen, by index.
    pub endpoints: Vec<SocketAddr>,
    /// The messages cut, in the order they completed.
    pub messages: Vec<CaptureMessage>,
    /// The operation names the messages refer to, by [`Operation`] index.
    ///
    /// [`Operation`]: super::protocol::Operation
    pub operations: Vec<String>,
    /// The propagated ids the messages refer to, by [`Propagated`] index.
    ///
    /// [`Propagated`]: super::protocol::Propagated
    pub propagated: Vec<String>,
}

impl Followed {
    /// The messages cut, with the tables they point into.
    pub fn batch(&self) -> super::MessageBatch<'_> {
        super::MessageBatch {
            messages: &self.messages,
            endpoints: &self.endpoints,
            operations: &self.operations,
            propagated: &self.propagated,
        }
    }
}

/// The ends of a flow and how it is read, for the messages its framer produced.
#[derive(Clone, Copy)]
struct FlowEnds {
    client: u32,
    server: u32,
    protocol: ProtocolName,
    tcp: bool,
}

/// Moves the messages a framer produced into `messages`, counting them.
fn take_messages(
    messages: &mut Vec<CaptureMessage>,
    output: &mut Output,
    ends: FlowEnds,
    stats: &mut FileStats,
) {
    let broker = ends.protocol.spec().broker;
    let operations = &output.operations;
    for framed in output.messages.drain(..) {
        stats.message(ends.protocol.as_str());
        if broker {
            let kind = match framed.kind {
                Kind::Return => "answer",
                _ => operations
                    .get(framed.operation.0 as usize)
                    .map_or("", String::as_str)
                    .split(' ')
                    .next()
                    .filter(|verb| !verb.is_empty())
                    .unwrap_or("message"),
            };
            stats.broker_message(ends.protocol.as_str(), kind);
        }
        messages.push(CaptureMessage {
            client: ends.client,
            server: ends.server,
            tcp: ends.tcp,
            protocol: ends.protocol,
            framed,
            held_us: 0,
            held_why: None,
        });
    }
}

fn choose(
    choice: &ProtocolChoice,
    server_port: u16,
    side: Side,
    first: &[u8],
    stats: &mut FileStats,
) -> (ProtocolName, Box<dyn Framer>) {
    let by_port = ProtocolName::by_port(server_port);
    let protocol = if let Some(&forced) = choice.by_port.get(&server_port) {
        forced
    } else if let Some(unmistakable) = (side == Side::Client)
        .then(|| ProtocolName::unmistakable(first))
        .flatten()
    {
        unmistakable
    } else if side == Side::Server {
        // The server spoke first: its own greeting is all there is to check a guess
        // against (NATS's INFO), else the port decides.
        match by_port {
            Some(by_port) if by_port.sniff_server(first) != Some(false) => by_port,
            _ => ProtocolName::guess_server(first)
                .or(by_port)
                .unwrap_or(ProtocolName::Tcp),
        }
    } else {
        match by_port {
            Some(by_port) if by_port.sniff(first) => by_port,
            by_port => {
                if by_port.is_some() {
                    stats.skip(super::stats::NOT_THE_PORTS_CONTENT);
                }
                ProtocolName::guess(first).unwrap_or(ProtocolName::Tcp)
            }
        }
    };
    (protocol, protocol.tcp_framer())
}

/// One direction of a connection on its way to the framer: where its bytes go and
/// where what happens on the way is counted.
struct Delivery<'a> {
    direction: &'a mut Direction,
    framer: &'a mut dyn Framer,
    side: Side,
    output: &'a mut Output,
    stats: &'a mut FileStats,
}

impl Delivery<'_> {
    /// Takes a segment starting at `seq` whose `bytes` are the captured part of its
    /// `wire_len`: old bytes dropped, early ones held, in-order ones framed.
    fn deliver(&mut self, seq: u32, time: Nanos, bytes: &[u8], wire_len: usize) {
        let next = *self.direction.next.get_or_insert(seq);
        let ahead = seq.wrapping_sub(next) as i32;
        if ahead < 0 {
            let overlap = ahead.unsigned_abs() as usize;
            if overlap >= wire_len {
                self.stats.retransmitted_segments += 1;
                return;
            }
            // Part old, part new: keep the new part.
            let kept = bytes.get(overlap..).unwrap_or(&[]);
            self.in_order(next, time, kept, wire_len - overlap);
        } else if ahead > 0 {
            self.stats.out_of_order_segments += 1;
            self.direction
                .held
                .insert(ahead as u32, (time, bytes.to_vec(), wire_len));
            if self.direction.held.len() > MAX_HELD_SEGMENTS {
                // The hole will not be filled: skip it.
                let (&distance, _) = self.direction.held.iter().next().expect("not empty");
                self.skip_hole(distance);
            }
        } else {
            self.in_order(seq, time, bytes, wire_len);
        }
        // Whatever path the segment took, held segments it reaches follow it.
        self.drain_held();
    }

    /// Gives up on the `distance` bytes before the first held segment, and delivers
    /// what follows them.
    fn skip_hole(&mut self, distance: u32) {
        if distance > 0 {
            count_hole(self.stats, distance as usize);
            self.framer.gap(self.side, distance as usize, self.output);
            let next = self.direction.next.expect("set before anything is held");
            self.direction.next = Some(next.wrapping_add(distance));
            rebase(self.direction, distance);
        }
        self.drain_held();
    }

    fn drain_held(&mut self) {
        while let Some(entry) = self.direction.held.first_entry() {
            if *entry.key() != 0 {
                return;
            }
            let (time, bytes, wire_len) = entry.remove();
            if wire_len == 0 {
                self.stats.retransmitted_segments += 1;
                continue;
            }
            let seq = self.direction.next.expect("set before anything is held");
            self.in_order(seq, time, &bytes, wire_len);
        }
    }

    /// Hands bytes that start at `next` to the framer and moves `next` past them; the
    /// caller then drains held segments.
    fn in_order(&mut self, seq: u32, time: Nanos, bytes: &[u8], wire_len: usize) {
        if !bytes.is_empty() {
            self.framer
                .data(self.side, Chunk { time, seq, bytes }, self.output);
        }
        self.direction.watch.data(time, wire_len as u32);
        let missing = wire_len.saturating_sub(bytes.len());
        if missing > 0 {
            count_hole(self.stats, missing);
            self.framer.gap(self.side, missing, self.output);
        }
        self.direction.next = Some(seq.wrapping_add(wire_len as u32));
        rebase(self.direction, wire_len as u32);
    }
}

fn count_hole(stats: &mut FileStats, bytes: usize) {
    stats.stream_gaps += 1;
    stats.gap_bytes += bytes as u64;
}

/// Held segments are keyed by distance from `next`; `next` moved on by `by`.
fn rebase(direction: &mut Direction, by: u32) {
    if direction.held.is_empty() || by == 0 {
        return;
    }
    let held = std::mem::take(&mut direction.held);
    for (distance, segment) in held {
        let moved = distance as i64 - i64::from(by);
        // A held segment now behind `next` keeps only what is new.
        direction
            .held
            .insert(moved.max(0) as u32, segment_tail(segment, moved));
    }
}

fn segment_tail(
    (time, bytes, wire_len): (Nanos, Vec<u8>, usize),
    moved: i64,
) -> (Nanos, Vec<u8>, usize) {
    if moved >= 0 {
        return (time, bytes, wire_len);
    }
    let cut = (-moved) as usize;
    let bytes = bytes.get(cut..).map(<[u8]>::to_vec).unwrap_or_default();
    (time, bytes, wire_len.saturating_sub(cut))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::decode::TcpFields;
    use crate::trace::Kind;

    const CLIENT: &str = "10.0.0.1:40000";
    const SERVER: &str = "10.0.0.2:6379";

    fn segment<'a>(from: &str, to: &str, seq: u32, flags: &str, payload: &'a [u8]) -> Segment<'a> {
        Segment {
            from: from.parse().unwrap(),
            to: to.parse().unwrap(),
            transport: Transport::Tcp(TcpFields {
                seq,
                ack: 0,
                syn: flags.contains('S'),
                ack_flag: flags.contains('A'),
                fin: flags.contains('F'),
                rst: flags.contains('R'),
            }),
            payload,
            wire_len: payload.len(),
            ttl: 64,
        }
    }

    fn run(segments: &[(Nanos, Segment<'_>)]) -> (Vec<(Side, Kind, Nanos)>, FileStats) {
        let choice = ProtocolChoice::default();
        let mut flows = Flows::new(&choice);
        let mut stats = FileStats::default();
        for (time, s) in segments {
            flows.segment(*time, s, &mut stats);
        }
        let messages = flows.finish(&mut stats).messages;
        let got = messages
            .iter()
            .map(|m| (m.framed.from, m.framed.kind, m.framed.first))
            .collect();
        (got, stats)
    }

    #[test]
    fn retransmissions_and_reordering_do_not_change_the_messages() {
        let get = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let (head, tail) = get.split_at(8);
        let reply = b"$1\r\nv\r\n";
        let clean = [
            (1, segment(CLIENT, SERVER, 100, "S", b"")),
            (2, segment(SERVER, CLIENT, 900, "SA", b"")),
            (3, segment(CLIENT, SERVER, 101, "A", head)),
            (4, segment(CLIENT, SERVER, 109, "A", tail)),
            (5, segment(SERVER, CLIENT, 901, "A", reply)),
        ];
        let (expected, stats) = run(&clean);
        assert_eq!(
            expected,
            vec![
                (Side::Client, Kind::Call, 3),
                (Side::Server, Kind::Return, 5)
            ]
        );
        assert_eq!(stats.messages.get("redis"), Some(&2));
        let messy = [
            (1, segment(CLIENT, SERVER, 100, "S", b"")),
            (2, segment(SERVER, CLIENT, 900, "SA", b"")),
            (3, segment(CLIENT, SERVER, 109, "A", tail)), // ahead of its turn
            (3, segment(CLIENT, SERVER, 101, "A", head)),
            (4, segment(CLIENT, SERVER, 101, "A", head)), // retransmitted
            (5, segment(SERVER, CLIENT, 901, "A", reply)),
            (6, segment(SERVER, CLIENT, 901, "A", reply)), // retransmitted
        ];
        let (got, stats) = run(&messy);
        assert_eq!(got, expected);
        assert_eq!(stats.retransmitted_segments, 2);
        assert_eq!(stats.out_of_order_segments, 1);
        assert_eq!(stats.flows_without_handshake, 0);
    }

    #[test]
    fn without_a_handshake_the_known_port_is_the_server() {
        let (got, stats) = run(&[
            (1, segment(SERVER, CLIENT, 900, "A", b"+OK\r\n")),
            (
                2,
                segment(CLIENT, SERVER, 100, "A", b"*1\r\n$4\r\nPING\r\n"),
            ),
            (3, segment(SERVER, CLIENT, 905, "A", b"+PONG\r\n")),
        ]);
        assert_eq!(stats.flows_without_handshake, 1);
        // The server's first words answer nothing: a free-form message; then one call.
        assert_eq!(
            got,
            vec![
                (Side::Server, Kind::Free, 1),
                (Side::Client, Kind::Call, 2),
                (Side::Server, Kind::Return, 3)
            ]
        );
    }

    #[test]
    fn a_hole_in_the_stream_is_counted_and_the_protocol_finds_its_step_again() {
        let (got, stats) = run(&[
            (1, segment(CLIENT, SERVER, 100, "S", b"")),
            (
                2,
                segment(CLIENT, SERVER, 101, "A", b"*1\r\n$4\r\nPING\r\n"),
            ),
            (3, segment(SERVER, CLIENT, 901, "A", b"+PONG\r\n")),
            // 14 bytes of the second request were never captured.
            (
                4,
                segment(CLIENT, SERVER, 115 + 14, "A", b"*1\r\n$4\r\nPING\r\n"),
            ),
        ]);
        assert_eq!(stats.out_of_order_segments, 1);
        assert_eq!(stats.stream_gaps, 1);
        assert_eq!(stats.gap_bytes, 14);
        assert_eq!(
            got,
            vec![
                (Side::Client, Kind::Call, 2),
                (Side::Server, Kind::Return, 3),
                (Side::Client, Kind::Call, 4)
            ]
        );
    }
}

#[cfg(test)]
mod udp_tests {
    use super::*;
    use crate::trace::Kind;

    fn datagram<'a>(from: &str, to: &str, payload: &'a [u8]) -> Segment<'a> {
        Segment {
            from: from.parse().unwrap(),
            to: to.parse().unwrap(),
            transport: Transport::Udp,
            payload,
            wire_len: payload.len(),
            ttl: 64,
        }
    }

    fn dns(id: u16, response: bool) -> Vec<u8> {
        let mut header = id.to_be_bytes().to_vec();
        header.extend_from_slice(&[
            if response { 0x81 } else { 0x01 },
            0,
            0,
            1,
            0,
            0,
            0,
            0,
            0,
            0,
        ]);
        header
    }

    #[test]
    fn dns_answers_match_their_queries_by_id_in_any_order() {
        let choice = ProtocolChoice::default();
        let mut flows = Flows::new(&choice);
        let mut stats = FileStats::default();
        let (client, server) = ("10.0.0.1:5000", "10.0.0.53:53");
        let (q1, q2, a2, a1) = (dns(7, false), dns(8, false), dns(8, true), dns(7, true));
        flows.segment(1, &datagram(client, server, &q1), &mut stats);
        flows.segment(2, &datagram(client, server, &q2), &mut stats);
        flows.segment(3, &datagram(server, client, &a2), &mut stats);
        flows.segment(4, &datagram(server, client, &a1), &mut stats);
        let followed = flows.finish(&mut stats);
        let (endpoints, messages) = (followed.endpoints, followed.messages);
        let got: Vec<(Kind, String, Nanos, String)> = messages
            .iter()
            .map(|m| {
                (
                    m.framed.kind,
                    m.framed.key.to_string(),
                    m.framed.first,
                    endpoints[m.server as usize].to_string(),
                )
            })
            .collect();
        let server = server.to_string();
        assert_eq!(
            got,
            vec![
                (Kind::Call, "x7".into(), 1, server.clone()),
                (Kind::Call, "x8".into(), 2, server.clone()),
                (Kind::Return, "x8".into(), 3, server.clone()),
                (Kind::Return, "x7".into(), 4, server),
            ]
        );
        assert_eq!(stats.messages.get("dns"), Some(&4));
    }
}

#[cfg(test)]
mod size {
    /// A capture holds millions of messages: what TCP held back must fit in the room
    /// the other fields leave (72 bytes before it was kept).
    #[test]
    fn a_captured_message_stays_72_bytes() {
        assert_eq!(std::mem::size_of::<super::CaptureMessage>(), 72);
    }
}
