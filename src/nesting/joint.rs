//! The improved parent choice (`--algorithm joint`, the default): the children of one
//! node are given parents jointly, under a model learned from the trace itself, instead
//! of one at a time under fixed penalties. Owns the model and the search; candidates and
//! the first, greedy answer come from the paper's steps.
//!
//! For node B, an assignment of parents to B's outgoing calls is scored by its
//! log-likelihood under
//!
//! - the delay from the parent's arrival at B to the child leaving B, under a density
//!   per (parent's caller A, child's callee C): the paper's scoreboard, normalised;
//! - the gap from the child's return to the parent's answer at B, under its own density
//!   per (A, C): a service answers soon after the calls it waited for, and the return
//!   side tells apart parents that the call side cannot;
//! - for every parent and every kind of child C, how many C children it has, under a
//!   distribution per (A, C) learned from the assignment: fan-out services make one of
//!   each, serial ones several, most callers none of some kinds. This replaces the
//!   paper's fixed overlap penalty, which is right for serial services and wrong for
//!   fan-out.
//!
//! Starting from the paper's greedy answer, the search moves single children and swaps
//! the parents of two children of one kind while the log-likelihood rises, then
//! re-learns the densities and counts from the new assignment and searches again (hard
//! EM) until nothing changes. The densities start heavily smoothed and sharpen round by
//! round, so that early rounds, learned from a rougher assignment, do not lock its
//! mistakes in. Every step looks only at the calls around one child, so the work stays
//! linear in the trace.

use super::call_pairs::CallPair;
use super::candidates::Candidates;
use super::parents::NO_PARENT;
use super::scoreboard::{Bins, LogDensities, Scoreboard};
use crate::trace::NodeId;
use hashbrown::HashMap;

/// Gaussian smoothing of the learned delay histograms per round, in bins (5% wide by
/// default); the last value repeats until nothing changes or [`MAX_ROUNDS`].
const SMOOTHING: [f64; 4] = [16.0, 8.0, 4.0, 2.0];
/// Most rounds of re-learning the model.
const MAX_ROUNDS: usize = 6;
/// Most passes of moves and swaps per round.
const SWEEPS: usize = 6;
/// Share of each density spread uniformly, so an unusual delay is unlikely, not impossible.
const UNIFORM: f64 = 0.02;
/// Children of one kind per parent beyond this count as this many.
const MAX_CHILDREN: usize = 32;
/// Pseudo-count of every child count when learning the count distributions.
const PSEUDO_COUNT: f64 = 0.5;
/// A change must gain at least this much log-likelihood: ties move nothing.
const GAIN: f64 = 1e-9;

/// The joint choice for one node.
pub struct JointChoice {
    /// Per child, the index into `incoming` of its parent, or [`NO_PARENT`].
    pub parents: Vec<u32>,
    /// Per child, 1 − e^(−margin), the margin being the log-likelihood the assignment
    /// would lose if the child moved to its best other candidate; 1 for a child with one
    /// candidate or none.
    pub confidence: Vec<f32>,
}

/// Improves `initial` (the greedy choice, per child an index into `incoming`) for the
/// children of one node. `incoming` and `outgoing` are sorted as for the candidates.
pub fn choose_jointly(
    pairs: &[CallPair],
    incoming: &[u32],
    outgoing: &[u32],
    candidates: &Candidates,
    bins: Bins,
    initial: Vec<u32>,
) -> JointChoice {
    let mut state = State::new(pairs, incoming, outgoing, candidates, bins, initial);
    for round in 0..MAX_ROUNDS {
        let smoothing = SMOOTHING[round.min(SMOOTHING.len() - 1)];
        state.learn(smoothing);
        let mut changed = false;
        for _ in 0..SWEEPS {
            if !state.sweep() {
                break;
            }
            changed = true;
        }
        if !changed && round + 1 >= SMOOTHING.len() {
            break;
        }
    }
    let confidence = state.confidence();
    JointChoice {
        parents: state.chosen,
        confidence,
    }
}

struct State<'a> {
    pairs: &'a [CallPair],
    incoming: &'a [u32],
    outgoing: &'a [u32],
    candidates: &'a Candidates,
    bins: Bins,
    /// Parent per child (index into `incoming`).
    chosen: Vec<u32>,
    /// Children per parent, as indexes into `outgoing`.
    children: Vec<Vec<u32>>,
    start: Option<LogDensities<(NodeId, NodeId)>>,
    end: Option<LogDensities<(NodeId, NodeId)>>,
    counts: CountModel,
}

impl<'a> State<'a> {
    fn new(
        pairs: &'a [CallPair],
        incoming: &'a [u32],
        outgoing: &'a [u32],
        candidates: &'a Candidates,
        bins: Bins,
        chosen: Vec<u32>,
    ) -> Self {
        let mut children = vec![Vec::new(); incoming.len()];
        for (k, &p) in chosen.iter().enumerate() {
            if p != NO_PARENT {
                children[p as usize].push(k as u32);
            }
        }
        State {
            pairs,
            incoming,
            outgoing,
            candidates,
            bins,
            chosen,
            children,
            start: None,
            end: None,
            counts: CountModel::default(),
        }
    }

    fn parent(&self, local: u32) -> &CallPair {
        &self.pairs[self.incoming[local as usize] as usize]
    }

    fn child(&self, k: u32) -> &CallPair {
        &self.pairs[self.outgoing[k as usize] as usize]
    }

    /// Re-learns the densities (smoothed by `smoothing` bins) and the count
    /// distributions from the assignment.
    fn learn(&mut self, smoothing: f64) {
        let mut start = Scoreboard::new(self.bins);
        let mut end = Scoreboard::new(self.bins);
        for (k, &p) in self.chosen.iter().enumerate() {
            if p == NO_PARENT {
                continue;
            }
            let (child, parent) = (self.child(k as u32), self.parent(p));
            let key = (parent.caller, child.callee);
            start.add_at(key, child.caller_send - parent.callee_recv, 1.0);
            end.add_at(key, parent.callee_return - child.caller_return, 1.0);
        }
        start.smooth(smoothing);
        end.smooth(smoothing);
        self.start = Some(start.into_log_densities(UNIFORM));
        self.end = Some(end.into_log_densities(UNIFORM));
        self.counts = CountModel::learn(self);
    }

    /// ln-likelihood of child `k`'s times under parent `local`.
    fn fit(&self, k: u32, local: u32) -> f64 {
        let (child, parent) = (self.child(k), self.parent(local));
        let key = (parent.caller, child.callee);
        let (start, end) = (
            self.start.as_ref().expect("learned before use"),
            self.end.as_ref().expect("learned before use"),
        );
        start.log_p(&key, child.caller_send - parent.callee_recv)
            + end.log_p(&key, parent.callee_return - child.caller_return)
    }

    /// How many of parent `local`'s children call `callee`, leaving out child `except`.
    fn kind_count(&self, local: u32, callee: NodeId, except: u32) -> usize {
        self.children[local as usize]
            .iter()
            .filter(|&&k| k != except && self.child(k).callee == callee)
            .count()
    }

    /// ln-likelihood change of the counts when parent `local`, with `others` children
    /// of kind `callee` besides the one in question, has that one too.
    fn count_gain(&self, local: u32, callee: NodeId, others: usize) -> f64 {
        let caller = self.parent(local).caller;
        self.counts.log_p(caller, callee, others + 1) - self.counts.log_p(caller, callee, others)
    }

    /// ln-likelihood gained by moving child `k` from its parent to `to`.
    fn move_gain(&self, k: u32, to: u32) -> f64 {
        let from = self.chosen[k as usize];
        let callee = self.child(k).callee;
        let mut gain =
            self.fit(k, to) + self.count_gain(to, callee, self.kind_count(to, callee, k));
        if from != NO_PARENT {
            gain -=
                self.fit(k, from) + self.count_gain(from, callee, self.kind_count(from, callee, k));
        }
        gain
    }

    fn reassign(&mut self, k: u32, to: u32) {
        let from = self.chosen[k as usize];
        if from != NO_PARENT {
            self.children[from as usize].retain(|&c| c != k);
        }
        self.children[to as usize].push(k);
        self.chosen[k as usize] = to;
    }

    /// One pass of single moves, then one of swaps; whether anything changed.
    fn sweep(&mut self) -> bool {
        let mut changed = false;
        for k in 0..self.outgoing.len() as u32 {
            let row = self.candidates.of(k as usize);
            if row.len() < 2 {
                continue;
            }
            let current = self.chosen[k as usize];
            let mut best = (GAIN, NO_PARENT);
            for &to in row.iter().filter(|&&to| to != current) {
                let gain = self.move_gain(k, to);
                if gain > best.0 {
                    best = (gain, to);
                }
            }
            if best.1 != NO_PARENT {
                self.reassign(k, best.1);
                changed = true;
            }
        }
        for k in 0..self.outgoing.len() as u32 {
            if let Some((other, to)) = self.best_swap(k) {
                let from = self.chosen[k as usize];
                self.reassign(k, to);
                self.reassign(other, from);
                changed = true;
            }
        }
        changed
    }

    /// The child of the same kind whose parent `k` should take, giving it `k`'s parent:
    /// the counts stay, only the fits change. Returns (other child, its parent).
    fn best_swap(&self, k: u32) -> Option<(u32, u32)> {
        let from = self.chosen[k as usize];
        if from == NO_PARENT {
            return None;
        }
        let callee = self.child(k).callee;
        let here = self.fit(k, from);
        let mut best = (GAIN, None);
        for &to in self.candidates.of(k as usize) {
            if to == from {
                continue;
            }
            for &other in &self.children[to as usize] {
                let exchangeable = self.child(other).callee == callee
                    && self
                        .candidates
                        .of(other as usize)
                        .binary_search(&from)
                        .is_ok();
                if !exchangeable {
                    continue;
                }
                let gain = self.fit(k, to) + self.fit(other, from) - here - self.fit(other, to);
                if gain > best.0 {
                    best = (gain, Some((other, to)));
                }
            }
        }
        best.1
    }

    /// Per child: 1 − e^(−margin) over the best single move away.
    fn confidence(&self) -> Vec<f32> {
        (0..self.outgoing.len() as u32)
            .map(|k| {
                let current = self.chosen[k as usize];
                let row = self.candidates.of(k as usize);
                if row.len() < 2 || current == NO_PARENT {
                    return 1.0;
                }
                let margin = row
                    .iter()
                    .filter(|&&to| to != current)
                    .map(|&to| -self.move_gain(k, to))
                    .fold(f64::INFINITY, f64::min)
                    .max(0.0);
                (1.0 - (-margin).exp()) as f32
            })
            .collect()
    }
}

/// Per (parent's caller A, child's callee C): ln P(a parent has n children of kind C).
#[derive(Default)]
struct CountModel {
    /// (A, C) → ln P(n) for n in 0..=MAX_CHILDREN.
    known: HashMap<(NodeId, NodeId), Vec<f64>>,
    /// A → ln P(n) for a kind of child that no parent called by A has.
    unseen: HashMap<NodeId, Vec<f64>>,
}

impl CountModel {
    fn learn(state: &State<'_>) -> CountModel {
        let mut parents_of: HashMap<NodeId, f64> = HashMap::new();
        for local in 0..state.incoming.len() as u32 {
            *parents_of.entry(state.parent(local).caller).or_default() += 1.0;
        }
        let mut histograms: HashMap<(NodeId, NodeId), Vec<f64>> = HashMap::new();
        let mut per_kind: HashMap<NodeId, usize> = HashMap::new();
        for (local, children) in state.children.iter().enumerate() {
            if children.is_empty() {
                continue;
            }
            let caller = state.parent(local as u32).caller;
            per_kind.clear();
            for &k in children {
                *per_kind.entry(state.child(k).callee).or_default() += 1;
            }
            for (&callee, &n) in &per_kind {
                histograms
                    .entry((caller, callee))
                    .or_insert_with(|| vec![0.0; MAX_CHILDREN + 1])[n.min(MAX_CHILDREN)] += 1.0;
            }
        }
        let spread = PSEUDO_COUNT * (MAX_CHILDREN + 1) as f64;
        let log_p = |histogram: &[f64], parents: f64| -> Vec<f64> {
            let total = parents + spread;
            histogram
                .iter()
                .map(|&c| ((c + PSEUDO_COUNT) / total).ln())
                .collect()
        };
        let known = histograms
            .into_iter()
            .map(|((caller, callee), mut histogram)| {
                let parents = parents_of.get(&caller).copied().unwrap_or(0.0);
                let with: f64 = histogram.iter().sum();
                histogram[0] = (parents - with).max(0.0);
                ((caller, callee), log_p(&histogram, parents.max(with)))
            })
            .collect();
        let unseen = parents_of
            .into_iter()
            .map(|(caller, parents)| {
                let mut histogram = vec![0.0; MAX_CHILDREN + 1];
                histogram[0] = parents;
                (caller, log_p(&histogram, parents))
            })
            .collect();
        CountModel { known, unseen }
    }

    fn log_p(&self, caller: NodeId, callee: NodeId, n: usize) -> f64 {
        let n = n.min(MAX_CHILDREN);
        match self.known.get(&(caller, callee)) {
            Some(log_p) => log_p[n],
            None => self.unseen.get(&caller).map_or(0.0, |log_p| log_p[n]),
        }
    }
}
