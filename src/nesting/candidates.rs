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

/// How far the containment test reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reach {
    /// Loosens both ends of the containment test, for clock skew.
    pub skew_window: Nanos,
    /// Also admits, as asynchronous parents, calls into B that were open when the child
    /// left, or answered at most this long before, but answered before it returned: the
    /// parent did not wait for it (0: none).
    pub async_window: Nanos,
    /// Evaluation only: only calls of the child's ground-truth path instance qualify.
    pub same_truth_only: bool,
}

/// Whether `parent` answered before `child` returned, beyond the skew window: an
/// asynchronous link, which only [`Reach::async_window`] admits.
pub fn outlives(child: &CallPair, parent: &CallPair, skew_window: Nanos) -> bool {
    child.caller_return > parent.callee_return + skew_window
}

/// Finds, for each call leaving node B, the calls into B that enclose it on B's clock:
/// a parent X→B is a candidate for child B→C when
/// `parent.callee_recv ≤ child.caller_send + w` and `child.caller_return ≤ parent.callee_return + w`,
/// with `w` the skew window. With an asynchronous window `a`, a call into B that
/// arrived before the child left and answered before it returned is a candidate too,
/// if it answered no more than `a` before the child left: a service that does not wait
/// for a call it made (fire and forget), or answers first and calls on after
/// (write-back caching, paper §5.3.1). With `same_truth_only`, only calls of the same
/// ground-truth path instance qualify, and one the child outlived only where none
/// encloses the child: that yields the true paths, for evaluation (paper §7.5.1). Comparisons are inclusive, because coarse timestamps put a
/// child in the same tick as its parent. A call is never its own candidate.
///
/// `incoming` (calls into B) must be sorted by `callee_recv`, `outgoing` (calls from B)
/// by `caller_send`. One sweep keeps the calls into B that can still enclose a later
/// child, so the work is the number of children times the per-node parallelism.
pub fn find_candidates(
    pairs: &[CallPair],
    incoming: &[u32],
    outgoing: &[u32],
    reach: Reach,
) -> Candidates {
    let Reach {
        skew_window,
        async_window,
        same_truth_only,
    } = reach;
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
        // Children come in start order, so a parent that ended before this child
        // started, by more than the windows, cannot be a candidate of a later child
        // either.
        active.retain(|&local| {
            pairs[incoming[local as usize] as usize].callee_return + skew_window.max(async_window)
                >= child.caller_send
        });
        let row_start = parents.len();
        let mut answered = false;
        for &local in &active {
            let global = incoming[local as usize];
            let parent = &pairs[global as usize];
            if global == child_index || (same_truth_only && parent.truth != child.truth) {
                continue;
            }
            if parent.callee_return + skew_window >= child.caller_return {
                parents.push(local);
            } else if async_window > 0 && child.caller_send - parent.callee_return <= async_window {
                parents.push(local);
                answered = true;
            }
        }
        if same_truth_only && answered && parents.len() > row_start {
            // In the truth, a call of the same instance still open is the parent.
            let enclosing: Vec<u32> = parents[row_start..]
                .iter()
                .copied()
                .filter(|&local| {
                    pairs[incoming[local as usize] as usize].callee_return + skew_window
                        >= child.caller_return
                })
                .collect();
            if !enclosing.is_empty() {
                parents.truncate(row_start);
                parents.extend(enclosing);
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
        let c = find_candidates(&pairs, &[0, 1, 2], &[3, 4, 5], Reach::default());
        assert_eq!(c.of(0), &[0, 1]);
        assert_eq!(c.of(1), &[1, 2]);
        assert_eq!(c.of(2), &[] as &[u32]);
        let loose = Reach {
            skew_window: 1,
            ..Reach::default()
        };
        let loose = find_candidates(&pairs, &[0, 1, 2], &[3, 4, 5], loose);
        assert_eq!(loose.of(2), &[2]);
    }

    #[test]
    fn a_self_call_is_not_its_own_parent() {
        let pairs = vec![call(0, 0, 0, 10)];
        let c = find_candidates(&pairs, &[0], &[0], Reach::default());
        assert_eq!(c.of(0), &[] as &[u32]);
    }

    #[test]
    fn calls_a_child_outlived_are_candidates_only_with_an_async_window() {
        // B = 1. Incoming: [0,10], [5,20]. Outgoing: [8,30] (left while both were open,
        // returned after both answered), [12,15] (after the first answered), [40,45]
        // (20 after the last answer), [60,61] (40 after it).
        let pairs = vec![
            call(0, 1, 0, 10),
            call(0, 1, 5, 20),
            call(1, 2, 8, 30),
            call(1, 2, 12, 15),
            call(1, 2, 40, 45),
            call(1, 2, 60, 61),
        ];
        let strict = find_candidates(&pairs, &[0, 1], &[2, 3, 4, 5], Reach::default());
        assert_eq!(strict.of(0), &[] as &[u32]);
        assert_eq!(strict.of(1), &[1]);
        let reach = Reach {
            async_window: 25,
            ..Reach::default()
        };
        let with_async = find_candidates(&pairs, &[0, 1], &[2, 3, 4, 5], reach);
        assert_eq!(with_async.of(0), &[0, 1]);
        assert_eq!(with_async.of(1), &[0, 1]);
        assert_eq!(with_async.of(2), &[1]);
        assert_eq!(with_async.of(3), &[] as &[u32]);
        assert!(outlives(&pairs[2], &pairs[1], 0) && !outlives(&pairs[3], &pairs[1], 0));
        assert!(!outlives(&pairs[2], &pairs[1], 10));
    }

    #[test]
    fn in_the_truth_an_open_call_of_the_instance_outranks_an_answered_one() {
        let mut pairs = vec![call(0, 1, 0, 10), call(0, 1, 5, 20), call(1, 2, 12, 15)];
        for pair in &mut pairs {
            pair.truth = Truth(7);
        }
        let reach = Reach {
            async_window: 25,
            same_truth_only: true,
            ..Reach::default()
        };
        let truth = find_candidates(&pairs, &[0, 1], &[2], reach);
        assert_eq!(truth.of(0), &[1]);
        pairs[1].callee_return = 11;
        let truth = find_candidates(&pairs, &[0, 1], &[2], reach);
        assert_eq!(truth.of(0), &[0, 1]);
    }
}
