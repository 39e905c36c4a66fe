//! The search over assignments of one node's children to parents: an assignment with its
//! model, scores and remembered gains; moves, same-kind swaps, exchanges of whole sets
//! and sharings-out of two parents' children, each weighed by the log-likelihood it
//! gains and taken while one gains; the confidence of each final choice. Learning is
//! [`super::model`]'s, scoring [`super::likelihood`]'s.

use super::calls::NodeCalls;
use super::families::{edited, Children, Families};
use super::model::Model;
use super::split::Cut;
use super::{Reweighing, NO_CHILD, NO_LINK, STALE};
use crate::nesting::candidates::Candidates;
use crate::nesting::parents::NO_PARENT;
use crate::trace::Nanos;
use hashbrown::HashMap;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// Most moves, swaps and exchanges tried per child and round.
pub(super) const STEPS_PER_CHILD: usize = 8;

/// Children of a parent beyond which no swap is weighed with them ([`Assignment::crowded`]):
/// a swap's cost grows with the square of the family, and where timestamps say one call
/// was open through a whole capture (a damaged one: a bit flipped in its seconds), every
/// call of the trace can be its child, and weighing swaps among ten thousand of them took
/// hours (a mutated capture that reads in 0.04 s). Moves still reach them.
const SWAP_FAMILY: usize = 4 * super::model::MAX_CHILDREN;
/// A change must gain at least this much log-likelihood: ties move nothing.
pub(super) const MIN_GAIN: f64 = 1e-9;
/// Slots in each memo of pairs' gains (a power of two): siblings, who share their
/// candidates, are looked at close together, so a small memo that forgets old pairs
/// serves nearly every second weighing, in memory that does not grow with the trace.
pub(super) const PAIR_SLOTS: usize = 1 << 14;
/// Most children two parents may have together for all the ways of sharing them out
/// to be tried (2^this of them).
pub(super) const MAX_SPLIT: usize = 8;

/// One change the search makes for a child.
pub(super) enum Improvement {
    /// The child takes this link.
    Move(u32),
    /// The child takes the first link, the other child (second) the third.
    Swap(u32, u32, u32),
    /// The child's parent and this parent exchange all their children.
    Exchange(u32),
    /// The children of the child's parent and of this parent, in the order they left,
    /// are shared out anew: those whose bit is set go to this parent.
    Split(u32, u32),
}

/// The calls a round of the search works on, a prefix of each list: on a node with
/// more children than [`super::LEARN_WINDOW`], the starts are settled on the first
/// window of them and only the end kept is carried over the rest
/// ([`super::starts::extend`]), so the rounds that learn the model cost the window,
/// not the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Scope {
    /// Children `0..children` are searched.
    pub(super) children: u32,
    /// Parents `0..learned` are learned from: every child that could be theirs is
    /// searched, so their sets are whole.
    pub(super) learned: u32,
    /// Parents `0..scored` are scored: every candidate of a searched child.
    pub(super) scored: u32,
    /// The links of the children searched: `0..links`.
    pub(super) links: u32,
    /// Children `0..reach` have a candidate among the parents scored: a step of a
    /// searched child may move them or read their links' fits, so only theirs are
    /// learned.
    pub(super) reach: u32,
}

impl Scope {
    /// Every call of the node.
    pub(super) fn all(candidates: &Candidates, parents: usize) -> Scope {
        let children = candidates.offsets.len().saturating_sub(1) as u32;
        Scope {
            children,
            learned: parents as u32,
            scored: parents as u32,
            links: candidates.parents.len() as u32,
            reach: children,
        }
    }

    /// The children and parents before `cut`, whose candidates no other child shares.
    pub(super) fn before(candidates: &Candidates, cut: Cut) -> Scope {
        Scope {
            children: cut.children as u32,
            learned: cut.parents,
            scored: cut.parents,
            links: candidates.offsets[cut.children],
            reach: cut.children as u32,
        }
    }

    /// How many links and children in scope have gains remembered: the links of the
    /// children searched, and those children. (Three starts settled on a window at once
    /// would otherwise each hold about 28 bytes per link of the whole node.)
    pub(super) fn gains(&self) -> (usize, usize) {
        (self.links as usize, self.children as usize)
    }

    /// The first `window` children (all of them if there are no more), the parents
    /// none of the others could have, and every candidate of the window's children.
    pub(super) fn window(candidates: &Candidates, parents: usize, window: usize) -> Scope {
        let all = Scope::all(candidates, parents);
        if window >= all.children as usize {
            return all;
        }
        let scored = (0..window)
            .filter_map(|k| candidates.of(k).last())
            .map(|&p| p + 1)
            .max()
            .unwrap_or(0);
        let first = |k: usize| candidates.of(k).first().copied();
        let later = window..all.children as usize;
        let learned = later
            .clone()
            .filter_map(first)
            .min()
            .unwrap_or(parents as u32);
        let scored = scored.max(learned);
        let reach = later
            .rev()
            .find(|&k| first(k).is_some_and(|p| p < scored))
            .map_or(window, |k| k + 1) as u32;
        Scope {
            children: window as u32,
            learned,
            scored,
            links: candidates.offsets[window],
            reach,
        }
    }
}

pub(super) struct Assignment<'a> {
    pub(super) calls: &'a NodeCalls<'a>,
    pub(super) candidates: &'a Candidates,
    /// What the rounds work on now.
    pub(super) scope: Scope,
    /// Per child, the link to its parent, or [`NO_LINK`].
    pub(super) chosen: Vec<u32>,
    /// Per parent (index into `incoming`), its children in the order they left.
    pub(super) children: Families,
    /// Per parent, the ln-likelihood of its sequence under the model.
    pub(super) score: Vec<f64>,
    pub(super) model: Model,
    /// ln-likelihood of each link's start delay and return gap under this round's densities.
    /// (Single precision: the fit of every link of every start is held at once.)
    pub(super) fit: Vec<f32>,
    /// The mean fit of the chosen links: what an orphan is given in their place.
    pub(super) mean_fit: f64,
    /// The connection affinity of the model learned last, if it has one.
    pub(super) affinity: Option<super::model::Affinity>,
    /// How the connection of a parent's call out follows that of its call before
    /// (`Assignment::learn_siblings`), if the model learned it last.
    pub(super) siblings: Option<super::model::Siblings>,
    /// Per link key (A, C), ln P(a parent has n children of kind C), n in 0..=MAX_CHILDREN.
    pub(super) count_log: Vec<f64>,
    /// Per caller A, the sum over kinds C of ln P(no child of kind C): with `count_log`,
    /// the ln-probability of a whole set of children if the kinds were independent.
    pub(super) none_log: Vec<f64>,
    /// Per (A, set of children's kinds with their counts), how many parents called by A
    /// made exactly that set, by [`set_key`].
    pub(super) sets: HashMap<u64, f64>,
    /// Per caller A, how many parents it called.
    pub(super) parents_of: Vec<f64>,
    /// Per caller A, the weight of the independent counts once every set's count is
    /// discounted: [`SET_PRIOR`] plus the weight the discount took.
    pub(super) set_base: Vec<f64>,
    /// Per set of children by [`set_key`], its odds once weighed under the model
    /// learned last (discounted, plain, independent): the same few sets are weighed
    /// over and over, and each weighing took an exp and a ln (8% of the search on the
    /// 40-client shop). Emptied whenever the counts or the sets are learned.
    pub(super) set_odds_known: RefCell<HashMap<u64, [f64; 3]>>,
    /// Whether `sets` is learned, or left empty so that kinds count independently.
    pub(super) whole_sets: bool,
    /// Whether each delay density is learned from the delays that fit the last one
    /// best only ([`LEFT_OUT`]).
    pub(super) robust: bool,
    /// Whether each kind's count of children per parent is pinned to the narrowest
    /// distribution with the assignment's mean ([`PINNED_SHARE`]), and whole kinds are
    /// placed again at once each round ([`Self::place_kind`]): the pinned start.
    pub(super) pinned: bool,
    /// Whether the model learns which event each action follows (`Model::follows`):
    /// the pinned start's model, and the model its end is compared under.
    pub(super) follows: bool,
    /// Whether the links' fits weigh how far a parent's place among arrivals is from
    /// its child's among calls out (`calls::NodeCalls::rank_bin`): the start ordered by
    /// arrivals, and the model its end is compared under.
    pub(super) ranks: bool,
    /// Per kind of child and rank bin, ln P(an offset in that bin), per offset; empty
    /// unless `ranks`.
    pub(super) rank_log: Vec<f64>,
    /// Kinds of a parent's children, while counting them.
    pub(super) kinds: RefCell<Vec<u32>>,
    /// Calls out still open during a walk.
    pub(super) open: RefCell<Vec<(Nanos, u32)>>,
    /// Per parent, the stamp of the last change to its children or to the model; a
    /// gain computed at that stamp still holds. Stamps come from one counter.
    pub(super) stamp: Vec<u32>,
    pub(super) clock: u32,
    /// Per link, the gain of its child joining it, and its stamp; per child, the gain
    /// of leaving its parent, and its stamp: a child is looked at again whenever a
    /// neighbouring parent changes, and most of its gains have not. (A child changes
    /// parent only by a step that restamps both, so a leave gain whose stamp is its
    /// parent's was computed for that same parent.)
    pub(super) joined: Vec<Cell<f64>>,
    pub(super) joined_at: Vec<Cell<u32>>,
    pub(super) left: Vec<Cell<f64>>,
    pub(super) left_at: Vec<Cell<u32>>,
    /// Per child, the stamp at which the search last found no step for it that gains
    /// (or [`STALE`]): a step to or with a parent unchanged since, from a parent
    /// unchanged since, still gains nothing, so a child looked at again because one
    /// neighbour changed weighs only that neighbour. (Multi-tier at ×8: nearly half of
    /// the search's looks at a child are such second looks.)
    pub(super) settled_at: Vec<u32>,
    /// Pairs of parents' best exchanges and best splits, by [`Self::pair_gain`].
    pub(super) exchanges: RefCell<Vec<PairGain>>,
    pub(super) splits: RefCell<Vec<PairGain>>,
}

/// A gain two parents would make together, at the stamps they had when it was computed.
#[derive(Clone, Copy)]
pub(super) struct PairGain {
    /// The two parents, [`NO_PARENT`] in an empty slot.
    pub(super) pair: [u32; 2],
    pub(super) stamps: [u32; 2],
    pub(super) gain: f64,
    /// For a split, the mask of the children that go to the second parent.
    pub(super) how: u32,
}

impl PairGain {
    pub(super) const EMPTY: PairGain = PairGain {
        pair: [NO_PARENT; 2],
        stamps: [0; 2],
        gain: 0.0,
        how: 0,
    };
}

impl<'a> Assignment<'a> {
    /// The assignment `initial` of a node's children, searched on `scope`.
    pub(super) fn new(
        calls: &'a NodeCalls<'a>,
        candidates: &'a Candidates,
        initial: Vec<u32>,
        scope: Scope,
    ) -> Self {
        let (links, searched) = scope.gains();
        let parents = calls.incoming.len();
        let mut children = Families::new(parents, initial.len());
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
                children.insert(p, k as u32);
                candidates.offsets[k] + at as u32
            })
            .collect();
        Assignment {
            calls,
            candidates,
            scope,
            chosen,
            children,
            score: vec![0.0; parents],
            model: Model::empty(calls.events, calls.callers),
            fit: Vec::new(),
            mean_fit: 0.0,
            affinity: None,
            siblings: None,
            count_log: Vec::new(),
            none_log: Vec::new(),
            sets: HashMap::new(),
            set_odds_known: RefCell::new(HashMap::new()),
            parents_of: Vec::new(),
            set_base: Vec::new(),
            whole_sets: false,
            robust: false,
            pinned: false,
            follows: false,
            ranks: false,
            rank_log: Vec::new(),
            kinds: RefCell::new(Vec::new()),
            open: RefCell::new(Vec::new()),
            stamp: vec![0; parents],
            clock: 0,
            joined: vec![Cell::new(0.0); links],
            joined_at: vec![Cell::new(STALE); links],
            left: vec![Cell::new(0.0); searched],
            left_at: vec![Cell::new(STALE); searched],
            settled_at: vec![STALE; searched],
            exchanges: RefCell::new(Vec::new()),
            splits: RefCell::new(Vec::new()),
        }
    }

    /// Lets go of what the search remembers of gains once it is over: the ends of the
    /// other starts wait while one still searches, and these are most of a start's
    /// memory (about 24 bytes per link). [`Self::remember_gains`] makes room again.
    pub(super) fn forget_gains(&mut self) {
        self.joined = Vec::new();
        self.joined_at = Vec::new();
        self.left = Vec::new();
        self.left_at = Vec::new();
        self.settled_at = Vec::new();
        self.exchanges = RefCell::new(Vec::new());
        self.splits = RefCell::new(Vec::new());
    }

    /// Room for the gains of the calls in scope, none of them known, after
    /// [`Self::forget_gains`] or a change of scope.
    pub(super) fn remember_gains(&mut self) {
        let (links, children) = self.scope.gains();
        self.joined = vec![Cell::new(0.0); links];
        self.joined_at = vec![Cell::new(STALE); links];
        self.left = vec![Cell::new(0.0); children];
        self.left_at = vec![Cell::new(STALE); children];
        self.settled_at = vec![STALE; children];
    }

    /// The parent (index into `incoming`) a link points to.
    pub(super) fn parent_of(&self, link: u32) -> u32 {
        self.candidates.parents[link as usize]
    }

    /// The link from child `k` to parent `p`, if `p` is one of its candidates.
    pub(super) fn link_to(&self, k: u32, p: u32) -> Option<u32> {
        let row = self.candidates.of(k as usize);
        row.binary_search(&p)
            .ok()
            .map(|at| self.candidates.offsets[k as usize] + at as u32)
    }

    /// Rescores every parent in scope under a new model, which outdates every cached
    /// gain.
    pub(super) fn rescore_all(&mut self) {
        for p in 0..self.scope.scored {
            self.score[p as usize] = self.score_of(p, self.children.of(p));
        }
        let now = self.tick();
        self.stamp.fill(now);
    }

    /// ln-likelihood gained by child `k` leaving its parent (0 without one).
    pub(super) fn leave_gain(&self, k: u32) -> f64 {
        let current = self.chosen[k as usize];
        if current == NO_LINK {
            return -self.orphan_value(k);
        }
        let from = self.parent_of(current);
        let stamp = self.stamp[from as usize];
        if self.left_at[k as usize].get() == stamp {
            return self.left[k as usize].get();
        }
        let gain = self.score_of(from, edited(self.children.of(from), k, NO_CHILD))
            - self.score[from as usize]
            - f64::from(self.fit[current as usize]);
        self.left[k as usize].set(gain);
        self.left_at[k as usize].set(stamp);
        gain
    }

    /// ln-likelihood gained by child `k`, parentless for the moment, joining `link`.
    pub(super) fn join_gain(&self, k: u32, link: u32) -> f64 {
        let to = self.parent_of(link);
        let stamp = self.stamp[to as usize];
        if self.joined_at[link as usize].get() == stamp {
            return self.joined[link as usize].get();
        }
        let gain = self.score_of(to, edited(self.children.of(to), NO_CHILD, k))
            - self.score[to as usize]
            + f64::from(self.fit[link as usize]);
        self.joined[link as usize].set(gain);
        self.joined_at[link as usize].set(stamp);
        gain
    }

    /// ln-likelihood gained by child `k` moving to `link` (one of its links).
    pub(super) fn move_gain(&self, k: u32, link: u32) -> f64 {
        if self.chosen[k as usize] == link {
            return 0.0;
        }
        self.leave_gain(k) + self.join_gain(k, link)
    }

    /// Gives child `k` the parent of `link` (or none), keeping lists and scores.
    pub(super) fn reassign(&mut self, k: u32, link: u32) {
        let current = self.chosen[k as usize];
        if current != NO_LINK {
            self.children.remove(self.parent_of(current), k);
        }
        if link != NO_LINK {
            self.children.insert(self.parent_of(link), k);
        }
        self.chosen[k as usize] = link;
    }

    /// The next stamp. Should the counter ever run out, every cached gain is forgotten
    /// and it starts again, so a stamp is never mistaken for an older one.
    pub(super) fn tick(&mut self) -> u32 {
        if self.clock == STALE - 1 {
            self.joined_at.iter().for_each(|c| c.set(STALE));
            self.left_at.iter().for_each(|c| c.set(STALE));
            self.settled_at.fill(STALE);
            self.exchanges.get_mut().fill(PairGain::EMPTY);
            self.splits.get_mut().fill(PairGain::EMPTY);
            self.stamp.fill(0);
            self.clock = 0;
        }
        self.clock += 1;
        self.clock
    }

    /// Rescores parents whose children changed, which outdates their cached gains.
    pub(super) fn rescore(&mut self, parents: &[u32]) {
        for &p in parents {
            self.score[p as usize] = self.score_of(p, self.children.of(p));
            self.stamp[p as usize] = self.tick();
        }
    }

    /// The links of child `k`.
    pub(super) fn row(&self, k: u32) -> std::ops::Range<u32> {
        self.candidates.offsets[k as usize]..self.candidates.offsets[k as usize + 1]
    }

    /// ln-likelihood of child `k` having no parent because its parent's call was lost
    /// ([`orphan_logs`]), with the mean fit of a chosen link standing in for the fit
    /// of a link it does not have: for or against a parent, the fits then speak only
    /// where they are better or worse than usual. (0 for a child with no candidate,
    /// which has no choice.)
    pub(super) fn orphan_value(&self, k: u32) -> f64 {
        if self.row(k).is_empty() {
            return 0.0;
        }
        self.calls.orphan_log[self.calls.kind[k as usize] as usize] + self.mean_fit
    }

    /// The links of child `k` but its own whose parent changed after stamp `since`
    /// (all of them for [`STALE`]).
    pub(super) fn others(&self, k: u32, since: u32) -> impl Iterator<Item = u32> + '_ {
        let current = self.chosen[k as usize];
        self.row(k).filter(move |&link| {
            link != current && (since == STALE || self.stamp[self.parent_of(link) as usize] > since)
        })
    }

    /// The link whose taking gains most for `k`, if any gains, among its links whose
    /// parent changed after stamp `since` (and no parent, if `since` is [`STALE`]).
    pub(super) fn best_move(&self, k: u32, since: u32) -> Option<u32> {
        let current = self.chosen[k as usize];
        let leave = self.leave_gain(k);
        let mut best = (MIN_GAIN, None);
        if current != NO_LINK && since == STALE {
            let gain = leave + self.orphan_value(k);
            if gain > best.0 {
                best = (gain, Some(NO_LINK));
            }
        }
        for link in self.others(k, since) {
            let gain = leave + self.join_gain(k, link);
            if gain > best.0 {
                best = (gain, Some(link));
            }
        }
        best.1
    }

    /// For child `k`, the child of the same kind whose parent `k` should take, giving
    /// it `k`'s parent. Returns (gain, `k`'s new link, the other child, its new link).
    pub(super) fn best_swap(&self, k: u32, since: u32) -> Option<(f64, u32, u32, u32)> {
        self.best_swap_above(k, since, MIN_GAIN)
    }

    /// [`Self::best_swap`] among swaps that gain more than `floor` (which may be
    /// negative: the least a swap loses, for the confidence).
    fn best_swap_above(&self, k: u32, since: u32, floor: f64) -> Option<(f64, u32, u32, u32)> {
        let current = self.chosen[k as usize];
        if current == NO_LINK {
            return None;
        }
        let from = self.parent_of(current);
        if self.crowded(from) {
            return None;
        }
        let kind = self.calls.kind[k as usize];
        let mut best = (floor, None);
        for link in self.others(k, since) {
            let to = self.parent_of(link);
            if self.crowded(to) {
                continue;
            }
            for other in self.children.of(to) {
                if self.calls.kind[other as usize] != kind {
                    continue;
                }
                let Some(back) = self.link_to(other, from) else {
                    continue;
                };
                let theirs = self.chosen[other as usize];
                let fits = f64::from(self.fit[link as usize]) + f64::from(self.fit[back as usize])
                    - f64::from(self.fit[current as usize])
                    - f64::from(self.fit[theirs as usize]);
                let gain = self.score_of(from, edited(self.children.of(from), k, other))
                    + self.score_of(to, edited(self.children.of(to), other, k))
                    - self.score[from as usize]
                    - self.score[to as usize]
                    + fits;
                if gain > best.0 {
                    best = (gain, Some((link, other, back)));
                }
            }
        }
        best.1
            .map(|(link, other, back)| (best.0, link, other, back))
    }

    /// Whether parent `p` has more than [`SWAP_FAMILY`] children: too many to weigh a
    /// swap with each of them, since each weighing scores both whole families again.
    fn crowded(&self, p: u32) -> bool {
        self.children.of(p).nth(SWAP_FAMILY).is_some()
    }

    /// For child `k`'s parent p, the candidate q of `k` whose whole set of children p
    /// should take while q takes all of p's: a request's calls handed to another
    /// request together. Returns (gain, q).
    pub(super) fn best_exchange(&self, k: u32, since: u32) -> Option<(f64, u32)> {
        self.best_exchange_above(k, since, MIN_GAIN)
    }

    /// [`Self::best_exchange`] among exchanges that gain more than `floor`.
    fn best_exchange_above(&self, k: u32, since: u32, floor: f64) -> Option<(f64, u32)> {
        let current = self.chosen[k as usize];
        if current == NO_LINK {
            return None;
        }
        let from = self.parent_of(current);
        let mut best = (floor, None);
        for link in self.others(k, since) {
            let to = self.parent_of(link);
            let (gain, _) = self.pair_gain(&self.exchanges, from, to, |from, to| {
                (self.exchange_gain(from, to), 0)
            });
            if gain > best.0 {
                best = (gain, Some(to));
            }
        }
        best.1.map(|to| (best.0, to))
    }

    /// What parents `from` and `to` gain by `gain`, from `cache` if neither changed
    /// since it was computed. (The children of one parent share their candidates, and
    /// each would otherwise weigh the same exchange and the same splits again.)
    pub(super) fn pair_gain(
        &self,
        cache: &RefCell<Vec<PairGain>>,
        from: u32,
        to: u32,
        gain: impl FnOnce(u32, u32) -> (f64, u32),
    ) -> (f64, u32) {
        if !self.calls.dense {
            return gain(from, to);
        }
        if self.calls.reweighing == Reweighing::Everything {
            return gain(from, to);
        }
        let (pair, stamps) = (
            [from, to],
            [self.stamp[from as usize], self.stamp[to as usize]],
        );
        // A multiplicative hash of the pair picks its slot.
        let mixed = (u64::from(from) << 32 | u64::from(to)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let slot = (mixed >> (64 - PAIR_SLOTS.trailing_zeros())) as usize;
        {
            let mut slots = cache.borrow_mut();
            if slots.is_empty() {
                slots.resize(PAIR_SLOTS, PairGain::EMPTY);
            }
            let known = slots[slot];
            if known.pair == pair && known.stamps == stamps {
                return (known.gain, known.how);
            }
        }
        let (gain, how) = gain(from, to);
        cache.borrow_mut()[slot] = PairGain {
            pair,
            stamps,
            gain,
            how,
        };
        (gain, how)
    }

    /// ln-likelihood gained by parents `from` and `to` exchanging their whole sets of
    /// children (−∞ where a child could not have the other parent).
    pub(super) fn exchange_gain(&self, from: u32, to: u32) -> f64 {
        let (mine, theirs) = (self.children.of(from), self.children.of(to));
        if mine.clone().any(|c| self.link_to(c, to).is_none())
            || theirs.clone().any(|c| self.link_to(c, from).is_none())
        {
            return f64::NEG_INFINITY;
        }
        let fit = |children: Children, p: u32| -> f64 {
            children
                .map(|c| f64::from(self.fit[self.link_to(c, p).expect("checked") as usize]))
                .sum()
        };
        let fits = fit(mine.clone(), to) + fit(theirs.clone(), from)
            - fit(mine.clone(), from)
            - fit(theirs.clone(), to);
        self.score_of(to, mine.clone()) + self.score_of(from, theirs)
            - self.score[from as usize]
            - self.score[to as usize]
            + fits
    }

    /// The children of `from` and `to` together, in the order they left, if few enough
    /// to share out every way.
    pub(super) fn pooled(&self, from: u32, to: u32) -> Option<Vec<u32>> {
        let mut pooled: Vec<u32> = self.children.of(from).chain(self.children.of(to)).collect();
        if pooled.len() > MAX_SPLIT {
            return None;
        }
        pooled.sort_unstable();
        Some(pooled)
    }

    /// The best new sharing out of the children of child `k`'s parent and of one of
    /// its other candidates, tried only where whole sets are learned and the parent's
    /// set is unlikely: a parent with two sets of children next to one with none is
    /// mended by three moves at once, and no single move, swap or exchange gains.
    pub(super) fn best_split(&self, k: u32, since: u32) -> Option<(f64, u32, u32)> {
        let current = self.chosen[k as usize];
        if current == NO_LINK || self.sets.is_empty() {
            return None;
        }
        let from = self.parent_of(current);
        let (joint, independent) = self.set_odds(from, self.children.of(from), false);
        if joint >= independent {
            return None;
        }
        let mut best = (MIN_GAIN, None);
        for link in self.others(k, since) {
            let to = self.parent_of(link);
            let (gain, mask) =
                self.pair_gain(&self.splits, from, to, |from, to| self.split_gain(from, to));
            if gain > best.0 {
                best = (gain, Some((to, mask)));
            }
        }
        best.1.map(|(to, mask)| (best.0, to, mask))
    }

    /// The best new sharing out of the children of parents `from` and `to`: its gain
    /// and the mask of the children (in the order they left) that go to `to`; a gain of
    /// −∞ if no sharing out gains or they have too many children between them.
    pub(super) fn split_gain(&self, from: u32, to: u32) -> (f64, u32) {
        let mut best = (MIN_GAIN, None);
        let Some(pooled) = self.pooled(from, to) else {
            return (f64::NEG_INFINITY, 0);
        };
        let now = self.score[from as usize]
            + self.score[to as usize]
            + pooled
                .iter()
                .map(|&c| f64::from(self.fit[self.chosen[c as usize] as usize]))
                .sum::<f64>();
        let side = |mask: u32, bit: u32| {
            pooled
                .iter()
                .enumerate()
                .filter(move |&(i, _)| (mask >> i) & 1 == bit)
                .map(|(_, &c)| c)
        };
        'masks: for mask in 0..1u32 << pooled.len() {
            let mut fits = 0.0;
            for (i, &c) in pooled.iter().enumerate() {
                let parent = if (mask >> i) & 1 == 1 { to } else { from };
                match self.link_to(c, parent) {
                    Some(l) => fits += f64::from(self.fit[l as usize]),
                    None => continue 'masks,
                }
            }
            let gain =
                self.score_of(from, side(mask, 0)) + self.score_of(to, side(mask, 1)) + fits - now;
            if gain > best.0 {
                best = (gain, Some(mask));
            }
        }
        best.1.map_or((f64::NEG_INFINITY, 0), |mask| (best.0, mask))
    }

    /// Moves, swaps and exchanges until none gains: every child in scope once, then
    /// again each child in scope one of whose candidates gained or lost a child. Returns
    /// how many children have another parent than before.
    pub(super) fn search(&mut self, seeds: Option<Vec<u32>>) -> usize {
        let before = self.chosen.clone();
        let n = self.scope.children as usize;
        // Every child in order (or the seeds), then the ones queued again (a child not
        // reached yet is still queued, so it is never added twice).
        let mut queued = vec![seeds.is_none(); n];
        let mut first: Box<dyn Iterator<Item = u32>> = match seeds {
            None => Box::new(0..n as u32),
            Some(seeds) => {
                for &k in &seeds {
                    queued[k as usize] = true;
                }
                Box::new(seeds.into_iter())
            }
        };
        let mut again: VecDeque<u32> = VecDeque::new();
        // Every step gains, so the search ends; the budget only bounds its length.
        let mut budget = STEPS_PER_CHILD * n;
        let mut touched: Vec<u32> = Vec::new();
        while let Some(k) = first.next().or_else(|| again.pop_front()) {
            queued[k as usize] = false;
            if budget == 0 {
                break;
            }
            budget -= 1;
            if self.row(k).len() < 2 - usize::from(self.calls.orphans) {
                // Nothing to choose from: one candidate (unless the child could have
                // lost its parent) or none.
                continue;
            }
            let current = self.chosen[k as usize];
            let from = (current != NO_LINK).then(|| self.parent_of(current));
            touched.clear();
            touched.extend(from);
            let mut since = self.settled_at[k as usize];
            if from.is_some_and(|from| self.stamp[from as usize] > since) {
                since = STALE;
            }
            if self.calls.reweighing == Reweighing::Everything {
                since = STALE;
            }
            // The cheapest kind of step first: a move, else a swap, else an exchange.
            let step = self
                .best_move(k, since)
                .map(Improvement::Move)
                .or_else(|| {
                    self.best_swap(k, since)
                        .map(|(_, link, other, back)| Improvement::Swap(link, other, back))
                })
                .or_else(|| {
                    self.best_exchange(k, since)
                        .map(|(_, to)| Improvement::Exchange(to))
                })
                .or_else(|| {
                    self.best_split(k, since)
                        .map(|(_, to, mask)| Improvement::Split(to, mask))
                });
            match step {
                Some(Improvement::Move(link)) => {
                    if link != NO_LINK {
                        touched.push(self.parent_of(link));
                    }
                    self.reassign(k, link);
                }
                Some(Improvement::Swap(link, other, back)) => {
                    touched.push(self.parent_of(link));
                    self.reassign(k, link);
                    self.reassign(other, back);
                }
                Some(Improvement::Exchange(to)) => {
                    let from = from.expect("an exchange starts from a parent");
                    touched.push(to);
                    self.children.exchange(from, to);
                    for p in [from, to] {
                        let mut at = self.children.first[p as usize];
                        while at != NO_CHILD {
                            self.chosen[at as usize] = self.link_to(at, p).expect("checked");
                            at = self.children.next[at as usize];
                        }
                    }
                }
                Some(Improvement::Split(to, mask)) => {
                    let from = from.expect("a split starts from a parent");
                    touched.push(to);
                    let pooled = self.pooled(from, to).expect("checked");
                    for (i, &c) in pooled.iter().enumerate() {
                        let parent = if (mask >> i) & 1 == 1 { to } else { from };
                        let link = self.link_to(c, parent).expect("checked");
                        if self.chosen[c as usize] != link {
                            self.reassign(c, link);
                        }
                    }
                }
                None => {
                    self.settled_at[k as usize] = self.clock;
                    continue;
                }
            }
            self.rescore(&touched);
            for &p in &touched {
                let watchers = self.calls.watchers_of(p);
                // Watchers are in the children's order: those in scope come first.
                let in_scope = watchers.partition_point(|&w| (w as usize) < n);
                for &w in &watchers[..in_scope] {
                    if !queued[w as usize] {
                        queued[w as usize] = true;
                        again.push_back(w);
                    }
                }
            }
        }
        before
            .iter()
            .zip(&self.chosen)
            .filter(|(was, is)| was != is)
            .count()
    }

    /// Per child in scope: the probability of its choice against each alternative
    /// (another parent, none, a swap with a child of its kind, an exchange of whole
    /// sets), each weighed by e^(−margin); and its lead, 1 − e^(−margin) over the best
    /// single move away. Per parent scored: the probability that no child it does not
    /// hold is its own, each child's moves to it weighed as above.
    pub(super) fn confidence(&self) -> Confidence {
        let mut unclaimed = vec![0.0f64; self.scope.scored as usize];
        let (choice, lead) = (0..self.scope.children)
            .map(|k| {
                let current = self.chosen[k as usize];
                let row = self.row(k);
                if row.len() < 2 - usize::from(self.calls.orphans) {
                    return (1.0, 1.0);
                }
                let leave = self.leave_gain(k);
                // No parent is one more alternative where the trace lost calls.
                let orphaned = (self.calls.orphans && current != NO_LINK)
                    .then(|| -(leave + self.orphan_value(k)));
                let moves: Vec<(u32, f64)> = row
                    .filter(|&l| l != current)
                    .map(|l| (l, (-(leave + self.join_gain(k, l))).max(0.0)))
                    .collect();
                let margins = moves
                    .iter()
                    .map(|&(_, m)| m)
                    .chain(orphaned.map(|m| m.max(0.0)));
                let lead = margins.clone().fold(f64::INFINITY, f64::min);
                // Two requests' calls of one kind are most often confused with each
                // other: taking the other's parent alone breaks both sets, trading
                // them costs only what their timings say.
                let swapped = self
                    .best_swap_above(k, STALE, f64::NEG_INFINITY)
                    .map(|(gain, ..)| (-gain).max(0.0));
                let exchanged = self
                    .best_exchange_above(k, STALE, f64::NEG_INFINITY)
                    .map(|(gain, _)| (-gain).max(0.0));
                let odds: f64 = margins
                    .chain(swapped)
                    .chain(exchanged)
                    .map(|margin| (-margin).exp())
                    .sum();
                // The share of the child that each other candidate holds: a parent
                // left with none, where its watchers could well be its own, is no
                // surer than they are elsewhere.
                // (A share under 10⁻⁶ changes the product by less than that; most
                // alternatives' shares are, and skipping them keeps this pass cheap:
                // 0.25 s of 5.5 s on the 40-client shop at 1 M messages otherwise.)
                for &(l, margin) in &moves {
                    if margin > SMALL_SHARE_MARGIN {
                        continue;
                    }
                    let share = (-margin).exp() / (1.0 + odds);
                    unclaimed[self.parent_of(l) as usize] += (-share).ln_1p();
                }
                ((1.0 / (1.0 + odds)) as f32, (1.0 - (-lead).exp()) as f32)
            })
            .unzip();
        Confidence {
            choice,
            lead,
            complete: unclaimed.into_iter().map(|ln| ln.exp() as f32).collect(),
        }
    }
}

/// The margin past which an alternative's share of a child (below e^(−margin), about
/// 10⁻⁶) is left out of its parent's completeness.
const SMALL_SHARE_MARGIN: f64 = 13.8;

/// How sure the search is of an assignment ([`Assignment::confidence`]).
pub(super) struct Confidence {
    /// Per child, the probability of its choice against every alternative weighed.
    pub(super) choice: Vec<f32>,
    /// Per child, 1 − e^(−margin) over its best single move away.
    pub(super) lead: Vec<f32>,
    /// Per parent, the probability that no child outside its set is its own.
    pub(super) complete: Vec<f32>,
}
