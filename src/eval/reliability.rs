//! Whether the inference's stated confidence means what it says: calls with a known
//! parent (from the truth or from ids) bucketed by the confidence of their choice, and
//! inferred requests by how sure their whole tree is (a pattern's `sure` is the mean of
//! it), each bucket's share right beside its mean confidence. Owns the buckets; which
//! calls and requests are known is the caller's.

use crate::nesting::patterns::whole_share;
use crate::nesting::Nesting;
use serde::Serialize;

/// Known calls whose stated confidence fell in `[low, high)`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfidenceBucket {
    /// Lowest confidence in the bucket.
    pub low: f64,
    /// Bound above (the last bucket includes 1).
    pub high: f64,
    /// Known calls in it.
    pub calls: u64,
    /// Of those, calls given their known parent.
    pub right: u64,
    /// Their mean stated confidence.
    pub mean_confidence: f64,
}

/// Edges of the buckets: where a calibrated confidence's promises differ.
pub const EDGES: [f64; 7] = [0.0, 0.5, 0.7, 0.9, 0.99, 0.999, 1.0];

/// Buckets the calls `known` names (index into the pairs, whether its parent is
/// right) by `nesting`'s confidence; empty buckets left out.
pub fn buckets(
    nesting: &Nesting,
    known: impl Iterator<Item = (usize, bool)>,
) -> Vec<ConfidenceBucket> {
    bucketed(known.map(|(i, right)| (f64::from(nesting.confidence[i]), right)))
}

/// How sure `nesting` is of the tree under each root: the product of its calls'
/// confidences and of how sure each is that no call outside its children is its own
/// (what a pattern's `sure` averages). Indexed by call; meaningful at the roots.
pub fn tree_sureness(nesting: &Nesting) -> Vec<f64> {
    let root = crate::nesting::roots(&nesting.parent);
    let mut sure = vec![1.0f64; nesting.parent.len()];
    let (confidence, complete) = (&nesting.confidence, &nesting.complete);
    for (i, &r) in root.iter().enumerate() {
        let chosen = nesting.parent[i] != crate::nesting::NO_PARENT;
        sure[r as usize] *= whole_share(chosen, confidence, complete, i);
    }
    sure
}

/// Buckets (stated confidence, whether right) pairs by the confidence; empty buckets
/// left out.
pub fn bucketed(known: impl Iterator<Item = (f64, bool)>) -> Vec<ConfidenceBucket> {
    let mut counts = vec![(0u64, 0u64, 0.0f64); EDGES.len() - 1];
    for (sure, right) in known {
        let bucket = EDGES[1..EDGES.len() - 1].partition_point(|&edge| edge <= sure);
        let count = &mut counts[bucket];
        count.0 += 1;
        count.1 += u64::from(right);
        count.2 += sure;
    }
    counts
        .into_iter()
        .enumerate()
        .filter(|(_, (calls, _, _))| *calls > 0)
        .map(|(k, (calls, right, sure))| ConfidenceBucket {
            low: EDGES[k],
            high: EDGES[k + 1],
            calls,
            right,
            mean_confidence: sure / calls as f64,
        })
        .collect()
}
