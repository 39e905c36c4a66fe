//! Nesting a trace longer than one segment in bounded memory: its message ends are read
//! in time order (text files merged line by line as they are read, captures' typed
//! ends merged block by block, or a trace held in memory for `eval`) into chunks of
//! about [`StreamOptions::segment_lines`] ends, and each segment, one chunk's time range
//! (its core) with a margin on either side from its neighbours, is nested on its own
//! ([`crate::nesting::nest_core`]): the core's calls get their parents, the core's
//! requests their patterns, and the patterns are merged by signature as the segments
//! go by. At most three chunks and one segment's nesting are held at a time, so memory
//! is bounded by the segment and the margin, not by the trace's length.
//!
//! The margin is twice the longest call seen in the first chunk (plus the skew and
//! asynchronous windows): every call of a request whose root leaves in the core, and
//! every candidate parent of a call leaving in the core, is then inside the segment.
//! A call longer than the margin is cut there (counted as unmatched). Each segment
//! learns its own model (scoreboard, the joint choice's densities) from its own calls,
//! starting from what the segments before it learned ([`nesting::Learned`]): which of
//! the joint choice's starts each node kept, so that later segments settle that one
//! alone instead of comparing three.
//!
//! A segment's trace is built from its ends as reading their text lines would build
//! it, whichever source they come from, so that the same trace nests the same from a
//! file, from captures and from memory; only a text file is ever parsed.
//!
//! Owns the chunks, the margin and the merging of segments' patterns and counts; not
//! the line syntax ([`crate::trace::text`]), the ends' sources (its rooms `lines`,
//! `typed`, `held`) nor the nesting itself.

use crate::nesting::patterns::EXACT_SAMPLES;
use crate::nesting::{self, NestError, NestOptions, NestStats, Nesting, Pattern};
use crate::trace::text::{self, TraceError};
use crate::trace::Interner;
use crate::trace::{InputStats, Nanos, NodeId, OperationId, Trace, TraceBuilder};
use hashbrown::HashMap;
use held::HeldEnds;
use lines::MergedLines;
use std::io::BufRead;
use std::path::PathBuf;
pub use typed::EndsInput;
use typed::MergedEnds;

mod held;
mod lines;
mod typed;

/// How a long trace is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamOptions {
    /// Lines per chunk; a trace of at most this many lines is nested whole, exactly as
    /// [`crate::nesting::nest`] does.
    pub segment_lines: usize,
}

/// Lines per chunk by default: segments of about a million messages, a few hundred MB.
pub const SEGMENT_LINES: usize = 2_000_000;

impl Default for StreamOptions {
    fn default() -> Self {
        StreamOptions {
            segment_lines: SEGMENT_LINES,
        }
    }
}

/// Why a streamed nesting failed.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A file could not be read, or a line is not a trace event.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// The nesting refused its options, or the trace held no call pair at all.
    #[error(transparent)]
    Nest(#[from] NestError),
}

/// What [`nest_text`] made of its input.
#[allow(clippy::large_enum_variant)]
pub enum Outcome {
    /// The input fits one segment: its whole trace, for the usual nesting.
    Whole(Trace),
    /// The input was nested in segments.
    Streamed(Streamed),
}

/// A nesting done in segments.
pub struct Streamed {
    /// The node and operation names the patterns use, and what was read; no message.
    pub trace: Trace,
    /// The patterns and counts; no call pair is kept (`pairs`, `parent` and
    /// `confidence` are empty, and so is each pattern's `instances`).
    pub nesting: Nesting,
    /// How it was cut.
    pub cut: Cut,
}

/// How a streamed nesting was cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Cut {
    /// Segments nested.
    pub segments: u64,
    /// The margin on either side of each segment's core, in nanoseconds.
    pub margin: Nanos,
    /// The most lines one segment held, margins included.
    pub largest_segment_lines: u64,
    /// Lines that came later than the segment of their time had been nested (input not
    /// in time order), set aside.
    pub late_lines: u64,
}

/// A named text input: where its lines come from.
pub struct TextInput {
    /// Its name in errors.
    pub path: PathBuf,
    /// Its bytes.
    pub reader: Box<dyn BufRead + Send>,
}

/// Per segment, its trace, its nesting and its core (from, to): what `eval` scores.
pub type SegmentHook<'a> = dyn FnMut(&Trace, &Nesting, (Nanos, Nanos)) + 'a;

/// Reads `inputs` and nests them: whole if they hold at most one chunk of lines, else
/// in segments. `hook`, if given, sees each segment's nesting.
pub fn nest_text(
    inputs: Vec<TextInput>,
    options: &NestOptions,
    stream: StreamOptions,
    hook: Option<&mut SegmentHook<'_>>,
) -> Result<Outcome, StreamError> {
    match nest_ends(MergedLines::new(inputs)?, options, stream, hook)? {
        Cutting::Whole(lines, chunk) => Ok(Outcome::Whole(whole_trace(&lines, chunk)?)),
        Cutting::Streamed(streamed) => Ok(Outcome::Streamed(streamed)),
    }
}

/// Nests typed ends arriving in blocks, one stream per input (captures' messages), as
/// [`nest_text`] nests the lines of files: whole if they fit one chunk. Every end read
/// is also written to `keep`, if given.
pub fn nest_typed(
    inputs: Vec<EndsInput>,
    options: &NestOptions,
    stream: StreamOptions,
    keep: Option<&mut Keep>,
) -> Result<Outcome, StreamError> {
    match nest_ends(MergedEnds::new(inputs, keep), options, stream, None)? {
        Cutting::Whole(ends, chunk) => Ok(Outcome::Whole(whole_trace(&ends, chunk)?)),
        Cutting::Streamed(streamed) => Ok(Outcome::Streamed(streamed)),
    }
}

/// Where the ends read are also written, as a text trace (`nest --keep-messages`): a
/// rerun reads that instead of the captures.
pub struct Keep {
    out: Box<dyn std::io::Write + Send>,
    line: String,
    failed: Option<std::io::Error>,
}

impl Keep {
    /// Writes to `out`.
    pub fn new(out: Box<dyn std::io::Write + Send>) -> Keep {
        Keep {
            out,
            line: String::new(),
            failed: None,
        }
    }

    /// Writes one end's line; the first failure is kept for [`Keep::finish`].
    fn write(&mut self, fields: &text::LineFields<'_>) {
        if self.failed.is_some() {
            return;
        }
        self.line.clear();
        text::push_line(&mut self.line, fields);
        if let Err(error) = self.out.write_all(self.line.as_bytes()) {
            self.failed = Some(error);
        }
    }

    /// Writes a whole trace (captures read whole), in its text file's order.
    pub fn write_trace(&mut self, trace: &Trace) {
        if self.failed.is_none() {
            self.failed = text::write(trace, &mut self.out).err();
        }
    }

    /// Flushes what was written, or tells the first failure.
    pub fn finish(mut self) -> std::io::Result<()> {
        match self.failed.take() {
            Some(error) => Err(error),
            None => self.out.flush(),
        }
    }
}

/// Message ends in time order, from one kind of input: what chunks are read from and
/// segments built of: text files merged as they are read ([`lines::MergedLines`]), a
/// trace held in memory ([`held::HeldEnds`]), typed ends in blocks ([`typed::MergedEnds`]).
trait Ends: Send {
    /// What a chunk keeps of its ends.
    type Store: Store;
    /// The time of the next end; `None` once every end is read.
    fn next_time(&self) -> Option<Nanos>;
    /// Moves the next end into `into` (past it, when `None`), and reads on.
    fn take(&mut self, into: Option<&mut Self::Store>) -> Result<(), TraceError>;
    /// Adds end `k` of `store` to a segment's builder, as reading its line would.
    fn build(
        &self,
        store: &Self::Store,
        k: usize,
        builder: &mut TraceBuilder,
    ) -> Result<(), TraceError>;
    /// Adds what reading counted (files, lines, blank lines) to `input`.
    fn count(&self, input: &mut InputStats);
}

/// The ends a chunk keeps, in the order read.
trait Store: Default + Send {
    /// How many.
    fn len(&self) -> usize;
    /// End `k`'s time.
    fn time(&self, k: usize) -> Nanos;
    /// Adds `other`'s ends after these.
    fn append(&mut self, other: Self);
    /// Drops the ends earlier than `time`.
    fn keep_from(&mut self, time: Nanos);
}

/// Ends read in a row.
struct Chunk<K> {
    ends: K,
    /// The time of its first end: where its core starts (none for an empty chunk).
    from: Option<Nanos>,
}

impl<K: Store> Default for Chunk<K> {
    fn default() -> Self {
        Chunk {
            ends: K::default(),
            from: None,
        }
    }
}

impl<K: Store> Chunk<K> {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn append(&mut self, other: Chunk<K>) {
        self.ends.append(other.ends);
        self.from = match (self.from, other.from) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn keep_from(&mut self, time: Nanos) {
        self.ends.keep_from(time);
        self.from = (0..self.ends.len()).map(|k| self.ends.time(k)).min();
    }
}

/// What [`nest_ends`] made of its ends.
#[allow(clippy::large_enum_variant)]
enum Cutting<S: Ends> {
    /// They fit one chunk: the ends, and the chunk that holds them all.
    Whole(S, Chunk<S::Store>),
    /// They were nested in segments.
    Streamed(Streamed),
}

/// Reads `ends` and nests them in segments, unless they fit one chunk.
fn nest_ends<S: Ends>(
    mut ends: S,
    options: &NestOptions,
    stream: StreamOptions,
    mut hook: Option<&mut SegmentHook<'_>>,
) -> Result<Cutting<S>, StreamError> {
    let mut late = 0;
    let first = read_chunk(&mut ends, &mut late, stream.segment_lines, 0, None)?;
    if ends.next_time().is_none() {
        return Ok(Cutting::Whole(ends, first));
    }
    let margin = margin(&ends, &first, options)?;
    let mut merged = Merged::default();
    // What the segments nested so far learned, which the next one starts from.
    let mut learned = nesting::Learned::default();
    let mut cut = Cut {
        segments: 0,
        margin,
        largest_segment_lines: 0,
        late_lines: 0,
    };
    // The next segment is read and built on a thread of its own while this one is
    // nested; the rendezvous bounds what is held to two segments.
    let (send, segments) = std::sync::mpsc::sync_channel(0);
    let read = std::thread::scope(|scope| -> Result<Read, StreamError> {
        let reader =
            scope.spawn(move || read_segments((ends, late), first, (stream, margin), send));
        for segment in segments {
            let segment = segment?;
            cut.segments += 1;
            cut.largest_segment_lines = cut.largest_segment_lines.max(segment.lines);
            // (A quiet stretch that fails to nest keeps what was learned before it.)
            match nesting::nest_core(&segment.trace, options, segment.core, learned.clone()) {
                Ok((nesting, learning)) => {
                    learned = learning;
                    if let Some(hook) = hook.as_deref_mut() {
                        hook(&segment.trace, &nesting, segment.core);
                    }
                    merged.add(&segment.trace, nesting);
                }
                // A quiet stretch: what it held is still counted.
                Err(NestError::NoCallPairs {
                    calls_unmatched,
                    returns_unmatched,
                    free,
                }) => {
                    merged.stats.pairing.unmatched_calls += calls_unmatched;
                    merged.stats.pairing.unmatched_returns += returns_unmatched;
                    merged.stats.pairing.free_messages += free;
                }
                Err(NestError::NoMessages { .. }) => {}
                Err(other) => return Err(other.into()),
            }
        }
        Ok(reader.join().expect("the segment reader does not panic"))
    })?;
    cut.late_lines = read.late;
    merged.input = read.input;
    let streamed = merged.finish(cut);
    if streamed.nesting.stats.call_pairs == 0 {
        let pairing = &streamed.nesting.stats.pairing;
        return Err(NestError::NoCallPairs {
            calls_unmatched: pairing.unmatched_calls,
            returns_unmatched: pairing.unmatched_returns,
            free: pairing.free_messages,
        }
        .into());
    }
    Ok(Cutting::Streamed(streamed))
}

/// What reading counted, once every segment was read.
struct Read {
    input: InputStats,
    late: u64,
}

/// Reads the chunks after the first and builds each segment's trace from the chunk of
/// its core and its neighbours, handing them to `send` in time order; stops at the end
/// of the input, at an error (sent on), or when the receiver stops listening. `late`
/// counts the ends set aside so far.
fn read_segments<S: Ends>(
    (mut ends, mut late): (S, u64),
    first: Chunk<S::Store>,
    (stream, margin): (StreamOptions, Nanos),
    send: std::sync::mpsc::SyncSender<Result<Segment, TraceError>>,
) -> Read {
    let mut input = InputStats::default();
    // chunks[1] is the segment's core; chunks[0] and chunks[2] lend it their margins.
    let mut chunks: Vec<Chunk<S::Store>> = vec![Chunk::default(), first];
    let mut core_from = Nanos::MIN;
    loop {
        let next = match ends.next_time() {
            None => Ok(Chunk::default()),
            Some(_) => read_chunk(
                &mut ends,
                &mut late,
                stream.segment_lines,
                margin,
                Some(core_from),
            ),
        };
        let segment = next.and_then(|next| {
            // A short last chunk joins this core rather than learn alone from little.
            let next = if ends.next_time().is_none() && next.len() < stream.segment_lines / 2 {
                chunks[1].append(next);
                Chunk::default()
            } else {
                next
            };
            let core_to = next.from.unwrap_or(Nanos::MAX);
            chunks.push(next);
            segment_trace(&ends, &chunks, (core_from, core_to), margin, &mut input)
        });
        let last = segment.as_ref().map_or(true, |s| s.core.1 == Nanos::MAX);
        let core_to = segment.as_ref().map_or(Nanos::MAX, |s| s.core.1);
        if send.send(segment).is_err() || last {
            break;
        }
        chunks.remove(0);
        // Of the core just read, the next segment needs only the margin before its own.
        chunks[0].keep_from(core_to.saturating_sub(margin));
        core_from = core_to;
    }
    ends.count(&mut input);
    Read { input, late }
}

/// Reads the next chunk: at least `lines` ends spanning at least `span`, ending where
/// the time changes. Ends earlier than `nested` (a core already nested) are set aside
/// and counted in `late`.
fn read_chunk<S: Ends>(
    ends: &mut S,
    late: &mut u64,
    lines: usize,
    span: Nanos,
    nested: Option<Nanos>,
) -> Result<Chunk<S::Store>, TraceError> {
    let mut chunk = Chunk::<S::Store>::default();
    while let Some(time) = ends.next_time() {
        if let (Some(from), false) = (chunk.from, chunk.ends.len() == 0) {
            let last = chunk.ends.time(chunk.ends.len() - 1);
            if chunk.ends.len() >= lines && time > last && time - from >= span {
                break;
            }
        }
        if nested.is_some_and(|nested| time < nested) {
            *late += 1;
            ends.take(None)?;
        } else {
            ends.take(Some(&mut chunk.ends))?;
            chunk.from = Some(chunk.from.map_or(time, |from| from.min(time)));
        }
    }
    Ok(chunk)
}

/// The whole trace of an input that fit one chunk, counted as the reader counts. The
/// chunk's lines go before the trace is finished, whose sorting and shrinking were
/// the peak of a trace read whole with the text still held.
fn whole_trace<S: Ends>(ends: &S, chunk: Chunk<S::Store>) -> Result<Trace, TraceError> {
    let mut builder = TraceBuilder::new();
    builder.reserve(chunk.len());
    for k in 0..chunk.len() {
        ends.build(&chunk.ends, k, &mut builder)?;
    }
    drop(chunk);
    ends.count(builder.stats_mut());
    Ok(builder.finish())
}

/// The margin on either side of a core: twice the longest call of the first chunk,
/// plus the windows that let a parent reach further.
fn margin<S: Ends>(
    ends: &S,
    first: &Chunk<S::Store>,
    options: &NestOptions,
) -> Result<Nanos, TraceError> {
    let mut builder = TraceBuilder::new();
    for k in 0..first.len() {
        ends.build(&first.ends, k, &mut builder)?;
    }
    let trace = builder.finish();
    let (pairs, _) = nesting::call_pairs::find_call_pairs(&trace);
    let longest = pairs
        .iter()
        .map(|p| (p.caller_return - p.caller_send).max(p.callee_return - p.callee_recv))
        .max()
        .unwrap_or(0);
    const AT_LEAST: Nanos = 1_000_000;
    Ok((2 * longest + options.skew_window + options.async_window).max(AT_LEAST))
}

/// A segment's trace, its core and how many lines it took.
struct Segment {
    trace: Trace,
    core: (Nanos, Nanos),
    lines: u64,
}

/// The trace of the ends of `chunks` within `margin` of `core`; what the core holds is
/// added to `input`.
fn segment_trace<S: Ends>(
    ends: &S,
    chunks: &[Chunk<S::Store>],
    (from, to): (Nanos, Nanos),
    margin: Nanos,
    input: &mut InputStats,
) -> Result<Segment, TraceError> {
    let (low, high) = (from.saturating_sub(margin), to.saturating_add(margin));
    let mut builder = TraceBuilder::new();
    let mut taken = 0u64;
    for chunk in chunks {
        for k in 0..chunk.len() {
            let time = chunk.ends.time(k);
            if time < low || time >= high {
                continue;
            }
            taken += 1;
            let in_core = nesting::in_core((from, to), time);
            let ignored = builder.stats_mut().ignored_fields;
            ends.build(&chunk.ends, k, &mut builder)?;
            if in_core {
                input.observations += 1;
                input.ignored_fields += builder.stats_mut().ignored_fields - ignored;
            }
        }
    }
    let trace = builder.finish();
    for m in &trace.messages {
        let time = m.first_time();
        if nesting::in_core((from, to), time) {
            input.messages += 1;
            match (m.sent(), m.received()) {
                (Some(_), Some(_)) => input.seen_at_both_ends += 1,
                (Some(_), None) => input.seen_at_sender_only += 1,
                _ => input.seen_at_receiver_only += 1,
            }
        }
    }
    Ok(Segment {
        trace,
        core: (from, to),
        lines: taken,
    })
}

/// The segments' patterns merged by signature, with names of their own, and their
/// counts summed.
#[derive(Default)]
struct Merged {
    nodes: Interner,
    operations: Interner,
    patterns: Vec<Pattern>,
    by_signature: HashMap<String, usize>,
    stats: NestStats,
    /// Per-segment mean parallelism weighted by its call pairs (see `finish`).
    parallelism_weight: f64,
    input: InputStats,
}

impl Merged {
    fn add(&mut self, trace: &Trace, nesting: Nesting) {
        let s = nesting.stats;
        let t = &mut self.stats;
        t.pairing.unmatched_calls += s.pairing.unmatched_calls;
        t.pairing.unmatched_returns += s.pairing.unmatched_returns;
        t.pairing.free_messages += s.pairing.free_messages;
        t.call_pairs += s.call_pairs;
        t.roots += s.roots;
        t.orphans += s.orphans;
        t.async_children += s.async_children;
        t.async_left_roots += s.async_left_roots;
        t.late_children += s.late_children;
        t.cycles_broken += s.cycles_broken;
        t.calls_with_ids += s.calls_with_ids;
        t.links_fixed_by_ids += s.links_fixed_by_ids;
        if let Some(ignored) = s.connections_ignored {
            *t.connections_ignored.get_or_insert(0) += ignored;
        }
        // What a node is (its histograms, whether it passes on ids or follows
        // connections) is learned per segment: the most any segment found.
        t.histograms = t.histograms.max(s.histograms);
        t.connection_affinity_nodes = t.connection_affinity_nodes.max(s.connection_affinity_nodes);
        t.sibling_affinity_nodes = t.sibling_affinity_nodes.max(s.sibling_affinity_nodes);
        t.id_nodes = t.id_nodes.max(s.id_nodes);
        self.parallelism_weight += s.mean_parallelism * s.call_pairs as f64;
        for mut pattern in nesting.patterns {
            for position in &mut pattern.positions {
                position.node = NodeId(self.nodes.intern(trace.node_name(position.node)));
                position.caller = NodeId(self.nodes.intern(trace.node_name(position.caller)));
                for (operation, _) in &mut position.operations {
                    let name = trace.operation_name(*operation).unwrap_or_default();
                    *operation = OperationId(self.operations.intern(name));
                }
            }
            pattern.instances = Vec::new();
            match self.by_signature.get(&pattern.signature) {
                None => {
                    self.by_signature
                        .insert(pattern.signature.clone(), self.patterns.len());
                    for position in &mut pattern.positions {
                        let (latencies, delays) = (
                            std::mem::take(&mut position.latencies),
                            std::mem::take(&mut position.call_delays),
                        );
                        position.latencies.merge(&latencies, EXACT_SAMPLES);
                        position.call_delays.merge(&delays, EXACT_SAMPLES);
                    }
                    self.patterns.push(pattern);
                }
                Some(&at) => merge_pattern(&mut self.patterns[at], &pattern),
            }
        }
    }

    /// The merged nesting, its names in a trace of their own (nodes numbered in name
    /// order, as every trace's are).
    fn finish(mut self, cut: Cut) -> Streamed {
        let mut builder = TraceBuilder::new();
        let mut names: Vec<(String, u32)> = (0..self.nodes.len() as u32)
            .map(|id| (self.nodes.resolve(id).to_owned(), id))
            .collect();
        names.sort();
        let mut renumber = vec![NodeId(0); names.len()];
        for (name, id) in &names {
            renumber[*id as usize] = builder.node(name);
        }
        let operations: Vec<OperationId> = (0..self.operations.len() as u32)
            .map(|id| builder.operation_id(self.operations.resolve(id)))
            .collect();
        for pattern in &mut self.patterns {
            for position in &mut pattern.positions {
                position.node = renumber[position.node.0 as usize];
                position.caller = renumber[position.caller.0 as usize];
                for (operation, _) in &mut position.operations {
                    *operation = operations[operation.0 as usize];
                }
            }
        }
        let mut trace = builder.finish();
        trace.stats = self.input;
        self.stats.mean_parallelism = if self.stats.call_pairs == 0 {
            0.0
        } else {
            self.parallelism_weight / self.stats.call_pairs as f64
        };
        Streamed {
            trace,
            nesting: Nesting {
                pairs: Vec::new(),
                parent: Vec::new(),
                confidence: Vec::new(),
                complete: Vec::new(),
                hops: Vec::new(),
                patterns: self.patterns,
                stats: self.stats,
            },
            cut,
        }
    }
}

/// Adds `other`'s instances to `into`, a pattern of the same signature (so of the same
/// positions).
fn merge_pattern(into: &mut Pattern, other: &Pattern) {
    into.confidence_sum += other.confidence_sum;
    into.confidence_min = into.confidence_min.min(other.confidence_min);
    into.expected_exact += other.expected_exact;
    for (a, b) in into.positions.iter_mut().zip(&other.positions) {
        a.latencies.merge(&b.latencies, EXACT_SAMPLES);
        a.call_delays.merge(&b.call_delays, EXACT_SAMPLES);
        a.own_time_sum += b.own_time_sum;
        a.request_transit.merge(&b.request_transit, EXACT_SAMPLES);
        a.reply_transit.merge(&b.reply_transit, EXACT_SAMPLES);
        a.held_sum += b.held_sum;
        a.held[0] += b.held[0];
        a.held[1] += b.held[1];
        a.critical_own_sum += b.critical_own_sum;
        a.critical_transit_sum += b.critical_transit_sum;
        for (into, from) in a
            .savings
            .iter_mut()
            .flatten()
            .zip(b.savings.iter().flatten())
        {
            *into += from;
        }
        a.unawaited += b.unawaited;
        a.errors += b.errors;
        a.with_status += b.with_status;
        a.confidence_sum += b.confidence_sum;
        for &(operation, count) in &b.operations {
            match a
                .operations
                .iter_mut()
                .find(|(known, _)| *known == operation)
            {
                Some((_, n)) => *n += count,
                None => a.operations.push((operation, count)),
            }
        }
    }
}

/// For evaluation: nests a trace held in memory as `nest` would read it from a file,
/// in segments of `stream`'s lines when it is longer, and gives each call the parent
/// its core's segment chose, as indexes into the whole trace's call pairs, with the
/// patterns those parents make. A trace of at most one segment is nested whole. The
/// segments are built from the held messages as reading the file's lines builds them
/// ([`held::HeldEnds`]), without the file.
pub fn nest_held(
    trace: &Trace,
    options: &NestOptions,
    stream: StreamOptions,
) -> Result<Nesting, StreamError> {
    // A trace of no more ends than a segment fits the first chunk: nested whole, as
    // `nest` nests its file, without ordering its ends.
    let ends: usize = (trace.messages.iter())
        .map(|m| usize::from(m.sent().is_some()) + usize::from(m.received().is_some()))
        .sum();
    if ends <= stream.segment_lines {
        return Ok(nesting::nest(trace, options)?);
    }
    let (pairs, _) = nesting::call_pairs::find_call_pairs(trace);
    let index: HashMap<(u32, u32, u32, Nanos), u32> = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (
                (p.caller.0, p.callee.0, p.call_id.0, p.caller_send),
                i as u32,
            )
        })
        .collect();
    let mut parent = vec![nesting::NO_PARENT; pairs.len()];
    let mut confidence = vec![1.0f32; pairs.len()];
    let mut complete = vec![1.0f32; pairs.len()];
    let mut hook = |segment: &Trace, nested: &Nesting, core: (Nanos, Nanos)| {
        // The segment's names and call ids as the whole trace's, each looked up once.
        let nodes: Vec<Option<u32>> = (0..segment.nodes.len() as u32)
            .map(|id| trace.nodes.get(segment.nodes.resolve(id)))
            .collect();
        let call_ids: Vec<Option<u32>> = (0..segment.call_ids.len() as u32)
            .map(|id| trace.call_ids.get(segment.call_ids.resolve(id)))
            .collect();
        let global = |i: u32| -> Option<u32> {
            let p = &nested.pairs[i as usize];
            let key = (
                nodes[p.caller.0 as usize]?,
                nodes[p.callee.0 as usize]?,
                match p.call_id {
                    crate::trace::CallId::NONE => crate::trace::CallId::NONE.0,
                    id => call_ids[id.0 as usize]?,
                },
                p.caller_send,
            );
            index.get(&key).copied()
        };
        for (i, p) in nested.pairs.iter().enumerate() {
            if !nesting::in_core(core, p.caller_send) {
                continue;
            }
            let Some(child) = global(i as u32) else {
                continue;
            };
            let chosen = nested.parent[i];
            parent[child as usize] = match chosen {
                nesting::NO_PARENT => nesting::NO_PARENT,
                chosen => global(chosen).unwrap_or(nesting::NO_PARENT),
            };
            confidence[child as usize] = nested.confidence[i];
            complete[child as usize] = nested.complete.get(i).copied().unwrap_or(1.0);
        }
    };
    match nest_ends(HeldEnds::new(trace), options, stream, Some(&mut hook))? {
        Cutting::Whole(..) => Ok(nesting::nest(trace, options)?),
        Cutting::Streamed(streamed) => {
            let mut stats = streamed.nesting.stats;
            // Each segment linked the deliveries whose publish it held; the whole trace
            // links every one.
            let followed = crate::brokers::follow(trace);
            let pair_hops = nesting::hops::pair_hops(trace, &pairs, &followed);
            let hops = nesting::hops::link(&pair_hops, &mut parent, &mut confidence);
            let in_order = nesting::hops::serve_in_order(trace, &pairs, (&pair_hops, options.ids));
            stats.served_in_order = nesting::hops::place(&in_order, &mut parent, &mut confidence);
            stats.cycles_broken += nesting::parents::break_cycles(&mut parent);
            let tree = nesting::patterns::Tree {
                parent: &parent,
                confidence: &confidence,
                complete: &complete,
                hops: &hops,
            };
            let patterns =
                nesting::patterns::find_patterns(trace, &pairs, tree, options.by_operation);
            stats.roots = parent.iter().filter(|&&p| p == nesting::NO_PARENT).count() as u64;
            Ok(Nesting {
                pairs,
                parent,
                confidence,
                complete,
                hops,
                patterns,
                stats,
            })
        }
    }
}
