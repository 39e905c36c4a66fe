//! What the joint choice learns from an assignment (hard EM's M step): the delay
//! densities of each parent's sequence, shrunk towards pooled ones and turned into
//! densities in time; the Markov chain of actions; the per-link start and return fits,
//! with the connection affinity where captures name connections; how many children of
//! each kind a parent makes, and whole sets of them. Scoring under
//! the model is [`super::likelihood`]'s.

use super::calls::NodeCalls;
use super::calls::{ln_rank_width, EventKinds, Factor, NO_INDEX, RANK_BINS};
use super::search::Assignment;
use super::{NO_CHILD, NO_CONNECTION, NO_DENSITY, NO_LINK};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::scoreboard::{log_densities, smooth_histograms};
use crate::trace::Nanos;
use hashbrown::HashMap;

/// Gaussian smoothing of the learned delay histograms, in bins (5% wide by default):
/// wider helped media a little and cost hotel more (docs/tuning.md).
pub(super) const SMOOTHING: f64 = 2.0;
/// Share of each density spread uniformly, so an unusual delay is unlikely, not impossible.
pub(super) const UNIFORM: f64 = 0.02;
/// Width, in bins, of the kernel that smooths the learned offsets between places among
/// arrivals and among calls out (`Assignment::learn_ranks`).
const RANK_SMOOTHING: f64 = 1.0;
/// Pseudo-count of every action after every action when learning the Markov chain,
/// and of every count of children of one kind.
pub(super) const PSEUDO_COUNT: f64 = 0.5;
/// Weight, in samples, of the pooled density in every specific delay density, so that
/// hard EM cannot fit a rarely seen density to its own guess (docs/tuning.md).
pub(super) const PRIOR: f64 = 200.0;
/// Share of each delay density's delays, those that fit it worst, that the robust start
/// leaves out when it learns the density again (docs/tuning.md).
pub(super) const LEFT_OUT: f64 = 0.25;
/// Weight, in parents, of the independent counts in the distribution of sets of children.
pub(super) const SET_PRIOR: f64 = 2.0;
/// How much each set's count is lowered when the model scores a parent's set: a set
/// made by one parent alone is no evidence for itself (docs/tuning.md).
pub(super) const SET_DISCOUNT: f64 = 1.0;
/// Weight, in children, of a kind's mix of connections in what a connection in says of
/// the connection out (docs/tuning.md).
pub(super) const AFFINITY_PRIOR: f64 = 1.0;
/// Nats per child by which the connections in must predict the connections out (each
/// child's own link left out) for the node to learn an affinity at all: less, and the
/// factor stays flat, so that pools shared by every request change nothing
/// (docs/tuning.md: nothing changes between 0.1 and 2).
pub(super) const AFFINITY_GATE: f64 = 0.5;

/// Share of a kind's count distribution that the pinned start puts on the two counts
/// next to the mean (the rest as learned): a parent of a service that makes one call
/// of a kind per request, or one or two, cannot be left with none or given five, as
/// hard EM left or gave them at saturation (docs/tuning.md).
pub(super) const PINNED_SHARE: f64 = 0.9;

/// Children of one kind per parent beyond this count as this many.
pub(super) const MAX_CHILDREN: usize = 32;

/// Per kind of child, the ln-likelihood of a child of that kind leaving when it did
/// with its parent's call lost: ln(share of calls into the node that were lost) +
/// ln(children of that kind per nanosecond), a density in time like the sequence's.
/// Minus infinity, so never chosen, where the trace lost no call into the node.
pub(super) fn orphan_logs(
    pairs: &[CallPair],
    outgoing: &[u32],
    kind: &[u32],
    kinds: usize,
    lost: f64,
) -> Vec<f64> {
    let mut count = vec![0.0f64; kinds];
    let mut first = vec![Nanos::MAX; kinds];
    let mut last = vec![Nanos::MIN; kinds];
    for (&child, &c) in outgoing.iter().zip(kind) {
        let at = pairs[child as usize].caller_send;
        let c = c as usize;
        count[c] += 1.0;
        first[c] = first[c].min(at);
        last[c] = last[c].max(at);
    }
    (0..kinds)
        .map(|c| {
            if lost > 0.0 {
                lost.ln() + (count[c] / (last[c] - first[c]).max(1) as f64).ln()
            } else {
                f64::NEG_INFINITY
            }
        })
        .collect()
}

/// How a node's calls out follow its calls in, by connection, counted over the links
/// of an assignment (see [`Assignment::learn_affinity`]).
#[derive(Default)]
pub(super) struct Affinity {
    /// Links by (connection in, connection out).
    pairs: HashMap<(u64, u64), f64>,
    /// Links by (connection in, kind of child).
    parents: HashMap<(u64, u32), f64>,
    /// Links by connection out.
    children: HashMap<u64, f64>,
    /// Links by kind of child.
    kinds: HashMap<u32, f64>,
    /// Connections out by kind of child.
    connections: HashMap<u32, f64>,
}

impl Affinity {
    /// ln of how much likelier child `k`'s connection is given parent `p`'s than given
    /// its kind alone; `own` when the link is counted already, so that it is left out
    /// (a link is no evidence for itself). 0 where either connection is unknown.
    pub(super) fn log_odds(&self, calls: &NodeCalls, k: u32, p: u32, own: bool) -> f64 {
        self.odds(
            calls.parent_connection[p as usize],
            calls.child_connection[k as usize],
            calls.kind[k as usize],
            own,
        )
    }

    /// ln of how much likelier connection `child` (of a call out of kind `kind`) is
    /// after connection `before` than by its kind's mix alone; `own` leaves out one
    /// count of the pair. 0 where either connection is unknown.
    fn odds(&self, before: u64, child: u64, kind: u32, own: bool) -> f64 {
        if child == NO_CONNECTION || before == NO_CONNECTION {
            return 0.0;
        }
        let get = |v: Option<&f64>| v.copied().unwrap_or(0.0);
        follow_odds(
            FollowCounts {
                pair: get(self.pairs.get(&(before, child))),
                from_before: get(self.parents.get(&(before, kind))),
                child: get(self.children.get(&child)),
                of_kind: get(self.kinds.get(&kind)),
                connections: get(self.connections.get(&kind)),
            },
            own,
        )
    }

    /// Counts one pair: a call out of kind `kind` on connection `child` after
    /// connection `before`.
    fn count(&mut self, before: u64, child: u64, kind: u32) {
        *self.pairs.entry((before, child)).or_default() += 1.0;
        *self.parents.entry((before, kind)).or_default() += 1.0;
        *self.kinds.entry(kind).or_default() += 1.0;
        let seen = self.children.entry(child).or_default();
        if *seen == 0.0 {
            *self.connections.entry(kind).or_default() += 1.0;
        }
        *seen += 1.0;
    }
}

/// What [`follow_odds`] reads: how often a connection out followed a connection
/// before (the connection of the call in, or of the call out before it), of all that
/// followed that one, and how often it was used of all its kind's uses.
struct FollowCounts {
    /// The pair's count, and the count of every pair from the same connection before
    /// to a call of the kind.
    pair: f64,
    from_before: f64,
    /// Uses of the connection out; uses of every connection of its kind, and how many
    /// connections of the kind there are.
    child: f64,
    of_kind: f64,
    connections: f64,
}

/// ln of how much likelier a connection out is after the connection before it than by
/// its kind's mix alone, from `counts` ([`AFFINITY_PRIOR`] children of the mix added to
/// the pair's); `own` leaves one count of the pair out (it is no evidence for itself).
fn follow_odds(counts: FollowCounts, own: bool) -> f64 {
    let less = if own { 1.0 } else { 0.0 };
    let mix =
        (counts.child - less + 1.0) / (counts.of_kind - less + counts.connections + 1.0).max(1.0);
    let pair = (counts.pair - less).max(0.0);
    let from_before = (counts.from_before - less).max(0.0);
    ((pair + AFFINITY_PRIOR * mix) / (from_before + AFFINITY_PRIOR)).ln() - mix.ln()
}

/// How the connection of each of a parent's calls out follows the connection of the
/// call it made before, counted over an assignment's parents
/// ([`Assignment::learn_siblings`]), by the node's dense connection indices
/// ([`NodeCalls::child_connection_index`]): read for every pair of siblings each time
/// a parent is scored, so one hash lookup a pair, the rest arrays.
pub(super) struct Siblings {
    kinds: usize,
    /// Pairs by (connection before, connection after), as `before << 32 | after`.
    pairs: HashMap<u64, f64>,
    /// Per pair counted, its odds with its own count in and left out; per connection
    /// before and kind after, the odds of a pair never counted (the same for every
    /// connection after: the mix cancels). Computed once counted (`Siblings::weigh`):
    /// the two logarithms a pair took were a sixth of the search on maketrace's shop
    /// with a worker pool.
    odds: HashMap<u64, [f64; 2]>,
    unseen: Vec<f64>,
    /// Per child, the sibling counted after it ([`NO_CHILD`] if none): a pair is left
    /// out of the counts where it was counted, not where it is now, so that a parent's
    /// score does not change with its neighbours' and every gain the search weighs is
    /// the gain it makes. (Left out where the pair are siblings now, a split that
    /// formed new pairs gained less than weighed, and on maketrace's shop with a
    /// worker pool the search made 177,191 splits, undoing its own, against 1,690.)
    pub(super) counted_next: Vec<u32>,
    /// Pairs by connection before and kind after, at `before * kinds + kind`.
    from_before: Vec<f64>,
    /// Pairs by connection after.
    after: Vec<f64>,
    /// Pairs by kind after, and the connections of each kind that came after one.
    of_kind: Vec<f64>,
    connections: Vec<f64>,
}

impl Siblings {
    fn new(connections: usize, kinds: usize, children: usize) -> Self {
        Siblings {
            kinds,
            counted_next: vec![NO_CHILD; children],
            pairs: HashMap::new(),
            odds: HashMap::new(),
            unseen: Vec::new(),
            from_before: vec![0.0; connections * kinds],
            after: vec![0.0; connections],
            of_kind: vec![0.0; kinds],
            connections: vec![0.0; kinds],
        }
    }

    /// Counts one pair: a call out of kind `kind` on connection `after` after one on
    /// connection `before`.
    fn count(&mut self, before: u32, after: u32, kind: u32) {
        *self.pairs.entry(pair_key(before, after)).or_default() += 1.0;
        self.from_before[before as usize * self.kinds + kind as usize] += 1.0;
        self.of_kind[kind as usize] += 1.0;
        let seen = &mut self.after[after as usize];
        if *seen == 0.0 {
            self.connections[kind as usize] += 1.0;
        }
        *seen += 1.0;
    }

    /// Weighs every pair counted, and a pair never counted after each connection.
    fn weigh(&mut self, kind_of: impl Fn(u32) -> u32) {
        let mut odds = HashMap::with_capacity(self.pairs.len());
        for &key in self.pairs.keys() {
            let (before, after) = ((key >> 32) as u32, key as u32);
            let kind = kind_of(after);
            odds.insert(
                key,
                [false, true].map(|own| self.count_odds(before, after, kind, own)),
            );
        }
        self.odds = odds;
        self.unseen = self
            .from_before
            .iter()
            .map(|&n| (AFFINITY_PRIOR / (n + AFFINITY_PRIOR)).ln())
            .collect();
    }

    /// ln of how much likelier connection `after` (of a call out of kind `kind`) is
    /// after connection `before` than by its kind's mix alone; `own` leaves out one
    /// count of the pair. 0 where either connection is unknown.
    pub(super) fn odds(&self, before: u32, after: u32, kind: u32, own: bool) -> f64 {
        if before == NO_INDEX || after == NO_INDEX {
            return 0.0;
        }
        // A pair left out (`own`) was counted, so it is always among those weighed.
        match self.odds.get(&pair_key(before, after)) {
            Some(odds) => odds[usize::from(own)],
            None => self.unseen[before as usize * self.kinds + kind as usize],
        }
    }

    /// [`Self::odds`] from the counts.
    fn count_odds(&self, before: u32, after: u32, kind: u32, own: bool) -> f64 {
        follow_odds(
            FollowCounts {
                pair: self
                    .pairs
                    .get(&pair_key(before, after))
                    .copied()
                    .unwrap_or(0.0),
                from_before: self.from_before[before as usize * self.kinds + kind as usize],
                child: self.after[after as usize],
                of_kind: self.of_kind[kind as usize],
                connections: self.connections[kind as usize],
            },
            own,
        )
    }
}

fn pair_key(before: u32, after: u32) -> u64 {
    (u64::from(before) << 32) | u64::from(after)
}

/// The key of a timed factor's (caller, previous action, action, event it follows),
/// for [`Model::follows`].
pub(super) fn follows_key(events: EventKinds, factor: &Factor) -> u64 {
    factor.transition_key * events.count() + u64::from(factor.before)
}

/// Turns ln-shares of bins into ln-densities in time.
pub(super) fn per_time(histograms: &mut [f64], ln_span: &[f64]) {
    for histogram in histograms.chunks_mut(ln_span.len()) {
        for (w, span) in histogram.iter_mut().zip(ln_span) {
            *w -= span;
        }
    }
}

/// Puts [`PINNED_SHARE`] of the count distribution `shares` on the two counts next to
/// `mean`, split so that their mean is `mean`: the narrowest distribution with it.
pub(super) fn pin(shares: &mut [f64], mean: f64) {
    let low = (mean.floor() as usize).min(shares.len() - 1);
    let above = mean - mean.floor();
    for (n, share) in shares.iter_mut().enumerate() {
        let narrow = if n == low {
            1.0 - above
        } else if n == low + 1 {
            above
        } else {
            0.0
        };
        *share = PINNED_SHARE * narrow + (1.0 - PINNED_SHARE) * *share;
    }
}

/// A key for caller `a` with a set of children, as (kind, how many) in ascending order
/// of kind (a kind repeated beyond [`MAX_CHILDREN`] times counts as that many): a 64-bit
/// mix, whose collisions among the few thousand sets of a trace are vanishingly unlikely.
pub(super) fn set_key(a: usize, runs: impl Iterator<Item = (u32, usize)>) -> u64 {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut key = mix(a as u64 + 1);
    for (kind, n) in runs {
        let count = n.min(MAX_CHILDREN) as u64;
        key = mix(key ^ (u64::from(kind) << 8 | count));
    }
    key
}

/// Values by key: an array where the node's key space is small (the common case, and
/// the search reads it for every action it scores), a hash map where it is not.
pub(super) enum ValuesByKey<T> {
    Dense(Vec<T>),
    Sparse(HashMap<u64, T>),
}

impl<T: Copy> ValuesByKey<T> {
    /// Largest key space kept as an array.
    pub(super) const DENSE: u64 = 1 << 20;

    pub(super) fn new(space: u64, missing: T) -> Self {
        if space <= Self::DENSE {
            ValuesByKey::Dense(vec![missing; space as usize])
        } else {
            ValuesByKey::Sparse(HashMap::new())
        }
    }

    pub(super) fn get(&self, key: u64, missing: T) -> T {
        match self {
            ValuesByKey::Dense(values) => values[key as usize],
            ValuesByKey::Sparse(values) => values.get(&key).copied().unwrap_or(missing),
        }
    }

    pub(super) fn set(&mut self, key: u64, value: T) {
        match self {
            ValuesByKey::Dense(values) => values[key as usize] = value,
            ValuesByKey::Sparse(values) => {
                values.insert(key, value);
            }
        }
    }
}

/// The learned model: delay densities and the Markov chain of actions.
pub(super) struct Model {
    /// Per delay key, the start of its ln-density in `density`, or [`NO_DENSITY`].
    pub(super) delay_at: ValuesByKey<u32>,
    pub(super) density: Vec<f64>,
    /// The same, pooled over callers and over the kind of the event before (for
    /// (caller, event, action) never seen), by pooled key.
    pub(super) pooled_at: Vec<u32>,
    pub(super) pooled: Vec<f64>,
    /// ln P(action | caller, previous action) for every pair seen, NaN for the others;
    /// with the action 0 (the arrival is never an action), the ln P of an action never
    /// seen after that (caller, previous action).
    pub(super) transition: ValuesByKey<f64>,
    /// Per (caller A, kind C), ln P of each [`ParentWait`]; empty unless children may be
    /// asynchronous.
    pub(super) awaited_log: Vec<f64>,
    /// In the pinned start's model on a dense node, per [`follows_key`], ln P(the event
    /// an action follows | caller, previous action, action); NaN where not learned.
    pub(super) follows: ValuesByKey<f64>,
}

impl Model {
    pub(super) fn empty(events: EventKinds, callers: usize) -> Self {
        let n = events.count();
        let space = callers as u64 * n * n;
        Model {
            delay_at: ValuesByKey::new(space, NO_DENSITY),
            density: Vec::new(),
            pooled_at: vec![NO_DENSITY; 4 * n as usize],
            pooled: Vec::new(),
            transition: ValuesByKey::new(space, f64::NAN),
            awaited_log: Vec::new(),
            follows: ValuesByKey::new(space * n, f64::NAN),
        }
    }
}

impl Assignment<'_> {
    /// Re-learns the delay densities and the Markov chain from the assignment's parents
    /// in scope, and rescores every parent in scope.
    pub(super) fn learn(&mut self) {
        let calls = self.calls;
        let bins = calls.bins.count();
        let mut model = Model::empty(calls.events, calls.callers);
        let mut delays: Vec<f64> = Vec::new();
        let mut pooled: Vec<f64> = Vec::new();
        // Keys of the specific densities in the order first seen, so the prior is
        // added in a fixed order whatever the table.
        let mut delay_keys: Vec<(u64, usize)> = Vec::new();
        let mut transitions: HashMap<u64, f64> = HashMap::new();
        let mut follows: HashMap<u64, f64> = HashMap::new();
        let mut waits = vec![0.0; 3 * calls.link_keys];
        let mut open = self.open.borrow_mut();
        let cutoffs = if self.robust {
            self.cutoffs(&mut open)
        } else {
            HashMap::new()
        };
        for p in 0..self.scope.learned {
            calls.walk(p, self.children.of(p), &mut open, |factor| {
                if let Some(wait) = factor.awaited {
                    waits[3 * factor.delay_key as usize + wait as usize] += 1.0;
                    return;
                }
                *transitions.entry(factor.transition_key).or_default() += 1.0;
                if !factor.timed {
                    return;
                }
                if self.follows && calls.dense {
                    *follows
                        .entry(follows_key(calls.events, &factor))
                        .or_default() += 1.0;
                }
                let bin = calls.table.index(factor.delay);
                if let Some(&cutoff) = cutoffs.get(&factor.delay_key) {
                    if self.learned_density(factor.delay_key, bin) < cutoff {
                        return;
                    }
                }
                let mut at = model.delay_at.get(factor.delay_key, NO_DENSITY);
                if at == NO_DENSITY {
                    at = delays.len() as u32;
                    delays.resize(delays.len() + bins, 0.0);
                    model.delay_at.set(factor.delay_key, at);
                    delay_keys.push((factor.delay_key, factor.pooled_key));
                }
                delays[at as usize + bin] += 1.0;
                let pool = &mut model.pooled_at[factor.pooled_key];
                if *pool == NO_DENSITY {
                    *pool = pooled.len() as u32;
                    pooled.resize(pooled.len() + bins, 0.0);
                }
                pooled[*pool as usize + bin] += 1.0;
            });
        }
        drop(open);
        smooth_histograms(&mut delays, bins, SMOOTHING);
        smooth_histograms(&mut pooled, bins, SMOOTHING);
        // Each pooled histogram as a density.
        for histogram in pooled.chunks_mut(bins) {
            let total: f64 = histogram.iter().sum();
            histogram.iter_mut().for_each(|w| *w /= total);
        }
        // A specific density is its counts plus the pooled density weighted as
        // PRIOR samples: the mean of a Dirichlet posterior centred on the pooled one,
        // so a (caller, event, action) seen a few times cannot overfit its own choice.
        for &(key, pooled_key) in &delay_keys {
            let at = model.delay_at.get(key, NO_DENSITY) as usize;
            let pool = model.pooled_at[pooled_key] as usize;
            for b in 0..bins {
                delays[at + b] += PRIOR * pooled[pool + b];
            }
        }
        log_densities(&mut delays, bins, UNIFORM);
        for histogram in pooled.chunks_mut(bins) {
            histogram
                .iter_mut()
                .for_each(|w| *w = (*w * (1.0 - UNIFORM) + UNIFORM / bins as f64).ln());
        }
        per_time(&mut delays, &calls.ln_span);
        per_time(&mut pooled, &calls.ln_span);
        model.density = delays;
        model.pooled = pooled;

        // Totals per (caller, previous action): the transition key with action 0.
        let action = calls.events.count();
        let mut totals: HashMap<u64, f64> = HashMap::new();
        for (&key, &n) in &transitions {
            *totals.entry(key - key % action).or_default() += n;
        }
        let spread = PSEUDO_COUNT * calls.actions;
        for (&key, &n) in &transitions {
            let total = totals[&(key - key % action)];
            model
                .transition
                .set(key, ((n + PSEUDO_COUNT) / (total + spread)).ln());
        }
        for (&key, &total) in &totals {
            model
                .transition
                .set(key, (PSEUDO_COUNT / (total + spread)).ln());
        }
        // ln P(event before | caller, previous action, action), for every event of
        // every (caller, previous action, action) seen.
        let events = calls.events.count();
        let mut groups: HashMap<u64, f64> = HashMap::new();
        for (&key, &n) in &follows {
            *groups.entry(key - key % events).or_default() += n;
        }
        let spread = PSEUDO_COUNT * events as f64;
        for (&group, &total) in &groups {
            for before in 0..events {
                let n = follows.get(&(group + before)).copied().unwrap_or(0.0);
                model
                    .follows
                    .set(group + before, ((n + PSEUDO_COUNT) / (total + spread)).ln());
            }
        }
        // ln P(a parent waits for a call of kind C, or not, or makes it after it
        // answered), per (A, C).
        model.awaited_log = waits
            .chunks(3)
            .flat_map(|n| {
                let total = n.iter().sum::<f64>() + 3.0 * PSEUDO_COUNT;
                n.iter()
                    .map(|&n| ((n + PSEUDO_COUNT) / total).ln())
                    .collect::<Vec<f64>>()
            })
            .collect();
        self.model = model;
        self.learn_links();
        self.rescore_all();
    }

    /// ln density, under the model learned last, of a delay in `bin` for the density
    /// of `delay_key`, if it has one of its own.
    pub(super) fn learned_density(&self, delay_key: u64, bin: usize) -> f64 {
        match self.model.delay_at.get(delay_key, NO_DENSITY) {
            NO_DENSITY => f64::NAN,
            at => self.model.density[at as usize + bin],
        }
    }

    /// Per delay density learned last, the ln density below which the worst-fitting
    /// [`LEFT_OUT`] of its delays under the present assignment fall: hard EM from a
    /// greedy answer whose links are mostly wrong learns densities broad enough to
    /// keep them, and learning again from the delays that fit best lets each sharpen
    /// towards the true one.
    pub(super) fn cutoffs(&self, open: &mut Vec<(Nanos, u32)>) -> HashMap<u64, f64> {
        let calls = self.calls;
        let mut fits: HashMap<u64, Vec<f64>> = HashMap::new();
        for p in 0..self.scope.learned {
            calls.walk(p, self.children.of(p), open, |factor| {
                if factor.awaited.is_some() || !factor.timed {
                    return;
                }
                let ln = self.learned_density(factor.delay_key, calls.table.index(factor.delay));
                if !ln.is_nan() {
                    fits.entry(factor.delay_key).or_default().push(ln);
                }
            });
        }
        fits.into_iter()
            .map(|(key, mut ln)| {
                let at = (ln.len() as f64 * LEFT_OUT) as usize;
                let (_, cutoff, _) = ln.select_nth_unstable_by(at, f64::total_cmp);
                (key, *cutoff)
            })
            .collect()
    }

    /// Learns the per-link start-delay and return-gap densities per (A, C) from the
    /// children in scope and the distribution of how many children of kind C a parent
    /// called by A makes from the parents in scope, and the fits of the links of the
    /// children in reach.
    pub(super) fn learn_links(&mut self) {
        let calls = self.calls;
        let bins = calls.bins.count();
        let keys = calls.link_keys;
        let parents = &self.candidates.parents;
        let key_of = |k: usize, link: u32| {
            calls.caller[parents[link as usize] as usize] as usize * calls.events.kinds as usize
                + calls.kind[k] as usize
        };
        let mut start = vec![0.0; keys * bins];
        let mut end = vec![0.0; keys * bins];
        let searched = &self.chosen[..self.scope.children as usize];
        for (k, &link) in searched.iter().enumerate() {
            if link == NO_LINK {
                continue;
            }
            let [at, gap] = calls.link_bins[link as usize];
            let key = key_of(k, link);
            start[key * bins + at as usize] += 1.0;
            end[key * bins + gap as usize] += 1.0;
        }
        for histograms in [&mut start, &mut end] {
            smooth_histograms(histograms, bins, SMOOTHING);
            // Shares per bin, as the paper's scoreboard reads them: in time too, they
            // would double the pull the sequence's densities already have towards
            // short delays (penalty-breaker at ×4: 20.8% of instances in false
            // patterns against 4.1%; media 77.7% of requests right against 79.5%).
            log_densities(histograms, bins, UNIFORM);
        }
        let affinity = self.learn_affinity();
        self.siblings = self.learn_siblings();
        self.rank_log = if self.ranks {
            self.learn_ranks()
        } else {
            Vec::new()
        };
        let mut fit = std::mem::take(&mut self.fit);
        fit.clear();
        for k in 0..self.scope.reach {
            for link in self.row(k) {
                let [at, gap] = calls.link_bins[link as usize];
                let key = key_of(k as usize, link);
                let mut value = start[key * bins + at as usize] + end[key * bins + gap as usize];
                if self.ranks {
                    value += self.rank_log_of(k, link);
                }
                if let Some(affinity) = &affinity {
                    let own = self.chosen[k as usize] == link;
                    value += affinity.log_odds(calls, k, parents[link as usize], own);
                }
                fit.push(value as f32);
            }
        }
        self.fit = fit;
        self.affinity = affinity;
        let (sum, n) = searched
            .iter()
            .filter(|&&l| l != NO_LINK)
            .fold((0.0, 0.0), |(s, n), &l| {
                (s + f64::from(self.fit[l as usize]), n + 1.0)
            });
        self.mean_fit = if n > 0.0 { sum / n } else { 0.0 };

        let width = MAX_CHILDREN + 1;
        let kinds = calls.events.kinds as usize;
        let mut histogram = vec![0.0; keys * width];
        let mut parents_of = vec![0.0; calls.callers];
        let mut seen = Vec::new();
        for p in 0..self.scope.learned as usize {
            let a = calls.caller[p] as usize;
            parents_of[a] += 1.0;
            seen.clear();
            seen.extend(self.children.of(p as u32).map(|c| calls.kind[c as usize]));
            seen.sort_unstable();
            for run in seen.chunk_by(|x, y| x == y) {
                histogram[(a * kinds + run[0] as usize) * width + run.len().min(MAX_CHILDREN)] +=
                    1.0;
            }
        }
        let spread = PSEUDO_COUNT * width as f64;
        for (key, counts) in histogram.chunks_mut(width).enumerate() {
            let parents = parents_of[key / kinds.max(1)];
            let with: f64 = counts[1..].iter().sum();
            counts[0] = (parents - with).max(0.0);
            let total = parents.max(with) + spread;
            let made: f64 = counts.iter().enumerate().map(|(n, c)| n as f64 * c).sum();
            for c in counts.iter_mut() {
                *c = (*c + PSEUDO_COUNT) / total;
            }
            if self.pinned && parents > 0.0 {
                pin(counts, made / parents);
            }
            for c in counts.iter_mut() {
                *c = c.ln();
            }
        }
        self.none_log = (0..calls.callers)
            .map(|a| (0..kinds).map(|c| histogram[(a * kinds + c) * width]).sum())
            .collect();
        self.count_log = histogram;
        self.parents_of = parents_of;
        self.set_odds_known.get_mut().clear();
        if self.whole_sets {
            self.count_sets();
        }
    }

    /// Per kind of child and rank bin, ln P(an offset in that bin) per offset, learned
    /// from the children in scope: how far, in places, each child's parent came before
    /// or after it. Where a queue serves requests in the order they came, near zero
    /// however long the wait (the 16-worker gRPC proxy at 64 streams, whose requests
    /// waited 82 ms in its queue: 42% of the true offsets 0, 85% within two places).
    pub(super) fn learn_ranks(&self) -> Vec<f64> {
        let calls = self.calls;
        let kinds = calls.events.kinds as usize;
        let mut histogram = vec![0.0; kinds * RANK_BINS];
        for (k, &link) in self.chosen[..self.scope.children as usize]
            .iter()
            .enumerate()
        {
            if link == NO_LINK {
                continue;
            }
            let p = self.candidates.parents[link as usize];
            histogram[calls.kind[k] as usize * RANK_BINS + calls.rank_bin(k as u32, p)] += 1.0;
        }
        // Neighbouring offsets shared: hard EM from the start ordered by arrivals, whose
        // every child is as near its parent's place as it can be, would learn offsets
        // tighter than the queue's and hold every child there.
        smooth_histograms(&mut histogram, RANK_BINS, RANK_SMOOTHING);
        for counts in histogram.chunks_mut(RANK_BINS) {
            let total: f64 = counts.iter().sum::<f64>() + PSEUDO_COUNT * RANK_BINS as f64;
            for (bin, c) in counts.iter_mut().enumerate() {
                *c = ((*c + PSEUDO_COUNT) / total).ln() - ln_rank_width(bin);
            }
        }
        histogram
    }

    /// ln P, per offset, of the offset of link `link` of child `k` under the places
    /// learned last; 0 for a child of a kind not ranked ([`NodeCalls::ranked_kind`]).
    pub(super) fn rank_log_of(&self, k: u32, link: u32) -> f64 {
        let kind = self.calls.kind[k as usize] as usize;
        if !self.calls.ranked_kind[kind] {
            return 0.0;
        }
        let p = self.candidates.parents[link as usize];
        self.rank_log[kind * RANK_BINS + self.calls.rank_bin(k, p)]
    }

    /// Learns how the connections of the node's calls out follow those of its calls in,
    /// from the children in scope: where it predicts them better than their kind's mix
    /// of connections does, by [`AFFINITY_GATE`] nats per child with each child's own
    /// link left out, the factor the links' fits then get; `None` (a flat factor, the
    /// same answers as without it) where it does not, or connections are unknown.
    pub(super) fn learn_affinity(&self) -> Option<Affinity> {
        let calls = self.calls;
        if calls.child_connection.is_empty() || calls.parent_connection.is_empty() {
            return None;
        }
        let parents = &self.candidates.parents;
        let mut affinity = Affinity::default();
        let searched = &self.chosen[..self.scope.children as usize];
        let known = |k: usize, link: u32| {
            if link == NO_LINK {
                return None;
            }
            let (child, parent) = (
                calls.child_connection[k],
                calls.parent_connection[parents[link as usize] as usize],
            );
            (child != NO_CONNECTION && parent != NO_CONNECTION).then_some((
                parent,
                child,
                calls.kind[k],
            ))
        };
        for (k, &link) in searched.iter().enumerate() {
            if let Some((parent, child, kind)) = known(k, link) {
                affinity.count(parent, child, kind);
            }
        }
        let (mut gain, mut children) = (0.0, 0.0);
        for (k, &link) in searched.iter().enumerate() {
            if known(k, link).is_some() {
                gain += affinity.log_odds(calls, k as u32, parents[link as usize], true);
                children += 1.0;
            }
        }
        (children > 0.0 && gain / children >= AFFINITY_GATE).then_some(affinity)
    }

    /// Learns how the connection of each call out follows the connection of the call
    /// its parent made before it, over the parents in scope: a worker that owns one
    /// connection of each kind and serves one request at a time makes all of a
    /// request's calls on its own connections, whichever connection the request came
    /// in on (a servlet pool's queue, which the affinity to the connection in cannot
    /// see). Where it predicts them by [`AFFINITY_GATE`] nats per pair, each pair
    /// left out, the factor parents' sequences then get
    /// ([`Assignment::sibling_log`]); `None` where it does not, or connections are
    /// unknown.
    pub(super) fn learn_siblings(&self) -> Option<Siblings> {
        let calls = self.calls;
        if calls.child_connection_index.is_empty() {
            return None;
        }
        let connection = |k: u32| calls.child_connection_index[k as usize];
        let known_pairs = |p: u32| {
            self.children
                .of(p)
                .zip(self.children.of(p).skip(1))
                .filter(|&(a, b)| connection(a) != NO_INDEX && connection(b) != NO_INDEX)
        };
        let mut siblings = Siblings::new(
            calls.child_connections,
            calls.events.kinds as usize,
            calls.child_connection_index.len(),
        );
        let mut kind_of = vec![0u32; calls.child_connections];
        for p in 0..self.scope.learned {
            for (a, b) in known_pairs(p) {
                siblings.count(connection(a), connection(b), calls.kind[b as usize]);
                siblings.counted_next[a as usize] = b;
                kind_of[connection(b) as usize] = calls.kind[b as usize];
            }
        }
        siblings.weigh(|after| kind_of[after as usize]);
        let (mut gain, mut pairs) = (0.0, 0.0);
        for p in 0..self.scope.learned {
            for (a, b) in known_pairs(p) {
                gain += siblings.odds(connection(a), connection(b), calls.kind[b as usize], true);
                pairs += 1.0;
            }
        }
        (pairs > 0.0 && gain / pairs >= AFFINITY_GATE).then_some(siblings)
    }

    /// Counts how many parents in scope made each set of children.
    pub(super) fn count_sets(&mut self) {
        let calls = self.calls;
        let mut made: HashMap<u64, (f64, usize)> = HashMap::new();
        let mut seen = self.kinds.borrow_mut();
        for p in 0..self.scope.learned as usize {
            seen.clear();
            seen.extend(self.children.of(p as u32).map(|c| calls.kind[c as usize]));
            seen.sort_unstable();
            let a = calls.caller[p] as usize;
            let runs = seen.chunk_by(|x, y| x == y).map(|run| (run[0], run.len()));
            made.entry(set_key(a, runs)).or_insert((0.0, a)).0 += 1.0;
        }
        drop(seen);
        let mut base = vec![SET_PRIOR; calls.callers];
        let mut sets: HashMap<u64, f64> = HashMap::with_capacity(made.len());
        let mut keys: Vec<(u64, (f64, usize))> = made.into_iter().collect();
        keys.sort_unstable_by_key(|&(key, _)| key);
        for (key, (n, a)) in keys {
            base[a] += SET_DISCOUNT.min(n);
            sets.insert(key, n);
        }
        self.set_base = base;
        self.sets = sets;
        self.set_odds_known.get_mut().clear();
    }

    /// Drops the sets learned, so that kinds count independently, and the odds weighed
    /// with them.
    pub(super) fn forget_sets(&mut self) {
        self.sets.clear();
        self.set_odds_known.get_mut().clear();
    }

    /// Adds the sets of children to the model learned last, and rescores every parent.
    pub(super) fn learn_sets(&mut self) {
        self.count_sets();
        self.rescore_all();
    }
}
