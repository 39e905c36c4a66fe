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
//! EM) until nothing changes. Every step looks only at the calls around one child, so
//! the work stays linear in the trace.

use super::call_pairs::CallPair;
use super::candidates::Candidates;
use super::parents::NO_PARENT;
use super::scoreboard::{log_densities, smooth_histograms, Bins};
use crate::trace::NodeId;
use hashbrown::HashMap;
use std::collections::VecDeque;

/// Gaussian smoothing of the learned delay histograms, in bins (5% wide by default).
/// (Starting smoother and sharpening round by round helped the media trace by two
/// points and cost as much or more on the synthetic pathological cases.)
const SMOOTHING: f64 = 2.0;
/// Most rounds of re-learning the model.
const MAX_ROUNDS: usize = 6;
/// Most moves and swaps tried per child and round.
const STEPS_PER_CHILD: usize = 8;
/// Share of each density spread uniformly, so an unusual delay is unlikely, not impossible.
const UNIFORM: f64 = 0.02;
/// Children of one kind per parent beyond this count as this many.
const MAX_CHILDREN: usize = 32;
/// Pseudo-count of every child count when learning the count distributions.
const PSEUDO_COUNT: f64 = 0.5;
/// A change must gain at least this much log-likelihood: ties move nothing.
const GAIN: f64 = 1e-9;
/// "No link": a child without a parent.
const NO_LINK: u32 = u32::MAX;

/// The joint choice for one node.
pub struct JointChoice {
    /// Per child, the index into `incoming` of its parent, or [`NO_PARENT`].
    pub parents: Vec<u32>,
    /// Per child, 1 − e^(−margin), the margin being the log-likelihood the assignment
    /// would lose if the child moved to its best other candidate; 1 for a child with one
    /// candidate or none.
    pub confidence: Vec<f32>,
    /// For the child named by `explain`: each candidate (index into `incoming`) with the
    /// log-likelihood the final assignment would lose if the child moved there (0 for
    /// its parent).
    pub explained: Vec<(u32, f64)>,
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
    explain: Option<usize>,
) -> JointChoice {
    let links = Links::new(pairs, incoming, outgoing, candidates, bins);
    let mut state = State::new(&links, candidates, initial);
    for _ in 0..MAX_ROUNDS {
        state.learn(SMOOTHING);
        if !state.search() {
            break;
        }
    }
    let confidence = state.confidence();
    let explained = explain.map_or_else(Vec::new, |k| {
        let k = k as u32;
        let current = state.chosen[k as usize];
        state
            .row(k)
            .map(|link| {
                let loss = if link == current {
                    0.0
                } else {
                    -state.move_gain(k, link)
                };
                (candidates.parents[link as usize], loss)
            })
            .collect()
    });
    let parents = state
        .chosen
        .iter()
        .map(|&link| {
            if link == NO_LINK {
                NO_PARENT
            } else {
                candidates.parents[link as usize]
            }
        })
        .collect();
    JointChoice {
        parents,
        confidence,
        explained,
    }
}

/// What the search needs of every candidate link (child k, parent j), computed once:
/// the rest is arrays. Links are laid out as `candidates.parents`.
struct Links {
    /// The child (index into `outgoing`) each link starts from.
    child: Vec<u32>,
    /// Dense id of (parent's caller A, child's callee C): the model's key.
    key: Vec<u32>,
    /// Bin of the delay from the parent's arrival to the child's send.
    start_bin: Vec<u32>,
    /// Bin of the gap from the child's return to the parent's answer.
    end_bin: Vec<u32>,
    /// Keys in use.
    keys: usize,
    /// Per key, its C: children of one kind whichever their parents' callers.
    key_callee: Vec<NodeId>,
    /// Per key, how many calls into the node come from its A.
    parents_of_key: Vec<f64>,
    bins: usize,
    /// Per parent, the children that have it as a candidate (the rows, transposed):
    /// whom to look at again when its children change.
    watchers: Vec<u32>,
    watcher_offsets: Vec<u32>,
}

impl Links {
    fn new(
        pairs: &[CallPair],
        incoming: &[u32],
        outgoing: &[u32],
        candidates: &Candidates,
        bins: Bins,
    ) -> Links {
        let mut ids: HashMap<(NodeId, NodeId), u32> = HashMap::new();
        let (mut key_caller, mut key_callee) = (Vec::new(), Vec::new());
        let total = candidates.parents.len();
        let mut link_child = Vec::with_capacity(total);
        let (mut key, mut start_bin, mut end_bin) = (
            Vec::with_capacity(total),
            Vec::with_capacity(total),
            Vec::with_capacity(total),
        );
        for (k, &child) in outgoing.iter().enumerate() {
            let child = &pairs[child as usize];
            for &local in candidates.of(k) {
                let parent = &pairs[incoming[local as usize] as usize];
                let next = ids.len() as u32;
                let id = *ids.entry((parent.caller, child.callee)).or_insert(next);
                if id == next {
                    key_caller.push(parent.caller);
                    key_callee.push(child.callee);
                }
                key.push(id);
                link_child.push(k as u32);
                start_bin.push(bins.index(child.caller_send - parent.callee_recv) as u32);
                end_bin.push(bins.index(parent.callee_return - child.caller_return) as u32);
            }
        }
        let mut parents_of: HashMap<NodeId, f64> = HashMap::new();
        for &local in incoming {
            *parents_of.entry(pairs[local as usize].caller).or_default() += 1.0;
        }
        let parents_of_key = key_caller.iter().map(|a| parents_of[a]).collect();

        let mut watcher_offsets = vec![0u32; incoming.len() + 1];
        for &p in &candidates.parents {
            watcher_offsets[p as usize + 1] += 1;
        }
        for i in 0..incoming.len() {
            watcher_offsets[i + 1] += watcher_offsets[i];
        }
        let mut fill = watcher_offsets.clone();
        let mut watchers = vec![0u32; total];
        for k in 0..outgoing.len() {
            for &p in candidates.of(k) {
                watchers[fill[p as usize] as usize] = k as u32;
                fill[p as usize] += 1;
            }
        }
        Links {
            child: link_child,
            key,
            start_bin,
            end_bin,
            keys: ids.len(),
            key_callee,
            parents_of_key,
            bins: bins.count(),
            watchers,
            watcher_offsets,
        }
    }

    fn watchers_of(&self, parent: u32) -> &[u32] {
        let at = parent as usize;
        &self.watchers[self.watcher_offsets[at] as usize..self.watcher_offsets[at + 1] as usize]
    }
}

struct State<'a> {
    links: &'a Links,
    candidates: &'a Candidates,
    /// Per child, the link to its parent, or [`NO_LINK`].
    chosen: Vec<u32>,
    /// Per parent (index into `incoming`), its children's links.
    children: Vec<Vec<u32>>,
    /// ln-likelihood of each link's times under this round's densities.
    fit: Vec<f64>,
    /// Per key, ln P(a parent has n children of that kind), n in 0..=MAX_CHILDREN.
    count_log: Vec<f64>,
}

impl<'a> State<'a> {
    fn new(links: &'a Links, candidates: &'a Candidates, initial: Vec<u32>) -> Self {
        let parents = links.watcher_offsets.len() - 1;
        let mut children = vec![Vec::new(); parents];
        let chosen: Vec<u32> = initial
            .iter()
            .enumerate()
            .map(|(k, &p)| {
                if p == NO_PARENT {
                    return NO_LINK;
                }
                let row = candidates.of(k);
                let at = row
                    .binary_search(&p)
                    .expect("the greedy choice is a candidate");
                let link = candidates.offsets[k] + at as u32;
                children[p as usize].push(link);
                link
            })
            .collect();
        State {
            links,
            candidates,
            chosen,
            children,
            fit: Vec::new(),
            count_log: Vec::new(),
        }
    }

    /// The parent (index into `incoming`) a link points to.
    fn parent_of(&self, link: u32) -> u32 {
        self.candidates.parents[link as usize]
    }

    /// Re-learns the densities (smoothed by `smoothing` bins) and the count
    /// distributions from the assignment.
    fn learn(&mut self, smoothing: f64) {
        let links = self.links;
        let bins = links.bins;
        let mut start = vec![0.0; links.keys * bins];
        let mut end = vec![0.0; links.keys * bins];
        for &link in self.chosen.iter().filter(|&&l| l != NO_LINK) {
            let (l, base) = (link as usize, links.key[link as usize] as usize * bins);
            start[base + links.start_bin[l] as usize] += 1.0;
            end[base + links.end_bin[l] as usize] += 1.0;
        }
        for histograms in [&mut start, &mut end] {
            smooth_histograms(histograms, bins, smoothing);
            log_densities(histograms, bins, UNIFORM);
        }
        self.fit = (0..links.key.len())
            .map(|l| {
                let base = links.key[l] as usize * bins;
                start[base + links.start_bin[l] as usize] + end[base + links.end_bin[l] as usize]
            })
            .collect();

        let width = MAX_CHILDREN + 1;
        let mut histogram = vec![0.0; links.keys * width];
        let mut kinds = Vec::new();
        for children in self.children.iter().filter(|c| !c.is_empty()) {
            kinds.clear();
            kinds.extend(children.iter().map(|&l| links.key[l as usize]));
            kinds.sort_unstable();
            for run in kinds.chunk_by(|a, b| a == b) {
                histogram[run[0] as usize * width + run.len().min(MAX_CHILDREN)] += 1.0;
            }
        }
        let spread = PSEUDO_COUNT * width as f64;
        for (key, counts) in histogram.chunks_mut(width).enumerate() {
            let parents = links.parents_of_key[key];
            let with: f64 = counts[1..].iter().sum();
            counts[0] = (parents - with).max(0.0);
            let total = parents.max(with) + spread;
            for c in counts.iter_mut() {
                *c = ((*c + PSEUDO_COUNT) / total).ln();
            }
        }
        self.count_log = histogram;
    }

    /// ln-likelihood of taking `link`: its times, and the change in its parent's count
    /// of children of its kind.
    fn gain_of(&self, link: u32) -> f64 {
        let key = self.links.key[link as usize];
        let others = self.children[self.parent_of(link) as usize]
            .iter()
            .filter(|&&l| l != link && self.links.key[l as usize] == key)
            .count();
        let counts = &self.count_log[key as usize * (MAX_CHILDREN + 1)..];
        self.fit[link as usize] + counts[(others + 1).min(MAX_CHILDREN)]
            - counts[others.min(MAX_CHILDREN)]
    }

    /// The callee of a link's child.
    fn kind(&self, link: u32) -> NodeId {
        self.links.key_callee[self.links.key[link as usize] as usize]
    }

    /// The child a link starts from.
    fn child_of(&self, link: u32) -> u32 {
        self.links.child[link as usize]
    }

    /// ln-likelihood gained by child `k` moving to `link` (one of its links).
    fn move_gain(&self, k: u32, link: u32) -> f64 {
        let current = self.chosen[k as usize];
        let mut gain = self.gain_of(link);
        if current != NO_LINK {
            gain -= self.gain_of(current);
        }
        gain
    }

    fn reassign(&mut self, k: u32, link: u32) {
        let current = self.chosen[k as usize];
        if current != NO_LINK {
            let from = self.parent_of(current) as usize;
            self.children[from].retain(|&l| l != current);
        }
        let to = self.parent_of(link) as usize;
        self.children[to].push(link);
        self.chosen[k as usize] = link;
    }

    /// The links of child `k`.
    fn row(&self, k: u32) -> std::ops::Range<u32> {
        self.candidates.offsets[k as usize]..self.candidates.offsets[k as usize + 1]
    }

    /// The link whose taking gains most for `k`, if any gains.
    fn best_move(&self, k: u32) -> Option<u32> {
        let current = self.chosen[k as usize];
        let mut best = (GAIN, None);
        for link in self.row(k).filter(|&l| l != current) {
            let gain = self.move_gain(k, link);
            if gain > best.0 {
                best = (gain, Some(link));
            }
        }
        best.1
    }

    /// For child `k`, the child of the same kind whose parent `k` should take, giving
    /// it `k`'s parent: the counts stay, only the fits change. Returns (`k`'s new link,
    /// the other child, its new link).
    fn best_swap(&self, k: u32) -> Option<(u32, u32, u32)> {
        let current = self.chosen[k as usize];
        if current == NO_LINK {
            return None;
        }
        let from = self.parent_of(current);
        let kind = self.kind(current);
        let mut best = (GAIN, None);
        for link in self.row(k).filter(|&l| l != current) {
            let to = self.parent_of(link);
            let gained = self.fit[link as usize] - self.fit[current as usize];
            for &theirs in &self.children[to as usize] {
                if self.kind(theirs) != kind {
                    continue;
                }
                let other = self.child_of(theirs);
                let row = &self.candidates.parents[self.candidates.offsets[other as usize] as usize
                    ..self.candidates.offsets[other as usize + 1] as usize];
                let Ok(at) = row.binary_search(&from) else {
                    continue;
                };
                let back = self.candidates.offsets[other as usize] + at as u32;
                let gain = gained + self.fit[back as usize] - self.fit[theirs as usize];
                if gain > best.0 {
                    best = (gain, Some((link, other, back)));
                }
            }
        }
        best.1
    }

    /// Moves and swaps until none gains: every child once, then again each child one of
    /// whose candidates gained or lost a child. Whether anything changed.
    fn search(&mut self) -> bool {
        let n = self.chosen.len();
        let mut queue: VecDeque<u32> = (0..n as u32).collect();
        let mut queued = vec![true; n];
        // Every step gains, so the search ends; the budget only bounds its length.
        let mut budget = STEPS_PER_CHILD * n;
        let mut changed = false;
        while let Some(k) = queue.pop_front() {
            queued[k as usize] = false;
            if budget == 0 {
                break;
            }
            budget -= 1;
            let before = self.chosen[k as usize];
            let link = if let Some(link) = self.best_move(k) {
                self.reassign(k, link);
                link
            } else if let Some((link, other, back)) = self.best_swap(k) {
                self.reassign(k, link);
                self.reassign(other, back);
                link
            } else {
                continue;
            };
            changed = true;
            for touched in [before, link].into_iter().filter(|&l| l != NO_LINK) {
                for &w in self.links.watchers_of(self.parent_of(touched)) {
                    if !queued[w as usize] {
                        queued[w as usize] = true;
                        queue.push_back(w);
                    }
                }
            }
        }
        changed
    }

    /// Per child: 1 − e^(−margin) over the best single move away.
    fn confidence(&self) -> Vec<f32> {
        (0..self.chosen.len() as u32)
            .map(|k| {
                let current = self.chosen[k as usize];
                let row = self.row(k);
                if row.len() < 2 || current == NO_LINK {
                    return 1.0;
                }
                let margin = row
                    .filter(|&l| l != current)
                    .map(|l| -self.move_gain(k, l))
                    .fold(f64::INFINITY, f64::min)
                    .max(0.0);
                (1.0 - (-margin).exp()) as f32
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::nesting::{nest, Algorithm, NestOptions, Nesting};
    use crate::trace::text::trace_from_str;
    use crate::trace::Trace;

    /// Requests into B every 1–5 ms (so up to three are open at once); each makes
    /// calls to C and D in parallel 4 ms after it arrives and answers 6 ms after them.
    fn overlapping_fan_out(requests: u32) -> String {
        let mut seed = 12_345u64;
        let mut jitter = |scale: f64| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((seed >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * scale
        };
        let mut lines = Vec::new();
        let mut t = 0.0;
        for r in 0..requests {
            t += 1.0 + 4.0 * (jitter(1.0) + 0.5);
            let c = t + 4.0 + jitter(0.2);
            let d = c + 0.2 + jitter(0.1);
            let (c_end, d_end) = (c + 1.0 + jitter(0.2), d + 1.0 + jitter(0.2));
            let end = c_end.max(d_end) + 5.0 + jitter(0.2);
            for (at, line) in [
                (t, format!("CALL A B p{r}")),
                (c, format!("CALL B C c{r}")),
                (d, format!("CALL B D d{r}")),
                (c_end, format!("RET C B c{r}")),
                (d_end, format!("RET D B d{r}")),
                (end, format!("RET B A p{r}")),
            ] {
                lines.push((at, line));
            }
        }
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        lines
            .iter()
            .map(|(at, line)| format!("{:.6} {line}\n", at / 1000.0))
            .collect()
    }

    /// Fraction of the C and D calls given the request they belong to.
    fn right(trace: &Trace, nesting: &Nesting) -> f64 {
        let id = |i: usize| trace.call_id_text(nesting.pairs[i].call_id);
        let children: Vec<usize> = (0..nesting.pairs.len())
            .filter(|&i| !id(i).starts_with('p'))
            .collect();
        let good = children
            .iter()
            .filter(|&&i| {
                let parent = nesting.parent[i] as usize;
                parent < nesting.pairs.len() && id(parent)[1..] == id(i)[1..]
            })
            .count();
        good as f64 / children.len() as f64
    }

    #[test]
    fn overlapping_fan_out_is_untangled_where_the_paper_penalty_misleads() {
        let trace = trace_from_str(&overlapping_fan_out(400));
        let with = |algorithm| {
            let options = NestOptions {
                algorithm,
                ..NestOptions::default()
            };
            nest(&trace, &options).unwrap()
        };
        let (paper, joint) = (with(Algorithm::Paper), with(Algorithm::Joint));
        let (paper_right, joint_right) = (right(&trace, &paper), right(&trace, &joint));
        assert!(
            paper.stats.mean_parallelism > 1.5,
            "{}",
            paper.stats.mean_parallelism
        );
        assert!(
            joint_right >= 0.99 && joint_right > paper_right,
            "joint {joint_right}, paper {paper_right}"
        );
    }

    #[test]
    fn confidence_is_a_margin_between_zero_and_one() {
        let trace = trace_from_str(&overlapping_fan_out(200));
        let n = nest(&trace, &NestOptions::default()).unwrap();
        assert!(n.confidence.iter().all(|c| (0.0..=1.0).contains(c)));
        // Roots have no candidate: nothing to doubt.
        for (i, &p) in n.parent.iter().enumerate() {
            if p == crate::nesting::parents::NO_PARENT {
                assert_eq!(n.confidence[i], 1.0);
            }
        }
        let mean =
            n.confidence.iter().map(|&c| f64::from(c)).sum::<f64>() / n.confidence.len() as f64;
        assert!(mean > 0.5, "mean confidence {mean}");
    }

    #[test]
    fn the_same_trace_gives_the_same_choice() {
        let trace = trace_from_str(&overlapping_fan_out(150));
        let a = nest(&trace, &NestOptions::default()).unwrap();
        let b = nest(&trace, &NestOptions::default()).unwrap();
        assert_eq!(a.parent, b.parent);
        assert_eq!(a.confidence, b.confidence);
    }
}
