//! HTTP/1.x: requests and responses framed by Content-Length or chunked encoding,
//! pipelined requests answered in order, interim 1xx responses as housekeeping, and
//! bodies with no length running to the close.

use super::{line_end, Meaning, Protocol, Side, Step};
use std::collections::VecDeque;

/// Longest request or response head accepted; longer means the stream is not HTTP.
const MAX_HEAD: usize = 64 * 1024;

const METHODS: [&[u8]; 9] = [
    b"GET ",
    b"POST ",
    b"PUT ",
    b"DELETE ",
    b"HEAD ",
    b"OPTIONS ",
    b"PATCH ",
    b"CONNECT ",
    b"TRACE ",
];

/// Whether bytes start like an HTTP request.
pub fn looks_like_request(bytes: &[u8]) -> bool {
    METHODS.iter().any(|m| bytes.starts_with(m))
}

/// Longest operation name kept; a longer path is cut at a segment boundary.
const MAX_OPERATION: usize = 120;

/// An HTTP operation name: the method and the path, without the query, with the
/// segments that name one item rather than an operation replaced (`GET /item/{n}`,
/// `GET /user/{id}`), so that calls of one operation share one name.
pub fn operation_name(method: &str, target: &str) -> String {
    // An absolute-form target (a proxy request) names its path after the authority.
    let path = match target.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("/", |slash| &rest[slash..]),
        None => target,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut name = String::with_capacity(method.len() + 1 + path.len());
    name.push_str(method);
    name.push(' ');
    for (index, segment) in path.split('/').enumerate() {
        if index > 0 {
            name.push('/');
        }
        if name.len() > MAX_OPERATION {
            name.push('…');
            break;
        }
        name.push_str(template(segment));
    }
    name
}

/// What a path segment stands for: itself, or a placeholder for an item's number or id.
fn template(segment: &str) -> &str {
    let digits = segment.bytes().filter(u8::is_ascii_digit).count();
    if !segment.is_empty() && digits == segment.len() {
        "{n}"
    } else if segment.len() >= 8
        && digits > 0
        && segment
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b'-' || b == b'_')
    {
        "{id}"
    } else {
        segment
    }
}

/// An HTTP status as a call's outcome: server errors (5xx) are failures, as
/// OpenTelemetry counts them for a server's span.
pub fn status(code: u32) -> super::Status {
    if code >= 500 {
        super::Status::Failed(code)
    } else {
        super::Status::Ok
    }
}

fn looks_like_response(bytes: &[u8]) -> bool {
    bytes.starts_with(b"HTTP/1.")
}

/// HTTP/1.x framing state: whether each open request's response has a body, and the
/// head of a message whose body is still arriving (so it is parsed once, not once per
/// segment).
#[derive(Debug, Default)]
pub struct Http {
    /// For each request not yet answered, in order: was it a HEAD request?
    open_heads: VecDeque<bool>,
    /// Per side (client, server): the parsed head of the message under way.
    heads: [Option<(usize, Body, Meaning)>; 2],
}

#[derive(Debug, Clone, Copy)]
enum Body {
    None,
    Length(usize),
    Chunked,
    UntilClose,
}

struct Head {
    len: usize,
    content_length: Option<usize>,
    chunked: bool,
}

fn parse_head(bytes: &[u8]) -> Result<Option<Head>, ()> {
    let window = &bytes[..bytes.len().min(MAX_HEAD)];
    let end = match memchr::memmem::find(window, b"\r\n\r\n") {
        Some(i) => i + 4,
        None if bytes.len() >= MAX_HEAD => return Err(()),
        None => return Ok(None),
    };
    let mut head = Head {
        len: end,
        content_length: None,
        chunked: false,
    };
    for line in bytes[..end].split(|&b| b == b'\n').skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let value = std::str::from_utf8(&line[colon + 1..]).unwrap_or("").trim();
        if name.eq_ignore_ascii_case(b"content-length") {
            head.content_length = Some(value.parse().map_err(|_| ())?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            head.chunked = value.to_ascii_lowercase().contains("chunked");
        }
    }
    Ok(Some(head))
}

/// Length of a chunked body at the start of `bytes`, if it is all there.
fn chunked_len(bytes: &[u8]) -> Result<Option<usize>, ()> {
    let mut at = 0;
    loop {
        let Some(end) = line_end(&bytes[at..], 1024) else {
            return if bytes.len() - at >= 1024 {
                Err(())
            } else {
                Ok(None)
            };
        };
        let line = std::str::from_utf8(&bytes[at..at + end]).map_err(|_| ())?;
        let hex = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(hex, 16).map_err(|_| ())?;
        at += end;
        if size == 0 {
            // Trailer lines up to an empty line.
            loop {
                let Some(end) = line_end(&bytes[at..], MAX_HEAD) else {
                    return Ok(None);
                };
                let empty = bytes[at..at + end].trim_ascii().is_empty();
                at += end;
                if empty {
                    return Ok(Some(at));
                }
            }
        }
        at = at
            .checked_add(size)
            .and_then(|a| a.checked_add(2))
            .ok_or(())?;
        if at > bytes.len() {
            return Ok(None);
        }
    }
}

fn with_body(head_len: usize, body: Body, bytes: &[u8], meaning: Meaning) -> Step {
    let len = match body {
        Body::None => head_len,
        // The length is known from the head: the body need not be buffered.
        Body::Length(n) => match head_len.checked_add(n) {
            Some(total) => total,
            None => return Step::Invalid,
        },
        Body::Chunked => match chunked_len(&bytes[head_len..]) {
            Ok(Some(n)) => head_len + n,
            Ok(None) => return Step::NeedMore,
            Err(()) => return Step::Invalid,
        },
        Body::UntilClose => return Step::NeedMore,
    };
    Step::Message { len, meaning }
}

impl Http {
    /// The head of the message at the start of `bytes`: its length, body and meaning.
    fn head(&mut self, from: Side, bytes: &[u8]) -> Result<Option<(usize, Body, Meaning)>, ()> {
        if let Some(head) = self.heads[from as usize] {
            return Ok(Some(head));
        }
        let starts = match from {
            Side::Client => looks_like_request(bytes),
            Side::Server => looks_like_response(bytes),
        };
        if !starts && bytes.len() >= 8 {
            return Err(());
        }
        let Some(head) = parse_head(bytes)? else {
            return Ok(None);
        };
        if !starts {
            return Err(());
        }
        let parsed = match from {
            Side::Client => {
                let body = if head.chunked {
                    Body::Chunked
                } else {
                    head.content_length.map_or(Body::None, Body::Length)
                };
                (head.len, body, Meaning::Request(None))
            }
            Side::Server => {
                let status: u16 = bytes
                    .get(9..12)
                    .and_then(|s| std::str::from_utf8(s).ok())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                if (100..200).contains(&status) && status != 101 {
                    (head.len, Body::None, Meaning::Housekeeping)
                } else {
                    let to_head = self.open_heads.front().copied().unwrap_or(false);
                    let body = if to_head || status == 204 || status == 304 || status == 101 {
                        Body::None
                    } else if head.chunked {
                        Body::Chunked
                    } else {
                        head.content_length.map_or(Body::UntilClose, Body::Length)
                    };
                    (head.len, body, Meaning::Reply(None))
                }
            }
        };
        self.heads[from as usize] = Some(parsed);
        Ok(Some(parsed))
    }
}

impl Protocol for Http {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        let (head_len, body, meaning) = match self.head(from, bytes) {
            Ok(Some(head)) => head,
            Ok(None) => return Step::NeedMore,
            Err(()) => return Step::Invalid,
        };
        let step = with_body(head_len, body, bytes, meaning);
        if let Step::Message { .. } = step {
            self.heads[from as usize] = None;
            match meaning {
                Meaning::Request(_) => self.open_heads.push_back(bytes.starts_with(b"HEAD ")),
                Meaning::Reply(_) => {
                    self.open_heads.pop_front();
                }
                Meaning::Housekeeping | Meaning::OneWay => {}
            }
        }
        step
    }

    fn label<'b>(&mut self, from: Side, _meaning: Meaning, head: &'b [u8]) -> super::Label<'b> {
        let line = &head[..memchr::memchr(b'\r', head)
            .unwrap_or(head.len())
            .min(MAX_HEAD)];
        let line = String::from_utf8_lossy(line);
        let mut words = line.split(' ');
        match from {
            Side::Client => super::Label {
                propagated: super::propagation::from_http_head(head),
                operation: match (words.next(), words.next()) {
                    (Some(method), Some(target)) => {
                        Some(std::borrow::Cow::Owned(operation_name(method, target)))
                    }
                    _ => None,
                },
                status: super::Status::Unknown,
                content: super::Content::NONE,
                further: Vec::new(),
            },
            Side::Server => super::Label {
                propagated: None,
                operation: None,
                status: words
                    .nth(1)
                    .and_then(|code| code.parse().ok())
                    .map_or(super::Status::Unknown, status),
                content: super::Content::NONE,
                further: Vec::new(),
            },
        }
    }

    fn at_close(&mut self, from: Side, bytes: &[u8]) -> Option<Meaning> {
        self.heads[from as usize] = None;
        (from == Side::Server && looks_like_response(bytes) && parse_head(bytes).ok()??.len > 0)
            .then(|| {
                self.open_heads.pop_front();
                Meaning::Reply(None)
            })
    }

    fn reset(&mut self, from: Side) {
        self.heads[from as usize] = None;
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        match from {
            Side::Client => looks_like_request(bytes),
            Side::Server => looks_like_response(bytes),
        }
    }
}

/// HTTP/1.x in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Http,
    label: "http",
    ports: &[80, 8000, 8008, 8080, 8081, 8888, 3128],
    client_first: looks_like_request,
    guess: Some(1),
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| Some("http"),
    tcp: || Box::new(super::delimited::Delimited::new(Http::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn step(http: &mut Http, from: Side, bytes: &[u8]) -> Step {
        http.next(from, bytes)
    }

    #[test]
    fn content_length_and_chunked_bodies_are_framed() {
        let mut http = Http::default();
        let request = b"POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n";
        let first = request.len() - b"GET /b HTTP/1.1\r\n\r\n".len();
        assert_eq!(
            step(&mut http, Side::Client, request),
            Step::Message {
                len: first,
                meaning: Meaning::Request(None)
            }
        );
        assert_eq!(
            step(&mut http, Side::Client, &request[first..]),
            Step::Message {
                len: request.len() - first,
                meaning: Meaning::Request(None)
            }
        );
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        assert_eq!(
            step(&mut http, Side::Server, &chunked[..50]),
            Step::NeedMore
        );
        assert_eq!(
            step(&mut http, Side::Server, chunked),
            Step::Message {
                len: chunked.len(),
                meaning: Meaning::Reply(None)
            }
        );
    }

    #[test]
    fn interim_responses_and_head_requests() {
        let mut http = Http::default();
        let head = b"HEAD / HTTP/1.1\r\n\r\n";
        assert!(matches!(
            step(&mut http, Side::Client, head),
            Step::Message { .. }
        ));
        let interim = b"HTTP/1.1 100 Continue\r\n\r\n";
        assert_eq!(
            step(&mut http, Side::Server, interim),
            Step::Message {
                len: interim.len(),
                meaning: Meaning::Housekeeping
            }
        );
        // A response to HEAD has no body whatever its Content-Length says.
        let response = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
        assert_eq!(
            step(&mut http, Side::Server, response),
            Step::Message {
                len: response.len(),
                meaning: Meaning::Reply(None)
            }
        );
    }

    #[test]
    fn operation_names_template_numbers_and_ids() {
        assert_eq!(operation_name("GET", "/item/42?x=1"), "GET /item/{n}");
        assert_eq!(
            operation_name("PUT", "/user/3f2a9c1e-77aa-4b1c-9a7e-0c1d2e3f4a5b/cart"),
            "PUT /user/{id}/cart"
        );
        assert_eq!(operation_name("GET", "/"), "GET /");
        assert_eq!(operation_name("GET", "http://h:8080/a/7"), "GET /a/{n}");
        assert_eq!(operation_name("GET", "/deadbeef"), "GET /deadbeef");
    }

    #[test]
    fn garbage_is_invalid() {
        let mut http = Http::default();
        assert_eq!(
            step(&mut http, Side::Client, b"\x00\x01binary stuff"),
            Step::Invalid
        );
    }
}
