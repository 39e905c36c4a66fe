//! MQTT 3.1.1 and 5: control packets with a fixed header (type, flags, remaining
//! length). A `PUBLISH` from the client is a publish, from the server a delivery. At
//! QoS 0 either is a one-way message; at QoS 1 and 2 it is a call answered by the other
//! end's `PUBACK` (QoS 1) or `PUBREC` (QoS 2, whose `PUBREL`/`PUBCOMP` are
//! housekeeping), so a delivery the consumer acknowledges after its work holds that
//! work, as a call does. Packet ids are the client's and the server's own, so each
//! direction's are kept apart. Everything else (`CONNECT`, `SUBSCRIBE`, pings…) is
//! housekeeping. MQTT 5 user properties carry request ids. An MQTT 5 request/reply is a
//! call: a `PUBLISH` naming a Response Topic is a request keyed by its Correlation Data
//! (from a client, where the connection subscribed: its reply can come back on it),
//! answered by the `PUBLISH` that carries that Correlation Data back (at the requester,
//! the delivery of the reply; at the worker, its publish of it), and their `PUBACK`s
//! answer nothing (but the worker's, where it comes first: the reply went out on
//! another connection). Owns MQTT framing; linking a delivery to its publish is not its
//! job.

use super::{destination, propagation, Content, Label, Meaning, Protocol, Side, Status, Step};
use std::borrow::Cow;

/// The largest remaining length MQTT can say (four length bytes).
const MAX_REMAINING: usize = 268_435_455;

const CONNECT: u8 = 1;
const PUBLISH: u8 = 3;
const PUBACK: u8 = 4;
const PUBREC: u8 = 5;
const PUBREL: u8 = 6;
const SUBSCRIBE: u8 = 8;
const UNSUBSCRIBE: u8 = 10;

/// Whether a client's first bytes are an MQTT `CONNECT` (protocol name `MQTT`, or
/// `MQIsdp` for 3.1).
pub fn looks_like_connect(bytes: &[u8]) -> bool {
    if bytes.first() != Some(&(CONNECT << 4)) {
        return false;
    }
    let Some((_, at)) = remaining_length(&bytes[1..]).ok().flatten() else {
        return false;
    };
    let rest = &bytes[1 + at..];
    rest.starts_with(b"\x00\x04MQTT") || rest.starts_with(b"\x00\x06MQIsdp")
}

/// The remaining length at the start of `bytes` and how many bytes said it: `Ok(None)`
/// if they have not all come, `Err` if it is longer than four bytes.
fn remaining_length(bytes: &[u8]) -> Result<Option<(usize, usize)>, ()> {
    let mut value = 0usize;
    for (index, &byte) in bytes.iter().enumerate().take(4) {
        value |= usize::from(byte & 0x7f) << (7 * index);
        if byte & 0x80 == 0 {
            return Ok(Some((value, index + 1)));
        }
    }
    if bytes.len() >= 4 {
        Err(())
    } else {
        Ok(None)
    }
}

/// Whether a packet type may come from `from` with these flags.
fn valid(from: Side, kind: u8, flags: u8) -> bool {
    let client = from == Side::Client;
    match kind {
        PUBLISH => (flags >> 1) & 3 != 3,
        PUBREL | SUBSCRIBE | UNSUBSCRIBE => flags == 2 && (kind == PUBREL || client),
        // CONNECT, PINGREQ: the client's; CONNACK, SUBACK, UNSUBACK, PINGRESP: the
        // server's; PUBACK, PUBREC, PUBCOMP, DISCONNECT, AUTH: either's.
        CONNECT | 12 => flags == 0 && client,
        2 | 9 | 11 | 13 => flags == 0 && !client,
        4 | 5 | 7 | 14 | 15 => flags == 0,
        _ => false,
    }
}

/// The state of one MQTT connection.
#[derive(Debug, Default)]
pub struct Mqtt {
    /// The protocol level the client's `CONNECT` gave (5 adds properties); 4 until
    /// one is seen.
    level: Option<u8>,
    /// Requests this client published with a Response Topic, by [`super::correlation_id_key`].
    asked: Vec<u32>,
    /// Requests delivered to this client with a Response Topic, by [`super::correlation_id_key`].
    served: Vec<u32>,
    /// Publishes that are a request or a reply by correlation, as ([`call_id`], the
    /// correlation key): their acknowledgements answer nothing, but that of a request
    /// whose reply went out on another connection.
    correlated_packets: Vec<(u32, u32)>,
    /// Whether the client subscribed to anything: a request's reply can only come back
    /// on a connection that did.
    subscribed: bool,
}

/// A packet id, with the side that chose it: both ends number their own publishes.
fn call_id(chosen_by: Side, packet: u16) -> u32 {
    u32::from(packet) | (u32::from(chosen_by == Side::Server) << 16)
}

/// What a `PUBLISH` packet's variable header holds.
struct Publish<'a> {
    topic: &'a [u8],
    packet: Option<u16>,
    /// Where its properties start (MQTT 5), as far as the head goes.
    properties: usize,
}

fn publish(flags: u8, body: &[u8]) -> Option<Publish<'_>> {
    let qos = (flags >> 1) & 3;
    let len = usize::from(u16::from_be_bytes([*body.first()?, *body.get(1)?]));
    let topic = body.get(2..2 + len)?;
    let mut at = 2 + len;
    let packet = if qos > 0 {
        let id = u16::from_be_bytes([*body.get(at)?, *body.get(at + 1)?]);
        at += 2;
        Some(id)
    } else {
        None
    };
    Some(Publish {
        topic,
        packet,
        properties: at,
    })
}

/// The MQTT 5 properties of a `PUBLISH` that name its request id and its place in a
/// request/reply.
#[derive(Debug, Default)]
struct Properties<'a> {
    /// Where a request's reply is to go (Response Topic, 0x08).
    response_topic: Option<&'a [u8]>,
    /// Which request a reply answers (Correlation Data, 0x09).
    correlation_data: Option<&'a [u8]>,
    /// User properties (0x26), name and value.
    user: Vec<(&'a [u8], &'a [u8])>,
}

/// The properties at the start of `properties` (their length, then each one), as far
/// as they are read; `None` where they have not all come or are not MQTT's.
fn properties(properties: &[u8]) -> Option<Properties<'_>> {
    let (len, said) = remaining_length(properties).ok().flatten()?;
    let mut rest = properties.get(said..said + len)?;
    let mut found = Properties::default();
    fn string<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
        let len = usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?]));
        let value = rest.get(2..2 + len)?;
        *rest = &rest[2 + len..];
        Some(value)
    }
    while let Some((&id, after)) = rest.split_first() {
        rest = after;
        match id {
            0x01 => rest = rest.get(1..)?,
            0x02 => rest = rest.get(4..)?,
            0x03 => {
                string(&mut rest)?;
            }
            0x08 => found.response_topic = Some(string(&mut rest)?),
            0x09 => found.correlation_data = Some(string(&mut rest)?),
            0x0b => {
                let (_, said) = remaining_length(rest).ok().flatten()?;
                rest = &rest[said..];
            }
            0x23 => rest = rest.get(2..)?,
            0x26 => {
                let name = string(&mut rest)?;
                let value = string(&mut rest)?;
                found.user.push((name, value));
            }
            _ => break,
        }
    }
    Some(found)
}

/// The request id among MQTT 5 properties (user properties, 0x26).
fn propagated(bytes: &[u8]) -> Option<String> {
    let mut best = propagation::Best::default();
    for (name, value) in properties(bytes)?.user {
        best.field(name, value);
    }
    best.id()
}

impl Mqtt {
    /// After a packet is cut: the requests and replies by correlation it opens or
    /// closes, and the acknowledgements they make housekeeping.
    fn note_correlation(&mut self, from: Side, meaning: Meaning, head: &[u8]) {
        let first = head[0];
        let Some((_, said)) = remaining_length(&head[1..]).ok().flatten() else {
            return;
        };
        let body = &head[1 + said..];
        match (first >> 4, meaning) {
            (PUBLISH, Meaning::Request(Some(key)) | Meaning::Reply(Some(key)))
                if key & 0x8000_0000 != 0 =>
            {
                let asking = matches!(meaning, Meaning::Request(_));
                match (from, asking) {
                    (Side::Client, true) => super::push_bounded(&mut self.asked, key),
                    (Side::Server, true) => super::push_bounded(&mut self.served, key),
                    (Side::Client, false) => self.served.retain(|&open| open != key),
                    (Side::Server, false) => self.asked.retain(|&open| open != key),
                }
                if let Some(packet) = publish(first & 0x0f, body).and_then(|p| p.packet) {
                    let packet = call_id(from, packet);
                    // A packet id used again names a new publish.
                    self.correlated_packets.retain(|&(open, _)| open != packet);
                    super::push_bounded(&mut self.correlated_packets, (packet, key));
                }
            }
            (PUBACK | PUBREC, _) => {
                if let (Some(&high), Some(&low)) = (body.first(), body.get(1)) {
                    let acknowledged = call_id(from.other(), u16::from_be_bytes([high, low]));
                    if let Some((_, key)) = self.acknowledged_correlated(acknowledged) {
                        // Answered by this acknowledgement (its reply went out elsewhere).
                        if meaning == Meaning::Reply(Some(key)) {
                            self.served.retain(|&open| open != key);
                        }
                    }
                    self.correlated_packets
                        .retain(|&(open, _)| open != acknowledged);
                }
            }
            (SUBSCRIBE, _) if from == Side::Client => self.subscribed = true,
            _ => {}
        }
    }

    /// The correlated publish (its [`call_id`], its correlation key) that
    /// `acknowledged` names, if it is one.
    fn acknowledged_correlated(&self, acknowledged: u32) -> Option<(u32, u32)> {
        (self.correlated_packets.iter())
            .find(|&&(open, _)| open == acknowledged)
            .copied()
    }

    /// A `PUBLISH` that is one end of an MQTT 5 request/reply: one naming a Response
    /// Topic is a request keyed by its Correlation Data (from the client, where the
    /// connection subscribed to anything: a reply can come back on it); one carrying
    /// the Correlation Data of a request this end asked (a delivery) or was asked (a
    /// publish) is its reply. Else `meaning`.
    fn correlated(&self, from: Side, body: &[u8], flags: u8, meaning: Meaning) -> Meaning {
        if self.level != Some(5) {
            return meaning;
        }
        let Some(head) = publish(flags, body) else {
            return meaning;
        };
        let Some(found) = body.get(head.properties..).and_then(properties) else {
            return meaning;
        };
        let Some(correlation) = found.correlation_data.filter(|c| !c.is_empty()) else {
            return meaning;
        };
        let key = super::correlation_id_key(correlation);
        let asks = found.response_topic.is_some_and(|topic| !topic.is_empty());
        match from {
            Side::Client if asks && self.subscribed => Meaning::Request(Some(key)),
            Side::Server if asks => Meaning::Request(Some(key)),
            Side::Client if !asks && self.served.contains(&key) => Meaning::Reply(Some(key)),
            Side::Server if !asks && self.asked.contains(&key) => Meaning::Reply(Some(key)),
            _ => meaning,
        }
    }
}

impl Protocol for Mqtt {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        let Some(&first) = bytes.first() else {
            return Step::NeedMore;
        };
        let (kind, flags) = (first >> 4, first & 0x0f);
        if !valid(from, kind, flags) {
            return Step::Invalid;
        }
        let (remaining, said) = match remaining_length(&bytes[1..]) {
            Ok(Some(found)) => found,
            Ok(None) => return Step::NeedMore,
            Err(()) => return Step::Invalid,
        };
        if remaining > MAX_REMAINING {
            return Step::Invalid;
        }
        let len = 1 + said + remaining;
        if kind == PUBLISH && len > bytes.len() && len <= super::MAX_HELD {
            // Held whole, for its payload's digest.
            return Step::NeedMore;
        }
        // The packet's own bytes, as far as they have come.
        let body = &bytes[1 + said..bytes.len().min(len)];
        let meaning = match kind {
            CONNECT => {
                // Protocol name (2 + 4 or 6 bytes), then the level.
                if body.len() < 7 && body.len() < remaining {
                    return Step::NeedMore;
                }
                if let Some(&level) = body.get(6).filter(|_| body.get(1) == Some(&4)) {
                    self.level = Some(level);
                }
                Meaning::Housekeeping
            }
            PUBLISH => {
                let qos = (flags >> 1) & 3;
                let meaning = if qos == 0 {
                    Meaning::OneWay
                } else {
                    let Some(head) = publish(flags, body) else {
                        return if body.len() >= remaining {
                            Step::Invalid
                        } else {
                            Step::NeedMore
                        };
                    };
                    let packet = head.packet.expect("QoS above 0 has a packet id");
                    Meaning::Request(Some(call_id(from, packet)))
                };
                self.correlated(from, body, flags, meaning)
            }
            PUBACK | PUBREC => {
                let (Some(&high), Some(&low)) = (body.first(), body.get(1)) else {
                    return if remaining < 2 {
                        Step::Invalid
                    } else {
                        Step::NeedMore
                    };
                };
                // Acknowledges the other side's publish.
                let acknowledged = call_id(from.other(), u16::from_be_bytes([high, low]));
                match self.acknowledged_correlated(acknowledged) {
                    // A request delivered here whose reply went out on another
                    // connection: answered by its acknowledgement, as any delivery.
                    Some((_, key)) if from == Side::Client && self.served.contains(&key) => {
                        Meaning::Reply(Some(key))
                    }
                    // A request or reply by correlation, answered otherwise.
                    Some(_) => Meaning::Housekeeping,
                    None => Meaning::Reply(Some(acknowledged)),
                }
            }
            _ => Meaning::Housekeeping,
        };
        Step::Message { len, meaning }
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        bytes
            .first()
            .is_some_and(|&first| valid(from, first >> 4, first & 0x0f))
            && bytes.len() >= 2
            && remaining_length(&bytes[1..]).is_ok()
    }

    fn label<'b>(&mut self, from: Side, meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        let Some(&first) = head.first() else {
            return Label::default();
        };
        self.note_correlation(from, meaning, head);
        if first >> 4 != PUBLISH {
            return Label {
                status: if matches!(meaning, Meaning::Reply(_)) {
                    ack_status(head)
                } else {
                    Status::Unknown
                },
                ..Label::default()
            };
        }
        let Some((_, said)) = remaining_length(&head[1..]).ok().flatten() else {
            return Label::default();
        };
        let Some(packet) = publish(first & 0x0f, &head[1 + said..]) else {
            return Label::default();
        };
        let verb = match from {
            Side::Client => "publish",
            Side::Server => "deliver",
        };
        let (remaining, _) = remaining_length(&head[1..])
            .ok()
            .flatten()
            .unwrap_or((0, 0));
        let end = head.len().min(1 + said + remaining);
        let properties = &head[(1 + said + packet.properties).min(end)..end];
        let (propagated, payload) = match self.level {
            Some(5) => {
                let skip = remaining_length(properties)
                    .ok()
                    .flatten()
                    .map(|(len, said)| len + said);
                (
                    propagated(properties),
                    skip.and_then(|skip| properties.get(skip..)),
                )
            }
            _ => (None, Some(properties)),
        };
        // Whole packets only: a payload cut short would name another message.
        let content = match payload {
            Some(payload) if 1 + said + remaining <= head.len() => {
                Content::of(packet.topic, payload)
            }
            _ => Content::NONE,
        };
        Label {
            operation: Some(Cow::Owned(format!("{verb} {}", destination(packet.topic)))),
            status: Status::Unknown,
            propagated,
            content,
            further: Vec::new(),
        }
    }
}

/// How a `PUBACK` or `PUBREC` answered: MQTT 5 gives a reason code after the packet id
/// (below 0x80 is success); 3.1.1 gives none, and always succeeded.
fn ack_status(head: &[u8]) -> Status {
    let Some((remaining, said)) = remaining_length(&head[1..]).ok().flatten() else {
        return Status::Unknown;
    };
    match head.get(1 + said + 2) {
        Some(&reason) if remaining > 2 && reason >= 0x80 => Status::Failed(u32::from(reason)),
        _ => Status::Ok,
    }
}

/// MQTT in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Mqtt,
    label: "mqtt",
    ports: &[1883],
    client_first: looks_like_connect,
    guess: Some(8),
    unmistakable: None,
    server_first: None,
    broker: true,
    system: |_| Some("mqtt"),
    tcp: || Box::new(super::delimited::Delimited::new(Mqtt::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::super::delimited::conversation;
    use super::super::Output;
    use super::*;

    fn frame(conversation: &[(Side, Vec<u8>)]) -> Output {
        conversation::frame(Mqtt::default(), conversation)
    }

    fn packet(first: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = vec![first];
        let mut len = body.len();
        loop {
            let byte = (len & 0x7f) as u8;
            len >>= 7;
            bytes.push(if len > 0 { byte | 0x80 } else { byte });
            if len == 0 {
                break;
            }
        }
        bytes.extend_from_slice(body);
        bytes
    }

    fn string(text: &[u8]) -> Vec<u8> {
        let mut bytes = (text.len() as u16).to_be_bytes().to_vec();
        bytes.extend_from_slice(text);
        bytes
    }

    fn publish(
        qos: u8,
        topic: &[u8],
        packet_id: u16,
        properties: &[u8],
        payload: &[u8],
    ) -> Vec<u8> {
        let mut body = string(topic);
        if qos > 0 {
            body.extend_from_slice(&packet_id.to_be_bytes());
        }
        body.extend_from_slice(properties);
        body.extend_from_slice(payload);
        packet(0x30 | (qos << 1), &body)
    }

    fn described(out: &Output) -> Vec<String> {
        conversation::described(out, false)
    }

    #[test]
    fn publishes_at_qos_1_are_calls_acknowledged_by_the_other_end() {
        let mut connect = string(b"MQTT");
        connect.extend_from_slice(&[5, 0x02, 0, 60, 0]);
        connect.extend_from_slice(&string(b"web-1"));
        // A user property X-Request-Id (MQTT 5).
        let mut property = vec![0x26];
        property.extend_from_slice(&string(b"X-Request-Id"));
        property.extend_from_slice(&string(b"r42"));
        let mut properties = vec![property.len() as u8];
        properties.extend_from_slice(&property);
        let out = frame(&[
            (Side::Client, packet(0x10, &connect)),
            (Side::Server, packet(0x20, &[0, 0, 0])),
            (
                Side::Client,
                publish(1, b"orders/17", 7, &properties, b"{}"),
            ),
            // The server delivers a message of its own numbering, packet id 7 too.
            (Side::Server, publish(1, b"orders/17", 7, &[0], b"{}")),
            (Side::Server, packet(0x40, &[0, 7, 0])),
            (Side::Client, packet(0x40, &[0, 7])),
            (Side::Client, publish(0, b"log", 0, &[0], b"x")),
            (Side::Client, packet(0xc0, &[])),
            (Side::Server, packet(0xd0, &[])),
        ]);
        assert_eq!(
            described(&out),
            [
                "Client Call publish orders/* id=r42",
                "Server Call deliver orders/*",
                "Server Return",
                "Client Return",
                "Client Free publish log",
            ]
        );
        // Each acknowledgement answers the other end's publish.
        assert_eq!(out.messages[0].key, out.messages[2].key);
        assert_eq!(out.messages[1].key, out.messages[3].key);
        assert_eq!(out.housekeeping.len(), 4);
        assert!(out.problems.is_empty(), "{:?}", out.problems);
    }

    /// MQTT 5 properties: Response Topic (where given) and Correlation Data.
    fn correlation(response_topic: Option<&[u8]>, correlation: &[u8]) -> Vec<u8> {
        let mut property = Vec::new();
        if let Some(topic) = response_topic {
            property.push(0x08);
            property.extend_from_slice(&string(topic));
        }
        property.push(0x09);
        property.extend_from_slice(&string(correlation));
        let mut properties = vec![property.len() as u8];
        properties.extend_from_slice(&property);
        properties
    }

    #[test]
    fn a_publish_naming_a_response_topic_is_answered_by_the_one_carrying_its_correlation() {
        let mut connect = string(b"MQTT");
        connect.extend_from_slice(&[5, 0x02, 0, 60, 0]);
        connect.extend_from_slice(&string(b"web-1"));
        let connected = || {
            vec![
                (Side::Client, packet(0x10, &connect)),
                (Side::Server, packet(0x20, &[0, 0, 0])),
            ]
        };
        // web asks twice; the replies come in the other order; every PUBACK is
        // housekeeping, and an order's publish beside them keeps its own.
        let mut web = connected();
        let subscribe = packet(0x82, b"\x00\x07\x00\x00\x09reply/web\x01");
        web.extend([
            (Side::Client, subscribe),
            (
                Side::Client,
                publish(
                    1,
                    b"quote",
                    1,
                    &correlation(Some(b"reply/web"), b"r-1"),
                    b"{}",
                ),
            ),
            (
                Side::Client,
                publish(
                    1,
                    b"quote",
                    2,
                    &correlation(Some(b"reply/web"), b"r-2"),
                    b"{}",
                ),
            ),
            (Side::Client, publish(1, b"orders", 3, &[0], b"{}")),
            (Side::Server, packet(0x40, &[0, 1, 0])),
            (Side::Server, packet(0x40, &[0, 2, 0])),
            (Side::Server, packet(0x40, &[0, 3, 0])),
            (
                Side::Server,
                publish(1, b"reply/web", 9, &correlation(None, b"r-2"), b"{}"),
            ),
            (Side::Client, packet(0x40, &[0, 9])),
            (
                Side::Server,
                publish(1, b"reply/web", 8, &correlation(None, b"r-1"), b"{}"),
            ),
            (Side::Client, packet(0x40, &[0, 8])),
        ]);
        let web = frame(&web);
        assert_eq!(
            described(&web),
            [
                "Client Call publish quote",
                "Client Call publish quote",
                "Client Call publish orders",
                "Server Return",
                "Server Return",
                "Server Return",
            ]
        );
        let keys: Vec<_> = web.messages.iter().map(|m| m.key).collect();
        assert_eq!((keys[3], keys[4], keys[5]), (keys[2], keys[1], keys[0]));
        assert!(web.problems.is_empty(), "{:?}", web.problems);
        // The worker: the delivery naming where to reply is a call its reply answers.
        let mut worker = connected();
        worker.extend([
            (
                Side::Server,
                publish(
                    1,
                    b"quote",
                    4,
                    &correlation(Some(b"reply/web"), b"r-1"),
                    b"{}",
                ),
            ),
            (
                Side::Client,
                publish(1, b"reply/web", 5, &correlation(None, b"r-1"), b"{}"),
            ),
            (Side::Server, packet(0x40, &[0, 5, 0])),
            (Side::Client, packet(0x40, &[0, 4])),
        ]);
        let worker = frame(&worker);
        assert_eq!(
            described(&worker),
            ["Server Call deliver quote", "Client Return"]
        );
        assert_eq!(worker.messages[0].key, worker.messages[1].key);
        assert!(worker.problems.is_empty(), "{:?}", worker.problems);
        // A connection that subscribed to nothing cannot get a reply: its publish is a
        // publish as any, answered by the broker's PUBACK. A worker whose reply goes
        // out on another connection: its PUBACK answers the request it was delivered.
        let request = || correlation(Some(b"reply/web"), b"r-3");
        let mut publisher = connected();
        publisher.extend([
            (Side::Client, publish(1, b"quote", 6, &request(), b"{}")),
            (Side::Server, packet(0x40, &[0, 6, 0])),
        ]);
        let mut consumer = connected();
        consumer.extend([
            (Side::Server, publish(1, b"quote", 7, &request(), b"{}")),
            (Side::Client, packet(0x40, &[0, 7])),
        ]);
        for (conversation, expected) in [
            (publisher, ["Client Call publish quote", "Server Return"]),
            (consumer, ["Server Call deliver quote", "Client Return"]),
        ] {
            let out = frame(&conversation);
            assert_eq!(described(&out), expected);
            assert_eq!(out.messages[0].key, out.messages[1].key);
            assert!(out.problems.is_empty(), "{:?}", out.problems);
        }
    }

    #[test]
    fn a_publish_split_over_segments_and_a_long_length_are_framed() {
        let payload = vec![b'x'; 300];
        let whole = publish(0, b"big", 0, &[], &payload);
        let out = frame(&[
            (Side::Client, whole[..2].to_vec()),
            (Side::Client, whole[2..100].to_vec()),
            (Side::Client, whole[100..].to_vec()),
        ]);
        assert_eq!(described(&out), ["Client Free publish big"]);
    }

    #[test]
    fn what_is_not_mqtt_is_refused() {
        let mut mqtt = Mqtt::default();
        for (from, bytes) in [
            (Side::Server, &[0x10u8, 0][..]),
            (Side::Client, &[0x20, 2, 0, 0]),
            (Side::Client, &[0x36, 0]),
            (Side::Client, &[0x30, 0xff, 0xff, 0xff, 0xff]),
            (Side::Client, b"GET / HTTP/1.1\r\n"),
        ] {
            assert_eq!(mqtt.next(from, bytes), Step::Invalid, "{bytes:?}");
        }
        let mut connect = packet(0x10, &[0, 4, b'M', b'Q', b'T', b'T', 4, 2, 0, 60]);
        assert!(looks_like_connect(&connect));
        connect[3] = b'X';
        assert!(!looks_like_connect(&connect));
    }
}
