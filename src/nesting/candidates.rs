//! Which calls could have caused which (paper §5.1.1.1, last paragraph, and Figure 4
//! lines 11–12): the candidate parents of each call B→C are the calls X→B that were
//! open around it at B. Owns that containment test, the skew window, the asynchronous
//! window's wider test, and the repair of late returns (a call none encloses, of a kind
//! nearly always enclosed); scoring the candidates is the scoreboard's job.

use super::call_pairs::CallPair;
use crate::trace::{Nanos, NodeId};
use hashbrown::HashMap;

/// The candidate parents of each child of one node, in compressed rows: the candidates
/// of child `k` are `parents[offsets[k]..offsets[k + 1]]`, as indexes into the node's
/// incoming calls, earliest-starting first.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Candidates {
    /// Row starts, one per child plus the end.
    pub offsets: Vec<u32>,
    /// Concatenated rows of incoming-call indexes.
    pub parents: Vec<u32>,
    /// Children no call enclosed, given the calls open when they left
    /// ([`Reach::rescue_unenclosed`]).
    pub rescued: u32,
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
    /// Gives a child that no call encloses the calls open when it left, as a late
    /// timestamp's repair (see [`RARELY_UNENCLOSED`]); in the truth, those of its own
    /// instance.
    pub rescue_unenclosed: bool,
    /// Evaluation only: only calls of the child's ground-truth path instance qualify.
    pub same_truth_only: bool,
}

/// At most this share of a node's calls to one callee may lack an enclosing call for
/// [`Reach::rescue_unenclosed`] to give them the calls open when they left. Where
/// enclosure is the rule, an exception is a timestamp taken a little late (a span
/// closed after its reply was sent: hotel's one `search → rate` call returns 24 µs
/// after its parent answered, media's two calls into `compose-review-service` 93 and
/// 205 µs after theirs), and the parent is among the calls still open when it left.
/// Where exceptions are common, they are the service's way: a write-back cache's
/// writes after answering (60% of its calls to the database in the write-back study),
/// which the calls open at the time did not cause.
pub const RARELY_UNENCLOSED: f64 = 0.01;

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
/// encloses the child: that yields the true paths, for evaluation (paper §7.5.1). With
/// `rescue_unenclosed`, a child left with no candidate takes the calls open when it
/// left, where that is rare for its callee ([`RARELY_UNENCLOSED`]). Comparisons are inclusive,
/// because coarse timestamps put a child in the same tick as its parent. A call is
/// never its own candidate.
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
        rescue_unenclosed,
        same_truth_only,
    } = reach;
    // Children no call encloses, with the calls open when each left: (child, first
    // index into `open`).
    let mut unenclosed: Vec<(usize, usize)> = Vec::new();
    let mut open: Vec<u32> = Vec::new();
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
        // The call into B behind `local`, unless it is the child itself or, in the
        // truth, of another instance.
        let qualifying = |local: u32| {
            let global = incoming[local as usize];
            let parent = &pairs[global as usize];
            (global != child_index && !(same_truth_only && parent.truth != child.truth))
                .then_some(parent)
        };
        for &local in &active {
            let Some(parent) = qualifying(local) else {
                continue;
            };
            if !outlives(child, parent, skew_window) {
                parents.push(local);
            } else if async_window > 0 && child.caller_send - parent.callee_return <= async_window {
                parents.push(local);
                answered = true;
            }
        }
        // A node nothing calls (the client) has only roots: nothing to rescue.
        if rescue_unenclosed && parents.len() == row_start && !incoming.is_empty() {
            unenclosed.push((offsets.len() - 1, open.len()));
            open.extend(active.iter().copied().filter(|&local| {
                qualifying(local).is_some_and(|parent| parent.callee_return >= child.caller_send)
            }));
        }
        if same_truth_only && answered && parents.len() > row_start {
            // In the truth, a call of the same instance still open is the parent.
            let enclosing: Vec<u32> = parents[row_start..]
                .iter()
                .copied()
                .filter(|&local| {
                    !outlives(
                        child,
                        &pairs[incoming[local as usize] as usize],
                        skew_window,
                    )
                })
                .collect();
            if !enclosing.is_empty() {
                parents.truncate(row_start);
                parents.extend(enclosing);
            }
        }
        offsets.push(parents.len() as u32);
    }
    let candidates = Candidates {
        offsets,
        parents,
        rescued: 0,
    };
    if unenclosed.is_empty() {
        return candidates;
    }
    rescue(
        pairs,
        outgoing,
        candidates,
        &unenclosed,
        &open,
        same_truth_only,
    )
}

/// Fills the empty rows of `unenclosed` children with the calls open when each left
/// (`open[from..]` up to the next child's start): in the truth always, in inference
/// where the node's calls to the child's callee almost always have an enclosing call
/// ([`RARELY_UNENCLOSED`]).
fn rescue(
    pairs: &[CallPair],
    outgoing: &[u32],
    candidates: Candidates,
    unenclosed: &[(usize, usize)],
    open: &[u32],
    same_truth_only: bool,
) -> Candidates {
    let callee = |k: usize| pairs[outgoing[k] as usize].callee;
    let mut calls: HashMap<NodeId, (u32, u32)> = HashMap::new();
    for k in 0..outgoing.len() {
        calls.entry(callee(k)).or_default().0 += 1;
    }
    for &(k, _) in unenclosed {
        calls.entry(callee(k)).or_default().1 += 1;
    }
    let mut rows = vec![None; outgoing.len()];
    let mut rescued = 0;
    for (i, &(k, from)) in unenclosed.iter().enumerate() {
        let (all, lacking) = calls[&callee(k)];
        let to = unenclosed.get(i + 1).map_or(open.len(), |&(_, to)| to);
        if to > from
            && (same_truth_only || f64::from(lacking) <= RARELY_UNENCLOSED * f64::from(all))
        {
            rows[k] = Some(&open[from..to]);
            rescued += 1;
        }
    }
    if rescued == 0 {
        return candidates;
    }
    let mut offsets = Vec::with_capacity(candidates.offsets.len());
    let mut parents = Vec::with_capacity(candidates.parents.len() + open.len());
    offsets.push(0);
    for (k, row) in rows.into_iter().enumerate() {
        parents.extend_from_slice(row.unwrap_or(candidates.of(k)));
        offsets.push(parents.len() as u32);
    }
    Candidates {
        offsets,
        parents,
        rescued,
    }
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

    /// Node 1 receives calls [10i, 10i+8] and makes one call to 2 in each, at 10i+2;
    /// the last `late` of those return 1 after their parents answered. Returns the
    /// candidates of the last child.
    fn late_returns(calls: u64, late: u64, reach: Reach) -> Vec<u32> {
        let mut pairs = Vec::new();
        for i in 0..calls as i64 {
            pairs.push(call(0, 1, 10 * i, 10 * i + 8));
        }
        // Another caller's call into 1, open when the last child left and answered
        // with its parent.
        pairs.push(call(3, 1, 10 * calls as i64 - 15, 10 * calls as i64 - 2));
        for i in 0..calls as i64 {
            let end = if i >= (calls - late) as i64 {
                10 * i + 9
            } else {
                10 * i + 7
            };
            pairs.push(call(1, 2, 10 * i + 2, end));
        }
        let mut incoming: Vec<u32> = (0..=calls as u32).collect();
        incoming.sort_by_key(|&i| pairs[i as usize].callee_recv);
        let outgoing: Vec<u32> = (calls as u32 + 1..2 * calls as u32 + 1).collect();
        let found = find_candidates(&pairs, &incoming, &outgoing, reach);
        found
            .of(calls as usize - 1)
            .iter()
            .map(|&l| incoming[l as usize])
            .collect()
    }

    #[test]
    fn a_rarely_unenclosed_call_takes_the_calls_open_when_it_left() {
        let rescue = Reach {
            rescue_unenclosed: true,
            ..Reach::default()
        };
        // 1 late return in 100: the other caller's call and its own parent, both open
        // when it left.
        assert_eq!(late_returns(100, 1, rescue), vec![100, 99]);
        assert_eq!(late_returns(100, 1, Reach::default()), Vec::<u32>::new());
        // 2 in 100 is the service's way, not a late timestamp: no candidate.
        assert_eq!(late_returns(100, 2, rescue), Vec::<u32>::new());
    }

    #[test]
    fn the_truth_gives_every_unenclosed_call_its_open_instance_call() {
        let truth = Reach {
            rescue_unenclosed: true,
            same_truth_only: true,
            ..Reach::default()
        };
        let mut pairs = vec![call(0, 1, 0, 10), call(0, 1, 5, 20), call(1, 2, 8, 30)];
        pairs[0].truth = Truth(7);
        pairs[2].truth = Truth(7);
        // Alone of its kind, so every call of it is unenclosed: the truth rescues anyway.
        let found = find_candidates(&pairs, &[0, 1], &[2], truth);
        assert_eq!(found.of(0), &[0]);
    }
}
