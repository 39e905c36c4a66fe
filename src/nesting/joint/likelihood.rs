//! How an assignment is scored under the learned model: a parent's log-likelihood with a
//! given set of children (its set, then each action's delay and transition), the odds of
//! a set against the kinds counted independently, and the whole assignment's likelihood
//! by which the ends of two starts are compared. Owns no learning.

use super::calls::NodeCalls;
use super::model::{follows_key, set_key, MAX_CHILDREN, SET_DISCOUNT, SET_PRIOR};
use super::search::Assignment;
use super::{NO_CHILD, NO_DENSITY, NO_LINK};

/// Most kinds of children a node may have for a parent's set to be counted per kind on
/// the stack: listing the kinds of each parent scored took 6% of the samples on the
/// 10.8 GB capture set, before sorting them.
const FEW_KINDS: usize = 16;

/// How a parent's sequence of actions is scored by the Markov chain.
#[derive(Clone, Copy)]
pub(super) enum Chain {
    /// Each action among all actions, the answer included: the chain also says when a
    /// parent stops calling, so how many children it makes counts twice, once in its
    /// set and once in its stops. The search scores so: that second count keeps odd
    /// sets away (with [`Chain::GivenSet`] in the search too, media went from 81.2% of
    /// requests right to 79.9% and hotel from 98.0% to 97.8%, with more calls into
    /// compose-review-service left with one child of three).
    Free,
    /// Each action among the actions still to come, see [`OrderGivenSet`].
    GivenSet,
}

/// The order of a parent's actions given its set of children: at each step, the
/// chain's chance of the action taken among the actions still to come, rather than
/// among all. The set of children has its own distribution; a chain free to stop would
/// count the children a second time, and it rewards piling them up, since most parents
/// with none and a few with many make a more predictable chain than every parent with
/// two or three.
pub(super) struct OrderGivenSet {
    /// (action, how many times it is still to come): a call of each kind, and the
    /// answer.
    pub(super) remaining: Vec<(u32, u32)>,
    pub(super) answer: u32,
    /// Whether the answer may come before calls out (asynchronous children).
    pub(super) answer_any_time: bool,
}

impl OrderGivenSet {
    pub(super) fn new(calls: &NodeCalls, children: impl Iterator<Item = u32>) -> Self {
        let mut remaining: Vec<(u32, u32)> = Vec::new();
        for k in children {
            let action = calls.events.leaves(calls.kind[k as usize]);
            match remaining.iter_mut().find(|(a, _)| *a == action) {
                Some(entry) => entry.1 += 1,
                None => remaining.push((action, 1)),
            }
        }
        let answer = calls.events.answer();
        remaining.push((answer, 1));
        OrderGivenSet {
            remaining,
            answer,
            answer_any_time: calls.async_children,
        }
    }

    /// ln P(`action`, among the actions that could come next), `transition_log` giving
    /// each one's chance among all; and `action` taken off what remains. Where one
    /// action only could come, 0: so always with children of one kind.
    pub(super) fn next(&mut self, action: u32, transition_log: impl Fn(u32) -> f64) -> f64 {
        let answer = self.answer;
        let calls_left = self.remaining.iter().any(|&(a, n)| a != answer && n > 0);
        let answer_now = self.answer_any_time || !calls_left;
        let could = |&&(a, n): &&(u32, u32)| n > 0 && (a != answer || answer_now);
        let ln = if self.remaining.iter().filter(could).count() <= 1 {
            0.0
        } else {
            let all: f64 = self
                .remaining
                .iter()
                .filter(could)
                .map(|&(a, _)| transition_log(a).exp())
                .sum();
            transition_log(action) - all.ln()
        };
        if let Some(entry) = self.remaining.iter_mut().find(|(a, _)| *a == action) {
            entry.1 = entry.1.saturating_sub(1);
        }
        ln
    }
}

impl Assignment<'_> {
    /// ln-likelihood of every parent's sequence and set of children under the model
    /// the assignment learned (the parents and children in scope), and of the offsets
    /// between places where the model weighs them ([`Self::rank_likelihood`]), by which
    /// the ends of two starts are compared: the whole likelihood but the per-link
    /// densities, which the soft start was fitted to alone,
    /// with the order of each parent's actions scored given its set of children
    /// ([`OrderGivenSet`]). Scored as the search scores it, a start that piles children
    /// onto a few parents wins by the Markov chain's stops: on penalty-breaker at ×8
    /// (seed 11), the soft start's end (49% of its instances in false patterns) beat the
    /// greedy start's (5%) by 1,681 nats, 0.14 per child, with 2,292 nats more in its
    /// transitions; ordered given the sets, the greedy start's end is likelier by 612.
    /// (Per-link densities included, piling won by 1.1 nats per child.)
    pub(super) fn sequence_likelihood(&self) -> f64 {
        let orphans: f64 = (0..self.scope.children)
            .filter(|&k| self.chosen[k as usize] == NO_LINK && !self.row(k).is_empty())
            .map(|k| self.calls.orphan_log[self.calls.kind[k as usize] as usize])
            .sum();
        let parents: f64 = (0..self.scope.learned)
            .map(|p| self.parent_log(p, self.children.of(p), Chain::GivenSet))
            .sum();
        parents + orphans + self.rank_likelihood()
    }

    /// ln-likelihood of how far each child's parent's place among arrivals is from the
    /// child's among calls out, where the model weighs it ([`Assignment::ranks`]); 0
    /// elsewhere.
    pub(super) fn rank_likelihood(&self) -> f64 {
        if !self.ranks {
            return 0.0;
        }
        (0..self.scope.children)
            .filter(|&k| self.chosen[k as usize] != NO_LINK)
            .map(|k| self.rank_log_of(k, self.chosen[k as usize]))
            .sum()
    }

    /// ln-likelihood of every parent's set of children alone, the part of
    /// [`Self::sequence_likelihood`] that says how many calls of each kind parents make.
    pub(super) fn count_likelihood(&self) -> f64 {
        (0..self.scope.learned)
            .map(|p| self.count_score(p, self.children.of(p)))
            .sum()
    }

    /// About the most, in nats, by which the counts of children of the parents in scope
    /// could be likelier than they are here, were every (caller, kind)'s count as
    /// narrow as its mean allows (the two whole numbers beside it, as the pinned start
    /// pins them): the sum of [`narrowing_gain`] over (caller, kind). Not a strict
    /// bound: the counts are scored with whole sets and pseudo-counts, and a pinned
    /// end's own means differ a little (a test trace's window: bound 0.090 nats per
    /// child, gain 0.104). Where this is small, no end can be clearly likelier in its
    /// counts, and the pinned start is not worth settling.
    pub(super) fn count_narrowing_bound(&self) -> f64 {
        let calls = self.calls;
        let kinds = calls.events.kinds as usize;
        let width = MAX_CHILDREN + 1;
        let mut histogram = vec![0.0f64; calls.callers * kinds * width];
        let mut made = vec![0usize; kinds];
        for p in 0..self.scope.learned {
            let a = calls.caller[p as usize] as usize;
            made.fill(0);
            for c in self.children.of(p) {
                made[calls.kind[c as usize] as usize] += 1;
            }
            for (c, &n) in made.iter().enumerate() {
                histogram[(a * kinds + c) * width + n.min(MAX_CHILDREN)] += 1.0;
            }
        }
        histogram.chunks(width).map(narrowing_gain).sum()
    }

    /// The children in scope that could join or leave a parent whose set of children
    /// is made less often than the kinds counted independently would have it, each
    /// once, in order.
    pub(super) fn near_unlikely_sets(&self) -> Vec<u32> {
        let calls = self.calls;
        let searched = self.scope.children;
        let mut near = vec![false; searched as usize];
        for p in 0..self.scope.scored {
            let (joint, independent) = self.set_odds(p, self.children.of(p), false);
            if joint < independent {
                for &w in calls.watchers_of(p).iter().take_while(|&&w| w < searched) {
                    near[w as usize] = true;
                }
            }
        }
        (0..searched).filter(|&k| near[k as usize]).collect()
    }

    /// ln P(parent `p` makes exactly `children`'s kinds, so many of each): how often
    /// parents called by the same caller made that set, smoothed towards the kinds
    /// counted independently (a Dirichlet process centred on them, of weight
    /// [`SET_PRIOR`]). Counted independently, a service that either calls all of C, D and
    /// E or none of them would find "C and D without E" likely.
    pub(super) fn count_score(&self, p: u32, children: impl Iterator<Item = u32>) -> f64 {
        self.set_odds(p, children, true).0
    }

    /// For parent `p` making `children`: ln P of its set of children, and the same
    /// with the kinds counted independently. `discounted` as the model scores it (see
    /// [`SET_DISCOUNT`]); otherwise from the plain counts, as the search decides where
    /// to try sharing children out anew (with the discount, it tried that next to every
    /// set made once, and penalty-breaker at ×4 went from 4.1% of its instances in false
    /// patterns to 36.5%).
    pub(super) fn set_odds(
        &self,
        p: u32,
        children: impl Iterator<Item = u32>,
        discounted: bool,
    ) -> (f64, f64) {
        let calls = self.calls;
        let a = calls.caller[p as usize] as usize;
        let kinds = calls.events.kinds as usize;
        if kinds <= FEW_KINDS {
            let mut counts = [0usize; FEW_KINDS];
            for c in children {
                counts[calls.kind[c as usize] as usize] += 1;
            }
            let runs = (0..kinds as u32)
                .filter(|&c| counts[c as usize] > 0)
                .map(|c| (c, counts[c as usize]));
            return self.odds_of_set(a, runs, discounted);
        }
        let mut seen = self.kinds.borrow_mut();
        seen.clear();
        seen.extend(children.map(|c| calls.kind[c as usize]));
        seen.sort_unstable();
        let runs = seen.chunk_by(|x, y| x == y).map(|run| (run[0], run.len()));
        self.odds_of_set(a, runs, discounted)
    }

    /// [`Self::set_odds`] of a set of children by caller `a`, given as (kind, how
    /// many) in ascending order of kind.
    fn odds_of_set(
        &self,
        a: usize,
        runs: impl Iterator<Item = (u32, usize)> + Clone,
        discounted: bool,
    ) -> (f64, f64) {
        if self.sets.is_empty() {
            let independent = self.independent_odds(a, runs);
            return (independent, independent);
        }
        let key = set_key(a, runs.clone());
        let known = self.set_odds_known.borrow().get(&key).copied();
        let [weighed, plain, independent] = match known {
            Some(odds) => {
                // Every test of the joint search checks that no odds outlive their model.
                debug_assert!(
                    odds == self.weigh_set(a, key, runs),
                    "a set's odds kept from an older model"
                );
                odds
            }
            None => {
                let odds = self.weigh_set(a, key, runs);
                self.set_odds_known.borrow_mut().insert(key, odds);
                odds
            }
        };
        (if discounted { weighed } else { plain }, independent)
    }

    /// The odds of caller `a`'s set `runs` (of key `key`) under the model: discounted,
    /// plain, and with the kinds counted independently.
    fn weigh_set(&self, a: usize, key: u64, runs: impl Iterator<Item = (u32, usize)>) -> [f64; 3] {
        let independent = self.independent_odds(a, runs);
        let made = self.sets.get(&key).copied().unwrap_or(0.0);
        let joint = |made: f64, base: f64| {
            ((made + base * independent.exp()) / (self.parents_of[a] + SET_PRIOR)).ln()
        };
        [
            joint((made - SET_DISCOUNT).max(0.0), self.set_base[a]),
            joint(made, SET_PRIOR),
            independent,
        ]
    }

    /// ln P(caller `a`'s parent makes the set `runs`) with the kinds counted
    /// independently.
    fn independent_odds(&self, a: usize, runs: impl Iterator<Item = (u32, usize)>) -> f64 {
        let kinds = self.calls.events.kinds as usize;
        let width = MAX_CHILDREN + 1;
        self.none_log[a]
            + runs
                .map(|(kind, n)| {
                    let base = (a * kinds + kind as usize) * width;
                    self.count_log[base + n.min(MAX_CHILDREN)] - self.count_log[base]
                })
                .sum::<f64>()
    }

    /// ln-likelihood of parent `p` with `children` as its calls out, as the search
    /// scores it: how many of each kind it makes, and its sequence of actions.
    pub(super) fn score_of(&self, p: u32, children: impl Iterator<Item = u32> + Clone) -> f64 {
        self.parent_log(p, children, Chain::Free)
    }

    /// [`Self::score_of`], with the Markov chain read as `chain` says.
    pub(super) fn parent_log(
        &self,
        p: u32,
        children: impl Iterator<Item = u32> + Clone,
        chain: Chain,
    ) -> f64 {
        let calls = self.calls;
        let model = &self.model;
        let mut total = self.count_score(p, children.clone()) + self.sibling_log(children.clone());
        let mut order = match chain {
            Chain::Free => None,
            Chain::GivenSet => Some(OrderGivenSet::new(calls, children.clone())),
        };
        calls.walk(p, children, &mut self.open.borrow_mut(), |factor| {
            if let Some(wait) = factor.awaited {
                total += model
                    .awaited_log
                    .get(3 * factor.delay_key as usize + wait as usize)
                    .copied()
                    .unwrap_or(0.0);
                return;
            }
            if factor.timed {
                let follows = model
                    .follows
                    .get(follows_key(calls.events, &factor), f64::NAN);
                if !follows.is_nan() {
                    total += follows;
                }
                let bin = calls.table.index(factor.delay);
                total += match model.delay_at.get(factor.delay_key, NO_DENSITY) {
                    NO_DENSITY => match model.pooled_at[factor.pooled_key] {
                        NO_DENSITY => calls.unknown_delay - calls.ln_span[bin],
                        at => model.pooled[at as usize + bin],
                    },
                    at => model.density[at as usize + bin],
                };
            }
            let action = (factor.transition_key - factor.context_key) as u32;
            total += match order.as_mut() {
                None => self.transition_log(factor.context_key, action),
                Some(order) => order.next(action, |a| self.transition_log(factor.context_key, a)),
            };
        });
        total
    }

    /// ln of how much likelier each of `children`'s connections is after the
    /// connection of the child before it than by its kind's mix alone, summed, where
    /// the model learned how siblings' connections follow each other
    /// ([`Self::learn_siblings`]); 0 elsewhere. A pair counted when the model was
    /// learned is left out of the counts (no pair is evidence for itself), whichever
    /// parent holds it now: the counts are of connections, not parents.
    pub(super) fn sibling_log(&self, children: impl Iterator<Item = u32>) -> f64 {
        let Some(siblings) = &self.siblings else {
            return 0.0;
        };
        let calls = self.calls;
        let mut total = 0.0;
        let mut before = NO_CHILD;
        for k in children {
            if before != NO_CHILD {
                let own = siblings.counted_next[before as usize] == k;
                total += siblings.odds(
                    calls.child_connection_index[before as usize],
                    calls.child_connection_index[k as usize],
                    calls.kind[k as usize],
                    own,
                );
            }
            before = k;
        }
        total
    }

    /// ln P(the chain takes `action` after the action of `context_key`) among all
    /// actions: the learned transition, or the chance kept for an unseen one.
    pub(super) fn transition_log(&self, context_key: u64, action: u32) -> f64 {
        let transition = &self.model.transition;
        let mut ln = transition.get(context_key + u64::from(action), f64::NAN);
        if ln.is_nan() {
            ln = transition.get(context_key, f64::NAN);
        }
        if ln.is_nan() {
            self.calls.unknown_transition
        } else {
            ln
        }
    }
}

/// How much likelier, in nats, the parents counted in `histogram` (parents by how many
/// children of one kind they made) would be under the narrowest distribution their mean
/// allows than under their own: the narrowest puts all on the two whole numbers beside
/// the mean, and scores each parent as if it were one of them, so this is the gain of
/// an assignment that kept the mean and made every count one of those two. 0 where the
/// counts are on those two already.
pub(super) fn narrowing_gain(histogram: &[f64]) -> f64 {
    let parents: f64 = histogram.iter().sum();
    if parents == 0.0 {
        return 0.0;
    }
    let entropy_term = |share: f64| if share > 0.0 { share * share.ln() } else { 0.0 };
    let own: f64 = histogram.iter().map(|&n| entropy_term(n / parents)).sum();
    let mean = histogram
        .iter()
        .enumerate()
        .map(|(n, &c)| n as f64 * c)
        .sum::<f64>()
        / parents;
    let above = mean.fract();
    let narrowest = entropy_term(above) + entropy_term(1.0 - above);
    parents * (narrowest - own).max(0.0)
}
