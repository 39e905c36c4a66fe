//! A trace held in memory as a source of message ends ([`super::Ends`]), for `eval`:
//! its ends in the order [`crate::trace::text::write`] would write them, each added to
//! a segment's builder as reading its line back would add it
//! ([`crate::trace::text::push_as_line`]), so that a segment is the one `nest` builds
//! from the written file, without writing or parsing a line. Owns that order; not the
//! segments.

use super::{Ends, Store};
use crate::trace::text::{self, TraceError};
use crate::trace::{End, InputStats, Nanos, Trace, TraceBuilder};
use rayon::prelude::*;

/// A held trace's ends: (time, message, end), in time order.
pub(super) struct HeldEnds<'t> {
    trace: &'t Trace,
    order: Vec<(Nanos, u32, End)>,
    next: usize,
}

impl<'t> HeldEnds<'t> {
    /// Every observed end of `trace`'s messages, in the order its text file holds them:
    /// by time, then message, then end.
    pub(super) fn new(trace: &'t Trace) -> Self {
        let mut order: Vec<(Nanos, u32, End)> = Vec::with_capacity(trace.messages.len() * 2);
        for (i, m) in trace.messages.iter().enumerate() {
            if let Some(t) = m.sent() {
                order.push((t, i as u32, End::Sent));
            }
            if let Some(t) = m.received() {
                order.push((t, i as u32, End::Received));
            }
        }
        order.par_sort_unstable();
        HeldEnds {
            trace,
            order,
            next: 0,
        }
    }
}

/// The held ends a chunk keeps.
#[derive(Default)]
pub(super) struct HeldChunk(Vec<(Nanos, u32, End)>);

impl Store for HeldChunk {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn time(&self, k: usize) -> Nanos {
        self.0[k].0
    }

    fn append(&mut self, other: HeldChunk) {
        self.0.extend(other.0);
    }

    fn keep_from(&mut self, time: Nanos) {
        self.0.retain(|end| end.0 >= time);
    }
}

impl Ends for HeldEnds<'_> {
    type Store = HeldChunk;

    fn next_time(&self) -> Option<Nanos> {
        self.order.get(self.next).map(|end| end.0)
    }

    fn take(&mut self, into: Option<&mut HeldChunk>) -> Result<(), TraceError> {
        if let (Some(chunk), Some(&end)) = (into, self.order.get(self.next)) {
            chunk.0.push(end);
        }
        self.next += 1;
        Ok(())
    }

    fn build(
        &self,
        chunk: &HeldChunk,
        k: usize,
        builder: &mut TraceBuilder,
    ) -> Result<(), TraceError> {
        let (time, i, end) = chunk.0[k];
        let fields = text::message_fields(self.trace, time, i as usize, end);
        text::push_as_line(&fields, builder);
        Ok(())
    }

    fn count(&self, input: &mut InputStats) {
        input.files = 1;
        input.lines = self.order.len() as u64;
    }
}
