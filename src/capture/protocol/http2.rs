//! HTTP/2 in cleartext, and gRPC on it: a connection's frames parsed per direction,
//! every client-initiated stream one call.
//!
//! A call's request starts with the client's first HEADERS frame on a stream and ends at
//! its END_STREAM; the answer ends at the server's END_STREAM (trailers included) or
//! its RST_STREAM. Calls overlapping on one connection are separate calls, each keyed
//! by its stream id. A streaming RPC is one call from its first request frame to its
//! last answer frame: the return is placed at the frame that ends the answer, so the
//! call's latency covers the whole stream. Owns frame parsing, HPACK state (one
//! decoder per direction, as the protocol has) and the naming of calls; knows nothing
//! of packets or the trace.
//!
//! Both ways in are read: the prior-knowledge preface, and an HTTP/1.1 request with
//! `Upgrade: h2c` (that request is stream 1). A capture that starts mid-connection is
//! framed from the first segment that starts a frame, but its header compression state
//! is unknown: its calls are framed, their names counted as unknown. SETTINGS, PING,
//! GOAWAY, WINDOW_UPDATE and PRIORITY frames are counted, never calls. After lost
//! bytes a direction waits for a segment that starts a plausible frame; a server that
//! refuses an upgrade turns the connection over to the generic framer by turns.

use super::turns::Turns;
use super::{CallKey, Chunk, Framed, Framer, Operation, Output, Propagated, Side, Status};
use crate::trace::{Kind, Nanos};
use std::collections::BTreeMap;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// A frame header's length.
const HEADER: usize = 9;
/// The largest frame a peer may send before it is told otherwise (RFC 9113 §6.5.2).
const DEFAULT_MAX_FRAME: usize = 16_384;
/// The largest header block (all its CONTINUATION frames together) accepted.
const MAX_HEADER_BLOCK: usize = 1 << 20;
/// Streams open at once beyond which new ones are not tracked (servers allow ~100).
const MAX_OPEN_STREAMS: usize = 10_000;
/// Longest HTTP/1.1 upgrade request or response head.
const MAX_UPGRADE_HEAD: usize = 64 * 1024;
/// The largest dynamic table a peer may ask for; larger means the bytes are not HPACK.
const MAX_TABLE_SIZE: usize = 1 << 20;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PUSH_PROMISE: u8 = 5;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const WINDOW_UPDATE: u8 = 8;
const CONTINUATION: u8 = 9;

const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY_FLAG: u8 = 0x20;

/// Whether a client's first bytes open HTTP/2: the preface, or an HTTP/1.1 request
/// asking to upgrade to h2c.
pub fn looks_like_start(bytes: &[u8]) -> bool {
    let n = bytes.len().min(PREFACE.len());
    (n >= 4 && bytes[..n] == PREFACE[..n]) || upgrade_request(bytes)
}

/// Whether bytes look like HTTP/2 frames (a capture that began mid-connection): the
/// preface, or frame headers with known types and sizes chaining through the bytes.
pub fn looks_like_frames(bytes: &[u8]) -> bool {
    if looks_like_start(bytes) {
        return true;
    }
    let mut at = 0;
    let mut frames = 0;
    while let Some(header) = bytes.get(at..at + HEADER) {
        let Some(frame) = FrameHeader::parse(header).filter(|f| f.kind <= CONTINUATION) else {
            return false;
        };
        frames += 1;
        at += HEADER + frame.len;
    }
    frames > 0
}

/// Whether an HTTP/1.1 request head asks for `Upgrade: h2c`.
fn upgrade_request(bytes: &[u8]) -> bool {
    if !super::http::looks_like_request(bytes) {
        return false;
    }
    let head = &bytes[..bytes.len().min(MAX_UPGRADE_HEAD)];
    let head = match memchr::memmem::find(head, b"\r\n\r\n") {
        Some(end) => &head[..end],
        None => head,
    };
    head.split(|&b| b == b'\n').any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                line[..colon].eq_ignore_ascii_case(b"upgrade")
                    && line[colon + 1..]
                        .split(|&b| b == b',')
                        .any(|token| token.trim_ascii().eq_ignore_ascii_case(b"h2c"))
            }
            None => false,
        }
    })
}

#[derive(Debug, Clone, Copy)]
struct FrameHeader {
    len: usize,
    kind: u8,
    flags: u8,
    stream: u32,
}

impl FrameHeader {
    /// A frame header, if it could be one: a stream id that fits its type, and a length
    /// that fits it.
    fn parse(bytes: &[u8]) -> Option<FrameHeader> {
        let len = usize::from(bytes[0]) << 16 | usize::from(bytes[1]) << 8 | usize::from(bytes[2]);
        let kind = bytes[3];
        let flags = bytes[4];
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff;
        let on_connection = matches!(kind, SETTINGS | PING | GOAWAY);
        let on_stream = matches!(
            kind,
            DATA | HEADERS | PRIORITY | RST_STREAM | PUSH_PROMISE | CONTINUATION
        );
        // Frames of unknown types are allowed (and ignored) by the protocol.
        let plausible = (on_connection && stream == 0)
            || (on_stream && stream != 0)
            || kind == WINDOW_UPDATE
            || (kind > CONTINUATION && len <= DEFAULT_MAX_FRAME);
        let sized = match kind {
            PING => len == 8,
            RST_STREAM => len == 4,
            WINDOW_UPDATE => len == 4,
            PRIORITY => len == 5,
            SETTINGS => len % 6 == 0,
            GOAWAY => len >= 8,
            _ => true,
        };
        (plausible && sized).then_some(FrameHeader {
            len,
            kind,
            flags,
            stream,
        })
    }
}

/// Where a direction's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The client's first bytes: the preface, an upgrade request, or (mid-connection)
    /// frames.
    Opening,
    /// The client sent an upgrade request; its preface comes next.
    Preface,
    /// The server's answer to an upgrade request: `101 Switching Protocols`, then frames.
    UpgradeAnswer,
    /// Frames.
    Frames,
    /// Bytes were lost: waiting for a segment that starts a frame.
    Lost,
}

/// A header block being gathered across HEADERS/PUSH_PROMISE and CONTINUATION frames.
#[derive(Debug)]
struct Block {
    stream: u32,
    push: bool,
    end_stream: bool,
    started: Nanos,
    bytes: Vec<u8>,
}

/// What a DATA frame still to come carries, while its payload is counted off.
#[derive(Debug, Clone, Copy)]
struct Skip {
    rest: usize,
    header: FrameHeader,
    started: Nanos,
}

/// One direction of the connection.
struct Direction {
    phase: Phase,
    /// Bytes not yet parsed: at most one frame's prefix (frames are parsed as soon as
    /// they are whole).
    bytes: Vec<u8>,
    /// When the first byte in `bytes` arrived.
    since: Nanos,
    skip: Option<Skip>,
    block: Option<Block>,
    hpack: loona_hpack::Decoder<'static>,
    /// Whether the header compression state is known: from the start of the
    /// connection, with nothing lost since.
    names_known: bool,
}

impl Direction {
    fn new(phase: Phase) -> Self {
        let mut hpack = loona_hpack::Decoder::new();
        hpack.set_max_allowed_table_size(MAX_TABLE_SIZE);
        Direction {
            phase,
            bytes: Vec::new(),
            since: 0,
            skip: None,
            block: None,
            hpack,
            names_known: true,
        }
    }
}

/// A client-initiated stream: one call.
#[derive(Debug, Clone, Copy)]
struct Stream {
    requested: Nanos,
    /// When the client's END_STREAM came (the request is whole).
    request_end: Option<Nanos>,
    call_sent: bool,
    operation: Operation,
    /// The request id or trace context its headers carried.
    propagated: Propagated,
    /// Status from the answer's headers so far (`:status`, then `grpc-status`).
    status: Status,
}

/// The names and status a header block gives.
#[derive(Debug, Default)]
struct Names {
    method: Option<String>,
    path: Option<String>,
    grpc: bool,
    http_status: Option<u32>,
    grpc_status: Option<u32>,
    propagated: super::propagation::Best,
}

/// The HTTP/2 framer for one connection.
pub struct Http2 {
    client: Direction,
    server: Direction,
    streams: BTreeMap<u32, Stream>,
    /// Set when the connection is no longer HTTP/2 (an upgrade refused): the rest is
    /// read by turns.
    by_turns: Option<Turns>,
}

impl Default for Http2 {
    fn default() -> Self {
        Http2 {
            client: Direction::new(Phase::Opening),
            server: Direction::new(Phase::Frames),
            streams: BTreeMap::new(),
            by_turns: None,
        }
    }
}

impl Http2 {
    fn direction(&mut self, from: Side) -> &mut Direction {
        match from {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }

    /// Parses what `from` has buffered. The first frame started when the oldest
    /// buffered byte came; any later one started in the chunk just added, since
    /// frames are parsed as soon as they are whole.
    fn parse(&mut self, from: Side, now: Nanos, out: &mut Output) {
        let mut at = 0;
        loop {
            let started = if at == 0 {
                self.direction(from).since
            } else {
                now
            };
            let direction = self.direction(from);
            let rest = &direction.bytes[at..];
            match direction.phase {
                Phase::Opening => {
                    if rest.len() < PREFACE.len() && PREFACE.starts_with(rest) {
                        break;
                    }
                    if rest.starts_with(PREFACE) {
                        at += PREFACE.len();
                        direction.phase = Phase::Frames;
                        continue;
                    }
                    if super::http::looks_like_request(rest) {
                        match head_len(rest) {
                            Ok(None) => break,
                            Ok(Some(len)) => {
                                let name = request_line_name(&rest[..len]);
                                let propagated = super::propagation::from_http_head(&rest[..len])
                                    .map_or(Propagated::NONE, |id| out.propagated(&id));
                                at += len;
                                direction.phase = Phase::Preface;
                                self.server.phase = Phase::UpgradeAnswer;
                                let operation = name.map_or(Operation::NONE, |n| out.operation(&n));
                                self.streams.insert(
                                    1,
                                    Stream {
                                        requested: started,
                                        request_end: Some(started),
                                        call_sent: false,
                                        operation,
                                        propagated,
                                        status: Status::Unknown,
                                    },
                                );
                                self.send_call(1, out);
                                continue;
                            }
                            Err(()) => {
                                self.give_up(out, "HTTP/2 upgrade requests too long to read");
                                return;
                            }
                        }
                    }
                    // No preface: the capture began mid-connection.
                    out.problems.push(
                        "HTTP/2 connections whose start was not captured (operation names unknown)",
                    );
                    self.client.names_known = false;
                    self.server.names_known = false;
                    self.client.phase = Phase::Frames;
                    continue;
                }
                Phase::Preface => {
                    if rest.len() < PREFACE.len() {
                        if PREFACE.starts_with(rest) {
                            break;
                        }
                    } else if rest.starts_with(PREFACE) {
                        at += PREFACE.len();
                        direction.phase = Phase::Frames;
                        continue;
                    }
                    out.problems
                        .push("HTTP/2 upgrades not followed by the client preface");
                    direction.phase = Phase::Frames;
                    continue;
                }
                Phase::UpgradeAnswer => match head_len(rest) {
                    Ok(None) => break,
                    Ok(Some(len)) if rest.starts_with(b"HTTP/1.1 101") => {
                        at += len;
                        direction.phase = Phase::Frames;
                        out.housekeeping
                            .push("HTTP/2 upgrades (101 Switching Protocols)");
                        continue;
                    }
                    _ => {
                        self.give_up(
                            out,
                            "HTTP/2 upgrades the server refused (connection read by turns)",
                        );
                        return;
                    }
                },
                Phase::Lost => break,
                Phase::Frames => {
                    if let Some(skip) = &mut direction.skip {
                        let taken = skip.rest.min(rest.len());
                        skip.rest -= taken;
                        at += taken;
                        if skip.rest > 0 {
                            break;
                        }
                        let skip = direction.skip.take().expect("under way");
                        self.frame(from, skip.header, &[], skip.started, out);
                        continue;
                    }
                    if rest.len() < HEADER {
                        break;
                    }
                    let Some(header) = FrameHeader::parse(&rest[..HEADER]) else {
                        out.problems
                            .push("bytes that do not parse as HTTP/2 frames");
                        self.lose(from);
                        return;
                    };
                    if header.kind == DATA {
                        // Payloads are not needed: count them off instead of buffering.
                        at += HEADER;
                        direction.skip = Some(Skip {
                            rest: header.len,
                            header,
                            started,
                        });
                        continue;
                    }
                    let whole = HEADER + header.len;
                    if rest.len() < whole {
                        break;
                    }
                    let payload = rest[HEADER..whole].to_vec();
                    at += whole;
                    self.frame(from, header, &payload, started, out);
                    if self.by_turns.is_some() || self.direction(from).phase == Phase::Lost {
                        return;
                    }
                }
            }
        }
        let direction = self.direction(from);
        direction.bytes.drain(..at);
        if at > 0 {
            direction.since = now;
        }
    }

    /// The connection is not HTTP/2 after all: what follows is read by turns.
    fn give_up(&mut self, out: &mut Output, why: &'static str) {
        out.problems.push(why);
        self.client.bytes.clear();
        self.server.bytes.clear();
        self.by_turns = Some(Turns::default());
    }

    /// Bytes from `from` are lost: framing and header compression state with them.
    fn lose(&mut self, from: Side) {
        let direction = self.direction(from);
        direction.bytes.clear();
        direction.skip = None;
        direction.block = None;
        direction.phase = Phase::Lost;
        direction.names_known = false;
    }

    fn frame(
        &mut self,
        from: Side,
        header: FrameHeader,
        payload: &[u8],
        started: Nanos,
        out: &mut Output,
    ) {
        if self.direction(from).block.is_some() && header.kind != CONTINUATION {
            out.problems
                .push("HTTP/2 header blocks cut short by another frame");
            self.direction(from).block = None;
        }
        match header.kind {
            DATA => {
                if header.flags & END_STREAM != 0 {
                    self.end_stream(from, header.stream, started, out);
                }
            }
            HEADERS | PUSH_PROMISE => {
                let Some(fragment) = fragment(header, payload) else {
                    out.problems.push("HTTP/2 frames with bad padding");
                    return;
                };
                let block = Block {
                    stream: header.stream,
                    push: header.kind == PUSH_PROMISE,
                    end_stream: header.kind == HEADERS && header.flags & END_STREAM != 0,
                    started,
                    bytes: fragment.to_vec(),
                };
                if header.flags & END_HEADERS != 0 {
                    self.block(from, block, out);
                } else {
                    self.direction(from).block = Some(block);
                }
            }
            CONTINUATION => {
                let direction = self.direction(from);
                match &mut direction.block {
                    Some(block) if block.stream == header.stream => {
                        if block.bytes.len() + payload.len() > MAX_HEADER_BLOCK {
                            out.problems.push("HTTP/2 header blocks too large to read");
                            direction.block = None;
                            direction.names_known = false;
                            return;
                        }
                        block.bytes.extend_from_slice(payload);
                        if header.flags & END_HEADERS != 0 {
                            let block = direction.block.take().expect("under way");
                            self.block(from, block, out);
                        }
                    }
                    _ => out
                        .problems
                        .push("HTTP/2 CONTINUATION frames with no header block under way"),
                }
            }
            RST_STREAM => self.reset_stream(from, header.stream, started, out),
            SETTINGS => out.housekeeping.push("HTTP/2 SETTINGS frames"),
            PING => out.housekeeping.push("HTTP/2 PING frames"),
            GOAWAY => out.housekeeping.push("HTTP/2 GOAWAY frames"),
            WINDOW_UPDATE => out.housekeeping.push("HTTP/2 WINDOW_UPDATE frames"),
            PRIORITY => out.housekeeping.push("HTTP/2 PRIORITY frames"),
            _ => out
                .housekeeping
                .push("HTTP/2 frames of unknown types (ignored, as the protocol says)"),
        }
    }

    /// A whole header block: decoded (to keep the compression state), then a request,
    /// an answer's headers or trailers, or a push.
    fn block(&mut self, from: Side, block: Block, out: &mut Output) {
        let names = self.decode(from, &block.bytes, out);
        if block.push {
            // The promised stream is the server's: its answer is not a call.
            out.housekeeping
                .push("HTTP/2 server pushes (PUSH_PROMISE), not calls");
            return;
        }
        match from {
            Side::Client => {
                if let Some(stream) = self.streams.get_mut(&block.stream) {
                    // Trailers of a streaming request.
                    if block.end_stream {
                        stream.request_end = Some(block.started);
                        self.send_call(block.stream, out);
                    }
                    return;
                }
                if block.stream.is_multiple_of(2) {
                    out.problems
                        .push("HTTP/2 requests on server-initiated streams (ignored)");
                    return;
                }
                if self.streams.len() >= MAX_OPEN_STREAMS {
                    out.problems
                        .push("HTTP/2 streams beyond 10000 open at once (ignored)");
                    return;
                }
                let operation = match names.as_ref().and_then(Names::operation) {
                    Some(name) => out.operation(&name),
                    None => {
                        out.problems
                            .push("HTTP/2 calls whose operation name is unknown");
                        Operation::NONE
                    }
                };
                let propagated = match names.and_then(|names| names.propagated.id()) {
                    Some(id) => out.propagated(&id),
                    None => Propagated::NONE,
                };
                self.streams.insert(
                    block.stream,
                    Stream {
                        requested: block.started,
                        request_end: block.end_stream.then_some(block.started),
                        call_sent: false,
                        operation,
                        propagated,
                        status: Status::Unknown,
                    },
                );
                if block.end_stream {
                    self.send_call(block.stream, out);
                }
            }
            Side::Server => {
                let Some(stream) = self.streams.get_mut(&block.stream) else {
                    out.problems
                        .push("HTTP/2 answers on streams with no captured request");
                    return;
                };
                if let Some(names) = &names {
                    if let Some(status) = names.status() {
                        stream.status = status;
                    }
                }
                if block.end_stream {
                    self.end_stream(from, block.stream, block.started, out);
                }
            }
        }
    }

    fn decode(&mut self, from: Side, block: &[u8], out: &mut Output) -> Option<Names> {
        let direction = self.direction(from);
        if !direction.names_known {
            return None;
        }
        let mut names = Names::default();
        let decoded = direction.hpack.decode_with_cb(block, |name, value| {
            let text = || String::from_utf8_lossy(&value).into_owned();
            match &name[..] {
                b":method" => names.method = Some(text()),
                b":path" => names.path = Some(text()),
                b":status" => names.http_status = text().parse().ok(),
                b"content-type" => names.grpc = value.starts_with(b"application/grpc"),
                b"grpc-status" => names.grpc_status = text().parse().ok(),
                _ => names.propagated.field(&name, &value),
            }
        });
        match decoded {
            Ok(()) => Some(names),
            Err(_) => {
                out.problems.push(
                    "HTTP/2 header blocks that did not decode (operation names unknown from there)",
                );
                direction.names_known = false;
                None
            }
        }
    }

    /// The call on `stream` goes out once: when its request is whole, or when the answer
    /// ends first (a server may answer before a streaming request ends).
    fn send_call(&mut self, id: u32, out: &mut Output) {
        let Some(stream) = self.streams.get_mut(&id) else {
            return;
        };
        if stream.call_sent {
            return;
        }
        stream.call_sent = true;
        let mut call = Framed::new(
            Side::Client,
            Kind::Call,
            CallKey::Stream(id),
            stream.requested,
            stream.request_end.unwrap_or(stream.requested),
        );
        call.operation = stream.operation;
        call.propagated = stream.propagated;
        out.messages.push(call);
    }

    fn end_stream(&mut self, from: Side, id: u32, at: Nanos, out: &mut Output) {
        match from {
            Side::Client => match self.streams.get_mut(&id) {
                Some(stream) => {
                    stream.request_end = Some(at);
                    self.send_call(id, out);
                }
                None => out
                    .problems
                    .push("HTTP/2 frames on streams with no captured request"),
            },
            Side::Server => {
                if !self.streams.contains_key(&id) {
                    if id % 2 == 1 {
                        out.problems
                            .push("HTTP/2 answers on streams with no captured request");
                    }
                    return;
                }
                self.send_call(id, out);
                let stream = self.streams.remove(&id).expect("present");
                let mut answer =
                    Framed::new(Side::Server, Kind::Return, CallKey::Stream(id), at, at);
                answer.status = stream.status;
                out.messages.push(answer);
            }
        }
    }

    /// RST_STREAM: from the server it ends the call as a failure; from the client the
    /// call was cancelled and no answer will come.
    fn reset_stream(&mut self, from: Side, id: u32, at: Nanos, out: &mut Output) {
        if !self.streams.contains_key(&id) {
            out.housekeeping
                .push("HTTP/2 RST_STREAM frames on streams already ended");
            return;
        }
        match from {
            Side::Server => {
                self.streams.get_mut(&id).expect("present").status = Status::Failed(0);
                self.end_stream(Side::Server, id, at, out);
            }
            Side::Client => {
                self.send_call(id, out);
                self.streams.remove(&id);
                out.problems
                    .push("HTTP/2 calls the client cancelled (RST_STREAM; no answer)");
            }
        }
    }
}

impl Names {
    /// `/pkg.Service/Method` for gRPC, else the method and the templated path.
    fn operation(&self) -> Option<String> {
        let path = self.path.as_deref()?;
        if self.grpc {
            return Some(path.to_string());
        }
        let method = self.method.as_deref()?;
        Some(super::http::operation_name(method, path))
    }

    fn status(&self) -> Option<Status> {
        if let Some(code) = self.grpc_status {
            return Some(if code == 0 {
                Status::Ok
            } else {
                Status::Failed(code)
            });
        }
        self.http_status.map(super::http::status)
    }
}

/// A HEADERS or PUSH_PROMISE frame's header block fragment: without padding, priority
/// and promised stream id.
fn fragment(header: FrameHeader, payload: &[u8]) -> Option<&[u8]> {
    let mut start = 0;
    let mut end = payload.len();
    if header.flags & PADDED != 0 {
        let pad = usize::from(*payload.first()?);
        start += 1;
        end = end.checked_sub(pad)?;
    }
    if header.kind == HEADERS && header.flags & PRIORITY_FLAG != 0 {
        start += 5;
    }
    if header.kind == PUSH_PROMISE {
        start += 4;
    }
    payload.get(start..end)
}

/// The length of an HTTP/1.1 head: `Ok(None)` until its blank line has come.
fn head_len(bytes: &[u8]) -> Result<Option<usize>, ()> {
    let window = &bytes[..bytes.len().min(MAX_UPGRADE_HEAD)];
    match memchr::memmem::find(window, b"\r\n\r\n") {
        Some(end) => Ok(Some(end + 4)),
        None if bytes.len() >= MAX_UPGRADE_HEAD => Err(()),
        None => Ok(None),
    }
}

/// The operation name of an upgrade request's request line.
fn request_line_name(head: &[u8]) -> Option<String> {
    let line = head.split(|&b| b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split(' ');
    let method = words.next()?;
    let target = words.next()?;
    Some(super::http::operation_name(method, target))
}

impl Framer for Http2 {
    fn data(&mut self, from: Side, chunk: Chunk<'_>, out: &mut Output) {
        if let Some(turns) = &mut self.by_turns {
            turns.data(from, chunk, out);
            return;
        }
        let direction = self.direction(from);
        if direction.phase == Phase::Lost {
            let starts_frame = chunk.bytes.len() >= HEADER
                && FrameHeader::parse(&chunk.bytes[..HEADER])
                    .is_some_and(|h| h.kind <= CONTINUATION);
            if !starts_frame {
                out.problems
                    .push("HTTP/2 segments skipped after lost bytes, waiting for a frame start");
                return;
            }
            direction.phase = Phase::Frames;
        }
        if direction.bytes.is_empty() {
            direction.since = chunk.time;
        }
        direction.bytes.extend_from_slice(chunk.bytes);
        self.parse(from, chunk.time, out);
    }

    fn gap(&mut self, from: Side, bytes: usize, out: &mut Output) {
        if let Some(turns) = &mut self.by_turns {
            turns.gap(from, bytes, out);
            return;
        }
        let direction = self.direction(from);
        // A hole inside a DATA payload loses nothing that matters.
        if let Some(skip) = &mut direction.skip {
            if bytes <= skip.rest && direction.bytes.is_empty() {
                skip.rest -= bytes;
                return;
            }
        }
        self.lose(from);
    }

    fn close(&mut self, out: &mut Output) {
        if let Some(turns) = &mut self.by_turns {
            turns.close(out);
            return;
        }
        // Requests with no answer: their calls still went out.
        let open: Vec<u32> = self.streams.keys().copied().collect();
        for id in open {
            self.send_call(id, out);
        }
        if !self.streams.is_empty() {
            out.problems
                .push("HTTP/2 connections closed with calls unanswered");
        }
        self.streams.clear();
    }
}

/// HTTP/2 in the registry. Calls named by a path with no method are gRPC's.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Http2,
    label: "http2",
    // gRPC's customary port.
    ports: &[50051],
    client_first: looks_like_frames,
    guess: None,
    // The preface or an h2c upgrade is unmistakable, on any port (an upgrade request
    // would otherwise pass for HTTP/1.1 on port 80).
    unmistakable: Some(looks_like_start),
    server_first: None,
    broker: false,
    system: |operation| {
        Some(if operation.contains(' ') {
            "http"
        } else {
            "grpc"
        })
    },
    tcp: || Box::new(Http2::default()),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut bytes = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
        bytes.extend_from_slice(&stream.to_be_bytes());
        bytes.extend_from_slice(payload);
        bytes
    }

    fn headers(encoder: &mut loona_hpack::Encoder, fields: &[(&str, &str)]) -> Vec<u8> {
        encoder.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
    }

    fn feed(framer: &mut Http2, from: Side, time: Nanos, bytes: &[u8], out: &mut Output) {
        framer.data(
            from,
            Chunk {
                time,
                seq: 0,
                bytes,
            },
            out,
        );
    }

    fn request(encoder: &mut loona_hpack::Encoder, method: &str) -> Vec<u8> {
        headers(
            encoder,
            &[
                (":method", "POST"),
                (":scheme", "http"),
                (":path", method),
                ("content-type", "application/grpc"),
            ],
        )
    }

    #[test]
    fn overlapping_grpc_calls_on_one_connection_are_separate_calls() {
        let mut client = loona_hpack::Encoder::new();
        let mut server = loona_hpack::Encoder::new();
        let mut framer = Http2::default();
        let mut out = Output::default();
        let mut first = PREFACE.to_vec();
        first.extend(frame(SETTINGS, 0, 0, &[]));
        first.extend(frame(
            HEADERS,
            END_HEADERS,
            1,
            &request(&mut client, "/shop.App/GetItem"),
        ));
        first.extend(frame(DATA, END_STREAM, 1, &[0, 0, 0, 0, 0]));
        feed(&mut framer, Side::Client, 10, &first, &mut out);
        let mut second = frame(
            HEADERS,
            END_HEADERS,
            3,
            &request(&mut client, "/shop.Auth/Check"),
        );
        second.extend(frame(DATA, END_STREAM, 3, &[0, 0, 0, 0, 0]));
        feed(&mut framer, Side::Client, 20, &second, &mut out);
        // Stream 3 is answered first, with an error; then stream 1.
        let mut answer = frame(
            HEADERS,
            END_HEADERS,
            3,
            &headers(
                &mut server,
                &[(":status", "200"), ("content-type", "application/grpc")],
            ),
        );
        answer.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            3,
            &headers(&mut server, &[("grpc-status", "7")]),
        ));
        feed(&mut framer, Side::Server, 30, &answer, &mut out);
        let mut answer = frame(
            HEADERS,
            END_HEADERS,
            1,
            &headers(
                &mut server,
                &[(":status", "200"), ("content-type", "application/grpc")],
            ),
        );
        answer.extend(frame(DATA, 0, 1, &[0, 0, 0, 0, 1, 9]));
        feed(&mut framer, Side::Server, 40, &answer, &mut out);
        let trailers = frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            &headers(&mut server, &[("grpc-status", "0")]),
        );
        feed(&mut framer, Side::Server, 50, &trailers, &mut out);
        framer.close(&mut out);
        let seen: Vec<(Side, Kind, CallKey, Nanos, String, Status)> = out
            .messages
            .iter()
            .map(|m| {
                let name = out.name_of(m.operation).to_owned();
                (m.from, m.kind, m.key, m.first, name, m.status)
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                (
                    Side::Client,
                    Kind::Call,
                    CallKey::Stream(1),
                    10,
                    "/shop.App/GetItem".into(),
                    Status::Unknown
                ),
                (
                    Side::Client,
                    Kind::Call,
                    CallKey::Stream(3),
                    20,
                    "/shop.Auth/Check".into(),
                    Status::Unknown
                ),
                (
                    Side::Server,
                    Kind::Return,
                    CallKey::Stream(3),
                    30,
                    String::new(),
                    Status::Failed(7)
                ),
                (
                    Side::Server,
                    Kind::Return,
                    CallKey::Stream(1),
                    50,
                    String::new(),
                    Status::Ok
                ),
            ]
        );
        assert_eq!(out.housekeeping, vec!["HTTP/2 SETTINGS frames"]);
        assert!(out.problems.is_empty(), "{:?}", out.problems);
    }

    #[test]
    fn a_frame_split_across_segments_starts_when_its_first_byte_came() {
        let mut client = loona_hpack::Encoder::new();
        let mut framer = Http2::default();
        let mut out = Output::default();
        let mut bytes = PREFACE.to_vec();
        bytes.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            &headers(&mut client, &[(":method", "GET"), (":path", "/item/42")]),
        ));
        let cut = PREFACE.len() + 5;
        feed(&mut framer, Side::Client, 7, &bytes[..cut], &mut out);
        feed(&mut framer, Side::Client, 9, &bytes[cut..], &mut out);
        assert_eq!(out.messages.len(), 1);
        assert_eq!(out.messages[0].first, 7);
        assert_eq!(out.operations, vec!["GET /item/{n}".to_string()]);
    }

    #[test]
    fn mid_connection_calls_are_framed_with_unknown_names() {
        let mut client = loona_hpack::Encoder::new();
        let mut framer = Http2::default();
        let mut out = Output::default();
        let bytes = frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            5,
            &request(&mut client, "/a.B/C"),
        );
        assert!(looks_like_frames(&bytes));
        feed(&mut framer, Side::Client, 1, &bytes, &mut out);
        feed(
            &mut framer,
            Side::Server,
            2,
            &frame(RST_STREAM, 0, 5, &[0, 0, 0, 8]),
            &mut out,
        );
        let kinds: Vec<(Kind, Operation, Status)> = out
            .messages
            .iter()
            .map(|m| (m.kind, m.operation, m.status))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Kind::Call, Operation::NONE, Status::Unknown),
                (Kind::Return, Operation::NONE, Status::Failed(0)),
            ]
        );
        assert!(out.problems.contains(
            &"HTTP/2 connections whose start was not captured (operation names unknown)"
        ));
    }

    #[test]
    fn an_h2c_upgrade_request_is_stream_one() {
        let mut server = loona_hpack::Encoder::new();
        let mut framer = Http2::default();
        let mut out = Output::default();
        let upgrade = b"GET /users/17 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n";
        assert!(looks_like_start(upgrade));
        feed(&mut framer, Side::Client, 1, upgrade, &mut out);
        let mut answer =
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
                .to_vec();
        answer.extend(frame(SETTINGS, 0, 0, &[]));
        answer.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            &headers(&mut server, &[(":status", "503")]),
        ));
        feed(&mut framer, Side::Server, 2, &answer, &mut out);
        feed(&mut framer, Side::Client, 3, PREFACE, &mut out);
        let kinds: Vec<(Kind, CallKey, Status)> = out
            .messages
            .iter()
            .map(|m| (m.kind, m.key, m.status))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (Kind::Call, CallKey::Stream(1), Status::Unknown),
                (Kind::Return, CallKey::Stream(1), Status::Failed(503)),
            ]
        );
        assert_eq!(out.operations, vec!["GET /users/{n}".to_string()]);
    }

    #[test]
    fn garbage_after_the_preface_is_counted_and_the_direction_waits() {
        let mut framer = Http2::default();
        let mut out = Output::default();
        let mut bytes = PREFACE.to_vec();
        bytes.extend_from_slice(&[0xff; 20]);
        feed(&mut framer, Side::Client, 1, &bytes, &mut out);
        assert_eq!(
            out.problems,
            vec!["bytes that do not parse as HTTP/2 frames"]
        );
        feed(&mut framer, Side::Client, 2, b"still garbage", &mut out);
        assert!(out.messages.is_empty());
    }
}
