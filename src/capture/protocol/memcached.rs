//! memcached over TCP, both of its protocols, told apart by each message's first byte.
//!
//! - The text protocol: a request is one command line, followed for storage commands
//!   (`set`, `add`, `replace`, `append`, `prepend`, `cas`, meta `ms`) by a data block of
//!   the length the line gives. A reply is one line, a meta `VA` line with its data
//!   block, or lines up to `END` (`VALUE` blocks, `STAT` lines). Replies come in request
//!   order. A command with `noreply`, a meta command with the `q` flag and `quit` get no
//!   reply: they are free-form messages.
//! - The binary protocol: a 24-byte header whose body length gives the message's
//!   length, and whose opaque field pairs a reply with its request. The quiet opcodes
//!   (`getq`, `setq`, ...) answer only on a hit or an error: they are free-form
//!   messages, and a reply to one is counted as a reply with no open request.

use super::{line_end, Label, Meaning, Protocol, Side, Status, Step};
use std::borrow::Cow;

/// Longest text line accepted (a multi-key `get` can be long; a key is at most 250 bytes).
const MAX_LINE: usize = 64 * 1024;
/// Largest reply read line by line up to its `END` before the stream counts as out of
/// step.
const MAX_LISTING: usize = 64 << 20;
/// The binary protocol's magic bytes and header length.
const BINARY_REQUEST: u8 = 0x80;
const BINARY_RESPONSE: u8 = 0x81;
const HEADER: usize = 24;
/// Largest binary body accepted (memcached's item limit is 1 GB at most).
const MAX_BODY: usize = 1 << 30;

/// Text commands, as their first word.
const COMMANDS: &[&[u8]] = &[
    b"get",
    b"gets",
    b"gat",
    b"gats",
    b"set",
    b"add",
    b"replace",
    b"append",
    b"prepend",
    b"cas",
    b"delete",
    b"incr",
    b"decr",
    b"touch",
    b"stats",
    b"version",
    b"flush_all",
    b"verbosity",
    b"quit",
    b"mg",
    b"ms",
    b"md",
    b"ma",
    b"mn",
    b"me",
    b"cache_memlimit",
    b"shutdown",
    b"lru_crawler",
    b"slabs",
    b"lru",
    b"watch",
    b"misbehave",
];

/// One-line text replies, as their first word.
const ONE_LINE_REPLIES: &[&[u8]] = &[
    b"STORED",
    b"NOT_STORED",
    b"EXISTS",
    b"NOT_FOUND",
    b"DELETED",
    b"TOUCHED",
    b"OK",
    b"ERROR",
    b"CLIENT_ERROR",
    b"SERVER_ERROR",
    b"VERSION",
    b"END",
    b"RESET",
    b"BUSY",
    b"BADCLASS",
    b"NOSPARE",
    b"NOTFULL",
    b"UNSAFE",
    b"SAME",
    b"HD",
    b"NF",
    b"NS",
    b"EX",
    b"EN",
    b"MN",
    b"ME",
];

/// Whether a client's first bytes look like memcached: a binary request header, or a
/// known text command followed by a space or the line's end.
pub fn looks_like_request(bytes: &[u8]) -> bool {
    match bytes.first() {
        Some(&BINARY_REQUEST) => bytes.len() >= HEADER,
        Some(_) => {
            let word = first_word(bytes);
            COMMANDS.contains(&word) && matches!(bytes.get(word.len()), Some(b' ' | b'\r' | b'\n'))
        }
        None => false,
    }
}

/// A binary opcode's name, as the text protocol's command (the quiet forms with `q`).
fn binary_name(opcode: u8) -> &'static str {
    const NAMES: [&str; 0x1f] = [
        "get",
        "set",
        "add",
        "replace",
        "delete",
        "incr",
        "decr",
        "quit",
        "flush_all",
        "getq",
        "noop",
        "version",
        "getk",
        "getkq",
        "append",
        "prepend",
        "stat",
        "setq",
        "addq",
        "replaceq",
        "deleteq",
        "incrq",
        "decrq",
        "quitq",
        "flushq",
        "appendq",
        "prependq",
        "verbosity",
        "touch",
        "gat",
        "gatq",
    ];
    NAMES.get(usize::from(opcode)).copied().unwrap_or("binary")
}

/// The memcached protocols (no state: text replies come in request order, binary ones
/// name their request).
#[derive(Debug, Default)]
pub struct Memcached;

fn first_word(line: &[u8]) -> &[u8] {
    let end = line
        .iter()
        .position(|b| b.is_ascii_whitespace())
        .unwrap_or(line.len());
    &line[..end]
}

/// The words of a line without its `\r\n`.
fn words(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
}

fn number(word: Option<&[u8]>) -> Option<usize> {
    std::str::from_utf8(word?).ok()?.parse().ok()
}

/// Whether a line is text a memcached peer could send: printable ASCII and spaces.
fn is_text(line: &[u8]) -> bool {
    line.iter()
        .all(|&b| b.is_ascii_graphic() || b == b' ' || b == b'\r' || b == b'\n' || b == b'\t')
}

/// The first line of `bytes`: `Ok(None)` if it has not all come, `Err` if it is too long
/// or not text.
fn first_line(bytes: &[u8]) -> Result<Option<&[u8]>, ()> {
    match line_end(bytes, MAX_LINE) {
        Some(end) if is_text(&bytes[..end]) => Ok(Some(&bytes[..end])),
        Some(_) => Err(()),
        None if bytes.len() >= MAX_LINE || !is_text(bytes) => Err(()),
        None => Ok(None),
    }
}

/// A text request: its length and whether a reply will come.
fn text_request(bytes: &[u8]) -> Result<Option<(usize, bool)>, ()> {
    let Some(line) = first_line(bytes)? else {
        return Ok(None);
    };
    let Some(command) = words(line).next() else {
        return Err(());
    };
    let data = match command {
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => {
            Some(number(words(line).nth(4)).ok_or(())?)
        }
        b"ms" => Some(number(words(line).nth(2)).ok_or(())?),
        _ => None,
    };
    let meta = command.len() == 2 && command[0] == b'm';
    let silent = words(line).last() == Some(&b"noreply"[..])
        || command == b"quit"
        || (meta && command != b"mn" && words(line).skip(1).any(|w| w == b"q"));
    let len = match data {
        Some(n) => line
            .len()
            .checked_add(n)
            .and_then(|l| l.checked_add(2))
            .ok_or(())?,
        None => line.len(),
    };
    Ok(Some((len, !silent)))
}

/// A text reply's length: one line, a `VA` line and its data, or lines up to `END`
/// (with the data block of every `VALUE` line skipped).
fn text_reply(bytes: &[u8]) -> Result<Option<usize>, ()> {
    let Some(line) = first_line(bytes)? else {
        return Ok(None);
    };
    let word = first_word(line);
    if word == b"VA" {
        let n = number(words(line).nth(1)).ok_or(())?;
        let len = line.len().checked_add(n).and_then(|l| l.checked_add(2));
        return len.map(Some).ok_or(());
    }
    if ONE_LINE_REPLIES.contains(&word) || (!word.is_empty() && word.iter().all(u8::is_ascii_digit))
    {
        return Ok(Some(line.len()));
    }
    // A listing: VALUE blocks or STAT lines (or the like) up to END.
    let mut at = 0;
    loop {
        if at > MAX_LISTING {
            return Err(());
        }
        let Some(line) = first_line(&bytes[at..])? else {
            return Ok(None);
        };
        let word = first_word(line);
        at += line.len();
        if word == b"END" {
            return Ok(Some(at));
        }
        if word == b"VALUE" {
            let n = number(words(line).nth(3)).ok_or(())?;
            at = at.checked_add(n).and_then(|a| a.checked_add(2)).ok_or(())?;
            if at > bytes.len() {
                return Ok(None);
            }
        }
    }
}

/// Whether a binary opcode is one of the quiet ones, answered only on a hit or an error.
fn quiet(opcode: u8) -> bool {
    matches!(opcode, 0x09 | 0x0d | 0x11..=0x1a | 0x1e | 0x24)
}

/// A binary message: its length and meaning, from the header.
fn binary(from: Side, bytes: &[u8]) -> Step {
    let expected = match from {
        Side::Client => BINARY_REQUEST,
        Side::Server => BINARY_RESPONSE,
    };
    if bytes[0] != expected {
        return Step::Invalid;
    }
    if bytes.len() < HEADER {
        return Step::NeedMore;
    }
    let body = u32::from_be_bytes(bytes[8..12].try_into().expect("four bytes")) as usize;
    if body > MAX_BODY {
        return Step::Invalid;
    }
    let opaque = u32::from_be_bytes(bytes[12..16].try_into().expect("four bytes"));
    let meaning = match from {
        Side::Client if quiet(bytes[1]) => Meaning::OneWay,
        Side::Client => Meaning::Request(Some(opaque)),
        Side::Server => Meaning::Reply(Some(opaque)),
    };
    Step::Message {
        len: HEADER + body,
        meaning,
    }
}

impl Protocol for Memcached {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        if matches!(bytes[0], BINARY_REQUEST | BINARY_RESPONSE) {
            return binary(from, bytes);
        }
        let step = match from {
            Side::Client => text_request(bytes).map(|r| {
                r.map(|(len, answered)| Step::Message {
                    len,
                    meaning: if answered {
                        Meaning::Request(None)
                    } else {
                        Meaning::OneWay
                    },
                })
            }),
            Side::Server => text_reply(bytes).map(|r| {
                r.map(|len| Step::Message {
                    len,
                    meaning: Meaning::Reply(None),
                })
            }),
        };
        match step {
            Ok(Some(step)) => step,
            Ok(None) => Step::NeedMore,
            Err(()) => Step::Invalid,
        }
    }

    fn label<'b>(&mut self, from: Side, _meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        let binary =
            head.first() == Some(&BINARY_REQUEST) || head.first() == Some(&BINARY_RESPONSE);
        match from {
            Side::Client if binary => Label {
                propagated: None,
                operation: head
                    .get(1)
                    .map(|&opcode| Cow::Borrowed(binary_name(opcode))),
                status: Status::Unknown,
                content: super::Content::NONE,
                further: Vec::new(),
            },
            Side::Client => Label {
                propagated: None,
                operation: std::str::from_utf8(first_word(head))
                    .ok()
                    .map(Cow::Borrowed),
                status: Status::Unknown,
                content: super::Content::NONE,
                further: Vec::new(),
            },
            // The status field: 0 is success; 1 (key not found) is an answer too.
            Side::Server if binary => Label {
                propagated: None,
                operation: None,
                status: match head.get(6..8) {
                    Some(&[0, 0]) | Some(&[0, 1]) => Status::Ok,
                    Some(code) => Status::Failed(u32::from(u16::from_be_bytes([code[0], code[1]]))),
                    None => Status::Unknown,
                },
                content: super::Content::NONE,
                further: Vec::new(),
            },
            Side::Server => Label {
                propagated: None,
                operation: None,
                status: match first_word(head) {
                    b"ERROR" | b"CLIENT_ERROR" | b"SERVER_ERROR" => Status::Failed(0),
                    _ => Status::Ok,
                },
                content: super::Content::NONE,
                further: Vec::new(),
            },
        }
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        match from {
            Side::Client => looks_like_request(bytes),
            Side::Server => match bytes.first() {
                Some(&BINARY_RESPONSE) => true,
                Some(_) => {
                    let word = first_word(bytes);
                    ONE_LINE_REPLIES.contains(&word)
                        || [&b"VALUE"[..], b"STAT", b"VA"].contains(&word)
                        || (!word.is_empty() && word.iter().all(u8::is_ascii_digit))
                }
                None => false,
            },
        }
    }
}

/// memcached in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Memcached,
    label: "memcached",
    ports: &[11211],
    client_first: looks_like_request,
    guess: Some(4),
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| Some("memcached"),
    tcp: || Box::new(super::delimited::Delimited::new(Memcached)),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn step(from: Side, bytes: &[u8]) -> Step {
        Memcached.next(from, bytes)
    }

    fn message(len: usize, meaning: Meaning) -> Step {
        Step::Message { len, meaning }
    }

    #[test]
    fn text_requests_end_after_their_line_or_their_data_block() {
        let get = b"get a b c\r\n";
        assert_eq!(
            step(Side::Client, get),
            message(get.len(), Meaning::Request(None))
        );
        let set = b"set k 0 0 5\r\nhello\r\nget k\r\n";
        assert_eq!(step(Side::Client, set), message(20, Meaning::Request(None)));
        // The data block may still be on its way: its length is known.
        assert_eq!(
            step(Side::Client, b"set k 0 0 5\r\nhel"),
            message(20, Meaning::Request(None))
        );
        let cas = b"cas k 0 0 2 99\r\nhi\r\n";
        assert_eq!(
            step(Side::Client, cas),
            message(cas.len(), Meaning::Request(None))
        );
        let meta = b"ms k 3 T60 F5\r\nabc\r\n";
        assert_eq!(
            step(Side::Client, meta),
            message(meta.len(), Meaning::Request(None))
        );
        assert_eq!(step(Side::Client, b"get a b"), Step::NeedMore);
    }

    #[test]
    fn commands_that_get_no_reply_are_free_form() {
        for silent in [
            &b"set k 0 0 1 noreply\r\nx\r\n"[..],
            b"delete k noreply\r\n",
            b"incr n 1 noreply\r\n",
            b"mg k v q\r\n",
            b"quit\r\n",
        ] {
            assert_eq!(
                step(Side::Client, silent),
                message(silent.len(), Meaning::OneWay),
                "{}",
                String::from_utf8_lossy(silent)
            );
        }
        // The meta no-op ends a batch of quiet commands with a reply of its own.
        assert_eq!(
            step(Side::Client, b"mn\r\n"),
            message(4, Meaning::Request(None))
        );
    }

    #[test]
    fn text_replies_are_a_line_a_meta_value_or_a_listing_up_to_end() {
        for line in [
            &b"STORED\r\n"[..],
            b"NOT_FOUND\r\n",
            b"42\r\n",
            b"HD\r\n",
            b"SERVER_ERROR out of memory\r\n",
            b"END\r\n",
        ] {
            assert_eq!(
                step(Side::Server, line),
                message(line.len(), Meaning::Reply(None))
            );
        }
        let va = b"VA 2 t30\r\nhi\r\n";
        assert_eq!(
            step(Side::Server, va),
            message(va.len(), Meaning::Reply(None))
        );
        // Data blocks may hold END or anything else: they are counted off, not read.
        let values = b"VALUE a 0 5\r\nEND\r\n\r\nVALUE b 1 2\r\nhi\r\nEND\r\nSTORED\r\n";
        assert_eq!(
            step(Side::Server, values),
            message(values.len() - 8, Meaning::Reply(None))
        );
        assert_eq!(step(Side::Server, &values[..30]), Step::NeedMore);
        let stats = b"STAT pid 1\r\nSTAT uptime 5\r\nEND\r\n";
        assert_eq!(
            step(Side::Server, stats),
            message(stats.len(), Meaning::Reply(None))
        );
    }

    #[test]
    fn binary_messages_are_measured_by_their_header_and_paired_by_opaque() {
        let mut request = vec![0u8; HEADER + 3];
        request[0] = BINARY_REQUEST;
        request[1] = 0x00; // get
        request[2..4].copy_from_slice(&3u16.to_be_bytes());
        request[8..12].copy_from_slice(&3u32.to_be_bytes());
        request[12..16].copy_from_slice(&0xabcdu32.to_be_bytes());
        assert_eq!(
            step(Side::Client, &request),
            message(HEADER + 3, Meaning::Request(Some(0xabcd)))
        );
        assert_eq!(step(Side::Client, &request[..10]), Step::NeedMore);
        request[1] = 0x09; // getq: answered only on a hit
        assert_eq!(
            step(Side::Client, &request),
            message(HEADER + 3, Meaning::OneWay)
        );
        let mut reply = request.clone();
        reply[0] = BINARY_RESPONSE;
        assert_eq!(
            step(Side::Server, &reply),
            message(HEADER + 3, Meaning::Reply(Some(0xabcd)))
        );
        // A reply's magic from the client is out of step.
        assert_eq!(step(Side::Client, &reply), Step::Invalid);
    }

    #[test]
    fn binary_garbage_and_endless_lines_are_refused() {
        assert_eq!(step(Side::Client, b"get \x01\x02\r\n"), Step::Invalid);
        assert_eq!(step(Side::Client, &[b'a'; MAX_LINE]), Step::Invalid);
        assert_eq!(
            step(Side::Client, b"set k 0 0 notanumber\r\n"),
            Step::Invalid
        );
        assert!(looks_like_request(b"get k\r\n"));
        assert!(!looks_like_request(b"GET / HTTP/1.1\r\n"));
        assert!(!looks_like_request(b"getaway\r\n"));
    }
}
