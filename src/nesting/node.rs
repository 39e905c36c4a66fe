//! One node's parent choice (steps 2 and 3 of the paper's Figure 4 for a node B):
//! candidates, B's scoreboard, the greedy choice, with an asynchronous window the
//! wider candidates, the joint choice, and dropping asynchronous links it is unsure
//! of; what `--explain` records of one decision. Owns the per-node step and what it
//! reads of the whole trace ([`WholeTrace`]); grouping calls by node, applying the
//! choices and patterns belong to [`super`].

use super::call_pairs::CallPair;
use super::scoreboard::{Bins, Scoreboard};
use super::{candidates, in_core, joint, parents, propagated, Algorithm, NestOptions, NO_PARENT};
use crate::trace::{call_id_order, Nanos, Trace};
pub(crate) struct NodeOutcome {
    /// (child, parent) as indexes into the pairs, and the confidence of the choice.
    pub(crate) chosen: Vec<(u32, u32, f32)>,
    /// (parent, how sure it is that no call outside its children is its own), as
    /// indexes into the pairs, where under 1.
    pub(crate) complete: Vec<(u32, f32)>,
    pub(crate) candidate_links: u64,
    pub(crate) children_with_candidates: u64,
    pub(crate) orphans: u64,
    pub(crate) async_children: u64,
    pub(crate) unsure: u64,
    pub(crate) late_children: u64,
    pub(crate) histograms: u64,
    pub(crate) connection_affinity: bool,
    pub(crate) sibling_affinity: bool,
    pub(crate) ids: propagated::IdLinks,
    /// The start the joint choice kept, where it compared starts.
    pub(crate) kept: Option<joint::StartKind>,
}

/// What every node's choice shares.
pub(crate) struct WholeTrace<'a> {
    pub(crate) trace: &'a Trace,
    pub(crate) pairs: &'a [CallPair],
    pub(crate) bins: Bins,
    /// The trace's tick ([`call_pairs::tick`]).
    pub(crate) tick: Nanos,
    pub(crate) options: &'a NestOptions,
    /// Per call pair, the parent the joint search starts from instead of the greedy
    /// answer ([`nest_from`]).
    pub(crate) start: Option<&'a [u32]>,
    /// A segment's core ([`nest_core`]): only its calls are counted.
    pub(crate) core: Option<(Nanos, Nanos)>,
    /// Per node, the start earlier segments kept (empty when not in segments).
    pub(crate) carried: &'a [Option<joint::StartKind>],
}

impl WholeTrace<'_> {
    /// Whether the stats count this call pair's choice: every one, or a segment's core.
    fn counts(&self, pair: u32) -> bool {
        let time = self.pairs[pair as usize].caller_send;
        self.core.map_or(true, |core| in_core(core, time))
    }
}

/// What `--explain` records of one child's decision while its node's parents are
/// chosen: the same steps as every other node's, with the scores of that one decision
/// kept. Indexes are into the node's `incoming` as [`nest_node`] left it sorted.
#[derive(Debug, Default)]
pub(crate) struct DecisionRecord {
    /// The child to record, as an index into the pairs.
    pub call: u32,
    /// Its place among the node's children in call-time order.
    pub order: usize,
    /// The paper's scores of each of its candidates.
    pub scores: Vec<parents::CandidateScore>,
    /// Its candidates for the paper's step, and for the joint search (wider with an
    /// asynchronous window).
    pub paper_row: Vec<u32>,
    pub search_row: Vec<u32>,
    /// The greedy step's parent, and the algorithm's before unsure asynchronous links
    /// are dropped (or [`NO_PARENT`]).
    pub greedy: u32,
    pub chosen: u32,
    /// With the joint choice: per candidate, the log-likelihood lost by taking it, and
    /// what the connection affinity says of it (where the node learned one).
    pub joint_losses: Vec<(u32, f64, Option<f64>)>,
    /// Candidates set aside because the call's propagated id named another one.
    pub set_aside_by_id: usize,
}

/// A key of the connection a call travelled on, the same for every call on it, or
/// [`joint::NO_CONNECTION`]: a hash of its id's connection part, with a fixed seed so
/// that answers never vary between runs.
fn connection_key(trace: &Trace, pair: &CallPair) -> u64 {
    use std::hash::BuildHasher;
    match trace.connection(pair.call_id) {
        Some(connection) => {
            foldhash::fast::FixedState::with_seed(0).hash_one(connection) & !(1 << 63)
        }
        None => joint::NO_CONNECTION,
    }
}

/// Steps 2 and 3 for one node B: candidates, B's scoreboard, the greedy choice, with
/// an asynchronous window the wider candidates, the joint choice, and dropping
/// asynchronous links it is unsure of. `lost` is the share of calls into B that the
/// trace lost. With `record`, that child's decision is kept for `--explain`.
pub(crate) fn nest_node(
    whole: &WholeTrace,
    node: crate::trace::NodeId,
    incoming: &mut [u32],
    outgoing: &mut [u32],
    lost: f64,
    record: Option<&mut DecisionRecord>,
) -> NodeOutcome {
    let WholeTrace {
        trace,
        pairs,
        bins,
        tick,
        options,
        start,
        core: _,
        carried,
    } = *whole;
    let counts = |pair: u32| whole.counts(pair);
    let board = prepare_node(
        trace,
        pairs,
        (incoming, outgoing),
        (bins, options),
        record.is_some(),
        &counts,
    );
    let order = record.as_deref().map(|record| {
        outgoing
            .iter()
            .position(|&i| i == record.call)
            .expect("a call leaves its own caller")
    });
    let mut scores = Vec::new();
    let (choice, confidence) = parents::choose_parents(
        pairs,
        incoming,
        outgoing,
        &board.candidates,
        &board.scoreboard,
        options.penalties,
        order.map(|order| (order, &mut scores)),
    );
    let greedy = order.map(|order| choice[order]);
    let widened = widen_for_async(pairs, incoming, outgoing, options, (bins, tick), choice);
    let (candidates, choice) = match widened {
        Ok((wider, choice)) => (std::borrow::Cow::Owned(wider), choice),
        Err(choice) => (std::borrow::Cow::Borrowed(&board.candidates), choice),
    };
    let mut joint_losses = Vec::new();
    let (mut connection_affinity, mut sibling_affinity) = (false, false);
    let mut kept = None;
    let mut complete = Vec::new();
    // The paper's confidence is its lead over the next candidate already.
    let (mut choice, confidence, lead) = match options.algorithm {
        Algorithm::Paper => (choice, confidence, None),
        Algorithm::Joint => {
            // The greedy confidences are replaced; free them before the search's peak.
            drop(confidence);
            let joint = joint::choose_jointly(
                pairs,
                incoming,
                outgoing,
                &candidates,
                joint::NodeSettings {
                    bins,
                    tick,
                    skew_window: options.skew_window,
                    lost,
                    async_children: options.async_window > 0,
                    reweighing: options.reweighing,
                    learn_window: options.learn_window,
                    start: carried.get(node.0 as usize).copied().flatten(),
                    pinned_start: options.pinned_start,
                },
                match start {
                    None => joint::Start::Greedy(choice),
                    Some(start) => {
                        joint::Start::Given(local_start(start, incoming, outgoing, &candidates))
                    }
                },
                order,
                joint::CallFacts {
                    operation: &|pair| trace.operation(pairs[pair as usize].call_id),
                    connection: &|pair| match options.connections {
                        true => connection_key(trace, &pairs[pair as usize]),
                        false => joint::NO_CONNECTION,
                    },
                },
            );
            joint_losses = joint.explained;
            connection_affinity = joint.connection_affinity;
            sibling_affinity = joint.sibling_affinity;
            kept = joint.kept;
            complete = (joint.complete.iter().zip(incoming.iter()))
                .filter(|&(&whole, _)| whole < 1.0)
                .map(|(&whole, &call)| (call, whole))
                .collect();
            (joint.parents, joint.confidence, Some(joint.lead))
        }
    };
    if let (Some(record), Some(order), Some(greedy)) = (record, order, greedy) {
        *record = DecisionRecord {
            call: record.call,
            order,
            scores: std::mem::take(&mut scores),
            paper_row: board.candidates.of(order).to_vec(),
            search_row: candidates.of(order).to_vec(),
            greedy,
            chosen: choice[order],
            joint_losses: std::mem::take(&mut joint_losses),
            set_aside_by_id: board.unnarrowed.as_ref().map_or(0, |rows| {
                rows.of(order).len() - board.candidates.of(order).len()
            }),
        };
    }
    let (async_children, unsure) = if options.async_window > 0 && !options.same_truth_only {
        drop_unsure_async(
            pairs,
            (incoming, outgoing),
            &mut choice,
            lead.as_deref().unwrap_or(&confidence),
            options.skew_window,
            &counts,
        )
    } else {
        (0, 0)
    };
    let late_children = if options.async_window == 0 && board.candidates.rescued > 0 {
        outgoing
            .iter()
            .zip(&choice)
            .filter(|&(&child, &local)| {
                counts(child)
                    && parent_answered_first(pairs, incoming, child, local, options.skew_window)
            })
            .count() as u64
    } else {
        0
    };
    let chosen: Vec<(u32, u32, f32)> = outgoing
        .iter()
        .zip(choice)
        .zip(confidence)
        .filter(|&((_, local), _)| local != NO_PARENT)
        .map(|((&child, local), confidence)| (child, incoming[local as usize], confidence))
        .collect();
    let children_with_candidates = (0..outgoing.len())
        .filter(|&k| !candidates.of(k).is_empty() && counts(outgoing[k]))
        .count() as u64;
    let counted_chosen = chosen.iter().filter(|c| counts(c.0)).count() as u64;
    NodeOutcome {
        // Every child with a candidate gets a parent unless its parent's call was lost,
        // or its parent did not wait for it and was not clearly likelier than the next.
        orphans: children_with_candidates - counted_chosen - unsure,
        async_children,
        unsure,
        late_children,
        chosen,
        complete,
        // The node's parallelism: its candidates before ids narrowed them, or as the
        // asynchronous window widened them.
        candidate_links: match &candidates {
            std::borrow::Cow::Owned(wider) => (0..outgoing.len())
                .filter(|&k| counts(outgoing[k]))
                .map(|k| wider.of(k).len() as u64)
                .sum(),
            std::borrow::Cow::Borrowed(_) => board.links_before_ids,
        },
        children_with_candidates,
        histograms: board.scoreboard.histograms() as u64,
        connection_affinity,
        sibling_affinity,
        ids: board.ids,
        kept,
    }
}

/// `start` (per call pair, its parent's index) for one node's children: per child, the
/// index into `incoming` of its parent if that is one of its candidates, else
/// [`NO_PARENT`].
fn local_start(
    start: &[u32],
    incoming: &[u32],
    outgoing: &[u32],
    candidates: &candidates::Candidates,
) -> Vec<u32> {
    let local: hashbrown::HashMap<u32, u32> = incoming
        .iter()
        .enumerate()
        .map(|(at, &pair)| (pair, at as u32))
        .collect();
    outgoing
        .iter()
        .enumerate()
        .map(|(k, &child)| {
            local
                .get(&start[child as usize])
                .copied()
                .filter(|p| candidates.of(k).binary_search(p).is_ok())
                .unwrap_or(NO_PARENT)
        })
        .collect()
}

/// With asynchronous children (`async_window` > 0, in inference), the candidates of
/// one node's children widened to the calls that answered before each returned (open
/// when it left, or answered at most the window before), and the greedy `choice`
/// (among the calls that enclose it) as the joint search's start, where a child that
/// only calls it outlived could have made starts from [`joint::async_start`]. The
/// paper's scoreboard knows nothing of answers: choosing among the wider candidates, it
/// handed calls that left after one request's answer to it wholesale (write-back study:
/// no request right). Otherwise `Err(choice)`, unchanged.
pub(crate) fn widen_for_async(
    pairs: &[CallPair],
    incoming: &[u32],
    outgoing: &[u32],
    options: &NestOptions,
    (bins, tick): (Bins, Nanos),
    choice: Vec<u32>,
) -> Result<(candidates::Candidates, Vec<u32>), Vec<u32>> {
    if options.async_window == 0 || options.same_truth_only {
        return Err(choice);
    }
    let reach = candidates::Reach {
        skew_window: options.skew_window,
        async_window: options.async_window,
        rescue_unenclosed: false,
        same_truth_only: false,
    };
    let wider = candidates::find_candidates(pairs, incoming, outgoing, reach);
    let scale = (bins, tick, options.skew_window);
    let choice = joint::async_start(pairs, incoming, outgoing, &wider, scale, choice);
    Ok((wider, choice))
}

/// How sure the joint choice must be of a parent that answered before its child
/// returned for the link to stand (odds of 100 to 1 over the next candidate): a wrong
/// asynchronous parent spoils two requests, and a user reads a link as a finding
/// (docs/tuning.md).
pub const ASYNC_CONFIDENCE: f32 = 0.99;

/// Leaves as roots the children whose chosen parent answered before they returned,
/// unless the choice's lead over the next candidate is [`ASYNC_CONFIDENCE`] sure. Returns (children kept with such a
/// parent, children left as roots).
fn drop_unsure_async(
    pairs: &[CallPair],
    (incoming, outgoing): (&[u32], &[u32]),
    parents: &mut [u32],
    confidence: &[f32],
    skew_window: Nanos,
    counts: &dyn Fn(u32) -> bool,
) -> (u64, u64) {
    let (mut kept, mut dropped) = (0, 0);
    for ((local, &child), &sure) in parents.iter_mut().zip(outgoing).zip(confidence) {
        if !parent_answered_first(pairs, incoming, child, *local, skew_window) {
            continue;
        }
        if sure >= ASYNC_CONFIDENCE {
            kept += u64::from(counts(child));
        } else {
            *local = NO_PARENT;
            dropped += u64::from(counts(child));
        }
    }
    (kept, dropped)
}

/// Whether `child` (an index into the pairs) has a parent, `local` into `incoming`,
/// that answered before it returned.
fn parent_answered_first(
    pairs: &[CallPair],
    incoming: &[u32],
    child: u32,
    local: u32,
    skew_window: Nanos,
) -> bool {
    local != NO_PARENT
        && candidates::outlives(
            &pairs[child as usize],
            &pairs[incoming[local as usize] as usize],
            skew_window,
        )
}

/// What one node B decides its children's parents with.
struct NodeBoard {
    candidates: candidates::Candidates,
    scoreboard: Scoreboard,
    /// Candidate links before propagated ids narrowed them: the node's parallelism.
    links_before_ids: u64,
    ids: propagated::IdLinks,
    /// The candidates before the ids narrowed them, where asked (for `--explain`).
    unnarrowed: Option<candidates::Candidates>,
}

/// Step 2 for one node B: sorts its calls in and out on B's clock, finds each child's
/// candidates and fills B's scoreboard.
fn prepare_node(
    trace: &Trace,
    pairs: &[CallPair],
    (incoming, outgoing): (&mut [u32], &mut [u32]),
    (bins, options): (Bins, &NestOptions),
    keep_unnarrowed: bool,
    counts: &dyn Fn(u32) -> bool,
) -> NodeBoard {
    // Both orders are on this node's clock. Ties (coarse timestamps) break by the other
    // node's name and the call id's text, never by the global pair order, which follows
    // other hosts' clocks: an offset between hosts must not change any decision here.
    let by_id = |a: &CallPair, b: &CallPair| call_id_order(&trace.call_ids, a.call_id, b.call_id);
    incoming.sort_unstable_by(|&x, &y| {
        let (a, b) = (&pairs[x as usize], &pairs[y as usize]);
        (a.callee_recv, a.caller)
            .cmp(&(b.callee_recv, b.caller))
            .then_with(|| by_id(a, b))
            .then(x.cmp(&y))
    });
    outgoing.sort_unstable_by(|&x, &y| {
        let (a, b) = (&pairs[x as usize], &pairs[y as usize]);
        (a.caller_send, a.callee)
            .cmp(&(b.caller_send, b.callee))
            .then_with(|| by_id(a, b))
            .then(x.cmp(&y))
    });
    let candidates = candidates::find_candidates(
        pairs,
        incoming,
        outgoing,
        candidates::Reach {
            skew_window: options.skew_window,
            // In the truth, the instance tells the parent; in inference, answered calls
            // are weighed by the joint search alone (see `nest_node`).
            async_window: if options.same_truth_only {
                options.async_window
            } else {
                0
            },
            rescue_unenclosed: options.algorithm == Algorithm::Joint || options.same_truth_only,
            same_truth_only: options.same_truth_only,
        },
    );
    let links_before_ids = (0..outgoing.len())
        .filter(|&k| counts(outgoing[k]))
        .map(|k| candidates.of(k).len() as u64)
        .sum();
    let mut unnarrowed = None;
    let (candidates, ids) = if options.ids && !options.same_truth_only && trace.has_propagated() {
        match propagated::narrow(trace, pairs, (incoming, outgoing), &candidates, counts) {
            (Some(narrowed), ids) => {
                unnarrowed = keep_unnarrowed.then_some(candidates);
                (narrowed, ids)
            }
            (None, ids) => (candidates, ids),
        }
    } else {
        (candidates, propagated::IdLinks::default())
    };

    let mut scoreboard = Scoreboard::new(bins);
    for (k, &child_index) in outgoing.iter().enumerate() {
        let child = &pairs[child_index as usize];
        let row = candidates.of(k);
        if row.is_empty() {
            continue;
        }
        let weight = 1.0 / row.len() as f64;
        for &local in row {
            let parent = &pairs[incoming[local as usize] as usize];
            scoreboard.add(
                parent.caller,
                child.callee,
                child.caller_send - parent.callee_recv,
                weight,
            );
        }
    }
    scoreboard.smooth(options.smoothing);
    NodeBoard {
        candidates,
        scoreboard,
        links_before_ids,
        ids,
        unnarrowed,
    }
}
