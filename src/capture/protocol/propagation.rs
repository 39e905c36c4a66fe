//! Propagated request ids: the request id or trace context a call carries
//! (`traceparent`, `b3`, `X-B3-TraceId`, `uber-trace-id`, `X-Request-ID`), read from
//! HTTP/1 headers, HTTP/2 and gRPC metadata, and sqlcommenter comments in SQL text.
//!
//! A request's id is the same on the call into a service and on the calls it makes,
//! so where both ends carry one, the link between them is known. Trace-context ids are
//! written as 32 lower-case hex digits whichever header carried them, so a
//! `traceparent` and a 64-bit `b3` id of the same trace agree. Owns reading one id per
//! call; what the ids say about parents is [`crate::nesting`]'s.

/// How much a header says, best first: a call carrying several is named by the best.
/// Trace context outranks a request id because services rewrite `X-Request-ID` more
/// often than they rewrite a trace id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    TraceParent,
    B3,
    Uber,
    RequestId,
}

/// The longest id kept: longer values are not ids but payload.
const MAX_ID: usize = 128;

/// Which propagation header a field name is, if any (any case).
fn kind(name: &[u8]) -> Option<Rank> {
    let name = name.trim_ascii();
    // Most fields are none of these: their length alone says so.
    if !matches!(name.len(), 2 | 10..=16) {
        return None;
    }
    let is = |wanted: &str| name.eq_ignore_ascii_case(wanted.as_bytes());
    if is("traceparent") {
        Some(Rank::TraceParent)
    } else if is("b3") || is("x-b3-traceid") {
        Some(Rank::B3)
    } else if is("uber-trace-id") {
        Some(Rank::Uber)
    } else if is("x-request-id") || is("request-id") || is("x-correlation-id") {
        Some(Rank::RequestId)
    } else {
        None
    }
}

/// The id a header carries, if `name` is one of the propagation headers (any case)
/// and its value is well formed.
fn header(name: &[u8], value: &[u8]) -> Option<(Rank, String)> {
    let rank = kind(name)?;
    let value = std::str::from_utf8(value).ok()?.trim();
    if value.is_empty() || value.len() > MAX_ID {
        return None;
    }
    let id = match rank {
        // version-traceid-spanid-flags
        Rank::TraceParent => {
            let trace = value.split('-').nth(1)?;
            if trace.len() != 32 {
                return None;
            }
            trace_id(trace)?
        }
        // b3: traceid-spanid[-sampled[-parentspanid]], a lone "0", "1" or "d" carrying
        // none; X-B3-TraceId: the trace id alone
        Rank::B3 => trace_id(value.split('-').next()?)?,
        // traceid:spanid:parentid:flags, the colons sometimes URL-encoded
        Rank::Uber => {
            let value = value.replace("%3A", ":").replace("%3a", ":");
            trace_id(value.split(':').next()?)?
        }
        Rank::RequestId => {
            if !value.bytes().all(|b| b.is_ascii_graphic()) {
                return None;
            }
            value.to_string()
        }
    };
    Some((rank, id))
}

/// A hex trace id of 16 or 32 digits as 32 lower-case digits; none for all zeros.
fn trace_id(text: &str) -> Option<String> {
    if !(text.len() == 16 || text.len() == 32) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    if text.bytes().all(|b| b == b'0') {
        return None;
    }
    let mut id = String::with_capacity(32);
    for _ in text.len()..32 {
        id.push('0');
    }
    id.extend(text.chars().map(|c| c.to_ascii_lowercase()));
    Some(id)
}

/// Collects header fields and keeps the best id among them.
#[derive(Debug, Default)]
pub struct Best(Option<(Rank, String)>);

impl Best {
    /// Looks at one header field.
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        if let Some((rank, id)) = header(name, value) {
            if self.0.as_ref().is_none_or(|(best, _)| rank < *best) {
                self.0 = Some((rank, id));
            }
        }
    }

    /// The best id seen.
    pub fn id(self) -> Option<String> {
        self.0.map(|(_, id)| id)
    }
}

/// The id in an HTTP/1 request's head (request line, then headers up to the blank
/// line or as far as `head` goes).
pub fn from_http_head(head: &[u8]) -> Option<String> {
    let mut best = Best::default();
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            break;
        }
        if let Some(colon) = memchr::memchr(b':', line) {
            best.field(&line[..colon], &line[colon + 1..]);
        }
    }
    best.id()
}

/// The id in SQL text's comments, as sqlcommenter writes them:
/// `/*traceparent='00-…-…-01',route='%2Forder'*/`, values URL-encoded.
pub fn from_sql(text: &[u8]) -> Option<String> {
    let mut best = Best::default();
    let mut rest = text;
    while let Some(start) = memchr::memmem::find(rest, b"/*") {
        let body = &rest[start + 2..];
        let Some(end) = memchr::memmem::find(body, b"*/") else {
            break;
        };
        for pair in body[..end].split(|&b| b == b',') {
            let Some(equals) = memchr::memchr(b'=', pair) else {
                continue;
            };
            let value = pair[equals + 1..].trim_ascii();
            let Some(value) = value.strip_prefix(b"'").and_then(|v| v.strip_suffix(b"'")) else {
                continue;
            };
            best.field(&pair[..equals], &url_decoded(value));
        }
        rest = &body[end + 2..];
    }
    best.id()
}

/// `%XX` escapes decoded; anything malformed left as it is.
fn url_decoded(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if value[i] == b'%' && i + 2 < value.len() {
            if let (Some(h), Some(l)) = (hex(value[i + 1]), hex(value[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(value[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

    #[test]
    fn trace_context_headers_of_one_trace_agree() {
        let parent = format!("00-{TRACE}-00f067aa0ba902b7-01");
        let b3 = format!("{TRACE}-e457b5a2e4d86bd1-1");
        let uber = format!("{TRACE}%3Ae457b5a2e4d86bd1%3A0%3A1");
        for (name, value) in [
            ("traceparent", parent.as_str()),
            ("B3", b3.as_str()),
            ("X-B3-TraceId", TRACE),
            ("uber-trace-id", uber.as_str()),
        ] {
            assert_eq!(
                header(name.as_bytes(), value.as_bytes()).map(|h| h.1),
                Some(TRACE.into()),
                "{name}"
            );
        }
    }

    #[test]
    fn a_64_bit_b3_id_is_the_low_half_of_a_128_bit_one() {
        let (_, id) = header(b"x-b3-traceid", b"A3CE929D0E0E4736").unwrap();
        assert_eq!(id, "0000000000000000a3ce929d0e0e4736");
    }

    #[test]
    fn malformed_or_empty_ids_are_not_ids() {
        assert_eq!(
            header(b"traceparent", b"00-0000000000000000-00f067aa0ba902b7-01"),
            None
        );
        assert_eq!(
            header(
                b"traceparent",
                format!("00-{}-01-01", "0".repeat(32)).as_bytes()
            ),
            None
        );
        assert_eq!(header(b"b3", b"1"), None);
        assert_eq!(header(b"x-request-id", b""), None);
        assert_eq!(header(b"x-request-id", b"has space"), None);
        assert_eq!(header(b"x-request-id", "x".repeat(200).as_bytes()), None);
        assert_eq!(header(b"content-type", b"text/plain"), None);
    }

    #[test]
    fn an_http_head_gives_its_best_id() {
        let head = format!(
            "GET /item/4 HTTP/1.1\r\nHost: web\r\nX-Request-ID: r-17\r\ntraceparent: 00-{TRACE}-00f067aa0ba902b7-01\r\n\r\nx-request-id: body"
        );
        assert_eq!(from_http_head(head.as_bytes()), Some(TRACE.into()));
        let head = b"GET / HTTP/1.1\r\nx-request-id:  r-17 \r\n\r\n";
        assert_eq!(from_http_head(head), Some("r-17".into()));
        assert_eq!(from_http_head(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), None);
    }

    #[test]
    fn sqlcommenter_comments_give_the_trace() {
        let sql = format!(
            "INSERT INTO orders (item) VALUES (4) /*route='%2Forder',traceparent='00-{TRACE}-00f067aa0ba902b7-01'*/"
        );
        assert_eq!(from_sql(sql.as_bytes()), Some(TRACE.into()));
        let encoded = format!("SELECT 1 /*traceparent='00%2D{TRACE}%2D00f067aa0ba902b7%2D01'*/");
        assert_eq!(from_sql(encoded.as_bytes()), Some(TRACE.into()));
        assert_eq!(from_sql(b"SELECT 1 /* unclosed traceparent='x'"), None);
        assert_eq!(from_sql(b"SELECT '/*' AS a"), None);
    }
}
