//! What changed between two nestings (`blackbox diff`): patterns lined up by signature,
//! the ones that appeared or vanished, the ones whose share of requests changed, and
//! for each pattern in both, which node's own time changed, by how much, and whether
//! beyond noise. Every test is a two-sided Mann–Whitney U test (rustats), its level
//! divided among all the tests made (Bonferroni), so that two runs of one system rarely
//! show any change. Owns the comparison; nesting is [`crate::nesting`]'s, own time
//! [`crate::report::own_time`]'s, wording the report's.

use crate::nesting::{Nesting, Pattern, Summary};
use crate::report::own_time::own_times;
use crate::trace::{Nanos, Trace};
use rustats::hypothesis_testings::MannWhitneyU;
use serde::Serialize;
use std::collections::BTreeMap;

/// A pattern's requests on each side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PatternShare {
    /// Its signature.
    pub signature: String,
    /// Requests before and after.
    pub before: u64,
    /// See `before`.
    pub after: u64,
    /// Its share of the requests before and after.
    pub share_before: f64,
    /// See `share_before`.
    pub share_after: f64,
    /// The test's p-value for a change of share (none where the pattern is on one side
    /// only).
    pub p_value: Option<f64>,
    /// Whether the change is beyond noise.
    pub significant: bool,
}

/// One node of a pattern in both nestings: how its own time changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeChange {
    /// The pattern's signature.
    pub signature: String,
    /// The node, and who called it there.
    pub node: String,
    /// See `node`.
    pub caller: String,
    /// Median own time before and after, in seconds.
    pub median_before_s: f64,
    /// See `median_before_s`.
    pub median_after_s: f64,
    /// Mean own time before and after, in seconds.
    pub mean_before_s: f64,
    /// See `mean_before_s`.
    pub mean_after_s: f64,
    /// The call out of the node whose delay after the node was called changed most,
    /// where that change is at least half the own time's, in the same direction: the
    /// time was added before that call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_call_to: Option<String>,
    /// The test's p-value.
    pub p_value: f64,
    /// Whether the change is beyond noise.
    pub significant: bool,
}

/// What changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Requests (path instances) before and after.
    pub requests_before: u64,
    /// See `requests_before`.
    pub requests_after: u64,
    /// The level of all the tests together; each test's is this over `tests`.
    pub alpha: f64,
    /// Tests made.
    pub tests: u64,
    /// Patterns only after, most requests first.
    pub appeared: Vec<PatternShare>,
    /// Patterns only before, most requests first.
    pub vanished: Vec<PatternShare>,
    /// Patterns on both sides, most requests first.
    pub common: Vec<PatternShare>,
    /// Per node of each common pattern, most changed (by mean) first among the
    /// significant ones, then the others.
    pub nodes: Vec<NodeChange>,
}

/// Patterns with fewer requests than this on either side are lined up but not tested:
/// a handful of requests says nothing of a distribution.
pub const MIN_TESTED: usize = 5;

/// The patterns of the requests whose root call arrived in `[from, to)` (on the root
/// callee's clock): one run's time range, for comparing two ranges of one trace.
pub fn patterns_during(
    trace: &Trace,
    nesting: &Nesting,
    (from, to): (Nanos, Nanos),
    by_operation: bool,
) -> Vec<Pattern> {
    let pairs = &nesting.pairs;
    crate::nesting::patterns::find_patterns_of(
        trace,
        pairs,
        crate::nesting::patterns::Tree::of(nesting),
        by_operation,
        &|root| (from..to).contains(&pairs[root as usize].callee_recv),
    )
}

/// Compares the patterns `after` with those `before` (each with the trace that names
/// their nodes); `alpha` is the level of all tests together.
pub fn compare(
    (before_trace, before): (&Trace, &[Pattern]),
    (_, after): (&Trace, &[Pattern]),
    alpha: f64,
) -> Comparison {
    let index = |patterns: &[Pattern]| -> BTreeMap<String, usize> {
        patterns
            .iter()
            .enumerate()
            .map(|(i, p)| (p.signature.clone(), i))
            .collect()
    };
    let (by_before, by_after) = (index(before), index(after));
    let requests = |patterns: &[Pattern]| patterns.iter().map(Pattern::count).sum::<u64>();
    let (requests_before, requests_after) = (requests(before), requests(after));
    let share = |count: u64, of: u64| count as f64 / of.max(1) as f64;

    let mut appeared = Vec::new();
    let mut vanished = Vec::new();
    // (share entry, own-time samples per position before and after)
    let mut common = Vec::new();
    for (signature, &i) in &by_before {
        let p = &before[i];
        match by_after.get(signature) {
            None => vanished.push(PatternShare {
                signature: signature.clone(),
                before: p.count(),
                after: 0,
                share_before: share(p.count(), requests_before),
                share_after: 0.0,
                p_value: None,
                significant: false,
            }),
            Some(&j) => common.push((p, &after[j])),
        }
    }
    for (signature, &j) in &by_after {
        if !by_before.contains_key(signature) {
            let p = &after[j];
            appeared.push(PatternShare {
                signature: signature.clone(),
                before: 0,
                after: p.count(),
                share_before: 0.0,
                share_after: share(p.count(), requests_after),
                p_value: None,
                significant: false,
            });
        }
    }

    // Every test first, then their verdicts at the divided level.
    let mut shares = Vec::new();
    let mut nodes = Vec::new();
    for &(b, a) in &common {
        let tested = b.instances.len() >= MIN_TESTED && a.instances.len() >= MIN_TESTED;
        // The share's test: this pattern or another, request by request.
        let p_share = tested.then(|| {
            let side = |count: u64, of: u64| (0..of).map(move |k| u8::from(k < count));
            MannWhitneyU::new(
                side(b.count(), requests_before),
                side(a.count(), requests_after),
            )
            .p_value()
        });
        shares.push((
            PatternShare {
                signature: b.signature.clone(),
                before: b.count(),
                after: a.count(),
                share_before: share(b.count(), requests_before),
                share_after: share(a.count(), requests_after),
                p_value: p_share.flatten(),
                significant: false,
            },
            b.count() + a.count(),
        ));
        if !tested {
            continue;
        }
        let (own_before, own_after) = (own_times(b), own_times(a));
        for (position, (xs, ys)) in own_before.iter().zip(&own_after).enumerate() {
            let Some(p_value) = MannWhitneyU::new(xs.iter(), ys.iter()).p_value() else {
                continue;
            };
            let at = &b.positions[position];
            let (x, y) = (Summary::of(xs), Summary::of(ys));
            let own_change = y.mean - x.mean;
            let delay_change = |child: u32| {
                let mean = |p: &Pattern| p.positions[child as usize].call_delays.summary().mean;
                (mean(a) - mean(b), child)
            };
            let before_call_to = at
                .children
                .iter()
                .map(|&child| delay_change(child))
                .max_by(|p, q| p.0.abs().total_cmp(&q.0.abs()))
                .filter(|&(change, _)| {
                    change * own_change > 0.0 && change.abs() * 2.0 >= own_change.abs()
                })
                .map(|(_, child)| {
                    before_trace
                        .node_name(b.positions[child as usize].node)
                        .to_owned()
                });
            nodes.push(NodeChange {
                signature: b.signature.clone(),
                node: before_trace.node_name(at.node).to_owned(),
                caller: before_trace.node_name(at.caller).to_owned(),
                median_before_s: x.p50 as f64 / 1e9,
                median_after_s: y.p50 as f64 / 1e9,
                mean_before_s: x.mean / 1e9,
                mean_after_s: y.mean / 1e9,
                before_call_to,
                p_value: if p_value.is_nan() { 1.0 } else { p_value },
                significant: false,
            });
        }
    }
    let tests = (shares.iter().filter(|(s, _)| s.p_value.is_some()).count() + nodes.len()) as u64;
    let level = alpha / tests.max(1) as f64;
    for (entry, _) in &mut shares {
        entry.significant = entry.p_value.is_some_and(|p| p < level);
    }
    for node in &mut nodes {
        node.significant = node.p_value < level;
    }
    shares.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then_with(|| a.0.signature.cmp(&b.0.signature))
    });
    nodes.sort_by(|a, b| {
        b.significant
            .cmp(&a.significant)
            .then_with(|| {
                let change = |n: &NodeChange| (n.mean_after_s - n.mean_before_s).abs();
                change(b).total_cmp(&change(a))
            })
            .then_with(|| a.signature.cmp(&b.signature))
            .then_with(|| a.node.cmp(&b.node))
    });
    let by_requests = |list: &mut Vec<PatternShare>| {
        list.sort_by(|a, b| {
            (b.before + b.after)
                .cmp(&(a.before + a.after))
                .then_with(|| a.signature.cmp(&b.signature))
        });
    };
    by_requests(&mut appeared);
    by_requests(&mut vanished);
    Comparison {
        requests_before,
        requests_after,
        alpha,
        tests,
        appeared,
        vanished,
        common: shares.into_iter().map(|(s, _)| s).collect(),
        nodes,
    }
}
