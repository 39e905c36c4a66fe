//! What TCP did to a message between its first byte and its last: where the sender held
//! the rest of a message until the peer's acknowledgement came. A message's time is
//! that of its first segment, so a reply held back 40 ms by Nagle's algorithm (a small
//! segment unacknowledged: the next waits for its ACK) meeting a delayed ACK (the peer
//! acknowledges a lone segment only after 40 ms) looks like 40 ms of the receiver's own
//! time. Watched per direction of a connection, in either end's capture: a data segment
//! that follows the previous one of its direction by a long gap, and came right after
//! the peer acknowledged that one (at the sender: it left as the ACK arrived; at the
//! receiver: it arrived a round trip after the ACK left). Owns the rule and the stalls
//! per direction until a message claims them; not the framing ([`super::flows`]) nor
//! what the stalls mean for a path's latency.

use crate::trace::{Held, Nanos};

/// A gap between two data segments of one message shorter than this is not a stall:
/// a round trip within a data centre, or the sender's own pace.
const MIN_GAP: Nanos = 5_000_000;

/// How soon after the acknowledgement the held segment must follow, at least: the
/// sender sends at once when the ACK arrives, so only a round trip separates them in
/// the receiver's capture.
const ACK_TO_DATA: Nanos = 2_000_000;

/// Segments shorter than this are small whatever else the direction sent (the least
/// maximum segment size a TCP must accept).
const SMALL: u32 = 536;

/// A message's time held back by its transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stall {
    /// How long, over all of the message's held segments.
    pub waited: Nanos,
    /// Why, for the longest of them.
    pub cause: Held,
}

/// A held segment, until a message claims it.
#[derive(Debug, Clone, Copy)]
struct HeldSegment {
    at: Nanos,
    waited: Nanos,
    cause: Held,
}

/// One direction of a connection, as its stalls are told.
#[derive(Debug, Default)]
pub struct Watch {
    /// The last data segment: when, and its length on the wire.
    last_data: Option<(Nanos, u32)>,
    /// The longest data segment so far.
    largest: u32,
    /// When the peer last acknowledged new data of this direction, and up to where.
    acked: Option<(Nanos, u32)>,
    held: Vec<HeldSegment>,
}

impl Watch {
    /// A data segment of this direction, new bytes in order, `len` bytes on the wire.
    pub fn data(&mut self, time: Nanos, len: u32) {
        if let (Some((previous, previous_len)), Some((acked, _))) = (self.last_data, self.acked) {
            // Saturating: a capture's times are whatever its file says.
            let gap = time.saturating_sub(previous);
            let after_ack = previous < acked && acked <= time;
            let soon = time.saturating_sub(acked) <= (gap / 8).max(ACK_TO_DATA);
            if gap >= MIN_GAP && after_ack && soon {
                let cause = match previous_len < SMALL || previous_len < self.largest {
                    true => Held::Nagle,
                    false => Held::Window,
                };
                self.held.push(HeldSegment {
                    at: time,
                    waited: gap,
                    cause,
                });
            }
        }
        self.largest = self.largest.max(len);
        self.last_data = Some((time, len));
    }

    /// A segment of the other direction acknowledging this one's bytes up to `ack`:
    /// only one that acknowledges new bytes counts.
    pub fn acked(&mut self, time: Nanos, ack: u32) {
        let new = match self.acked {
            Some((_, through)) => (ack.wrapping_sub(through) as i32) > 0,
            None => true,
        };
        if new {
            self.acked = Some((time, ack));
        }
    }

    /// The stall of a message of this direction whose segments came from `first` to
    /// `last`: its held segments after its first (a segment held before a message's
    /// first byte was between two messages: a pause of the sender's, not the
    /// transport's). Forgets every stall up to `last`.
    pub fn claim(&mut self, first: Nanos, last: Nanos) -> Option<Stall> {
        let mut stall: Option<(Stall, Nanos)> = None;
        for held in self.held.iter().filter(|h| first < h.at && h.at <= last) {
            let (total, longest) = stall.get_or_insert((
                Stall {
                    waited: 0,
                    cause: held.cause,
                },
                0,
            ));
            total.waited = total.waited.saturating_add(held.waited);
            if held.waited > *longest {
                (*longest, total.cause) = (held.waited, held.cause);
            }
        }
        self.held.retain(|h| h.at > last);
        stall.map(|(stall, _)| stall)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    /// A reply's headers (138 bytes) and body (32 bytes) sent apart; the peer's ACK of
    /// the headers comes `ack_after` later; the body leaves `data_after` after it.
    fn headers_then_body(ack_after: Nanos, data_after: Nanos) -> Option<Stall> {
        let mut watch = Watch::default();
        watch.acked(0, 1000);
        watch.data(10 * MS, 138);
        watch.acked(10 * MS + ack_after, 1138);
        let body = 10 * MS + ack_after + data_after;
        watch.data(body, 32);
        watch.claim(10 * MS, body)
    }

    #[test]
    fn a_body_held_until_a_delayed_ack_is_a_nagle_stall() {
        let stall = headers_then_body(40 * MS, 20_000).expect("a stall");
        assert_eq!(stall.cause, Held::Nagle);
        assert_eq!(stall.waited, 40 * MS + 20_000);
        // Seen at the receiver: the body comes a round trip after the ACK left.
        assert!(headers_then_body(40 * MS, MS).is_some());
    }

    #[test]
    fn a_prompt_ack_or_a_sender_that_pauses_on_its_own_is_no_stall() {
        // The ACK came at once; the sender paused 40 ms after it, of its own accord.
        assert_eq!(headers_then_body(100_000, 40 * MS), None);
        // A short gap is the sender's pace.
        assert_eq!(headers_then_body(2 * MS, 10_000), None);
    }

    #[test]
    fn a_segment_that_starts_a_message_belongs_to_no_stall() {
        // The next reply leaves right after the request that acknowledged the last one:
        // held, by the rule, but it is the first byte of its message.
        let mut watch = Watch::default();
        watch.data(0, 170);
        watch.acked(30 * MS, 170);
        watch.data(30 * MS + 100_000, 138);
        assert_eq!(watch.claim(30 * MS + 100_000, 30 * MS + 100_000), None);
        // And it is forgotten: a later message does not claim it.
        assert_eq!(watch.claim(31 * MS, 40 * MS), None);
    }

    #[test]
    fn after_a_full_segment_the_window_held_it() {
        let mut watch = Watch::default();
        watch.data(0, 1448);
        watch.acked(20 * MS, 1448);
        watch.data(20 * MS + 10_000, 1448);
        let stall = watch.claim(0, 20 * MS + 10_000).expect("a stall");
        assert_eq!(stall.cause, Held::Window);
    }
}
