//! Step 3 of the nesting algorithm (paper §5.1.1.3, FindNestedPairs): one parent per
//! call, the candidate with the best scoreboard value after the three penalties.
//! Owns the penalties, the decision order and tie-breaking, and the repair of the
//! rare cycle that skewed or coarse times allow; it does not build the scoreboard.

use super::call_pairs::CallPair;
use super::candidates::Candidates;
use super::scoreboard::Scoreboard;

/// Marks "no parent": the call is a root.
pub const NO_PARENT: u32 = u32::MAX;

/// The exponents of the three penalties; each multiplies a score by `(1 + n)^-e`, where
/// `n` counts the candidate parent's already-assigned children that overlap the child in
/// time, that call the same node, or at all.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Penalties {
    /// Overlapping-child exponent `x` (paper default 2).
    pub overlap: f64,
    /// Same-child exponent `y` (paper default 0).
    pub same_callee: f64,
    /// Generic-child exponent `z` (paper default 0).
    pub any_child: f64,
}

impl Default for Penalties {
    fn default() -> Self {
        Penalties {
            overlap: 2.0,
            same_callee: 0.0,
            any_child: 0.0,
        }
    }
}

/// How one candidate parent scored for one child: what `--explain` shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CandidateScore {
    /// The candidate, as an index into the node's incoming calls.
    pub local: u32,
    /// The scoreboard's value at the candidate's delay, before penalties.
    pub scoreboard: f64,
    /// The candidate's children so far that overlap this child in time.
    pub overlapping: u32,
    /// The candidate's children so far that call the same node as this child.
    pub same_callee: u32,
    /// The candidate's children so far.
    pub children: u32,
    /// The product of the three penalties.
    pub penalty: f64,
    /// `scoreboard × penalty`: the highest wins.
    pub score: f64,
}

/// Chooses a parent for each child of one node B.
///
/// Children are decided in the order of their call times (`outgoing` is sorted so),
/// each against the children its candidates already have. The score of candidate
/// parent A→B is `scoreboard[A, C, t(child call) − t(parent call)]` times the penalties;
/// the highest wins, ties going to the earliest-starting candidate. Returns, per child,
/// the index into `incoming` of its parent, or [`NO_PARENT`], and the confidence of
/// the choice: 1 − (second-best score / best score), 1 with a single candidate, 0 when
/// nothing scored. When `explain` names a child (its index in `outgoing`), each of its
/// candidates' scores goes into `scores`.
pub fn choose_parents(
    pairs: &[CallPair],
    incoming: &[u32],
    outgoing: &[u32],
    candidates: &Candidates,
    scoreboard: &Scoreboard,
    penalties: Penalties,
    explain: Option<(usize, &mut Vec<CandidateScore>)>,
) -> (Vec<u32>, Vec<f32>) {
    let (explain, mut scores) = match explain {
        Some((k, scores)) => (Some(k), Some(scores)),
        None => (None, None),
    };
    // Each parent's assigned children as a linked list in two flat arrays: no allocation
    // per parent, and the list stays in call-time order.
    let mut first_child = vec![NO_PARENT; incoming.len()];
    let mut last_child = vec![NO_PARENT; incoming.len()];
    let mut next_sibling = vec![NO_PARENT; outgoing.len()];
    let mut chosen = vec![NO_PARENT; outgoing.len()];
    let mut confidence = vec![1.0f32; outgoing.len()];
    let needs_children =
        penalties.overlap != 0.0 || penalties.same_callee != 0.0 || penalties.any_child != 0.0;

    for (k, &child_index) in outgoing.iter().enumerate() {
        let child = &pairs[child_index as usize];
        let mut best = NO_PARENT;
        let mut best_score = f64::NEG_INFINITY;
        let mut second_score = 0.0f64;
        for &local in candidates.of(k) {
            let parent = &pairs[incoming[local as usize] as usize];
            let value = scoreboard.score(
                parent.caller,
                child.callee,
                child.caller_send - parent.callee_recv,
            );
            let explaining = explain == Some(k);
            let (mut overlapping, mut same, mut any) = (0u32, 0u32, 0u32);
            if needs_children || explaining {
                let mut sibling = first_child[local as usize];
                while sibling != NO_PARENT {
                    let other = &pairs[outgoing[sibling as usize] as usize];
                    // Strict: a sibling that returns in the tick this child starts is
                    // sequential, not overlapping.
                    if other.caller_send < child.caller_return
                        && child.caller_send < other.caller_return
                    {
                        overlapping += 1;
                    }
                    if other.callee == child.callee {
                        same += 1;
                    }
                    any += 1;
                    sibling = next_sibling[sibling as usize];
                }
            }
            let factor = penalty(overlapping, penalties.overlap)
                * penalty(same, penalties.same_callee)
                * penalty(any, penalties.any_child);
            let score = value * factor;
            if explaining {
                if let Some(scores) = scores.as_deref_mut() {
                    scores.push(CandidateScore {
                        local,
                        scoreboard: value,
                        overlapping,
                        same_callee: same,
                        children: any,
                        penalty: factor,
                        score,
                    });
                }
            }
            if score > best_score {
                second_score = second_score.max(best_score);
                best_score = score;
                best = local;
            } else {
                second_score = second_score.max(score);
            }
        }
        if best != NO_PARENT {
            confidence[k] = if best_score > 0.0 {
                (1.0 - second_score / best_score) as f32
            } else {
                0.0
            };
            chosen[k] = best;
            let b = best as usize;
            if last_child[b] == NO_PARENT {
                first_child[b] = k as u32;
            } else {
                next_sibling[last_child[b] as usize] = k as u32;
            }
            last_child[b] = k as u32;
        }
    }
    (chosen, confidence)
}

fn penalty(count: u32, exponent: f64) -> f64 {
    if count == 0 || exponent == 0.0 {
        1.0
    } else {
        (1.0 + f64::from(count)).powf(-exponent)
    }
}

/// Cuts every cycle in the parent relation, returning how many were cut.
///
/// Each node's parents are chosen on its own, so with inclusive comparisons on coarse
/// times (or a skew window) two calls can each be chosen as the other's ancestor. The
/// call in the cycle that started first (lowest index: `pairs` are in call-time order)
/// becomes a root, which is where a request would have entered.
pub fn break_cycles(parent: &mut [u32]) -> u64 {
    const UNSEEN: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; parent.len()];
    let mut path = Vec::new();
    let mut cut = 0;
    for start in 0..parent.len() {
        let mut at = start as u32;
        path.clear();
        while at != NO_PARENT && state[at as usize] == UNSEEN {
            state[at as usize] = ON_PATH;
            path.push(at);
            at = parent[at as usize];
        }
        if at != NO_PARENT && state[at as usize] == ON_PATH {
            let from = path
                .iter()
                .position(|&p| p == at)
                .expect("the cycle's entry is on the path");
            let first = *path[from..].iter().min().expect("a cycle has members");
            parent[first as usize] = NO_PARENT;
            cut += 1;
        }
        for &p in &path {
            state[p as usize] = DONE;
        }
    }
    cut
}

/// The root of every call's tree (a root is its own). Parents must form a forest, as
/// they do after [`break_cycles`]; each chain is walked once.
pub fn roots(parent: &[u32]) -> Vec<u32> {
    let mut root = vec![NO_PARENT; parent.len()];
    let mut chain = Vec::new();
    for start in 0..parent.len() as u32 {
        let mut at = start;
        while root[at as usize] == NO_PARENT && parent[at as usize] != NO_PARENT {
            chain.push(at);
            at = parent[at as usize];
        }
        let top = if root[at as usize] == NO_PARENT {
            at
        } else {
            root[at as usize]
        };
        root[at as usize] = top;
        for c in chain.drain(..) {
            root[c as usize] = top;
        }
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalties_follow_one_plus_c_to_the_minus_x() {
        assert_eq!(penalty(0, 2.0), 1.0);
        assert_eq!(penalty(1, 2.0), 0.25);
        assert_eq!(penalty(3, 0.0), 1.0);
    }

    #[test]
    fn a_two_cycle_is_cut_at_its_earliest_call() {
        let mut parent = vec![1, 0, 0, NO_PARENT];
        assert_eq!(break_cycles(&mut parent), 1);
        assert_eq!(parent, vec![NO_PARENT, 0, 0, NO_PARENT]);
    }

    #[test]
    fn chains_without_cycles_are_left_alone() {
        let mut parent = vec![NO_PARENT, 0, 1, 2, 0];
        assert_eq!(break_cycles(&mut parent), 0);
        assert_eq!(parent, vec![NO_PARENT, 0, 1, 2, 0]);
    }

    #[test]
    fn roots_follow_parents_to_the_top_of_each_tree() {
        let parent = vec![NO_PARENT, 0, 1, NO_PARENT, 3, 1];
        assert_eq!(roots(&parent), vec![0, 0, 0, 3, 3, 0]);
    }

    #[test]
    fn a_self_loop_is_cut() {
        let mut parent = vec![0];
        assert_eq!(break_cycles(&mut parent), 1);
        assert_eq!(parent, vec![NO_PARENT]);
    }
}
