//! Path-level scores against the truth column: false positives and negatives counted
//! by path patterns, path instances and messages; top-N ground-truth patterns missing
//! from the inferred top N; and the latency error of correctly inferred patterns.
//!
//! The ground truth is the nesting algorithm run with every call's candidate parents
//! restricted to its own path instance, as in the paper: with path ids, nesting is
//! unambiguous.

use crate::nesting::Pattern;
use crate::nesting::NO_PARENT;
use crate::nesting::{nest, NestError, NestOptions, Nesting};
use crate::trace::Trace;
use hashbrown::HashMap;
use serde::Serialize;

/// Tolerances for near-ties in the top-N comparison (paper Figure 17: 2% and 6%).
pub const TOLERANCES: [f64; 3] = [0.0, 0.02, 0.06];

/// Truth and inferred counts with their disagreements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// In the ground truth.
    pub truth: u64,
    /// Inferred.
    pub inferred: u64,
    /// Inferred but not true.
    pub false_positives: u64,
    /// True but not inferred.
    pub false_negatives: u64,
}

/// Top-N ground-truth patterns missing from the inferred top N.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopN {
    /// N.
    pub n: usize,
    /// Missing, one count per entry of [`TOLERANCES`]: a missing pattern is forgiven
    /// when its inferred count is within that fraction of the N-th inferred count.
    pub missing: Vec<usize>,
}

/// The latency error of one correctly inferred pattern.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencyError {
    /// The pattern.
    pub signature: String,
    /// Its count in the truth.
    pub truth_count: u64,
    /// Its inferred count.
    pub inferred_count: u64,
    /// Per node in pre-order: (node, true mean latency s, inferred mean latency s, relative error).
    pub nodes: Vec<(String, f64, f64, f64)>,
    /// The largest relative error of a node's mean latency.
    pub worst: f64,
}

/// Everything [`evaluate`] measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathScores {
    /// Distinct path patterns.
    pub patterns: Counts,
    /// Path instances, matched by pattern: min(true, inferred) of each pattern agree.
    pub instances: Counts,
    /// Messages (calls and returns): a message is right when the instance it was put in
    /// is exactly its true instance, every parent included.
    pub messages: Counts,
    /// True instances inferred exactly.
    pub instances_exact: u64,
    /// Calls whose inferred parent is their true parent.
    pub calls_right: u64,
    /// All call pairs.
    pub calls: u64,
    /// Calls with a true parent (all but the roots).
    pub children: u64,
    /// Of those, calls given it: what `eval --against-ids` estimates.
    pub children_right: u64,
    /// The calls with a true parent, by the stated confidence of their choice.
    pub reliability: Vec<super::reliability::ConfidenceBucket>,
    /// The inferred requests, by how sure their whole tree is; right: exactly a true
    /// request.
    pub request_reliability: Vec<super::reliability::ConfidenceBucket>,
    /// Top-N for N = 1..=K.
    pub top_n: Vec<TopN>,
    /// For each pattern in both truth and inference, the latency errors, by truth rank.
    pub latency: Vec<LatencyError>,
}

/// Why a trace cannot be scored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// Some messages have no truth tag.
    #[error("{missing} of {messages} messages have no truth column; path-level scoring needs a path-instance id on every message (or give --truth FILE)")]
    NoTruth {
        /// Messages without a tag.
        missing: u64,
        /// All messages.
        messages: u64,
    },
    /// Nesting failed.
    #[error(transparent)]
    Nest(#[from] NestError),
}

/// Derives the ground truth of a trace whose messages all carry a truth tag.
pub fn ground_truth(trace: &Trace, options: &NestOptions) -> Result<Nesting, EvalError> {
    let missing = trace
        .messages
        .iter()
        .filter(|m| trace.truth_text(m.truth()).is_none())
        .count() as u64;
    if missing > 0 {
        return Err(EvalError::NoTruth {
            missing,
            messages: trace.messages.len() as u64,
        });
    }
    // The truth is defined once for every algorithm: the paper's choice among the
    // calls of the same path instance, so scores of the two choices are comparable.
    let truth_options = NestOptions {
        same_truth_only: true,
        algorithm: crate::nesting::Algorithm::Paper,
        ..*options
    };
    Ok(nest(trace, &truth_options)?)
}

/// Scores `inferred` against `truth`, both from the same trace (so their call pairs are
/// the same, in the same order). `max_n` bounds the top-N comparison.
pub fn evaluate(trace: &Trace, inferred: &Nesting, truth: &Nesting, max_n: usize) -> PathScores {
    assert_eq!(
        inferred.pairs, truth.pairs,
        "inference and truth come from one trace"
    );
    let patterns = count_patterns(inferred, truth);
    let instances = count_instances(inferred, truth);
    let (exact, right_calls_in_exact) = exact_instances(inferred, truth);
    let instances_exact = exact.iter().filter(|&&e| e).count() as u64;
    let sureness = super::reliability::tree_sureness(inferred);
    let calls = truth.pairs.len() as u64;
    let calls_right = (0..truth.pairs.len())
        .filter(|&i| inferred.parent[i] == truth.parent[i])
        .count() as u64;
    let children = truth.parent.iter().filter(|&&p| p != NO_PARENT).count() as u64;
    let children_right = (0..truth.pairs.len())
        .filter(|&i| truth.parent[i] != NO_PARENT && inferred.parent[i] == truth.parent[i])
        .count() as u64;
    let messages = Counts {
        truth: 2 * calls,
        inferred: 2 * calls,
        false_positives: 2 * (calls - right_calls_in_exact),
        false_negatives: 2 * (calls - right_calls_in_exact),
    };
    PathScores {
        patterns,
        instances,
        messages,
        instances_exact,
        calls_right,
        calls,
        children,
        children_right,
        reliability: super::reliability::buckets(
            inferred,
            (0..truth.pairs.len())
                .filter(|&i| truth.parent[i] != NO_PARENT)
                .map(|i| (i, inferred.parent[i] == truth.parent[i])),
        ),
        request_reliability: super::reliability::bucketed(
            (0..truth.pairs.len())
                .filter(|&r| inferred.parent[r] == NO_PARENT)
                .map(|r| (sureness[r], exact[r])),
        ),
        top_n: top_n(inferred, truth, max_n),
        latency: latency_errors(trace, inferred, truth),
    }
}

/// Patterns and instances of `inferred` against `truth` by signature counts alone, for
/// two traces of one run that differ in what was captured (a lossy or skewed copy
/// against the clean ground truth, paper §7.5.5): (patterns, instances).
pub fn compare_patterns(inferred: &Nesting, truth: &Nesting) -> (Counts, Counts) {
    (
        count_patterns(inferred, truth),
        count_instances(inferred, truth),
    )
}

fn by_signature(nesting: &Nesting) -> HashMap<&str, &Pattern> {
    nesting
        .patterns
        .iter()
        .map(|p| (p.signature.as_str(), p))
        .collect()
}

fn count_patterns(inferred: &Nesting, truth: &Nesting) -> Counts {
    let (i, t) = (by_signature(inferred), by_signature(truth));
    Counts {
        truth: t.len() as u64,
        inferred: i.len() as u64,
        false_positives: i.keys().filter(|s| !t.contains_key(*s)).count() as u64,
        false_negatives: t.keys().filter(|s| !i.contains_key(*s)).count() as u64,
    }
}

fn count_instances(inferred: &Nesting, truth: &Nesting) -> Counts {
    let (i, t) = (by_signature(inferred), by_signature(truth));
    let matched: u64 = t
        .iter()
        .map(|(s, p)| p.count().min(i.get(s).map_or(0, |q| q.count())))
        .sum();
    let total = |n: &Nesting| n.patterns.iter().map(Pattern::count).sum::<u64>();
    let (ti, ii) = (total(truth), total(inferred));
    Counts {
        truth: ti,
        inferred: ii,
        false_positives: ii - matched,
        false_negatives: ti - matched,
    }
}

/// (true instances inferred exactly, calls inside them). An inferred instance is exact
/// when every one of its calls has its true parent and it holds every call of its true
/// instance.
/// Per call, whether it is an inferred root whose instance is exactly a true one; and
/// how many calls those instances hold.
fn exact_instances(inferred: &Nesting, truth: &Nesting) -> (Vec<bool>, u64) {
    let root_of = crate::nesting::roots;
    let (inferred_root, true_root) = (root_of(&inferred.parent), root_of(&truth.parent));
    let n = truth.parent.len();
    let mut true_size = vec![0u32; n];
    let mut inferred_size = vec![0u32; n];
    let mut broken = vec![false; n]; // per inferred root
    for i in 0..n {
        true_size[true_root[i] as usize] += 1;
        inferred_size[inferred_root[i] as usize] += 1;
        if inferred.parent[i] != truth.parent[i] {
            broken[inferred_root[i] as usize] = true;
        }
    }
    let mut exact = vec![false; n];
    let mut calls = 0;
    for r in 0..n {
        let is_root = inferred.parent[r] == NO_PARENT;
        // Every call has its true parent, so the root is a true root too, and the sizes
        // agreeing means nothing of the true instance went elsewhere.
        if is_root && !broken[r] && inferred_size[r] == true_size[r] {
            exact[r] = true;
            calls += u64::from(inferred_size[r]);
        }
    }
    (exact, calls)
}

fn ranked(nesting: &Nesting) -> Vec<&Pattern> {
    let mut patterns: Vec<&Pattern> = nesting.patterns.iter().collect();
    patterns.sort_by(|a, b| {
        b.count()
            .cmp(&a.count())
            .then_with(|| a.signature.cmp(&b.signature))
    });
    patterns
}

/// Top-N ground-truth patterns missing from the inferred top N, for N = 1..=max_n (at
/// most the number of true patterns). Uses pattern counts alone, so `inferred` may come
/// from a lossy or skewed copy of the trace.
pub fn top_n(inferred: &Nesting, truth: &Nesting, max_n: usize) -> Vec<TopN> {
    let (t, i) = (ranked(truth), ranked(inferred));
    let inferred_count: HashMap<&str, u64> = i
        .iter()
        .map(|p| (p.signature.as_str(), p.count()))
        .collect();
    (1..=max_n.min(t.len()))
        .map(|n| {
            let top: Vec<&str> = i.iter().take(n).map(|p| p.signature.as_str()).collect();
            let nth = i.get(n - 1).map_or(0, |p| p.count()) as f64;
            let missing = TOLERANCES
                .iter()
                .map(|&tol| {
                    t.iter()
                        .take(n)
                        .filter(|p| !top.contains(&p.signature.as_str()))
                        .filter(|p| {
                            let count = inferred_count
                                .get(p.signature.as_str())
                                .copied()
                                .unwrap_or(0) as f64;
                            count < nth * (1.0 - tol) || count == 0.0
                        })
                        .count()
                })
                .collect();
            TopN { n, missing }
        })
        .collect()
}

fn latency_errors(trace: &Trace, inferred: &Nesting, truth: &Nesting) -> Vec<LatencyError> {
    let i = by_signature(inferred);
    ranked(truth)
        .into_iter()
        .filter_map(|t| {
            let p = i.get(t.signature.as_str())?;
            let nodes: Vec<(String, f64, f64, f64)> = t
                .positions
                .iter()
                .zip(&p.positions)
                .map(|(tp, ip)| {
                    let (tm, im) = (tp.latencies.summary().mean, ip.latencies.summary().mean);
                    let error = if tm == 0.0 {
                        if im == 0.0 {
                            0.0
                        } else {
                            f64::INFINITY
                        }
                    } else {
                        (im - tm).abs() / tm
                    };
                    (
                        trace.node_name(tp.node).to_owned(),
                        tm / 1e9,
                        im / 1e9,
                        error,
                    )
                })
                .collect();
            let worst = nodes.iter().map(|n| n.3).fold(0.0, f64::max);
            Some(LatencyError {
                signature: t.signature.clone(),
                truth_count: t.count(),
                inferred_count: p.count(),
                nodes,
                worst,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::text::trace_from_str as trace;

    /// Two overlapping A→B(C) requests whose C calls the algorithm swaps.
    const SWAPPED: &str =
        "0 CALL A B p1 r1\n1 CALL A B p2 r2\n2 CALL B C c2 r2\n3 CALL B C c1 r1\n\
                           4 RET C B c2 r2\n5 RET C B c1 r1\n6 RET B A p1 r1\n7 RET B A p2 r2\n";

    #[test]
    fn a_perfect_inference_has_no_errors() {
        let t = trace("0 CALL A B p1 r1\n1 CALL B C c1 r1\n2 RET C B c1 r1\n3 RET B A p1 r1\n5 CALL A B p2 r2\n6 RET B A p2 r2\n");
        let options = NestOptions::default();
        let truth = ground_truth(&t, &options).unwrap();
        let inferred = nest(&t, &options).unwrap();
        let s = evaluate(&t, &inferred, &truth, 5);
        let two_right = Counts {
            truth: 2,
            inferred: 2,
            false_positives: 0,
            false_negatives: 0,
        };
        assert_eq!((s.patterns, s.instances), (two_right, two_right));
        assert_eq!(
            (s.messages.false_positives, s.instances_exact, s.calls_right),
            (0, 2, 3)
        );
        assert!(s.top_n.iter().all(|t| t.missing.iter().all(|&m| m == 0)));
        assert!(s.latency.iter().all(|l| l.worst == 0.0));
    }

    #[test]
    fn swapped_children_are_counted_wrong() {
        let t = trace(SWAPPED);
        let options = NestOptions::default();
        let truth = ground_truth(&t, &options).unwrap();
        let inferred = nest(&t, &options).unwrap();
        // The scoreboard picks medium delays: c2 (t=2) under p1 (t=0), c1 (t=3) under p2.
        let s = evaluate(&t, &inferred, &truth, 1);
        assert_eq!(s.calls_right, 2);
        assert_eq!(s.instances_exact, 0);
        assert_eq!(s.messages.false_negatives, 8);
        // Both patterns are still A->B(C): pattern and instance counts agree.
        assert_eq!(s.patterns.false_positives, 0);
        assert_eq!(s.instances.false_negatives, 0);
        // Latency of B is still right per pattern, C's is the mean of the two.
        assert_eq!(s.latency.len(), 1);
    }

    #[test]
    fn missing_truth_is_refused() {
        let t = trace("0 CALL A B p1\n1 RET B A p1\n");
        assert_eq!(
            ground_truth(&t, &NestOptions::default()).unwrap_err(),
            EvalError::NoTruth {
                missing: 2,
                messages: 2
            }
        );
    }
}
