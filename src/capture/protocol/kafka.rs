//! The Apache Kafka protocol: size-prefixed requests (API key, version, correlation id)
//! answered by responses carrying the correlation id. A `Produce` is a publish: a call
//! the broker answers once the records are written (with `acks=0`, one-way). A
//! `Fetch` response that brings records is a delivery, one-way from the broker: a
//! consumer's fetches are long polls, and the request says nothing of what will come.
//! Each record, of every topic and partition, is a message of its own, with its own
//! digest and request id: a producer batches several requests' records in one
//! produce, and a consumer serves a fetch's records one by one, so the produce (or
//! fetch response) is its first one-way record's and each further record a message
//! beside it ([`super::Further`]). A record with Spring Kafka's request/reply headers
//! (`kafka_replyTopic` and `kafka_correlationId`) is a request keyed by the correlation
//! id, one with `kafka_correlationId` alone its reply; the two travel on different
//! connections (a producer's, a consumer's), so such a call is named by its hosts and
//! the correlation id ([`super::CallKey::Correlation`]), and a produce or fetch of such
//! records only is housekeeping that carries them. Fetches that bring nothing, and
//! every other API (metadata, API versions, the group protocol, offset commits), are
//! housekeeping. Topics name the operations; a record header carries the request id.
//! Owns Kafka framing; linking a delivery to its publish is not its job.

use super::{
    destination, propagation, Content, Correlated, Further, Label, Meaning, Protocol, Side, Status,
    Step, MAX_HELD,
};
use std::borrow::Cow;
use std::collections::VecDeque;

/// Largest request or response accepted (the broker's `socket.request.max.bytes` is
/// 100 MiB by default).
const MAX_SIZE: usize = 128 * 1024 * 1024;
/// Requests remembered while their responses are awaited.
const MAX_OPEN: usize = 4096;

const PRODUCE: i16 = 0;
const FETCH: i16 = 1;
/// The highest API key known (anything above is not Kafka).
const MAX_API_KEY: i16 = 90;

/// Whether a client's first bytes look like a Kafka request: a size, a known API key,
/// a version, a correlation id and a client id that fits.
pub fn looks_like_request(bytes: &[u8]) -> bool {
    let Some(head) = bytes.get(..14) else {
        return false;
    };
    let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let api_key = i16::from_be_bytes([head[4], head[5]]);
    let version = i16::from_be_bytes([head[6], head[7]]);
    let client_id = i16::from_be_bytes([head[12], head[13]]);
    (10..MAX_SIZE as i32).contains(&size)
        && (0..=MAX_API_KEY).contains(&api_key)
        && (0..=20).contains(&version)
        && client_id >= -1
        && i32::from(client_id) + 10 <= size
}

/// A request awaiting its response.
#[derive(Debug, Clone, Copy)]
struct Asked {
    correlation: i32,
    api_key: i16,
    version: i16,
    /// A produce of requests and replies by correlation id only: housekeeping, and its
    /// response too.
    only_correlated: bool,
}

/// The state of one Kafka connection: the requests awaiting responses.
#[derive(Debug, Default)]
pub struct Kafka {
    asked: VecDeque<Asked>,
    /// What the response being cut answers (set by [`Protocol::next`] for
    /// [`Protocol::label`]).
    answering: Option<Asked>,
}

/// Whether an API's version uses the flexible (compact, tagged) encoding.
fn flexible(api_key: i16, version: i16) -> bool {
    match api_key {
        PRODUCE => version >= 9,
        FETCH => version >= 12,
        _ => false,
    }
}

/// A cursor over Kafka's encodings.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let taken = self.0.get(..n)?;
        self.0 = &self.0[n..];
        Some(taken)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
    }
    fn unsigned_varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.take(1)?.first()?;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    fn varint(&mut self) -> Option<i64> {
        let raw = self.unsigned_varint()?;
        Some((raw >> 1) as i64 ^ -((raw & 1) as i64))
    }
    /// A (nullable) string or bytes: compact (length + 1 as a varint) or not (i16 for
    /// strings, i32 for bytes).
    fn bytes(&mut self, compact: bool, long: bool) -> Option<&'a [u8]> {
        let len = if compact {
            self.unsigned_varint()? as i64 - 1
        } else if long {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        if len < 0 {
            return Some(&[]);
        }
        self.take(usize::try_from(len).ok()?)
    }
    fn array_len(&mut self, compact: bool) -> Option<usize> {
        let len = if compact {
            self.unsigned_varint()? as i64 - 1
        } else {
            i64::from(self.i32()?)
        };
        usize::try_from(len.max(0)).ok()
    }
    fn tagged_fields(&mut self) -> Option<()> {
        for _ in 0..self.unsigned_varint()? {
            self.unsigned_varint()?;
            let size = self.unsigned_varint()?;
            self.take(usize::try_from(size).ok()?)?;
        }
        Some(())
    }
}

/// A produce request's records, per topic and partition, as (topic, record batches),
/// after the request header; as far as `body` goes.
fn produce_records(body: &[u8], version: i16) -> Vec<(&[u8], &[u8])> {
    let compact = flexible(PRODUCE, version);
    let mut reader = Reader(body);
    let mut found = Vec::new();
    let mut read = || -> Option<()> {
        if version >= 3 {
            reader.bytes(compact, false)?; // transactional id
        }
        reader.i16()?; // acks
        reader.i32()?; // timeout
        for _ in 0..reader.array_len(compact)? {
            let topic = reader.bytes(compact, false)?;
            for _ in 0..reader.array_len(compact)? {
                reader.i32()?; // partition
                found.push((topic, reader.bytes(compact, true)?));
                if compact {
                    reader.tagged_fields()?;
                }
            }
            if compact {
                reader.tagged_fields()?;
            }
        }
        Some(())
    };
    read();
    found
}

/// A produce request's acks (0: no response will come).
fn produce_acks(body: &[u8], version: i16) -> Option<i16> {
    let mut reader = Reader(body);
    if version >= 3 {
        reader.bytes(flexible(PRODUCE, version), false)?;
    }
    reader.i16()
}

/// One partition's records in a fetch response, with their topic.
struct Records<'a> {
    topic: &'a [u8],
    /// Its record batches.
    batches: &'a [u8],
}

/// What a fetch response brings, read as far as `body` goes: each topic's records (of
/// each partition that brought some); `Err` if `body` ends before any can be told.
fn fetch_records(body: &[u8], version: i16) -> Result<Vec<Records<'_>>, ()> {
    let compact = flexible(FETCH, version);
    let mut reader = Reader(body);
    let mut found = Vec::new();
    let mut read = || -> Option<()> {
        if version >= 1 {
            reader.i32()?; // throttle time
        }
        if version >= 7 {
            reader.i16()?; // error
            reader.i32()?; // session
        }
        for _ in 0..reader.array_len(compact)? {
            let topic = if version >= 13 {
                // A topic id says nothing of the destination.
                reader.take(16).map(|_| &b""[..])?
            } else {
                reader.bytes(compact, false)?
            };
            for _ in 0..reader.array_len(compact)? {
                reader.take(4 + 2 + 8)?; // partition, error, high watermark
                if version >= 4 {
                    reader.take(8)?; // last stable offset
                }
                if version >= 5 {
                    reader.take(8)?; // log start offset
                }
                if version >= 4 {
                    for _ in 0..reader.array_len(compact)? {
                        reader.take(16)?;
                        if compact {
                            reader.tagged_fields()?;
                        }
                    }
                }
                if version >= 11 {
                    reader.i32()?; // preferred read replica
                }
                let batches = reader.bytes(compact, true)?;
                // A record batch's header alone is 61 bytes.
                if batches.len() >= 61 {
                    found.push(Records { topic, batches });
                }
                if compact {
                    reader.tagged_fields()?;
                }
            }
            if compact {
                reader.tagged_fields()?;
            }
        }
        Some(())
    };
    match read() {
        None if found.is_empty() => Err(()),
        _ => Ok(found),
    }
}

/// Records read from one produce or fetch at most: a fetch brings up to its
/// `max.partition.fetch.bytes` (1 MiB by default), a few thousand small records.
const MAX_RECORDS: usize = 4096;

/// Each record of `batches` (record batches one after another), from its attributes to
/// its end: what a producer wrote and a consumer reads, whatever offset the broker gave
/// it. Compressed batches are passed over (their records cannot be read without
/// inflating them), and a batch cut short gives the records it holds whole.
fn records_of(mut batches: &[u8]) -> Vec<&[u8]> {
    // base offset (8), batch length (4), leader epoch (4), magic (1), crc (4),
    // attributes (2), last offset delta (4), first and max timestamps (16), producer
    // id (8), producer epoch (2), base sequence (4), record count (4).
    let mut records = Vec::new();
    while batches.len() >= 61 && records.len() < MAX_RECORDS {
        let length = i32::from_be_bytes([batches[8], batches[9], batches[10], batches[11]]);
        let Ok(length) = usize::try_from(length) else {
            break;
        };
        let end = 12usize.saturating_add(length).min(batches.len());
        let batch = &batches[..end];
        let magic = batch.get(16).copied();
        let attributes = batch.get(21..23).map(|a| i16::from_be_bytes([a[0], a[1]]));
        let count = batch
            .get(57..61)
            .map(|c| i32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        if let (Some(2), Some(attributes), Some(count)) = (magic, attributes, count) {
            if attributes & 0x7 == 0 {
                let mut reader = Reader(batch.get(61..).unwrap_or(&[]));
                for _ in 0..count.clamp(0, MAX_RECORDS as i32) {
                    let Some(len) = reader.varint().and_then(|len| usize::try_from(len).ok())
                    else {
                        break;
                    };
                    let Some(record) = reader.take(len) else {
                        break;
                    };
                    if records.len() == MAX_RECORDS {
                        break;
                    }
                    records.push(record);
                }
            }
        }
        if end < 61 {
            break;
        }
        batches = &batches[end..];
    }
    records
}

/// What a record's headers say: the request id, and its place in a request/reply.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RecordHeaders {
    /// The request id.
    id: Option<String>,
    /// Its half of a request/reply by correlation id, if it is one.
    correlated: Option<Correlated>,
}

/// The header naming a request's or reply's correlation id, and the one naming the
/// topic to reply to: Spring Kafka's `ReplyingKafkaTemplate`, the convention of
/// request/reply over Kafka topics.
const CORRELATION_HEADER: &[u8] = b"kafka_correlationId";
const REPLY_TOPIC_HEADER: &[u8] = b"kafka_replyTopic";

/// A record's headers (`record` from its attributes on, as [`records_of`] gives it).
/// A record naming a topic to reply to and a correlation id is a request keyed by the
/// correlation id; one with a correlation id alone is the reply to it; any other is
/// one-way.
fn record_headers(record: &[u8]) -> RecordHeaders {
    let mut reader = Reader(record);
    let mut best = propagation::Best::default();
    let (mut correlation, mut reply_topic) = (None, false);
    let mut read = || -> Option<()> {
        reader.take(1)?; // attributes
        reader.varint()?; // timestamp delta
        reader.varint()?; // offset delta
        for _ in 0..2 {
            let len = reader.varint()?; // key, then value
            if len > 0 {
                reader.take(usize::try_from(len).ok()?)?;
            }
        }
        for _ in 0..reader.varint()?.clamp(0, 64) {
            let name_len = usize::try_from(reader.varint()?).ok()?;
            let name = reader.take(name_len)?;
            let value_len = reader.varint()?;
            let value = if value_len > 0 {
                reader.take(usize::try_from(value_len).ok()?)?
            } else {
                &[]
            };
            match name {
                CORRELATION_HEADER if !value.is_empty() => correlation = Some(value),
                REPLY_TOPIC_HEADER if !value.is_empty() => reply_topic = true,
                _ => best.field(name, value),
            }
        }
        Some(())
    };
    read();
    let correlated = correlation
        .map(super::correlation_key)
        .map(|key| match reply_topic {
            true => Correlated::Request(key),
            false => Correlated::Reply(key),
        });
    RecordHeaders {
        id: best.id(),
        correlated,
    }
}

/// Each record of `records` (per topic and partition, (topic, record batches)) with
/// its topic, up to [`MAX_RECORDS`] in all.
fn each_record<'a>(records: &[(&'a [u8], &'a [u8])]) -> Vec<(&'a [u8], &'a [u8])> {
    let mut all = Vec::new();
    for &(topic, batches) in records {
        let room = MAX_RECORDS - all.len();
        all.extend(
            records_of(batches)
                .into_iter()
                .take(room)
                .map(|r| (topic, r)),
        );
        if all.len() == MAX_RECORDS {
            break;
        }
    }
    all
}

/// Whether `records` hold records and every one is a request or reply by correlation
/// id: then the produce or fetch that carries them is housekeeping, and they are its
/// messages.
fn only_correlated(records: &[(&[u8], &[u8])]) -> bool {
    let all = each_record(records);
    !all.is_empty() && (all.iter()).all(|&(_, record)| record_headers(record).correlated.is_some())
}

/// The label of a produce (`verb` publish) or fetch (deliver) carrying `records`, as
/// (topic, record batches): one message per record. The first one-way record is the
/// produce or fetch itself, each further record a message of its own: one-way, or a
/// request or reply by correlation id ([`record_headers`]).
fn records_label<'b>(verb: &str, records: &[(&[u8], &[u8])]) -> Label<'b> {
    let name = |topic: &[u8]| format!("{verb} {}", destination(topic));
    let all = each_record(records);
    let headers: Vec<RecordHeaders> = (all.iter()).map(|&(_, r)| record_headers(r)).collect();
    // The message's own record: its first one-way one; else it is housekeeping, named
    // for its first topic.
    let own = headers.iter().position(|h| h.correlated.is_none());
    let own_topic = own.map_or(records.first().map(|r| r.0), |k| Some(all[k].0));
    let mut label = Label {
        operation: own_topic.map(|topic| Cow::Owned(name(topic))),
        status: Status::Unknown,
        ..Label::default()
    };
    let mut named: Option<(&[u8], String)> = None;
    for (k, (&(topic, record), headers)) in all.iter().zip(headers).enumerate() {
        let content = Content::of(topic, record);
        if Some(k) == own {
            label.propagated = headers.id;
            label.content = content;
            continue;
        }
        // Named only where its topic is not the message's own, once per run of a topic.
        let operation = match Some(topic) == own_topic && own.is_some() {
            true => None,
            false => match &named {
                Some((last, name)) if *last == topic => Some(name.clone()),
                _ => {
                    let this = name(topic);
                    named = Some((topic, this.clone()));
                    Some(this)
                }
            },
        };
        label.further.push(Further {
            content,
            propagated: headers.id,
            operation,
            correlated: headers.correlated,
        });
    }
    label
}

/// The request header's length (after the size): API key, version, correlation id,
/// client id, and for flexible versions the tagged fields.
fn request_header_len(message: &[u8], api_key: i16, version: i16) -> Option<usize> {
    let mut reader = Reader(message.get(8..)?);
    reader.bytes(false, false)?;
    if flexible(api_key, version) {
        reader.tagged_fields()?;
    }
    Some(message.len() - reader.0.len())
}

/// The response header's length (after the size).
fn response_header_len(asked: Asked) -> usize {
    // The correlation id, and for flexible versions an (almost always empty) tag list.
    4 + usize::from(flexible(asked.api_key, asked.version))
}

impl Protocol for Kafka {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        let Some(head) = bytes.get(..4) else {
            return Step::NeedMore;
        };
        let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let Ok(size) = usize::try_from(size) else {
            return Step::Invalid;
        };
        if !(4..=MAX_SIZE).contains(&size) {
            return Step::Invalid;
        }
        let len = 4 + size;
        if len > bytes.len() && len <= MAX_HELD {
            // Held whole: a produce's or a fetch's records are read for their digest.
            return Step::NeedMore;
        }
        let message = &bytes[4..bytes.len().min(len)];
        match from {
            Side::Client => {
                let Some(head) = message.get(..8) else {
                    return Step::NeedMore;
                };
                let api_key = i16::from_be_bytes([head[0], head[1]]);
                let version = i16::from_be_bytes([head[2], head[3]]);
                let correlation = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
                if !(0..=MAX_API_KEY).contains(&api_key) || version < 0 {
                    return Step::Invalid;
                }
                let body = request_header_len(message, api_key, version).map(|at| &message[at..]);
                let only_correlated = api_key == PRODUCE
                    && body.is_some_and(|body| only_correlated(&produce_records(body, version)));
                let meaning = if api_key == PRODUCE {
                    match body.and_then(|body| produce_acks(body, version)) {
                        Some(0) => Meaning::OneWay,
                        Some(_) => Meaning::Request(Some(correlation as u32)),
                        None if message.len() < size => return Step::NeedMore,
                        None => return Step::Invalid,
                    }
                } else {
                    Meaning::Housekeeping
                };
                if meaning != Meaning::OneWay {
                    if self.asked.len() == MAX_OPEN {
                        self.asked.pop_front();
                    }
                    self.asked.push_back(Asked {
                        correlation,
                        api_key,
                        version,
                        only_correlated,
                    });
                }
                let meaning = match only_correlated {
                    // Its records are the messages, each a request or a reply.
                    true => Meaning::Housekeeping,
                    false => meaning,
                };
                Step::Message { len, meaning }
            }
            Side::Server => {
                let Some(head) = message.get(..4) else {
                    return Step::NeedMore;
                };
                let correlation = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
                let Some(index) = self
                    .asked
                    .iter()
                    .position(|asked| asked.correlation == correlation)
                else {
                    // Answers a request this capture did not see.
                    return Step::Message {
                        len,
                        meaning: Meaning::Housekeeping,
                    };
                };
                let asked = self.asked[index];
                let meaning = match asked.api_key {
                    PRODUCE if asked.only_correlated => Meaning::Housekeeping,
                    PRODUCE => Meaning::Reply(Some(correlation as u32)),
                    FETCH => {
                        let body = message.get(response_header_len(asked)..).unwrap_or(&[]);
                        match fetch_records(body, asked.version) {
                            Ok(records) if records.is_empty() => Meaning::Housekeeping,
                            Ok(records) => {
                                let records: Vec<(&[u8], &[u8])> =
                                    (records.iter()).map(|r| (r.topic, r.batches)).collect();
                                match only_correlated(&records) {
                                    // Its records are the messages, each a request or
                                    // a reply.
                                    true => Meaning::Housekeeping,
                                    false => Meaning::OneWay,
                                }
                            }
                            Err(()) if message.len() >= size => Meaning::Housekeeping,
                            Err(()) if size > MAX_HELD => Meaning::OneWay,
                            Err(()) => return Step::NeedMore,
                        }
                    }
                    _ => Meaning::Housekeeping,
                };
                self.asked.remove(index);
                self.answering = Some(asked);
                Step::Message { len, meaning }
            }
        }
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        match from {
            Side::Client => looks_like_request(bytes),
            Side::Server => bytes.get(..8).is_some_and(|head| {
                let size = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
                let correlation = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
                (4..MAX_SIZE as i32).contains(&size)
                    && self
                        .asked
                        .iter()
                        .any(|asked| asked.correlation == correlation)
            }),
        }
    }

    fn label<'b>(&mut self, from: Side, meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        let message = head.get(4..).unwrap_or(&[]);
        let produce = message.get(..4).and_then(|head| {
            let api_key = i16::from_be_bytes([head[0], head[1]]);
            (api_key == PRODUCE).then(|| i16::from_be_bytes([head[2], head[3]]))
        });
        match (from, meaning) {
            (Side::Client, Meaning::Request(_) | Meaning::OneWay | Meaning::Housekeeping) => {
                let Some(version) = produce else {
                    return Label::default();
                };
                let records = request_header_len(message, PRODUCE, version)
                    .map(|at| produce_records(&message[at..], version))
                    .unwrap_or_default();
                match records.is_empty() {
                    true => records_label("publish", &[(b"", b"")]),
                    false => records_label("publish", &records),
                }
            }
            (Side::Server, Meaning::Reply(_)) => {
                let answering = self.answering.take();
                let error = answering.and_then(|asked| {
                    let body = message.get(response_header_len(asked)..)?;
                    produce_error(body, asked.version)
                });
                Label {
                    status: match error {
                        Some(0) => Status::Ok,
                        Some(code) => Status::Failed(u32::from(code.unsigned_abs())),
                        None => Status::Unknown,
                    },
                    ..Label::default()
                }
            }
            (Side::Server, Meaning::OneWay | Meaning::Housekeeping) => {
                let Some(asked) = self.answering.take().filter(|a| a.api_key == FETCH) else {
                    return Label::default();
                };
                let body = message.get(response_header_len(asked)..).unwrap_or(&[]);
                let records: Vec<(&[u8], &[u8])> = match fetch_records(body, asked.version) {
                    Ok(records) => (records.iter()).map(|r| (r.topic, r.batches)).collect(),
                    Err(()) => Vec::new(),
                };
                match (records.is_empty(), meaning) {
                    (true, Meaning::OneWay) => records_label("deliver", &[(b"", b"")]),
                    (true, _) => Label::default(),
                    (false, _) => records_label("deliver", &records),
                }
            }
            _ => {
                self.answering = None;
                Label::default()
            }
        }
    }
}

/// The first partition's error code in a produce response.
fn produce_error(body: &[u8], version: i16) -> Option<i16> {
    let compact = flexible(PRODUCE, version);
    let mut reader = Reader(body);
    if reader.array_len(compact)? == 0 {
        return None;
    }
    reader.bytes(compact, false)?;
    if reader.array_len(compact)? == 0 {
        return None;
    }
    reader.i32()?;
    reader.i16()
}

/// Kafka in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Kafka,
    label: "kafka",
    ports: &[9092],
    client_first: looks_like_request,
    guess: Some(9),
    unmistakable: None,
    server_first: None,
    broker: true,
    system: |_| Some("kafka"),
    tcp: || Box::new(super::delimited::Delimited::new(Kafka::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::super::delimited::conversation;
    use super::super::{CallKey, Output};
    use super::*;
    use crate::trace::Kind;

    fn zigzag(value: i64, out: &mut Vec<u8>) {
        let mut raw = ((value << 1) ^ (value >> 63)) as u64;
        loop {
            let byte = (raw & 0x7f) as u8;
            raw >>= 7;
            out.push(if raw > 0 { byte | 0x80 } else { byte });
            if raw == 0 {
                break;
            }
        }
    }

    /// A record batch (magic 2, uncompressed) of one record with a request id header.
    fn batch(value: &[u8], id: &[u8]) -> Vec<u8> {
        batch_of(&[(value, id)])
    }

    /// A record batch of one record per (value, request id).
    fn batch_of(records: &[(&[u8], &[u8])]) -> Vec<u8> {
        let with_headers: Vec<Record> = (records.iter())
            .map(|&(value, id)| (value, vec![(&b"X-Request-Id"[..], id)]))
            .collect();
        batch_with_headers(&with_headers)
    }

    /// A record: its value and its headers, as (name, value).
    type Record<'a> = (&'a [u8], Vec<(&'a [u8], &'a [u8])>);

    /// A record batch of one record per (value, headers).
    fn batch_with_headers(records: &[Record<'_>]) -> Vec<u8> {
        let mut batch = 0i64.to_be_bytes().to_vec();
        batch.extend_from_slice(&0i32.to_be_bytes()); // length, below
        batch.extend_from_slice(&0i32.to_be_bytes());
        batch.push(2);
        batch.extend_from_slice(&[0; 4]); // crc
        batch.extend_from_slice(&[0; 2]); // attributes
        batch.extend_from_slice(&[0; 4 + 8 + 8 + 8 + 2 + 4]);
        batch.extend_from_slice(&(records.len() as i32).to_be_bytes());
        for (offset, (value, headers)) in records.iter().enumerate() {
            let mut record = vec![0];
            zigzag(0, &mut record); // timestamp delta
            zigzag(offset as i64, &mut record); // offset delta
            zigzag(-1, &mut record); // no key
            zigzag(value.len() as i64, &mut record);
            record.extend_from_slice(value);
            zigzag(headers.len() as i64, &mut record);
            for (name, value) in headers {
                zigzag(name.len() as i64, &mut record);
                record.extend_from_slice(name);
                zigzag(value.len() as i64, &mut record);
                record.extend_from_slice(value);
            }
            zigzag(record.len() as i64, &mut batch);
            batch.extend_from_slice(&record);
        }
        let length = (batch.len() - 12) as i32;
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        batch
    }

    fn string(text: &[u8]) -> Vec<u8> {
        let mut bytes = (text.len() as i16).to_be_bytes().to_vec();
        bytes.extend_from_slice(text);
        bytes
    }

    fn sized(body: Vec<u8>) -> Vec<u8> {
        let mut bytes = (body.len() as i32).to_be_bytes().to_vec();
        bytes.extend_from_slice(&body);
        bytes
    }

    fn request(api_key: i16, version: i16, correlation: i32, body: &[u8]) -> Vec<u8> {
        let mut bytes = api_key.to_be_bytes().to_vec();
        bytes.extend_from_slice(&version.to_be_bytes());
        bytes.extend_from_slice(&correlation.to_be_bytes());
        bytes.extend_from_slice(&string(b"aiokafka-0.12"));
        bytes.extend_from_slice(body);
        sized(bytes)
    }

    fn response(correlation: i32, body: &[u8]) -> Vec<u8> {
        let mut bytes = correlation.to_be_bytes().to_vec();
        bytes.extend_from_slice(body);
        sized(bytes)
    }

    /// The array of one topic with one partition, up to that partition's own fields:
    /// how produce and fetch requests and responses all begin theirs.
    fn one_partition_of(topic: &[u8]) -> Vec<u8> {
        let mut bytes = 1i32.to_be_bytes().to_vec();
        bytes.extend_from_slice(&string(topic));
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes
    }

    /// A produce request (v7) of one batch to `topic`, partition 0.
    fn produce(correlation: i32, acks: i16, topic: &[u8], records: &[u8]) -> Vec<u8> {
        let mut body = (-1i16).to_be_bytes().to_vec(); // no transactional id
        body.extend_from_slice(&acks.to_be_bytes());
        body.extend_from_slice(&30_000i32.to_be_bytes());
        body.extend_from_slice(&one_partition_of(topic));
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&(records.len() as i32).to_be_bytes());
        body.extend_from_slice(records);
        request(PRODUCE, 7, correlation, &body)
    }

    fn produce_response(correlation: i32, topic: &[u8], error: i16) -> Vec<u8> {
        let mut body = one_partition_of(topic);
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&error.to_be_bytes());
        body.extend_from_slice(&[0; 8 + 8 + 8 + 4]);
        response(correlation, &body)
    }

    /// A fetch response (v4) for `topic` bringing `records` (maybe none).
    fn fetch_response(correlation: i32, topic: &[u8], records: &[u8]) -> Vec<u8> {
        fetch_response_of(correlation, &[(topic, records)])
    }

    /// A fetch response (v4) bringing, per (topic, records), one partition's records.
    fn fetch_response_of(correlation: i32, topics: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut body = 0i32.to_be_bytes().to_vec(); // throttle
        body.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, records) in topics {
            body.extend_from_slice(&string(topic));
            body.extend_from_slice(&1i32.to_be_bytes());
            body.extend_from_slice(&[0; 4 + 2 + 8 + 8]); // partition, error, watermark, lso
            body.extend_from_slice(&(-1i32).to_be_bytes()); // no aborted transactions
            body.extend_from_slice(&(records.len() as i32).to_be_bytes());
            body.extend_from_slice(records);
        }
        response(correlation, &body)
    }

    fn fetch(correlation: i32) -> Vec<u8> {
        request(FETCH, 4, correlation, &[0; 24])
    }

    fn run(conversation: &[(Side, Vec<u8>)]) -> Output {
        conversation::frame(Kafka::default(), conversation)
    }

    fn described(out: &Output) -> Vec<String> {
        conversation::described(out, true)
    }

    #[test]
    fn a_produce_is_a_call_and_a_fetch_bringing_records_a_delivery() {
        let records = batch(b"{\"order\":1}", b"r-9");
        let producer = run(&[
            (Side::Client, request(18, 0, 1, &[])),
            (Side::Server, response(1, &[0, 0, 0, 0, 0, 0])),
            (Side::Client, produce(2, 1, b"orders", &records)),
            (Side::Client, produce(3, 0, b"orders", &records)),
            (Side::Server, produce_response(2, b"orders", 0)),
        ]);
        assert_eq!(
            described(&producer),
            [
                "Client Call publish orders Unknown id=r-9",
                "Client Free publish orders Unknown id=r-9",
                "Server Return  Ok",
            ]
        );
        assert_eq!(producer.housekeeping.len(), 2);
        let consumer = run(&[
            (Side::Client, fetch(7)),
            (Side::Server, fetch_response(7, b"orders", &[])),
            (Side::Client, fetch(8)),
            (Side::Server, fetch_response(8, b"orders", &records)),
        ]);
        assert_eq!(
            described(&consumer),
            ["Server Free deliver orders Unknown id=r-9"]
        );
        // Both fetches and the empty answer.
        assert_eq!(consumer.housekeeping.len(), 3);
        assert!(consumer.problems.is_empty(), "{:?}", consumer.problems);
    }

    #[test]
    fn each_record_of_a_produce_or_a_fetch_is_a_message_of_its_own() {
        // Two batches, three records: one produce from web, one fetch to the worker.
        let mut records = batch_of(&[(b"{\"order\":1}", b"r-1"), (b"{\"order\":2}", b"r-2")]);
        records.extend(batch(b"{\"order\":3}", b"r-3"));
        let producer = run(&[
            (Side::Client, produce(2, 1, b"orders", &records)),
            (Side::Server, produce_response(2, b"orders", 0)),
        ]);
        assert_eq!(
            described(&producer),
            [
                "Client Call publish orders Unknown id=r-1",
                "Client Free publish orders Unknown id=r-2",
                "Client Free publish orders Unknown id=r-3",
                "Server Return  Ok",
            ]
        );
        let consumer = run(&[
            (Side::Client, fetch(8)),
            (Side::Server, fetch_response(8, b"orders", &records)),
        ]);
        assert_eq!(
            described(&consumer),
            [
                "Server Free deliver orders Unknown id=r-1",
                "Server Free deliver orders Unknown id=r-2",
                "Server Free deliver orders Unknown id=r-3",
            ]
        );
        // Each record's digest is the same on its way in and its way out, and its own.
        let contents = |out: &Output| -> Vec<Content> {
            let mut contents: Vec<Content> = (out.messages.iter())
                .filter(|m| m.kind != Kind::Return)
                .map(|m| m.content)
                .collect();
            contents.sort();
            contents
        };
        assert_eq!(contents(&producer), contents(&consumer));
        let mut distinct = contents(&consumer);
        distinct.dedup();
        assert_eq!(distinct.len(), 3);
    }

    #[test]
    fn a_response_split_anywhere_is_cut_whole() {
        let records = batch(b"v", b"r-1");
        let answer = fetch_response(8, b"orders", &records);
        for cut in 1..answer.len() {
            let out = run(&[
                (Side::Client, fetch(8)),
                (Side::Server, answer[..cut].to_vec()),
                (Side::Server, answer[cut..].to_vec()),
            ]);
            assert_eq!(
                described(&out),
                ["Server Free deliver orders Unknown id=r-1"],
                "cut at {cut}"
            );
        }
    }

    /// A record of a request/reply over topics (Spring Kafka's headers): a request
    /// names the topic to reply to.
    fn correlated(value: &'static [u8], id: &'static [u8], request: bool) -> Vec<u8> {
        let mut headers: Vec<(&[u8], &[u8])> = vec![(b"X-Request-Id", id)];
        if request {
            headers.push((REPLY_TOPIC_HEADER, b"reply-web"));
        }
        headers.push((CORRELATION_HEADER, id));
        batch_with_headers(&[(value, headers)])
    }

    #[test]
    fn a_request_over_topics_is_a_call_answered_by_the_record_that_brings_its_id_back() {
        let request = correlated(b"{\"item\":7}", b"r-5", true);
        let reply = correlated(b"{\"price\":1}", b"r-5", false);
        // web: the request produced on one connection, its reply fetched on another.
        // A produce of request records only is no publish of its own, nor its answer.
        let asks = run(&[
            (Side::Client, produce(2, 1, b"quote", &request)),
            (Side::Server, produce_response(2, b"quote", 0)),
        ]);
        assert_eq!(
            described(&asks),
            ["Client Call publish quote Unknown id=r-5"]
        );
        let answers = run(&[
            (Side::Client, fetch(3)),
            (Side::Server, fetch_response(3, b"reply-web", &reply)),
        ]);
        assert_eq!(described(&answers), ["Server Return  Unknown"]);
        // Both halves keyed by the correlation id alone, whatever their connection.
        let key = CallKey::Correlation(super::super::correlation_key(b"r-5"));
        assert_eq!(asks.messages[0].key, key);
        assert_eq!(answers.messages[0].key, key);
        assert!(key.spans_connections());
        // The worker: one fetch brings an order and the request; the reply goes out on
        // its producer's connection.
        let order = batch(b"{\"order\":1}", b"r-4");
        let serves = run(&[
            (Side::Client, fetch(8)),
            (
                Side::Server,
                fetch_response_of(8, &[(b"orders", &order), (b"quote", &request)]),
            ),
        ]);
        assert_eq!(
            described(&serves),
            [
                "Server Free deliver orders Unknown id=r-4",
                "Server Call deliver quote Unknown id=r-5"
            ]
        );
        assert_eq!(serves.messages[1].key, key);
        let replies = run(&[
            (Side::Client, produce(4, 1, b"reply-web", &reply)),
            (Side::Server, produce_response(4, b"reply-web", 0)),
        ]);
        assert_eq!(described(&replies), ["Client Return  Unknown"]);
        assert_eq!(replies.messages[0].key, key);
        // The reply carries its payload, as the record fetched at web does.
        assert_ne!(replies.messages[0].content, Content::NONE);
        assert_eq!(replies.messages[0].content, answers.messages[0].content);
        for out in [&asks, &answers, &serves, &replies] {
            assert!(out.problems.is_empty(), "{:?}", out.problems);
        }
    }

    #[test]
    fn a_failed_produce_says_so_and_what_is_not_kafka_is_refused() {
        let out = run(&[
            (Side::Client, produce(5, -1, b"orders", &[])),
            (Side::Server, produce_response(5, b"orders", 6)),
        ]);
        assert_eq!(
            described(&out),
            [
                "Client Call publish orders Unknown",
                "Server Return  Failed(6)"
            ]
        );
        let mut kafka = Kafka::default();
        for bytes in [
            &[0xff, 0, 0, 0][..],
            &[0, 0, 0, 8, 0x7f, 0, 0, 0, 0, 0, 0, 1],
        ] {
            assert_eq!(kafka.next(Side::Client, bytes), Step::Invalid, "{bytes:?}");
        }
        assert!(looks_like_request(&fetch(1)));
        assert!(!looks_like_request(b"GET / HTTP/1.1\r\n"));
    }
}
