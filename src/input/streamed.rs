//! Captures too long to hold, nested in segments ([`crate::streaming`]). One pass
//! over the files decides each host's own addresses, gathers a sample of the TCP
//! segments both ends saw, and keeps every message on disk ([`crate::capture::spill`]),
//! none in memory; the clocks are aligned on the sample. Then each capture's messages
//! are replayed from disk as typed message ends in the reference clock
//! ([`crate::capture::ends`]), on a thread per capture, and the streaming nesting
//! merges them by time as it reads them. Captures that turn out to hold no more than a
//! segment take their messages back and are nested whole. Owns the pass, the replay
//! and when captures stream; not the lines, the file's format nor the segments.

use super::source::Source;
use super::InputOptions;
use super::{add_captures, empty_input, finish, read_captures, report_captures, Input, InputError};
use crate::capture::spill::Spilled;
use crate::capture::{self, ends::EndWriter, MessageBatch};
use crate::nesting::NestOptions;
use crate::progress::Progress;
use crate::streaming::{self, EndsInput, Outcome, StreamOptions};
use crate::trace::ends::EndBlock;
use crate::trace::{Nanos, Trace, TraceBuilder};
use std::sync::mpsc::sync_channel;

/// Capture bytes per line of a segment above which captures stream: a capture set
/// larger than this many bytes per `--segment-lines` line (8 GB at the default) is
/// nested in segments. HTTP/1.1 captures hold about a line per KB, so below this a
/// capture set comes to a few segments, and the whole trace needs under 2 GB: there
/// each segment's learning its model again costs more time than its memory saves (the
/// 6.6 GB capture set of docs/scale-out.md took 83 to 96 s in three segments, 78 to 85 s
/// whole).
pub const BYTES_PER_LINE: u64 = 4096;

/// TCP segments stamped for the clock alignment, at most, over all captures: a sample
/// chosen by key, so that both ends keep the same ones.
pub const STAMPS: f64 = 4.0e6;

/// Whether these captures are nested in segments: files (the size of standard input is
/// not known before it is read), nodes named by host, no repair, and more bytes than a
/// segment's lines. Captures that hold no more message ends than a segment's lines are
/// still nested whole ([`nest_captures`]).
pub fn streams(sources: &[Source], options: &InputOptions, stream: StreamOptions) -> bool {
    let sizes: Option<Vec<u64>> = sources.iter().map(Source::stored_size).collect();
    !sources.is_empty()
        && sources
            .iter()
            .all(|s| s.kind == super::source::Kind::Capture && s.is_file())
        && streams_by_size(sizes.map_or(0, |sizes| sizes.iter().sum()), options, stream)
}

/// [`streams`] for the captures of an input already read whole (`eval`, which scores
/// what `nest` makes of the same files): only captures, as large, and with more message
/// ends than a segment's lines.
pub fn streamed_as_read(input: &Input, options: &InputOptions, stream: StreamOptions) -> bool {
    let sizes: Option<Vec<u64>> = input.captures.iter().map(|c| c.stored_bytes).collect();
    !input.captures.is_empty()
        && input.trace.stats.lines == 0
        && input.trace.stats.observations > stream.segment_lines as u64
        && streams_by_size(sizes.map_or(0, |sizes| sizes.iter().sum()), options, stream)
}

fn streams_by_size(bytes: u64, options: &InputOptions, stream: StreamOptions) -> bool {
    stream.segment_lines > 0
        && EndWriter::names_nodes(options.capture.node_by)
        && options.repair.is_none()
        && bytes > stream.segment_lines as u64 * BYTES_PER_LINE
}

/// Reads the captures once and nests them in segments, or whole if they hold no more
/// message ends than a segment's lines. The input report (per capture, the alignment,
/// the warnings) is the first pass's; its trace holds no message unless the captures
/// were nested whole (then it holds them all, and the outcome's is empty). Every
/// message end replayed is also written to `keep`, if given.
pub fn nest_captures(
    sources: Vec<Source>,
    options: &InputOptions,
    nest: &NestOptions,
    stream: StreamOptions,
    keep: Option<&mut streaming::Keep>,
) -> Result<(Input, Outcome), InputError> {
    let total: u64 = sources.iter().filter_map(Source::stored_size).sum();
    let mut first = options.capture.clone();
    // About 150 bytes a packet: keep STAMPS of the segments, at most.
    let share = (STAMPS / (total as f64 / 150.0).max(1.0)).min(1.0);
    first.stamp_sample = (u64::MAX as f64 * share) as u64;
    first.stamp_for(sources.len(), options.align.is_some());
    first.spill_messages = true;
    let mut read = read_captures(sources, &first, options.progress)?;
    let lines: usize = read.iter().map(capture::HostCapture::messages).sum();
    if lines <= stream.segment_lines {
        // One segment: the messages back in memory, and the trace built as when the
        // captures are read whole, by the same code.
        for host in &mut read {
            host.restore()?;
        }
        let mut builder = TraceBuilder::new();
        let mut input = empty_input();
        add_captures(read, options, &mut builder, &mut input);
        return Ok((
            finish(builder, options, input),
            Outcome::Whole(Trace::default()),
        ));
    }
    let joined = super::join_and_align(&mut read, options);
    let names = capture::node_names(&read, &options.capture);
    let clocks: Vec<Box<dyn Fn(Nanos) -> Nanos + Sync>> = (0..read.len())
        .map(|index| -> Box<dyn Fn(Nanos) -> Nanos + Sync> {
            match &joined.alignment {
                Some(alignment) => Box::new(move |t| alignment.to_reference(index, t)),
                None => Box::new(|t| t),
            }
        })
        .collect();
    let spilled: Vec<Spilled> = read
        .iter_mut()
        .map(|host| host.take_spilled().expect("every capture was spilled"))
        .collect();
    let spilled_bytes = spilled.iter().map(Spilled::bytes).sum();
    let progress = Progress::over("nesting captures", spilled_bytes, options.progress);
    let mut passed_through = 0;
    let mut outcome = std::thread::scope(|scope| -> Result<Outcome, InputError> {
        let mut inputs = Vec::new();
        let mut writers = Vec::new();
        for ((host, clock), spilled) in read.iter().zip(&clocks).zip(spilled) {
            // A few blocks of ends per capture in flight: the merge reads them in time
            // order, so memory stays bounded whichever capture is ahead.
            let (send, receive) = sync_channel::<EndBlock>(4);
            let (names, truth, progress) = (&names, &options.capture.truth, &progress);
            writers.push(scope.spawn(move || -> Result<u64, InputError> {
                let mut writer = EndWriter::new(host, names, truth, clock.as_ref());
                let mut block = EndBlock::with_capacity(BLOCK);
                let mut sink = |batch: &MessageBatch<'_>| {
                    writer.write(batch, &mut block);
                    if block.len() >= BLOCK {
                        // A closed merge has stopped listening: the rest is not needed.
                        let _ = send.send(std::mem::replace(
                            &mut block,
                            EndBlock::with_capacity(BLOCK),
                        ));
                    }
                };
                spilled
                    .replay(&mut sink, &|bytes| progress.advance(bytes))
                    .map_err(|source| capture::spill::error(&host.path, source))?;
                let _ = send.send(block);
                Ok(writer.passed_through)
            }));
            inputs.push(EndsInput {
                path: host.path.clone(),
                blocks: receive,
            });
        }
        let outcome = streaming::nest_typed(inputs, nest, stream, keep);
        for writer in writers {
            passed_through += writer
                .join()
                .expect("a capture's line writer does not panic")?;
        }
        Ok(outcome?)
    })?;
    progress.finish();
    drop(clocks);
    let mut input = empty_input();
    report_captures(read, joined, &mut input);
    super::warn_collected(options, &mut input);
    // What was read is packets of captures, not lines: the lines were ours.
    let stats = match &mut outcome {
        Outcome::Whole(trace) => &mut trace.stats,
        Outcome::Streamed(streamed) => &mut streamed.trace.stats,
    };
    (stats.files, stats.lines, stats.blank_or_comment_lines) = (input.captures.len() as u64, 0, 0);
    stats.passed_through = passed_through;
    // A whole trace is the input's (the outcome keeps an empty one).
    if let Outcome::Whole(trace) = &mut outcome {
        input.trace = std::mem::take(trace);
    }
    Ok((input, outcome))
}

/// Ends a capture's writer hands on at a time.
const BLOCK: usize = 1 << 14;
