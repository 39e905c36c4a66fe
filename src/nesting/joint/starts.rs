//! The starts of the joint search and how each is settled: hard EM from a given
//! assignment (plain, robust or with counts pinned), soft EM over the per-link
//! densities (for the pinned start with each parent's share of children balanced),
//! and, with asynchronous
//! children, soft EM over the delays from each candidate's answer. Owns no scoring;
//! the model and the search do that.

use super::calls::NodeCalls;
use super::model::{per_time, SMOOTHING, UNIFORM};
use super::search::{Assignment, Scope};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::candidates::{outlives, Candidates};
use crate::nesting::scoreboard::{log_densities, smooth_histograms, Bins};
use crate::trace::{Nanos, NodeId};
use hashbrown::HashMap;

/// Most rounds of re-learning the model, per stage: later rounds put more requests in
/// shapes that do not exist at high parallelism (docs/tuning.md).
pub(super) const MAX_ROUNDS: usize = 6;
/// The search has settled when a round changes at most one child in this many.
pub(super) const SETTLED: usize = 1000;
/// Rounds of soft EM for the second start: more changed next to nothing (docs/tuning.md).
pub(super) const SOFT_ROUNDS: usize = 10;
/// Rounds of balancing each parent's shares of children per round of soft EM.
pub(super) const BALANCE_ROUNDS: usize = 20;
/// Most a parent's shares of one kind are scaled by in one round of balancing, so that
/// a parent no child fits well is not handed children by scaling alone.
const MOST_SCALING: f64 = 1e3;

/// A candidate that answered before the child left: (candidate, key (A, C), bin of the
/// delay from its answer).
pub(super) type AnsweredLink = (u32, usize, usize);

/// The start of children that only calls they outlived could have made (with
/// asynchronous children): soft EM over the delay from each candidate's answer to the
/// child leaving, a density per (parent's caller, child's callee) in time, among the
/// candidates that had answered before the child left. Every candidate starts with an
/// equal share; the delays to the wrong ones spread over the window while the true ones
/// pile up, and each round re-shares by the density learned from the shares. A child
/// whose candidates were all still open when it left (they answered before it
/// returned) starts with the one that answered last: their delays from the answer,
/// negative, would all fall in the first bin, one microsecond wide, and draw the rest.
/// Other children keep `initial`. (Starting each with the call answered last, the
/// search learned write-back delays of 0.7–3 ms where the study's are 4–6 ms, and at
/// ×4 parallelism 400 of the 416 links it was sure of were wrong.)
pub fn async_start(
    pairs: &[CallPair],
    incoming: &[u32],
    outgoing: &[u32],
    candidates: &Candidates,
    (bins, tick, skew_window): (Bins, Nanos, Nanos),
    mut initial: Vec<u32>,
) -> Vec<u32> {
    let table = bins.table();
    let count = bins.count();
    let ln_span = bins.ln_spans(tick, 0);
    let mut keys: HashMap<(NodeId, NodeId), usize> = HashMap::new();
    // Per child that only calls it outlived could have made: (candidate, key, bin) of
    // each candidate that had answered before it left.
    let mut rows: Vec<(usize, Vec<AnsweredLink>)> = Vec::new();
    for (k, &child) in outgoing.iter().enumerate() {
        let child = &pairs[child as usize];
        let row = candidates.of(k);
        let parent = |p: u32| &pairs[incoming[p as usize] as usize];
        let outlived =
            !row.is_empty() && row.iter().all(|&p| outlives(child, parent(p), skew_window));
        if !outlived {
            continue;
        }
        let links: Vec<AnsweredLink> = row
            .iter()
            .filter(|&&p| parent(p).callee_return <= child.caller_send)
            .map(|&p| {
                let next = keys.len();
                let key = *keys.entry((parent(p).caller, child.callee)).or_insert(next);
                (
                    p,
                    key,
                    table.index(child.caller_send - parent(p).callee_return),
                )
            })
            .collect();
        if links.is_empty() {
            // Only calls that were open when it left and answered before it returned:
            // the one that answered last, as the greedy step would have had it if the
            // containment test had held.
            if let Some(&p) = row.iter().max_by_key(|&&p| parent(p).callee_return) {
                initial[k] = p;
            }
            continue;
        }
        rows.push((k, links));
    }
    if rows.is_empty() {
        return initial;
    }
    let mut weights: Vec<Vec<f64>> = rows
        .iter()
        .map(|(_, links)| vec![1.0 / links.len() as f64; links.len()])
        .collect();
    for _ in 0..SOFT_ROUNDS {
        let mut density = vec![0.0; keys.len() * count];
        for ((_, links), shares) in rows.iter().zip(&weights) {
            for (&(_, key, bin), &w) in links.iter().zip(shares) {
                density[key * count + bin] += w;
            }
        }
        smooth_histograms(&mut density, count, SMOOTHING);
        log_densities(&mut density, count, UNIFORM);
        per_time(&mut density, &ln_span);
        for ((_, links), shares) in rows.iter().zip(&mut weights) {
            let logits: Vec<f64> = links
                .iter()
                .map(|&(_, key, bin)| density[key * count + bin])
                .collect();
            for (w, share) in shares.iter_mut().zip(normalised(&logits)) {
                *w = share;
            }
        }
    }
    for ((k, links), shares) in rows.iter().zip(&weights) {
        initial[*k] = links[likeliest(shares.iter().copied())].0;
    }
    initial
}

/// e^logit over the sum of them all, without overflow.
pub(super) fn normalised(logits: &[f64]) -> impl Iterator<Item = f64> + '_ {
    let top = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let total: f64 = logits.iter().map(|l| (l - top).exp()).sum();
    logits.iter().map(move |l| (l - top).exp() / total)
}

/// The position of the largest share, the first of equal ones.
pub(super) fn likeliest(shares: impl Iterator<Item = f64>) -> usize {
    shares
        .enumerate()
        .fold((f64::NEG_INFINITY, 0), |best, (i, w)| {
            if w > best.0 {
                (w, i)
            } else {
                best
            }
        })
        .1
}

/// How hard EM learns as it settles a start.
#[derive(Clone, Copy, PartialEq, Eq, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Learning {
    /// Each delay density learned from the delays that fit it best ([`super::model::LEFT_OUT`]).
    pub(super) robust: bool,
    /// Counts of children pinned and whole kinds placed at once
    /// ([`Assignment::pinned`]).
    pub(super) pinned: bool,
    /// The links' fits weigh places among arrivals against places among calls out
    /// ([`Assignment::ranks`]).
    pub(super) ranks: bool,
}

impl Learning {
    pub(super) const PLAIN: Learning = Learning {
        robust: false,
        pinned: false,
        ranks: false,
    };
    pub(super) const ROBUST: Learning = Learning {
        robust: true,
        pinned: false,
        ranks: false,
    };
    pub(super) const PINNED: Learning = Learning {
        robust: true,
        pinned: true,
        ranks: false,
    };
    pub(super) const RANKED: Learning = Learning {
        robust: false,
        pinned: false,
        ranks: true,
    };

    fn apply(self, state: &mut Assignment) {
        state.robust = self.robust;
        state.pinned = self.pinned;
        state.follows = self.pinned;
        state.ranks = self.ranks;
    }
}

/// Hard EM from `initial` until it settles, on the calls in `scope`, learning as
/// `learning` says.
pub(super) fn settle<'a>(
    calls: &'a NodeCalls<'a>,
    candidates: &'a Candidates,
    initial: Vec<u32>,
    learning: Learning,
    scope: Scope,
) -> Assignment<'a> {
    let mut state = Assignment::new(calls, candidates, initial, scope);
    learning.apply(&mut state);
    rounds(&mut state);
    state
}

/// Carries an end settled on a window of the node's children over those in `scope`, by
/// the same rounds of hard EM: the window's children start where the window settled,
/// the others where their start put them, and the first model is learned from both.
/// A start's rounds from scratch on every child, three starts of up to twelve rounds,
/// were the cost of the default choice at real concurrency; carried over, one start
/// runs them, and it ends where settling everything ends (on the 40-client shop at 1 M
/// messages, 73.1% of 143,895 instances exactly right against 73.0%). Learning first
/// matters: searched under the window's model instead, the rest got stuck where their
/// start put them (69.4% against 73.7% on 60 s of the shop). Nothing to do for an end settled
/// on everything.
pub(super) fn extend(state: &mut Assignment, learning: Learning, scope: Scope) {
    if state.scope == scope {
        return;
    }
    state.scope = scope;
    state.remember_gains();
    learning.apply(state);
    // The window's sets go: the kinds are counted independently first, as from any start.
    state.forget_sets();
    rounds(state);
}

/// The rounds of hard EM: the kinds of children counted independently, then whole sets;
/// with counts pinned, whole kinds placed again at once before each round's search,
/// and no whole sets.
fn rounds(state: &mut Assignment) {
    // Kinds counted independently first, whole sets after: learned from the greedy
    // start, whole sets would hold on to its odd ones, since undoing one takes two
    // moves at once. (Sets from the start: multi-tier at ×2 parallelism, 534 instances
    // in false patterns instead of 94.) Pinned counts leave the sets out: learned from
    // the pinned end, they gave the same ends at half the speed (docs/tuning.md).
    let stages: &[bool] = if state.pinned {
        &[false]
    } else {
        &[false, true]
    };
    for &whole_sets in stages {
        state.whole_sets = whole_sets;
        for round in 0..MAX_ROUNDS {
            // Whole sets start from the settled assignment, whose delays the last
            // round learned already: only the sets are new, and only the children
            // near a parent whose set they find unlikely need a look.
            let changed = if whole_sets && round == 0 {
                state.learn_sets();
                let seeds = state.near_unlikely_sets();
                state.search(Some(seeds))
            } else {
                state.learn();
                let placed = if state.pinned { state.place_kinds() } else { 0 };
                placed + state.search(None)
            };
            // A round that changed almost nothing barely moves the model: another would
            // cost a full pass for next to nothing.
            if changed * SETTLED <= state.scope.children as usize {
                break;
            }
        }
    }
}

/// Each child, in the order children returned, given to the candidate that answered
/// first after the child returned among those not yet given a child of its kind;
/// `fallback`'s parent where none is left. A service that answers as soon as its last
/// call returns (a proxy forwarding each request as one call) is matched exactly, as
/// far as its answers keep the order of its calls' returns, however long requests
/// waited in its queue before they called out.
pub(super) fn returns_start(
    calls: &NodeCalls,
    candidates: &Candidates,
    fallback: &[u32],
) -> Vec<u32> {
    let kinds = calls.events.kinds as usize;
    let mut given = vec![false; calls.incoming.len() * kinds];
    let mut by_return: Vec<u32> = (0..calls.outgoing.len() as u32).collect();
    by_return.sort_by_key(|&k| (calls.child_times(k)[1], k));
    let mut parents = fallback.to_vec();
    for k in by_return {
        let c = calls.kind[k as usize] as usize;
        let returned = calls.child_times(k)[1];
        let first = candidates
            .of(k as usize)
            .iter()
            .copied()
            .filter(|&p| !given[p as usize * kinds + c])
            .filter(|&p| calls.parent_times(p)[1] >= returned)
            .min_by_key(|&p| (calls.parent_times(p)[1], p));
        if let Some(p) = first {
            given[p as usize * kinds + c] = true;
            parents[k as usize] = p;
        }
    }
    parents
}

/// Each child of a kind made once per request ([`NodeCalls::ranked_kind`]) given to the
/// candidate whose place among the node's arrivals is nearest its own among the calls
/// out of its kind; `fallback`'s parent where it has none, and for the other kinds. A
/// queue that serves requests in the order they came (first in, first out, with some
/// jitter among its workers) is matched near exactly, however long requests waited in
/// it and in whatever order they answered. A parent may be given two children of a
/// kind here, for hard EM to settle: given once each, in the order children left, one
/// child whose parent was not a candidate pushed every later one a place on (the
/// 16-worker gRPC proxy at 64 streams started 9 to 16 places off).
pub(super) fn arrivals_start(
    calls: &NodeCalls,
    candidates: &Candidates,
    fallback: &[u32],
) -> Vec<u32> {
    (0..calls.outgoing.len())
        .map(|k| {
            if !calls.ranked_kind[calls.kind[k] as usize] {
                return fallback[k];
            }
            candidates
                .of(k)
                .iter()
                .copied()
                .min_by_key(|&p| (calls.rank_distance(k as u32, p), p))
                .unwrap_or(fallback[k])
        })
        .collect()
}

/// A first answer by soft EM over the per-link densities alone (the paper's scoreboard
/// and its mirror on the return side): every candidate starts with an equal share of
/// its child, and each round re-learns the densities from the shares and re-shares
/// every child by them. Each child then goes to its likeliest parent.
///
/// Calls that had answered before the child left (asynchronous candidates) hold no
/// share: their return gaps, all negative, would pile into one bin and draw children
/// wholesale. A child that only such calls could have made keeps its `initial` parent.
///
/// `open` is, per child, how many of its candidates enclose it; `balancing` balances
/// each round's shares per parent ([`balance`]) where no call into the node was lost.
pub(super) fn soft_start(
    calls: &NodeCalls,
    candidates: &Candidates,
    open: &[usize],
    initial: &[u32],
    balancing: bool,
) -> Vec<u32> {
    let bins = calls.bins.count();
    let children = calls.outgoing.len();
    let mut links: Vec<(u32, u16, u16)> = Vec::with_capacity(candidates.parents.len());
    let mut answered: Vec<bool> = Vec::with_capacity(candidates.parents.len());
    let mut weight: Vec<f32> = Vec::with_capacity(candidates.parents.len());
    for (k, &open) in open.iter().enumerate() {
        for &p in candidates.of(k) {
            let (key, start, gap) = calls.link_bins(k as u32, p);
            links.push((key as u32, start as u16, gap as u16));
            let outlived = calls.answered(k as u32, p);
            answered.push(outlived);
            weight.push(if outlived { 0.0 } else { 1.0 / open as f32 });
        }
    }
    let mut logits: Vec<f64> = Vec::new();
    // Where calls into the node were lost, their children have no parent in the trace,
    // and balancing would hand them to other requests' (with every tenth call lost,
    // 79% of those children were left roots against 94% unbalanced).
    let balanced = balancing && calls.orphan_log.iter().all(|l| l.is_infinite());
    for _ in 0..SOFT_ROUNDS {
        let mut start = vec![0.0; calls.link_keys * bins];
        let mut end = vec![0.0; calls.link_keys * bins];
        for (&(key, at, gap), &w) in links.iter().zip(&weight) {
            start[key as usize * bins + at as usize] += f64::from(w);
            end[key as usize * bins + gap as usize] += f64::from(w);
        }
        for histograms in [&mut start, &mut end] {
            smooth_histograms(histograms, bins, SMOOTHING);
            log_densities(histograms, bins, UNIFORM);
            per_time(histograms, &calls.ln_span);
        }
        for (k, &open) in open.iter().enumerate() {
            let range = candidates.offsets[k] as usize..candidates.offsets[k + 1] as usize;
            logits.clear();
            logits.extend(
                links[range.clone()]
                    .iter()
                    .zip(&answered[range.clone()])
                    .map(|(&(key, at, gap), &outlived)| {
                        if outlived {
                            f64::NEG_INFINITY
                        } else {
                            start[key as usize * bins + at as usize]
                                + end[key as usize * bins + gap as usize]
                        }
                    }),
            );
            if open == 0 {
                continue;
            }
            for (w, share) in weight[range].iter_mut().zip(normalised(&logits)) {
                *w = share as f32;
            }
        }
        if balanced {
            balance(calls, candidates, (open, &answered), &mut weight);
        }
    }
    (0..children)
        .map(|k| {
            if open[k] == 0 {
                return initial[k];
            }
            let range = candidates.offsets[k] as usize..candidates.offsets[k + 1] as usize;
            let best = likeliest(weight[range].iter().map(|&w| f64::from(w)));
            candidates.of(k)[best]
        })
        .collect()
}

/// Balances soft EM's shares (per link, each child's summing to 1) so that every parent
/// expects about as many children of each kind as the parents of its caller do on
/// average (Sinkhorn's scaling, [`BALANCE_ROUNDS`] times): each parent's shares of a
/// kind are scaled to that mean, then each child's shares to 1 again. Unbalanced, at
/// saturation the shares of a child went to the few parents whose delays fit best
/// overall, hard EM settled from there on piles and parents with nothing, and the
/// 80-client shop ended with 0.0% of requests exactly right (45.4% balanced). Only the
/// pinned start is balanced: where counts are far from their mean (children-0-2 at ×8,
/// whose parents make none or two), the balanced soft start's end won and kept 33.6%
/// of requests exact against 54.1%.
fn balance(
    calls: &NodeCalls,
    candidates: &Candidates,
    (open, answered): (&[usize], &[bool]),
    weight: &mut [f32],
) {
    let kinds = calls.events.kinds as usize;
    let parents = calls.incoming.len();
    let mut parents_of = vec![0.0f64; calls.callers];
    for p in 0..parents {
        parents_of[calls.caller[p] as usize] += 1.0;
    }
    let mut expected = vec![0.0f64; parents * kinds];
    let mut mean = vec![0.0f64; calls.callers * kinds];
    let balanced = |k: usize| open[k] > 0;
    for _ in 0..BALANCE_ROUNDS {
        expected.fill(0.0);
        for k in (0..open.len()).filter(|&k| balanced(k)) {
            let c = calls.kind[k] as usize;
            let links = candidates.offsets[k] as usize;
            for (i, &p) in candidates.of(k).iter().enumerate() {
                expected[p as usize * kinds + c] += f64::from(weight[links + i]);
            }
        }
        mean.fill(0.0);
        for p in 0..parents {
            let a = calls.caller[p] as usize;
            for c in 0..kinds {
                mean[a * kinds + c] += expected[p * kinds + c];
            }
        }
        for (a, means) in mean.chunks_mut(kinds.max(1)).enumerate() {
            means.iter_mut().for_each(|m| *m /= parents_of[a].max(1.0));
        }
        for k in (0..open.len()).filter(|&k| balanced(k)) {
            let c = calls.kind[k] as usize;
            let range = candidates.offsets[k] as usize..candidates.offsets[k + 1] as usize;
            let mut total = 0.0f64;
            for (i, &p) in candidates.of(k).iter().enumerate() {
                let link = range.start + i;
                if answered[link] {
                    continue;
                }
                let p = p as usize;
                let target = mean[calls.caller[p] as usize * kinds + c];
                let scale =
                    (target / expected[p * kinds + c].max(f64::MIN_POSITIVE)).min(MOST_SCALING);
                let w = f64::from(weight[link]) * scale;
                weight[link] = w as f32;
                total += w;
            }
            if total > 0.0 {
                for w in &mut weight[range] {
                    *w = (f64::from(*w) / total) as f32;
                }
            }
        }
    }
}
