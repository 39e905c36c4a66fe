//! Which node adds the most latency to a pattern: each call's own time (its latency
//! not covered by the calls it makes, overlaps counted once) per instance, and the
//! position with the most of it on average. Shared by the HTML report and the dot
//! graphs; the latencies are [`crate::nesting`]'s.

use crate::nesting::Pattern;
use crate::trace::Nanos;

/// Own time of each position in each instance, in the pattern's order.
pub fn own_times(pattern: &Pattern) -> Vec<Vec<Nanos>> {
    let positions = &pattern.positions;
    positions
        .iter()
        .map(|p| {
            let mut intervals = Vec::with_capacity(p.children.len());
            p.latencies
                .iter()
                .enumerate()
                .map(|(k, &latency)| {
                    intervals.clear();
                    intervals.extend(p.children.iter().map(|&c| {
                        let c = &positions[c as usize];
                        let from = c.call_delays[k].clamp(0, latency);
                        (from, (from + c.latencies[k]).clamp(from, latency))
                    }));
                    (latency - covered(&mut intervals)).max(0)
                })
                .collect()
        })
        .collect()
}

/// The mean of each position's own times.
pub fn mean_own_times(own: &[Vec<Nanos>]) -> Vec<f64> {
    own.iter()
        .map(|o| o.iter().map(|&v| v as f64).sum::<f64>() / o.len().max(1) as f64)
        .collect()
}

/// The position with the most own time on average: where the time goes in total.
/// Ties go to the earlier position (nearer the root).
pub fn hottest(mean_own: &[f64]) -> usize {
    (0..mean_own.len())
        .max_by(|&a, &b| mean_own[a].total_cmp(&mean_own[b]).then(b.cmp(&a)))
        .unwrap_or(0)
}

/// Length of the union of intervals.
fn covered(intervals: &mut [(Nanos, Nanos)]) -> Nanos {
    intervals.sort_unstable();
    let mut total = 0;
    let mut reach = Nanos::MIN;
    for &(from, to) in intervals.iter() {
        let from = from.max(reach);
        if to > from {
            total += to - from;
            reach = to;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_time_counts_overlaps_once() {
        assert_eq!(covered(&mut [(0, 10), (5, 15), (20, 25)]), 20);
        assert_eq!(covered(&mut [(3, 3)]), 0);
        assert_eq!(covered(&mut []), 0);
    }

    #[test]
    fn own_time_is_latency_not_covered_by_children() {
        // Figure 2: A->B (10 s) calls C at +2 s for 2 s and D at +6 s for 2 s.
        let trace = crate::trace::text::trace_from_str(
            "1 CALL A B 1\n3 CALL B C 2\n5 RET C B 2\n7 CALL B D 3\n9 RET D B 3\n11 RET B A 1\n",
        );
        let n = crate::nesting::nest(&trace, &Default::default()).unwrap();
        let own = mean_own_times(&own_times(&n.patterns[0]));
        assert_eq!(own, vec![6e9, 2e9, 2e9]);
        assert_eq!(hottest(&own), 0);
    }
}
