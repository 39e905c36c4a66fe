//! Finding the same TCP segment in the sender's and the receiver's capture, whatever
//! address translation (NAT) did to its addresses and ports between them, and wherever
//! segmentation offloads cut it differently at the two ends. Owns the one-way samples
//! of every pair of hosts, the connection ends each matched segment shows at its two
//! ends ([`Link`], what [`crate::nat`] learns translations from) and the counts of
//! segments that could not be used (retransmissions, segments seen by one end only);
//! knows nothing of fits.

use crate::capture::{HostCapture, RouteStamps, SegmentStamp};
use crate::trace::Nanos;
use hashbrown::{HashMap, HashSet};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

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
    /// Segment ends found inside a longer segment of the other end (one end's capture
    /// saw the segments its network card would cut or had joined: TSO, GSO, GRO, LRO).
    pub pieces: u64,
}

/// One direction of a connection as its sender's and its receiver's captures saw it:
/// where a translation (NAT) stood between them, the two differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Link {
    /// The sender's capture.
    pub sender: usize,
    /// Source and destination in the sender's capture.
    pub sent: (SocketAddr, SocketAddr),
    /// The receiver's capture.
    pub receiver: usize,
    /// Source and destination in the receiver's capture.
    pub received: (SocketAddr, SocketAddr),
}

/// What pairing found.
#[derive(Debug, Clone, Default)]
pub struct Pairing {
    /// Per pair of hosts with samples.
    pub samples: Vec<PairSamples>,
    /// The counts.
    pub stats: PairingStats,
    /// Every link with the segments matched on it.
    pub links: BTreeMap<Link, u64>,
    /// Per capture, the directions of connections it saw only pass (a node's capture
    /// of its pods' traffic, before and after it translated them) whose segments the
    /// two ends' own captures matched: what that capture holds of them, they hold too.
    pub passed: BTreeSet<(usize, (SocketAddr, SocketAddr))>,
}

/// One captured copy of a segment, at the host that sent it or the one that received
/// it.
#[derive(Clone, Copy)]
struct Copy {
    key: u64,
    capture: u32,
    route: u32,
    index: u32,
    sends: bool,
    /// Whether the capture neither sent nor received it: it passed through, or stayed
    /// within the host.
    passes: bool,
    /// Whether its peer (the receiver of a send, the sender of a receive) is an address
    /// another capture owns: such a copy should have been seen there.
    expected: bool,
}

/// Pairs the segments of every two captures by key alone: a copy is a send in the
/// capture that owns its source address and a receive in the one that owns its
/// destination, whatever addresses the other end saw.
pub fn pair_samples(captures: &[HostCapture]) -> Pairing {
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
    let mut copies = Vec::new();
    for (c, capture) in captures.iter().enumerate() {
        for (r, route) in capture.stamps.iter().enumerate() {
            let (from, to) = (owner_of(&route.from), owner_of(&route.to));
            let sends = from == Some(c);
            // Within one host, or only passing through it (a node's capture of its
            // pods): neither a send nor a receive between two hosts, but a sign that
            // this capture stands between the two ends.
            let passes = sends == (to == Some(c));
            let peer = if sends { to } else { from };
            let expected = !passes && peer.is_some_and(|p| p != c);
            for (i, stamp) in route.stamps.iter().enumerate() {
                copies.push(Copy {
                    key: stamp.key,
                    capture: c as u32,
                    route: r as u32,
                    index: i as u32,
                    sends,
                    passes,
                    expected,
                });
            }
        }
    }
    copies.sort_unstable_by_key(|c| (c.key, c.capture, c.route, c.index));
    let stamp_of = |c: &Copy| -> (&RouteStamps, &SegmentStamp) {
        let route = &captures[c.capture as usize].stamps[c.route as usize];
        (route, &route.stamps[c.index as usize])
    };
    let mut stats = PairingStats::default();
    let mut pairs: BTreeMap<(usize, usize), PairSamples> = BTreeMap::new();
    let mut links: HashMap<Link, u64> = HashMap::new();
    // Copies neither matched nor repeated: pieces of a segment cut differently?
    let mut unmatched: Vec<Copy> = Vec::new();
    // Copies matched whole, as the longer segment a piece may lie in.
    let mut matched: Vec<Copy> = Vec::new();
    let mut kept: Vec<Copy> = Vec::new();
    let mut between: Vec<Copy> = Vec::new();
    let mut passed: HashSet<(usize, (SocketAddr, SocketAddr))> = HashSet::new();
    for group in copies.chunk_by(|a, b| a.key == b.key) {
        kept.clear();
        between.clear();
        for one in group.chunk_by(|a, b| a.capture == b.capture) {
            // A host that saw the segment on two routes (before and after it translated
            // the addresses, as a node does for its pods) or only passing through
            // stands between the two ends: its copies are left out.
            if one.iter().any(|c| c.passes || c.route != one[0].route) {
                between.extend_from_slice(one);
            } else {
                kept.extend_from_slice(one);
            }
        }
        let mut i = 0;
        let mut ends: [Option<Copy>; 2] = [None, None];
        let mut ambiguous = false;
        while i < kept.len() {
            let mut j = i + 1;
            while j < kept.len() && kept[j].capture == kept[i].capture {
                j += 1;
            }
            if j - i > 1 {
                // Which copy the other end saw cannot be told.
                stats.repeated += kept[i..j].iter().filter(|c| c.expected).count() as u64;
                stats.segments += kept[i..j].iter().filter(|c| c.expected).count() as u64;
                ambiguous = true;
            } else {
                let slot = &mut ends[usize::from(kept[i].sends)];
                ambiguous |= slot.is_some();
                *slot = Some(kept[i]);
            }
            i = j;
        }
        match ends {
            [Some(received), Some(sent)] if !ambiguous => {
                let (sent_route, sent_stamp) = stamp_of(&sent);
                let (received_route, received_stamp) = stamp_of(&received);
                let (sender, receiver) = (sent.capture as usize, received.capture as usize);
                let (a, b) = (sender.min(receiver), sender.max(receiver));
                let pair = pairs.entry((a, b)).or_insert_with(|| PairSamples {
                    a,
                    b,
                    ..PairSamples::default()
                });
                let sample = Sample {
                    sent: sent_stamp.time,
                    received: received_stamp.time,
                };
                if sender == a {
                    pair.forward.push(sample);
                } else {
                    pair.backward.push(sample);
                }
                *links
                    .entry(Link {
                        sender,
                        sent: sent_stamp.ends(sent_route),
                        receiver,
                        received: received_stamp.ends(received_route),
                    })
                    .or_default() += 1;
                stats.matched += 1;
                stats.segments += 2;
                matched.extend([sent, received]);
                for copy in &between {
                    let (route, stamp) = stamp_of(copy);
                    passed.insert((copy.capture as usize, stamp.ends(route)));
                }
            }
            _ => {
                for copy in ends.into_iter().flatten() {
                    unmatched.push(copy);
                }
            }
        }
    }
    let pieces = pieces(captures, &unmatched, &matched);
    for (copy, piece) in unmatched.iter().zip(&pieces) {
        if *piece {
            stats.pieces += 1;
            stats.segments += 1;
        } else if copy.expected {
            stats.one_ended += 1;
            stats.segments += 1;
        }
    }
    let mut pairs: Vec<PairSamples> = pairs.into_values().collect();
    for pair in &mut pairs {
        pair.forward.sort_unstable_by_key(|s| (s.sent, s.received));
        pair.backward.sort_unstable_by_key(|s| (s.sent, s.received));
    }
    Pairing {
        samples: pairs,
        stats,
        links: links.into_iter().collect(),
        passed: passed.into_iter().collect(),
    }
}

/// A segment's bytes at one end: its first byte's number, its length, its capture.
type Range = (u32, u32, u32);

/// Which `unmatched` copies lie inside a longer segment of the other end: a copy of
/// another capture and the other direction (a receive for a send) with the same
/// acknowledgement number whose sequence range holds this one's first byte. The
/// longer one is matched whole (its first piece shares its key) or unmatched itself.
fn pieces(captures: &[HostCapture], unmatched: &[Copy], matched: &[Copy]) -> Vec<bool> {
    let stamp = |c: &Copy| -> &SegmentStamp {
        &captures[c.capture as usize].stamps[c.route as usize].stamps[c.index as usize]
    };
    // The segments with a payload by acknowledgement number and direction, in order of
    // their first byte.
    let mut longer: HashMap<(u32, bool), Vec<Range>> = HashMap::new();
    for copy in unmatched.iter().chain(matched) {
        let s = stamp(copy);
        if s.len > 0 {
            longer
                .entry((s.ack, copy.sends))
                .or_default()
                .push((s.seq, s.len, copy.capture));
        }
    }
    for ranges in longer.values_mut() {
        ranges.sort_unstable();
    }
    // How many segments that start before a piece are looked at: the one holding it
    // is the last of its capture to start before it, and few captures share a number.
    const LOOK_BACK: usize = 8;
    unmatched
        .iter()
        .map(|copy| {
            let s = stamp(copy);
            let Some(ranges) = longer.get(&(s.ack, !copy.sends)).filter(|_| s.len > 0) else {
                return false;
            };
            let end = ranges.partition_point(|&(seq, _, _)| seq <= s.seq);
            ranges[end.saturating_sub(LOOK_BACK)..end]
                .iter()
                .any(|&(seq, len, capture)| {
                    capture != copy.capture
                        && u64::from(s.seq) + u64::from(s.len) <= u64::from(seq) + u64::from(len)
                        && len > s.len
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment `key` from `from` to `to` at `time`, starting at byte `seq` of `len`.
    fn stamp(key: u64, time: Nanos, seq: u32, len: u32) -> SegmentStamp {
        SegmentStamp {
            key,
            time,
            ports: (0, 0),
            seq,
            ack: 7,
            len,
        }
    }

    fn route(from: &str, to: &str, ports: (u16, u16), stamps: &[SegmentStamp]) -> RouteStamps {
        RouteStamps {
            from: from.parse().unwrap(),
            to: to.parse().unwrap(),
            stamps: stamps
                .iter()
                .map(|s| SegmentStamp { ports, ..*s })
                .collect(),
        }
    }

    fn host(name: &str, own: &[&str], routes: Vec<RouteStamps>) -> HostCapture {
        let own = own.iter().map(|a| a.parse().unwrap()).collect();
        HostCapture::from_stamps(name, own, routes)
    }

    #[test]
    fn retransmitted_and_one_ended_segments_are_left_out_and_counted() {
        let sent = [(1, 10), (2, 20), (2, 25), (3, 30)].map(|(k, t)| stamp(k, t, 0, 0));
        let received = [(1, 110), (2, 121), (4, 140)].map(|(k, t)| stamp(k, t, 0, 0));
        let captures = [
            host(
                "a",
                &["10.0.0.1"],
                vec![route("10.0.0.1", "10.0.0.2", (1, 2), &sent)],
            ),
            host(
                "b",
                &["10.0.0.2"],
                vec![route("10.0.0.1", "10.0.0.2", (1, 2), &received)],
            ),
        ];
        let pairing = pair_samples(&captures);
        assert_eq!(pairing.samples.len(), 1);
        assert_eq!(
            pairing.samples[0].forward,
            vec![Sample {
                sent: 10,
                received: 110
            }]
        );
        let stats = &pairing.stats;
        assert_eq!(stats.matched, 1);
        assert_eq!(stats.repeated, 2);
        // Key 3 at the sender and keys 2 and 4 at the receiver.
        assert_eq!(stats.one_ended, 3);
        assert_eq!(stats.segments, 7);
    }

    #[test]
    fn segments_are_matched_across_address_translation_and_each_end_named_as_seen() {
        // The client calls a service's virtual address; the node on the way turns it
        // into the pod's address and port (DNAT) and the client's into its own
        // (MASQUERADE), and its capture sees both copies.
        let segments = [stamp(1, 10, 0, 0), stamp(2, 20, 0, 0)];
        let later = |by: Nanos| {
            segments.map(|s| SegmentStamp {
                time: s.time + by,
                ..s
            })
        };
        let captures = [
            host(
                "client",
                &["10.0.0.1"],
                vec![route("10.0.0.1", "10.96.0.1", (5000, 80), &segments)],
            ),
            host(
                "node",
                &["10.1.0.1"],
                vec![
                    route("10.0.0.1", "10.96.0.1", (5000, 80), &later(1)),
                    route("10.1.0.1", "10.1.0.5", (40000, 8080), &later(2)),
                ],
            ),
            host(
                "pod",
                &["10.1.0.5"],
                vec![route("10.1.0.1", "10.1.0.5", (40000, 8080), &later(3))],
            ),
        ];
        let pairing = pair_samples(&captures);
        assert_eq!(pairing.stats.matched, 2);
        assert_eq!(pairing.stats.one_ended, 0);
        let pair = &pairing.samples[0];
        assert_eq!(
            (pair.a, pair.b),
            (0, 2),
            "the node stands between: left out"
        );
        assert_eq!(pair.forward[0].received - pair.forward[0].sent, 3);
        let link = Link {
            sender: 0,
            sent: (
                "10.0.0.1:5000".parse().unwrap(),
                "10.96.0.1:80".parse().unwrap(),
            ),
            receiver: 2,
            received: (
                "10.1.0.1:40000".parse().unwrap(),
                "10.1.0.5:8080".parse().unwrap(),
            ),
        };
        assert_eq!(
            pairing.links.into_iter().collect::<Vec<_>>(),
            vec![(link, 2)]
        );
    }

    #[test]
    fn pieces_of_a_segment_cut_at_one_end_only_are_counted_as_such() {
        // The sender's capture holds one 3,000-byte segment (TSO); the receiver's, the
        // same bytes as three: the first shares its key, the others lie inside it.
        let sent = [stamp(1, 10, 100, 3000)];
        let received = [
            stamp(1, 20, 100, 1448),
            stamp(2, 21, 1548, 1448),
            stamp(3, 22, 2996, 104),
            // Not inside: a byte past its end.
            stamp(4, 23, 2996, 105),
        ];
        let captures = [
            host(
                "a",
                &["10.0.0.1"],
                vec![route("10.0.0.1", "10.0.0.2", (1, 2), &sent)],
            ),
            host(
                "b",
                &["10.0.0.2"],
                vec![route("10.0.0.1", "10.0.0.2", (1, 2), &received)],
            ),
        ];
        let stats = pair_samples(&captures).stats;
        assert_eq!((stats.matched, stats.pieces, stats.one_ended), (1, 2, 1));
    }
}
