//! The nesting algorithm (paper §5.1, Figure 4) for RPC traces: call pairs, candidate
//! parents, per-node scoreboards, penalised parent choice, and path patterns. Owns the
//! algorithm's options and its orchestration; reading traces and printing results
//! belong to [`crate::trace`] and [`crate::report`].
//!
//! Every delay is measured on one node's clock (design principle "local clocks
//! first"): a child B→C is compared with its candidate parents X→B using the times
//! seen at B, so nesting decisions carry no clock error when both ends were captured.

pub mod call_pairs;
pub mod candidates;
pub mod critical;
pub mod dataflow;
pub mod explain;
pub mod hops;
pub mod joint;
pub(crate) mod node;
pub mod parents;
pub mod patterns;
pub mod propagated;
pub mod scoreboard;

use crate::trace::{Kind, Nanos, Trace};
use call_pairs::{CallPair, PairingStats};
pub use node::ASYNC_CONFIDENCE;
pub use parents::{roots, CandidateScore, Penalties, NO_PARENT};
pub use patterns::{Pattern, Summary};

/// Which parent choice runs after the paper's candidates and scoreboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Algorithm {
    /// The paper's greedy choice with fixed penalties (§5.1.1.3), kept reproducible.
    Paper,
    /// The paper's answer improved jointly per node under a model, learned from the
    /// trace, of what each call does while it is open.
    #[default]
    Joint,
}

/// Settings of the nesting algorithm; [`Default`] gives the paper's, with the joint
/// parent choice.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NestOptions {
    /// Which parent choice.
    pub algorithm: Algorithm,
    /// Loosens the containment test by this much, for clock skew (paper §7.5.6).
    pub skew_window: Nanos,
    /// Lets a call leaving B have as parent a call into B that answered before it
    /// returned, one that did not wait for it: open when it left (fire and forget), or
    /// answered at most this long before (a write-back cache's; paper §5.3.1); 0, the
    /// default, allows none.
    pub async_window: Nanos,
    /// Ratio between successive scoreboard bins.
    pub bin_base: f64,
    /// Smallest delay with a bin of its own; shorter ones share the first.
    pub bin_floor: Nanos,
    /// Largest delay with a bin of its own; longer ones share the last.
    pub bin_ceiling: Nanos,
    /// Standard deviation, in bins, of the Gaussian that smooths each histogram; 0 = off.
    pub smoothing: f64,
    /// Penalty exponents.
    pub penalties: Penalties,
    /// Evaluation only: a call's candidate parents must carry its truth tag, so the
    /// result is the ground truth of a trace written with path-instance ids.
    pub same_truth_only: bool,
    /// How the joint search weighs a child it looks at again: only what changed (the
    /// default), or everything, which gives the same choices more slowly (a check).
    pub reweighing: joint::Reweighing,
    /// Children of one node on which the joint choice's starts are settled and its
    /// model first learned, when it has more ([`joint::LEARN_WINDOW`] by default;
    /// `usize::MAX` settles every start on every child, slower).
    pub learn_window: usize,
    /// Name each node of a pattern by the operation of the call into it too
    /// (`catalog[/shop.Catalog/GetItem]`), so that a pattern is per operation.
    pub by_operation: bool,
    /// Let the joint choice learn, per node, how the connections of its calls out
    /// follow the connection of the call they serve, where call ids name connections
    /// (captures'). A node whose connections show no such affinity learns none.
    pub connections: bool,
    /// Use the request ids or trace contexts calls carry (`traceparent`,
    /// `X-Request-ID`, ...): where a node passes them on, a child's parent is the call
    /// carrying its id ([`propagated`]).
    pub ids: bool,
    /// Let the joint choice also try the pinned start where a node's children have
    /// several candidates each and the other starts' answer makes counts of children
    /// vary more than their means need ([`joint::StartKind::Pinned`]): the answer to
    /// saturation, where hard EM piles calls onto a few requests; and where its end is
    /// not kept, the start ordered by returns ([`joint::StartKind::Returns`]); and where
    /// a kind of call is made once per request, the start ordered by arrivals
    /// ([`joint::StartKind::Arrivals`]), for queues that serve first in, first out. On
    /// by default.
    pub pinned_start: bool,
    /// Where each node's choice runs: timely workers, one per core by default. Never
    /// changes an answer.
    #[serde(skip)]
    pub workers: dataflow::Workers,
}

impl Default for NestOptions {
    fn default() -> Self {
        NestOptions {
            algorithm: Algorithm::default(),
            skew_window: 0,
            async_window: 0,
            bin_base: 1.05,
            bin_floor: 1_000,
            bin_ceiling: 2 * 3600 * 1_000_000_000,
            smoothing: 0.0,
            penalties: Penalties::default(),
            same_truth_only: false,
            reweighing: joint::Reweighing::default(),
            learn_window: joint::LEARN_WINDOW,
            by_operation: false,
            connections: true,
            ids: true,
            pinned_start: true,
            workers: dataflow::Workers::default(),
        }
    }
}

/// Why nesting could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NestError {
    /// The input held no messages at all.
    #[error("the trace has no messages ({lines} lines read, all blank or comments)")]
    NoMessages {
        /// Lines read.
        lines: u64,
    },
    /// Messages, but not one call matched with a return.
    #[error(
        "no call was matched with its return ({calls_unmatched} unmatched calls, {returns_unmatched} unmatched returns, \
         {free} free-form messages); nesting needs RPC calls and returns (free-form messages are for `convolve`)"
    )]
    NoCallPairs {
        /// Calls with no return.
        calls_unmatched: u64,
        /// Returns with no call.
        returns_unmatched: u64,
        /// `MSG_*` messages.
        free: u64,
    },
    /// Settings that cannot work.
    #[error("invalid option: {0}")]
    BadOption(String),
    /// The workers that decide each node's parents failed (not the input's fault).
    #[error("the workers choosing parents failed")]
    Workers(#[from] dataflow::WorkerError),
}

/// What the run did, for the summary.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct NestStats {
    /// What pairing set aside.
    #[serde(flatten)]
    pub pairing: PairingStats,
    /// Calls matched with their returns.
    pub call_pairs: u64,
    /// Calls with no parent: the path instances.
    pub roots: u64,
    /// Calls that had candidate parents but were left without one, their parent's call
    /// having been lost by the trace (the joint choice only; among the roots).
    pub orphans: u64,
    /// Children given a parent that answered before they returned, one that did not
    /// wait for them (with an asynchronous window; among the children with a parent).
    pub async_children: u64,
    /// Children that the choice gave such a parent, left roots because that parent was
    /// not clearly likelier than the next (see [`ASYNC_CONFIDENCE`]; among the roots).
    pub async_left_roots: u64,
    /// Children no call enclosed, given a call open when they left: timestamps a little
    /// late where enclosure is the rule (see [`candidates::RARELY_UNENCLOSED`]; without
    /// an asynchronous window, which counts them among its own; among the children with
    /// a parent).
    pub late_children: u64,
    /// Mean number of candidate parents of the calls that had at least one (the paper's
    /// per-node parallelism).
    pub mean_parallelism: f64,
    /// (A, B, C) histograms in the scoreboard.
    pub histograms: u64,
    /// Parent cycles cut (coarse or skewed times; see [`parents::break_cycles`]).
    pub cycles_broken: u64,
    /// Nodes whose calls out follow the connection of the call they serve, as the
    /// joint choice learned (captures only; see [`NestOptions::connections`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub connection_affinity_nodes: u64,
    /// Nodes whose calls out of one call go out on connections that keep together (a
    /// worker's own), as the joint choice learned (captures only).
    #[serde(skip_serializing_if = "is_zero")]
    pub sibling_affinity_nodes: u64,
    /// With the connections ignored ([`NestOptions::connections`] off), the calls whose
    /// connection the joint choice would have weighed: none where no call names one, or
    /// the paper's choice, which never weighs them, was used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections_ignored: Option<u64>,
    /// Calls out of a node that carried a propagated id (captures or text traces with
    /// `id=`; see [`NestOptions::ids`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub calls_with_ids: u64,
    /// Of those, the ones whose parent the ids fixed: one candidate carried the same id
    /// at a node whose ids propagate.
    #[serde(skip_serializing_if = "is_zero")]
    pub links_fixed_by_ids: u64,
    /// Nodes whose calls out carry on the ids of the calls they serve.
    #[serde(skip_serializing_if = "is_zero")]
    pub id_nodes: u64,
    /// Deliveries given the message that brought them into their broker as parent
    /// ([`hops`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub broker_links: u64,
    /// Of those, the ones their publish did not wait for: asynchronous hops.
    #[serde(skip_serializing_if = "is_zero")]
    pub broker_hops: u64,
    /// Calls of consumers that serve their deliveries first in, first out, given the
    /// delivery of their place in that order ([`hops::serve_in_order`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub served_in_order: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The result: every call pair, its chosen parent, and the patterns.
#[derive(Debug, Clone)]
pub struct Nesting {
    /// Call pairs in call-time order.
    pub pairs: Vec<CallPair>,
    /// Index of each pair's parent in `pairs`, or [`NO_PARENT`] for a root.
    pub parent: Vec<u32>,
    /// How sure each pair's parent choice is, in [0, 1]: the margin between the chosen
    /// parent and the best other candidate under the algorithm's scores; 1 for a call
    /// with one candidate or none.
    pub confidence: Vec<f32>,
    /// How sure it is that no call outside each pair's children is its child: the
    /// joint choice's weight of its candidate children given elsewhere taken away (see
    /// [`joint::JointChoice::complete`]); 1 where no choice weighed one, and empty
    /// where nothing was weighed.
    pub complete: Vec<f32>,
    /// The deliveries through a broker whose publish did not wait for them, ascending
    /// ([`hops`]): the asynchronous hops, `⇒` in a signature.
    pub hops: Vec<u32>,
    /// Path patterns in order of first appearance.
    pub patterns: Vec<Pattern>,
    /// Counts for the summary.
    pub stats: NestStats,
}

/// Whether `time` falls in a segment's core (from, to): from included, to not.
pub fn in_core((from, to): (Nanos, Nanos), time: Nanos) -> bool {
    from <= time && time < to
}

/// Runs the nesting algorithm on a trace.
pub fn nest(trace: &Trace, options: &NestOptions) -> Result<Nesting, NestError> {
    nest_starting(trace, options, None, None, Learned::default()).map(|(nesting, _)| nesting)
}

/// For a nesting done in segments ([`crate::streaming`]): nests a segment's trace but
/// counts in the stats, and groups into patterns, only what its core holds: the calls
/// that leave their caller within `core` (from, to), and the requests whose root call
/// does. The margins on either side are there to give the core's calls all their
/// candidates and the core's requests all their calls.
///
/// `learned` is what the segments before it learned, which this one starts from; it
/// is returned with what this one learned added.
pub fn nest_core(
    trace: &Trace,
    options: &NestOptions,
    core: (Nanos, Nanos),
    learned: Learned,
) -> Result<(Nesting, Learned), NestError> {
    nest_starting(trace, options, None, Some(core), learned)
}

/// What the segments of one trace nested so far learned that the next starts from
/// ([`nest_core`]): per node, by name, the start of the joint search whose end it kept.
/// Which start wins depends on the node's calls (how many candidates, how its delays
/// spread), not on the hour; comparing the three again on every segment made the
/// 6.6 GB capture set (parallelism 30) take 155 s in six segments against 84 s whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Learned {
    starts: std::collections::BTreeMap<String, joint::StartKind>,
}

impl Learned {
    /// The start a node (by name) kept, if one was compared there.
    pub fn start_of(&self, node: &str) -> Option<joint::StartKind> {
        self.starts.get(node).copied()
    }

    /// Nodes with a start kept.
    pub fn nodes(&self) -> usize {
        self.starts.len()
    }
}

/// For evaluation: runs the nesting algorithm with the joint search started from
/// `start`'s parents instead of the greedy answer, and re-learning its model from them.
/// `start` is given the trace's call pairs (as [`Nesting::pairs`] will hold them) and
/// returns each one's parent as an index into them, or [`NO_PARENT`]; a parent that is
/// not among a call's candidates starts it without one. Started from the true parents,
/// what the search still gets wrong is where the model itself prefers another answer:
/// a bound on what a better search could reach, not a result.
pub fn nest_from(
    trace: &Trace,
    options: &NestOptions,
    start: &GivenStart<'_>,
) -> Result<Nesting, NestError> {
    if options.algorithm == Algorithm::Paper {
        return Err(NestError::BadOption(
            "a given start needs the joint parent choice: the paper's has no search to start"
                .into(),
        ));
    }
    nest_starting(trace, options, Some(start), None, Learned::default()).map(|(nesting, _)| nesting)
}

/// A start for [`nest_from`]: given the call pairs, each one's parent.
pub type GivenStart<'a> = dyn Fn(&[CallPair]) -> Vec<u32> + 'a;

/// The nesting, and `learned` (what earlier segments learned, empty outside segments)
/// with what this nesting learned added.
fn nest_starting(
    trace: &Trace,
    options: &NestOptions,
    start: Option<&GivenStart<'_>>,
    core: Option<(Nanos, Nanos)>,
    mut learned: Learned,
) -> Result<(Nesting, Learned), NestError> {
    validate(options)?;
    if trace.messages.is_empty() {
        return Err(NestError::NoMessages {
            lines: trace.stats.lines,
        });
    }
    let in_core = |time: Nanos| core.is_none_or(|core| in_core(core, time));
    let (pairs, pairing) = find_call_pairs_checked(trace, &in_core)?;
    let pair_hops = hops::pair_hops(trace, &pairs, &crate::brokers::follow(trace));
    // Placed before the choice, which then leaves them out: the deliveries the broker
    // linked and the calls served in order.
    let in_order = hops::serve_in_order(trace, &pairs, (&pair_hops, options.ids));
    let placed = hops::placed_before_choice(&pair_hops, &in_order);
    let tick = call_pairs::tick(&pairs);
    let start = start.map(|start| start(&pairs));
    if let Some(start) = &start {
        if start.len() != pairs.len() {
            return Err(NestError::BadOption(format!(
                "the given start has {} parents for {} call pairs",
                start.len(),
                pairs.len()
            )));
        }
    }

    // Group calls by the node they enter (possible parents) and leave (children). Nodes
    // are independent from here to the parent choice: B's scoreboard holds only (·, B, ·).
    let node_count = trace.nodes.len();
    let mut incoming: Vec<Vec<u32>> = vec![Vec::new(); node_count];
    let mut outgoing: Vec<Vec<u32>> = vec![Vec::new(); node_count];
    let mut placed = placed.into_iter().peekable();
    for (i, p) in pairs.iter().enumerate() {
        incoming[p.callee.0 as usize].push(i as u32);
        match placed.next_if_eq(&(i as u32)) {
            Some(_) => {}
            None => outgoing[p.caller.0 as usize].push(i as u32),
        }
    }
    let lost = lost_shares(trace, &pairs, &in_core);
    let gather = |id: crate::trace::NodeId| {
        let node = id.0 as usize;
        let scalars = node::NodeScalars {
            lost: lost[node],
            tick,
            core,
            carried: learned.start_of(trace.node_name(id)),
            given: start.as_deref(),
            deliveries: &pair_hops.one_way,
        };
        let lists = (&incoming[node][..], &outgoing[node][..]);
        node::NodeInput::gather(trace, &pairs, id, lists, scalars, options)
    };
    // Each node's calls (a node that calls nothing needs none: `NodeInput::gather`).
    let nodes: Vec<dataflow::Planned> = (0..node_count)
        .map(|node| {
            let calls = match outgoing[node].is_empty() {
                true => 0,
                false => incoming[node].len() + outgoing[node].len(),
            };
            (crate::trace::NodeId(node as u32), calls)
        })
        .collect();
    let mut per_node = dataflow::decide_all(options.workers, nodes, &gather, options)?;
    drop((incoming, outgoing));
    per_node.sort_unstable_by_key(|outcome| outcome.node);
    for outcome in &per_node {
        if let Some(kind) = outcome.kept {
            let name = trace.node_name(outcome.node);
            learned.starts.insert(name.to_owned(), kind);
        }
    }

    let mut parent = vec![NO_PARENT; pairs.len()];
    let mut confidence = vec![1.0f32; pairs.len()];
    let mut complete = vec![1.0f32; pairs.len()];
    let mut stats = NestStats {
        pairing,
        ..NestStats::default()
    };
    let (mut links, mut children_with_candidates) = (0u64, 0u64);
    for outcome in per_node {
        for (child, chosen, sure) in outcome.chosen {
            parent[child as usize] = chosen;
            confidence[child as usize] = sure;
        }
        for (call, whole) in outcome.complete {
            complete[call as usize] = whole;
        }
        let counts = outcome.counts;
        links += counts.candidate_links;
        children_with_candidates += counts.children_with_candidates;
        stats.orphans += counts.orphans;
        stats.async_children += counts.async_children;
        stats.async_left_roots += counts.unsure;
        stats.late_children += counts.late_children;
        stats.connection_affinity_nodes += u64::from(counts.connection_affinity);
        stats.sibling_affinity_nodes += u64::from(counts.sibling_affinity);
        stats.calls_with_ids += counts.ids.carried;
        stats.links_fixed_by_ids += counts.ids.fixed;
        stats.id_nodes += u64::from(counts.ids.propagates);
        stats.histograms += counts.histograms;
    }
    if !options.connections {
        let named = |p: &CallPair| in_core(p.caller_send) && trace.connection(p.call_id).is_some();
        stats.connections_ignored = Some(match options.algorithm {
            Algorithm::Joint => pairs.iter().filter(|p| named(p)).count() as u64,
            Algorithm::Paper => 0,
        });
    }
    stats.mean_parallelism = if children_with_candidates == 0 {
        0.0
    } else {
        links as f64 / children_with_candidates as f64
    };
    let hops = hops::link(&pair_hops, &mut parent, &mut confidence);
    stats.served_in_order = hops::place(&in_order, &mut parent, &mut confidence);
    let counted = |delivery: u32| u64::from(in_core(pairs[delivery as usize].caller_send));
    stats.broker_links = pair_hops.links.iter().map(|link| counted(link.0)).sum();
    stats.broker_hops = hops.iter().map(|&delivery| counted(delivery)).sum();
    stats.cycles_broken = parents::break_cycles(&mut parent);
    let root_in_core = |root: u32| in_core(pairs[root as usize].caller_send);
    stats.call_pairs = pairs.iter().filter(|p| in_core(p.caller_send)).count() as u64;
    stats.roots = (0..pairs.len() as u32)
        .filter(|&i| parent[i as usize] == NO_PARENT && root_in_core(i))
        .count() as u64;
    let tree = patterns::Tree {
        parent: &parent,
        confidence: &confidence,
        complete: &complete,
        hops: &hops,
    };
    let patterns =
        patterns::find_patterns_of(trace, &pairs, tree, options.by_operation, &root_in_core);
    let nesting = Nesting {
        pairs,
        parent,
        confidence,
        complete,
        hops,
        patterns,
        stats,
    };
    Ok((nesting, learned))
}

/// Per node B, the share of calls into B whose call or return the trace lacks: calls
/// and returns seen beyond the pairs made, over all calls into B. (A trace whose clocks
/// put a return before its call counts that call too.) Only messages and pairs at times
/// `counts` keeps are counted: a segment's margins lose calls at their far edges.
pub(crate) fn lost_shares(
    trace: &Trace,
    pairs: &[CallPair],
    counts: &dyn Fn(Nanos) -> bool,
) -> Vec<f64> {
    let mut seen = vec![0u64; trace.nodes.len()];
    for message in trace.messages.iter().filter(|m| counts(m.first_time())) {
        match message.kind() {
            Kind::Call => seen[message.receiver().0 as usize] += 1,
            Kind::Return => seen[message.sender().0 as usize] += 1,
            Kind::Free => {}
        }
    }
    // Each end of a pair counted where its message was first seen, as `seen` counts it.
    let mut paired = vec![0u64; trace.nodes.len()];
    let mut ends = vec![0u64; trace.nodes.len()];
    // A one-way broker message is no call, and `seen` does not count it.
    for pair in pairs.iter().filter(|p| !call_pairs::is_one_way(trace, p)) {
        let call = counts(pair.caller_send.min(pair.callee_recv));
        let answer = counts(pair.callee_return.min(pair.caller_return));
        paired[pair.callee.0 as usize] += u64::from(call);
        ends[pair.callee.0 as usize] += u64::from(call) + u64::from(answer);
    }
    seen.iter()
        .zip(paired.iter().zip(&ends))
        .map(|(&seen, (&paired, &ends))| {
            let lost = seen.saturating_sub(ends) as f64;
            lost / (paired as f64 + lost).max(1.0)
        })
        .collect()
}

fn validate(options: &NestOptions) -> Result<(), NestError> {
    let bad = |what: &str| Err(NestError::BadOption(what.to_owned()));
    if !(options.bin_base > 1.0 && options.bin_base.is_finite()) {
        return bad("the bin base must be greater than 1");
    }
    if options.bin_floor <= 0 || options.bin_ceiling <= options.bin_floor {
        return bad("bins need 0 < floor < ceiling");
    }
    let bins = (options.bin_ceiling as f64 / options.bin_floor as f64).ln() / options.bin_base.ln();
    // The joint choice keeps each link's bins in 16 bits.
    if bins >= f64::from(u16::MAX) {
        return bad(
            "more than 65,535 bins per histogram; raise the bin base or narrow floor..ceiling",
        );
    }
    if options.skew_window < 0 {
        return bad("the skew window cannot be negative");
    }
    if options.async_window < 0 {
        return bad("the asynchronous window cannot be negative");
    }
    if !(options.smoothing >= 0.0 && options.smoothing.is_finite()) {
        return bad("smoothing must be a non-negative number of bins");
    }
    let p = options.penalties;
    if ![p.overlap, p.same_callee, p.any_child]
        .iter()
        .all(|e| e.is_finite() && *e >= 0.0)
    {
        return bad("penalty exponents must be non-negative numbers");
    }
    Ok(())
}

fn find_call_pairs_checked(
    trace: &Trace,
    counts: &dyn Fn(Nanos) -> bool,
) -> Result<(Vec<CallPair>, PairingStats), NestError> {
    let (pairs, pairing) = call_pairs::find_call_pairs_counting(trace, counts);
    if pairs.is_empty() {
        return Err(NestError::NoCallPairs {
            calls_unmatched: pairing.unmatched_calls,
            returns_unmatched: pairing.unmatched_returns,
            free: pairing.free_messages,
        });
    }
    Ok((pairs, pairing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{text, TraceBuilder};
    use std::path::Path;

    fn nest_text(text: &str, options: &NestOptions) -> (Trace, Nesting) {
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), text.as_bytes(), &mut b).unwrap();
        let trace = b.finish();
        let nesting = nest(&trace, options).unwrap();
        (trace, nesting)
    }

    const S: i64 = 1_000_000_000;

    /// Paper Figures 2 and 3: message numbers are the timestamps.
    #[test]
    fn figure_2_gives_a_calls_b_which_calls_c_then_d() {
        let (_, n) = nest_text(
            "1 CALL A B 1\n3 CALL B C 2\n5 RET C B 2\n7 CALL B D 3\n9 RET D B 3\n11 RET B A 1\n",
            &NestOptions::default(),
        );
        assert_eq!(n.patterns.len(), 1);
        let p = &n.patterns[0];
        assert_eq!(p.signature, "A->B(C,D)");
        assert_eq!(p.count(), 1);
        let lat: Vec<_> = p
            .positions
            .iter()
            .map(|x| x.latencies.values().unwrap()[0])
            .collect();
        let delay: Vec<_> = p
            .positions
            .iter()
            .map(|x| x.call_delays.values().unwrap()[0])
            .collect();
        assert_eq!(lat, vec![10 * S, 2 * S, 2 * S]);
        assert_eq!(delay, vec![0, 2 * S, 6 * S]);
        assert_eq!(p.total_latency(), i128::from(10 * S));
    }

    /// Paper Figure 5: two B→C calls each nested in two A→B calls; the scoreboard peak
    /// at the medium delay decides.
    #[test]
    fn figure_5_parallel_calls_resolve_to_the_medium_delays() {
        // A→B at t1=0 (id p1) and t2=1 (id p2); B→C at t3=2 (c1) and t4=3 (c2).
        let (trace, n) = nest_text(
            "0 CALL A B p1\n1 CALL A B p2\n2 CALL B C c1\n3 CALL B C c2\n4 RET C B c1\n5 RET C B c2\n6 RET B A p1\n7 RET B A p2\n",
            &NestOptions::default(),
        );
        let id = |i: usize| trace.call_id_text(n.pairs[i].call_id).to_owned();
        let parent_of = |name: &str| {
            let i = (0..n.pairs.len()).find(|&i| id(i) == name).unwrap();
            id(n.parent[i] as usize)
        };
        assert_eq!(parent_of("c1"), "p1");
        assert_eq!(parent_of("c2"), "p2");
        assert_eq!(n.stats.mean_parallelism, 2.0);
        assert_eq!(n.patterns.len(), 1);
        assert_eq!(n.patterns[0].signature, "A->B(C)");
        let delays = &n.patterns[0].positions[1].call_delays;
        assert_eq!(delays.values(), Some(&[2 * S, 2 * S][..]));
    }

    #[test]
    fn children_in_the_same_tick_as_their_parent_are_nested() {
        let (_, n) = nest_text(
            "1 CALL A B x\n1 CALL B C y\n1 RET C B y\n1 RET B A x\n",
            &NestOptions::default(),
        );
        assert_eq!(n.patterns[0].signature, "A->B(C)");
    }

    #[test]
    fn the_skew_window_admits_a_child_that_seems_to_start_early() {
        let text = "10 CALL A B x\n9.99 CALL B C y\n11 RET C B y\n12 RET B A x\n";
        let (_, strict) = nest_text(text, &NestOptions::default());
        let mut sigs: Vec<_> = strict
            .patterns
            .iter()
            .map(|p| p.signature.clone())
            .collect();
        sigs.sort();
        assert_eq!(sigs, vec!["A->B", "B->C"]);
        let loose = NestOptions {
            skew_window: 20_000_000,
            ..NestOptions::default()
        };
        let (_, n) = nest_text(text, &loose);
        assert_eq!(n.patterns.len(), 1);
        assert_eq!(n.patterns[0].signature, "A->B(C)");
    }

    /// Two calls reach B in the same tick; only the senders' clocks order them. B's
    /// choice between them must not depend on those other clocks.
    #[test]
    fn ties_at_a_node_do_not_depend_on_other_hosts_clocks() {
        let decide = |x_sends: &str, y_sends: &str| {
            let text = format!(
                "{x_sends} CALL_SENT X B px\n5 CALL_RECV X B px\n{y_sends} CALL_SENT Y B py\n5 CALL_RECV Y B py\n\
                 5 CALL B C c\n6 RET C B c\n7 RET B X px\n7 RET B Y py\n"
            );
            let (trace, n) = nest_text(&text, &NestOptions::default());
            let child = (0..n.pairs.len())
                .find(|&i| trace.call_id_text(n.pairs[i].call_id) == "c")
                .unwrap();
            trace
                .call_id_text(n.pairs[n.parent[child] as usize].call_id)
                .to_owned()
        };
        assert_eq!(decide("1", "2"), decide("2", "1"));
    }

    #[test]
    fn empty_and_callless_traces_are_refused_clearly() {
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), &b"# nothing\n"[..], &mut b).unwrap();
        assert_eq!(
            nest(&b.finish(), &NestOptions::default()).unwrap_err(),
            NestError::NoMessages { lines: 1 }
        );
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), &b"1 MSG a b -\n2 CALL a b x\n"[..], &mut b).unwrap();
        let err = nest(&b.finish(), &NestOptions::default()).unwrap_err();
        assert_eq!(
            err,
            NestError::NoCallPairs {
                calls_unmatched: 1,
                returns_unmatched: 0,
                free: 1
            }
        );
    }

    #[test]
    fn bad_options_are_refused() {
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), &b"1 CALL a b x\n2 RET b a x\n"[..], &mut b).unwrap();
        let trace = b.finish();
        let bad = NestOptions {
            bin_base: 1.0,
            ..NestOptions::default()
        };
        assert!(matches!(nest(&trace, &bad), Err(NestError::BadOption(_))));
        let bad = NestOptions {
            penalties: Penalties {
                overlap: -1.0,
                ..Penalties::default()
            },
            ..NestOptions::default()
        };
        assert!(matches!(nest(&trace, &bad), Err(NestError::BadOption(_))));
    }
}
