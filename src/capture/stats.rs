//! Counts of what the capture reader saw, built and set aside, per file and in all,
//! and their summary for stderr. Every packet or byte not turned into a message is
//! counted here with its reason.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Bytes a framer could not read as the protocol it was given: where these are why a
/// capture gave no message, naming its protocol (`--protocol PORT=NAME`) may help, as
/// it cannot where the connections carried no data or every datagram was cut short.
pub const NOT_THE_CONNECTIONS_PROTOCOL: &str =
    "bytes that do not parse as the connection's protocol";
/// See [`NOT_THE_CONNECTIONS_PROTOCOL`]: datagrams.
pub const NOT_THE_PORTS_PROTOCOL: &str = "datagrams that do not parse as the port's protocol";
/// See [`NOT_THE_CONNECTIONS_PROTOCOL`]: a connection read by its content, not its port.
pub const NOT_THE_PORTS_CONTENT: &str =
    "connections whose content did not match their port's protocol (read by content)";

/// What one capture file gave.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStats {
    /// Packets read.
    pub packets: u64,
    /// IPv4 packets.
    pub ipv4: u64,
    /// IPv6 packets.
    pub ipv6: u64,
    /// TCP segments.
    pub tcp: u64,
    /// TCP segments that carried data (on the wire, if not all captured): where there
    /// are none, a capture of handshakes and resets gave no message for want of bytes,
    /// not of a protocol.
    #[serde(default)]
    pub tcp_with_data: u64,
    /// UDP datagrams.
    pub udp: u64,
    /// Packets the snaplen cut short (their headers are still used).
    pub snaplen_truncated: u64,
    /// TCP connections seen.
    pub tcp_flows: u64,
    /// TCP connections whose handshake was not captured: the server was guessed by
    /// port (a known protocol's port, else the lower port).
    pub flows_without_handshake: u64,
    /// TCP segments that repeated bytes already seen (retransmissions, duplicates).
    pub retransmitted_segments: u64,
    /// TCP segments that arrived before bytes they follow.
    pub out_of_order_segments: u64,
    /// Holes in TCP streams (bytes never captured), and their bytes.
    pub stream_gaps: u64,
    /// Bytes in those holes.
    pub gap_bytes: u64,
    /// Messages built, by protocol.
    pub messages: BTreeMap<String, u64>,
    /// A broker protocol's messages by kind (`publish`, `deliver`, `request`,
    /// `answer`…), by protocol.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub broker_messages: BTreeMap<String, BTreeMap<String, u64>>,
    /// Packets, bytes or messages set aside, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Protocol units read that are neither messages nor problems (HTTP/2 SETTINGS
    /// frames, a database's handshake), by what they are.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub housekeeping: BTreeMap<String, u64>,
    /// Addresses the capture's DNS responses gave a name (the node's name where
    /// nothing else names it).
    #[serde(skip_serializing_if = "is_zero", default)]
    pub dns_named: u64,
    /// Messages part of which TCP held back until the peer's acknowledgement came
    /// ([`super::transport`]), by what they were (protocol, calls or replies) and why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub transport_stalls: BTreeMap<String, Stalled>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Messages held back by their transport, and for how long.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stalled {
    /// How many.
    pub messages: u64,
    /// Their time held back, summed.
    pub waited_ns: u64,
    /// The longest.
    pub longest_ns: u64,
}

impl FileStats {
    /// Counts one thing set aside for `reason`.
    pub fn skip(&mut self, reason: &str) {
        self.skip_n(reason, 1);
    }

    /// Counts `n` things set aside for `reason`.
    pub fn skip_n(&mut self, reason: &str, n: u64) {
        if n == 0 {
            return;
        }
        match self.skipped.get_mut(reason) {
            Some(count) => *count += n,
            None => {
                self.skipped.insert(reason.to_string(), n);
            }
        }
    }

    /// Counts one protocol unit that is housekeeping, not a message.
    pub fn housekeeping(&mut self, what: &str) {
        match self.housekeeping.get_mut(what) {
            Some(count) => *count += 1,
            None => {
                self.housekeeping.insert(what.to_string(), 1);
            }
        }
    }

    /// Counts a packet of a link type this reader does not decode.
    pub fn skip_linktype(&mut self, linktype: i32) {
        self.skip(&format!("unsupported link type {linktype}"));
    }

    /// Counts a message built by `protocol`.
    pub fn message(&mut self, protocol: &str) {
        match self.messages.get_mut(protocol) {
            Some(count) => *count += 1,
            None => {
                self.messages.insert(protocol.to_string(), 1);
            }
        }
    }

    /// Counts a broker protocol's message of a kind.
    pub fn broker_message(&mut self, protocol: &str, kind: &str) {
        let kinds = match self.broker_messages.get_mut(protocol) {
            Some(kinds) => kinds,
            None => self
                .broker_messages
                .entry(protocol.to_string())
                .or_default(),
        };
        match kinds.get_mut(kind) {
            Some(count) => *count += 1,
            None => {
                kinds.insert(kind.to_string(), 1);
            }
        }
    }

    /// Adds another file's counts to these.
    pub fn add(&mut self, other: &FileStats) {
        self.packets += other.packets;
        self.ipv4 += other.ipv4;
        self.ipv6 += other.ipv6;
        self.tcp += other.tcp;
        self.tcp_with_data += other.tcp_with_data;
        self.udp += other.udp;
        self.snaplen_truncated += other.snaplen_truncated;
        self.tcp_flows += other.tcp_flows;
        self.flows_without_handshake += other.flows_without_handshake;
        self.retransmitted_segments += other.retransmitted_segments;
        self.out_of_order_segments += other.out_of_order_segments;
        self.stream_gaps += other.stream_gaps;
        self.gap_bytes += other.gap_bytes;
        self.dns_named += other.dns_named;
        for (protocol, kinds) in &other.broker_messages {
            let into = self.broker_messages.entry(protocol.clone()).or_default();
            for (kind, n) in kinds {
                *into.entry(kind.clone()).or_default() += n;
            }
        }
        for (protocol, n) in &other.messages {
            *self.messages.entry(protocol.clone()).or_default() += n;
        }
        for (reason, n) in &other.skipped {
            *self.skipped.entry(reason.clone()).or_default() += n;
        }
        for (what, n) in &other.housekeeping {
            *self.housekeeping.entry(what.clone()).or_default() += n;
        }
        for (what, stalled) in &other.transport_stalls {
            let into = self.transport_stalls.entry(what.clone()).or_default();
            into.messages += stalled.messages;
            into.waited_ns = into.waited_ns.saturating_add(stalled.waited_ns);
            into.longest_ns = into.longest_ns.max(stalled.longest_ns);
        }
    }

    /// Counts a message of `what` (protocol, calls or replies) held back by `stall`.
    pub fn stalled(&mut self, what: &str, stall: super::transport::Stall) {
        let key = format!("{what} ({})", stall.cause.meaning());
        let stalled = self.transport_stalls.entry(key).or_default();
        let waited = stall.waited.max(0) as u64;
        stalled.messages += 1;
        stalled.waited_ns = stalled.waited_ns.saturating_add(waited);
        stalled.longest_ns = stalled.longest_ns.max(waited);
    }

    /// Whether a framer met bytes that were not the protocol it read them as
    /// ([`NOT_THE_CONNECTIONS_PROTOCOL`] and the like).
    pub fn misread(&self) -> bool {
        [
            NOT_THE_CONNECTIONS_PROTOCOL,
            NOT_THE_PORTS_PROTOCOL,
            NOT_THE_PORTS_CONTENT,
        ]
        .iter()
        .any(|reason| self.skipped.contains_key(*reason))
    }

    /// Messages built, over all protocols.
    pub fn total_messages(&self) -> u64 {
        self.messages.values().sum()
    }
}

impl fmt::Display for FileStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::words::counted;
        write!(
            f,
            "{} (IPv4 {}, IPv6 {}; TCP {}, UDP {}) -> {}",
            counted(self.packets, "packet"),
            self.ipv4,
            self.ipv6,
            self.tcp,
            self.udp,
            counted(self.total_messages(), "message")
        )?;
        if !self.messages.is_empty() {
            let by: Vec<String> = self
                .messages
                .iter()
                .map(|(protocol, n)| format!("{protocol} {n}"))
                .collect();
            write!(f, " ({})", by.join(", "))?;
        }
        for (protocol, kinds) in &self.broker_messages {
            let by: Vec<String> = kinds
                .iter()
                .map(|(kind, n)| {
                    let (one, many) = match kind.as_str() {
                        "publish" => ("publish", "publishes"),
                        "deliver" => ("delivery", "deliveries"),
                        "request" => ("request", "requests"),
                        "answer" => ("answer", "answers"),
                        "get" => ("get", "gets"),
                        _ => ("other message", "other messages"),
                    };
                    crate::words::counted_as(*n, one, many)
                })
                .collect();
            write!(f, "; {protocol}: {}", by.join(", "))?;
        }
        write!(f, "; {}", counted(self.tcp_flows, "TCP connection"))?;
        if self.flows_without_handshake > 0 {
            write!(
                f,
                " ({} without a captured handshake: server guessed by port)",
                self.flows_without_handshake
            )?;
        }
        let mut notes: Vec<String> = [
            (
                self.snaplen_truncated,
                "packet",
                "cut short by the snaplen (headers used)",
            ),
            (
                self.retransmitted_segments,
                "retransmitted or duplicate segment",
                "ignored",
            ),
            (
                self.out_of_order_segments,
                "out-of-order segment",
                "reordered",
            ),
        ]
        .into_iter()
        .filter(|&(n, ..)| n > 0)
        .map(|(n, noun, what)| format!("{} {what}", counted(n, noun)))
        .collect();
        if self.stream_gaps > 0 {
            notes.push(format!(
                "{} in TCP streams ({} never captured)",
                counted(self.stream_gaps, "hole"),
                counted(self.gap_bytes, "byte")
            ));
        }
        if self.dns_named > 0 {
            notes.push(format!(
                "{} named by its DNS answers, where nothing else names them",
                crate::words::counted_as(self.dns_named, "address", "addresses")
            ));
        }
        for (what, n) in &self.housekeeping {
            notes.push(format!("read {n}, not messages: {what}"));
        }
        for (what, stalled) in &self.transport_stalls {
            let mean = stalled.waited_ns as f64 / stalled.messages.max(1) as f64;
            notes.push(format!(
                "held back by TCP until the peer's ACK: {} {what}, {} each on average, {} at most",
                stalled.messages,
                crate::trace::time::human_duration(mean),
                crate::trace::time::human_duration(stalled.longest_ns as f64),
            ));
        }
        for (reason, n) in &self.skipped {
            notes.push(format!("skipped {n}: {reason}"));
        }
        for note in notes {
            write!(f, "\n  {note}")?;
        }
        Ok(())
    }
}

/// [`FileStats`] (de)serialised as its JSON text, in formats that are not self-describing
/// (postcard, [`crate::input::elsewhere`]): the JSON leaves out empty counts, which only a
/// self-describing format can tell.
pub(crate) mod as_json {
    use super::FileStats;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(stats: &FileStats, to: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(stats).map_err(serde::ser::Error::custom)?;
        to.serialize_str(&text)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(from: D) -> Result<FileStats, D::Error> {
        let text = String::deserialize(from)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}
