//! Where a pattern's time goes: each call's own time (its latency not covered by the
//! calls it makes, each until the last byte of its answer, nor by waiting for the rest
//! of its request; overlaps counted once) per instance, and what adds the most on
//! average: a node's own time, or an edge's time in transit (a message's first byte to
//! its last, where TCP may have held it back). Shared by the table, the HTML report,
//! the dot graphs and the JSON; the latencies are [`crate::nesting`]'s.

use crate::nesting::patterns::{own_time, Position};
use crate::nesting::Pattern;
use crate::trace::{Held, Nanos};

/// Own time of each position in each instance, in the pattern's order. A pattern of a
/// nesting done in segments keeps no instance's values: its own times are empty (its
/// means are [`Pattern::mean_own_times`]).
pub fn own_times(pattern: &Pattern) -> Vec<Vec<Nanos>> {
    let positions = &pattern.positions;
    let values = |samples: &crate::nesting::patterns::Samples| -> Vec<Nanos> {
        samples.values().map(<[Nanos]>::to_vec).unwrap_or_default()
    };
    let latencies: Vec<Vec<Nanos>> = positions.iter().map(|p| values(&p.latencies)).collect();
    let delays: Vec<Vec<Nanos>> = positions.iter().map(|p| values(&p.call_delays)).collect();
    // Transits are known per instance, or not at all (a text trace without them).
    let requests: Vec<Vec<Nanos>> = positions
        .iter()
        .map(|p| values(&p.request_transit))
        .collect();
    let replies: Vec<Vec<Nanos>> = positions.iter().map(|p| values(&p.reply_transit)).collect();
    let at = |values: &[Nanos], k: usize| values.get(k).copied().unwrap_or(0);
    let mut intervals = Vec::new();
    positions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            latencies[i]
                .iter()
                .enumerate()
                .map(|(k, &latency)| {
                    let calls = p.children.iter().map(|&c| {
                        let c = c as usize;
                        (delays[c][k], latencies[c][k] + at(&replies[c], k))
                    });
                    let calls = std::iter::once((0, at(&requests[i], k))).chain(calls);
                    own_time(latency, calls, &mut intervals)
                })
                .collect()
        })
        .collect()
}

/// The position with the most own time on average: the node where the time goes.
/// Ties go to the earlier position (nearer the root).
pub fn hottest(mean_own: &[f64]) -> usize {
    (0..mean_own.len())
        .max_by(|&a, &b| mean_own[a].total_cmp(&mean_own[b]).then(b.cmp(&a)))
        .unwrap_or(0)
}

/// What adds the most to a pattern's latency on average.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MostAdded {
    /// The position: its node, or the edge from its caller to it.
    pub position: usize,
    /// Whether it is the edge's time in transit (else the node's own time).
    pub transit: bool,
    /// Its mean, in nanoseconds.
    pub mean: f64,
    /// Why TCP held the edge's messages back most often, and in how many instances
    /// (an edge's only, where what TCP held is at least half its time in transit).
    pub held: Option<(Held, u64)>,
}

/// What adds the most: the node with the most own time, or the edge with the most
/// time in transit within the pattern's latency, whichever is more; a tie goes to the
/// node, then nearer the root.
pub fn most_added(pattern: &Pattern) -> MostAdded {
    let own = pattern.mean_own_times();
    let node = hottest(&own);
    let mut most = MostAdded {
        position: node,
        transit: false,
        mean: own[node],
        held: None,
    };
    for (i, position) in pattern.positions.iter().enumerate() {
        let transit = position.mean_transit_within(i == 0);
        if transit > most.mean {
            // Told as TCP's hold where holds are most of the time in transit.
            let count = position.latencies.len().max(1) as f64;
            let mostly_held = position.held_sum / count >= position.mean_transit() / 2.0;
            most = MostAdded {
                position: i,
                transit: true,
                mean: transit,
                held: position.held_most().filter(|_| mostly_held),
            };
        }
    }
    most
}

/// "app → web" for the edge into `position` as its messages go: from its node to its
/// caller where the answer held the time, else from the caller.
pub fn edge_words(position: &Position, caller: &str, node: &str) -> String {
    match position.reply_transit.sum() >= position.request_transit.sum() {
        true => format!("{node} → {caller}"),
        false => format!("{caller} → {node}"),
    }
}

/// What adds the most, in words: "web" (its own time), "app → web held by TCP (Nagle +
/// delayed ACK)" (the edge's time in transit, where TCP held its messages back in some
/// instances), "app → web in transit" (where it never did). `name` names a position's
/// node.
pub fn most_added_words(
    pattern: &Pattern,
    most: &MostAdded,
    name: &dyn Fn(usize) -> String,
) -> String {
    let position = &pattern.positions[most.position];
    if !most.transit {
        return name(most.position);
    }
    let caller = match most.position {
        0 => pattern
            .signature
            .split("->")
            .next()
            .unwrap_or("")
            .to_owned(),
        _ => name(parent_of(pattern, most.position)),
    };
    let edge = edge_words(position, &caller, &name(most.position));
    match most.held {
        Some((why, _)) => format!("{edge} held by TCP ({})", why.short()),
        None => format!("{edge} in transit"),
    }
}

/// The position whose call made the call at `position` (0 for the root).
pub fn parent_of(pattern: &Pattern, position: usize) -> usize {
    pattern
        .positions
        .iter()
        .position(|p| p.children.contains(&(position as u32)))
        .unwrap_or(0)
}

/// One thing to fix on a pattern's critical path: a node's own time or an edge's time in
/// transit, what it holds of the critical path and what making it shorter would save.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fix {
    /// The position: its node, or the edge from its caller to it.
    pub position: usize,
    /// Whether it is the edge's transit (else the node's own time).
    pub transit: bool,
    /// Its mean time on the critical path.
    pub on_path: f64,
    /// The mean latency saved were it shorter by each of
    /// [`crate::nesting::critical::WHAT_IF_SHARES`].
    pub savings: [f64; 2],
}

/// What fixing each node's own time and each edge's transit on the critical path would
/// save, most first (by the larger share; ties in pattern order, the node before its
/// edge); what is never on the path is left out.
pub fn fixes(pattern: &Pattern) -> Vec<Fix> {
    let mut fixes: Vec<Fix> = pattern
        .positions
        .iter()
        .enumerate()
        .flat_map(|(i, position)| {
            let (own, transit) = position.mean_critical();
            [(false, own), (true, transit)]
                .into_iter()
                .filter(|&(_, on_path)| on_path > 0.0)
                .map(move |(is_transit, on_path)| Fix {
                    position: i,
                    transit: is_transit,
                    on_path,
                    savings: position.mean_savings(is_transit),
                })
        })
        .collect();
    fixes.sort_by(|a, b| {
        b.savings[1]
            .total_cmp(&a.savings[1])
            .then(a.position.cmp(&b.position))
            .then(a.transit.cmp(&b.transit))
    });
    fixes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_time_is_latency_not_covered_by_children() {
        // Figure 2: A->B (10 s) calls C at +2 s for 2 s and D at +6 s for 2 s.
        let trace = crate::trace::text::trace_from_str(
            "1 CALL A B 1\n3 CALL B C 2\n5 RET C B 2\n7 CALL B D 3\n9 RET D B 3\n11 RET B A 1\n",
        );
        let n = crate::nesting::nest(&trace, &Default::default()).unwrap();
        let own = n.patterns[0].mean_own_times();
        assert_eq!(own, vec![6e9, 2e9, 2e9]);
        assert_eq!(hottest(&own), 0);
        assert!(!most_added(&n.patterns[0]).transit);
    }

    #[test]
    fn an_answer_held_by_tcp_is_the_edges_time_not_its_callers() {
        // web (10 ms) calls app at +1 ms; app answers at once (1 ms), but the rest of its
        // answer comes 7 ms after its first byte, held by Nagle's algorithm.
        let trace = crate::trace::text::trace_from_str(
            "0 CALL client web 1\n\
             0.001 CALL web app 2\n\
             0.002 RET app web 2 spread=0.007 held=nagle:0.0069\n\
             0.010 RET web client 1\n",
        );
        let n = crate::nesting::nest(&trace, &Default::default()).unwrap();
        let pattern = &n.patterns[0];
        let own: Vec<Nanos> = own_times(pattern).iter().map(|o| o[0]).collect();
        assert_eq!(own, vec![2_000_000, 1_000_000]);
        assert_eq!(pattern.mean_own_times(), vec![2e6, 1e6]);
        let most = most_added(pattern);
        assert_eq!((most.position, most.transit, most.mean), (1, true, 7e6));
        assert_eq!(most.held, Some((Held::Nagle, 1)));
        let name = |i: usize| ["web", "app"][i].to_owned();
        assert_eq!(
            most_added_words(pattern, &most, &name),
            "app → web held by TCP (Nagle + delayed ACK)"
        );
    }
}
