//! The PostgreSQL frontend/backend protocol (version 3): a call is a simple query
//! (`Q`) or an extended-query batch ending in Sync (`S`), or the startup message; its
//! return is everything the server sends up to ReadyForQuery (`Z`). Authentication
//! steps and the one-byte answers to SSL/GSS requests are housekeeping.

use super::{Label, Meaning, Protocol, Side, Status, Step};
use std::borrow::Cow;

const PROTOCOL_3: u32 = 196_608;
const SSL_REQUEST: u32 = 80_877_103;
const GSS_REQUEST: u32 = 80_877_104;
const CANCEL_REQUEST: u32 = 80_877_102;
/// Longest message accepted (the server's own limit is 1 GiB).
const MAX_MESSAGE: usize = 1 << 30;

/// Whether bytes start like a PostgreSQL client's first message, or (for a connection
/// whose start was not captured) like a query.
pub fn looks_like_client(bytes: &[u8]) -> bool {
    looks_like_startup(bytes) || looks_like_query(bytes)
}

fn looks_like_query(bytes: &[u8]) -> bool {
    matches!(bytes.first(), Some(b'Q' | b'P'))
        && matches!(typed_len(bytes), Ok(Some(_)) | Ok(None))
        && bytes.len() >= 5
        && u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) < 1 << 20
}

fn looks_like_startup(bytes: &[u8]) -> bool {
    if bytes.len() < 8 {
        return false;
    }
    let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let code = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    (8..10_000).contains(&len)
        && matches!(
            code,
            PROTOCOL_3 | SSL_REQUEST | GSS_REQUEST | CANCEL_REQUEST
        )
}

/// Protocol state of one connection.
#[derive(Debug, Default)]
pub struct Postgres {
    /// The client has sent its startup message.
    started: bool,
    /// The server owes a one-byte answer to an SSL or GSS request.
    owes_one_byte: bool,
    /// Client bytes of an extended-query batch before its Sync.
    batch: usize,
}

fn typed_len(bytes: &[u8]) -> Result<Option<usize>, ()> {
    if bytes.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
    if !(4..=MAX_MESSAGE).contains(&len) || !bytes[0].is_ascii_alphanumeric() {
        return Err(());
    }
    Ok((len < bytes.len()).then_some(1 + len))
}

/// The typed messages at the start of `bytes`: (type, body), as far as they are whole.
fn typed_messages(bytes: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = typed_len(&bytes[at..]).ok()??;
        let message = (bytes[at], &bytes[at + 5..at + len]);
        at += len;
        Some(message)
    })
}

/// A call's name: its SQL statement's first keyword (of a simple query or of the
/// batch's Parse), `STARTUP` for the session's start, else `EXECUTE` (a batch that
/// binds a statement prepared before).
fn request_name(head: &[u8]) -> Cow<'static, str> {
    if looks_like_startup(head) {
        return Cow::Borrowed("STARTUP");
    }
    for (kind, body) in typed_messages(head) {
        match kind {
            b'Q' => return super::sql_keyword(body),
            // Parse: the statement's name, then its text.
            b'P' => {
                let text = body
                    .iter()
                    .position(|&b| b == 0)
                    .map_or(&[][..], |end| &body[end + 1..]);
                return super::sql_keyword(text);
            }
            _ => {}
        }
    }
    Cow::Borrowed("EXECUTE")
}

impl Protocol for Postgres {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        match from {
            Side::Client if !self.started => {
                if bytes.len() < 8 {
                    return Step::NeedMore;
                }
                if !looks_like_startup(bytes) {
                    if looks_like_query(bytes) {
                        // The capture began after the startup: the session is running.
                        self.started = true;
                        return self.next(from, bytes);
                    }
                    return Step::Invalid;
                }
                let len = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
                if bytes.len() < len {
                    return Step::NeedMore;
                }
                let code = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
                let meaning = match code {
                    SSL_REQUEST | GSS_REQUEST => {
                        self.owes_one_byte = true;
                        Meaning::Housekeeping
                    }
                    CANCEL_REQUEST => Meaning::Housekeeping,
                    _ => {
                        self.started = true;
                        Meaning::Request(None)
                    }
                };
                Step::Message { len, meaning }
            }
            Side::Client => {
                // Gather an extended-query batch up to its Sync into one call.
                let mut at = self.batch;
                loop {
                    match typed_len(&bytes[at..]) {
                        Err(()) => return Step::Invalid,
                        Ok(None) => {
                            self.batch = at;
                            return Step::NeedMore;
                        }
                        Ok(Some(len)) => {
                            let kind = bytes[at];
                            at += len;
                            match kind {
                                b'Q' | b'S' | b'F' => {
                                    self.batch = 0;
                                    return Step::Message {
                                        len: at,
                                        meaning: Meaning::Request(None),
                                    };
                                }
                                // Passwords and SASL steps, Terminate, CopyData:
                                // housekeeping when they come alone.
                                b'p' | b'X' | b'd' | b'c' | b'f' if at == len => {
                                    self.batch = 0;
                                    return Step::Message {
                                        len,
                                        meaning: Meaning::Housekeeping,
                                    };
                                }
                                _ => {}
                            }
                        }
                    }
                }
            }
            Side::Server => {
                if self.owes_one_byte {
                    self.owes_one_byte = false;
                    return Step::Message {
                        len: 1,
                        meaning: Meaning::Housekeeping,
                    };
                }
                let mut at = 0;
                loop {
                    match typed_len(&bytes[at..]) {
                        Err(()) => return Step::Invalid,
                        Ok(None) => return Step::NeedMore,
                        Ok(Some(len)) => {
                            let kind = bytes[at];
                            at += len;
                            if kind == b'Z' {
                                return Step::Message {
                                    len: at,
                                    meaning: Meaning::Reply(None),
                                };
                            }
                            // Notices and notifications alone are not replies.
                            if at == len && (kind == b'N' || kind == b'A' || kind == b'S') {
                                return Step::Message {
                                    len,
                                    meaning: Meaning::Housekeeping,
                                };
                            }
                        }
                    }
                }
            }
        }
    }

    fn reset(&mut self, from: Side) {
        if from == Side::Client {
            self.batch = 0;
        } else {
            self.owes_one_byte = false;
        }
    }

    fn label<'b>(&mut self, from: Side, meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        match (from, meaning) {
            (Side::Client, Meaning::Request(_)) => Label {
                propagated: super::propagation::from_sql(head),
                operation: Some(request_name(head)),
                status: Status::Unknown,
                content: super::Content::NONE,
                further: Vec::new(),
            },
            (Side::Server, Meaning::Reply(_)) => Label {
                propagated: None,
                operation: None,
                status: if typed_messages(head).any(|(kind, _)| kind == b'E') {
                    Status::Failed(0)
                } else {
                    Status::Ok
                },
                content: super::Content::NONE,
                further: Vec::new(),
            },
            _ => Label::default(),
        }
    }

    fn could_start(&self, _from: Side, bytes: &[u8]) -> bool {
        matches!(typed_len(bytes), Ok(Some(_)) | Ok(None)) && !bytes.is_empty()
    }
}

/// PostgreSQL in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Postgres,
    label: "postgres",
    ports: &[5432],
    client_first: looks_like_client,
    guess: Some(3),
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| Some("postgresql"),
    tcp: || Box::new(super::delimited::Delimited::new(Postgres::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn a_query_runs_to_ready_for_query() {
        let mut pg = Postgres::default();
        let mut startup = (8u32 + 4).to_be_bytes().to_vec();
        startup.extend_from_slice(&PROTOCOL_3.to_be_bytes());
        startup.extend_from_slice(b"u\0\0\0");
        assert!(matches!(
            pg.next(Side::Client, &startup),
            Step::Message {
                meaning: Meaning::Request(None),
                ..
            }
        ));
        let mut batch = typed(b'P', b"stmt");
        batch.extend(typed(b'B', b"x"));
        batch.extend(typed(b'E', b""));
        let partial = batch.len();
        batch.extend(typed(b'S', b""));
        assert_eq!(pg.next(Side::Client, &batch[..partial]), Step::NeedMore);
        assert_eq!(
            pg.next(Side::Client, &batch),
            Step::Message {
                len: batch.len(),
                meaning: Meaning::Request(None)
            }
        );
        let mut reply = typed(b'1', b"");
        reply.extend(typed(b'D', b"row"));
        reply.extend(typed(b'Z', b"I"));
        assert_eq!(
            pg.next(Side::Server, &reply),
            Step::Message {
                len: reply.len(),
                meaning: Meaning::Reply(None)
            }
        );
    }
}
