//! Typed message ends arriving in blocks, one stream per input (a capture's messages
//! replayed from disk, [`crate::input::streamed`]), as a source of ends
//! ([`super::Ends`]): the streams merged by time as blocks arrive, a chunk keeping its
//! ends typed ([`EndBlock`]), each added to a segment's builder as reading its line
//! would add it. Owns the merge; not the ends' making.

use super::{Ends, Keep, Store};
use crate::trace::ends::EndBlock;
use crate::trace::text::{self, TraceError};
use crate::trace::{InputStats, Nanos, TraceBuilder};
use std::path::PathBuf;
use std::sync::mpsc::Receiver;

/// One input's ends: blocks in time order, until its sender is gone.
pub struct EndsInput {
    /// Its name.
    pub path: PathBuf,
    /// Its blocks.
    pub blocks: Receiver<EndBlock>,
}

/// One input's block being read.
struct Stream {
    input: EndsInput,
    block: EndBlock,
    at: usize,
}

impl Stream {
    /// The stream of `input`, at its first end.
    fn new(input: EndsInput) -> Stream {
        let mut stream = Stream {
            input,
            block: EndBlock::default(),
            at: 0,
        };
        stream.fill();
        stream
    }

    /// Moves on to the next end.
    fn advance(&mut self) {
        self.at += 1;
        self.fill();
    }

    /// Where this block is done, waits for the next (an empty one reads on); at the
    /// end, its sender finished (or failed: that is told when it is joined).
    fn fill(&mut self) {
        while self.at >= self.block.len() {
            match self.input.blocks.recv() {
                Ok(block) => (self.block, self.at) = (block, 0),
                Err(_) => {
                    (self.block, self.at) = (EndBlock::default(), 0);
                    return;
                }
            }
        }
    }

    fn next_time(&self) -> Option<Nanos> {
        (self.at < self.block.len()).then(|| self.block.time(self.at))
    }
}

/// Every input's ends, merged by time as they arrive.
pub(super) struct MergedEnds<'k> {
    streams: Vec<Stream>,
    /// The stream whose next end is earliest ([`MergedEnds::earliest`]), found once per
    /// end.
    next: Option<usize>,
    read: u64,
    /// Where each end read is also written.
    keep: Option<&'k mut Keep>,
}

impl<'k> MergedEnds<'k> {
    /// Opens the merge: waits for each input's first ends.
    pub(super) fn new(inputs: Vec<EndsInput>, keep: Option<&'k mut Keep>) -> MergedEnds<'k> {
        let streams = inputs.into_iter().map(Stream::new).collect();
        let mut merged = MergedEnds {
            streams,
            next: None,
            read: 0,
            keep,
        };
        merged.next = merged.earliest();
        merged
    }

    /// The input whose next end is earliest (ties to the first given).
    fn earliest(&self) -> Option<usize> {
        (0..self.streams.len())
            .filter_map(|s| Some((self.streams[s].next_time()?, s)))
            .min()
            .map(|(_, s)| s)
    }
}

impl Store for EndBlock {
    fn len(&self) -> usize {
        EndBlock::len(self)
    }

    fn time(&self, k: usize) -> Nanos {
        EndBlock::time(self, k)
    }

    fn append(&mut self, other: EndBlock) {
        EndBlock::append(self, other);
    }

    fn keep_from(&mut self, time: Nanos) {
        EndBlock::keep_from(self, time);
    }
}

impl Ends for MergedEnds<'_> {
    type Store = EndBlock;

    fn next_time(&self) -> Option<Nanos> {
        self.streams[self.next?].next_time()
    }

    fn take(&mut self, into: Option<&mut EndBlock>) -> Result<(), TraceError> {
        let Some(s) = self.next else {
            return Ok(());
        };
        let stream = &mut self.streams[s];
        let fields = stream.block.fields(stream.at);
        if let Some(keep) = self.keep.as_deref_mut() {
            keep.write(&fields);
        }
        if let Some(chunk) = into {
            chunk.push(&fields);
        }
        self.read += 1;
        stream.advance();
        self.next = self.earliest();
        Ok(())
    }

    fn build(
        &self,
        chunk: &EndBlock,
        k: usize,
        builder: &mut TraceBuilder,
    ) -> Result<(), TraceError> {
        text::push_as_line(&chunk.fields(k), builder);
        Ok(())
    }

    fn count(&self, input: &mut InputStats) {
        input.files = self.streams.len() as u64;
        input.lines = self.read;
        input.blank_or_comment_lines = 0;
    }
}
