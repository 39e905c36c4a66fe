//! From the bytes of one connection (or the datagrams of one port pair) to messages:
//! where each message starts and ends, whether it is a call, a return or a free-form
//! message, and which call a return answers. Owns framing and call/return pairing per
//! protocol; knows nothing of packets, hosts or the trace.
//!
//! Two layers. A [`Framer`] receives a connection's in-order bytes and turns them into
//! [`Framed`] messages; there are three: [`turns::Turns`] (the generic request/response
//! rule: a request is what the client sends after the server last spoke),
//! [`turns::Stream`] (every segment is a free-form message), and
//! [`delimited::Delimited`], which buffers bytes and asks a [`Protocol`] where the next
//! whole message ends and what it means. The protocols with real framing (HTTP/1.x,
//! DNS, ONC RPC, Redis RESP, PostgreSQL, memcached, MySQL, Thrift, and the brokers NATS,
//! MQTT, AMQP and Kafka) implement only that question. Which protocol a connection is
//! read as is [`registry`]'s to say.

pub mod amqp;
pub mod delimited;
pub mod dns;
pub mod http;
pub mod http2;
pub mod kafka;
pub mod memcached;
pub mod mqtt;
pub mod mysql;
pub mod nats;
pub mod onc_rpc;
pub mod postgres;
pub mod propagation;
pub mod registry;
pub mod resp;
pub mod thrift;
pub mod tls;
pub mod turns;
pub mod udp;

pub use crate::trace::Status;
use crate::trace::{Kind, Nanos};
pub use registry::{ProtocolName, Spec};
use std::borrow::Cow;
use std::fmt;

/// Which end of a connection sent some bytes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Side {
    /// The end that opened the connection (or sent the request).
    Client,
    /// The end that accepted it.
    Server,
}

impl Side {
    /// The other end.
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// What ties a return to its call; the same at both ends of a message, so it can name
/// the call in the trace.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum CallKey {
    /// The TCP sequence number of the request's first byte.
    Seq(u32),
    /// A transaction id carried by the protocol (ONC RPC xid, DNS id).
    Id(u32),
    /// A digest of a datagram's payload.
    Digest(u64),
    /// An HTTP/2 stream id: the connection plus the stream name the call.
    Stream(u32),
    /// A digest of a correlation id a request and its reply both carry, where they may
    /// travel on different connections between the same two hosts (Kafka request and
    /// reply topics: a producer's connection asks, a consumer's brings the answer): the
    /// hosts plus the correlation name the call, not the connection.
    Correlation(u64),
}

impl CallKey {
    /// Whether the call is named by its hosts, not by its connection
    /// ([`CallKey::Correlation`]).
    pub fn spans_connections(self) -> bool {
        matches!(self, CallKey::Correlation(_))
    }
}

impl fmt::Display for CallKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallKey::Seq(seq) => write!(f, "s{seq}"),
            CallKey::Id(id) => write!(f, "x{id:x}"),
            CallKey::Digest(digest) => write!(f, "h{digest:016x}"),
            CallKey::Stream(id) => write!(f, "s{id}"),
            CallKey::Correlation(key) => write!(f, "c{key:016x}"),
        }
    }
}

/// One message cut out of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Framed {
    /// Who sent it.
    pub from: Side,
    /// Call, return or free-form.
    pub kind: Kind,
    /// The call it is or answers.
    pub key: CallKey,
    /// Time of its first segment.
    pub first: Nanos,
    /// Time of its last segment.
    pub last: Nanos,
    /// What a call asks for (its operation name, in [`Output::operations`]); only on
    /// calls, and only where the protocol names it.
    pub operation: Operation,
    /// How a return answered; only on returns, and only where the protocol says.
    pub status: Status,
    /// The request id or trace context a call carried (in [`Output::propagated`]); only
    /// on calls, and only where the protocol can carry one and this call did.
    pub propagated: Propagated,
    /// What a broker's message carries, as a 32-bit digest of its destination and payload
    /// that is the same on the way in (a publish) and on the way out (its delivery),
    /// wherever it was captured; [`Content::NONE`] for everything else.
    pub content: Content,
}

/// A digest naming a broker message by what it carries: see [`Framed::content`].
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct Content(pub u32);

impl Content {
    /// Not a broker's message, or one whose payload was not read.
    pub const NONE: Content = Content(0);

    /// The digest of a destination and a payload (never [`Content::NONE`]).
    pub fn of(destination: &[u8], payload: &[u8]) -> Content {
        Self::of_parts(destination, [payload])
    }

    /// The digest of a destination and a payload that comes in pieces (AMQP's body
    /// frames): the same as [`Content::of`] of the pieces joined.
    pub fn of_parts<'p>(
        destination: &[u8],
        payload: impl IntoIterator<Item = &'p [u8]>,
    ) -> Content {
        let start = udp::digest(destination) ^ (destination.len() as u64).rotate_left(17);
        let digest = payload.into_iter().flatten().fold(start, |hash, &b| {
            (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        // Folded to 32 bits so that a captured message stays 72 bytes: a wrong link
        // needs another payload of the same digest to reach the same broker between a
        // message and its delivery, about one chance in 2^32 per message there.
        Content(((digest >> 32) as u32 ^ digest as u32).max(1))
    }
}

impl Framed {
    /// A message with no operation name or status.
    pub fn new(from: Side, kind: Kind, key: CallKey, first: Nanos, last: Nanos) -> Self {
        Framed {
            from,
            kind,
            key,
            first,
            last,
            operation: Operation::NONE,
            status: Status::Unknown,
            propagated: Propagated::NONE,
            content: Content::NONE,
        }
    }
}

/// A propagated id's index in the ids a capture's framers found
/// ([`Output::propagated`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Propagated(pub u32);

impl Propagated {
    /// The call carried no id blackbox reads.
    pub const NONE: Propagated = Propagated(u32::MAX);
}

/// An operation name's index in the names a capture's framers gave
/// ([`Output::operations`]).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct Operation(pub u32);

impl Operation {
    /// No name: the protocol does not name operations, or the name could not be read.
    pub const NONE: Operation = Operation(u32::MAX);
}

/// Bytes of one side of a connection, in order, as one segment brought them.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    /// The segment's capture time.
    pub time: Nanos,
    /// The TCP sequence number of the first byte (0 for datagrams).
    pub seq: u32,
    /// The bytes.
    pub bytes: &'a [u8],
}

/// What a framer hands back: messages, and problems to count.
#[derive(Debug, Default)]
pub struct Output {
    /// Messages, in the order they completed.
    pub messages: Vec<Framed>,
    /// Problems met, one entry per occurrence.
    pub problems: Vec<&'static str>,
    /// Protocol units that are not messages and not problems (HTTP/2 SETTINGS or PING
    /// frames, a MySQL handshake), one entry per occurrence: counted so that every
    /// byte is accounted for.
    pub housekeeping: Vec<&'static str>,
    /// Every operation name given so far, by [`Operation`] index.
    pub operations: Vec<String>,
    operation_ids: hashbrown::HashMap<String, u32>,
    /// Every propagated id met so far, by [`Propagated`] index.
    pub propagated: Vec<String>,
    propagated_ids: hashbrown::HashMap<String, u32>,
}

impl Output {
    /// An operation's name; empty for [`Operation::NONE`].
    pub fn name_of(&self, operation: Operation) -> &str {
        self.operations
            .get(operation.0 as usize)
            .map_or("", String::as_str)
    }

    /// The id of an operation name, adding it if it is new. Names are few (a system has
    /// tens of methods), so they are kept once per capture, not per message.
    pub fn operation(&mut self, name: &str) -> Operation {
        if let Some(&id) = self.operation_ids.get(name) {
            return Operation(id);
        }
        let id = self.operations.len() as u32;
        self.operations.push(name.to_string());
        self.operation_ids.insert(name.to_string(), id);
        Operation(id)
    }

    /// The index of a propagated id, adding it if it is new: a request's id comes
    /// back on every call it makes, so each is kept once per capture.
    pub fn propagated(&mut self, id: &str) -> Propagated {
        if let Some(&index) = self.propagated_ids.get(id) {
            return Propagated(index);
        }
        let index = self.propagated.len() as u32;
        self.propagated.push(id.to_string());
        self.propagated_ids.insert(id.to_string(), index);
        Propagated(index)
    }
}

/// Cuts a connection's byte streams into messages.
pub trait Framer: Send {
    /// In-order bytes from one side.
    fn data(&mut self, from: Side, chunk: Chunk<'_>, out: &mut Output);
    /// `bytes` bytes from one side were never captured.
    fn gap(&mut self, from: Side, bytes: usize, out: &mut Output);
    /// The connection ended (or the capture did): flush what is pending.
    fn close(&mut self, out: &mut Output);
}

/// Where the next whole message ends in a side's buffered bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The first `len` bytes are one message meaning `meaning`. `len` may exceed the
    /// bytes given when the protocol knows a message's length before all of it has
    /// come: the rest is then counted off as it arrives, not buffered.
    Message {
        /// Its length in bytes.
        len: usize,
        /// What it is.
        meaning: Meaning,
    },
    /// More bytes are needed to tell.
    NeedMore,
    /// The bytes cannot be this protocol: the stream is out of step.
    Invalid,
}

/// What a whole protocol message is to the RPC model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// A request; with the protocol's transaction id, if it has one, else answered in
    /// order.
    Request(Option<u32>),
    /// A reply; with the transaction id it answers, else to the oldest open request.
    Reply(Option<u32>),
    /// Part of the protocol's housekeeping (an interim reply, an authentication step):
    /// consumed, not a message.
    Housekeeping,
    /// A request no reply will answer (memcached's `noreply`): a free-form message.
    OneWay,
}

/// A protocol with message boundaries.
pub trait Protocol: Send {
    /// Looks at the bytes `from` sent that are not yet consumed.
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step;
    /// At the close of the connection: what bytes left over mean, if they are whole
    /// (HTTP bodies that run to the close).
    fn at_close(&mut self, _from: Side, _bytes: &[u8]) -> Option<Meaning> {
        None
    }
    /// Bytes from `from` were lost: forget any message under way from that side.
    fn reset(&mut self, _from: Side) {}
    /// After lost bytes: could a message start at the start of `bytes`?
    fn could_start(&self, from: Side, bytes: &[u8]) -> bool;
    /// What the message [`Protocol::next`] just cut means beyond its place: the
    /// operation a request asks for, how a reply answered. `head` is the message's
    /// bytes as far as they have come (a long message's first segment, at least).
    fn label<'b>(&mut self, _from: Side, _meaning: Meaning, _head: &'b [u8]) -> Label<'b> {
        Label::default()
    }
    /// After [`Protocol::label`] of a reply: the ids of the other open requests the
    /// same bytes answer (AMQP's `basic.ack` with `multiple` acknowledges every
    /// delivery up to its tag), each then answered with it, at its times.
    fn answered_with(&mut self, _ids: &mut Vec<u32>) {}
    /// Whether the connection can no longer be framed as this protocol and is to be
    /// read by turns from here on (it switched to TLS).
    fn read_by_turns(&self) -> bool {
        false
    }
}

/// What a protocol says of one message: see [`Protocol::label`].
#[derive(Debug, Default)]
pub struct Label<'b> {
    /// A request's operation name.
    pub operation: Option<std::borrow::Cow<'b, str>>,
    /// A reply's status.
    pub status: Status,
    /// The request id or trace context a request carried, as
    /// [`propagation::request_id`] reads it.
    pub propagated: Option<String>,
    /// What a broker's message carries (see [`Framed::content`]).
    pub content: Content,
    /// Further messages the same bytes carry, each a message of its own with the same
    /// times: a Kafka produce's or fetch's records after its first one-way one, each
    /// published by its own request and consumed on its own. A housekeeping message
    /// carries only further messages that are requests or replies.
    pub further: Vec<Further>,
}

/// One further message of a [`Label`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Further {
    /// What it carries.
    pub content: Content,
    /// The request id it carries.
    pub propagated: Option<String>,
    /// Its operation, where it is not the message's own (a produce's records to
    /// another topic).
    pub operation: Option<String>,
    /// Where it is a request or a reply keyed by a correlation id, on whatever
    /// connection its other half travels ([`CallKey::Correlation`]); else one-way.
    pub correlated: Option<Correlated>,
}

/// A further message's half of a request/reply by correlation id, with its key
/// ([`correlation_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Correlated {
    /// It asks, naming where to reply.
    Request(u64),
    /// It answers.
    Reply(u64),
}

/// A correlation id as a 64-bit key (FNV-1a): the same wherever the id is read.
pub fn correlation_key(correlation_id: &[u8]) -> u64 {
    correlation_id
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

/// Most requests, deliveries or publishes a broker reader keeps open on one connection:
/// past it, the oldest (whose answers the capture lost) are forgotten.
pub(crate) const MOST_OPEN: usize = 65_536;

/// Pushes `item`, forgetting the oldest past [`MOST_OPEN`].
pub(crate) fn push_bounded<T>(list: &mut Vec<T>, item: T) {
    if list.len() == MOST_OPEN {
        list.remove(0);
    }
    list.push(item);
}

/// A correlation id as a transaction id of a reader whose own ids mostly leave the top
/// bit clear (AMQP's channels below 2048, MQTT's packet ids): the top bit set, so that
/// the two seldom meet among a connection's open requests.
pub(crate) fn correlation_id_key(correlation_id: &[u8]) -> u32 {
    correlation_key(correlation_id) as u32 | 0x8000_0000
}

/// Finds the end of the first line (the index after its `\n`), looking at no more than
/// `limit` bytes.
pub(crate) fn line_end(bytes: &[u8], limit: usize) -> Option<usize> {
    bytes
        .iter()
        .take(limit)
        .position(|&b| b == b'\n')
        .map(|i| i + 1)
}

/// An SQL statement's first keyword, upper-cased, past blanks, comments and
/// parentheses.
pub fn sql_keyword(sql: &[u8]) -> Cow<'static, str> {
    let mut rest = sql;
    loop {
        let trimmed = rest.trim_ascii_start();
        if let Some(after) = trimmed.strip_prefix(b"/*") {
            rest = match memchr::memmem::find(after, b"*/") {
                Some(end) => &after[end + 2..],
                None => &[],
            };
        } else if trimmed.starts_with(b"--") || trimmed.starts_with(b"#") {
            rest = match memchr::memchr(b'\n', trimmed) {
                Some(end) => &trimmed[end + 1..],
                None => &[],
            };
        } else if let Some(after) = trimmed.strip_prefix(b"(") {
            rest = after;
        } else {
            rest = trimmed;
            break;
        }
    }
    let word: Vec<u8> = rest
        .iter()
        .take_while(|b| b.is_ascii_alphabetic() || **b == b'_')
        .take(24)
        .map(u8::to_ascii_uppercase)
        .collect();
    if word.is_empty() {
        Cow::Borrowed("QUERY")
    } else {
        Cow::Owned(String::from_utf8(word).expect("ASCII letters"))
    }
}

/// The longest broker message held whole before it is cut, so that its payload's digest
/// ([`Content`]) can be taken; longer ones are counted off as they come, with none.
pub(crate) const MAX_HELD: usize = 1024 * 1024;

/// A broker's destination (NATS subject, MQTT topic, AMQP exchange and routing key,
/// Kafka topic) as it goes into an operation name: tokens that name one requester or
/// one message rather than a kind of work (inboxes, long ids, numbers) become `*`, so
/// that a system's names stay few.
pub(crate) fn destination(name: &[u8]) -> String {
    const LONGEST: usize = 96;
    let name = String::from_utf8_lossy(&name[..name.len().min(LONGEST)]);
    let mut out = String::with_capacity(name.len());
    let mut token = String::new();
    let flush = |token: &mut String, out: &mut String| {
        let digits = token.bytes().filter(u8::is_ascii_digit).count();
        let one_of_many = !token.is_empty()
            && (digits == token.len() || (token.len() >= 12 && digits > 0) || token.len() >= 20);
        out.push_str(if one_of_many { "*" } else { token });
        token.clear();
    };
    for c in name.chars() {
        if matches!(c, '.' | '/' | ':') {
            flush(&mut token, &mut out);
            out.push(c);
        } else if c.is_whitespace() || c.is_control() {
            token.push('_');
        } else {
            token.push(c);
        }
    }
    flush(&mut token, &mut out);
    if out.starts_with("_INBOX.") {
        // NATS's inboxes name a requester: `_INBOX.<nuid>.<token>`.
        return "_INBOX".to_string();
    }
    out
}

/// A 32-bit name for a byte string (an inbox, a reply queue), the same wherever the
/// same bytes are read.
pub(crate) fn id_of(bytes: &[u8]) -> u32 {
    let digest = udp::digest(bytes);
    (digest ^ (digest >> 32)) as u32
}
