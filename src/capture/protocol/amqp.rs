//! AMQP 0-9-1 (RabbitMQ): frames of a type, a channel and a size, ended by 0xCE. A
//! message is a content-bearing method (`basic.publish`, `basic.deliver`,
//! `basic.get-ok`, `basic.return`) with its content header and body frames, cut as one
//! message where they follow each other in the stream (as clients and RabbitMQ send
//! them). `basic.publish` is a one-way publish. `basic.deliver` is a call from the
//! broker answered by the consumer's `basic.ack` (or `reject`/`nack`) of its delivery
//! tag, so a consumer that acknowledges after its work holds that work, as a call
//! does; on a channel consuming with `no-ack`, a delivery is one-way. `basic.get` is a
//! call answered by `get-ok` or `get-empty`. A request/reply by `reply_to` and
//! `correlation_id` (RabbitMQ's RPC: direct reply-to or a callback queue) is a call:
//! the publish naming where to reply, on a connection that consumes, is a request
//! keyed by its correlation id, answered by the delivery that brings that id back on
//! the same connection; at the worker, the delivery naming where to reply is a request
//! answered by the publish carrying its correlation id, and the ack of such a delivery
//! answers nothing (unless it comes first: the reply went out on another connection).
//! Everything else (connection, channel, queue and exchange methods, `qos`, `consume`,
//! confirms, heartbeats) is housekeeping.
//! Request ids are read from the message's header table. Owns AMQP framing; linking a
//! delivery to its publish is not its job.

use super::{
    destination, propagation, Content, Label, Meaning, Protocol, Side, Status, Step, MAX_HELD,
};
use std::borrow::Cow;

/// What a client sends before its first frame.
const PROTOCOL_HEADER: &[u8] = b"AMQP\x00\x00\x09\x01";
/// Every frame ends with this byte.
const FRAME_END: u8 = 0xce;
/// Largest frame accepted (RabbitMQ's `frame_max` is 128 KiB by default, at most 2 GiB
/// by the protocol; larger than 64 MiB is not AMQP in practice).
const MAX_FRAME: usize = 64 * 1024 * 1024;

const METHOD: u8 = 1;
const HEADER: u8 = 2;
const BODY: u8 = 3;
const HEARTBEAT: u8 = 8;

const BASIC: u16 = 60;
const CONSUME: u16 = 20;
const PUBLISH: u16 = 40;
const RETURN: u16 = 50;
const DELIVER: u16 = 60;
const GET: u16 = 70;
const GET_OK: u16 = 71;
const GET_EMPTY: u16 = 72;
const ACK: u16 = 80;
const REJECT: u16 = 90;
const NACK: u16 = 120;

/// Whether a client's first bytes are AMQP 0-9-1's protocol header.
pub fn looks_like_header(bytes: &[u8]) -> bool {
    bytes.starts_with(b"AMQP") && bytes.get(4..8).is_none_or(|v| v == &PROTOCOL_HEADER[4..])
}

/// One frame's place in the bytes.
#[derive(Debug, Clone, Copy)]
struct Frame {
    kind: u8,
    channel: u16,
    /// Where its payload starts and how long it is.
    payload: usize,
    size: usize,
}

impl Frame {
    fn end(&self) -> usize {
        self.payload + self.size + 1
    }
}

/// The frame starting at `at`: `Ok(None)` if its 7-byte header has not come yet.
fn frame_at(bytes: &[u8], at: usize) -> Result<Option<Frame>, ()> {
    let Some(head) = bytes.get(at..at + 7) else {
        return Ok(None);
    };
    let kind = head[0];
    if !matches!(kind, METHOD | HEADER | BODY | HEARTBEAT) {
        return Err(());
    }
    let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
    if size > MAX_FRAME {
        return Err(());
    }
    let frame = Frame {
        kind,
        channel: u16::from_be_bytes([head[1], head[2]]),
        payload: at + 7,
        size,
    };
    // The end byte, checked where it has come.
    match bytes.get(frame.end() - 1) {
        Some(&end) if end != FRAME_END => Err(()),
        _ => Ok(Some(frame)),
    }
}

/// A channel's consumers that acknowledge nothing (`no-ack`): their deliveries are
/// one-way.
#[derive(Debug, Default)]
pub struct Amqp {
    no_ack_channels: Vec<u16>,
    /// Requests this client published with a `reply_to`, by [`super::correlation_id_key`],
    /// waiting for the delivery that carries their correlation id back.
    asked: Vec<u32>,
    /// Requests delivered to this client with a `reply_to`, by [`super::correlation_id_key`],
    /// waiting for the publish that carries their correlation id back.
    served: Vec<u32>,
    /// Deliveries that are a request or a reply by correlation id, as (channel, tag,
    /// correlation key): their acks answer nothing, but that of a request whose reply
    /// went out on another connection.
    correlated_tags: Vec<(u16, u64, u32)>,
    /// Whether the client consumes from anything: a request's reply can only come back
    /// on a connection that does.
    consuming: bool,
    /// Deliveries not yet acknowledged, as (channel, delivery tag), oldest first: an
    /// ack with `multiple` answers every one of its channel up to its tag.
    unacknowledged: Vec<(u16, u64)>,
    /// The deliveries the ack last labelled answers besides its own.
    also_acknowledged: Vec<u32>,
}

impl Amqp {
    /// A publish or delivery that is one end of a request/reply by `reply_to` and
    /// `correlation_id` (RabbitMQ's RPC, direct reply-to or a callback queue): a
    /// delivery naming where to reply is a request keyed by its correlation id, and so
    /// is such a publish where the connection consumes (its reply can come back on
    /// it); the delivery (or publish) carrying the correlation id of a request this
    /// client asked (or was asked) is its reply. Else `meaning` as it stands.
    fn correlated(
        &self,
        from: Side,
        id: u16,
        head: &[u8],
        method: Frame,
        meaning: Meaning,
    ) -> Meaning {
        let Some(properties) = properties(head, method) else {
            return meaning;
        };
        let Some(correlation) = properties.correlation_id.filter(|c| !c.is_empty()) else {
            return meaning;
        };
        let key = super::correlation_id_key(correlation);
        let replies_to = properties.reply_to.is_some_and(|to| !to.is_empty());
        match (from, id) {
            (Side::Server, DELIVER) if replies_to => Meaning::Request(Some(key)),
            (Side::Client, PUBLISH) if replies_to && self.consuming => Meaning::Request(Some(key)),
            (Side::Server, DELIVER) if !replies_to && self.asked.contains(&key) => {
                Meaning::Reply(Some(key))
            }
            (Side::Client, PUBLISH) if !replies_to && self.served.contains(&key) => {
                Meaning::Reply(Some(key))
            }
            _ => meaning,
        }
    }

    /// The oldest delivery still open on `channel` that an ack of `tag` with
    /// `multiple` answers (a tag of 0 answers every one).
    fn oldest_acknowledged(&self, channel: u16, tag: u64) -> Option<u64> {
        (self.unacknowledged.iter())
            .find(|&&(open, at)| open == channel && (tag == 0 || at <= tag))
            .map(|&(_, at)| at)
    }
}

/// The class and method of a method frame's payload.
fn method(payload: &[u8]) -> Option<(u16, u16)> {
    Some((
        u16::from_be_bytes([*payload.first()?, *payload.get(1)?]),
        u16::from_be_bytes([*payload.get(2)?, *payload.get(3)?]),
    ))
}

/// A cursor over a method's arguments.
struct Arguments<'a>(&'a [u8]);

impl<'a> Arguments<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let taken = self.0.get(..n)?;
        self.0 = &self.0[n..];
        Some(taken)
    }
    fn short(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn long_long(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }
    fn short_string(&mut self) -> Option<&'a [u8]> {
        let len = usize::from(*self.take(1)?.first()?);
        self.take(len)
    }
    fn long(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
    }
    fn octet(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
}

/// A delivery tag as a call id: the channel's, since each channel numbers its own.
fn call_id(channel: u16, tag: u64) -> u32 {
    (u32::from(channel) << 20) ^ (tag as u32 & 0x000f_ffff) ^ ((tag >> 20) as u32)
}

/// Where the content of the method frame `method` ends, if its header and body frames
/// follow it on its channel: `Ok(None)` if more bytes are needed to tell, `Err` if
/// they are not AMQP.
fn content_end(bytes: &[u8], method: Frame) -> Result<Option<usize>, ()> {
    let Some(header) = frame_at(bytes, method.end())? else {
        return Ok(None);
    };
    if header.kind != HEADER || header.channel != method.channel {
        // Not followed by its content here: the method alone.
        return Ok(Some(method.end()));
    }
    // class (2), weight (2), body size (8).
    let Some(size) = bytes.get(header.payload + 4..header.payload + 12) else {
        return Ok(None);
    };
    let body = u64::from_be_bytes(size.try_into().expect("8 bytes"));
    let mut end = header.end();
    if body > MAX_HELD as u64 {
        return Ok(Some(end));
    }
    let mut left = body as usize;
    while left > 0 {
        let Some(frame) = frame_at(bytes, end)? else {
            return Ok(None);
        };
        if frame.kind != BODY || frame.channel != method.channel || frame.size > left {
            // Another channel's frame between: the rest of the body is counted as it
            // comes.
            return Ok(Some(end));
        }
        left -= frame.size;
        end = frame.end();
    }
    Ok(Some(end))
}

impl Protocol for Amqp {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        if from == Side::Client && bytes.starts_with(b"AMQP") {
            return if bytes.len() < PROTOCOL_HEADER.len() {
                Step::NeedMore
            } else if looks_like_header(bytes) {
                Step::Message {
                    len: PROTOCOL_HEADER.len(),
                    meaning: Meaning::Housekeeping,
                }
            } else {
                Step::Invalid
            };
        }
        let frame = match frame_at(bytes, 0) {
            Ok(Some(frame)) => frame,
            Ok(None) => return Step::NeedMore,
            Err(()) => return Step::Invalid,
        };
        let housekeeping = Step::Message {
            len: frame.end(),
            meaning: Meaning::Housekeeping,
        };
        if frame.kind != METHOD {
            return housekeeping;
        }
        let Some(payload) = bytes.get(frame.payload..frame.payload + frame.size) else {
            // Methods are small: wait for the whole frame (a huge one is refused above).
            return Step::NeedMore;
        };
        let Some((class, id)) = method(payload) else {
            return Step::Invalid;
        };
        if class != BASIC {
            return housekeeping;
        }
        let mut arguments = Arguments(&payload[4..]);
        let meaning = match (from, id) {
            (Side::Client, PUBLISH) => Meaning::OneWay,
            (Side::Server, RETURN) => Meaning::Housekeeping,
            (Side::Server, DELIVER) => {
                let tag = arguments.short_string().and(arguments.long_long());
                match tag {
                    Some(_) if self.no_ack_channels.contains(&frame.channel) => Meaning::OneWay,
                    Some(tag) => Meaning::Request(Some(call_id(frame.channel, tag))),
                    None => return Step::Invalid,
                }
            }
            (Side::Client, ACK | REJECT | NACK) => match arguments.long_long() {
                Some(tag) => {
                    let multiple = arguments.octet().is_some_and(|bits| bits & 1 == 1);
                    if multiple && id != REJECT {
                        // Answers every delivery up to the tag: the oldest is this
                        // reply's, the others are answered with it (`answered_with`).
                        match self.oldest_acknowledged(frame.channel, tag) {
                            Some(oldest) => Meaning::Reply(Some(call_id(frame.channel, oldest))),
                            None => Meaning::Housekeeping,
                        }
                    } else if let Some(&(_, _, key)) = (self.correlated_tags.iter())
                        .find(|&&(channel, at, _)| channel == frame.channel && at == tag)
                    {
                        match self.served.contains(&key) {
                            // A request delivered here whose reply went out on another
                            // connection: answered by its ack, as any delivery.
                            true => Meaning::Reply(Some(key)),
                            // A request or reply by correlation id, answered otherwise.
                            false => Meaning::Housekeeping,
                        }
                    } else {
                        Meaning::Reply(Some(call_id(frame.channel, tag)))
                    }
                }
                None => return Step::Invalid,
            },
            (Side::Client, GET) => Meaning::Request(Some(call_id(frame.channel, u64::MAX))),
            (Side::Server, GET_OK | GET_EMPTY) => {
                Meaning::Reply(Some(call_id(frame.channel, u64::MAX)))
            }
            (Side::Client, CONSUME) => {
                // reserved (2), queue, consumer tag, then the bits: no-local, no-ack.
                let bits = arguments
                    .short()
                    .and(arguments.short_string())
                    .and(arguments.short_string())
                    .and(arguments.octet());
                if bits.is_some_and(|bits| bits & 2 != 0)
                    && !self.no_ack_channels.contains(&frame.channel)
                {
                    self.no_ack_channels.push(frame.channel);
                }
                self.consuming = true;
                Meaning::Housekeeping
            }
            _ => Meaning::Housekeeping,
        };
        if !matches!(id, PUBLISH | DELIVER | GET_OK | RETURN) {
            return Step::Message {
                len: frame.end(),
                meaning,
            };
        }
        match content_end(bytes, frame) {
            Ok(Some(len)) => Step::Message {
                len,
                meaning: match id {
                    // What has come of it: a long body is counted off as it comes.
                    PUBLISH | DELIVER => {
                        let head = &bytes[..len.min(bytes.len())];
                        self.correlated(from, id, head, frame, meaning)
                    }
                    _ => meaning,
                },
            },
            Ok(None) => Step::NeedMore,
            Err(()) => Step::Invalid,
        }
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        (from == Side::Client && bytes.starts_with(b"AMQP"))
            || frame_at(bytes, 0).is_ok_and(|frame| frame.is_some())
    }

    fn reset(&mut self, from: Side) {
        // The client's acks were lost: which deliveries are still open is unknown, and
        // an ack with `multiple` must not answer deliveries acked in the lost bytes.
        if from == Side::Client {
            self.unacknowledged.clear();
            self.correlated_tags.clear();
        }
    }

    fn answered_with(&mut self, ids: &mut Vec<u32>) {
        ids.append(&mut self.also_acknowledged);
    }

    fn label<'b>(&mut self, from: Side, meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        let Ok(Some(frame)) = frame_at(head, 0) else {
            return Label::default();
        };
        let Some((BASIC, id)) = head.get(frame.payload..frame.end() - 1).and_then(method) else {
            return Label::default();
        };
        let mut arguments = Arguments(&head[frame.payload + 4..frame.end() - 1]);
        self.also_acknowledged.clear();
        let delivery_tag = || {
            let mut tag = Arguments(arguments.0);
            tag.short_string().and(tag.long_long())
        };
        let acked = !self.no_ack_channels.contains(&frame.channel);
        if from == Side::Client && matches!(id, ACK | REJECT | NACK) {
            // Acks of correlated deliveries answer nothing; forget those they name.
            let mut fields = Arguments(arguments.0);
            let tag = fields.long_long().unwrap_or(0);
            let multiple = id != REJECT && fields.octet().is_some_and(|bits| bits & 1 == 1);
            let channel = frame.channel;
            self.correlated_tags.retain(|&(open, at, _)| {
                open != channel || !(at == tag || (multiple && (tag == 0 || at <= tag)))
            });
            if let Meaning::Reply(Some(key)) = meaning {
                // An ack that answered a request whose reply went out elsewhere.
                self.served.retain(|&open| open != key);
            }
        }
        match (from, id, meaning) {
            (Side::Client, PUBLISH, Meaning::Request(Some(key))) => {
                super::push_bounded(&mut self.asked, key);
            }
            (Side::Client, PUBLISH, Meaning::Reply(Some(key))) => {
                self.served.retain(|&open| open != key);
            }
            (Side::Server, DELIVER, Meaning::Reply(Some(key))) => {
                self.asked.retain(|&open| open != key);
                if let Some(tag) = delivery_tag().filter(|_| acked) {
                    super::push_bounded(&mut self.correlated_tags, (frame.channel, tag, key));
                }
            }
            (Side::Server, DELIVER, Meaning::Request(Some(key)))
                if key & 0x8000_0000 != 0 && {
                    let tag = delivery_tag();
                    tag.is_none_or(|tag| call_id(frame.channel, tag) != key)
                } =>
            {
                super::push_bounded(&mut self.served, key);
                if let Some(tag) = delivery_tag().filter(|_| acked) {
                    super::push_bounded(&mut self.correlated_tags, (frame.channel, tag, key));
                }
            }
            (Side::Server, DELIVER, Meaning::Request(_)) => {
                if let Some(tag) = delivery_tag() {
                    super::push_bounded(&mut self.unacknowledged, (frame.channel, tag));
                }
            }

            (Side::Client, ACK | REJECT | NACK, Meaning::Reply(_)) => {
                let mut fields = Arguments(arguments.0);
                let tag = fields.long_long().unwrap_or(0);
                let multiple = id != REJECT && fields.octet().is_some_and(|bits| bits & 1 == 1);
                let first = self.oldest_acknowledged(frame.channel, tag);
                let channel = frame.channel;
                let mut also = std::mem::take(&mut self.also_acknowledged);
                self.unacknowledged.retain(|&(open, at)| {
                    let answered = open == channel
                        && match multiple {
                            true => tag == 0 || at <= tag,
                            false => at == tag,
                        };
                    if answered && multiple && Some(at) != first {
                        also.push(call_id(channel, at));
                    }
                    !answered
                });
                self.also_acknowledged = also;
            }
            _ => {}
        }
        let (verb, exchange, routing_key) = match (from, id) {
            (Side::Client, PUBLISH) => {
                arguments.short();
                (
                    "publish",
                    arguments.short_string(),
                    arguments.short_string(),
                )
            }
            (Side::Server, DELIVER) => {
                arguments.short_string();
                arguments.long_long();
                arguments.octet();
                (
                    "deliver",
                    arguments.short_string(),
                    arguments.short_string(),
                )
            }
            (Side::Client, GET) => {
                arguments.short();
                ("get", Some(&b""[..]), arguments.short_string())
            }
            (Side::Server, GET_OK) => {
                return Label {
                    status: Status::Ok,
                    ..Label::default()
                }
            }
            (Side::Server, GET_EMPTY) => {
                // The queue was empty: answered, with nothing (AMQP's own code 0).
                return Label {
                    status: Status::Failed(0),
                    ..Label::default()
                };
            }
            (Side::Client, ACK) if matches!(meaning, Meaning::Reply(_)) => {
                return Label {
                    status: Status::Ok,
                    ..Label::default()
                }
            }
            (Side::Client, REJECT | NACK) => {
                return Label {
                    status: Status::Failed(0),
                    ..Label::default()
                }
            }
            _ => return Label::default(),
        };
        // The exchange names where a message goes; the default exchange ("") routes
        // by queue name, the routing key.
        let name = match (exchange, routing_key) {
            (Some(exchange), _) if !exchange.is_empty() => exchange,
            (_, Some(key)) => key,
            _ => b"",
        };
        let content = match (exchange, routing_key) {
            (Some(exchange), Some(key)) => body(head, frame).map_or(Content::NONE, |frames| {
                let mut named = exchange.to_vec();
                named.push(b'/');
                named.extend_from_slice(key);
                Content::of_parts(&named, frames)
            }),
            _ => Content::NONE,
        };
        Label {
            operation: Some(Cow::Owned(format!("{verb} {}", destination(name)))),
            status: Status::Unknown,
            propagated: headers_id(head, frame),
            content,
            further: Vec::new(),
        }
    }
}

/// The payloads of the body frames after the method frame `method` and its content
/// header, where the whole body is in `head`.
fn body(head: &[u8], method: Frame) -> Option<Vec<&[u8]>> {
    let header = frame_at(head, method.end()).ok()??;
    let size = head.get(header.payload + 4..header.payload + 12)?;
    let mut left = u64::from_be_bytes(size.try_into().expect("8 bytes"));
    let mut frames = Vec::new();
    let mut at = header.end();
    while left > 0 {
        let frame = frame_at(head, at).ok()??;
        let payload = head.get(frame.payload..frame.payload + frame.size)?;
        if frame.kind != BODY || frame.size as u64 > left {
            return None;
        }
        left -= frame.size as u64;
        frames.push(payload);
        at = frame.end();
    }
    Some(frames)
}

/// The basic properties of a content header that name a message's request id and its
/// place in a request/reply.
#[derive(Debug, Default)]
struct Properties<'a> {
    /// The header table's bytes.
    headers: Option<&'a [u8]>,
    /// Which request a reply answers (RPC's `correlation_id`).
    correlation_id: Option<&'a [u8]>,
    /// Where a request's reply is to go (`reply_to`).
    reply_to: Option<&'a [u8]>,
}

/// The properties of the content header following `method`, as far as `reply_to`;
/// `None` where the header is not there whole up to them.
fn properties(head: &[u8], method: Frame) -> Option<Properties<'_>> {
    let header = frame_at(head, method.end()).ok()??;
    if header.kind != HEADER {
        return None;
    }
    let payload = head.get(header.payload..header.end() - 1)?;
    let mut arguments = Arguments(payload);
    // class, weight, body size, property flags; then the properties the flags name,
    // in the order of their bits from the highest.
    arguments.take(12)?;
    let flags = arguments.short()?;
    let mut properties = Properties::default();
    if flags & 0x8000 != 0 {
        arguments.short_string()?; // content-type
    }
    if flags & 0x4000 != 0 {
        arguments.short_string()?; // content-encoding
    }
    if flags & 0x2000 != 0 {
        let len = arguments.long()? as usize;
        properties.headers = Some(arguments.take(len)?);
    }
    if flags & 0x1000 != 0 {
        arguments.octet()?; // delivery-mode
    }
    if flags & 0x0800 != 0 {
        arguments.octet()?; // priority
    }
    if flags & 0x0400 != 0 {
        properties.correlation_id = Some(arguments.short_string()?);
    }
    if flags & 0x0200 != 0 {
        properties.reply_to = Some(arguments.short_string()?);
    }
    Some(properties)
}

/// The request id in the header table of the content header following `method`.
fn headers_id(head: &[u8], method: Frame) -> Option<String> {
    let mut table = Arguments(properties(head, method)?.headers?);
    let mut best = propagation::Best::default();
    while let Some(name) = table.short_string() {
        let value: Option<&[u8]> = match table.octet()? {
            b'S' | b'x' => {
                let len = table.long()? as usize;
                table.take(len)
            }
            b't' | b'b' | b'B' => table.take(1).map(|_| None)?,
            b'U' | b's' | b'u' => table.take(2).map(|_| None)?,
            b'I' | b'i' | b'f' => table.take(4).map(|_| None)?,
            b'L' | b'l' | b'd' | b'T' => table.take(8).map(|_| None)?,
            b'D' => table.take(5).map(|_| None)?,
            b'A' | b'F' => {
                let len = table.long()? as usize;
                table.take(len).map(|_| None)?
            }
            b'V' => None,
            _ => break,
        };
        if let Some(value) = value {
            best.field(name, value);
        }
    }
    best.id()
}

/// AMQP 0-9-1 in the registry: on its port, or wherever a client starts with its
/// protocol header.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Amqp,
    label: "amqp",
    ports: &[5672],
    client_first: looks_like_header,
    guess: Some(7),
    unmistakable: None,
    server_first: None,
    broker: true,
    system: |_| Some("rabbitmq"),
    tcp: || Box::new(super::delimited::Delimited::new(Amqp::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::super::delimited::conversation;
    use super::super::Output;
    use super::*;

    fn frame(kind: u8, channel: u16, payload: &[u8]) -> Vec<u8> {
        let mut bytes = vec![kind];
        bytes.extend_from_slice(&channel.to_be_bytes());
        bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        bytes.extend_from_slice(payload);
        bytes.push(FRAME_END);
        bytes
    }

    fn short_string(text: &[u8]) -> Vec<u8> {
        let mut bytes = vec![text.len() as u8];
        bytes.extend_from_slice(text);
        bytes
    }

    fn method_frame(channel: u16, class: u16, id: u16, arguments: &[u8]) -> Vec<u8> {
        let mut payload = class.to_be_bytes().to_vec();
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(arguments);
        frame(METHOD, channel, &payload)
    }

    /// A content header (with a header table holding `id`, if given) and body frames.
    fn content(channel: u16, body: &[u8], id: Option<&[u8]>, frame_max: usize) -> Vec<u8> {
        let mut header = BASIC.to_be_bytes().to_vec();
        header.extend_from_slice(&[0, 0]);
        header.extend_from_slice(&(body.len() as u64).to_be_bytes());
        match id {
            Some(id) => {
                header.extend_from_slice(&0x2000u16.to_be_bytes());
                let mut table = short_string(b"x-count");
                table.push(b'I');
                table.extend_from_slice(&7u32.to_be_bytes());
                table.extend_from_slice(&short_string(b"X-Request-Id"));
                table.push(b'S');
                table.extend_from_slice(&(id.len() as u32).to_be_bytes());
                table.extend_from_slice(id);
                header.extend_from_slice(&(table.len() as u32).to_be_bytes());
                header.extend_from_slice(&table);
            }
            None => header.extend_from_slice(&0u16.to_be_bytes()),
        }
        let mut bytes = frame(HEADER, channel, &header);
        for piece in body.chunks(frame_max) {
            bytes.extend_from_slice(&frame(BODY, channel, piece));
        }
        bytes
    }

    fn publish(
        channel: u16,
        exchange: &[u8],
        key: &[u8],
        body: &[u8],
        id: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut arguments = vec![0, 0];
        arguments.extend_from_slice(&short_string(exchange));
        arguments.extend_from_slice(&short_string(key));
        arguments.push(0);
        let mut bytes = method_frame(channel, BASIC, PUBLISH, &arguments);
        bytes.extend_from_slice(&content(channel, body, id, 4));
        bytes
    }

    fn deliver(channel: u16, tag: u64, exchange: &[u8], key: &[u8], body: &[u8]) -> Vec<u8> {
        let mut arguments = short_string(b"ctag-1");
        arguments.extend_from_slice(&tag.to_be_bytes());
        arguments.push(0);
        arguments.extend_from_slice(&short_string(exchange));
        arguments.extend_from_slice(&short_string(key));
        let mut bytes = method_frame(channel, BASIC, DELIVER, &arguments);
        bytes.extend_from_slice(&content(channel, body, None, 4096));
        bytes
    }

    fn ack(channel: u16, tag: u64, multiple: bool) -> Vec<u8> {
        let mut arguments = tag.to_be_bytes().to_vec();
        arguments.push(u8::from(multiple));
        method_frame(channel, BASIC, ACK, &arguments)
    }

    fn consume(channel: u16, no_ack: bool) -> Vec<u8> {
        let mut arguments = vec![0, 0];
        arguments.extend_from_slice(&short_string(b"orders"));
        arguments.extend_from_slice(&short_string(b""));
        arguments.push(if no_ack { 2 } else { 0 });
        arguments.extend_from_slice(&0u32.to_be_bytes());
        method_frame(channel, BASIC, CONSUME, &arguments)
    }

    fn run(conversation: &[(Side, Vec<u8>)]) -> Output {
        conversation::frame(Amqp::default(), conversation)
    }

    fn described(out: &Output) -> Vec<String> {
        conversation::described(out, false)
    }

    #[test]
    fn a_publish_is_one_way_and_a_delivery_a_call_its_ack_answers() {
        let publisher = run(&[
            (Side::Client, PROTOCOL_HEADER.to_vec()),
            (Side::Server, method_frame(0, 10, 10, &[0, 9, 0, 0])),
            (Side::Client, frame(HEARTBEAT, 0, &[])),
            (
                Side::Client,
                publish(
                    1,
                    b"orders",
                    b"new.1234567",
                    b"{\"order\":17}",
                    Some(b"r-77"),
                ),
            ),
        ]);
        assert_eq!(
            described(&publisher),
            ["Client Free publish orders id=r-77"]
        );
        assert_eq!(publisher.housekeeping.len(), 3);
        let consumer = run(&[
            (Side::Client, consume(1, false)),
            (Side::Server, deliver(1, 1, b"", b"orders", b"one")),
            (Side::Server, deliver(1, 2, b"", b"orders", b"two")),
            (Side::Client, ack(1, 1, false)),
            (Side::Client, ack(1, 2, false)),
        ]);
        assert_eq!(
            described(&consumer),
            [
                "Server Call deliver orders",
                "Server Call deliver orders",
                "Client Return",
                "Client Return"
            ]
        );
        assert_eq!(consumer.messages[0].key, consumer.messages[2].key);
        assert_eq!(consumer.messages[1].key, consumer.messages[3].key);
        assert!(consumer.problems.is_empty(), "{:?}", consumer.problems);
    }

    #[test]
    fn an_ack_with_multiple_answers_every_delivery_of_its_channel_up_to_its_tag() {
        let consumer = run(&[
            (Side::Client, consume(1, false)),
            (Side::Client, consume(2, false)),
            (Side::Server, deliver(1, 1, b"", b"orders", b"one")),
            (Side::Server, deliver(2, 1, b"", b"audit", b"other channel")),
            (Side::Server, deliver(1, 2, b"", b"orders", b"two")),
            (Side::Server, deliver(1, 3, b"", b"orders", b"three")),
            (Side::Client, ack(1, 2, true)),
            (Side::Client, ack(1, 0, true)),
            (Side::Client, ack(1, 9, true)),
        ]);
        let keys: Vec<_> = consumer.messages.iter().map(|m| m.key).collect();
        assert_eq!(
            described(&consumer),
            [
                "Server Call deliver orders",
                "Server Call deliver audit",
                "Server Call deliver orders",
                "Server Call deliver orders",
                "Client Return",
                "Client Return",
                "Client Return"
            ]
        );
        // Tag 2 with multiple answers tags 1 and 2 of channel 1, not channel 2's; tag 0
        // answers the rest of channel 1; tag 9 finds nothing open and is housekeeping.
        let mut answered = vec![keys[4], keys[5]];
        answered.sort_unstable_by_key(|key| format!("{key:?}"));
        let mut first_two = vec![keys[0], keys[2]];
        first_two.sort_unstable_by_key(|key| format!("{key:?}"));
        assert_eq!(answered, first_two);
        assert_eq!(keys[6], keys[3]);
        let times: Vec<_> = consumer.messages.iter().map(|m| m.first).collect();
        assert_eq!(times[4], times[5], "answered by the same bytes");
        assert!(consumer.problems.is_empty(), "{:?}", consumer.problems);
    }

    /// A publish (client) or delivery (server, tag `tag`) of `body` whose content header
    /// carries a correlation id and, where given, where to reply.
    fn correlated(
        side: Side,
        tag: u64,
        key: &[u8],
        correlation: &[u8],
        reply_to: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut bytes = match side {
            Side::Client => {
                let mut arguments = vec![0, 0];
                arguments.extend_from_slice(&short_string(b""));
                arguments.extend_from_slice(&short_string(key));
                arguments.push(0);
                method_frame(1, BASIC, PUBLISH, &arguments)
            }
            Side::Server => {
                let mut arguments = short_string(b"ctag-1");
                arguments.extend_from_slice(&tag.to_be_bytes());
                arguments.push(0);
                arguments.extend_from_slice(&short_string(b""));
                arguments.extend_from_slice(&short_string(key));
                method_frame(1, BASIC, DELIVER, &arguments)
            }
        };
        let body = b"{\"price\": 3}";
        let mut header = BASIC.to_be_bytes().to_vec();
        header.extend_from_slice(&[0, 0]);
        header.extend_from_slice(&(body.len() as u64).to_be_bytes());
        // content-type, delivery-mode, correlation-id, then reply-to where given.
        let flags: u16 = 0x8000 | 0x1000 | 0x0400 | if reply_to.is_some() { 0x0200 } else { 0 };
        header.extend_from_slice(&flags.to_be_bytes());
        header.extend_from_slice(&short_string(b"application/json"));
        header.push(2);
        header.extend_from_slice(&short_string(correlation));
        if let Some(to) = reply_to {
            header.extend_from_slice(&short_string(to));
        }
        bytes.extend_from_slice(&frame(HEADER, 1, &header));
        bytes.extend_from_slice(&frame(BODY, 1, body));
        bytes
    }

    #[test]
    fn a_request_with_reply_to_is_answered_by_the_message_carrying_its_correlation_id() {
        // web asks by direct reply-to, consumed no-ack; two requests in flight, answered
        // in the other order.
        let web = run(&[
            (Side::Client, consume(1, true)),
            (
                Side::Client,
                correlated(
                    Side::Client,
                    0,
                    b"quote",
                    b"r-1",
                    Some(b"amq.rabbitmq.reply-to"),
                ),
            ),
            (
                Side::Client,
                correlated(
                    Side::Client,
                    0,
                    b"quote",
                    b"r-2",
                    Some(b"amq.rabbitmq.reply-to"),
                ),
            ),
            (
                Side::Server,
                correlated(Side::Server, 1, b"amq.rabbitmq.reply-to.g1", b"r-2", None),
            ),
            (
                Side::Server,
                correlated(Side::Server, 1, b"amq.rabbitmq.reply-to.g1", b"r-1", None),
            ),
        ]);
        assert_eq!(
            described(&web),
            [
                "Client Call publish quote",
                "Client Call publish quote",
                "Server Return",
                "Server Return"
            ]
        );
        let keys: Vec<_> = web.messages.iter().map(|m| m.key).collect();
        assert_eq!((keys[2], keys[3]), (keys[1], keys[0]));
        // The worker: the delivery naming where to reply is a call its reply answers;
        // its ack answers nothing; an order's delivery beside it keeps its ack.
        let worker = run(&[
            (Side::Client, consume(1, false)),
            (
                Side::Server,
                correlated(
                    Side::Server,
                    1,
                    b"quote",
                    b"r-1",
                    Some(b"amq.rabbitmq.reply-to.g1"),
                ),
            ),
            (Side::Server, deliver(1, 2, b"", b"orders", b"one")),
            (
                Side::Client,
                correlated(Side::Client, 0, b"amq.rabbitmq.reply-to.g1", b"r-1", None),
            ),
            (Side::Client, ack(1, 1, false)),
            (Side::Client, ack(1, 2, false)),
        ]);
        assert_eq!(
            described(&worker),
            [
                "Server Call deliver quote",
                "Server Call deliver orders",
                "Client Return",
                "Client Return"
            ]
        );
        let keys: Vec<_> = worker.messages.iter().map(|m| m.key).collect();
        assert_eq!((keys[2], keys[3]), (keys[0], keys[1]));
        assert_eq!(
            worker.housekeeping.len(),
            2,
            "the consume and the quote's ack"
        );
        assert!(worker.problems.is_empty(), "{:?}", worker.problems);
        // A connection that consumes nothing cannot get a reply: its publish is a
        // publish as any. A worker whose reply goes out on another connection: its ack
        // answers the request it was delivered.
        let request = |side| correlated(side, 1, b"quote", b"r-3", Some(b"replies"));
        let publisher = run(&[(Side::Client, request(Side::Client))]);
        assert_eq!(described(&publisher), ["Client Free publish quote"]);
        let consumer = run(&[
            (Side::Client, consume(1, false)),
            (Side::Server, request(Side::Server)),
            (Side::Client, ack(1, 1, false)),
        ]);
        assert_eq!(
            described(&consumer),
            ["Server Call deliver quote", "Client Return"]
        );
        assert_eq!(consumer.messages[0].key, consumer.messages[1].key);
        assert!(consumer.problems.is_empty(), "{:?}", consumer.problems);
    }

    #[test]
    fn deliveries_to_a_no_ack_consumer_are_one_way() {
        let out = run(&[
            (Side::Client, consume(2, true)),
            (Side::Server, deliver(2, 1, b"orders", b"x", b"one")),
        ]);
        assert_eq!(described(&out), ["Server Free deliver orders"]);
    }

    #[test]
    fn a_message_split_anywhere_is_cut_whole() {
        let whole = publish(1, b"", b"orders", b"a body of several frames", None);
        for cut in 1..whole.len() {
            let out = run(&[
                (Side::Client, whole[..cut].to_vec()),
                (Side::Client, whole[cut..].to_vec()),
            ]);
            assert_eq!(
                described(&out),
                ["Client Free publish orders"],
                "cut at {cut}"
            );
            assert!(out.housekeeping.is_empty());
        }
    }

    #[test]
    fn what_is_not_amqp_is_refused() {
        let mut amqp = Amqp::default();
        let mut bad_end = frame(HEARTBEAT, 0, &[]);
        *bad_end.last_mut().unwrap() = 0;
        for bytes in [
            &bad_end[..],
            &[9, 0, 0, 0, 0, 0, 0, FRAME_END],
            b"AMQP\x01\x01\x00\x0a",
        ] {
            assert_eq!(amqp.next(Side::Client, bytes), Step::Invalid, "{bytes:?}");
        }
        assert!(looks_like_header(PROTOCOL_HEADER));
        assert!(!looks_like_header(b"GET / HTTP/1.1"));
    }
}
