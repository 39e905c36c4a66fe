//! Apache Thrift over TCP: the binary protocol (strict and old-style headers) and the
//! compact protocol, on the framed transport (a 4-byte length before each message) or
//! unframed (buffered), where a message ends only where its struct does, so the body
//! is skipped field by field. The sequence id pairs a reply with its call; a oneway
//! call is a free-form message; an exception (TApplicationException, or a reply whose
//! field is a declared exception rather than the result) is a failed reply. Names a
//! call by its method. Owns the wire formats; knows nothing of connections.

use super::{Label, Meaning, Protocol, Side, Status, Step};
use std::borrow::Cow;

/// Largest message accepted (Thrift's own default limit is 100 MB).
const MAX_MESSAGE: usize = 100 << 20;
/// Deepest nesting of structs and containers accepted.
const MAX_DEPTH: usize = 64;
/// Longest method name accepted.
const MAX_NAME: usize = 1024;

const CALL: u8 = 1;
const REPLY: u8 = 2;
const EXCEPTION: u8 = 3;
const ONEWAY: u8 = 4;

const COMPACT: u8 = 0x82;

/// Whether a client's first bytes look like a Thrift call, framed or not.
pub fn looks_like_call(bytes: &[u8]) -> bool {
    let start = |b: &[u8]| {
        matches!(b, [0x80, 0x01, _, CALL | ONEWAY, ..])
            || matches!(b, [COMPACT, v, ..] if v & 0x1f == 1 && matches!(v >> 5, CALL | ONEWAY))
    };
    start(bytes) || (bytes.len() > 4 && start(&bytes[4..]) && framed_len(bytes).is_some())
}

fn framed_len(bytes: &[u8]) -> Option<usize> {
    let len = u32::from_be_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    (len > 0 && len <= MAX_MESSAGE).then_some(len)
}

/// A message's header: its type, sequence id, method name and where its body starts.
#[derive(Debug, Clone, Copy)]
struct Header<'b> {
    kind: u8,
    seqid: u32,
    name: &'b [u8],
    body: usize,
    compact: bool,
}

/// Reads through bytes; `None` when they run out.
struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

/// Why a read stopped: the bytes ran out, or they cannot be Thrift.
#[derive(Debug, PartialEq, Eq)]
enum Stop {
    More,
    Invalid,
}

impl<'b> Reader<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], Stop> {
        let end = self.at.checked_add(n).ok_or(Stop::Invalid)?;
        let taken = self.bytes.get(self.at..end).ok_or(Stop::More)?;
        self.at = end;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, Stop> {
        Ok(self.take(1)?[0])
    }

    fn i32(&mut self) -> Result<i32, Stop> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn varint(&mut self) -> Result<u64, Stop> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift.min(63);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Stop::Invalid)
    }

    fn length(&mut self, len: u64) -> Result<usize, Stop> {
        usize::try_from(len)
            .ok()
            .filter(|&n| n <= MAX_MESSAGE)
            .ok_or(Stop::Invalid)
    }

    fn header(&mut self) -> Result<Header<'b>, Stop> {
        let first = self.byte()?;
        if first == COMPACT {
            let version = self.byte()?;
            if version & 0x1f != 1 {
                return Err(Stop::Invalid);
            }
            let kind = version >> 5;
            check_kind(kind)?;
            let seqid = self.varint()? as u32;
            let len = self.varint()?;
            let name = self.name(len)?;
            return header(kind, seqid, name, self.at, true);
        }
        self.at -= 1;
        let word = self.i32()?;
        if word < 0 {
            // Strict: version 1 and the type, then the name and sequence id.
            if (word as u32) >> 16 != 0x8001 {
                return Err(Stop::Invalid);
            }
            let kind = (word & 0xff) as u8;
            check_kind(kind)?;
            let len = self.i32()?;
            let name = self.name(u64::try_from(len).map_err(|_| Stop::Invalid)?)?;
            let seqid = self.i32()? as u32;
            return header(kind, seqid, name, self.at, false);
        }
        // Old style: the name's length, the name, the type, the sequence id.
        let name = self.name(word as u64)?;
        let kind = self.byte()?;
        let seqid = self.i32()? as u32;
        header(kind, seqid, name, self.at, false)
    }

    fn name(&mut self, len: u64) -> Result<&'b [u8], Stop> {
        if len as usize > MAX_NAME || len > MAX_NAME as u64 {
            return Err(Stop::Invalid);
        }
        let name = self.take(len as usize)?;
        if name.iter().all(|b| b.is_ascii_graphic()) {
            Ok(name)
        } else {
            Err(Stop::Invalid)
        }
    }

    /// Skips a binary-protocol value of type `kind`.
    fn skip_binary(&mut self, kind: u8, depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Invalid);
        }
        match kind {
            2 | 3 => self.take(1).map(drop),
            4 | 10 => self.take(8).map(drop),
            6 => self.take(2).map(drop),
            8 => self.take(4).map(drop),
            16 => self.take(16).map(drop),
            11 => {
                let len = self.i32()?;
                let len = self.length(u64::try_from(len).map_err(|_| Stop::Invalid)?)?;
                self.take(len).map(drop)
            }
            12 => loop {
                let field = self.byte()?;
                if field == 0 {
                    return Ok(());
                }
                self.take(2)?;
                self.skip_binary(field, depth + 1)?;
            },
            13 => {
                let (key, value) = (self.byte()?, self.byte()?);
                let count = self.count_binary()?;
                for _ in 0..count {
                    self.skip_binary(key, depth + 1)?;
                    self.skip_binary(value, depth + 1)?;
                }
                Ok(())
            }
            14 | 15 => {
                let element = self.byte()?;
                let count = self.count_binary()?;
                for _ in 0..count {
                    self.skip_binary(element, depth + 1)?;
                }
                Ok(())
            }
            _ => Err(Stop::Invalid),
        }
    }

    fn count_binary(&mut self) -> Result<usize, Stop> {
        let count = self.i32()?;
        self.length(u64::try_from(count).map_err(|_| Stop::Invalid)?)
    }

    /// Skips a compact-protocol value of type `kind` (`in_field`: a bool's value is in
    /// its field header, not after it).
    fn skip_compact(&mut self, kind: u8, in_field: bool, depth: usize) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Invalid);
        }
        match kind {
            1 | 2 if in_field => Ok(()),
            1..=3 => self.take(1).map(drop),
            4..=6 => self.varint().map(drop),
            7 => self.take(8).map(drop),
            13 => self.take(16).map(drop),
            8 => {
                let len = self.varint()?;
                let len = self.length(len)?;
                self.take(len).map(drop)
            }
            9 | 10 => {
                let header = self.byte()?;
                let count = match header >> 4 {
                    15 => {
                        let n = self.varint()?;
                        self.length(n)?
                    }
                    n => usize::from(n),
                };
                for _ in 0..count {
                    self.skip_compact(header & 0x0f, false, depth + 1)?;
                }
                Ok(())
            }
            11 => {
                let count = self.varint()?;
                let count = self.length(count)?;
                if count > 0 {
                    let types = self.byte()?;
                    for _ in 0..count {
                        self.skip_compact(types >> 4, false, depth + 1)?;
                        self.skip_compact(types & 0x0f, false, depth + 1)?;
                    }
                }
                Ok(())
            }
            12 => loop {
                let field = self.byte()?;
                if field == 0 {
                    return Ok(());
                }
                if field >> 4 == 0 {
                    self.varint()?;
                }
                self.skip_compact(field & 0x0f, true, depth + 1)?;
            },
            _ => Err(Stop::Invalid),
        }
    }

    /// Skips a message's body struct.
    fn skip_body(&mut self, compact: bool) -> Result<(), Stop> {
        if compact {
            self.skip_compact(12, false, 0)
        } else {
            self.skip_binary(12, 0)
        }
    }
}

fn check_kind(kind: u8) -> Result<(), Stop> {
    if (CALL..=ONEWAY).contains(&kind) {
        Ok(())
    } else {
        Err(Stop::Invalid)
    }
}

fn header(
    kind: u8,
    seqid: u32,
    name: &[u8],
    body: usize,
    compact: bool,
) -> Result<Header<'_>, Stop> {
    check_kind(kind)?;
    Ok(Header {
        kind,
        seqid,
        name,
        body,
        compact,
    })
}

/// The Thrift protocol's state for one connection: whether it is framed, learned from
/// the first message.
#[derive(Debug, Default)]
pub struct Thrift {
    framed: Option<bool>,
}

impl Thrift {
    /// The message at the start of `bytes`: its length and header.
    fn message<'b>(&mut self, bytes: &'b [u8]) -> Result<(usize, Header<'b>), Stop> {
        let framed = match self.framed {
            Some(framed) => framed,
            None => {
                let unframed = Reader { bytes, at: 0 }.header();
                let frame_starts = bytes.len() > 5
                    && framed_len(bytes).is_some()
                    && matches!(bytes[4..], [0x80, 0x01, ..] | [COMPACT, ..]);
                match unframed {
                    Ok(_) => false,
                    Err(Stop::More) if !frame_starts => return Err(Stop::More),
                    Err(_) => true,
                }
            }
        };
        if framed {
            let len = framed_len(bytes).ok_or(if bytes.len() < 4 {
                Stop::More
            } else {
                Stop::Invalid
            })?;
            let frame = bytes.get(4..4 + len.min(bytes.len() - 4)).unwrap_or(&[]);
            let header = match (Reader {
                bytes: frame,
                at: 0,
            })
            .header()
            {
                Ok(header) => header,
                // A frame's header must fit in what came of it; wait only while short.
                Err(Stop::More) if frame.len() < len => return Err(Stop::More),
                Err(_) => return Err(Stop::Invalid),
            };
            // A reply's first field tells success from a declared exception: wait for it.
            if frame.len() < len.min(header.body + 3) {
                return Err(Stop::More);
            }
            self.framed = Some(true);
            return Ok((4 + len, header));
        }
        let mut reader = Reader { bytes, at: 0 };
        let header = reader.header()?;
        reader.skip_body(header.compact)?;
        self.framed = Some(false);
        Ok((reader.at, header))
    }
}

impl Protocol for Thrift {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        match self.message(bytes) {
            Err(Stop::More) => Step::NeedMore,
            Err(Stop::Invalid) => Step::Invalid,
            Ok((len, header)) => {
                let meaning = match (from, header.kind) {
                    (Side::Client, CALL) => Meaning::Request(Some(header.seqid)),
                    (Side::Client, ONEWAY) => Meaning::OneWay,
                    (Side::Server, REPLY | EXCEPTION) => Meaning::Reply(Some(header.seqid)),
                    _ => return Step::Invalid,
                };
                Step::Message { len, meaning }
            }
        }
    }

    fn reset(&mut self, _from: Side) {}

    fn could_start(&self, _from: Side, bytes: &[u8]) -> bool {
        let start = if self.framed == Some(true) {
            bytes.get(4..).unwrap_or(&[])
        } else {
            bytes
        };
        matches!(start, [0x80, 0x01, 0x00, CALL..=ONEWAY, ..] | [COMPACT, ..])
    }

    fn label<'b>(&mut self, from: Side, _meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        let start = if self.framed == Some(true) {
            head.get(4..).unwrap_or(&[])
        } else {
            head
        };
        let mut reader = Reader {
            bytes: start,
            at: 0,
        };
        let Ok(header) = reader.header() else {
            return Label::default();
        };
        match from {
            Side::Client => Label {
                propagated: None,
                operation: std::str::from_utf8(header.name).ok().map(Cow::Borrowed),
                status: Status::Unknown,
                content: super::Content::NONE,
                further: Vec::new(),
            },
            Side::Server => {
                // A reply's struct holds field 0 (the result) or a declared exception.
                let field = if header.compact {
                    start.get(header.body).map(|b| {
                        if b >> 4 == 0 {
                            // The field id follows as a zigzag varint: not field 0 unless 0.
                            u8::from(start.get(header.body + 1) != Some(&0))
                        } else {
                            b >> 4
                        }
                    })
                } else {
                    start.get(header.body).and_then(|&kind| {
                        (kind != 0).then(|| start.get(header.body + 2).copied())?
                    })
                };
                let failed = header.kind == EXCEPTION || field.is_some_and(|id| id != 0);
                Label {
                    propagated: None,
                    operation: None,
                    status: if failed {
                        Status::Failed(0)
                    } else {
                        Status::Ok
                    },
                    content: super::Content::NONE,
                    further: Vec::new(),
                }
            }
        }
    }
}

/// Apache Thrift in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Thrift,
    label: "thrift",
    ports: &[9090],
    client_first: looks_like_call,
    guess: Some(5),
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| Some("apache_thrift"),
    tcp: || Box::new(super::delimited::Delimited::new(Thrift::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::super::delimited::Delimited;
    use super::super::{Chunk, Framer, Output};
    use super::*;
    use crate::trace::Kind;

    /// A strict binary message: header, then a struct with field `field` (an i32), or
    /// empty.
    fn binary(kind: u8, name: &str, seqid: u32, field: Option<i16>) -> Vec<u8> {
        let mut bytes = vec![0x80, 0x01, 0x00, kind];
        bytes.extend_from_slice(&(name.len() as u32).to_be_bytes());
        bytes.extend_from_slice(name.as_bytes());
        bytes.extend_from_slice(&seqid.to_be_bytes());
        if let Some(id) = field {
            bytes.push(8);
            bytes.extend_from_slice(&id.to_be_bytes());
            bytes.extend_from_slice(&7i32.to_be_bytes());
        }
        // A list of two strings, to skip.
        bytes.extend_from_slice(&[15, 0, 9, 11, 0, 0, 0, 2, 0, 0, 0, 1, b'a', 0, 0, 0, 0]);
        bytes.push(0);
        bytes
    }

    fn compact(kind: u8, name: &str, seqid: u8, field: u8) -> Vec<u8> {
        let mut bytes = vec![COMPACT, (kind << 5) | 1, seqid, name.len() as u8];
        bytes.extend_from_slice(name.as_bytes());
        // Field `field` (an i32, zigzag 14; field 0 in the long form, its id after the
        // header); then a bool field; then a map of one i32 to a binary.
        if field == 0 {
            bytes.extend_from_slice(&[5, 0, 14]);
        } else {
            bytes.extend_from_slice(&[(field << 4) | 5, 14]);
        }
        bytes.extend_from_slice(&[0x11, 0x1b, 0x01, 0x58, 0x02, 0x01, b'x', 0]);
        bytes
    }

    fn framed(message: Vec<u8>) -> Vec<u8> {
        let mut bytes = (message.len() as u32).to_be_bytes().to_vec();
        bytes.extend(message);
        bytes
    }

    fn run(exchange: &[(Side, Vec<u8>)]) -> Vec<(Kind, String, Status)> {
        let mut framer = Delimited::new(Thrift::default());
        let mut out = Output::default();
        for (time, (side, bytes)) in exchange.iter().enumerate() {
            // Each message in two segments, cut in its middle.
            let cut = bytes.len() / 2;
            for (k, piece) in [&bytes[..cut], &bytes[cut..]].into_iter().enumerate() {
                framer.data(
                    *side,
                    Chunk {
                        time: (2 * time + k) as i64,
                        seq: 0,
                        bytes: piece,
                    },
                    &mut out,
                );
            }
        }
        framer.close(&mut out);
        assert!(out.problems.is_empty(), "{:?}", out.problems);
        out.messages
            .iter()
            .map(|m| {
                let name = out.name_of(m.operation).to_owned();
                (m.kind, name, m.status)
            })
            .collect()
    }

    #[test]
    fn unframed_binary_and_compact_calls_pair_by_sequence_id_out_of_order() {
        for wrap in [false, true] {
            let w = |m: Vec<u8>| if wrap { framed(m) } else { m };
            let got = run(&[
                (Side::Client, w(binary(CALL, "getUser", 1, Some(1)))),
                (Side::Client, w(binary(CALL, "getPost", 2, Some(1)))),
                (Side::Server, w(binary(REPLY, "getPost", 2, Some(0)))),
                (Side::Server, w(binary(REPLY, "getUser", 1, Some(1)))),
                (Side::Client, w(binary(ONEWAY, "log", 3, None))),
            ]);
            assert_eq!(
                got,
                vec![
                    (Kind::Call, "getUser".into(), Status::Unknown),
                    (Kind::Call, "getPost".into(), Status::Unknown),
                    (Kind::Return, String::new(), Status::Ok),
                    (Kind::Return, String::new(), Status::Failed(0)),
                    // A oneway call is named by its method too.
                    (Kind::Free, "log".into(), Status::Unknown),
                ],
                "framed {wrap}"
            );
        }
        let got = run(&[
            (Side::Client, compact(CALL, "compose", 9, 1)),
            (Side::Server, compact(REPLY, "compose", 9, 0)),
            (Side::Client, compact(CALL, "compose", 10, 1)),
            (Side::Server, compact(EXCEPTION, "compose", 10, 1)),
        ]);
        assert_eq!(
            got,
            vec![
                (Kind::Call, "compose".into(), Status::Unknown),
                (Kind::Return, String::new(), Status::Ok),
                (Kind::Call, "compose".into(), Status::Unknown),
                (Kind::Return, String::new(), Status::Failed(0)),
            ]
        );
    }

    #[test]
    fn calls_are_recognised_and_garbage_is_not() {
        assert!(looks_like_call(&binary(CALL, "ping", 0, None)));
        assert!(looks_like_call(&framed(compact(CALL, "ping", 0, 1))));
        assert!(!looks_like_call(b"GET / HTTP/1.1\r\n"));
        let mut thrift = Thrift::default();
        assert_eq!(
            thrift.next(Side::Client, &[0x80, 0x01, 0x00, 9, 0, 0, 0, 0]),
            Step::Invalid
        );
    }
}
