//! The starts of the joint search and how each is settled: hard EM from a given
//! assignment (plain or robust), soft EM over the per-link densities, and, with
//! asynchronous children, soft EM over the delays from each candidate's answer. Owns
//! no scoring; the model and the search do that.

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

/// Hard EM from `initial` until it settles, on the calls in `scope`; `robust` learns
/// each delay density from the delays that fit it best ([`LEFT_OUT`]).
pub(super) fn settle<'a>(
    calls: &'a NodeCalls<'a>,
    candidates: &'a Candidates,
    initial: Vec<u32>,
    robust: bool,
    scope: Scope,
) -> Assignment<'a> {
    let mut state = Assignment::new(calls, candidates, initial, scope);
    state.robust = robust;
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
pub(super) fn extend(state: &mut Assignment, robust: bool, scope: Scope) {
    if state.scope == scope {
        return;
    }
    state.scope = scope;
    state.remember_gains();
    state.robust = robust;
    // The window's sets go: the kinds are counted independently first, as from any start.
    state.forget_sets();
    rounds(state);
}

/// The rounds of hard EM: the kinds of children counted independently, then whole sets.
fn rounds(state: &mut Assignment) {
    // Kinds counted independently first, whole sets after: learned from the greedy
    // start, whole sets would hold on to its odd ones, since undoing one takes two
    // moves at once. (Sets from the start: multi-tier at ×2 parallelism, 534 instances
    // in false patterns instead of 94.)
    for whole_sets in [false, true] {
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
                state.search(None)
            };
            // A round that changed almost nothing barely moves the model: another would
            // cost a full pass for next to nothing.
            if changed * SETTLED <= state.scope.children as usize {
                break;
            }
        }
    }
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
/// `open` is, per child, how many of its candidates enclose it.
pub(super) fn soft_start(
    calls: &NodeCalls,
    candidates: &Candidates,
    open: &[usize],
    initial: &[u32],
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
