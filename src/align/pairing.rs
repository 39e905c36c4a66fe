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
    /// Every link through a translation (its two ends name it differently), and every
    /// link named alike at both ends whose view either end also saw translated, with
    /// the segments matched on it. The others, a flat network's, tell no translation
    /// and are left out.
    pub links: BTreeMap<Link, u64>,
    /// Per capture, the directions of connections it saw only pass (a node's capture
    /// of its pods' traffic, before and after it translated them) whose segments the
    /// two ends' own captures matched: what that capture holds of them, they hold too.
    pub passed: BTreeSet<(usize, (SocketAddr, SocketAddr))>,
    /// Per capture, its stamped segments whose other end another capture owns: those
    /// that should have been seen there.
    pub exchanged: Vec<u64>,
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
    /// Whether the capture stands between the segment's ends: it neither sent nor
    /// received it (it passed through, or stayed within the host), or it received it
    /// and sent it on.
    passes: bool,
    /// Whether its peer (the receiver of a send, the sender of a receive) is an address
    /// another capture owns: such a copy should have been seen there.
    expected: bool,
}

/// Pairs the segments of every two captures. First each route (source and destination
/// address) that both ends' captures name alike, by key and ports, as the two ends of
/// one connection name a segment where no translation stands between them; then what
/// is left of every capture by key alone, across translations: a copy is a send in the
/// capture that owns its source address and a receive in the one that owns its
/// destination, whatever addresses the other end saw. (Keys alone can meet by chance
/// where initial sequence numbers are not random, as in generated captures: such a
/// match must have taken as long as the same two hosts' other segments.)
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
    // Each route's part: the copies on it, less their key.
    let role = |c: usize, route: &RouteStamps| -> Copy {
        let (from, to) = (owner_of(&route.from), owner_of(&route.to));
        let sends = from == Some(c);
        // Within one host, or only passing through it (a node's capture of its pods):
        // neither a send nor a receive between two hosts, but a sign that this capture
        // stands between the two ends.
        let passes = sends == (to == Some(c));
        let peer = if sends { to } else { from };
        Copy {
            key: 0,
            capture: c as u32,
            route: 0,
            index: 0,
            sends,
            passes,
            expected: !passes && peer.is_some_and(|p| p != c),
        }
    };
    let exchanged = captures
        .iter()
        .enumerate()
        .map(|(c, capture)| {
            let expected = capture
                .stamps
                .iter()
                .filter(|route| role(c, route).expected);
            expected.map(|route| route.stamps.len() as u64).sum()
        })
        .collect();
    let between = standing_between(captures, &role);
    let mut found = Found::default();
    let mut left: Vec<Copy> = Vec::new();
    // The receivers' routes matched with a sender's.
    let mut paired: HashSet<(usize, usize)> = HashSet::new();
    let mut routes: Vec<[(Copy, usize); 2]> = Vec::new();
    for (sender, capture) in captures.iter().enumerate() {
        for (r, route) in capture.stamps.iter().enumerate() {
            let part = role(sender, route);
            if !part.sends || part.passes {
                continue;
            }
            let other = owner_of(&route.to)
                .filter(|&receiver| receiver != sender)
                .and_then(|receiver| {
                    let routes = &captures[receiver].stamps;
                    routes
                        .binary_search_by_key(&(route.from, route.to), |o| (o.from, o.to))
                        .ok()
                        .map(|at| (receiver, at))
                });
            if let Some((receiver, at)) = other {
                paired.insert((receiver, at));
                let received = role(receiver, &captures[receiver].stamps[at]);
                routes.push([(part, r), (received, at)]);
            }
        }
    }
    // Each route on its own, on every core; added up in order.
    let matched: Vec<RouteMatch> = {
        use rayon::prelude::*;
        routes
            .into_par_iter()
            .map(|ends| match_route(captures, ends, &between))
            .collect()
    };
    for route in matched {
        found.add_route(route, &mut left);
    }
    // Every other route's copies, and those standing between, wait for the second round.
    for (c, capture) in captures.iter().enumerate() {
        for (r, route) in capture.stamps.iter().enumerate() {
            let part = role(c, route);
            let matched_above = (part.sends && !part.passes && found.routes.contains(&(c, r)))
                || paired.contains(&(c, r));
            if matched_above && between.is_empty() {
                continue;
            }
            for index in 0..route.stamps.len() {
                let standing = between.contains(&(c as u32, r as u32, index as u32));
                if matched_above && !standing {
                    continue;
                }
                left.push(Copy {
                    route: r as u32,
                    index: index as u32,
                    passes: part.passes || standing,
                    ..part
                });
            }
        }
    }
    for copy in &mut left {
        copy.key = captures[copy.capture as usize].stamps[copy.route as usize].stamps
            [copy.index as usize]
            .key;
    }
    let delays = Delays::of(&found.pairs);
    found.match_keys(captures, &mut left, &delays);
    drop(left);
    let Found {
        mut stats,
        pairs,
        mut links,
        alike,
        unmatched,
        passed,
        ..
    } = found;
    add_alike_where_translated(&mut links, alike);
    let pieces = pieces(captures, &unmatched, &role);
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
        // Each route's samples came in order of sending: runs a stable sort merges.
        pair.forward.sort_by_key(|s| (s.sent, s.received));
        pair.backward.sort_by_key(|s| (s.sent, s.received));
    }
    Pairing {
        samples: pairs,
        stats,
        links: links.into_iter().collect(),
        passed: passed.into_iter().collect(),
        exchanged,
    }
}

/// Adds to `links` those of `alike` (links named alike at both ends) whose view either
/// end also saw through a translation: there they vote against it ([`crate::nat`]).
fn add_alike_where_translated(links: &mut HashMap<Link, u64>, alike: Vec<(Link, u64)>) {
    let mut translated: HashSet<(usize, (SocketAddr, SocketAddr))> = HashSet::new();
    for link in links.keys().filter(|link| link.sent != link.received) {
        for (capture, (from, to)) in [(link.sender, link.sent), (link.receiver, link.received)] {
            translated.insert((capture, (from, to)));
            translated.insert((capture, (to, from)));
        }
    }
    if translated.is_empty() {
        return;
    }
    for (link, segments) in alike {
        if translated.contains(&(link.sender, link.sent))
            || translated.contains(&(link.receiver, link.received))
        {
            *links.entry(link).or_default() += segments;
        }
    }
}

/// A segment's key with its ports, for pairing where no translation stands between.
fn with_ports(stamp: &SegmentStamp) -> u64 {
    let ports = u64::from(stamp.ports.0) << 16 | u64::from(stamp.ports.1);
    stamp.key ^ ports.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

/// How soon a host that received a segment must send it on for it to count as
/// forwarded (a node translating its pods' addresses does within microseconds).
const FORWARDED_WITHIN: Nanos = 50_000_000;

/// Copies of one key in one capture beyond which forwarding is told without times.
const MANY_ALIKE: usize = 64;

/// Per pair of captures and direction, the delays (receive time less send time) of the
/// segments matched with their ports: the range a match by key alone must fall in.
struct Delays(BTreeMap<(usize, usize), (Nanos, Nanos)>);

impl Delays {
    fn of(pairs: &BTreeMap<(usize, usize), PairSamples>) -> Self {
        let mut delays = BTreeMap::new();
        for pair in pairs.values() {
            for (from, to, samples) in [
                (pair.a, pair.b, &pair.forward),
                (pair.b, pair.a, &pair.backward),
            ] {
                let range = samples.iter().map(|s| s.received - s.sent).fold(
                    None,
                    |range: Option<(Nanos, Nanos)>, d| match range {
                        None => Some((d, d)),
                        Some((low, high)) => Some((low.min(d), high.max(d))),
                    },
                );
                if let Some(range) = range {
                    delays.insert((from, to), range);
                }
            }
        }
        Delays(delays)
    }

    /// Whether a segment from host `from` to host `to` that took `delay` took as long
    /// as their other segments, give or take as much again (or a millisecond); any
    /// delay where they have none.
    fn plausible(&self, [from, to]: [usize; 2], delay: Nanos) -> bool {
        self.0.get(&(from, to)).is_none_or(|&(low, high)| {
            let margin = (high - low).max(1_000_000);
            (low - margin..=high + margin).contains(&delay)
        })
    }
}

/// The copies, in captures that saw some segment pass, that stand between two ends:
/// those on routes the capture neither sends nor receives on, and those it received
/// and sent on again soon after (by key alone, since it may have translated them).
fn standing_between(
    captures: &[HostCapture],
    role: &dyn Fn(usize, &RouteStamps) -> Copy,
) -> HashSet<(u32, u32, u32)> {
    let mut between = HashSet::new();
    for (c, capture) in captures.iter().enumerate() {
        let parts: Vec<Copy> = capture.stamps.iter().map(|r| role(c, r)).collect();
        if !parts.iter().any(|p| p.passes) {
            continue;
        }
        let mut copies: Vec<Copy> = Vec::new();
        for (r, (route, part)) in capture.stamps.iter().zip(&parts).enumerate() {
            for (index, stamp) in route.stamps.iter().enumerate() {
                copies.push(Copy {
                    key: stamp.key,
                    route: r as u32,
                    index: index as u32,
                    ..*part
                });
            }
        }
        copies.sort_unstable_by_key(|c| (c.key, c.route, c.index));
        let time_of = |c: &Copy| capture.stamps[c.route as usize].stamps[c.index as usize].time;
        for one in copies.chunk_by(|a, b| a.key == b.key) {
            // Arrived, and left again soon after: forwarded. (Two segments that only
            // share a key, by the chance of numbers that are not random, are rarely so
            // close.)
            let leaves = |c: &&Copy| c.sends || c.passes;
            let forwarded = match one.len() > MANY_ALIKE {
                // Many segments alike (duplicate acknowledgements): by their routes
                // alone, so as not to compare each with each.
                true => {
                    let arrived: BTreeSet<u32> =
                        one.iter().filter(|c| !c.sends).map(|c| c.route).collect();
                    let left: BTreeSet<u32> = one.iter().filter(leaves).map(|c| c.route).collect();
                    left.iter().any(|l| arrived.iter().any(|a| a != l))
                }
                false => one.iter().filter(|c| !c.sends).any(|arrived| {
                    one.iter()
                        .filter(leaves)
                        .filter(|l| l.route != arrived.route)
                        .any(|l| (0..=FORWARDED_WITHIN).contains(&(time_of(l) - time_of(arrived))))
                }),
            };
            for copy in one {
                if forwarded || copy.passes {
                    between.insert((c as u32, copy.route, copy.index));
                }
            }
        }
    }
    between
}

/// What matching found so far.
#[derive(Default)]
struct Found {
    stats: PairingStats,
    pairs: BTreeMap<(usize, usize), PairSamples>,
    links: HashMap<Link, u64>,
    /// The links matched route by route: named alike at both ends.
    alike: Vec<(Link, u64)>,
    /// Copies neither matched nor repeated: pieces of a segment cut differently?
    unmatched: Vec<Copy>,
    passed: HashSet<(usize, (SocketAddr, SocketAddr))>,
    /// The senders' routes matched route by route.
    routes: HashSet<(usize, usize)>,
}

impl Found {
    /// Adds what matching one route found; its unmatched copies go to `left`.
    fn add_route(&mut self, route: RouteMatch, left: &mut Vec<Copy>) {
        self.routes.insert(route.sender_route);
        self.stats.repeated += route.repeated;
        self.stats.segments += route.repeated;
        let [sender, receiver] = route.hosts;
        self.add_samples(route.hosts, route.samples);
        self.alike
            .extend(route.views.into_iter().map(|(ends, segments)| {
                let link = Link {
                    sender,
                    sent: ends,
                    receiver,
                    received: ends,
                };
                (link, segments)
            }));
        left.extend(route.left);
    }

    /// Matches `copies` by their keys alone: where a key's copies, but those standing
    /// between, come down to one send and one receive in two captures that took as
    /// long as those hosts' other segments, a sample. The rest, but copies repeated
    /// within one capture, are unmatched.
    fn match_keys(&mut self, captures: &[HostCapture], copies: &mut Vec<Copy>, delays: &Delays) {
        sort_by_hash(copies, |c| (c.key, c.capture, c.route, c.index), |c| c.key);
        let stamp_of = |c: &Copy| -> (&RouteStamps, &SegmentStamp) {
            let route = &captures[c.capture as usize].stamps[c.route as usize];
            (route, &route.stamps[c.index as usize])
        };
        let mut kept: Vec<Copy> = Vec::new();
        let mut between: Vec<Copy> = Vec::new();
        for group in copies.chunk_by(|a, b| a.key == b.key) {
            kept.clear();
            between.clear();
            for one in group.chunk_by(|a, b| a.capture == b.capture) {
                if one.iter().any(|c| c.passes) {
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
                    let expected = kept[i..j].iter().filter(|c| c.expected).count() as u64;
                    self.stats.repeated += expected;
                    self.stats.segments += expected;
                    ambiguous = true;
                } else {
                    let slot = &mut ends[usize::from(kept[i].sends)];
                    ambiguous |= slot.is_some();
                    *slot = Some(kept[i]);
                }
                i = j;
            }
            let (sent, received) = match ends {
                [Some(received), Some(sent)] if !ambiguous => (sent, received),
                _ => {
                    self.unmatched.extend(ends.into_iter().flatten());
                    continue;
                }
            };
            let ((sent_route, sent_stamp), (received_route, received_stamp)) =
                (stamp_of(&sent), stamp_of(&received));
            let hosts = [sent.capture, received.capture].map(|c| c as usize);
            if !delays.plausible(hosts, received_stamp.time - sent_stamp.time) {
                self.unmatched.extend([sent, received]);
                continue;
            }
            self.add_sample(hosts, sent_stamp.time, received_stamp.time);
            *self
                .links
                .entry(Link {
                    sender: hosts[0],
                    sent: sent_stamp.ends(sent_route),
                    receiver: hosts[1],
                    received: received_stamp.ends(received_route),
                })
                .or_default() += 1;
            for copy in &between {
                let (route, stamp) = stamp_of(copy);
                self.passed
                    .insert((copy.capture as usize, stamp.ends(route)));
            }
        }
    }

    /// One segment seen at both ends.
    fn add_sample(&mut self, hosts: [usize; 2], sent: Nanos, received: Nanos) {
        self.add_samples(hosts, vec![Sample { sent, received }]);
    }

    /// Segments seen at both ends, sent by `sender` and received by `receiver`.
    fn add_samples(&mut self, [sender, receiver]: [usize; 2], samples: Vec<Sample>) {
        let (a, b) = (sender.min(receiver), sender.max(receiver));
        let pair = self.pairs.entry((a, b)).or_insert_with(|| PairSamples {
            a,
            b,
            ..PairSamples::default()
        });
        let to = match sender == a {
            true => &mut pair.forward,
            false => &mut pair.backward,
        };
        let matched = samples.len() as u64;
        match to.is_empty() {
            true => *to = samples,
            false => to.extend(samples),
        }
        self.stats.matched += matched;
        self.stats.segments += 2 * matched;
    }
}

/// What matching one sender's route with the receiver's found.
struct RouteMatch {
    /// The sender's capture and route.
    sender_route: (usize, usize),
    /// The sender's and the receiver's captures.
    hosts: [usize; 2],
    /// The segments seen at both ends, in the sender's order.
    samples: Vec<Sample>,
    /// Each connection's direction, as both ends named it, with its segments matched.
    views: Vec<((SocketAddr, SocketAddr), u64)>,
    /// Copies neither matched nor repeated, for the second round.
    left: Vec<Copy>,
    /// Copies whose key and ports repeat within their capture.
    repeated: u64,
}

/// Matches a sender's route with the same route in the receiver's capture, by key and
/// ports. The copies that stand between are left out.
fn match_route(
    captures: &[HostCapture],
    [(sent, sent_at), (received, received_at)]: [(Copy, usize); 2],
    between: &HashSet<(u32, u32, u32)>,
) -> RouteMatch {
    let mut repeated = 0;
    let sides = [(sent, sent_at), (received, received_at)].map(|(part, at)| {
        let route = &captures[part.capture as usize].stamps[at];
        let standing = |i: usize| {
            !between.is_empty() && between.contains(&(part.capture, at as u32, i as u32))
        };
        let mut keyed: Vec<(u64, u32)> = route
            .stamps
            .iter()
            .enumerate()
            .filter(|(i, _)| !standing(*i))
            .map(|(i, stamp)| (with_ports(stamp), i as u32))
            .collect();
        sort_by_hash(&mut keyed, |k| *k, |k| k.0);
        let mut unique = Vec::with_capacity(keyed.len());
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            if run.len() == 1 {
                unique.push(run[0]);
            } else {
                // Which copy the other end saw cannot be told.
                repeated += run.len() as u64;
            }
        }
        (route, unique)
    });
    let [(sent_route, sent_keys), (received_route, received_keys)] = sides;
    let copy = |part: Copy, at: usize, index: u32| Copy {
        route: at as u32,
        index,
        ..part
    };
    let mut left = Vec::new();
    // Per sent segment, the received one it matched (`u32::MAX`: none), so that the
    // samples come out in the sender's order, nearly sorted by time already.
    let mut received_as = vec![u32::MAX; sent_route.stamps.len()];
    let (mut i, mut j) = (0, 0);
    while i < sent_keys.len() || j < received_keys.len() {
        let order = match (sent_keys.get(i), received_keys.get(j)) {
            (Some(a), Some(b)) => a.0.cmp(&b.0),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                left.push(copy(sent, sent_at, sent_keys[i].1));
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                left.push(copy(received, received_at, received_keys[j].1));
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                received_as[sent_keys[i].1 as usize] = received_keys[j].1;
                i += 1;
                j += 1;
            }
        }
    }
    // Each connection's view once, with its segments.
    let mut views: HashMap<(u16, u16), u64> = HashMap::new();
    let mut samples = Vec::new();
    for (sent_stamp, &at) in sent_route.stamps.iter().zip(&received_as) {
        if at != u32::MAX {
            samples.push(Sample {
                sent: sent_stamp.time,
                received: received_route.stamps[at as usize].time,
            });
            *views.entry(sent_stamp.ports).or_default() += 1;
        }
    }
    let mut views: Vec<_> = views
        .into_iter()
        .map(|(ports, segments)| {
            let from = SocketAddr::new(sent_route.from, ports.0);
            ((from, SocketAddr::new(sent_route.to, ports.1)), segments)
        })
        .collect();
    views.sort_unstable();
    RouteMatch {
        sender_route: (sent.capture as usize, sent_at),
        hosts: [sent.capture, received.capture].map(|c| c as usize),
        samples,
        views,
        left,
        repeated,
    }
}

/// Sorts `items` by `order`, whose first part is `hash`, a well-spread 64-bit digest:
/// one pass scatters them by the digest's top bits, then each small bucket is sorted
/// alone, in cache. The order is `sort_unstable_by_key`'s, a few times sooner on the
/// millions of segments a long capture holds.
fn sort_by_hash<T: std::marker::Copy, K: Ord>(
    items: &mut Vec<T>,
    order: impl Fn(&T) -> K + std::marker::Copy,
    hash: impl Fn(&T) -> u64,
) {
    // About this many items per bucket.
    const PER_BUCKET: usize = 64;
    if items.len() < 4 * PER_BUCKET {
        items.sort_unstable_by_key(order);
        return;
    }
    let bits = (items.len() / PER_BUCKET).ilog2().clamp(1, 20);
    let bucket = |item: &T| (hash(item) >> (64 - bits)) as usize;
    let mut starts = vec![0usize; (1 << bits) + 1];
    for item in items.iter() {
        starts[bucket(item) + 1] += 1;
    }
    for b in 1..starts.len() {
        starts[b] += starts[b - 1];
    }
    let mut next = starts.clone();
    let mut sorted = vec![items[0]; items.len()];
    for item in items.iter() {
        let at = &mut next[bucket(item)];
        sorted[*at] = *item;
        *at += 1;
    }
    for range in starts.windows(2) {
        sorted[range[0]..range[1]].sort_unstable_by_key(order);
    }
    *items = sorted;
}

/// A segment's bytes at one end: its first byte's number, its length, its capture.
type Range = (u32, u32, u32);

/// Which `unmatched` copies lie inside a longer segment of the other end: a copy of
/// another capture and the other direction (a receive for a send) with the same
/// acknowledgement number whose sequence range holds this one's bytes. The longer one
/// is matched whole (its first piece shares its key) or unmatched itself.
fn pieces(
    captures: &[HostCapture],
    unmatched: &[Copy],
    role: &dyn Fn(usize, &RouteStamps) -> Copy,
) -> Vec<bool> {
    let stamp = |c: &Copy| -> &SegmentStamp {
        &captures[c.capture as usize].stamps[c.route as usize].stamps[c.index as usize]
    };
    // The acknowledgement numbers and directions a longer segment is looked for with:
    // few, so the captures are read once for them alone.
    let wanted: HashSet<(u32, bool)> = unmatched
        .iter()
        .filter(|c| stamp(c).len > 0)
        .map(|c| (stamp(c).ack, !c.sends))
        .collect();
    if wanted.is_empty() {
        return vec![false; unmatched.len()];
    }
    // Those segments by acknowledgement number and direction, in order of their first
    // byte.
    let mut longer: HashMap<(u32, bool), Vec<Range>> = HashMap::new();
    for (c, capture) in captures.iter().enumerate() {
        for route in &capture.stamps {
            let sends = role(c, route).sends;
            for s in route.stamps.iter().filter(|s| s.len > 0) {
                if let Some(ranges) = wanted.get(&(s.ack, sends)).map(|&k| longer.entry(k)) {
                    ranges.or_default().push((s.seq, s.len, c as u32));
                }
            }
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
    fn sorting_by_hash_orders_as_a_plain_sort() {
        // Keys spread like digests, with repeats, and every length around the cut-off.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for length in [0, 1, 255, 256, 257, 5_000, 70_000] {
            let items: Vec<(u64, u32)> = (0..length)
                .map(|i| match i % 5 {
                    0 => (42, i),
                    _ => (next(), (next() % 3) as u32),
                })
                .collect();
            let mut plain = items.clone();
            plain.sort_unstable();
            let mut hashed = items;
            sort_by_hash(&mut hashed, |item| *item, |item| item.0);
            assert_eq!(hashed, plain, "{length} items");
        }
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
