//! Scores of the convolution algorithm against the truth column: each path instance's
//! messages, in time order, spell its true path (`a->b->c`); a found path that no
//! instance followed is a false positive, a true path followed at least `min_count`
//! times but not found is a false negative.

use super::paths::Counts;
use crate::convolution::Convolution;
use crate::trace::Trace;
use hashbrown::{HashMap, HashSet};

/// How many instances followed each true path.
pub fn true_paths(trace: &Trace) -> HashMap<String, u64> {
    let mut by_instance: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, m) in trace.messages.iter().enumerate() {
        by_instance.entry(m.truth().0).or_default().push(i);
    }
    let mut counts = HashMap::new();
    for (_, messages) in by_instance {
        // Messages are in time order already; a path is its first sender, then receivers.
        let first = &trace.messages[messages[0]];
        let mut signature = trace.node_name(first.sender()).to_owned();
        for &i in &messages {
            signature.push_str("->");
            signature.push_str(trace.node_name(trace.messages[i].receiver()));
        }
        *counts.entry(signature).or_insert(0) += 1;
    }
    counts
}

/// Distinct paths: true ones followed at least `min_count` times against those found.
pub fn score(trace: &Trace, found: &Convolution, min_count: u64) -> Counts {
    let truth: HashSet<String> = true_paths(trace)
        .into_iter()
        .filter(|&(_, n)| n >= min_count)
        .map(|(s, _)| s)
        .collect();
    let inferred: HashSet<String> = found.paths.iter().map(|p| p.signature(trace)).collect();
    Counts {
        truth: truth.len() as u64,
        inferred: inferred.len() as u64,
        false_positives: inferred.difference(&truth).count() as u64,
        false_negatives: truth.difference(&inferred).count() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convolution::{convolve, ConvolveOptions};
    use crate::trace::{text, TraceBuilder};
    use std::path::Path;

    #[test]
    fn a_found_chain_scores_no_errors_and_a_missing_one_is_a_false_negative() {
        let mut s = String::new();
        for i in 0..300u64 {
            let t = i * 97_000_000 + (i * i * 7_919 % 40) * 1_000_000;
            s.push_str(&format!(
                "{} MSG a b - r{i}\n{} MSG b c - r{i}\n",
                t as f64 / 1e9,
                (t + 30_000_000) as f64 / 1e9
            ));
        }
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), s.as_bytes(), &mut b).unwrap();
        let trace = b.finish();
        assert_eq!(true_paths(&trace).get("a->b->c"), Some(&300));
        let found = convolve(
            &trace,
            &ConvolveOptions {
                quantum: 1_000_000,
                ..ConvolveOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            score(&trace, &found, 10),
            Counts {
                truth: 1,
                inferred: 1,
                false_positives: 0,
                false_negatives: 0
            }
        );
        let none = Convolution {
            roots: found.roots.clone(),
            paths: Vec::new(),
            stats: found.stats.clone(),
        };
        assert_eq!(score(&trace, &none, 10).false_negatives, 1);
    }
}
