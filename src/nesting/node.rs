//! One node's parent choice (steps 2 and 3 of the paper's Figure 4 for a node B):
//! candidates, B's scoreboard, the greedy choice, with an asynchronous window the
//! wider candidates, the joint choice, and dropping asynchronous links it is unsure
//! of; what `--explain` records of one decision. Owns the per-node step, its owned
//! input ([`NodeInput`]: gathered from the whole trace, or received from another
//! worker) and its serialisable outcome ([`NodeOutcome`]), so that the same code runs
//! in this process or in a dataflow operator ([`crate::dataflow`]). Grouping calls by
//! node, applying the choices and patterns belong to [`super`].

use super::call_pairs::CallPair;
use super::scoreboard::{Bins, Scoreboard};
use super::{candidates, in_core, joint, parents, propagated, Algorithm, NestOptions, NO_PARENT};
use crate::trace::{CallId, Nanos, NodeId, OperationId, PropagatedId, Trace};
use serde::{Deserialize, Serialize};

/// Everything one node's parent choice reads, owned: the node's calls in and out and
/// what the trace knows of each, with the scalars of the trace (or segment) it is part
/// of. Calls are numbered locally, in the order of the trace's call pairs; each is
/// known outside the node by its key (its index into [`super::Nesting::pairs`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeInput {
    /// The node B whose children's parents are chosen.
    pub node: NodeId,
    /// B's calls in and out, each once (a call from B to itself too), in the pairs'
    /// order. A call's `call_id` is a rank of its id's text ([`tie_ranks`]): ties on
    /// coarse clocks break by it, and only its order is ever read.
    pub calls: Vec<CallPair>,
    /// Per call, its index into the trace's call pairs.
    pub keys: Vec<u32>,
    /// Calls into B (its possible parents), as indexes into `calls`, ascending.
    pub incoming: Vec<u32>,
    /// Calls out of B (its children), as indexes into `calls`, ascending.
    pub outgoing: Vec<u32>,
    /// Per call, the operation it asked for; empty when the trace names none.
    pub operation: Vec<OperationId>,
    /// Per call, its connection's key ([`joint::NO_CONNECTION`] if not known); empty
    /// when connections are not used or none is known.
    pub connection: Vec<u64>,
    /// Per call, the request id it carried; empty when the trace carries none.
    pub propagated: Vec<PropagatedId>,
    /// The share of calls into B that the trace lost.
    pub lost: f64,
    /// The trace's tick ([`super::call_pairs::tick`]): the whole trace's, not B's.
    pub tick: Nanos,
    /// A segment's core ([`super::nest_core`]): only its calls are counted.
    pub core: Option<(Nanos, Nanos)>,
    /// The start earlier segments kept for B ([`super::Learned`]).
    pub carried: Option<joint::StartKind>,
    /// Per call, the parent the joint search starts from instead of the greedy answer
    /// ([`super::nest_from`]), as an index into `calls`, or [`NO_PARENT`].
    pub given: Option<Vec<u32>>,
    /// The calls into B that are one-way deliveries from a broker, as indexes into
    /// `calls`, ascending: B consumes them, and its calls out after each may be its
    /// work ([`super::hops::CONSUMER_WINDOW`]).
    pub deliveries: Vec<u32>,
}

/// What the trace says beyond B's calls, for [`NodeInput::gather`].
pub(crate) struct NodeScalars<'a> {
    pub(crate) lost: f64,
    pub(crate) tick: Nanos,
    pub(crate) core: Option<(Nanos, Nanos)>,
    pub(crate) carried: Option<joint::StartKind>,
    /// Per call pair, its parent's index into the pairs.
    pub(crate) given: Option<&'a [u32]>,
    /// The one-way deliveries through brokers, as indexes into the pairs, ascending
    /// ([`super::hops::PairHops::one_way`]).
    pub(crate) deliveries: &'a [u32],
}

impl NodeInput {
    /// Gathers B's input from the whole trace: `incoming` and `outgoing` are the
    /// indexes of the pairs into and out of B, ascending.
    pub(crate) fn gather(
        trace: &Trace,
        pairs: &[CallPair],
        node: NodeId,
        (incoming, outgoing): (&[u32], &[u32]),
        scalars: NodeScalars<'_>,
        options: &NestOptions,
    ) -> NodeInput {
        // A node that calls nothing has no parents to choose: its calls in are not
        // needed (a database's, a cache's: half of a trace's calls).
        let incoming = if outgoing.is_empty() { &[] } else { incoming };
        // Both lists ascend; merged, a call from B to itself is one local call.
        let mut keys = Vec::with_capacity(incoming.len() + outgoing.len());
        let (mut local_in, mut local_out) = (
            Vec::with_capacity(incoming.len()),
            Vec::with_capacity(outgoing.len()),
        );
        let (mut i, mut o) = (0, 0);
        while i < incoming.len() || o < outgoing.len() {
            let next_in = incoming.get(i).copied().unwrap_or(u32::MAX);
            let next_out = outgoing.get(o).copied().unwrap_or(u32::MAX);
            let key = next_in.min(next_out);
            let local = keys.len() as u32;
            keys.push(key);
            if next_in == key {
                local_in.push(local);
                i += 1;
            }
            if next_out == key {
                local_out.push(local);
                o += 1;
            }
        }
        let ranks = tie_ranks(trace, pairs, &keys, (&local_in, &local_out));
        let calls: Vec<CallPair> = (keys.iter().zip(ranks))
            .map(|(&key, rank)| CallPair {
                call_id: CallId(rank),
                ..pairs[key as usize]
            })
            .collect();
        let call_id = |local: usize| pairs[keys[local] as usize].call_id;
        // Facts no call has are left out: most of a text trace's input otherwise.
        let operation = match trace.operations.is_empty() {
            true => Vec::new(),
            false => (0..keys.len())
                .map(|local| trace.operation(call_id(local)))
                .collect(),
        };
        let mut connection: Vec<u64> = match options.connections {
            true => (0..keys.len())
                .map(|local| connection_key(trace, call_id(local)))
                .collect(),
            false => Vec::new(),
        };
        if connection.iter().all(|&key| key == joint::NO_CONNECTION) {
            connection = Vec::new();
        }
        let propagated = match trace.has_propagated() {
            true => (0..keys.len())
                .map(|local| trace.propagated(call_id(local)))
                .collect(),
            false => Vec::new(),
        };
        let given = scalars.given.map(|given| {
            keys.iter()
                .map(|&key| match given[key as usize] {
                    NO_PARENT => NO_PARENT,
                    parent => keys
                        .binary_search(&parent)
                        .map_or(NO_PARENT, |at| at as u32),
                })
                .collect()
        });
        let deliveries = (local_in.iter().copied())
            .filter(|&local| {
                (scalars.deliveries)
                    .binary_search(&keys[local as usize])
                    .is_ok()
            })
            .collect();
        NodeInput {
            node,
            calls,
            keys,
            deliveries,
            incoming: local_in,
            outgoing: local_out,
            operation,
            connection,
            propagated,
            lost: scalars.lost,
            tick: scalars.tick,
            core: scalars.core,
            carried: scalars.carried,
            given,
        }
    }
}

/// Per local call, a rank of its id's text that breaks the ties of B's two orders as
/// the text does ([`crate::trace::call_id_order`]; the id-less call ranks as the empty
/// text): equal texts, equal ranks. Only calls that tie another on time and node are
/// ever compared by it, so only theirs are ranked (the others rank 0): sorting every
/// id's text took a third of a segment's time before the choice.
fn tie_ranks(trace: &Trace, pairs: &[CallPair], keys: &[u32], lists: (&[u32], &[u32])) -> Vec<u32> {
    let pair = |local: u32| &pairs[keys[local as usize] as usize];
    let mut tied = vec![false; keys.len()];
    let mut mark = |list: &[u32], key: &dyn Fn(&CallPair) -> (Nanos, NodeId)| {
        let mut order = list.to_vec();
        order.sort_unstable_by_key(|&local| key(pair(local)));
        for two in order.windows(2) {
            if key(pair(two[0])) == key(pair(two[1])) {
                tied[two[0] as usize] = true;
                tied[two[1] as usize] = true;
            }
        }
    };
    mark(lists.0, &|p| (p.callee_recv, p.caller));
    mark(lists.1, &|p| (p.caller_send, p.callee));
    let text = |local: u32| match pair(local).call_id {
        CallId::NONE => "",
        id => trace.call_ids.resolve(id.0),
    };
    let mut texts: Vec<&str> = (0..keys.len() as u32)
        .filter(|&local| tied[local as usize])
        .map(text)
        .collect();
    texts.sort_unstable();
    texts.dedup();
    (0..keys.len() as u32)
        .map(|local| match tied[local as usize] {
            true => texts
                .binary_search(&text(local))
                .map_or(0, |rank| rank as u32),
            false => 0,
        })
        .collect()
}

/// What one node decided, by the pairs' keys ([`NodeInput::keys`]): serialisable, so
/// that it can come back from another worker or process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeOutcome {
    /// The node whose children these are.
    pub node: NodeId,
    /// (child, parent, the confidence of the choice), for the children given a parent.
    pub chosen: Vec<(u32, u32, f32)>,
    /// (parent, how sure it is that no call outside its children is its own), where
    /// under 1.
    pub complete: Vec<(u32, f32)>,
    /// What the node counted for the stats.
    pub counts: NodeCounts,
    /// The start the joint choice kept, where it compared starts.
    pub kept: Option<joint::StartKind>,
}

/// One node's contributions to [`super::NestStats`], of the calls it counts (a
/// segment's core).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCounts {
    /// Candidate links of its children (its parallelism).
    pub candidate_links: u64,
    /// Its children with at least one candidate.
    pub children_with_candidates: u64,
    /// Children with candidates left without a parent.
    pub orphans: u64,
    /// Children kept with a parent that answered before they returned.
    pub async_children: u64,
    /// Children left as roots because such a parent was not sure enough.
    pub unsure: u64,
    /// Children whose parent answered first without an asynchronous window.
    pub late_children: u64,
    /// Histograms in its scoreboard.
    pub histograms: u64,
    /// Whether the joint choice learned how its connections follow.
    pub connection_affinity: bool,
    /// Whether it learned which siblings go together.
    pub sibling_affinity: bool,
    /// What its propagated ids did.
    pub ids: propagated::IdLinks,
}

/// What `--explain` records of one child's decision while its node's parents are
/// chosen: the same steps as every other node's, with the scores of that one decision
/// kept. Local indexes are into the node's calls in as the choice sorted them
/// (`incoming`).
#[derive(Debug, Default)]
pub(crate) struct DecisionRecord {
    /// The child to record, as an index into the pairs.
    pub call: u32,
    /// Its place among the node's children in call-time order.
    pub order: usize,
    /// How many children the node decided.
    pub decisions: usize,
    /// The node's calls in, as indexes into the pairs, in the order local indexes
    /// count.
    pub incoming: Vec<u32>,
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
/// that answers never vary between runs or machines.
fn connection_key(trace: &Trace, call: CallId) -> u64 {
    use std::hash::BuildHasher;
    match trace.connection(call) {
        Some(connection) => {
            foldhash::fast::FixedState::with_seed(0).hash_one(connection) & !(1 << 63)
        }
        None => joint::NO_CONNECTION,
    }
}

/// Steps 2 and 3 for one node B: candidates, B's scoreboard, the greedy choice, with
/// an asynchronous window the wider candidates, the joint choice, and dropping
/// asynchronous links it is unsure of. `sharing` says where the parts of the joint
/// choice that can run apart run: the outcome is the same wherever.
pub fn decide(input: NodeInput, options: &NestOptions, sharing: joint::Sharing<'_>) -> NodeOutcome {
    run(input, options, sharing, None)
}

/// [`decide`], with the decision of `call` (an index into the pairs, one of B's
/// children) kept for `--explain`.
pub(crate) fn decide_explained(
    input: NodeInput,
    options: &NestOptions,
    call: u32,
) -> (NodeOutcome, DecisionRecord) {
    let mut record = DecisionRecord {
        call,
        ..DecisionRecord::default()
    };
    let outcome = run(input, options, joint::Sharing::Here, Some(&mut record));
    (outcome, record)
}

fn run(
    input: NodeInput,
    options: &NestOptions,
    sharing: joint::Sharing<'_>,
    record: Option<&mut DecisionRecord>,
) -> NodeOutcome {
    let NodeInput {
        node,
        calls,
        keys,
        mut incoming,
        mut outgoing,
        operation,
        connection,
        propagated,
        lost,
        tick,
        core,
        carried,
        given,
        deliveries,
    } = input;
    // A consumer of one-way deliveries does their work after they came: its calls out
    // may have as parent a delivery that arrived up to the consumer's window before.
    let consumer = NestOptions {
        async_window: options.async_window.max(super::hops::CONSUMER_WINDOW),
        ..*options
    };
    let options = match deliveries.is_empty() {
        true => options,
        false => &consumer,
    };
    let pairs = &calls[..];
    let (incoming, outgoing) = (&mut incoming[..], &mut outgoing[..]);
    let bins = Bins::new(options.bin_base, options.bin_floor, options.bin_ceiling);
    let counts = |local: u32| {
        let time = pairs[local as usize].caller_send;
        core.is_none_or(|core| in_core(core, time))
    };
    let board = prepare_node(
        pairs,
        (incoming, outgoing),
        (bins, options),
        &propagated,
        record.is_some(),
        &counts,
    );
    let order = record.as_deref().map(|record| {
        let local = keys
            .binary_search(&record.call)
            .expect("the call is the node's") as u32;
        outgoing
            .iter()
            .position(|&i| i == local)
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
                    start: carried,
                    pinned_start: options.pinned_start,
                },
                match &given {
                    None => joint::Start::Greedy(choice),
                    Some(given) => {
                        joint::Start::Given(local_start(given, incoming, outgoing, &candidates))
                    }
                },
                (order, sharing),
                joint::CallFacts {
                    operation: &|local| {
                        (operation.get(local as usize).copied()).unwrap_or(OperationId::NONE)
                    },
                    connection: &|local| {
                        (connection.get(local as usize).copied()).unwrap_or(joint::NO_CONNECTION)
                    },
                },
            );
            joint_losses = joint.explained;
            connection_affinity = joint.connection_affinity;
            sibling_affinity = joint.sibling_affinity;
            kept = joint.kept;
            complete = (joint.complete.iter().zip(incoming.iter()))
                .filter(|&(&whole, _)| whole < 1.0)
                .map(|(&whole, &call)| (keys[call as usize], whole))
                .collect();
            (joint.parents, joint.confidence, Some(joint.lead))
        }
    };
    if let (Some(record), Some(order), Some(greedy)) = (record, order, greedy) {
        *record = DecisionRecord {
            call: record.call,
            order,
            decisions: outgoing.len(),
            incoming: incoming.iter().map(|&local| keys[local as usize]).collect(),
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
            (lead.as_deref().unwrap_or(&confidence), &deliveries),
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
    let children_with_candidates = (0..outgoing.len())
        .filter(|&k| !candidates.of(k).is_empty() && counts(outgoing[k]))
        .count() as u64;
    let chosen: Vec<(u32, u32, f32)> = outgoing
        .iter()
        .zip(choice)
        .zip(confidence)
        .filter(|&((_, local), _)| local != NO_PARENT)
        .map(|((&child, local), confidence)| (child, incoming[local as usize], confidence))
        .collect();
    let counted_chosen = chosen.iter().filter(|c| counts(c.0)).count() as u64;
    let counted = NodeCounts {
        // Every child with a candidate gets a parent unless its parent's call was lost,
        // or its parent did not wait for it and was not clearly likelier than the next.
        orphans: children_with_candidates - counted_chosen - unsure,
        async_children,
        unsure,
        late_children,
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
    };
    NodeOutcome {
        node,
        chosen: (chosen.into_iter())
            .map(|(child, parent, sure)| (keys[child as usize], keys[parent as usize], sure))
            .collect(),
        complete,
        counts: counted,
        kept,
    }
}

/// `given` (per call, its parent's index into the calls) for B's children: per child,
/// the index into `incoming` of its parent if that is one of its candidates, else
/// [`NO_PARENT`].
fn local_start(
    given: &[u32],
    incoming: &[u32],
    outgoing: &[u32],
    candidates: &candidates::Candidates,
) -> Vec<u32> {
    let mut at_in = vec![NO_PARENT; given.len()];
    for (at, &call) in incoming.iter().enumerate() {
        at_in[call as usize] = at as u32;
    }
    outgoing
        .iter()
        .enumerate()
        .map(|(k, &child)| match given[child as usize] {
            NO_PARENT => NO_PARENT,
            parent => Some(at_in[parent as usize])
                .filter(|p| candidates.of(k).binary_search(p).is_ok())
                .unwrap_or(NO_PARENT),
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
/// unless the choice's lead over the next candidate is [`ASYNC_CONFIDENCE`] sure, or the
/// parent is a one-way delivery (`deliveries`, ascending local indexes), whose work
/// always follows its arrival: a child given the wrong one of two like deliveries
/// still makes its request's path. Returns (children kept with such a parent, children
/// left as roots).
fn drop_unsure_async(
    pairs: &[CallPair],
    (incoming, outgoing): (&[u32], &[u32]),
    parents: &mut [u32],
    (confidence, deliveries): (&[f32], &[u32]),
    skew_window: Nanos,
    counts: &dyn Fn(u32) -> bool,
) -> (u64, u64) {
    let (mut kept, mut dropped) = (0, 0);
    for ((local, &child), &sure) in parents.iter_mut().zip(outgoing).zip(confidence) {
        if !parent_answered_first(pairs, incoming, child, *local, skew_window) {
            continue;
        }
        let delivery = deliveries.binary_search(&incoming[*local as usize]).is_ok();
        if sure >= ASYNC_CONFIDENCE || delivery {
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
    pairs: &[CallPair],
    (incoming, outgoing): (&mut [u32], &mut [u32]),
    (bins, options): (Bins, &NestOptions),
    propagated: &[PropagatedId],
    keep_unnarrowed: bool,
    counts: &dyn Fn(u32) -> bool,
) -> NodeBoard {
    // Both orders are on this node's clock. Ties (coarse timestamps) break by the other
    // node's name and the call id's text, never by the global pair order, which follows
    // other hosts' clocks: an offset between hosts must not change any decision here.
    // (A local call's id is its text's rank: [`NodeInput::calls`].)
    let by_id = |a: &CallPair, b: &CallPair| a.call_id.cmp(&b.call_id);
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
    let (candidates, ids) = if options.ids && !options.same_truth_only && !propagated.is_empty() {
        match propagated::narrow(propagated, (incoming, outgoing), &candidates, counts) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nesting::{call_pairs, lost_shares, nest};
    use crate::trace::text::trace_from_str;

    /// The multi-tier sample with every call given an operation, a connection (one of
    /// three per caller and callee) and its request's id, so that every fact a node's
    /// input carries is used.
    fn decorated() -> Trace {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/multitier-sample.trace"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let mut out = String::new();
        for (n, line) in text.lines().enumerate() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [_, "CALL_SENT" | "CALL_RECV", from, to, _, request] => out.push_str(&format!(
                    "{line} op=get_{to} conn={from}-{to}-{} id={request}\n",
                    n % 3
                )),
                _ => out.push_str(&format!("{line}\n")),
            }
        }
        trace_from_str(&out)
    }

    fn inputs(trace: &Trace, options: &NestOptions) -> (crate::nesting::Nesting, Vec<NodeInput>) {
        let nesting = nest(trace, options).unwrap();
        let pairs = &nesting.pairs;
        let nodes = trace.nodes.len();
        let (mut incoming, mut outgoing) = (vec![Vec::new(); nodes], vec![Vec::new(); nodes]);
        for (i, pair) in pairs.iter().enumerate() {
            incoming[pair.callee.0 as usize].push(i as u32);
            outgoing[pair.caller.0 as usize].push(i as u32);
        }
        let lost = lost_shares(trace, pairs, &|_| true);
        let inputs = (0..nodes)
            .map(|node| {
                let scalars = NodeScalars {
                    lost: lost[node],
                    tick: call_pairs::tick(pairs),
                    core: None,
                    carried: None,
                    given: None,
                    deliveries: &[],
                };
                let lists = (&incoming[node][..], &outgoing[node][..]);
                NodeInput::gather(trace, pairs, NodeId(node as u32), lists, scalars, options)
            })
            .collect();
        (nesting, inputs)
    }

    /// Every node decides the same from its input sent as bytes, and the nodes'
    /// outcomes put together are the nesting's parents.
    #[test]
    fn a_node_decides_alike_from_its_input_sent_as_bytes_and_as_nest_does() {
        let trace = decorated();
        assert!(trace.has_propagated());
        let async_window = NestOptions {
            async_window: 5_000_000,
            ..NestOptions::default()
        };
        let truth_only = NestOptions {
            same_truth_only: true,
            ..NestOptions::default()
        };
        for options in [NestOptions::default(), async_window, truth_only] {
            let (nesting, inputs) = inputs(&trace, &options);
            let mut parent = vec![NO_PARENT; nesting.pairs.len()];
            let mut confidence = vec![1.0f32; nesting.pairs.len()];
            for input in inputs {
                let bytes = postcard::to_allocvec(&input).unwrap();
                let received: NodeInput = postcard::from_bytes(&bytes).unwrap();
                assert_eq!(received, input);
                let outcome = decide(input, &options, joint::Sharing::Here);
                let bytes = postcard::to_allocvec(&outcome).unwrap();
                assert_eq!(
                    postcard::from_bytes::<NodeOutcome>(&bytes).unwrap(),
                    outcome
                );
                assert_eq!(decide(received, &options, joint::Sharing::Here), outcome);
                for (child, chosen, sure) in outcome.chosen {
                    parent[child as usize] = chosen;
                    confidence[child as usize] = sure;
                }
            }
            assert_eq!(nesting.stats.cycles_broken, 0);
            assert_eq!(parent, nesting.parent);
            assert_eq!(confidence, nesting.confidence);
        }
    }

    /// Three timely workers exchanging every record as bytes (bincode, as between
    /// processes) decide every node as it decides alone, in the same order.
    #[test]
    fn workers_exchanging_bytes_decide_as_one_thread_does() {
        let trace = decorated();
        let options = NestOptions::default();
        let (_, inputs) = inputs(&trace, &options);
        let alone: Vec<NodeOutcome> = (inputs.iter().cloned())
            .map(|input| decide(input, &options, joint::Sharing::Here))
            .collect();
        let config = timely::Config {
            communication: timely::CommunicationConfig::ProcessBinary(3),
            worker: timely::WorkerConfig::default(),
        };
        let engine = crate::nesting::dataflow::Engine::start(config).unwrap();
        for _ in 0..2 {
            // Twice: nestings follow one another through the same dataflow.
            let nodes = (inputs.iter())
                .map(|input| (input.node, input.calls.len()))
                .collect();
            let gather = |node: NodeId| inputs[node.0 as usize].clone();
            let outcomes = engine.decide_all(nodes, &gather, &options).unwrap();
            assert_eq!(outcomes, alone);
        }
        engine.finish().unwrap();
    }

    /// A node decides the same whether the parts of its choice that can run apart (a
    /// second half, the robust start) run beside the rest or are sent off as bytes and
    /// run from them.
    #[test]
    fn parts_sent_as_bytes_run_as_they_do_beside_the_rest() {
        let plain = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/multitier-sample.trace"
        );
        let plain = trace_from_str(&std::fs::read_to_string(plain).unwrap());
        // Bursts of dense requests with pauses between: cut where the starts compared
        // on a window (the end kept is carried over the first half).
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dense = trace_from_str(&joint::tests::dense_two_steps_in_bursts(2400, 600));
        for (trace, learn_window, dense) in [
            (decorated(), 2, false),
            (plain.clone(), 3, false),
            (plain, 40, false),
            (dense, 500, true),
        ] {
            let options = NestOptions {
                learn_window,
                ..NestOptions::default()
            };
            let (_, inputs) = inputs(&trace, &options);
            let (halves, starts) = (AtomicUsize::new(0), AtomicUsize::new(0));
            let send = |work: joint::Work| -> Box<dyn FnOnce() -> joint::Worked + Send> {
                match &work {
                    joint::Work::SecondHalf(_) => halves.fetch_add(1, Ordering::Relaxed),
                    joint::Work::RobustStart(_) => starts.fetch_add(1, Ordering::Relaxed),
                };
                let bytes = postcard::to_allocvec(&work).unwrap();
                let received: joint::Work = postcard::from_bytes(&bytes).unwrap();
                assert_eq!(received, work);
                let worked = postcard::to_allocvec(&received.run()).unwrap();
                Box::new(move || postcard::from_bytes(&worked).unwrap())
            };
            for input in inputs {
                let here = decide(input.clone(), &options, joint::Sharing::Here);
                let sent_off = decide(input, &options, joint::Sharing::Elsewhere(&send));
                assert_eq!(sent_off, here);
            }
            assert!(halves.into_inner() > 0, "no node was cut in two");
            if dense {
                assert!(starts.into_inner() > 0, "no start was compared");
            }
        }
    }

    /// A call from a node to itself is one local call, both a parent and a child; the
    /// ids of calls that tie on time rank as their texts, the others 0.
    #[test]
    fn a_self_call_is_one_local_call_and_tied_ids_rank_as_their_texts() {
        let trace = trace_from_str(
            "1 CALL a b r2\n1 CALL a b r10\n2 CALL b b zz\n3 CALL b c c1\n4 RET c b c1\n\
             5 RET b b zz\n6 RET b a r2\n7 RET b a r10\n",
        );
        let (nesting, inputs) = inputs(&trace, &NestOptions::default());
        let b = NodeId(trace.nodes.get("b").unwrap());
        let input = &inputs[b.0 as usize];
        assert_eq!(input.calls.len(), 4);
        assert_eq!((input.incoming.len(), input.outgoing.len()), (3, 2));
        let text =
            |local: usize| trace.call_id_text(nesting.pairs[input.keys[local] as usize].call_id);
        let ranks: Vec<(&str, u32)> = (0..4)
            .map(|local| (text(local), input.calls[local].call_id.0))
            .collect();
        assert!(
            ranks.contains(&("r10", 0)) && ranks.contains(&("r2", 1)),
            "{ranks:?}"
        );
        assert!(
            ranks.contains(&("zz", 0)) && ranks.contains(&("c1", 0)),
            "{ranks:?}"
        );
        let zz = (0..4).find(|&local| text(local) == "zz").unwrap() as u32;
        assert!(input.incoming.contains(&zz) && input.outgoing.contains(&zz));
    }
}
