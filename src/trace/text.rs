//! The paper's uniform text trace format: reading it into a [`TraceBuilder`] and
//! writing a [`Trace`] back, exact to the nanosecond. Owns the line syntax and its
//! error messages; merging ends and ordering belong to the builder.
//!
//! ```text
//! <timestamp> <op> <sender> <receiver> <call-id> [<truth>] [key=value ...]    # comment
//! ```
//!
//! The keys read are `truth=` (as the bare sixth field), `op=` (the call's operation,
//! blanks written as `_`), `status=` (`ok` or a failure's code), `id=` (the request
//! id or trace context a call carried), `conn=` (the connection it travelled on),
//! `msg=` (what a broker message carried: a digest of its destination and payload, 8
//! hex digits, the same on its way into the broker and out),
//! `spread=` (seconds from the message's first byte to its last) and `held=` (how
//! much of that TCP held back for the peer's ACK, and why: `nagle:0.0424` or
//! `window:0.0031`); others are counted and ignored, so that traces from newer writers
//! still read.

use super::time::{self, TimeError};
use super::{End, Held, Kind, Message, Status, Trace, TraceBuilder, Transit, Truth};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened or read.
    // The cause follows in the error chain.
    #[error("cannot read {}", crate::input::source::name(path))]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A line that is not a trace event.
    #[error("{}:{line}: {problem}: `{text}`", crate::input::source::name(path))]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// The line as read (shortened if very long).
        text: String,
        /// What is wrong with it.
        problem: LineProblem,
    },
}

/// What is wrong with one line of a text trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    /// Fewer than the five required fields.
    #[error("expected 5 fields (timestamp op sender receiver call-id), found {0}")]
    MissingFields(usize),
    /// More than the six allowed bare fields.
    #[error("expected at most 6 fields (timestamp op sender receiver call-id truth) before key=value ones, found {0}")]
    TooManyFields(usize),
    /// A `status=` that is neither `ok` nor a number.
    #[error("bad status `{0}` (expected ok or a failure's code)")]
    BadStatus(String),
    /// A `msg=` that is not 8 hex digits.
    #[error("bad msg `{0}` (expected 8 hex digits)")]
    BadContent(String),
    /// A `spread=` or `held=` that is not what the format says.
    #[error("bad {0} (expected spread=SECONDS and held=nagle:SECONDS or held=window:SECONDS, at most the spread)")]
    BadTransit(String),
    /// The timestamp is not decimal seconds.
    #[error("bad timestamp `{text}`: {reason}")]
    BadTimestamp {
        /// The field.
        text: String,
        /// Why.
        reason: TimeError,
    },
    /// An op that is not one of the format's.
    #[error("unknown op `{0}` (expected CALL_SENT, CALL_RECV, RET_SENT, RET_RECV, MSG_SENT, MSG_RECV, CALL, RET, RETURN or MSG)")]
    UnknownOp(String),
    /// A node name with a character the path signature reserves.
    #[error("node name `{0}` contains `(`, `)` or `,`, which path signatures reserve")]
    ReservedCharacter(String),
    /// Bytes that are not UTF-8.
    #[error("the line is not valid UTF-8")]
    NotUtf8,
}

/// Reads text trace files into one builder. Files are read in the order given. (The
/// command line reads through [`crate::input`], which also tells captures apart and
/// reads gzip'd files and standard input.)
pub fn read_files<P: AsRef<Path>>(
    paths: &[P],
    builder: &mut TraceBuilder,
) -> Result<(), TraceError> {
    for path in paths {
        let path = path.as_ref();
        let io_error = |source| TraceError::Io {
            path: path.into(),
            source,
        };
        let file = File::open(path).map_err(io_error)?;
        let size = file.metadata().map_err(io_error)?.len();
        let reader = BufReader::with_capacity(1 << 20, file);
        read_with_size(path, reader, size, builder)?;
    }
    Ok(())
}

/// Reads one text trace from `reader`; `path` names it in errors.
pub fn read(
    path: &Path,
    reader: impl BufRead,
    builder: &mut TraceBuilder,
) -> Result<(), TraceError> {
    read_lines(path, reader, None, builder)
}

/// Like [`read`], for input of a known size in bytes: once the first lines show how
/// long a line is, room for the rest is reserved at once, so the observations are
/// never copied into a doubled buffer.
pub fn read_with_size(
    path: &Path,
    reader: impl BufRead,
    size: u64,
    builder: &mut TraceBuilder,
) -> Result<(), TraceError> {
    read_lines(path, reader, Some(size), builder)
}

/// Lines read before estimating the rest of a sized input.
const SAMPLE_LINES: u64 = 4096;

fn read_lines(
    path: &Path,
    mut reader: impl BufRead,
    size: Option<u64>,
    builder: &mut TraceBuilder,
) -> Result<(), TraceError> {
    builder.stats_mut().files += 1;
    let mut buf = Vec::with_capacity(256);
    let mut line_no = 0u64;
    let mut consumed = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|source| TraceError::Io {
                path: path.into(),
                source,
            })?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        consumed += n as u64;
        builder.stats_mut().lines += 1;
        if line_no == SAMPLE_LINES {
            if let Some(size) = size {
                let per_line = consumed as f64 / line_no as f64;
                let rest = size.saturating_sub(consumed) as f64 / per_line;
                builder.reserve((rest * 1.02) as usize + 64);
            }
        }
        match parse_line(&buf, builder) {
            Ok(true) => {}
            Ok(false) => builder.stats_mut().blank_or_comment_lines += 1,
            Err(problem) => {
                return Err(TraceError::BadLine {
                    path: path.into(),
                    line: line_no,
                    text: shorten(&buf),
                    problem,
                })
            }
        }
    }
}

/// Parses one line; `Ok(false)` for a blank or comment line.
pub(crate) fn parse_line(raw: &[u8], builder: &mut TraceBuilder) -> Result<bool, LineProblem> {
    // A comment starts with a `#` that begins a field: inside a field it is part of it,
    // as in the call ids `records` writes for captures (`tcp:a:1>b:2#s7`).
    let content = match raw
        .iter()
        .enumerate()
        .position(|(i, &b)| b == b'#' && (i == 0 || matches!(raw[i - 1], b' ' | b'\t')))
    {
        Some(hash) => &raw[..hash],
        None => raw,
    };
    let mut fields: [&[u8]; 6] = [&[]; 6];
    let mut count = 0;
    let mut keyed: [Option<&[u8]>; 8] = [None; 8];
    let mut words = content
        .split(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .filter(|f| !f.is_empty());
    for field in words.by_ref() {
        if count >= 5 && field.contains(&b'=') {
            keep_key(field, &mut keyed, builder);
            break;
        }
        if count < fields.len() {
            fields[count] = field;
        }
        count += 1;
    }
    for field in words {
        if !field.contains(&b'=') {
            return Err(LineProblem::TooManyFields(count + 1));
        }
        keep_key(field, &mut keyed, builder);
    }
    let [keyed_truth, operation, status, propagated, connection, spread, held, content] = keyed;
    if count == 5 {
        if let Some(truth) = keyed_truth {
            fields[5] = truth;
            count = 6;
        }
    }
    match count {
        0 => return Ok(false),
        1..=4 => return Err(LineProblem::MissingFields(count)),
        5 | 6 => {}
        _ => return Err(LineProblem::TooManyFields(count)),
    }
    let time = time::parse_seconds(fields[0]).map_err(|reason| LineProblem::BadTimestamp {
        text: String::from_utf8_lossy(fields[0]).into_owned(),
        reason,
    })?;
    let (kind, end) = parse_op(fields[1])
        .ok_or_else(|| LineProblem::UnknownOp(String::from_utf8_lossy(fields[1]).into_owned()))?;
    let sender = builder.node(node_name(fields[2])?);
    let receiver = builder.node(node_name(fields[3])?);
    let call_id = builder.call_id(utf8(fields[4])?);
    let truth = if count == 6 {
        builder.truth(utf8(fields[5])?)
    } else {
        Truth::NONE
    };
    if let Some(name) = operation {
        builder.operation(call_id, utf8(name)?);
    }
    if let Some(connection) = connection.filter(|c| !c.is_empty()) {
        builder.connection(call_id, utf8(connection)?);
    }
    if let Some(id) = propagated.filter(|id| !id.is_empty()) {
        let id = builder.propagated_id(utf8(id)?);
        builder.set_propagated(call_id, id);
    }
    if let Some(status) = status {
        let text = utf8(status)?;
        let status = Status::parse(text).ok_or_else(|| LineProblem::BadStatus(text.into()))?;
        builder.status(call_id, status);
    }
    if let Some(content) = content {
        let text = utf8(content)?;
        let digest = u32::from_str_radix(text, 16)
            .ok()
            .filter(|_| text.len() == 8)
            .ok_or_else(|| LineProblem::BadContent(text.into()))?;
        builder.set_content(call_id, kind, digest);
    }
    if spread.is_some() || held.is_some() {
        builder.transit(call_id, kind, end, parse_transit(spread, held)?);
    }
    builder.push(Message::observed(
        end, time, kind, sender, receiver, call_id, truth,
    ));
    Ok(true)
}

/// A message's transit from its `spread=` and `held=` values (a hold with no spread
/// spans the hold).
fn parse_transit(spread: Option<&[u8]>, held: Option<&[u8]>) -> Result<Transit, LineProblem> {
    let bad = |key: &str, value: &[u8]| {
        LineProblem::BadTransit(format!("{key}={}", String::from_utf8_lossy(value)))
    };
    let seconds = |key: &str, value: &[u8]| {
        time::parse_seconds(value)
            .ok()
            .filter(|&t| t >= 0)
            .ok_or_else(|| bad(key, value))
    };
    let mut transit = Transit::NONE;
    if let Some(value) = spread {
        transit.spread = seconds("spread", value)?;
    }
    if let Some(value) = held {
        let text = utf8(value)?;
        let (why, amount) = text.split_once(':').ok_or_else(|| bad("held", value))?;
        transit.why = Some(Held::from_token(why).ok_or_else(|| bad("held", value))?);
        transit.held = seconds("held", amount.as_bytes())?;
        if spread.is_none() {
            transit.spread = transit.held;
        } else if transit.held > transit.spread {
            return Err(bad("held", value));
        }
    }
    Ok(transit)
}

/// Keeps a `key=value` field's value if the key is one read here (`truth`, `op`,
/// `status`, `id`, `conn`, `spread`, `held`, in that order in `keyed`); counts it
/// otherwise.
fn keep_key<'l>(field: &'l [u8], keyed: &mut [Option<&'l [u8]>; 8], builder: &mut TraceBuilder) {
    let equals = field
        .iter()
        .position(|&b| b == b'=')
        .expect("a key=value field");
    let (key, value) = (&field[..equals], &field[equals + 1..]);
    let slot = match key {
        b"truth" => 0,
        b"op" => 1,
        b"status" => 2,
        b"id" => 3,
        b"conn" => 4,
        b"spread" => 5,
        b"held" => 6,
        b"msg" => 7,
        _ => {
            builder.stats_mut().ignored_fields += 1;
            return;
        }
    };
    keyed[slot] = Some(value);
}

/// The kind of message and the end it was seen at, from an op field (`CALL_RECV`, ...).
pub fn parse_op(op: &[u8]) -> Option<(Kind, End)> {
    Some(match op {
        b"CALL_SENT" | b"CALL" => (Kind::Call, End::Sent),
        b"CALL_RECV" => (Kind::Call, End::Received),
        b"RET_SENT" | b"RET" | b"RETURN" => (Kind::Return, End::Sent),
        b"RET_RECV" => (Kind::Return, End::Received),
        b"MSG_SENT" | b"MSG" => (Kind::Free, End::Sent),
        b"MSG_RECV" => (Kind::Free, End::Received),
        _ => return None,
    })
}

fn utf8(field: &[u8]) -> Result<&str, LineProblem> {
    std::str::from_utf8(field).map_err(|_| LineProblem::NotUtf8)
}

fn node_name(field: &[u8]) -> Result<&str, LineProblem> {
    let name = utf8(field)?;
    if name.contains(['(', ')', ',']) {
        return Err(LineProblem::ReservedCharacter(name.to_owned()));
    }
    Ok(name)
}

pub(crate) fn shorten(raw: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches(['\n', '\r']);
    // A control character could move the cursor or change colours on a terminal: the
    // line is shown escaped, as Rust writes them (`\u{1b}`).
    let text: String = text
        .chars()
        .flat_map(|c| {
            let escape = c.is_control() && c != '\t';
            let escaped = escape.then(|| c.escape_debug());
            escaped.into_iter().flatten().chain((!escape).then_some(c))
        })
        .collect();
    if text.chars().count() > MAX {
        let cut: String = text.chars().take(MAX).collect();
        format!("{cut}…")
    } else {
        text.to_owned()
    }
}

/// Writes a trace in the text format: one line per observed end, in time order, with
/// the truth column where a message has one, `op=` on calls and `status=` on returns
/// where the protocol told them. Reading the output back yields the same
/// messages, to the nanosecond.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    let mut lines: Vec<(i64, usize, End)> = Vec::with_capacity(trace.messages.len() * 2);
    for (i, m) in trace.messages.iter().enumerate() {
        if let Some(t) = m.sent() {
            lines.push((t, i, End::Sent));
        }
        if let Some(t) = m.received() {
            lines.push((t, i, End::Received));
        }
    }
    {
        use rayon::prelude::*;
        lines.par_sort_unstable();
    }
    // Lines are formatted a block at a time on every core, and written in order.
    const BLOCK: usize = 16_384;
    const BLOCKS_AT_ONCE: usize = 16;
    for blocks in lines.chunks(BLOCK * BLOCKS_AT_ONCE) {
        use rayon::prelude::*;
        let texts: Vec<String> = blocks
            .par_chunks(BLOCK)
            .map(|block| {
                let mut text = String::with_capacity(block.len() * 96);
                for &(t, i, end) in block {
                    push_message_line(trace, t, i, end, &mut text);
                }
                text
            })
            .collect();
        for text in texts {
            out.write_all(text.as_bytes())?;
        }
    }
    Ok(())
}

/// The line of message `i`'s `end` at time `t`, onto `text`.
fn push_message_line(trace: &Trace, t: i64, i: usize, end: End, text: &mut String) {
    push_line(text, &message_fields(trace, t, i, end));
}

/// What the line of message `i`'s `end` at time `t` says.
pub(crate) fn message_fields(trace: &Trace, t: i64, i: usize, end: End) -> LineFields<'_> {
    let m = &trace.messages[i];
    LineFields {
        time: t,
        kind: m.kind(),
        end,
        sender: trace.node_name(m.sender()),
        receiver: trace.node_name(m.receiver()),
        call_id: trace.call_id_text(m.call_id()),
        truth: trace.truth_text(m.truth()),
        operation: trace.operation_name(trace.operation(m.call_id())),
        propagated: trace.propagated_text(trace.propagated(m.call_id())),
        status: trace.status(m.call_id()),
        transit: trace.transit(m.call_id(), m.kind()),
        content: trace.content(m.call_id(), m.kind()).unwrap_or(0),
    }
}

/// Adds to `builder` what reading back the line [`push_line`] writes for `fields` adds
/// ([`parse_line`]): the same names, ids and facts, interned in the same order, with no
/// text between (a trace held in memory nested in segments: `crate::streaming`).
pub(crate) fn push_as_line(fields: &LineFields<'_>, builder: &mut TraceBuilder) {
    let sender = builder.node(fields.sender);
    let receiver = builder.node(fields.receiver);
    let call_id = builder.call_id(fields.call_id);
    // An empty truth is no field on the line.
    let truth = match fields.truth.filter(|truth| !truth.is_empty()) {
        Some(truth) => builder.truth(truth),
        None => Truth::NONE,
    };
    match fields.kind {
        Kind::Call | Kind::Free => {
            if let Some(name) = fields.operation {
                match name.contains(char::is_whitespace) {
                    true => builder.operation(call_id, &name.replace(char::is_whitespace, "_")),
                    false => builder.operation(call_id, name),
                }
            }
            if let Some(id) = fields.propagated.filter(|id| !id.is_empty()) {
                let id = builder.propagated_id(id);
                builder.set_propagated(call_id, id);
            }
        }
        Kind::Return if fields.status != Status::Unknown => builder.status(call_id, fields.status),
        Kind::Return => {}
    }
    builder.set_content(call_id, fields.kind, fields.content);
    if !fields.transit.is_none() {
        builder.transit(call_id, fields.kind, fields.end, fields.transit);
    }
    builder.push(Message::observed(
        fields.end,
        fields.time,
        fields.kind,
        sender,
        receiver,
        call_id,
        truth,
    ));
}

/// What one line of a text trace says.
pub struct LineFields<'a> {
    /// When.
    pub time: super::Nanos,
    /// Call, return or free-form message.
    pub kind: Kind,
    /// Where it was seen.
    pub end: End,
    /// Who sent it.
    pub sender: &'a str,
    /// Who it went to.
    pub receiver: &'a str,
    /// Its call id.
    pub call_id: &'a str,
    /// Its path instance, in evaluation.
    pub truth: Option<&'a str>,
    /// The call's operation (written on calls).
    pub operation: Option<&'a str>,
    /// The request id the call carried (written on calls).
    pub propagated: Option<&'a str>,
    /// The answer's status (written on returns).
    pub status: Status,
    /// Its time between first and last byte (written where there was any).
    pub transit: Transit,
    /// What a broker message carried (0: not one; written where there is one).
    pub content: u32,
}

/// Appends one line, with its newline: `op=` and `id=` on calls and free-form messages,
/// `status=` on returns, `msg=` on broker messages, where known.
pub fn push_line(line: &mut String, fields: &LineFields<'_>) {
    time::push_seconds(line, fields.time);
    line.push(' ');
    line.push_str(op_text(fields.kind, fields.end));
    for field in [fields.sender, fields.receiver, fields.call_id] {
        line.push(' ');
        line.push_str(field);
    }
    if let Some(truth) = fields.truth {
        line.push(' ');
        line.push_str(truth);
    }
    match fields.kind {
        Kind::Call | Kind::Free => {
            if let Some(name) = fields.operation {
                line.push_str(" op=");
                line.extend(
                    name.chars()
                        .map(|c| if c.is_whitespace() { '_' } else { c }),
                );
            }
            if let Some(id) = fields.propagated {
                line.push_str(" id=");
                line.push_str(id);
            }
        }
        Kind::Return => match fields.status {
            Status::Unknown => {}
            status => {
                line.push_str(" status=");
                line.push_str(&status.to_string());
            }
        },
    }
    if fields.content != 0 {
        use std::fmt::Write;
        let _ = write!(line, " msg={:08x}", fields.content);
    }
    let transit = fields.transit;
    if transit.spread > 0 {
        line.push_str(" spread=");
        time::push_seconds(line, transit.spread);
    }
    if let Some(why) = transit.why {
        line.push_str(" held=");
        line.push_str(why.token());
        line.push(':');
        time::push_seconds(line, transit.held);
    }
    line.push('\n');
}

/// The op field for a kind of message seen at one end (`CALL_RECV`, ...).
pub fn op_text(kind: Kind, end: End) -> &'static str {
    match (kind, end) {
        (Kind::Call, End::Sent) => "CALL_SENT",
        (Kind::Call, End::Received) => "CALL_RECV",
        (Kind::Return, End::Sent) => "RET_SENT",
        (Kind::Return, End::Received) => "RET_RECV",
        (Kind::Free, End::Sent) => "MSG_SENT",
        (Kind::Free, End::Received) => "MSG_RECV",
    }
}

/// A trace from text, for tests across the crate; panics on a bad line.
#[cfg(test)]
pub(crate) fn trace_from_str(text: &str) -> Trace {
    let mut builder = TraceBuilder::new();
    read(Path::new("t"), text.as_bytes(), &mut builder).expect("test traces are valid");
    builder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::CallId;

    fn parse(text: &str) -> Result<Trace, TraceError> {
        let mut b = TraceBuilder::new();
        read(Path::new("t.trace"), text.as_bytes(), &mut b)?;
        Ok(b.finish())
    }

    fn problem(text: &str) -> (u64, LineProblem) {
        match parse(text) {
            Err(TraceError::BadLine { line, problem, .. }) => (line, problem),
            other => panic!("expected a bad line, got {other:?}"),
        }
    }

    #[test]
    fn reads_every_op_spelling_and_comments() {
        let trace = parse(
            "# a comment\n\n1.5 CALL a b x t1\n1.6\tCALL_RECV a b x\n2 RET b a x # tail\n2.1 RET_RECV b a x\n\
             3 RETURN b a y\n4 MSG a c -\n4.2 MSG_RECV a c -\n5 MSG_SENT c a -\n5.5 CALL_SENT a b -\n",
        )
        .unwrap();
        assert_eq!(trace.stats.lines, 11);
        assert_eq!(trace.stats.blank_or_comment_lines, 2);
        assert_eq!(trace.stats.observations, 9);
        assert_eq!(trace.messages.len(), 6);
        let first = trace.messages[0];
        assert_eq!(
            (first.sent(), first.received()),
            (Some(1_500_000_000), Some(1_600_000_000))
        );
        assert_eq!(trace.truth_text(first.truth()), Some("t1"));
        assert_eq!(trace.call_id_text(trace.messages[5].call_id()), "-");
    }

    #[test]
    fn too_few_fields_names_the_line() {
        assert_eq!(
            problem("1 CALL a b x\n2 CALL a b\n"),
            (2, LineProblem::MissingFields(4))
        );
    }

    #[test]
    fn too_many_fields_names_the_line() {
        assert_eq!(
            problem("1 CALL a b x t extra\n"),
            (1, LineProblem::TooManyFields(7))
        );
    }

    #[test]
    fn bad_timestamp_says_why() {
        let (line, p) = problem("\n1.0000000001 CALL a b x\n");
        assert_eq!(line, 2);
        assert_eq!(
            p,
            LineProblem::BadTimestamp {
                text: "1.0000000001".into(),
                reason: TimeError::TooPrecise
            }
        );
        assert!(matches!(
            problem("12:00 CALL a b x\n").1,
            LineProblem::BadTimestamp {
                reason: TimeError::NotDecimal,
                ..
            }
        ));
    }

    #[test]
    fn unknown_op_is_named() {
        assert_eq!(
            problem("1 CALLED a b x\n").1,
            LineProblem::UnknownOp("CALLED".into())
        );
    }

    #[test]
    fn reserved_characters_in_node_names_are_refused() {
        assert_eq!(
            problem("1 CALL a(1) b x\n").1,
            LineProblem::ReservedCharacter("a(1)".into())
        );
    }

    #[test]
    fn invalid_utf8_is_refused() {
        let mut b = TraceBuilder::new();
        let err = read(Path::new("t"), &b"1 CALL \xff b x\n"[..], &mut b).unwrap_err();
        assert!(matches!(
            err,
            TraceError::BadLine {
                problem: LineProblem::NotUtf8,
                ..
            }
        ));
    }

    #[test]
    fn error_message_names_file_line_and_text() {
        let err = parse("1 CALL a b x\n2 BOGUS a b x\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.trace:2: unknown op `BOGUS` (expected CALL_SENT, CALL_RECV, RET_SENT, RET_RECV, MSG_SENT, MSG_RECV, CALL, RET, RETURN or MSG): `2 BOGUS a b x`"
        );
    }

    #[test]
    fn write_then_read_is_exact_to_the_nanosecond() {
        let text =
            "1655760362.581506001 CALL_SENT a b x t1\n1655760362.581506 CALL_RECV a b x t1\n\
                    1655760363.000000009 RET_SENT b a x t1\n1655760362.9 MSG_SENT a c -\n";
        let trace = parse(text).unwrap();
        let mut out = Vec::new();
        write(&trace, &mut out).unwrap();
        let again = parse(std::str::from_utf8(&out).unwrap()).unwrap();
        assert_eq!(again.messages.len(), trace.messages.len());
        for (a, b) in trace.messages.iter().zip(&again.messages) {
            assert_eq!(
                (a.sent(), a.received(), a.kind()),
                (b.sent(), b.received(), b.kind())
            );
            assert_eq!(trace.node_name(a.sender()), again.node_name(b.sender()));
            assert_eq!(
                trace.call_id_text(a.call_id()),
                again.call_id_text(b.call_id())
            );
            assert_eq!(trace.truth_text(a.truth()), again.truth_text(b.truth()));
        }
        let mut twice = Vec::new();
        write(&again, &mut twice).unwrap();
        assert_eq!(out, twice);
    }

    #[test]
    fn broker_messages_keep_their_names_and_payload_digests_both_ways() {
        let text = "1.000000 MSG_SENT web nats p1 op=publish_orders msg=000000a1\n\
                    1.500000 CALL_RECV nats worker d1 op=request_quote msg=000000b2\n\
                    1.700000 RET_SENT worker nats d1 status=ok msg=000000c3\n";
        let trace = trace_from_str(text);
        let call = |id: &str| trace.call_ids.get(id).map(super::super::CallId).unwrap();
        assert_eq!(trace.content(call("p1"), Kind::Free), Some(0xa1));
        // A reply carries a payload of its own, apart from its call's.
        assert_eq!(trace.content(call("d1"), Kind::Call), Some(0xb2));
        assert_eq!(trace.content(call("d1"), Kind::Return), Some(0xc3));
        let mut written = Vec::new();
        write(&trace, &mut written).unwrap();
        assert_eq!(String::from_utf8(written).unwrap(), text);
        for bad in ["msg=a1", "msg=zz000000"] {
            let line = format!("1 MSG a b c {bad}");
            assert!(matches!(
                parse_line(line.as_bytes(), &mut TraceBuilder::new()),
                Err(LineProblem::BadContent(_))
            ));
        }
    }

    #[test]
    fn operations_and_statuses_round_trip_and_unknown_keys_are_counted() {
        let text = "1.0 CALL_SENT a b c1 t1 op=GET_/item/{n} conn=x color=red\n\
                    1.5 RET_SENT b a c1 status=503\n\
                    2.0 CALL_SENT a b c2 truth=t2 op=SELECT id=4bf92f35\n\
                    2.5 RET_SENT b a c2 status=ok\n";
        let trace = trace_from_str(text);
        assert_eq!(trace.stats.ignored_fields, 1);
        let call = |id: &str| trace.call_ids.get(id).map(super::super::CallId).unwrap();
        assert_eq!(
            trace.operation_name(trace.operation(call("c1"))),
            Some("GET_/item/{n}")
        );
        assert_eq!(trace.status(call("c1")), Status::Failed(503));
        assert_eq!(trace.status(call("c2")), Status::Ok);
        let mut written = Vec::new();
        write(&trace, &mut written).unwrap();
        let written = String::from_utf8(written).unwrap();
        assert_eq!(
            written,
            "1.000000 CALL_SENT a b c1 t1 op=GET_/item/{n}\n\
             1.500000 RET_SENT b a c1 status=503\n\
             2.000000 CALL_SENT a b c2 t2 op=SELECT id=4bf92f35\n\
             2.500000 RET_SENT b a c2 status=ok\n"
        );
        assert_eq!(
            trace.propagated_text(trace.propagated(call("c2"))),
            Some("4bf92f35")
        );
        assert_eq!(
            trace.propagated(call("c1")),
            super::super::PropagatedId::NONE
        );
        assert!(matches!(
            parse_line(b"1 CALL a b c t x", &mut TraceBuilder::new()),
            Err(LineProblem::TooManyFields(7))
        ));
        assert!(matches!(
            parse_line(b"1 RET a b c status=bad", &mut TraceBuilder::new()),
            Err(LineProblem::BadStatus(_))
        ));
    }

    #[test]
    fn a_hash_inside_a_call_id_is_not_a_comment() {
        let trace = trace_from_str(
            "# comment\n1.0 CALL_SENT a b tcp:x>y#s1 # note\n1.1 CALL_SENT a b tcp:x>y#s3\n",
        );
        assert_eq!(trace.call_ids.len(), 2);
        assert_eq!(trace.stats.blank_or_comment_lines, 1);
    }

    /// Adding a held trace's ends as lines would be read adds what writing the trace and
    /// reading it back adds: the same messages, names, ids (in the same order) and facts.
    #[test]
    fn an_end_added_as_a_line_is_the_line_read_back() {
        use crate::trace::CallId;
        let mut builder = TraceBuilder::new();
        read(
            Path::new("t"),
            &b"1.0 CALL_SENT web db c1 t1 op=GET_/a id=r1\n\
               1.1 CALL_RECV web db c1 t1\n\
               1.2 RET_SENT db web c1 t1 status=503\n\
               1.3 RET_RECV db web c1\n\
               1.4 MSG_SENT web log m1\n\
               1.5 CALL_SENT web cache c2 op=get\n\
               1.6 RET_RECV cache web c2 status=ok\n"[..],
            &mut builder,
        )
        .unwrap();
        let mut held = builder.finish();
        // A name with a blank, which the text writes with `_`.
        let c2 = CallId(held.call_ids.get("c2").unwrap());
        let spaced = held.operations.intern("get many");
        held.call_operations[c2.0 as usize] = super::super::OperationId(spaced);
        let mut ends = Vec::new();
        for (i, m) in held.messages.iter().enumerate() {
            ends.extend(m.sent().map(|t| (t, i, End::Sent)));
            ends.extend(m.received().map(|t| (t, i, End::Received)));
        }
        ends.sort_unstable();
        let mut added = TraceBuilder::new();
        for &(t, i, end) in &ends {
            push_as_line(&message_fields(&held, t, i, end), &mut added);
        }
        let added = added.finish();
        let mut text = Vec::new();
        write(&held, &mut text).unwrap();
        let read_back = trace_from_str(std::str::from_utf8(&text).unwrap());
        let mut written = (Vec::new(), Vec::new());
        write(&added, &mut written.0).unwrap();
        write(&read_back, &mut written.1).unwrap();
        assert_eq!(
            String::from_utf8(written.0).unwrap(),
            String::from_utf8(written.1).unwrap()
        );
        for (a, b) in [
            (&added.call_ids, &read_back.call_ids),
            (&added.nodes, &read_back.nodes),
        ] {
            let names = |i: &crate::trace::Interner| {
                (0..i.len() as u32)
                    .map(|k| i.resolve(k).to_owned())
                    .collect::<Vec<_>>()
            };
            assert_eq!(names(a), names(b));
        }
        assert_eq!(added.messages, read_back.messages);
        let c2 = CallId(added.call_ids.get("c2").unwrap());
        assert_eq!(added.operation_name(added.operation(c2)), Some("get_many"));
    }

    #[test]
    fn time_in_transit_reads_back_as_written_and_bad_values_are_named() {
        let text = "1.0 CALL_SENT a b c1\n\
                    1.5 RET_SENT b a c1 spread=0.042441 held=nagle:0.0424\n\
                    1.6 RET_RECV b a c1 spread=0.042443 held=nagle:0.04241\n\
                    2.0 CALL_RECV a b c2 held=window:0.003\n";
        let trace = trace_from_str(text);
        let c1 = CallId(trace.call_ids.get("c1").unwrap());
        // The receiver's view wins.
        assert_eq!(
            trace.transit(c1, Kind::Return),
            Transit {
                spread: 42_443_000,
                held: 42_410_000,
                why: Some(Held::Nagle)
            }
        );
        assert_eq!(trace.transit(c1, Kind::Call), Transit::NONE);
        let c2 = CallId(trace.call_ids.get("c2").unwrap());
        assert_eq!(trace.transit(c2, Kind::Call).spread, 3_000_000);
        let mut written = Vec::new();
        write(&trace, &mut written).unwrap();
        let written = String::from_utf8(written).unwrap();
        assert!(
            written.contains("RET_SENT b a c1 spread=0.042443 held=nagle:0.042410\n"),
            "{written}"
        );
        let again = trace_from_str(&written);
        assert_eq!(
            again.transit(c1, Kind::Return),
            trace.transit(c1, Kind::Return)
        );
        for bad in [
            "spread=-1",
            "spread=x",
            "held=0.1",
            "held=slow:0.1",
            "spread=0.1 held=nagle:0.2",
        ] {
            let line = format!("1 RET a b c {bad}");
            assert!(
                matches!(
                    parse_line(line.as_bytes(), &mut TraceBuilder::new()),
                    Err(LineProblem::BadTransit(_))
                ),
                "{bad}"
            );
        }
    }
}
