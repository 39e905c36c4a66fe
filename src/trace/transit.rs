//! What the transport added to a message: the time from its first byte to its last
//! (its `spread`), and how much of that TCP held the rest back waiting for the peer's
//! acknowledgement, and why. A message's time is its first byte's, but its receiver
//! can act only on its last: a reply whose body waited 40 ms for a delayed ACK took
//! 40 ms on the wire, not at the node that received it. Kept per call, for its call
//! and its return, beside the messages (as operations and statuses are). Owns the
//! values and which end's view wins (the receiver's); not how a capture finds them
//! (`capture::transport`), nor what they mean for a path's latency (`nesting::patterns`).

use super::{CallId, End, Kind, Nanos};

/// Why TCP held part of a message back until the peer's acknowledgement.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum Held {
    /// After a small segment: Nagle's algorithm waited for its ACK, which the peer
    /// delayed.
    Nagle,
    /// After a full segment: the congestion or the receive window was full.
    Window,
}

impl Held {
    /// What it means, for a reader.
    pub fn meaning(self) -> &'static str {
        match self {
            Held::Nagle => "after a small segment: Nagle's algorithm waiting for a delayed ACK",
            Held::Window => "after a full segment: the congestion or receive window",
        }
    }

    /// A few words, for tables and figures.
    pub fn short(self) -> &'static str {
        match self {
            Held::Nagle => "Nagle + delayed ACK",
            Held::Window => "TCP window",
        }
    }

    /// Its name in the text format's `held=` field.
    pub fn token(self) -> &'static str {
        match self {
            Held::Nagle => "nagle",
            Held::Window => "window",
        }
    }

    /// The kind a `held=` field names.
    pub fn from_token(token: &str) -> Option<Held> {
        match token {
            "nagle" => Some(Held::Nagle),
            "window" => Some(Held::Window),
            _ => None,
        }
    }
}

/// One message's time in transit between its first and its last byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Transit {
    /// From its first byte to its last, as the end that saw it timed them.
    pub spread: Nanos,
    /// How much of `spread` TCP held bytes back until the peer's ACK.
    pub held: Nanos,
    /// Why, for the longest hold; `None` when nothing was held.
    pub why: Option<Held>,
}

impl Transit {
    /// Nothing between first and last byte: one segment, or bytes back to back.
    pub const NONE: Transit = Transit {
        spread: 0,
        held: 0,
        why: None,
    };

    /// Whether there is anything to tell.
    pub fn is_none(&self) -> bool {
        *self == Transit::NONE
    }
}

/// A transit in 16 bytes, with one more bit for its holder: the spread, then the hold
/// shifted past three bits (why: none, Nagle, window; and the holder's bit). Millions
/// of messages carry one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Packed([u64; 2]);

impl Packed {
    /// `transit`, with `flag` kept beside it.
    pub(crate) fn new(transit: Transit, flag: bool) -> Packed {
        let why = match transit.why {
            None => 0,
            Some(Held::Nagle) => 1,
            Some(Held::Window) => 2,
        };
        let held = (transit.held.max(0) as u64).min(u64::MAX >> 3);
        Packed([
            transit.spread.max(0) as u64,
            held << 3 | why << 1 | u64::from(flag),
        ])
    }

    /// The transit.
    pub(crate) fn transit(self) -> Transit {
        Transit {
            spread: self.0[0].min(i64::MAX as u64) as Nanos,
            held: (self.0[1] >> 3) as Nanos,
            why: match (self.0[1] >> 1) & 3 {
                1 => Some(Held::Nagle),
                2 => Some(Held::Window),
                _ => None,
            },
        }
    }

    /// The flag kept beside it.
    pub(crate) fn flag(self) -> bool {
        self.0[1] & 1 == 1
    }
}

/// Each call's transits (its call's and its return's), where any is known: an index per
/// call id into the few calls that have one, so a trace without any costs nothing.
#[derive(Debug, Clone, Default)]
pub(super) struct CallTransits {
    /// Per call id, one plus its entry's index (0 or missing: none).
    index: Vec<u32>,
    /// Per entry: the call's and the return's, each flagged where it came from the
    /// receiver.
    entries: Vec<[Packed; 2]>,
}

impl CallTransits {
    /// The transit of `call`'s message of `kind` (free-form messages have none here).
    pub(super) fn get(&self, call: CallId, kind: Kind) -> Transit {
        let Some(slot) = slot(kind) else {
            return Transit::NONE;
        };
        match self.index.get(call.0 as usize) {
            Some(&at) if at > 0 => self.entries[at as usize - 1][slot].transit(),
            _ => Transit::NONE,
        }
    }

    /// Records what `end` saw of `call`'s message of `kind`. The receiver's view wins
    /// (it could act only on the last byte); of two views from the same end, the longer:
    /// whichever order the ends come in, the same one is kept.
    pub(super) fn record(&mut self, call: CallId, kind: Kind, end: End, transit: Transit) {
        let Some(slot) = slot(kind) else { return };
        if call == CallId::NONE || transit.is_none() {
            return;
        }
        let index = call.0 as usize;
        if self.index.len() <= index {
            self.index.resize(index + 1, 0);
        }
        if self.index[index] == 0 {
            self.entries.push([Packed::default(); 2]);
            self.index[index] = u32::try_from(self.entries.len()).expect("call ids fit in u32");
        }
        let kept = &mut self.entries[self.index[index] as usize - 1][slot];
        let (known, by_receiver) = (kept.transit(), end == End::Received);
        let longer = (transit.spread, transit.held) > (known.spread, known.held);
        let better = match (by_receiver, kept.flag()) {
            (true, false) => true,
            (false, true) => false,
            _ => longer || known.is_none(),
        };
        if better {
            *kept = Packed::new(transit, by_receiver);
        }
    }

    /// Whether any message has a transit.
    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn slot(kind: Kind) -> Option<usize> {
    match kind {
        Kind::Call => Some(0),
        Kind::Return => Some(1),
        Kind::Free => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_receivers_view_wins_whatever_the_order() {
        let sent = Transit {
            spread: 40,
            held: 40,
            why: Some(Held::Nagle),
        };
        let received = Transit {
            spread: 41,
            held: 39,
            why: Some(Held::Nagle),
        };
        for order in [[End::Sent, End::Received], [End::Received, End::Sent]] {
            let mut transits = CallTransits::default();
            for end in order {
                let transit = if end == End::Sent { sent } else { received };
                transits.record(CallId(3), Kind::Return, end, transit);
            }
            assert_eq!(transits.get(CallId(3), Kind::Return), received);
            assert_eq!(transits.get(CallId(3), Kind::Call), Transit::NONE);
            assert_eq!(transits.get(CallId(9), Kind::Return), Transit::NONE);
        }
        for transit in [sent, received, Transit::NONE] {
            for flag in [false, true] {
                let packed = Packed::new(transit, flag);
                assert_eq!((packed.transit(), packed.flag()), (transit, flag));
            }
        }
        let mut none = CallTransits::default();
        none.record(CallId(1), Kind::Call, End::Sent, Transit::NONE);
        assert!(none.is_empty());
    }
}
