//! MySQL and MariaDB's client/server protocol over TCP.
//!
//! Every message is a sequence of packets (a 3-byte length and a sequence number).
//! The greeting, the client's handshake response and the authentication exchange that
//! follows are housekeeping, not calls. After it, each command the client sends (a
//! packet with sequence number 0: COM_QUERY, COM_STMT_PREPARE, COM_STMT_EXECUTE,
//! COM_PING, ...) is a call, answered in order by one OK or ERR packet, or by a result
//! set up to its final EOF or OK packet (both with and without CLIENT_DEPRECATE_EOF),
//! or by a prepared statement's description. COM_QUIT, COM_STMT_CLOSE and
//! COM_STMT_SEND_LONG_DATA get no answer: they are free-form messages. A connection
//! that switches to TLS is read by turns from there on. Names a call by its SQL
//! statement's first keyword (`SELECT`); an ERR packet fails it with its error number.

use super::{Label, Meaning, Protocol, Side, Status, Step};
use std::borrow::Cow;
use std::collections::VecDeque;

const HEADER: usize = 4;
/// A packet this long continues in the next one.
const CONTINUED: usize = 0xff_ffff;

const CLIENT_SSL: u32 = 0x800;
const CLIENT_DEPRECATE_EOF: u32 = 0x0100_0000;
const SERVER_MORE_RESULTS_EXISTS: u16 = 0x0008;

const COM_QUIT: u8 = 0x01;
const COM_FIELD_LIST: u8 = 0x04;
const COM_STATISTICS: u8 = 0x09;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;

/// Command names, for commands other than queries and prepared statements.
const COMMAND_NAMES: &[(u8, &str)] = &[
    (0x00, "SLEEP"),
    (0x02, "USE"),
    (0x04, "FIELD_LIST"),
    (0x05, "CREATE_DB"),
    (0x06, "DROP_DB"),
    (0x07, "REFRESH"),
    (0x09, "STATISTICS"),
    (0x0a, "PROCESS_INFO"),
    (0x0c, "PROCESS_KILL"),
    (0x0d, "DEBUG"),
    (0x0e, "PING"),
    (0x11, "CHANGE_USER"),
    (0x12, "BINLOG_DUMP"),
    (0x1a, "STMT_RESET"),
    (0x1b, "SET_OPTION"),
    (0x1c, "STMT_FETCH"),
    (0x1f, "RESET_CONNECTION"),
];

/// Whether a client's first bytes look like a MySQL command (a capture that began
/// after the handshake): one packet with sequence number 0 and a known command.
pub fn looks_like_command(bytes: &[u8]) -> bool {
    bytes.len() > HEADER && bytes[3] == 0 && bytes[HEADER] <= 0x1f && packet_len(bytes) > 0
}

fn packet_len(bytes: &[u8]) -> usize {
    usize::from(bytes[0]) | usize::from(bytes[1]) << 8 | usize::from(bytes[2]) << 16
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing seen yet: a greeting, or (mid-connection) a command.
    Start,
    /// Greeting seen: the client's handshake response comes next.
    Greeted,
    /// Authenticating, until the server's OK.
    Authenticating,
    /// Commands and their answers.
    Commands,
    /// The client asked for TLS: nothing more can be framed.
    Tls,
}

/// What answer a command awaits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaits {
    /// OK, ERR, or result sets.
    Results,
    /// A prepared statement's description.
    Prepared,
    /// Column definitions up to EOF.
    Fields,
    /// One packet of text.
    Text,
}

/// Where a server answer's scan stands, so that a long result set is read once, not
/// from its start again at every segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The answer's (or the next result set's) first packet.
    First,
    /// Definitions (of columns or parameters) still to come, then maybe an EOF, then
    /// what follows.
    Definitions { left: u64, then: After },
    /// The EOF packet after definitions, then what follows.
    DefinitionsEof { then: After },
    /// Rows up to the final EOF or OK.
    Rows,
    /// Column definitions up to EOF (COM_FIELD_LIST).
    FieldsUntilEof,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    Rows,
    /// A prepared statement's columns (count) after its parameters.
    Columns(u64),
    Done,
}

/// A server answer's scan: bytes read so far and what comes next.
#[derive(Debug, Clone, Copy)]
struct Scan {
    at: usize,
    stage: Stage,
    /// The previous packet was full length: this one continues it.
    continued: bool,
}

/// The MySQL protocol's state for one connection.
#[derive(Debug)]
pub struct MySql {
    phase: Phase,
    server_capabilities: u32,
    deprecate_eof: bool,
    awaiting: VecDeque<(Awaits, Option<Cow<'static, str>>)>,
    scan: Option<Scan>,
    /// The status of the answer just cut, for [`Protocol::label`].
    answered: Status,
    /// Statement ids of prepared statements, and their first keywords.
    prepared: Vec<(u32, Cow<'static, str>)>,
    /// The keyword of the statement whose description was just cut, with its id.
    just_prepared: Option<(u32, Cow<'static, str>)>,
}

impl Default for MySql {
    fn default() -> Self {
        MySql {
            phase: Phase::Start,
            server_capabilities: 0,
            deprecate_eof: false,
            awaiting: VecDeque::new(),
            scan: None,
            answered: Status::Unknown,
            prepared: Vec::new(),
            just_prepared: None,
        }
    }
}

/// Statements kept per connection for naming executions (drivers close theirs).
const MAX_PREPARED: usize = 4096;

/// One packet at `at`: its payload's range and where the next starts, if it has all
/// come.
fn packet(bytes: &[u8], at: usize) -> Option<(usize, usize)> {
    let header = bytes.get(at..at + HEADER)?;
    let len = packet_len(header);
    let end = at + HEADER + len;
    (end <= bytes.len()).then_some((at + HEADER, end))
}

/// A length-encoded integer at the start of `bytes`, and its size.
fn lenenc(bytes: &[u8]) -> Option<(u64, usize)> {
    let take = |n: usize| -> Option<u64> {
        let field = bytes.get(1..1 + n)?;
        Some(
            field
                .iter()
                .rev()
                .fold(0u64, |value, &b| value << 8 | u64::from(b)),
        )
    };
    match *bytes.first()? {
        b @ 0..=0xfa => Some((u64::from(b), 1)),
        0xfc => Some((take(2)?, 3)),
        0xfd => Some((take(3)?, 4)),
        0xfe => Some((take(8)?, 9)),
        _ => None,
    }
}

/// The server status flags of an OK packet (header byte included in `payload`).
fn ok_status(payload: &[u8]) -> Option<u16> {
    let (_, affected) = lenenc(payload.get(1..)?)?;
    let (_, insert_id) = lenenc(payload.get(1 + affected..)?)?;
    let at = 1 + affected + insert_id;
    Some(u16::from_le_bytes([
        *payload.get(at)?,
        *payload.get(at + 1)?,
    ]))
}

/// An ERR packet's status.
fn err_status(payload: &[u8]) -> Status {
    let code = match payload.get(1..3) {
        Some(code) => u32::from(u16::from_le_bytes([code[0], code[1]])),
        None => 0,
    };
    Status::Failed(code)
}

impl MySql {
    /// Reads on through a server answer; `Ok(Some(len))` once it is whole.
    fn scan_answer(&mut self, bytes: &[u8], awaits: Awaits) -> Result<Option<usize>, ()> {
        let mut scan = self.scan.take().unwrap_or(Scan {
            at: 0,
            stage: match awaits {
                Awaits::Fields => Stage::FieldsUntilEof,
                _ => Stage::First,
            },
            continued: false,
        });
        loop {
            let Some((start, end)) = packet(bytes, scan.at) else {
                self.scan = Some(scan);
                return Ok(None);
            };
            let payload = &bytes[start..end];
            let continues = end - start == CONTINUED;
            let was_continued = scan.continued;
            scan.at = end;
            scan.continued = continues;
            if was_continued {
                continue;
            }
            let first = payload.first().copied();
            let terminator = first == Some(0xfe) && payload.len() < CONTINUED;
            let (next, done) = match (scan.stage, awaits) {
                (Stage::First, Awaits::Text) => (Stage::First, Some(Status::Ok)),
                (Stage::First, _) if first == Some(0xff) => {
                    (Stage::First, Some(err_status(payload)))
                }
                (Stage::First, Awaits::Prepared) if first == Some(0x00) && payload.len() >= 9 => {
                    let id = u32::from_le_bytes([payload[1], payload[2], payload[3], payload[4]]);
                    let columns = u64::from(u16::from_le_bytes([payload[5], payload[6]]));
                    let params = u64::from(u16::from_le_bytes([payload[7], payload[8]]));
                    if let Some((_, keyword)) = self.awaiting.front() {
                        self.just_prepared =
                            Some((id, keyword.clone().unwrap_or(Cow::Borrowed("EXECUTE"))));
                    }
                    let columns_then = if columns > 0 {
                        After::Columns(columns)
                    } else {
                        After::Done
                    };
                    match (params, columns) {
                        (0, 0) => (Stage::First, Some(Status::Ok)),
                        (0, n) => (
                            Stage::Definitions {
                                left: n,
                                then: After::Done,
                            },
                            None,
                        ),
                        (n, _) => (
                            Stage::Definitions {
                                left: n,
                                then: columns_then,
                            },
                            None,
                        ),
                    }
                }
                (Stage::First, _) if first == Some(0x00) && payload.len() >= 7 => {
                    let more =
                        ok_status(payload).is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0);
                    if more {
                        (Stage::First, None)
                    } else {
                        (Stage::First, Some(Status::Ok))
                    }
                }
                (Stage::First, _) if terminator => (Stage::First, Some(Status::Ok)),
                // LOCAL INFILE: the client sends a file next; its answer comes after.
                (Stage::First, _) if first == Some(0xfb) => (Stage::First, Some(Status::Ok)),
                (Stage::First, _) => {
                    let (columns, size) = lenenc(payload).ok_or(())?;
                    if size != payload.len() || columns == 0 {
                        return Err(());
                    }
                    (
                        Stage::Definitions {
                            left: columns,
                            then: After::Rows,
                        },
                        None,
                    )
                }
                (Stage::Definitions { left, then }, _) => {
                    if first == Some(0xff) {
                        (Stage::First, Some(err_status(payload)))
                    } else if left > 1 {
                        (
                            Stage::Definitions {
                                left: left - 1,
                                then,
                            },
                            None,
                        )
                    } else if !self.deprecate_eof {
                        (Stage::DefinitionsEof { then }, None)
                    } else {
                        self.after_definitions(then)
                    }
                }
                (Stage::DefinitionsEof { then }, _) => {
                    if !terminator {
                        return Err(());
                    }
                    self.after_definitions(then)
                }
                (Stage::Rows, _) if first == Some(0xff) => {
                    (Stage::First, Some(err_status(payload)))
                }
                (Stage::Rows, _) if terminator => {
                    // EOF: warnings, then status; OK (DEPRECATE_EOF): as any OK.
                    let status = if payload.len() < 9 && !self.deprecate_eof {
                        payload.get(3..5).map(|s| u16::from_le_bytes([s[0], s[1]]))
                    } else {
                        ok_status(payload)
                    };
                    if status.is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0) {
                        (Stage::First, None)
                    } else {
                        (Stage::First, Some(Status::Ok))
                    }
                }
                (Stage::Rows, _) => (Stage::Rows, None),
                (Stage::FieldsUntilEof, _) if first == Some(0xff) => {
                    (Stage::First, Some(err_status(payload)))
                }
                (Stage::FieldsUntilEof, _) if terminator => (Stage::First, Some(Status::Ok)),
                (Stage::FieldsUntilEof, _) => (Stage::FieldsUntilEof, None),
            };
            scan.stage = next;
            if let Some(status) = done {
                self.answered = status;
                return Ok(Some(scan.at));
            }
        }
    }

    fn after_definitions(&self, then: After) -> (Stage, Option<Status>) {
        match then {
            After::Rows => (Stage::Rows, None),
            After::Columns(n) => (
                Stage::Definitions {
                    left: n,
                    then: After::Done,
                },
                None,
            ),
            After::Done => (Stage::First, Some(Status::Ok)),
        }
    }

    fn server(&mut self, bytes: &[u8]) -> Step {
        let whole_packet = |bytes: &[u8]| match packet(bytes, 0) {
            Some((_, end)) => Step::Message {
                len: end,
                meaning: Meaning::Housekeeping,
            },
            None => Step::NeedMore,
        };
        match self.phase {
            Phase::Start | Phase::Greeted => {
                let Some((start, end)) = packet(bytes, 0) else {
                    return Step::NeedMore;
                };
                let payload = &bytes[start..end];
                if bytes[3] != 0 || !matches!(payload.first(), Some(0x0a | 0xff)) {
                    return Step::Invalid;
                }
                self.server_capabilities = greeting_capabilities(payload).unwrap_or(0);
                self.phase = Phase::Greeted;
                whole_packet(bytes)
            }
            Phase::Authenticating => {
                let step = whole_packet(bytes);
                if step != Step::NeedMore && bytes.get(HEADER) == Some(&0x00) {
                    self.phase = Phase::Commands;
                }
                step
            }
            Phase::Tls => Step::Invalid,
            Phase::Commands => {
                let Some(&(awaits, _)) = self.awaiting.front() else {
                    return Step::Invalid;
                };
                match self.scan_answer(bytes, awaits) {
                    Ok(None) => Step::NeedMore,
                    Ok(Some(len)) => {
                        self.scan = None;
                        self.awaiting.pop_front();
                        Step::Message {
                            len,
                            meaning: Meaning::Reply(None),
                        }
                    }
                    Err(()) => {
                        self.scan = None;
                        Step::Invalid
                    }
                }
            }
        }
    }

    fn client(&mut self, bytes: &[u8]) -> Step {
        let Some((start, end)) = packet(bytes, 0) else {
            return Step::NeedMore;
        };
        let payload = &bytes[start..end];
        let sequence = bytes[3];
        match self.phase {
            Phase::Start if sequence == 0 => {
                // The handshake was not captured: commands from here on.
                self.phase = Phase::Commands;
                self.client(bytes)
            }
            Phase::Start => Step::Invalid,
            Phase::Greeted => {
                let Some(capabilities) = payload.get(..4) else {
                    return Step::Invalid;
                };
                let capabilities = u32::from_le_bytes([
                    capabilities[0],
                    capabilities[1],
                    capabilities[2],
                    capabilities[3],
                ]);
                self.deprecate_eof =
                    capabilities & self.server_capabilities & CLIENT_DEPRECATE_EOF != 0;
                self.phase = if capabilities & CLIENT_SSL != 0 && payload.len() == 32 {
                    Phase::Tls
                } else {
                    Phase::Authenticating
                };
                Step::Message {
                    len: end,
                    meaning: Meaning::Housekeeping,
                }
            }
            Phase::Authenticating | Phase::Tls => Step::Message {
                len: end,
                meaning: Meaning::Housekeeping,
            },
            // A packet that continues a command, or a file sent for LOAD DATA LOCAL.
            Phase::Commands if sequence != 0 => Step::Message {
                len: end,
                meaning: Meaning::Housekeeping,
            },
            Phase::Commands => {
                let Some(&command) = payload.first() else {
                    return Step::Invalid;
                };
                if command > 0x1f {
                    return Step::Invalid;
                }
                let meaning = match command {
                    COM_QUIT | COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA => Meaning::OneWay,
                    _ => {
                        let awaits = match command {
                            COM_STMT_PREPARE => Awaits::Prepared,
                            COM_FIELD_LIST => Awaits::Fields,
                            COM_STATISTICS => Awaits::Text,
                            _ => Awaits::Results,
                        };
                        let keyword = (command == COM_STMT_PREPARE)
                            .then(|| Cow::Owned(super::sql_keyword(&payload[1..]).into_owned()));
                        self.awaiting.push_back((awaits, keyword));
                        Meaning::Request(None)
                    }
                };
                if command == COM_STMT_CLOSE {
                    if let Some(id) = statement_id(payload) {
                        self.prepared.retain(|(open, _)| *open != id);
                    }
                }
                Step::Message { len: end, meaning }
            }
        }
    }
}

/// The capability flags in a server greeting (protocol 10).
fn greeting_capabilities(payload: &[u8]) -> Option<u32> {
    let version_end = 1 + payload.get(1..)?.iter().position(|&b| b == 0)?;
    // Thread id (4), scramble (8), filler (1), then the low capability bytes.
    let low = version_end + 1 + 4 + 8 + 1;
    let lower = u16::from_le_bytes([*payload.get(low)?, *payload.get(low + 1)?]);
    // Character set (1), status (2), then the high capability bytes.
    let high = low + 2 + 1 + 2;
    let upper = match payload.get(high..high + 2) {
        Some(b) => u16::from_le_bytes([b[0], b[1]]),
        None => 0,
    };
    Some(u32::from(lower) | u32::from(upper) << 16)
}

fn statement_id(payload: &[u8]) -> Option<u32> {
    let id = payload.get(1..5)?;
    Some(u32::from_le_bytes([id[0], id[1], id[2], id[3]]))
}

impl Protocol for MySql {
    fn next(&mut self, from: Side, bytes: &[u8]) -> Step {
        match from {
            Side::Client => self.client(bytes),
            Side::Server => self.server(bytes),
        }
    }

    fn reset(&mut self, from: Side) {
        if from == Side::Server {
            self.scan = None;
        }
        // Answers can no longer be told from what they answer.
        self.awaiting.clear();
    }

    fn could_start(&self, from: Side, bytes: &[u8]) -> bool {
        match from {
            Side::Client => looks_like_command(bytes),
            // A server answer starts with packet 1 after a command.
            Side::Server => bytes.len() > HEADER && bytes[3] == 1,
        }
    }

    fn read_by_turns(&self) -> bool {
        self.phase == Phase::Tls
    }

    fn label<'b>(&mut self, from: Side, meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        match (from, meaning) {
            (Side::Client, Meaning::Request(_)) => {
                let payload = head.get(HEADER..).unwrap_or(&[]);
                let operation = match payload.first() {
                    Some(0x03) => super::sql_keyword(&payload[1..]),
                    Some(&COM_STMT_PREPARE) => {
                        Cow::Owned(format!("PREPARE {}", super::sql_keyword(&payload[1..])))
                    }
                    Some(&COM_STMT_EXECUTE) => statement_id(payload)
                        .and_then(|id| self.prepared.iter().find(|(open, _)| *open == id))
                        .map_or(Cow::Borrowed("EXECUTE"), |(_, keyword)| keyword.clone()),
                    Some(command) => COMMAND_NAMES
                        .iter()
                        .find(|(code, _)| code == command)
                        .map_or(Cow::Borrowed("COMMAND"), |(_, name)| Cow::Borrowed(*name)),
                    None => Cow::Borrowed("COMMAND"),
                };
                Label {
                    propagated: match payload.first() {
                        Some(0x03) => super::propagation::from_sql(&payload[1..]),
                        _ => None,
                    },
                    operation: Some(operation),
                    status: Status::Unknown,
                    content: super::Content::NONE,
                    further: Vec::new(),
                }
            }
            (Side::Server, Meaning::Reply(_)) => {
                if let Some(statement) = self.just_prepared.take() {
                    if self.prepared.len() >= MAX_PREPARED {
                        self.prepared.remove(0);
                    }
                    self.prepared.push(statement);
                }
                Label {
                    propagated: None,
                    operation: None,
                    status: std::mem::take(&mut self.answered),
                    content: super::Content::NONE,
                    further: Vec::new(),
                }
            }
            _ => Label::default(),
        }
    }
}

/// MySQL and MariaDB in the registry. The server speaks first, so a port of its own
/// is what chooses it.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Mysql,
    label: "mysql",
    ports: &[3306],
    client_first: looks_like_command,
    guess: None,
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| Some("mysql"),
    tcp: || Box::new(super::delimited::Delimited::new(MySql::default())),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::super::delimited::Delimited;
    use super::super::{Chunk, Framer, Output};
    use super::*;
    use crate::trace::Kind;

    /// Each side's bytes in turn, one segment each, a tick apart; then the close.
    fn feed(
        framer: &mut impl Framer,
        turns: impl IntoIterator<Item = (Side, Vec<u8>)>,
        out: &mut Output,
    ) {
        for (time, (side, bytes)) in turns.into_iter().enumerate() {
            let chunk = Chunk {
                time: time as i64,
                seq: 0,
                bytes: &bytes,
            };
            framer.data(side, chunk, out);
        }
        framer.close(out);
    }

    fn packet(sequence: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut bytes = vec![len as u8, (len >> 8) as u8, (len >> 16) as u8, sequence];
        bytes.extend_from_slice(payload);
        bytes
    }

    fn greeting(capabilities: u32) -> Vec<u8> {
        let mut payload = vec![0x0a];
        payload.extend_from_slice(b"10.11.6-MariaDB\0");
        payload.extend_from_slice(&[1, 0, 0, 0]);
        payload.extend_from_slice(b"12345678\0");
        payload.extend_from_slice(&(capabilities as u16).to_le_bytes());
        payload.extend_from_slice(&[8, 2, 0]);
        payload.extend_from_slice(&((capabilities >> 16) as u16).to_le_bytes());
        payload.extend_from_slice(&[21; 11]);
        packet(0, &payload)
    }

    fn column(sequence: u8) -> Vec<u8> {
        packet(sequence, b"\x03def\x04shop\x05items\x05items\x04name\x04name\x0c\x21\x00\xfc\xff\x03\x00\xfc\x00\x00\x00\x00")
    }

    fn ok(sequence: u8, header: u8, status: u16) -> Vec<u8> {
        let mut payload = vec![header, 0, 0];
        payload.extend_from_slice(&status.to_le_bytes());
        payload.extend_from_slice(&[0, 0]);
        packet(sequence, &payload)
    }

    fn eof(sequence: u8, status: u16) -> Vec<u8> {
        let mut payload = vec![0xfe, 0, 0];
        payload.extend_from_slice(&status.to_le_bytes());
        packet(sequence, &payload)
    }

    fn run(
        deprecate_eof: bool,
        exchange: &[(Side, Vec<u8>)],
    ) -> (Vec<(Side, Kind, String, Status)>, Output) {
        let capabilities = 0x0000_a685
            | if deprecate_eof {
                CLIENT_DEPRECATE_EOF
            } else {
                0
            };
        let mut framer = Delimited::new(MySql::default());
        let mut out = Output::default();
        let mut response = capabilities.to_le_bytes().to_vec();
        response.extend_from_slice(&[0; 28]);
        response.extend_from_slice(b"shop\0");
        let mut all = vec![
            (Side::Server, greeting(capabilities)),
            (Side::Client, packet(1, &response)),
            (Side::Server, ok(2, 0, 2)),
        ];
        all.extend_from_slice(exchange);
        feed(&mut framer, all, &mut out);
        let messages = out
            .messages
            .iter()
            .map(|m| {
                let name = out.name_of(m.operation).to_owned();
                (m.from, m.kind, name, m.status)
            })
            .collect();
        (messages, out)
    }

    fn query(sql: &str) -> Vec<u8> {
        let mut payload = vec![0x03];
        payload.extend_from_slice(sql.as_bytes());
        packet(0, &payload)
    }

    #[test]
    fn result_sets_end_at_their_final_eof_or_ok_with_and_without_deprecate_eof() {
        for deprecate_eof in [false, true] {
            let mut answer = packet(1, &[1]);
            answer.extend(column(2));
            let mut sequence = 3;
            if !deprecate_eof {
                answer.extend(eof(sequence, 2));
                sequence += 1;
            }
            answer.extend(packet(sequence, b"\x06item-7"));
            answer.extend(if deprecate_eof {
                ok(sequence + 1, 0xfe, 2)
            } else {
                eof(sequence + 1, 2)
            });
            // The answer arrives in two segments, cut inside a row.
            let cut = answer.len() - 9;
            let (messages, out) = run(
                deprecate_eof,
                &[
                    (
                        Side::Client,
                        query("  /* by id */ select name from items where id = 7"),
                    ),
                    (Side::Server, answer[..cut].to_vec()),
                    (Side::Server, answer[cut..].to_vec()),
                    (Side::Client, query("INSERT INTO orders (item) VALUES (7)")),
                    (Side::Server, ok(1, 0, 2)),
                    (Side::Client, query("SELECT nope")),
                    (Side::Server, packet(1, b"\xff\x7a\x04#42S22Unknown column")),
                    (Side::Client, packet(0, &[COM_QUIT])),
                ],
            );
            assert_eq!(
                messages,
                vec![
                    (Side::Client, Kind::Call, "SELECT".into(), Status::Unknown),
                    (Side::Server, Kind::Return, String::new(), Status::Ok),
                    (Side::Client, Kind::Call, "INSERT".into(), Status::Unknown),
                    (Side::Server, Kind::Return, String::new(), Status::Ok),
                    (Side::Client, Kind::Call, "SELECT".into(), Status::Unknown),
                    (
                        Side::Server,
                        Kind::Return,
                        String::new(),
                        Status::Failed(1146)
                    ),
                    (Side::Client, Kind::Free, String::new(), Status::Unknown),
                ],
                "deprecate_eof {deprecate_eof}"
            );
            assert!(out.problems.is_empty(), "{:?}", out.problems);
        }
    }

    #[test]
    fn prepared_statements_are_named_by_their_statement() {
        let mut prepare = vec![COM_STMT_PREPARE];
        prepare.extend_from_slice(b"SELECT name FROM items WHERE id = ?");
        let mut described = packet(1, &[0, 9, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0]);
        described.extend(column(2));
        described.extend(eof(3, 2));
        described.extend(column(4));
        described.extend(eof(5, 2));
        let mut execute = vec![COM_STMT_EXECUTE, 9, 0, 0, 0, 0, 1, 0, 0, 0];
        execute.extend_from_slice(&[0, 1, 3, 0, 7, 0, 0, 0]);
        let (messages, _) = run(
            false,
            &[
                (Side::Client, packet(0, &prepare)),
                (Side::Server, described),
                (Side::Client, packet(0, &execute)),
                (Side::Server, ok(1, 0, 2)),
                (Side::Client, packet(0, &[COM_STMT_CLOSE, 9, 0, 0, 0])),
            ],
        );
        let names: Vec<(Kind, String)> = messages.into_iter().map(|m| (m.1, m.2)).collect();
        assert_eq!(
            names,
            vec![
                (Kind::Call, "PREPARE SELECT".into()),
                (Kind::Return, String::new()),
                (Kind::Call, "SELECT".into()),
                (Kind::Return, String::new()),
                (Kind::Free, String::new()),
            ]
        );
    }

    #[test]
    fn a_switch_to_tls_is_read_by_turns_from_there() {
        let mut framer = Delimited::new(MySql::default());
        let mut out = Output::default();
        let capabilities: u32 = 0x0000_aa85 | CLIENT_SSL;
        let mut ssl_request = capabilities.to_le_bytes().to_vec();
        ssl_request.extend_from_slice(&[0; 28]);
        let exchange = [
            (Side::Server, greeting(capabilities)),
            (Side::Client, packet(1, &ssl_request)),
            (Side::Client, b"\x16\x03\x01 client hello".to_vec()),
            (Side::Server, b"\x16\x03\x03 server hello".to_vec()),
        ];
        feed(&mut framer, exchange, &mut out);
        let kinds: Vec<Kind> = out.messages.iter().map(|m| m.kind).collect();
        assert_eq!(kinds, vec![Kind::Call, Kind::Return]);
    }

    #[test]
    fn first_keywords_skip_comments_and_parentheses() {
        assert_eq!(super::super::sql_keyword(b"-- x\n (select 1)"), "SELECT");
        assert_eq!(
            super::super::sql_keyword(b"# c\nupdate t set a=1"),
            "UPDATE"
        );
        assert_eq!(super::super::sql_keyword(b"  "), "QUERY");
    }
}
