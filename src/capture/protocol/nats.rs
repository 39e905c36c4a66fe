//! NATS (the core client protocol): a line-based protocol where the client publishes
//! (`PUB`, `HPUB` with headers) and the server delivers (`MSG`, `HMSG`) to
//! subscriptions. A publish or a delivery with no reply subject is a one-way message; a
//! publish naming a reply subject (an inbox) is a request, answered by the delivery of
//! a message to that inbox on the same connection; a delivery naming a reply subject is
//! a request the server passes to a responder, answered by the responder's publish to
//! that subject. So a NATS request/reply nests as a call, through the server. Everything
//! else (`INFO`, `CONNECT`, `SUB`, `UNSUB`, `PING`, `PONG`, `+OK`, `-ERR`) is
//! housekeeping. Owns NATS framing; linking a delivery to its publish is not its job.

use super::{
    destination, id_of, propagation, Content, Label, Meaning, Protocol, Side, Status, Step,
};
use std::borrow::Cow;
use std::collections::VecDeque;

/// Longest control line accepted (a server's `INFO` is the longest, a few kilobytes).
const MAX_LINE: usize = 64 * 1024;
/// Largest payload accepted (the server's `max_payload` is 1 MiB by default, 64 MiB at
/// most).
const MAX_PAYLOAD: usize = 64 * 1024 * 1024;
/// Requests remembered while their replies are awaited, per direction: a requester
/// that gave up leaves its inbox open, so the oldest are forgotten.
const MAX_OPEN: usize = 4096;

/// Whether a client's first bytes are a NATS `CONNECT`.
pub fn looks_like_connect(bytes: &[u8]) -> bool {
    starts_with_op(bytes, b"CONNECT") && bytes.get(7).is_some_and(|b| matches!(b, b' ' | b'\t'))
}

/// Whether a server's first bytes are a NATS `INFO`.
pub fn looks_like_info(bytes: &[u8]) -> bool {
    starts_with_op(bytes, b"INFO") && bytes.get(4).is_some_and(|b| matches!(b, b' ' | b'\t'))
}

fn starts_with_op(bytes: &[u8], op: &[u8]) -> bool {
    bytes.len() >= op.len() && bytes[..op.len()].eq_ignore_ascii_case(op)
}

/// The state of one NATS connection: the requests whose replies are awaited.
#[derive(Debug, Default)]
pub struct Nats {
    /// Reply subjects of the client's requests (answered by a delivery to them).
    asked_by_client: VecDeque<u32>,
    /// Reply subjects of the requests delivered to the client (answered by its
    /// publish to them).
    asked_of_client: VecDeque<u32>,
}

/// One parsed control line.
#[derive(Debug, PartialEq, Eq)]
enum Op<'a> {
    /// `PUB`/`HPUB` or `MSG`/`HMSG`.
    Message {
        subject: &'a [u8],
        reply: Option<&'a [u8]>,
        /// Header bytes (0 for `PUB`/`MSG`).
        headers: usize,
        /// Header and payload bytes.
        total: usize,
    },
    /// Anything else the protocol knows.
    Other,
}

/// Parses the control line `line` (without its `\r\n`) sent by `from`.
fn parse(from: Side, line: &[u8]) -> Result<Op<'_>, ()> {
    let mut words = line
        .split(|b| matches!(b, b' ' | b'\t'))
        .filter(|w| !w.is_empty());
    let op = words.next().ok_or(())?;
    let is = |name: &str| op.eq_ignore_ascii_case(name.as_bytes());
    let with_headers = match from {
        Side::Client if is("PUB") => false,
        Side::Client if is("HPUB") => true,
        Side::Server if is("MSG") => false,
        Side::Server if is("HMSG") => true,
        Side::Client if is("CONNECT") || is("SUB") || is("UNSUB") || is("PING") || is("PONG") => {
            return Ok(Op::Other)
        }
        Side::Server if is("INFO") || is("PING") || is("PONG") || is("+OK") || is("-ERR") => {
            return Ok(Op::Other)
        }
        _ => return Err(()),
    };
    let rest: Vec<&[u8]> = words.collect();
    // MSG <subject> <sid> [reply] <#bytes>; PUB <subject> [reply] <#bytes>; the H forms
    // put <#header bytes> before <#total bytes>.
    let sid = usize::from(from == Side::Server);
    let sizes = 1 + usize::from(with_headers);
    let fixed = 1 + sid + sizes;
    if rest.len() != fixed && rest.len() != fixed + 1 {
        return Err(());
    }
    let number = |word: &[u8]| -> Result<usize, ()> {
        std::str::from_utf8(word)
            .map_err(|_| ())?
            .parse::<usize>()
            .map_err(|_| ())
    };
    let total = number(rest[rest.len() - 1])?;
    let headers = if with_headers {
        number(rest[rest.len() - 2])?
    } else {
        0
    };
    if total > MAX_PAYLOAD || headers > total {
        return Err(());
    }
    let reply = (rest.len() == fixed + 1).then(|| rest[1 + sid]);
    Ok(Op::Message {
        subject: rest[0],
        reply,
        headers,
        total,
    })
}

/// The control line at the start of `bytes`, without its line end, and the length
/// with it.
fn control_line(bytes: &[u8]) -> Result<Option<(&[u8], usize)>, ()> {
    match memchr::memchr(b'\n', &bytes[..bytes.len().min(MAX_LINE)]) {
        Some(end) => {
            let line = &bytes[..end];
            Ok(Some((line.strip_suffix(b"\r").unwrap_or(line), end + 1)))
        }
        None if bytes.len() >= MAX_LINE => Err(()),
        None => Ok(None),
    }
}

fn remember(open: &mut VecDeque<u32>, id: u32) {
    if open.len() == MAX_OPEN {
        open.pop_front();
    }
    open.push_back(id);
}

fn answer(open: &mut VecDeque<u32>, id: u32) -> bool {
    match open.iter().position(|&asked| asked == id) {
        Some(index) => {
            open.remove(index);
            true
        }
        None => false,
    }
}

impl Protocol for Nats {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        let (line, line_len) = match control_line(bytes) {
            Ok(Some(found)) => found,
            Ok(None) => return Step::NeedMore,
            Err(()) => return Step::Invalid,
        };
        let Ok(op) = parse(from, line) else {
            return Step::Invalid;
        };
        let Op::Message {
            subject,
            reply,
            total,
            ..
        } = op
        else {
            return Step::Message {
                len: line_len,
                meaning: Meaning::Housekeeping,
            };
        };
        // The payload is followed by its own \r\n.
        let len = line_len + total + 2;
        if len > bytes.len() && len <= super::MAX_HELD {
            // Held whole, for its payload's digest.
            return Step::NeedMore;
        }
        let meaning = match (from, reply) {
            (Side::Client, Some(reply)) => {
                let id = id_of(reply);
                remember(&mut self.asked_by_client, id);
                Meaning::Request(Some(id))
            }
            (Side::Server, Some(reply)) => {
                let id = id_of(reply);
                remember(&mut self.asked_of_client, id);
                Meaning::Request(Some(id))
            }
            (Side::Client, None) => {
                let id = id_of(subject);
                match answer(&mut self.asked_of_client, id) {
                    true => Meaning::Reply(Some(id)),
                    false => Meaning::OneWay,
                }
            }
            (Side::Server, None) => {
                let id = id_of(subject);
                match answer(&mut self.asked_by_client, id) {
                    true => Meaning::Reply(Some(id)),
                    false => Meaning::OneWay,
                }
            }
        };
        Step::Message { len, meaning }
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        let word_end = bytes
            .iter()
            .take(8)
            .position(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            .unwrap_or(bytes.len().min(8));
        parse(from, &bytes[..word_end]).is_ok()
            || [&b"PUB "[..], b"HPUB ", b"MSG ", b"HMSG "]
                .iter()
                .any(|op| starts_with_op(bytes, op))
    }

    fn label<'b>(&mut self, from: Side, meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        let Ok(Some((line, line_len))) = control_line(head) else {
            return Label::default();
        };
        let Ok(Op::Message {
            subject,
            headers,
            total,
            ..
        }) = parse(from, line)
        else {
            return Label::default();
        };
        // The subject and the payload (headers apart: a server may add some) are what
        // goes in and comes out alike.
        let content = head
            .get(line_len + headers..line_len + total)
            .map_or(Content::NONE, |payload| Content::of(subject, payload));
        let verb = match (from, meaning) {
            (_, Meaning::Reply(_)) => {
                return Label {
                    status: Status::Ok,
                    content,
                    ..Label::default()
                }
            }
            (_, Meaning::Request(_)) => "request",
            (Side::Client, _) => "publish",
            (Side::Server, _) => "deliver",
        };
        let propagated = (headers > 0)
            .then(|| {
                let end = head.len().min(line_len + headers);
                propagation::from_http_head(&head[line_len..end])
            })
            .flatten();
        Label {
            operation: Some(Cow::Owned(format!("{verb} {}", destination(subject)))),
            status: Status::Unknown,
            propagated,
            content,
            further: Vec::new(),
        }
    }
}

/// NATS in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Nats,
    label: "nats",
    ports: &[4222],
    client_first: looks_like_connect,
    guess: Some(10),
    unmistakable: None,
    server_first: Some(looks_like_info),
    broker: true,
    system: |_| Some("nats"),
    tcp: || Box::new(super::delimited::Delimited::new(Nats::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::super::delimited::conversation;
    use super::super::Output;
    use super::*;
    use crate::trace::Kind;

    fn frame(conversation: &[(Side, &[u8])]) -> Output {
        conversation::frame(Nats::default(), conversation)
    }

    fn described(out: &Output) -> Vec<String> {
        conversation::described(out, false)
    }

    #[test]
    fn publishes_and_deliveries_are_one_way_and_the_rest_housekeeping() {
        let out = frame(&[
            (
                Side::Server,
                b"INFO {\"server_id\":\"x\",\"max_payload\":1048576}\r\n",
            ),
            (Side::Client, b"CONNECT {\"verbose\":false}\r\nPING\r\n"),
            (Side::Server, b"PONG\r\n"),
            (
                Side::Client,
                b"SUB orders workers 1\r\nPUB orders 5\r\nhello\r\n",
            ),
            (
                Side::Client,
                b"HPUB orders.7 34 39\r\nNATS/1.0\r\nX-Request-Id: abc123\r\n\r\nhello\r\n",
            ),
            (Side::Server, b"MSG orders 1 5\r\nhel"),
            (Side::Server, b"lo\r\n+OK\r\n"),
        ]);
        assert_eq!(
            described(&out),
            [
                "Client Free publish orders",
                "Client Free publish orders.* id=abc123",
                "Server Free deliver orders",
            ]
        );
        assert_eq!(out.housekeeping.len(), 6, "{:?}", out.housekeeping);
        assert!(out.problems.is_empty(), "{:?}", out.problems);
    }

    #[test]
    fn a_payload_split_over_segments_keeps_its_digest() {
        let payload = vec![b'x'; 3000];
        let mut whole = b"PUB orders 3000\r\n".to_vec();
        whole.extend_from_slice(&payload);
        whole.extend_from_slice(b"\r\n");
        let at_once = frame(&[(Side::Client, &whole[..])]);
        let split = frame(&[
            (Side::Client, &whole[..1448]),
            (Side::Client, &whole[1448..2896]),
            (Side::Client, &whole[2896..]),
        ]);
        assert_eq!(described(&split), ["Client Free publish orders"]);
        assert_eq!(split.messages[0].content, Content::of(b"orders", &payload));
        assert_eq!(split.messages[0].content, at_once.messages[0].content);
        // Its time is its first segment's; it ends with its last.
        assert_eq!((split.messages[0].first, split.messages[0].last), (0, 2000));
    }

    #[test]
    fn a_request_through_an_inbox_is_a_call_on_both_connections() {
        // The requester: a publish naming an inbox, answered by a delivery to it.
        let requester = frame(&[
            (Side::Client, b"SUB _INBOX.Q7x.* 2\r\n"),
            (Side::Client, b"PUB quote _INBOX.Q7x.Ab1 3\r\nbuy\r\n"),
            (Side::Client, b"PUB orders 1\r\nx\r\n"),
            (Side::Server, b"MSG _INBOX.Q7x.Ab1 2 4\r\n9.99\r\n"),
        ]);
        assert_eq!(
            described(&requester),
            [
                "Client Call request quote",
                "Client Free publish orders",
                "Server Return"
            ]
        );
        assert_eq!(requester.messages[0].key, requester.messages[2].key);
        // The responder: the server's delivery names the inbox, the answer is
        // published to it.
        let responder = frame(&[
            (Side::Server, b"MSG quote 1 _INBOX.Q7x.Ab1 3\r\nbuy\r\n"),
            (Side::Client, b"PUB _INBOX.Q7x.Ab1 4\r\n9.99\r\n"),
        ]);
        assert_eq!(
            described(&responder),
            ["Server Call request quote", "Client Return"]
        );
        assert_eq!(responder.messages[0].key, responder.messages[1].key);
        assert_eq!(responder.messages[1].kind, Kind::Return);
    }

    #[test]
    fn what_is_not_nats_is_refused() {
        for (from, line) in [
            (Side::Client, &b"MSG orders 1 5"[..]),
            (Side::Server, b"PUB orders 5"),
            (Side::Client, b"PUB orders"),
            (Side::Client, b"PUB orders x"),
            (Side::Client, b"PUB orders 99999999999"),
            (Side::Client, b"HPUB orders 9 5"),
            (Side::Client, b"GET / HTTP/1.1"),
        ] {
            assert!(
                parse(from, line).is_err(),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        assert!(looks_like_info(b"INFO {\"server_id\""));
        assert!(looks_like_connect(b"CONNECT {\"lang\":\"python3\"}\r\n"));
        assert!(!looks_like_connect(b"CONNECTED"));
    }
}
