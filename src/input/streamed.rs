//! Captures too long to hold, nested in segments ([`crate::streaming`]), in two passes
//! over the files. The first decides each host's own addresses and gathers a sample
//! of the TCP segments both ends saw, keeping no message, and aligns the clocks. The
//! second writes each capture's message ends as text lines in the reference clock
//! ([`crate::capture::lines`]), on a thread per capture, and the streaming nesting
//! merges them by time as it reads them. Owns the two passes and when captures stream;
//! not the lines nor the segments.

use super::source::Source;
use super::InputOptions;
use super::{empty_input, progress_over, read_captures, report_captures, Input, InputError};
use crate::align;
use crate::capture::{self, lines::LineWriter, MessageBatch};
use crate::nesting::NestOptions;
use crate::streaming::{self, Outcome, StreamOptions, TextInput};
use crate::trace::Nanos;
use std::io::Read;
use std::sync::mpsc::{sync_channel, Receiver};

/// Capture bytes per line of a segment above which captures stream: a capture set
/// larger than this many bytes per `--segment-lines` line (8 GB at the default) is
/// nested in segments. HTTP/1.1 captures hold about a line per KB, so below this a
/// capture set comes to a few segments, and the whole trace needs under 2 GB: there
/// reading every capture twice costs more time than its memory saves
/// (docs/scale-out.md).
pub const BYTES_PER_LINE: u64 = 4096;

/// TCP segments stamped for the clock alignment, at most, over all captures: a sample
/// chosen by key, so that both ends keep the same ones.
pub const STAMPS: f64 = 4.0e6;

/// Whether these captures are nested in segments: files (standard input cannot be
/// read twice), nodes named by host, and more bytes than a segment's lines.
pub fn streams(sources: &[Source], options: &InputOptions, stream: StreamOptions) -> bool {
    let sizes: Option<Vec<u64>> = sources.iter().map(Source::stored_size).collect();
    !sources.is_empty()
        && sources
            .iter()
            .all(|s| s.kind == super::source::Kind::Capture && s.is_file())
        && streams_by_size(sizes.map_or(0, |sizes| sizes.iter().sum()), options, stream)
}

/// [`streams`] for the captures of an input already read whole (`eval`, which scores
/// what `nest` makes of the same files): only captures, and as large.
pub fn streamed_as_read(input: &Input, options: &InputOptions, stream: StreamOptions) -> bool {
    let sizes: Option<Vec<u64>> = input
        .captures
        .iter()
        .map(|capture| std::fs::metadata(&capture.path).ok().map(|m| m.len()))
        .collect();
    !input.captures.is_empty()
        && input.trace.stats.lines == 0
        && streams_by_size(sizes.map_or(0, |sizes| sizes.iter().sum()), options, stream)
}

fn streams_by_size(bytes: u64, options: &InputOptions, stream: StreamOptions) -> bool {
    stream.segment_lines > 0
        && LineWriter::names_nodes(options.capture.node_by)
        && options.repair.is_none()
        && bytes > stream.segment_lines as u64 * BYTES_PER_LINE
}

/// Reads the captures twice and nests them in segments. The input report (per
/// capture, the alignment, the warnings) is the first pass's; its trace holds no
/// message unless the captures came to one segment (then it holds them all, and the
/// outcome's is empty).
pub fn nest_captures(
    sources: Vec<Source>,
    options: &InputOptions,
    nest: &NestOptions,
    stream: StreamOptions,
) -> Result<(Input, Outcome), InputError> {
    let total: u64 = sources.iter().filter_map(Source::stored_size).sum();
    let mut first = options.capture.clone();
    first.discard_messages = true;
    first.clock_stamps = options.align.is_some() && sources.len() > 1;
    // About 150 bytes a packet: keep STAMPS of the segments, at most.
    let share = (STAMPS / (total as f64 / 150.0).max(1.0)).min(1.0);
    first.stamp_sample = (u64::MAX as f64 * share) as u64;
    let read = read_captures(sources, &first, options.progress)?;
    let method = options.align.filter(|_| read.len() > 1);
    let alignment = method.map(|method| align::align_with(&read, method, options.least_squares));
    let names = capture::node_names(&read, &options.capture);
    let mut second = options.capture.clone();
    second.clock_stamps = false;
    let clocks: Vec<Box<dyn Fn(Nanos) -> Nanos + Sync>> = (0..read.len())
        .map(|index| -> Box<dyn Fn(Nanos) -> Nanos + Sync> {
            match &alignment {
                Some(alignment) => Box::new(move |t| alignment.to_reference(index, t)),
                None => Box::new(|t| t),
            }
        })
        .collect();
    // Each file told apart once more, to be opened again: gzip'd or not.
    let sources = read
        .iter()
        .map(|host| Source::sniff(&host.path))
        .collect::<Result<Vec<_>, _>>()?;
    let progress = progress_over("nesting captures", &sources, options.progress);
    let mut outcome = std::thread::scope(|scope| -> Result<Outcome, InputError> {
        let mut inputs = Vec::new();
        let mut writers = Vec::new();
        for ((host, clock), source) in read.iter().zip(&clocks).zip(sources) {
            // A few blocks of lines per capture in flight: the merge reads them in time
            // order, so memory stays bounded whichever capture is ahead.
            let (send, receive) = sync_channel::<Vec<u8>>(4);
            let (names, second, progress) = (&names, &second, &progress);
            writers.push(scope.spawn(move || -> Result<(), InputError> {
                let reader = source.open(progress)?;
                let mut writer = LineWriter::new(host, names, &second.truth, clock.as_ref());
                let mut block = Vec::with_capacity(BLOCK);
                let mut sink = |batch: &MessageBatch<'_>| {
                    writer.write(batch, &mut block);
                    if block.len() >= BLOCK {
                        // A closed merge has stopped listening: the rest is not needed.
                        let _ = send.send(std::mem::replace(&mut block, Vec::with_capacity(BLOCK)));
                    }
                };
                capture::read_capture_into(
                    &host.path,
                    host.host.clone(),
                    reader,
                    second,
                    Some(&mut sink),
                )?;
                let _ = send.send(block);
                Ok(())
            }));
            inputs.push(TextInput {
                path: host.path.clone(),
                reader: Box::new(std::io::BufReader::new(Blocks::new(receive))),
            });
        }
        let outcome = streaming::nest_text(inputs, nest, stream, None);
        for writer in writers {
            writer
                .join()
                .expect("a capture's line writer does not panic")?;
        }
        Ok(outcome?)
    })?;
    progress.finish();
    drop(clocks);
    let mut input = empty_input();
    report_captures(read, alignment, &mut input);
    // What was read is packets of captures, not lines: the lines were ours.
    let stats = match &mut outcome {
        Outcome::Whole(trace) => &mut trace.stats,
        Outcome::Streamed(streamed) => &mut streamed.trace.stats,
    };
    (stats.files, stats.lines, stats.blank_or_comment_lines) = (input.captures.len() as u64, 0, 0);
    // A whole trace is the input's (the outcome keeps an empty one).
    if let Outcome::Whole(trace) = &mut outcome {
        input.trace = std::mem::take(trace);
    }
    Ok((input, outcome))
}

/// Bytes of lines a capture's writer hands on at a time.
const BLOCK: usize = 1 << 20;

/// The blocks of lines a capture's writer sends, read as one stream.
struct Blocks {
    receive: Receiver<Vec<u8>>,
    block: Vec<u8>,
    at: usize,
}

impl Blocks {
    fn new(receive: Receiver<Vec<u8>>) -> Self {
        Blocks {
            receive,
            block: Vec::new(),
            at: 0,
        }
    }
}

impl Read for Blocks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.block.len() {
            match self.receive.recv() {
                Ok(block) => (self.block, self.at) = (block, 0),
                // The writer finished (or failed: its error is told when it is joined).
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.block.len() - self.at);
        buf[..n].copy_from_slice(&self.block[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}
