//! The trace model: messages between named nodes, with exact times, and the builder
//! that turns per-end observations (a `_SENT` line, a `_RECV` line, later a packet)
//! into messages. Owns node/call-id interning and the merging of the two ends of one
//! message; knows nothing of call pairs, causality or clocks.

pub mod ends;
mod interner;
pub mod mbox;
pub mod text;
pub mod time;
pub mod transit;

pub use interner::Interner;
pub use time::Nanos;
pub use transit::{Held, Transit};

use rayon::slice::ParallelSliceMut;

/// What a message means to the RPC model.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Kind {
    /// A request from a caller to a callee.
    Call,
    /// The reply to a call, from the callee back to the caller.
    Return,
    /// A free-form message with no call/return meaning.
    Free,
}

/// Which end of a message an observation was made at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum End {
    /// At the sender, as it left.
    Sent,
    /// At the receiver, as it arrived.
    Received,
}

/// Interned node name. After [`TraceBuilder::finish`], ids order like the names.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct NodeId(pub u32);

/// Interned call id; [`CallId::NONE`] when the trace has none (`-`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct CallId(pub u32);

impl CallId {
    /// No call id: calls and returns are matched by order alone.
    pub const NONE: CallId = CallId(u32::MAX);
}

/// Interned ground-truth tag; [`Truth::NONE`] when the line had none.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Truth(pub u32);

impl Truth {
    /// No truth tag.
    pub const NONE: Truth = Truth(u32::MAX);
}

/// Interned operation name (`/shop.App/GetItem`, `GET /item/{n}`, `SELECT`);
/// [`OperationId::NONE`] when the call has none.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct OperationId(pub u32);

impl OperationId {
    /// No operation name.
    pub const NONE: OperationId = OperationId(u32::MAX);
}

/// Interned propagated request id (a trace id, an `X-Request-ID` value);
/// [`PropagatedId::NONE`] when the call carried none.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct PropagatedId(pub u32);

impl PropagatedId {
    /// No propagated id.
    pub const NONE: PropagatedId = PropagatedId(u32::MAX);
}

/// How a call's answer ended, as its protocol tells it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum Status {
    /// The protocol does not say, or the answer was not read.
    #[default]
    Unknown,
    /// A success (HTTP below 500, gRPC status 0, MySQL OK, a Thrift reply).
    Ok,
    /// A failure, with the protocol's code (HTTP status, gRPC status, MySQL error
    /// number; 0 where the protocol has none, as for RST_STREAM or a Thrift exception).
    Failed(u32),
}

impl Status {
    /// Reads the text trace's `status=` value: `ok`, or a failure's code.
    pub fn parse(text: &str) -> Option<Status> {
        match text {
            "ok" => Some(Status::Ok),
            "-" => Some(Status::Unknown),
            code => code.parse().ok().map(Status::Failed),
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Status::Unknown => f.write_str("-"),
            Status::Ok => f.write_str("ok"),
            Status::Failed(code) => write!(f, "{code}"),
        }
    }
}

/// Marks a time that was not observed. Kept in-band so a message stays 40 bytes.
const ABSENT: Nanos = Nanos::MIN;

/// One message, seen at one or both of its ends. 32 bytes: the kind rides in the top
/// two bits of the call id, since a trace of 2 million messages spends 64 MB here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    sent: Nanos,
    received: Nanos,
    sender: NodeId,
    receiver: NodeId,
    call_and_kind: u32,
    truth: Truth,
}

const KIND_SHIFT: u32 = 30;
const CALL_MASK: u32 = (1 << KIND_SHIFT) - 1;
/// Call ids at or above this are refused; the top bits hold the kind.
pub const MAX_CALL_IDS: u32 = CALL_MASK;

impl Message {
    /// A message observed at one end.
    pub fn observed(
        end: End,
        time: Nanos,
        kind: Kind,
        sender: NodeId,
        receiver: NodeId,
        call_id: CallId,
        truth: Truth,
    ) -> Self {
        let (sent, received) = match end {
            End::Sent => (time, ABSENT),
            End::Received => (ABSENT, time),
        };
        let call = if call_id == CallId::NONE {
            CALL_MASK
        } else {
            call_id.0
        };
        assert!(
            call <= CALL_MASK,
            "call ids are limited to 2^30 (TraceBuilder::call_id enforces it)"
        );
        let kind_bits = match kind {
            Kind::Call => 0,
            Kind::Return => 1,
            Kind::Free => 2,
        };
        Message {
            sent,
            received,
            sender,
            receiver,
            call_and_kind: call | (kind_bits << KIND_SHIFT),
            truth,
        }
    }

    /// Who sent it.
    pub fn sender(&self) -> NodeId {
        self.sender
    }

    /// Who received it.
    pub fn receiver(&self) -> NodeId {
        self.receiver
    }

    /// The id that matches a call with its return.
    pub fn call_id(&self) -> CallId {
        match self.call_and_kind & CALL_MASK {
            CALL_MASK => CallId::NONE,
            id => CallId(id),
        }
    }

    /// Call, return or free-form.
    pub fn kind(&self) -> Kind {
        match self.call_and_kind >> KIND_SHIFT {
            0 => Kind::Call,
            1 => Kind::Return,
            _ => Kind::Free,
        }
    }

    /// Ground-truth path instance, read only by evaluation.
    pub fn truth(&self) -> Truth {
        self.truth
    }

    /// When it left the sender, on the sender's clock.
    pub fn sent(&self) -> Option<Nanos> {
        (self.sent != ABSENT).then_some(self.sent)
    }

    /// When it reached the receiver, on the receiver's clock.
    pub fn received(&self) -> Option<Nanos> {
        (self.received != ABSENT).then_some(self.received)
    }

    /// The time at the sender if seen there, else at the receiver: the sender's view.
    pub fn at_sender(&self) -> Nanos {
        if self.sent != ABSENT {
            self.sent
        } else {
            self.received
        }
    }

    /// The time at the receiver if seen there, else at the sender: the receiver's view.
    pub fn at_receiver(&self) -> Nanos {
        if self.received != ABSENT {
            self.received
        } else {
            self.sent
        }
    }

    /// The same message with the times of the ends it was seen at replaced (a clock
    /// correction); an end not seen stays unseen.
    pub fn with_times(&self, sent: Nanos, received: Nanos) -> Message {
        Message {
            sent: if self.sent != ABSENT { sent } else { ABSENT },
            received: if self.received != ABSENT {
                received
            } else {
                ABSENT
            },
            ..*self
        }
    }

    /// The earlier of the two observations: the message's place in a merged timeline.
    pub fn first_time(&self) -> Nanos {
        match (self.sent(), self.received()) {
            (Some(s), Some(r)) => s.min(r),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => unreachable!("a message is observed at one end at least"),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counts of what went into a trace and what was set aside, for the run summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct InputStats {
    /// Files read.
    pub files: u64,
    /// Lines read, including blank and comment lines.
    pub lines: u64,
    /// Blank or comment-only lines.
    pub blank_or_comment_lines: u64,
    /// Observations (one per trace line or packet) before merging ends.
    pub observations: u64,
    /// Messages after merging.
    pub messages: u64,
    /// Messages seen at both ends.
    pub seen_at_both_ends: u64,
    /// Messages seen only where they were sent.
    pub seen_at_sender_only: u64,
    /// Messages seen only where they were received.
    pub seen_at_receiver_only: u64,
    /// `key=value` fields of text traces whose key is not read (ignored).
    #[serde(skip_serializing_if = "is_zero")]
    pub ignored_fields: u64,
    /// Observations left out of a capture that saw them pass between two hosts whose
    /// own captures hold them (a node's capture of its pods).
    #[serde(skip_serializing_if = "is_zero")]
    pub passed_through: u64,
    /// Observations whose call id came after the 2^30th distinct one of the trace
    /// (the most a message can name): kept without an id, as free-form messages. Only a
    /// trace nested whole can have so many (`--segment-lines 0`).
    #[serde(skip_serializing_if = "is_zero")]
    pub call_ids_past_limit: u64,
    /// The brokers messages went through, each with its deliveries followed back to
    /// the messages that brought them in ([`crate::brokers`]), by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub brokers: Vec<BrokerHops>,
}

/// What one broker's deliveries were linked to: see [`crate::brokers`].
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BrokerHops {
    /// The broker's node.
    pub broker: String,
    /// The messages it sent that carried a payload (deliveries, replies passed on).
    pub deliveries: u64,
    /// Of those, the ones linked to a message it received with the same destination
    /// and payload.
    pub linked: u64,
    /// Of those, the ones whose both ends the broker's own capture saw (else they were
    /// linked by the payload seen at the producer's and the consumer's ends).
    pub through_its_capture: u64,
    /// The time in the broker (from the message in to the delivery out), median and
    /// 99th percentile, in nanoseconds.
    pub in_broker_p50_ns: Nanos,
    /// See `in_broker_p50_ns`.
    pub in_broker_p99_ns: Nanos,
}

/// A merged, time-ordered trace of messages from one or more sources.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Node names.
    pub nodes: Interner,
    /// Call ids.
    pub call_ids: Interner,
    /// Ground-truth tags.
    pub truths: Interner,
    /// Messages in order of [`Message::first_time`], ties in a fixed order.
    pub messages: Vec<Message>,
    /// What was read and what was set aside.
    pub stats: InputStats,
    /// Operation names.
    pub operations: Interner,
    /// Each call id's operation, by call id (shorter when the last ids have none).
    call_operations: Vec<OperationId>,
    /// Each call id's answer status, by call id (shorter when the last ids have none).
    call_statuses: Vec<Status>,
    /// The systems calls went to (`grpc`, `mysql`), by call id, as indexes into
    /// `systems` (`u8::MAX` for none): known only from captures.
    call_systems: Vec<u8>,
    systems: Vec<&'static str>,
    /// Propagated request ids (trace ids, `X-Request-ID` values).
    pub propagated: Interner,
    /// Each call id's propagated id, by call id (shorter when the last ids have none).
    call_propagated: Vec<PropagatedId>,
    /// What each broker message carried, as a digest of its destination and payload
    /// (`msg=`), by call id (0 or missing: none): the call's or free-form message's,
    /// and the return's (a NATS reply carries its own).
    call_contents: Vec<u32>,
    return_contents: Vec<u32>,
    /// Connections named by text traces' `conn=`, and each call id's, by call id (as
    /// an index into `connections` plus one; 0 or missing: none given).
    connections: Interner,
    call_connections: Vec<u32>,
    /// Each call's and return's time between first and last byte, where captures told.
    transits: transit::CallTransits,
}

impl Trace {
    /// Puts the messages in their order: by first time; at equal times calls come
    /// before returns, so a single pass in this order meets every call no later than its
    /// return. Call ids are compared by text, not by id, so that ties break the same way
    /// whatever order the input came in. Needed again after times change.
    pub fn sort_messages(&mut self) {
        let (messages, call_ids) = (&mut self.messages, &self.call_ids);
        messages.par_sort_unstable_by(|a, b| {
            (a.first_time(), a.kind(), a.sender, a.receiver)
                .cmp(&(b.first_time(), b.kind(), b.sender, b.receiver))
                .then_with(|| call_id_order(call_ids, a.call_id(), b.call_id()))
                .then_with(|| (a.sent, a.received).cmp(&(b.sent, b.received)))
        });
    }

    /// A node's name.
    pub fn node_name(&self, id: NodeId) -> &str {
        self.nodes.resolve(id.0)
    }

    /// A call id as it was written, `-` for none.
    pub fn call_id_text(&self, id: CallId) -> &str {
        if id == CallId::NONE {
            "-"
        } else {
            self.call_ids.resolve(id.0)
        }
    }

    /// The connection a call travelled on: as a text trace's `conn=` named it, else
    /// where its id says: ids that captures give (`tcp:10.0.0.1:5000>10.0.0.2:80#s123`,
    /// `udp:...#...`) name their connection before the `#`. `None` for other ids, as
    /// text traces' usually are, and for a call named by its correlation id
    /// (`tcp:10.0.0.1>10.0.0.2#c00f1e2d3c4b5a697`), whose request and reply may have
    /// taken two.
    pub fn connection(&self, call: CallId) -> Option<&str> {
        if let Some(&named) = self.call_connections.get(call.0 as usize) {
            if named > 0 {
                return Some(self.connections.resolve(named - 1));
            }
        }
        let id = self.call_id_text(call);
        if !(id.starts_with("tcp:") || id.starts_with("udp:")) {
            return None;
        }
        id.split_once('#')
            .filter(|&(connection, key)| !names_hosts_only(connection, key))
            .map(|(connection, _)| connection)
    }

    /// The operation a call asked for, if its protocol named it.
    pub fn operation(&self, call: CallId) -> OperationId {
        self.call_operations
            .get(call.0 as usize)
            .copied()
            .unwrap_or(OperationId::NONE)
    }

    /// The request id or trace context a call carried, if any.
    pub fn propagated(&self, call: CallId) -> PropagatedId {
        self.call_propagated
            .get(call.0 as usize)
            .copied()
            .unwrap_or(PropagatedId::NONE)
    }

    /// What a broker message carried (a digest of its destination and payload, the
    /// same on its way into the broker and on its way out), if it is one.
    pub fn content(&self, call: CallId, kind: Kind) -> Option<u32> {
        let contents = match kind {
            Kind::Return => &self.return_contents,
            Kind::Call | Kind::Free => &self.call_contents,
        };
        contents
            .get(call.0 as usize)
            .copied()
            .filter(|&content| content != 0)
    }

    /// Whether any message was a broker message that carried content.
    pub fn has_content(&self) -> bool {
        !self.call_contents.is_empty() || !self.return_contents.is_empty()
    }

    /// Whether any call carried a propagated id.
    pub fn has_propagated(&self) -> bool {
        !self.call_propagated.is_empty()
    }

    /// A propagated id's text.
    pub fn propagated_text(&self, id: PropagatedId) -> Option<&str> {
        (id != PropagatedId::NONE).then(|| self.propagated.resolve(id.0))
    }

    /// Forgets every propagated id, so inference cannot see them
    /// (`eval --against-ids`).
    pub fn hide_propagated(&mut self) -> Vec<PropagatedId> {
        std::mem::take(&mut self.call_propagated)
    }

    /// Gives back what [`Self::hide_propagated`] took.
    pub fn restore_propagated(&mut self, ids: Vec<PropagatedId>) {
        self.call_propagated = ids;
    }

    /// An operation's name.
    pub fn operation_name(&self, id: OperationId) -> Option<&str> {
        (id != OperationId::NONE).then(|| self.operations.resolve(id.0))
    }

    /// How a call's answer ended, if its protocol said.
    pub fn status(&self, call: CallId) -> Status {
        self.call_statuses
            .get(call.0 as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The system a call went to (`grpc`, `http`, `mysql`, `redis`, ...), where the
    /// capture's protocol told it.
    pub fn system(&self, call: CallId) -> Option<&'static str> {
        let index = *self.call_systems.get(call.0 as usize)?;
        self.systems.get(usize::from(index)).copied()
    }

    /// The time between the first and the last byte of `call`'s message of `kind`, and
    /// what TCP held back, where a capture told ([`Transit::NONE`] otherwise).
    pub fn transit(&self, call: CallId, kind: Kind) -> Transit {
        self.transits.get(call, kind)
    }

    /// Whether any message's transit is known.
    pub fn has_transits(&self) -> bool {
        !self.transits.is_empty()
    }

    /// A truth tag as it was written, if any.
    pub fn truth_text(&self, id: Truth) -> Option<&str> {
        (id != Truth::NONE).then(|| self.truths.resolve(id.0))
    }
}

/// Collects observations from any number of sources, then merges them into a [`Trace`].
///
/// An observation is one end of one message. The same message seen at both ends (same
/// sender, receiver, kind and call id) becomes one message with two times. When a key
/// repeats (no call id, or a reused one), the k-th send is paired with the k-th receive
/// in time order, which is right for in-order transports.
#[derive(Debug, Default)]
pub struct TraceBuilder {
    trace: Trace,
    /// Fewer distinct call ids than a message can name, where a test asks (`None`:
    /// [`MAX_CALL_IDS`]).
    call_id_limit: Option<u32>,
}

impl TraceBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Interns a node name.
    pub fn node(&mut self, name: &str) -> NodeId {
        NodeId(self.trace.nodes.intern(name))
    }

    /// Interns a call id; `-` means none. Past [`MAX_CALL_IDS`] distinct ids a new one
    /// is none too, counted in [`InputStats::call_ids_past_limit`].
    pub fn call_id(&mut self, text: &str) -> CallId {
        if text == "-" {
            CallId::NONE
        } else {
            let limit = self.call_id_limit.unwrap_or(MAX_CALL_IDS);
            if self.trace.call_ids.len() >= limit as usize
                && self.trace.call_ids.get(text).is_none()
            {
                // No room for another: the message is kept, without its id, and counted.
                self.trace.stats.call_ids_past_limit += 1;
                return CallId::NONE;
            }
            CallId(self.trace.call_ids.intern(text))
        }
    }

    /// Interns a truth tag.
    pub fn truth(&mut self, text: &str) -> Truth {
        Truth(self.trace.truths.intern(text))
    }

    /// Names the operation a call asked for.
    pub fn operation(&mut self, call: CallId, name: &str) {
        let id = self.operation_id(name);
        self.set_operation(call, id);
    }

    /// Interns an operation name, for readers that name the same few operations over
    /// and over and keep their ids.
    pub fn operation_id(&mut self, name: &str) -> OperationId {
        OperationId(self.trace.operations.intern(name))
    }

    /// Names the operation a call asked for by an id from [`Self::operation_id`].
    pub fn set_operation(&mut self, call: CallId, id: OperationId) {
        if call == CallId::NONE {
            return;
        }
        let index = call.0 as usize;
        let operations = &mut self.trace.call_operations;
        if operations.len() <= index {
            operations.resize(index + 1, OperationId::NONE);
        }
        operations[index] = id;
    }

    /// Interns a propagated id.
    pub fn propagated_id(&mut self, text: &str) -> PropagatedId {
        PropagatedId(self.trace.propagated.intern(text))
    }

    /// Records the propagated id a call carried, by an id from
    /// [`Self::propagated_id`].
    pub fn set_propagated(&mut self, call: CallId, id: PropagatedId) {
        if call == CallId::NONE || id == PropagatedId::NONE {
            return;
        }
        let index = call.0 as usize;
        let ids = &mut self.trace.call_propagated;
        if ids.len() <= index {
            ids.resize(index + 1, PropagatedId::NONE);
        }
        ids[index] = id;
    }

    /// Records what a broker message carried (see [`Trace::content`]; 0: nothing).
    pub fn set_content(&mut self, call: CallId, kind: Kind, content: u32) {
        if call == CallId::NONE || content == 0 {
            return;
        }
        let index = call.0 as usize;
        let contents = match kind {
            Kind::Return => &mut self.trace.return_contents,
            Kind::Call | Kind::Free => &mut self.trace.call_contents,
        };
        if contents.len() <= index {
            contents.resize(index + 1, 0);
        }
        contents[index] = content;
    }

    /// Records the connection a call travelled on (a text trace's `conn=`).
    pub fn connection(&mut self, call: CallId, connection: &str) {
        if call == CallId::NONE {
            return;
        }
        let named = self.trace.connections.intern(connection) + 1;
        let index = call.0 as usize;
        let calls = &mut self.trace.call_connections;
        if calls.len() <= index {
            calls.resize(index + 1, 0);
        }
        calls[index] = named;
    }

    /// Records the system a call went to (a few per trace).
    pub fn system(&mut self, call: CallId, system: &'static str) {
        if call == CallId::NONE {
            return;
        }
        let trace = &mut self.trace;
        let id = match trace.systems.iter().position(|&known| known == system) {
            Some(id) => id,
            None => {
                trace.systems.push(system);
                trace.systems.len() - 1
            }
        };
        let index = call.0 as usize;
        if trace.call_systems.len() <= index {
            trace.call_systems.resize(index + 1, u8::MAX);
        }
        trace.call_systems[index] = u8::try_from(id).unwrap_or(u8::MAX);
    }

    /// Records how a call's answer ended.
    pub fn status(&mut self, call: CallId, status: Status) {
        if call == CallId::NONE || status == Status::Unknown {
            return;
        }
        let index = call.0 as usize;
        let statuses = &mut self.trace.call_statuses;
        if statuses.len() <= index {
            statuses.resize(index + 1, Status::Unknown);
        }
        statuses[index] = status;
    }

    /// Records what `end` saw of the time between the first and the last byte of
    /// `call`'s message of `kind` (the receiver's view wins).
    pub fn transit(&mut self, call: CallId, kind: Kind, end: End, transit: Transit) {
        self.trace.transits.record(call, kind, end, transit);
    }

    /// Adds one observation.
    pub fn push(&mut self, observation: Message) {
        self.trace.messages.push(observation);
        self.trace.stats.observations += 1;
    }

    /// Makes room for `additional` more observations, so that a reader that knows its
    /// input size avoids the doubling growth that would briefly hold three times the
    /// observations.
    pub fn reserve(&mut self, additional: usize) {
        self.trace.messages.reserve_exact(additional);
    }

    /// The counters sources add to (files, lines, ...).
    pub fn stats_mut(&mut self) -> &mut InputStats {
        &mut self.trace.stats
    }

    /// Merges the two ends of each message and orders the trace by time.
    pub fn finish(self) -> Trace {
        let mut trace = self.trace;
        canonical_names(&mut trace);
        merge_ends(&mut trace.messages);
        trace.messages.shrink_to_fit();
        trace.sort_messages();
        let stats = &mut trace.stats;
        stats.messages = trace.messages.len() as u64;
        for m in &trace.messages {
            match (m.sent(), m.received()) {
                (Some(_), Some(_)) => stats.seen_at_both_ends += 1,
                (Some(_), None) => stats.seen_at_sender_only += 1,
                _ => stats.seen_at_receiver_only += 1,
            }
        }
        trace
    }
}

/// Renumbers nodes and truth tags in name order, so that ties between equal times
/// break the same way whatever order the input was read in (call ids are compared by
/// text instead: see [`call_id_order`]).
fn canonical_names(trace: &mut Trace) {
    let nodes = trace.nodes.sort();
    let truths = trace.truths.sort();
    for m in &mut trace.messages {
        m.sender = NodeId(nodes[m.sender.0 as usize]);
        m.receiver = NodeId(nodes[m.receiver.0 as usize]);
        if m.truth != Truth::NONE {
            m.truth = Truth(truths[m.truth.0 as usize]);
        }
    }
}

/// Orders call ids by their text (`-` for none first): call ids are numbered in input
/// order, and a million of them are too many to renumber just to break rare ties.
pub fn call_id_order(call_ids: &Interner, a: CallId, b: CallId) -> std::cmp::Ordering {
    let text = |id: CallId| {
        if id == CallId::NONE {
            ""
        } else {
            call_ids.resolve(id.0)
        }
    };
    if a == b {
        std::cmp::Ordering::Equal
    } else {
        text(a).cmp(text(b))
    }
}

/// Pairs sent and received observations of the same message, in place: the vector is
/// sorted by key, each key's sends are zipped with its receives, and the result is
/// compacted, so no second buffer of messages is needed.
fn merge_ends(messages: &mut Vec<Message>) {
    // Within a key: sends (received == ABSENT) first, each side in time order.
    messages.par_sort_unstable_by_key(|m| {
        let side = m.sent().is_none();
        (
            m.sender,
            m.receiver,
            m.call_and_kind,
            side,
            m.sent,
            m.received,
            m.truth,
        )
    });
    let same_key = |a: &Message, b: &Message| {
        (a.sender, a.receiver, a.call_and_kind) == (b.sender, b.receiver, b.call_and_kind)
    };
    let mut write = 0;
    let mut start = 0;
    while start < messages.len() {
        let mut end = start + 1;
        while end < messages.len() && same_key(&messages[start], &messages[end]) {
            end += 1;
        }
        let first_received = (start..end)
            .find(|&i| messages[i].sent().is_none())
            .unwrap_or(end);
        let sends = first_received - start;
        let receives = end - first_received;
        let pairs = sends.min(receives);
        for k in 0..pairs {
            let mut merged = messages[start + k];
            let receive = messages[first_received + k];
            merged.received = receive.received;
            if merged.truth == Truth::NONE {
                merged.truth = receive.truth;
            }
            messages[write] = merged;
            write += 1;
        }
        for i in (start + pairs..first_received).chain(first_received + pairs..end) {
            messages[write] = messages[i];
            write += 1;
        }
        start = end;
    }
    messages.truncate(write);
}

/// Whether a capture's call id (`connection#key`) names a call by its two hosts and a
/// correlation id (`tcp:10.0.0.1>10.0.0.2#c00f1e2d3c4b5a697`: a Kafka request/reply,
/// whose halves travel on different connections): bare addresses at both ends, and a
/// key of `c` and sixteen hex digits.
fn names_hosts_only(connection: &str, key: &str) -> bool {
    let hex =
        key.len() == 17 && key.starts_with('c') && key[1..].bytes().all(|b| b.is_ascii_hexdigit());
    let bare = |end: &str| {
        let end = end.trim_start_matches('[').trim_end_matches(']');
        end.parse::<std::net::IpAddr>().is_ok()
    };
    let ends = connection.split_once(':').map_or("", |(_, ends)| ends);
    hex && ends
        .split_once('>')
        .is_some_and(|(a, b)| bare(a) && bare(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_named_by_its_hosts_and_correlation_id_travelled_on_no_one_connection() {
        let trace = crate::trace::text::trace_from_str(
            "1.0 CALL web kafka tcp:10.0.0.1>10.0.0.2#c00f1e2d3c4b5a697\n\
             1.1 RET kafka web tcp:10.0.0.1>10.0.0.2#c00f1e2d3c4b5a697\n\
             2.0 CALL web db tcp:10.0.0.1:5000>10.0.0.3:5432#s77\n\
             2.1 RET db web tcp:10.0.0.1:5000>10.0.0.3:5432#s77\n\
             3.0 CALL b c tcp:w3>c#c12-0\n\
             3.1 RET c b tcp:w3>c#c12-0\n",
        );
        let connections: Vec<Option<&str>> = (0..3)
            .map(|call| trace.connection(trace.messages[call * 2].call_id()))
            .collect();
        assert_eq!(
            connections,
            [
                None,
                Some("tcp:10.0.0.1:5000>10.0.0.3:5432"),
                Some("tcp:w3>c")
            ]
        );
    }

    fn observe(
        b: &mut TraceBuilder,
        end: End,
        t: Nanos,
        kind: Kind,
        from: &str,
        to: &str,
        id: &str,
    ) {
        let (s, r, c) = (b.node(from), b.node(to), b.call_id(id));
        b.push(Message::observed(end, t, kind, s, r, c, Truth::NONE));
    }

    #[test]
    fn both_ends_of_a_message_become_one_message() {
        let mut b = TraceBuilder::new();
        observe(&mut b, End::Received, 15, Kind::Call, "a", "b", "x");
        observe(&mut b, End::Sent, 10, Kind::Call, "a", "b", "x");
        observe(&mut b, End::Sent, 20, Kind::Return, "b", "a", "x");
        let trace = b.finish();
        assert_eq!(trace.messages.len(), 2);
        assert_eq!(trace.messages[0].sent(), Some(10));
        assert_eq!(trace.messages[0].received(), Some(15));
        assert_eq!(trace.messages[1].received(), None);
        assert_eq!(trace.stats.seen_at_both_ends, 1);
        assert_eq!(trace.stats.seen_at_sender_only, 1);
    }

    #[test]
    fn call_ids_past_the_limit_are_kept_without_one_and_counted() {
        let mut b = TraceBuilder {
            call_id_limit: Some(2),
            ..TraceBuilder::default()
        };
        for (k, id) in ["x", "y", "z", "x", "w"].iter().enumerate() {
            observe(&mut b, End::Sent, k as Nanos, Kind::Call, "a", "b", id);
        }
        let trace = b.finish();
        let ids: Vec<&str> = trace
            .messages
            .iter()
            .map(|m| trace.call_id_text(m.call_id()))
            .collect();
        assert_eq!(ids, ["x", "y", "-", "x", "-"]);
        assert_eq!(trace.stats.call_ids_past_limit, 2);
    }

    #[test]
    fn repeated_keys_pair_in_time_order() {
        let mut b = TraceBuilder::new();
        for (end, t) in [
            (End::Sent, 30),
            (End::Received, 12),
            (End::Sent, 10),
            (End::Received, 33),
            (End::Sent, 50),
        ] {
            observe(&mut b, end, t, Kind::Call, "a", "b", "-");
        }
        let trace = b.finish();
        let times: Vec<_> = trace
            .messages
            .iter()
            .map(|m| (m.sent(), m.received()))
            .collect();
        assert_eq!(
            times,
            vec![(Some(10), Some(12)), (Some(30), Some(33)), (Some(50), None)]
        );
    }
}
