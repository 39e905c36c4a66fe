//! Which node adds the most latency to a pattern: each call's own time (its latency
//! not covered by the calls it makes, overlaps counted once) per instance, and the
//! position with the most of it on average. Shared by the HTML report and the dot
//! graphs; the latencies are [`crate::nesting`]'s.

use crate::nesting::patterns::own_time;
use crate::nesting::Pattern;
use crate::trace::Nanos;

/// Own time of each position in each instance, in the pattern's order. A pattern of a
/// nesting done in segments keeps no instance's values: its own times are empty (its
/// means are [`Pattern::mean_own_times`]).
pub fn own_times(pattern: &Pattern) -> Vec<Vec<Nanos>> {
    let positions = &pattern.positions;
    let latencies: Vec<&[Nanos]> = positions
        .iter()
        .map(|p| p.latencies.values().unwrap_or(&[]))
        .collect();
    let delays: Vec<&[Nanos]> = positions
        .iter()
        .map(|p| p.call_delays.values().unwrap_or(&[]))
        .collect();
    let mut intervals = Vec::new();
    positions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            latencies[i]
                .iter()
                .enumerate()
                .map(|(k, &latency)| {
                    let calls = p
                        .children
                        .iter()
                        .map(|&c| (delays[c as usize][k], latencies[c as usize][k]));
                    own_time(latency, calls, &mut intervals)
                })
                .collect()
        })
        .collect()
}

/// The position with the most own time on average: where the time goes in total.
/// Ties go to the earlier position (nearer the root).
pub fn hottest(mean_own: &[f64]) -> usize {
    (0..mean_own.len())
        .max_by(|&a, &b| mean_own[a].total_cmp(&mean_own[b]).then(b.cmp(&a)))
        .unwrap_or(0)
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
    }
}
