//! The framer for protocols with message boundaries: it buffers each side's bytes,
//! remembers when each byte arrived, asks the [`Protocol`] where the next message ends,
//! and pairs replies with requests (by transaction id, else in order). After lost bytes
//! a side waits for a segment that could start a message.

use super::turns::Turns;
use super::{
    CallKey, Chunk, Content, Framed, Framer, Meaning, Operation, Output, Propagated, Protocol,
    Side, Status, Step,
};
use crate::trace::{Kind, Nanos};
use std::collections::VecDeque;

/// A side's bytes not yet cut into messages.
#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    /// Sequence number of `bytes[0]`.
    seq: u32,
    /// (offset in `bytes`, time) where each segment's bytes begin, in order.
    arrivals: VecDeque<(usize, Nanos)>,
    /// Waiting for a segment that could start a message, after lost bytes.
    lost: bool,
    /// A message whose length is known but whose last bytes have not arrived: they are
    /// counted off as they come instead of being buffered.
    tail: Option<Tail>,
}

/// What [`Protocol::label`] said of a message, with its names interned.
#[derive(Debug, Clone, Copy)]
struct Named {
    operation: Operation,
    status: Status,
    propagated: Propagated,
    content: Content,
}

#[derive(Debug, Clone, Copy)]
struct Tail {
    rest: usize,
    meaning: Meaning,
    seq: u32,
    first: Nanos,
    last: Nanos,
    label: Named,
}

impl Pending {
    fn time_at(&self, offset: usize) -> Nanos {
        let index = self.arrivals.partition_point(|&(start, _)| start <= offset);
        self.arrivals[index.saturating_sub(1)].1
    }

    fn consume(&mut self, len: usize) {
        self.bytes.drain(..len);
        self.seq = self.seq.wrapping_add(len as u32);
        while self.arrivals.len() > 1 && self.arrivals[1].0 <= len {
            self.arrivals.pop_front();
        }
        for arrival in &mut self.arrivals {
            arrival.0 = arrival.0.saturating_sub(len);
        }
        if self.bytes.is_empty() {
            self.arrivals.clear();
        }
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.arrivals.clear();
    }
}

/// Frames a connection for a [`Protocol`].
pub struct Delimited<P> {
    protocol: P,
    client: Pending,
    server: Pending,
    in_order: VecDeque<CallKey>,
    /// Requests open by transaction id: (id, sequence number of the request's first
    /// byte), oldest first. The key is the sequence number, which is unique even where
    /// a client reuses ids (Python's Thrift sends every call as 0).
    by_id: Vec<(u32, u32)>,
    /// Set once the protocol gives up framing (a switch to TLS): the rest by turns.
    by_turns: Option<Turns>,
    /// The further messages ([`super::Further`]) of the message last labelled, interned,
    /// until it is emitted.
    further: Vec<FurtherNamed>,
    /// The other requests the reply last labelled answers ([`Protocol::answered_with`]),
    /// until it is emitted.
    answered_with: Vec<u32>,
}

/// A further message ([`super::Further`]) with its names interned.
#[derive(Debug, Clone, Copy)]
struct FurtherNamed {
    content: Content,
    propagated: Propagated,
    /// Its own operation, where it has one.
    operation: Option<Operation>,
    correlated: Option<super::Correlated>,
}

impl<P: Protocol> Delimited<P> {
    /// A framer for a new connection.
    pub fn new(protocol: P) -> Self {
        Delimited {
            protocol,
            client: Pending::default(),
            server: Pending::default(),
            in_order: VecDeque::new(),
            by_id: Vec::new(),
            by_turns: None,
            further: Vec::new(),
            answered_with: Vec::new(),
        }
    }

    fn side(&mut self, from: Side) -> &mut Pending {
        match from {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    /// The operation name and status the protocol gives the message it just cut.
    fn label(&mut self, from: Side, meaning: Meaning, head: &[u8], out: &mut Output) -> Named {
        let label = self.protocol.label(from, meaning, head);
        let operation = match &label.operation {
            Some(name) => out.operation(name),
            None => Operation::NONE,
        };
        let propagated = match &label.propagated {
            Some(id) => out.propagated(id),
            None => Propagated::NONE,
        };
        self.further.clear();
        for further in &label.further {
            let propagated = match &further.propagated {
                Some(id) => out.propagated(id),
                None => Propagated::NONE,
            };
            self.further.push(FurtherNamed {
                content: further.content,
                propagated,
                operation: further.operation.as_deref().map(|name| out.operation(name)),
                correlated: further.correlated,
            });
        }
        self.answered_with.clear();
        if matches!(meaning, Meaning::Reply(_)) {
            self.protocol.answered_with(&mut self.answered_with);
        }
        Named {
            operation,
            status: label.status,
            propagated,
            content: label.content,
        }
    }

    fn cut(&mut self, from: Side, out: &mut Output) {
        loop {
            let pending = match from {
                Side::Client => &self.client,
                Side::Server => &self.server,
            };
            if pending.bytes.is_empty() || pending.lost {
                return;
            }
            match self.protocol.next(from, &pending.bytes) {
                Step::NeedMore => return,
                Step::Invalid => {
                    out.problems
                        .push(crate::capture::stats::NOT_THE_CONNECTIONS_PROTOCOL);
                    self.lose(from);
                    return;
                }
                Step::Message { len, meaning } if len > pending.bytes.len() => {
                    let buffered = pending.bytes.len();
                    let (seq, first, last) = (
                        pending.seq,
                        pending.time_at(0),
                        pending.time_at(buffered - 1),
                    );
                    let head = std::mem::take(&mut self.side(from).bytes);
                    let label = self.label(from, meaning, &head, out);
                    // A message longer than what is held gives its first record alone.
                    self.further.clear();
                    self.side(from).bytes = head;
                    let tail = Tail {
                        rest: len - buffered,
                        meaning,
                        seq,
                        first,
                        last,
                        label,
                    };
                    let pending = self.side(from);
                    pending.consume(buffered);
                    pending.tail = Some(tail);
                    return;
                }
                Step::Message { len, meaning } => {
                    let len = len.max(1);
                    let first = pending.time_at(0);
                    let last = pending.time_at(len - 1);
                    let seq = pending.seq;
                    let head = std::mem::take(&mut self.side(from).bytes);
                    let label = self.label(from, meaning, &head[..len], out);
                    self.side(from).bytes = head;
                    self.emit(from, meaning, seq, first, last, label, out);
                    self.side(from).consume(len);
                }
            }
        }
    }

    /// Cuts messages from a segment when nothing is buffered; returns what is left to
    /// buffer, if anything.
    fn cut_unbuffered<'c>(
        &mut self,
        from: Side,
        mut chunk: Chunk<'c>,
        out: &mut Output,
    ) -> Option<Chunk<'c>> {
        while !chunk.bytes.is_empty() {
            match self.protocol.next(from, chunk.bytes) {
                Step::NeedMore => return Some(chunk),
                Step::Invalid => {
                    out.problems
                        .push(crate::capture::stats::NOT_THE_CONNECTIONS_PROTOCOL);
                    self.lose(from);
                    return None;
                }
                Step::Message { len, meaning } if len > chunk.bytes.len() => {
                    let label = self.label(from, meaning, chunk.bytes, out);
                    self.further.clear();
                    self.side(from).tail = Some(Tail {
                        rest: len - chunk.bytes.len(),
                        meaning,
                        seq: chunk.seq,
                        first: chunk.time,
                        last: chunk.time,
                        label,
                    });
                    self.side(from).seq = chunk.seq.wrapping_add(chunk.bytes.len() as u32);
                    return None;
                }
                Step::Message { len, meaning } => {
                    let len = len.max(1);
                    let label = self.label(from, meaning, &chunk.bytes[..len], out);
                    self.emit(from, meaning, chunk.seq, chunk.time, chunk.time, label, out);
                    chunk.bytes = &chunk.bytes[len..];
                    chunk.seq = chunk.seq.wrapping_add(len as u32);
                }
            }
        }
        None
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &mut self,
        from: Side,
        meaning: Meaning,
        seq: u32,
        first: Nanos,
        last: Nanos,
        named: Named,
        out: &mut Output,
    ) {
        let (kind, key) = match meaning {
            Meaning::Housekeeping => {
                out.housekeeping
                    .push("protocol housekeeping (handshakes, authentication, interim replies)");
                // What it carries may still be requests and replies of their own (a
                // Kafka produce of request records only).
                self.emit_further(from, seq, (first, last), named.operation, out);
                return;
            }
            Meaning::OneWay => (Kind::Free, CallKey::Seq(seq)),
            Meaning::Request(None) => {
                self.in_order.push_back(CallKey::Seq(seq));
                (Kind::Call, CallKey::Seq(seq))
            }
            Meaning::Request(Some(id)) => {
                self.by_id.push((id, seq));
                (Kind::Call, CallKey::Seq(seq))
            }
            Meaning::Reply(None) => match self.in_order.pop_front() {
                Some(key) => (Kind::Return, key),
                None => {
                    out.problems
                        .push("replies with no open request (free-form messages)");
                    (Kind::Free, CallKey::Seq(seq))
                }
            },
            Meaning::Reply(Some(id)) => match self.by_id.iter().position(|&(open, _)| open == id) {
                Some(index) => {
                    let (_, request) = self.by_id.remove(index);
                    (Kind::Return, CallKey::Seq(request))
                }
                None => {
                    out.problems
                        .push("replies with no open request (free-form messages)");
                    (Kind::Free, CallKey::Id(id))
                }
            },
        };
        // The other requests the same reply answers, each answered as if by its own.
        for k in 0..self.answered_with.len() {
            let id = self.answered_with[k];
            if let Some(index) = self.by_id.iter().position(|&(open, _)| open == id) {
                let (_, request) = self.by_id.remove(index);
                let mut answer =
                    Framed::new(from, Kind::Return, CallKey::Seq(request), first, last);
                answer.status = named.status;
                out.messages.push(answer);
            }
        }
        self.answered_with.clear();
        let mut framed = Framed::new(from, kind, key, first, last);
        if kind == Kind::Call || meaning == Meaning::OneWay {
            // A one-way message (a broker's publish or delivery) is named as a call is.
            framed.operation = named.operation;
            framed.propagated = named.propagated;
        } else if kind == Kind::Return {
            framed.status = named.status;
        }
        // A reply through a broker (a NATS reply) carries its payload as a publish does.
        framed.content = named.content;
        let operation = framed.operation;
        out.messages.push(framed);
        if kind == Kind::Call || meaning == Meaning::OneWay {
            self.emit_further(from, seq, (first, last), operation, out);
        }
        self.further.clear();
    }

    /// The further messages the same bytes carried, after the message at `seq`: a
    /// one-way one keyed by the bytes after the message's first, which no other message
    /// of this side starts at; a request or reply by its correlation id, whichever
    /// connection its other half took.
    fn emit_further(
        &mut self,
        from: Side,
        seq: u32,
        (first, last): (Nanos, Nanos),
        operation: Operation,
        out: &mut Output,
    ) {
        for (k, further) in self.further.drain(..).enumerate() {
            let (kind, key) = match further.correlated {
                Some(super::Correlated::Request(key)) => (Kind::Call, CallKey::Correlation(key)),
                Some(super::Correlated::Reply(key)) => (Kind::Return, CallKey::Correlation(key)),
                None => (Kind::Free, CallKey::Seq(seq.wrapping_add(k as u32 + 1))),
            };
            let mut framed = Framed::new(from, kind, key, first, last);
            if kind != Kind::Return {
                framed.operation = further.operation.unwrap_or(operation);
                framed.propagated = further.propagated;
            }
            framed.content = further.content;
            out.messages.push(framed);
        }
    }

    /// Takes a segment's bytes: a tail counted off, whole messages cut, the rest
    /// buffered.
    fn frame(&mut self, from: Side, mut chunk: Chunk<'_>, out: &mut Output) {
        if let Some(mut tail) = self.side(from).tail.take() {
            let taken = tail.rest.min(chunk.bytes.len());
            tail.rest -= taken;
            tail.last = chunk.time;
            if tail.rest > 0 {
                self.side(from).tail = Some(tail);
                return;
            }
            self.emit_tail(from, tail, out);
            chunk.bytes = &chunk.bytes[taken..];
            chunk.seq = chunk.seq.wrapping_add(taken as u32);
            self.side(from).seq = chunk.seq;
            if chunk.bytes.is_empty() {
                return;
            }
        }
        let protocol = &self.protocol;
        let pending = match from {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        };
        if pending.lost {
            if !protocol.could_start(from, chunk.bytes) {
                return;
            }
            pending.lost = false;
        }
        if pending.bytes.is_empty() {
            // Nothing buffered: cut whole messages straight from the segment, and buffer
            // only what is left of an unfinished one.
            chunk = match self.cut_unbuffered(from, chunk, out) {
                Some(rest) => rest,
                None => return,
            };
            let pending = self.side(from);
            pending.seq = chunk.seq;
            pending.arrivals.push_back((0, chunk.time));
            pending.bytes.extend_from_slice(chunk.bytes);
            return;
        }
        pending
            .arrivals
            .push_back((pending.bytes.len(), chunk.time));
        pending.bytes.extend_from_slice(chunk.bytes);
        self.cut(from, out);
    }

    /// A message whose last bytes were counted off: out it goes.
    fn emit_tail(&mut self, from: Side, tail: Tail, out: &mut Output) {
        let Tail {
            meaning,
            seq,
            first,
            last,
            label,
            ..
        } = tail;
        self.emit(from, meaning, seq, first, last, label, out);
    }

    fn lose(&mut self, from: Side) {
        self.protocol.reset(from);
        let pending = self.side(from);
        pending.clear();
        pending.tail = None;
        pending.lost = true;
        // Replies can no longer be matched by order: whatever was open stays unanswered.
        self.in_order.clear();
    }
}

impl<P: Protocol> Framer for Delimited<P> {
    fn data(&mut self, from: Side, chunk: Chunk<'_>, out: &mut Output) {
        if let Some(turns) = &mut self.by_turns {
            turns.data(from, chunk, out);
            return;
        }
        self.frame(from, chunk, out);
        if self.protocol.read_by_turns() {
            out.housekeeping
                .push("connections that switched to TLS, read by turns from there");
            // What is buffered is the start of what cannot be framed: it goes too.
            self.client.clear();
            self.server.clear();
            self.client.tail = None;
            self.server.tail = None;
            self.by_turns = Some(Turns::default());
        }
    }

    fn gap(&mut self, from: Side, bytes: usize, out: &mut Output) {
        if let Some(turns) = &mut self.by_turns {
            turns.gap(from, bytes, out);
            return;
        }
        let pending = self.side(from);
        if let Some(tail) = &mut pending.tail {
            if bytes <= tail.rest {
                // Lost bytes inside a message of known length: nothing is out of step.
                tail.rest -= bytes;
                if tail.rest == 0 {
                    let tail = pending.tail.take().expect("checked");
                    self.emit_tail(from, tail, out);
                    let pending = self.side(from);
                    pending.seq = pending.seq.wrapping_add(bytes as u32);
                }
                return;
            }
        }
        if !self.side(from).lost {
            out.problems.push("protocol out of step after lost bytes");
            self.lose(from);
        }
    }

    fn close(&mut self, out: &mut Output) {
        if let Some(turns) = &mut self.by_turns {
            turns.close(out);
            return;
        }
        for from in [Side::Client, Side::Server] {
            let pending = match from {
                Side::Client => &self.client,
                Side::Server => &self.server,
            };
            if pending.tail.is_some() {
                out.problems
                    .push("incomplete message at the end of a connection");
                self.side(from).tail = None;
            }
            let pending = match from {
                Side::Client => &self.client,
                Side::Server => &self.server,
            };
            if pending.bytes.is_empty() || pending.lost {
                continue;
            }
            match self.protocol.at_close(from, &pending.bytes) {
                Some(meaning) => {
                    let first = pending.time_at(0);
                    let last = pending.time_at(pending.bytes.len() - 1);
                    let seq = pending.seq;
                    let head = std::mem::take(&mut self.side(from).bytes);
                    let label = self.label(from, meaning, &head, out);
                    self.side(from).bytes = head;
                    self.emit(from, meaning, seq, first, last, label, out);
                }
                None => out
                    .problems
                    .push("incomplete message at the end of a connection"),
            }
            self.side(from).clear();
        }
    }
}

/// What the readers' tests share: a conversation fed to a protocol's framer, and its
/// messages described one line each.
#[cfg(test)]
pub(super) mod conversation {
    use super::super::{Chunk, Framer, Output, Protocol, Side};
    use super::Delimited;

    /// Frames `conversation` (each side's bytes in turn, a millisecond apart, with its
    /// own sequence numbers) with `protocol`'s delimited framer, then closes it.
    pub fn frame<P: Protocol>(protocol: P, conversation: &[(Side, impl AsRef<[u8]>)]) -> Output {
        let mut framer = Delimited::new(protocol);
        let mut out = Output::default();
        let mut seq = [0u32; 2];
        for (time, (side, bytes)) in conversation.iter().enumerate() {
            let (index, bytes) = (*side as usize, bytes.as_ref());
            let chunk = Chunk {
                time: time as i64 * 1000,
                seq: seq[index],
                bytes,
            };
            framer.data(*side, chunk, &mut out);
            seq[index] = seq[index].wrapping_add(bytes.len() as u32);
        }
        framer.close(&mut out);
        out
    }

    /// Each message as "side kind operation", its status too where `status`, and its
    /// request id where it carried one.
    pub fn described(out: &Output, status: bool) -> Vec<String> {
        out.messages
            .iter()
            .map(|m| {
                let mut text = format!("{:?} {:?} {}", m.from, m.kind, out.name_of(m.operation));
                if status {
                    text += &format!(" {:?}", m.status);
                }
                if let Some(id) = out.propagated.get(m.propagated.0 as usize) {
                    text += &format!(" id={id}");
                }
                text.trim_end().to_string()
            })
            .collect()
    }
}
