//! Redis RESP (2 and 3): each request is a command (an array of bulk strings, or an
//! inline line), each reply one value, pipelined replies in order.

use super::{line_end, Label, Meaning, Protocol, Side, Status, Step};
use std::borrow::Cow;

/// Longest header line (type byte, number or simple string) accepted.
const MAX_LINE: usize = 64 * 1024;
/// Deepest nesting of aggregates accepted.
const MAX_DEPTH: usize = 64;

/// Whether bytes start like a Redis command.
pub fn looks_like_request(bytes: &[u8]) -> bool {
    bytes.len() >= 4 && bytes[0] == b'*' && bytes[1].is_ascii_digit()
}

/// The Redis protocol (no state: replies come in request order).
#[derive(Debug, Default)]
pub struct Resp;

/// The length of the RESP value at the start of `bytes`: `Ok(None)` if it is not all
/// there yet, `Err` if it is not RESP.
fn value_len(bytes: &[u8]) -> Result<Option<usize>, ()> {
    value_at(bytes, 0, 0)
}

fn number(line: &[u8]) -> Result<i64, ()> {
    std::str::from_utf8(line)
        .map_err(|_| ())?
        .trim_end()
        .parse()
        .map_err(|_| ())
}

fn value_at(bytes: &[u8], at: usize, depth: usize) -> Result<Option<usize>, ()> {
    if depth > MAX_DEPTH {
        return Err(());
    }
    let Some(&kind) = bytes.get(at) else {
        return Ok(None);
    };
    let Some(end) = line_end(&bytes[at..], MAX_LINE) else {
        return if bytes.len() - at >= MAX_LINE {
            Err(())
        } else {
            Ok(None)
        };
    };
    let line = &bytes[at + 1..at + end];
    let after = at + end;
    match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => Ok(Some(after)),
        b'$' | b'!' | b'=' => {
            let n = number(line)?;
            if n < 0 {
                return Ok(Some(after));
            }
            let total = after
                .checked_add(n as usize)
                .and_then(|t| t.checked_add(2))
                .ok_or(())?;
            Ok((total <= bytes.len()).then_some(total))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let n = number(line)?;
            if n < 0 {
                return Ok(Some(after));
            }
            let elements = if kind == b'%' || kind == b'|' {
                n.checked_mul(2).ok_or(())?
            } else {
                n
            };
            let mut at = after;
            for _ in 0..elements {
                match value_at(bytes, at, depth + 1)? {
                    Some(next) => at = next,
                    None => return Ok(None),
                }
            }
            if kind == b'|' {
                // An attribute map precedes the value it describes.
                return value_at(bytes, at, depth + 1);
            }
            Ok(Some(at))
        }
        _ => Err(()),
    }
}

/// A command's name, upper-cased: the first bulk string of an array, or an inline
/// command's first word.
fn command_name(head: &[u8]) -> Option<String> {
    let word = if head.first() == Some(&b'*') {
        // `*N\r\n$L\r\nNAME\r\n`
        let after_count = line_end(head, MAX_LINE)?;
        let rest = &head[after_count..];
        let after_length = line_end(rest, MAX_LINE)?;
        let rest = &rest[after_length..];
        &rest[..rest.iter().position(|&b| b == b'\r')?]
    } else {
        let end = head
            .iter()
            .position(|b| b.is_ascii_whitespace())
            .unwrap_or(head.len());
        &head[..end]
    };
    let word = &word[..word.len().min(32)];
    word.iter()
        .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
        .then(|| String::from_utf8_lossy(word).to_ascii_uppercase())
        .filter(|w| !w.is_empty())
}

impl Protocol for Resp {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        let inline = from == Side::Client && bytes[0] != b'*';
        let len = if inline {
            // An inline command: one line of words.
            match line_end(bytes, MAX_LINE) {
                Some(end) => Ok(Some(end)),
                None if bytes.len() >= MAX_LINE => Err(()),
                None => Ok(None),
            }
        } else {
            value_len(bytes)
        };
        let meaning = match from {
            Side::Client => Meaning::Request(None),
            Side::Server => Meaning::Reply(None),
        };
        match len {
            Ok(Some(len)) => Step::Message { len, meaning },
            Ok(None) => Step::NeedMore,
            Err(()) => Step::Invalid,
        }
    }

    fn label<'b>(&mut self, from: Side, _meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        match from {
            Side::Client => Label {
                propagated: None,
                operation: command_name(head).map(Cow::Owned),
                status: Status::Unknown,
                content: super::Content::NONE,
                further: Vec::new(),
            },
            Side::Server => Label {
                propagated: None,
                operation: None,
                status: match head.first() {
                    Some(b'-' | b'!') => Status::Failed(0),
                    Some(_) => Status::Ok,
                    None => Status::Unknown,
                },
                content: super::Content::NONE,
                further: Vec::new(),
            },
        }
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        match from {
            Side::Client => looks_like_request(bytes),
            Side::Server => bytes
                .first()
                .is_some_and(|b| b"+-:$*_,#(!=%~>|".contains(b)),
        }
    }
}

/// Redis in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Redis,
    label: "redis",
    ports: &[6379],
    client_first: looks_like_request,
    guess: Some(2),
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| Some("redis"),
    tcp: || Box::new(super::delimited::Delimited::new(Resp)),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_measured_whole_or_not_at_all() {
        let command = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        assert_eq!(value_len(command), Ok(Some(command.len())));
        assert_eq!(value_len(&command[..10]), Ok(None));
        assert_eq!(value_len(b"$-1\r\n"), Ok(Some(5)));
        assert_eq!(value_len(b"%1\r\n+a\r\n:1\r\n"), Ok(Some(12)));
        assert_eq!(value_len(b"?what\r\n"), Err(()));
        let mut resp = Resp;
        assert_eq!(
            resp.next(Side::Client, b"PING\r\n"),
            Step::Message {
                len: 6,
                meaning: Meaning::Request(None)
            }
        );
    }

    #[test]
    fn deep_nesting_is_refused_not_recursed_into() {
        let deep = b"*1\r\n".repeat(10_000);
        assert_eq!(value_len(&deep), Err(()));
    }
}
