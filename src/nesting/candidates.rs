//! Which calls could have caused which (paper §5.1.1.1, last paragraph, and Figure 4
//! lines 11–12): the candidate parents of each call B→C are the calls X→B that were
//! open around it at B. Owns that containment test and the skew window; scoring the
//! candidates is the scoreboard's job.

use super::call_pairs::CallPair;
use crate::trace::Nanos;

/// The candidate parents of each child of one node, in compressed rows: the candidates
/// of child `k` are `parents[offsets[k]..offsets[k + 1]]`, as indexes into the node's
/// incoming calls, earliest-starting first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidates {
    /// Row starts, one per child plus the end.
    pub offsets: Vec<u32>,
    /// Concatenated rows of incoming-call indexes.
    pub parents: Vec<u32>,
}

impl Candidates {
    /// The candidate parents of child `k`.
    pub fn of(&self, k: usize) -> &[u32] {
        &self.parents[self.offsets[k] as usize..self.offsets[k + 1] as usize]
    }
}

/// Finds, for each call leaving node B, the calls into B that enclose it on B's clock:
/// a parent X→B is a candidate for child B→C when
/// `parent.callee_recv ≤ child.caller_send + w` and `child.caller_return ≤ parent.callee_return + w`,
/// with `w` the skew window. With `same_truth_only`, only calls of the same ground-truth
/// path instance qualify: that yields the true paths, for evaluation (paper §7.5.1).
/// Comparisons are inclusive, because coarse timestamps put a
/// child in the same tick as its parent. A call is never its own candidate.
///
/// `incoming` (calls into B) must be sorted by `callee_recv`, `outgoing` (calls from B)
/// by `caller_send`. One sweep keeps the calls into B that can still enclose a later
/// child, so the work is the number of children times the per-node parallelism.
pub fn find_candidates(
    pairs: &[CallPair],
    incoming: &[u32],
    outgoing: &[u32],
    skew_window: Nanos,
    same_truth_only: bool,
) -> Candidates {
    let mut offsets = Vec::with_capacity(outgoing.len() + 1);
    let mut parents = Vec::with_capacity(outgoing.len());
    offsets.push(0);
    let mut active: Vec<u32> = Vec::new();
    let mut next = 0;
    for &child_index in outgoing {
        let child = &pairs[child_index as usize];
        while next < incoming.len()
            && pairs[incoming[next] as usize].callee_recv <= child.caller_send + skew_window
        {
            active.push(next as u32);
            next += 1;
        }
        // Children come in start order, so a parent that ends before this child starts
        // cannot enclose any later child either.
        active.retain(|&local| {
            pairs[incoming[local as usize] as usize].callee_return + skew_window
                >= child.caller_send
        });
        for &local in &active {
            let global = incoming[local as usize];
            let parent = &pairs[global as usize];
            if global != child_index
                && parent.callee_return + skew_window >= child.caller_return
                && (!same_truth_only || parent.truth == child.truth)
            {
                parents.push(local);
            }
        }
        offsets.push(parents.len() as u32);
    }
    Candidates { offsets, parents }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{CallId, NodeId, Truth};

    fn call(caller: u32, callee: u32, start: Nanos, end: Nanos) -> CallPair {
        CallPair {
            caller: NodeId(caller),
            callee: NodeId(callee),
            call_id: CallId::NONE,
            caller_send: start,
            callee_recv: start,
            callee_return: end,
            caller_return: end,
            truth: Truth::NONE,
        }
    }

    #[test]
    fn enclosing_calls_are_candidates_inclusively() {
        // B = 1. Incoming: [0,10], [5,20], [12,30]. Outgoing: [5,10], [13,20], [25,31].
        let pairs = vec![
            call(0, 1, 0, 10),
            call(0, 1, 5, 20),
            call(0, 1, 12, 30),
            call(1, 2, 5, 10),
            call(1, 2, 13, 20),
            call(1, 2, 25, 31),
        ];
        let c = find_candidates(&pairs, &[0, 1, 2], &[3, 4, 5], 0, false);
        assert_eq!(c.of(0), &[0, 1]);
        assert_eq!(c.of(1), &[1, 2]);
        assert_eq!(c.of(2), &[] as &[u32]);
        let loose = find_candidates(&pairs, &[0, 1, 2], &[3, 4, 5], 1, false);
        assert_eq!(loose.of(2), &[2]);
    }

    #[test]
    fn a_self_call_is_not_its_own_parent() {
        let pairs = vec![call(0, 0, 0, 10)];
        let c = find_candidates(&pairs, &[0], &[0], 0, false);
        assert_eq!(c.of(0), &[] as &[u32]);
    }
}
