//! One node's calls as the joint model reads them, computed once per node: dense kinds
//! of children and callers of parents, the kinds of event in a parent's sequence, who
//! watches whom, and the walk of a parent's sequence that yields each factor of its
//! likelihood. Owns no learned values.

use super::model::orphan_logs;
use super::{NodeSettings, Reweighing};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::candidates::{outlives, Candidates};
use crate::nesting::scoreboard::{BinTable, Bins};
use crate::trace::{Nanos, NodeId, OperationId};
use hashbrown::HashMap;

/// The kinds of event in a parent's sequence: its arrival, a child leaving or
/// returning (per kind of child), its answer. Arrival and answer get the ids 0 and
/// 1 + 2K, a child of kind c leaves as 1 + c and returns as 1 + K + c.
#[derive(Clone, Copy)]
pub(super) struct EventKinds {
    pub(super) kinds: u32,
}

impl EventKinds {
    pub(super) const ARRIVAL: u32 = 0;
    pub(super) fn leaves(self, kind: u32) -> u32 {
        1 + kind
    }
    pub(super) fn returns(self, kind: u32) -> u32 {
        1 + self.kinds + kind
    }
    pub(super) fn answer(self) -> u32 {
        1 + 2 * self.kinds
    }
    /// The end of a sequence that may go on past its answer. (An action id that no
    /// action has otherwise: returns are events, never actions.)
    pub(super) fn end(self) -> u32 {
        self.returns(0)
    }
    pub(super) fn count(self) -> u64 {
        u64::from(2 + 2 * self.kinds)
    }
    /// The key of (caller A, event before, event after).
    pub(super) fn key(self, caller: u32, before: u32, after: u32) -> u64 {
        (u64::from(caller) * self.count() + u64::from(before)) * self.count() + u64::from(after)
    }
}

/// The calls of one node as arrays, computed once: what the model reads of every
/// parent and child, and who watches whom.
pub(super) struct NodeCalls<'a> {
    /// The node's children and parents (the call pairs they index).
    pub(super) pairs: &'a [CallPair],
    pub(super) outgoing: &'a [u32],
    pub(super) incoming: &'a [u32],
    /// On a dense node ([`Self::set_dense`]), per child when it left and returned and
    /// per parent when it arrived and answered (B's clock), copied next to each other:
    /// every walk of a parent's sequence reads them, and read through `pairs`, where a
    /// node's calls are scattered among all the trace's, each was a cache miss (a third
    /// of the search's scoring on the 10.8 GB capture set). Empty elsewhere, where the
    /// search is cheap and the 32 bytes per call would be the peak's (the memory
    /// benchmark at parallelism 1.78: 103 bytes per message against 111 copied).
    kept_child_times: Vec<[Nanos; 2]>,
    kept_parent_times: Vec<[Nanos; 2]>,
    /// Per child (index into `outgoing`), the dense kind of its callee.
    pub(super) kind: Vec<u32>,
    /// Per parent (index into `incoming`), the dense id of its caller.
    pub(super) caller: Vec<u32>,
    /// Per child, the key of the connection it went out on; per parent, that of the
    /// connection it came in on ([`super::NO_CONNECTION`] where unknown). Each empty
    /// where none of its calls has one, and the parents' where the children's are.
    pub(super) child_connection: Vec<u64>,
    pub(super) parent_connection: Vec<u64>,
    /// Per child, its connection as an index among the node's connections out
    /// ([`NO_INDEX`] where unknown), and how many there are; empty with
    /// `child_connection`.
    pub(super) child_connection_index: Vec<u32>,
    pub(super) child_connections: usize,
    pub(super) events: EventKinds,
    /// Actions a parent can take: a call of each kind, or its answer.
    pub(super) actions: f64,
    /// ln-likelihood of a delay, and of an action, about which nothing was learned.
    pub(super) unknown_delay: f64,
    pub(super) unknown_transition: f64,
    pub(super) bins: Bins,
    /// Per bin, ln of the time it spans: a bin's share over its span is a density in
    /// time, which a bin's share alone is not (wider bins would win).
    pub(super) ln_span: Vec<f64>,
    /// Per kind of child, see [`orphan_logs`].
    pub(super) orphan_log: Vec<f64>,
    /// Whether the trace lost any call into this node, so a child may have no parent.
    pub(super) orphans: bool,
    /// Whether parents' sequences go on past the answer ([`NodeSettings::async_children`]).
    pub(super) async_children: bool,
    /// Whether children have [`SOFT_FROM_PARALLELISM`] candidates or more each, on
    /// average: where they have fewer, the search runs from one start, and weighs a
    /// pair of parents again rather than keep what it gained (the speed benchmark,
    /// 1.78 per child, took 7% longer keeping it).
    pub(super) dense: bool,
    pub(super) skew_window: Nanos,
    /// Whether a child looked at again weighs only what changed.
    pub(super) reweighing: Reweighing,
    pub(super) table: BinTable,
    /// Callers A and keys (A, C).
    pub(super) callers: usize,
    pub(super) link_keys: usize,
    /// Per parent, the children that have it as a candidate (the rows, transposed):
    /// whom to look at again when its children change.
    pub(super) watchers: Vec<u32>,
    pub(super) watcher_offsets: Vec<u32>,
    /// Per link (in the candidates' order), the bins of its start delay and return
    /// gap: the same for every start and every round, so kept once.
    pub(super) link_bins: Vec<[u16; 2]>,
    /// On a dense node, per parent its place among the node's calls in by arrival, and
    /// per child its place among the calls out of its kind by leaving, scaled by how
    /// many calls in there are per call out of that kind: where a queue serves requests
    /// in the order they came, a parent's place and its child's stay close however long
    /// the queue's wait ([`Self::rank_bin`]). Empty elsewhere.
    parent_rank: Vec<u32>,
    child_rank: Vec<u32>,
    /// Per kind of child, on a dense node, whether there are as many calls out of it as
    /// calls in, within [`UNMATCHED_PLACES`]: one per request, as a proxy or a queue's first
    /// call makes, whose places keep step with the arrivals'. Elsewhere a child's
    /// place drifts from its parent's with the mix of requests that make the call.
    pub(super) ranked_kind: Vec<bool>,
}

/// A child's connection index where its connection is unknown.
pub(super) const NO_INDEX: u32 = u32::MAX;

/// How far, as a share of calls in, the calls out of a kind may be from as many for
/// parents to make at most one of that kind ([`NodeCalls::at_most_one_of_each_kind`]).
const BALANCED: f64 = 0.02;

/// How many more or fewer calls out of a kind than calls in there may be for their
/// places to be weighed against the arrivals' ([`NodeCalls::ranked_kind`]). Each call
/// that is not its request's only one of the kind moves every later call's place on by
/// one, so the places wander from the arrivals' like a random walk bridged at both
/// ends, about √n / 2 places at its widest for n such calls: 16 keeps that within two.
/// A share would not do: the app of traces/shop under load at 128 clients makes a
/// second cache call for 0.7% of its requests, 188 in all, within 2%, and the end of
/// the start ordered by arrivals, fitted to its own offsets, beat the pinned end by
/// 0.37 nats per child with 0.3% of requests exact against 24.7%; its true offsets
/// were 16 to 64 places.
const UNMATCHED_PLACES: usize = 16;

/// Bins of the offset between a parent's place among arrivals and its child's among
/// calls out ([`NodeCalls::rank_bin`]): each offset from −[`EXACT_RANKS`] to
/// +[`EXACT_RANKS`] its own, then per sign offsets up to 16, 32, … 2^[`RANK_CLASSES`]
/// (and beyond, in the last).
pub(super) const RANK_BINS: usize = 2 * EXACT_RANKS as usize + 1 + 2 * (RANK_CLASSES - 2);
/// Offsets binned one by one on each side of zero.
const EXACT_RANKS: i64 = 8;
/// The power of two of the widest class of offsets but the last.
const RANK_CLASSES: usize = 10;

/// The bin ([`RANK_BINS`]) of an offset between two places. Bins run in the order of
/// offsets, so that neighbouring bins hold neighbouring offsets.
pub(super) fn rank_bin(offset: i64) -> usize {
    let classes = RANK_CLASSES - 2;
    if offset.abs() <= EXACT_RANKS {
        return classes + (offset + EXACT_RANKS) as usize;
    }
    // 9..=16 is class 4, 17..=32 class 5, ...: ⌈log2 |offset|⌉, the last unbounded.
    let class = (64 - (offset.unsigned_abs() - 1).leading_zeros()) as usize;
    let class = class.min(RANK_CLASSES + 1) - 4;
    if offset > 0 {
        RANK_BINS - classes + class
    } else {
        classes - 1 - class
    }
}

/// ln of how many offsets rank bin `bin` holds: a bin's share over its width is a
/// probability per offset, comparable between bins.
pub(super) fn ln_rank_width(bin: usize) -> f64 {
    let classes = RANK_CLASSES - 2;
    let exact = 2 * EXACT_RANKS as usize + 1;
    let class = if bin < classes {
        classes - 1 - bin
    } else if bin < classes + exact {
        return 0.0;
    } else {
        bin - classes - exact
    };
    // Class c + 4 holds offsets 2^(c+3)+1 ..= 2^(c+4): 2^(c+3) of them (the last,
    // unbounded, taken as wide as the class before it doubled).
    ((class + 3) as f64) * std::f64::consts::LN_2
}

/// Per child, its connection as an index among the node's connections out (by
/// `keys`, [`NO_INDEX`] where unknown), and how many there are: empty where the
/// connections are not kept long enough to say which calls share one. A worker's own
/// connections carry call after call, so a node's calls out are many times its
/// connections (the shop's app under load: 24,104 calls on 16); a connection per call
/// carries one, and its address and port come back only when the ports wrap around,
/// where calls out are a few times their connections (the 6.6 GB capture set's
/// database tier). There, siblings on ports opened one after the other looked like a
/// worker's (4.3 nats per pair, learned) and the search took three times as long, with
/// fewer calls right (69.3% against 69.8%). So calls out must be at least as many as
/// their connections squared: each connection reused about as often as there are
/// connections.
fn connection_indices(keys: &[u64]) -> (Vec<u32>, usize) {
    let mut indices: HashMap<u64, u32> = HashMap::new();
    let index: Vec<u32> = keys
        .iter()
        .map(|&key| {
            if key == super::NO_CONNECTION {
                return NO_INDEX;
            }
            let next = indices.len() as u32;
            *indices.entry(key).or_insert(next)
        })
        .collect();
    let connections = indices.len();
    if index.len() < connections.saturating_mul(connections) {
        return (Vec::new(), 0);
    }
    (index, connections)
}

impl<'a> NodeCalls<'a> {
    pub(super) fn new(
        pairs: &'a [CallPair],
        incoming: &'a [u32],
        outgoing: &'a [u32],
        candidates: &Candidates,
        scale: NodeSettings,
        facts: super::CallFacts<'_>,
    ) -> Self {
        let operation = facts.operation;
        let bins = scale.bins;
        let dense = |kinds: &mut dyn Iterator<Item = (NodeId, OperationId)>| -> Vec<u32> {
            let mut ids: HashMap<(NodeId, OperationId), u32> = HashMap::new();
            kinds
                .map(|kind| {
                    let next = ids.len() as u32;
                    *ids.entry(kind).or_insert(next)
                })
                .collect()
        };
        // Children are kinds by callee alone: split by operation too, the kinds get
        // too sparse to learn on (a cache's GET and SET apart).
        let kind = dense(
            &mut outgoing
                .iter()
                .map(|&c| (pairs[c as usize].callee, OperationId::NONE)),
        );
        let caller = dense(
            &mut incoming
                .iter()
                .map(|&p| (pairs[p as usize].caller, operation(p))),
        );
        let kinds = kind.iter().max().map_or(0, |&k| k + 1);
        let total = candidates.parents.len();
        let callers = caller.iter().max().map_or(0, |&a| a + 1);
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
        let orphan_log = orphan_logs(pairs, outgoing, &kind, kinds as usize, scale.lost);
        let connections =
            |calls: &[u32]| -> Vec<u64> { calls.iter().map(|&c| (facts.connection)(c)).collect() };
        let (mut child_connection, mut parent_connection) =
            (connections(outgoing), connections(incoming));
        let known = |keys: &[u64]| keys.iter().any(|&k| k != super::NO_CONNECTION);
        // Freed, not cleared, where unknown: kept for the node's whole search, they were
        // 5 MB of the 40-client shop's peak at a million messages. The children's alone
        // still say which calls out share a connection.
        if !known(&parent_connection) {
            parent_connection = Vec::new();
        }
        if !known(&child_connection) {
            (child_connection, parent_connection) = (Vec::new(), Vec::new());
        }
        let (child_connection_index, child_connections) = connection_indices(&child_connection);
        let mut calls = NodeCalls {
            child_connections,
            child_connection_index,
            pairs,
            outgoing,
            incoming,
            kept_child_times: Vec::new(),
            kept_parent_times: Vec::new(),
            kind,
            caller,
            child_connection,
            parent_connection,
            events: EventKinds { kinds },
            actions: f64::from(kinds + 1 + u32::from(scale.async_children)),
            unknown_delay: -(bins.count() as f64).ln(),
            unknown_transition: -f64::from(kinds + 1 + u32::from(scale.async_children)).ln(),
            bins,
            ln_span: bins.ln_spans(scale.tick, scale.skew_window),
            orphans: scale.lost > 0.0,
            async_children: scale.async_children,
            dense: false,
            skew_window: scale.skew_window,
            reweighing: scale.reweighing,
            orphan_log,
            table: bins.table(),
            callers: callers as usize,
            link_keys: (callers * kinds) as usize,
            watchers,
            watcher_offsets,
            link_bins: Vec::new(),
            parent_rank: Vec::new(),
            child_rank: Vec::new(),
            ranked_kind: Vec::new(),
        };
        // Bins fit 16 bits: the options are refused beyond that.
        calls.link_bins = (0..outgoing.len() as u32)
            .flat_map(|k| candidates.of(k as usize).iter().map(move |&p| (k, p)))
            .map(|(k, p)| {
                let (_, start, gap) = calls.link_bins(k, p);
                [start as u16, gap as u16]
            })
            .collect();
        calls
    }

    /// Child `k` (index into `outgoing`).
    pub(super) fn child(&self, k: u32) -> &CallPair {
        &self.pairs[self.outgoing[k as usize] as usize]
    }

    /// Parent `p` (index into `incoming`).
    pub(super) fn parent(&self, p: u32) -> &CallPair {
        &self.pairs[self.incoming[p as usize] as usize]
    }

    /// Marks the node dense or not ([`Self::dense`]), and keeps its calls' times beside
    /// each other if it is.
    pub(super) fn set_dense(&mut self, dense: bool) {
        self.dense = dense;
        if !dense {
            (self.kept_child_times, self.kept_parent_times) = (Vec::new(), Vec::new());
            (self.parent_rank, self.child_rank) = (Vec::new(), Vec::new());
            self.ranked_kind = Vec::new();
            return;
        }
        self.kept_child_times = (0..self.outgoing.len() as u32)
            .map(|k| self.child_times(k))
            .collect();
        self.kept_parent_times = (0..self.incoming.len() as u32)
            .map(|p| self.parent_times(p))
            .collect();
        self.rank_calls();
    }

    /// Places each parent among the node's calls in by arrival and each child among
    /// the calls out of its kind by leaving, scaled to the parents' count.
    fn rank_calls(&mut self) {
        let parents = self.incoming.len() as f64;
        let mut parent_rank = vec![0u32; self.incoming.len()];
        let mut order: Vec<u32> = (0..self.incoming.len() as u32).collect();
        order.sort_by_key(|&p| (self.parent_times(p)[0], p));
        for (at, &p) in order.iter().enumerate() {
            parent_rank[p as usize] = at as u32;
        }
        let mut child_rank = vec![0u32; self.outgoing.len()];
        self.ranked_kind = vec![false; self.events.kinds as usize];
        let mut order: Vec<u32> = (0..self.outgoing.len() as u32).collect();
        order.sort_by_key(|&k| (self.kind[k as usize], self.child_times(k)[0], k));
        for run in order.chunk_by(|&x, &y| self.kind[x as usize] == self.kind[y as usize]) {
            self.ranked_kind[self.kind[run[0] as usize] as usize] =
                run.len().abs_diff(self.incoming.len()) <= UNMATCHED_PLACES;
            let scale = parents / run.len() as f64;
            for (at, &k) in run.iter().enumerate() {
                child_rank[k as usize] = (at as f64 * scale).round() as u32;
            }
        }
        (self.parent_rank, self.child_rank) = (parent_rank, child_rank);
    }

    /// Whether parents make at most one call of each kind on average, up to
    /// [`BALANCED`]: a trace cut in segments, or a capture begun while requests were
    /// queued, has a few more calls out than in (the 16-worker gRPC proxy at 64 streams
    /// in segments of 40,000 lines: 2,487 calls out against 2,484 in).
    pub(super) fn at_most_one_of_each_kind(&self) -> bool {
        let mut of_kind = vec![0usize; self.events.kinds as usize];
        for &c in &self.kind {
            of_kind[c as usize] += 1;
        }
        let most = self.incoming.len() as f64 * (1.0 + BALANCED);
        of_kind.iter().all(|&n| n as f64 <= most)
    }

    /// How many places parent `p` is from child `k` (see [`Self::rank_bin`]).
    pub(super) fn rank_distance(&self, k: u32, p: u32) -> u32 {
        self.parent_rank[p as usize].abs_diff(self.child_rank[k as usize])
    }

    /// The bin ([`RANK_BINS`]) of how far parent `p`'s place among arrivals is from
    /// child `k`'s among calls out of its kind; only on a dense node.
    pub(super) fn rank_bin(&self, k: u32, p: u32) -> usize {
        rank_bin(i64::from(self.parent_rank[p as usize]) - i64::from(self.child_rank[k as usize]))
    }

    /// When child `k` left and when it returned (B's clock).
    pub(super) fn child_times(&self, k: u32) -> [Nanos; 2] {
        match self.kept_child_times.get(k as usize) {
            Some(&times) => times,
            None => {
                let child = self.child(k);
                [child.caller_send, child.caller_return]
            }
        }
    }

    /// When parent `p` arrived and when it answered (B's clock).
    pub(super) fn parent_times(&self, p: u32) -> [Nanos; 2] {
        match self.kept_parent_times.get(p as usize) {
            Some(&times) => times,
            None => {
                let parent = self.parent(p);
                [parent.callee_recv, parent.callee_return]
            }
        }
    }

    /// Whether parent `p` answered before child `k` returned: an asynchronous link.
    pub(super) fn answered(&self, k: u32, p: u32) -> bool {
        outlives(self.child(k), self.parent(p), self.skew_window)
    }

    /// For child `k` under parent `p`: the dense id of (p's caller A, k's callee C),
    /// the bin of the delay from p's arrival to k leaving, and the bin of the gap from
    /// k's return to p's answer. (Cheaper to recompute each round than to keep.)
    pub(super) fn link_bins(&self, k: u32, p: u32) -> (usize, usize, usize) {
        let ([send, back], [arrival, answer]) = (self.child_times(k), self.parent_times(p));
        let key = self.caller[p as usize] as usize * self.events.kinds as usize
            + self.kind[k as usize] as usize;
        let start = self.table.index(send - arrival);
        let end = self.table.index(answer - back);
        (key, start, end)
    }

    pub(super) fn watchers_of(&self, parent: u32) -> &[u32] {
        let at = parent as usize;
        &self.watchers[self.watcher_offsets[at] as usize..self.watcher_offsets[at + 1] as usize]
    }

    /// Walks parent `p`'s sequence with `children` (in the order they left B) as its
    /// calls out, visiting every action's [`Factor`], its delay measured from the
    /// latest event of `p` at or before the action. At equal times an arrival comes
    /// first, then returns, then calls leaving (a call that left in the tick its
    /// sibling returned is taken to follow that return). With asynchronous children,
    /// the answer comes before the calls that left after it, an untimed end after every
    /// action, so that the chain learns how often a parent calls on after it answered,
    /// and for every call out whether the parent waited for it ([`ParentWait`]).
    pub(super) fn walk(
        &self,
        p: u32,
        children: impl Iterator<Item = u32>,
        open: &mut Vec<(Nanos, u32)>,
        mut visit: impl FnMut(Factor),
    ) {
        // Events as (time, kind, class): class 0 the arrival, 1 a call leaving, 2 a
        // call returning, 3 the answer.
        type Event = (Nanos, u32, usize);
        let ev = self.events;
        let caller = self.caller[p as usize];
        let [arrival, answer] = self.parent_times(p);
        open.clear();
        let mut previous = EventKinds::ARRIVAL;
        let mut left: Option<Event> = None;
        let mut returned: Option<Event> = None;
        let mut answered: Option<Event> = None;
        let mut reference = |at: Nanos,
                             open: &mut Vec<(Nanos, u32)>,
                             left: Option<Event>,
                             answered: Option<Event>| {
            open.retain(|&(back, kind)| {
                if back > at {
                    return true;
                }
                if returned.is_none_or(|(latest, _, _)| back >= latest) {
                    returned = Some((back, ev.returns(kind), 2));
                }
                false
            });
            let mut best: Event = (arrival, EventKinds::ARRIVAL, 0);
            for event in [returned, left, answered].into_iter().flatten() {
                if event.0 >= best.0 {
                    best = event;
                }
            }
            best
        };
        let timed = |at: Nanos, action: u32, (since, before, class): Event, previous: u32| Factor {
            delay_key: ev.key(caller, before, action),
            pooled_key: class * ev.count() as usize + action as usize,
            before,
            delay: at - since,
            timed: true,
            awaited: None,
            transition_key: ev.key(caller, previous, action),
            context_key: ev.key(caller, previous, 0),
        };
        for k in children {
            let [at, back] = self.child_times(k);
            let kind = self.kind[k as usize];
            if self.async_children && answered.is_none() && at >= answer && back > answer {
                // The first call out after the answer: the answer comes first.
                visit(timed(
                    answer,
                    ev.answer(),
                    reference(answer, open, left, None),
                    previous,
                ));
                previous = ev.answer();
                answered = Some((answer, ev.answer(), 3));
            }
            let action = ev.leaves(kind);
            visit(timed(
                at,
                action,
                reference(at, open, left, answered),
                previous,
            ));
            if self.async_children {
                // Whether the parent waited for it, and if not whether it had answered
                // already: otherwise nothing would stop a parent from answering as if
                // its children had not been made.
                let wait = if back <= answer + self.skew_window {
                    ParentWait::Awaited
                } else if at < answer {
                    ParentWait::Outlived
                } else {
                    ParentWait::AfterAnswer
                };
                visit(Factor {
                    delay_key: (caller * self.events.kinds + kind) as u64,
                    pooled_key: 0,
                    before: EventKinds::ARRIVAL,
                    delay: 0,
                    timed: false,
                    awaited: Some(wait),
                    transition_key: 0,
                    context_key: 0,
                });
            }
            previous = action;
            left = Some((at, action, 1));
            open.push((back, kind));
        }
        if answered.is_none() {
            visit(timed(
                answer,
                ev.answer(),
                reference(answer, open, left, None),
                previous,
            ));
            previous = ev.answer();
        }
        if self.async_children {
            visit(Factor {
                delay_key: 0,
                pooled_key: 0,
                before: EventKinds::ARRIVAL,
                delay: 0,
                timed: false,
                awaited: None,
                transition_key: ev.key(caller, previous, ev.end()),
                context_key: ev.key(caller, previous, 0),
            });
        }
    }
}

/// One factor of a parent's likelihood: an action, timed from the event before it.
pub(super) struct Factor {
    /// (caller, event before, action): whose delay density times the action.
    pub(super) delay_key: u64,
    /// (class of the event before, action): the pooled density, when the above was
    /// never seen.
    pub(super) pooled_key: usize,
    /// The event the action is timed from (an [`EventKinds`] id): the arrival, a call
    /// of some kind leaving or returning, or the answer.
    pub(super) before: u32,
    pub(super) delay: Nanos,
    /// Whether the action has a delay (all but the end of a sequence that may go on
    /// past its answer).
    pub(super) timed: bool,
    /// With asynchronous children, for each call out: whether the parent waited for it.
    /// Such a factor is this alone, for the link key (caller A, kind C) in `delay_key`.
    pub(super) awaited: Option<ParentWait>,
    /// (caller, previous action, action): the Markov chain's transition.
    pub(super) transition_key: u64,
    /// (caller, previous action, 0): where the chance of an unseen action is kept.
    pub(super) context_key: u64,
}

/// How a parent treated one of its calls out.
#[derive(Clone, Copy)]
pub(super) enum ParentWait {
    /// It answered after the call returned.
    Awaited = 0,
    /// It made the call, then answered before the call returned (fire and forget).
    Outlived = 1,
    /// It made the call after it answered (write-back).
    AfterAnswer = 2,
}
