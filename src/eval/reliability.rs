//! Whether the inference's stated confidence means what it says: calls with a known
//! parent (from the truth or from ids) bucketed by the confidence of their choice, each
//! bucket's share right beside its mean confidence. Owns the buckets; which calls are
//! known is the caller's.

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
    let mut counts = vec![(0u64, 0u64, 0.0f64); EDGES.len() - 1];
    for (i, right) in known {
        let sure = f64::from(nesting.confidence[i]);
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
