//! Message ends as one stage hands them to the next, typed and owned: what a line of
//! the text format says ([`super::text::LineFields`]), kept in blocks with their strings
//! back to back, so that captures reach the segments of [`crate::streaming`] without
//! being written as text and parsed again. Owns the block; not the line syntax, nor
//! what the stages make of the ends.

use super::text::LineFields;
use super::{End, Kind, Nanos, Status, Transit};

/// Message ends, in the order pushed.
#[derive(Debug, Default, Clone)]
pub struct EndBlock {
    strings: String,
    ends: Vec<OwnedEnd>,
    /// The ends' transits where they have one (most ends have none: kept apart, so an
    /// end costs 4 bytes for it, not 24).
    transits: Vec<super::transit::Packed>,
}

/// One end: its scalars, and where its strings are in the block's.
#[derive(Debug, Clone, Copy)]
struct OwnedEnd {
    time: Nanos,
    /// Where its strings start.
    start: usize,
    /// The lengths of its sender, receiver, call id, truth, operation and request id,
    /// back to back from `start`.
    lengths: [u32; 6],
    /// Which of truth, operation and request id it has (bits 0, 1 and 2).
    given: u8,
    kind: Kind,
    end: End,
    status: Status,
    /// One plus its transit's index in the block's, or 0 for none.
    transit: u32,
    /// What a broker message carried (0: none).
    content: u32,
}

impl EndBlock {
    /// An empty block with room for about `ends` ends.
    pub fn with_capacity(ends: usize) -> EndBlock {
        EndBlock {
            strings: String::with_capacity(ends * 48),
            ends: Vec::with_capacity(ends),
            transits: Vec::new(),
        }
    }

    /// How many ends it holds.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// End `k`'s time.
    pub fn time(&self, k: usize) -> Nanos {
        self.ends[k].time
    }

    /// Adds an end.
    pub fn push(&mut self, fields: &LineFields<'_>) {
        let start = self.strings.len();
        let optional = [fields.truth, fields.operation, fields.propagated];
        let mut given = 0u8;
        let mut lengths = [0u32; 6];
        let strings = [fields.sender, fields.receiver, fields.call_id]
            .into_iter()
            .map(Some)
            .chain(optional);
        for (k, text) in strings.enumerate() {
            if let Some(text) = text {
                self.strings.push_str(text);
                lengths[k] = u32::try_from(text.len()).expect("a field under 4 GB");
                if k >= 3 {
                    given |= 1 << (k - 3);
                }
            }
        }
        self.ends.push(OwnedEnd {
            time: fields.time,
            start,
            lengths,
            given,
            kind: fields.kind,
            end: fields.end,
            status: fields.status,
            transit: match fields.transit.is_none() {
                true => 0,
                false => {
                    self.transits
                        .push(super::transit::Packed::new(fields.transit, false));
                    u32::try_from(self.transits.len()).expect("a block under 4 G ends")
                }
            },
            content: fields.content,
        });
    }

    /// What end `k` says.
    pub fn fields(&self, k: usize) -> LineFields<'_> {
        let end = &self.ends[k];
        let mut texts = [""; 6];
        let mut at = end.start;
        for (text, &length) in texts.iter_mut().zip(&end.lengths) {
            *text = &self.strings[at..at + length as usize];
            at += length as usize;
        }
        let given = |bit: u8| end.given & (1 << bit) != 0;
        LineFields {
            time: end.time,
            kind: end.kind,
            end: end.end,
            sender: texts[0],
            receiver: texts[1],
            call_id: texts[2],
            truth: given(0).then_some(texts[3]),
            operation: given(1).then_some(texts[4]),
            propagated: given(2).then_some(texts[5]),
            status: end.status,
            transit: match end.transit {
                0 => Transit::NONE,
                at => self.transits[at as usize - 1].transit(),
            },
            content: end.content,
        }
    }

    /// Adds `other`'s ends after these.
    pub fn append(&mut self, other: EndBlock) {
        let shift = self.strings.len();
        let transits = u32::try_from(self.transits.len()).expect("a block under 4 G ends");
        self.strings.push_str(&other.strings);
        self.transits.extend_from_slice(&other.transits);
        self.ends.extend(other.ends.iter().map(|end| OwnedEnd {
            start: end.start + shift,
            transit: match end.transit {
                0 => 0,
                at => at + transits,
            },
            ..*end
        }));
    }

    /// Drops the ends earlier than `time`.
    pub fn keep_from(&mut self, time: Nanos) {
        let mut kept = EndBlock::default();
        for k in (0..self.len()).filter(|&k| self.ends[k].time >= time) {
            kept.push(&self.fields(k));
        }
        *self = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_come_back_as_pushed() {
        let one = LineFields {
            time: -5,
            kind: Kind::Call,
            end: End::Sent,
            sender: "web",
            receiver: "db",
            call_id: "tcp:1>2#s1",
            truth: None,
            operation: Some("GET /a b"),
            propagated: Some(""),
            status: Status::Unknown,
            transit: Transit::NONE,
            content: 0,
        };
        let two = LineFields {
            time: 7,
            kind: Kind::Return,
            end: End::Received,
            sender: "db",
            receiver: "web",
            call_id: "",
            truth: Some("t9"),
            operation: None,
            propagated: None,
            status: Status::Failed(500),
            transit: Transit {
                spread: 9,
                held: 8,
                why: Some(super::super::Held::Nagle),
            },
            content: 0x1234,
        };
        let mut block = EndBlock::default();
        block.push(&one);
        let mut other = EndBlock::with_capacity(1);
        other.push(&two);
        block.append(other);
        let said = |f: &LineFields<'_>| {
            let mut line = String::new();
            super::super::text::push_line(&mut line, f);
            (
                line,
                f.truth.map(str::to_owned),
                f.operation.map(str::to_owned),
                f.propagated.map(str::to_owned),
            )
        };
        assert_eq!(block.len(), 2);
        assert_eq!(said(&block.fields(0)), said(&one));
        assert_eq!(said(&block.fields(1)), said(&two));
        block.keep_from(0);
        assert_eq!((block.len(), block.time(0)), (1, 7));
        assert_eq!(said(&block.fields(0)), said(&two));
    }
}
