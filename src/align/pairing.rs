//! Finding the same TCP segment in the sender's and the receiver's capture. Owns the
//! one-way samples of every pair of hosts and the counts of segments that could not
//! be used (retransmissions, segments seen by one end only); knows nothing of fits.

use crate::capture::{HostCapture, SegmentStamp};
use crate::trace::Nanos;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// One segment seen at both ends: sent at `sent` by the sender's clock and received
/// at `received` by the receiver's, so `received − sent` is the receiver's clock
/// offset plus a network delay that is never negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Capture time at the sender, in its clock.
    pub sent: Nanos,
    /// Capture time at the receiver, in its clock.
    pub received: Nanos,
}

/// The samples between two hosts, `a < b` by capture index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairSamples {
    /// The first host (capture index).
    pub a: usize,
    /// The second host.
    pub b: usize,
    /// Segments from `a` to `b`, by send time.
    pub forward: Vec<Sample>,
    /// Segments from `b` to `a`, by send time.
    pub backward: Vec<Sample>,
}

/// What pairing did with the segments it was given.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PairingStats {
    /// Segments between two captured hosts, counted at each end.
    pub segments: u64,
    /// Segments found at both ends (each counts once).
    pub matched: u64,
    /// Segment ends left out because their key repeats within one capture
    /// (retransmissions, or keep-alives that look alike).
    pub repeated: u64,
    /// Segment ends whose other end is missing (dropped by a sniffer, or cut off).
    pub one_ended: u64,
}

/// Pairs the segments of every two captures: a route from an address of host `i` to an
/// address of host `j` is looked up in both files.
pub fn pair_samples(captures: &[HostCapture]) -> (Vec<PairSamples>, PairingStats) {
    let mut owner: BTreeMap<IpAddr, Option<usize>> = BTreeMap::new();
    for (index, capture) in captures.iter().enumerate() {
        for address in &capture.local {
            owner
                .entry(*address)
                .and_modify(|o| {
                    // An address two captures claim cannot say which one sent.
                    if *o != Some(index) {
                        *o = None
                    }
                })
                .or_insert(Some(index));
        }
    }
    let owner_of = |address: &IpAddr| owner.get(address).copied().flatten();
    let mut stats = PairingStats::default();
    let mut pairs: BTreeMap<(usize, usize), PairSamples> = BTreeMap::new();
    for (sender, capture) in captures.iter().enumerate() {
        for route in &capture.stamps {
            if owner_of(&route.from) != Some(sender) {
                continue;
            }
            let Some(receiver) = owner_of(&route.to).filter(|&r| r != sender) else {
                continue;
            };
            let Some(other) = captures[receiver]
                .stamps
                .iter()
                .find(|r| r.from == route.from && r.to == route.to)
            else {
                continue;
            };
            stats.segments += (route.stamps.len() + other.stamps.len()) as u64;
            let samples = match_segments(&route.stamps, &other.stamps, &mut stats);
            let (a, b) = (sender.min(receiver), sender.max(receiver));
            let pair = pairs.entry((a, b)).or_insert_with(|| PairSamples {
                a,
                b,
                ..PairSamples::default()
            });
            if sender == a {
                pair.forward.extend(samples);
            } else {
                pair.backward.extend(samples);
            }
        }
    }
    let mut pairs: Vec<PairSamples> = pairs.into_values().collect();
    for pair in &mut pairs {
        pair.forward.sort_unstable_by_key(|s| (s.sent, s.received));
        pair.backward.sort_unstable_by_key(|s| (s.sent, s.received));
    }
    (pairs, stats)
}

/// Joins two captures' stamps of one route by key; keys that repeat within either
/// capture are left out, since which copy the other end saw cannot be told.
fn match_segments(
    sent: &[SegmentStamp],
    received: &[SegmentStamp],
    stats: &mut PairingStats,
) -> Vec<Sample> {
    let unique = |stamps: &[SegmentStamp], stats: &mut PairingStats| -> Vec<SegmentStamp> {
        let mut sorted = stamps.to_vec();
        sorted.sort_unstable_by_key(|s| (s.key, s.time));
        let mut kept = Vec::with_capacity(sorted.len());
        let mut i = 0;
        while i < sorted.len() {
            let mut j = i + 1;
            while j < sorted.len() && sorted[j].key == sorted[i].key {
                j += 1;
            }
            if j - i == 1 {
                kept.push(sorted[i]);
            } else {
                stats.repeated += (j - i) as u64;
            }
            i = j;
        }
        kept
    };
    let (sent, received) = (unique(sent, stats), unique(received, stats));
    let mut samples = Vec::with_capacity(sent.len().min(received.len()));
    let (mut i, mut j) = (0, 0);
    while i < sent.len() && j < received.len() {
        match sent[i].key.cmp(&received[j].key) {
            std::cmp::Ordering::Less => {
                stats.one_ended += 1;
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                stats.one_ended += 1;
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                samples.push(Sample {
                    sent: sent[i].time,
                    received: received[j].time,
                });
                stats.matched += 1;
                i += 1;
                j += 1;
            }
        }
    }
    stats.one_ended += (sent.len() - i + received.len() - j) as u64;
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(key: u64, time: Nanos) -> SegmentStamp {
        SegmentStamp { key, time }
    }

    #[test]
    fn retransmitted_and_one_ended_segments_are_left_out_and_counted() {
        let sent = [stamp(1, 10), stamp(2, 20), stamp(2, 25), stamp(3, 30)];
        let received = [stamp(1, 110), stamp(2, 121), stamp(4, 140)];
        let mut stats = PairingStats::default();
        let samples = match_segments(&sent, &received, &mut stats);
        assert_eq!(
            samples,
            vec![Sample {
                sent: 10,
                received: 110
            }]
        );
        assert_eq!(stats.matched, 1);
        assert_eq!(stats.repeated, 2);
        // Key 3 at the sender and keys 2 and 4 at the receiver.
        assert_eq!(stats.one_ended, 3);
    }
}
