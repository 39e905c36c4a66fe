//! Step 4 of the nesting algorithm (paper §5.1.1.4, FindCallPaths): each root call and
//! its chosen descendants form a path instance; instances with the same canonical
//! signature are one path pattern, with every node's latency and call delay kept.
//! Owns the signature syntax and the statistics; ranking and printing are the report's.

use super::call_pairs::CallPair;
use super::critical;
use super::parents::NO_PARENT;
use crate::trace::{Held, Kind, Nanos, NodeId, OperationId, Status, Trace};
use hashbrown::HashMap;

/// A node's place in a pattern's tree, with the samples of every instance.
#[derive(Debug, Clone, PartialEq)]
pub struct Position {
    /// The node called here.
    pub node: NodeId,
    /// Who called it.
    pub caller: NodeId,
    /// Child positions, in call-time order.
    pub children: Vec<u32>,
    /// Time at the node, children included, per instance (callee's clock).
    pub latencies: Samples,
    /// From the parent's call arriving at the caller to this call leaving it, per
    /// instance (caller's clock); zero at the root.
    pub call_delays: Samples,
    /// Sum over instances of the call's own time: its latency not covered by the calls
    /// it makes (each until the last byte of its answer) nor by waiting for the rest of
    /// its own request, overlaps counted once ([`own_time`]).
    pub own_time_sum: f64,
    /// Per instance, the call's time between its first byte and its last: inside the
    /// latency here, as the node waits for the rest of its request. Empty where the
    /// trace knows no message's transit (text traces without `spread=`).
    pub request_transit: Samples,
    /// Per instance, the answer's time between its first byte and its last: after the
    /// latency here, before the caller has the whole answer. Empty as `request_transit`.
    pub reply_transit: Samples,
    /// Sum over instances of what TCP held back in the call and the answer until the
    /// peer's ACK (part of the two transits).
    pub held_sum: f64,
    /// Instances in which TCP held part of the call or the answer back, by why (in the
    /// order of [`Held`]: Nagle's algorithm, the window).
    pub held: [u64; 2],
    /// Sum over instances of this call's own time on its request's critical path
    /// ([`super::critical`]).
    pub critical_own_sum: f64,
    /// Sum over instances of this edge's time in transit on the critical path.
    pub critical_transit_sum: f64,
    /// Sum over instances of the latency saved were this node's own time (`[0]`) or
    /// this edge's transit (`[1]`) each of [`super::critical::WHAT_IF_SHARES`] shorter.
    pub savings: [[f64; 2]; 2],
    /// Instances in which the parent answered before this call returned: it did not
    /// wait for it (an asynchronous child; see
    /// [`crate::nesting::NestOptions::async_window`]).
    pub unawaited: u64,
    /// The operations called here and how often, in order of first appearance (a
    /// handful per position: a service has few methods).
    pub operations: Vec<(OperationId, u64)>,
    /// Instances whose call here was answered with a failure.
    pub errors: u64,
    /// Instances whose answer's status is known (the denominator of the error rate).
    pub with_status: u64,
    /// Sum over instances of the confidence that this call's parent is right (1 at the
    /// root, which has none).
    pub confidence_sum: f64,
    /// Whether this call is a broker's delivery of a message its parent published and
    /// did not wait for (`⇒` in the signature; [`super::hops`]): its call delay is the
    /// message's time in the broker.
    pub through_broker: bool,
}

impl Position {
    /// The edge's mean time in transit: the call's and the answer's, between each
    /// one's first byte and its last, over all instances.
    pub fn mean_transit(&self) -> f64 {
        let sum = self.request_transit.sum() + self.reply_transit.sum();
        sum as f64 / self.latencies.len().max(1) as f64
    }

    /// The part of the edge's mean transit that the pattern's latency holds: all of it
    /// below the root; at the root, the request's alone (its answer goes on after the
    /// root's latency ends).
    pub fn mean_transit_within(&self, root: bool) -> f64 {
        match root {
            true => self.request_transit.sum() as f64 / self.latencies.len().max(1) as f64,
            false => self.mean_transit(),
        }
    }

    /// Mean own time on the critical path, and mean edge transit on it.
    pub fn mean_critical(&self) -> (f64, f64) {
        let count = self.latencies.len().max(1) as f64;
        (
            self.critical_own_sum / count,
            self.critical_transit_sum / count,
        )
    }

    /// The mean latency saved were the node's own time (`transit` false) or the edge's
    /// transit a share shorter, for each of [`super::critical::WHAT_IF_SHARES`].
    pub fn mean_savings(&self, transit: bool) -> [f64; 2] {
        let count = self.latencies.len().max(1) as f64;
        self.savings[usize::from(transit)].map(|sum| sum / count)
    }

    /// Why TCP held this edge's messages back most often, with in how many instances.
    pub fn held_most(&self) -> Option<(Held, u64)> {
        let (nagle, window) = (self.held[0], self.held[1]);
        match (nagle, window) {
            (0, 0) => None,
            _ if nagle >= window => Some((Held::Nagle, nagle + window)),
            _ => Some((Held::Window, nagle + window)),
        }
    }

    /// The operations called here with their counts, most frequent first (ties by
    /// name), for output.
    pub fn operations_by_count<'t>(&self, trace: &'t Trace) -> Vec<(&'t str, u64)> {
        let mut named: Vec<(&str, u64)> = self
            .operations
            .iter()
            .filter_map(|&(id, count)| Some((trace.operation_name(id)?, count)))
            .collect();
        named.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        named
    }

    fn count_operation(&mut self, operation: OperationId) {
        if operation == OperationId::NONE {
            return;
        }
        match self
            .operations
            .iter_mut()
            .find(|(known, _)| *known == operation)
        {
            Some((_, count)) => *count += 1,
            None => self.operations.push((operation, 1)),
        }
    }
}

/// One causal path pattern: a call tree shape, how often it occurred, and its latencies.
#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    /// Canonical signature, `caller->node(child,child(grandchild))`.
    pub signature: String,
    /// Positions in pre-order; position 0 is the root call.
    pub positions: Vec<Position>,
    /// The root call of each instance, as indexes into the call pairs; empty for a
    /// pattern of a nesting done in segments, whose pairs are gone
    /// ([`crate::streaming`]).
    pub instances: Vec<u32>,
    /// Sum of the confidence of every parent choice in the instances (roots left out).
    pub confidence_sum: f64,
    /// The least confident of those choices; 1 when there are none.
    pub confidence_min: f32,
    /// Sum over instances of the product of their choices' confidences: how many of
    /// them are exactly right, as far as the confidence can tell.
    pub expected_exact: f64,
    /// Where a broker carried part of the request on after it was answered (a
    /// position [`Position::through_broker`]): per instance, how long after the root's
    /// answer reached its caller the last call of the tree ended, 0 if none did later.
    /// Empty for a pattern without such a hop.
    pub tails: Samples,
}

impl Pattern {
    /// How many path instances have this pattern.
    pub fn count(&self) -> u64 {
        self.positions[0].latencies.len() as u64
    }

    /// Sum of the root node's latency over all instances.
    pub fn total_latency(&self) -> i128 {
        self.positions[0].latencies.sum()
    }

    /// Each position's mean own time (latency not covered by its calls), in pre-order.
    pub fn mean_own_times(&self) -> Vec<f64> {
        let count = self.count().max(1) as f64;
        self.positions
            .iter()
            .map(|p| p.own_time_sum / count)
            .collect()
    }

    /// Calls on the longest root-to-leaf chain (1 for a lone call).
    pub fn depth(&self) -> usize {
        // Positions are in pre-order, so a child's position is after its parent's.
        let mut depth = vec![1usize; self.positions.len()];
        for (i, position) in self.positions.iter().enumerate() {
            for &child in &position.children {
                depth[child as usize] = depth[i] + 1;
            }
        }
        depth.into_iter().max().unwrap_or(0)
    }

    /// Mean root latency in nanoseconds.
    pub fn mean_latency(&self) -> f64 {
        self.total_latency() as f64 / self.count() as f64
    }

    /// The share of instances whose every call has its true parent and no other call
    /// belongs to, as the confidences promise (per instance, the product of its calls'
    /// confidences and of how sure each call is that no call outside its children is
    /// its own, averaged): the share `eval`'s requests' reliability table holds it to.
    pub fn sure(&self) -> f64 {
        self.expected_exact / self.count().max(1) as f64
    }

    /// Mean confidence of the parent choices that built the instances; 1 for a pattern
    /// of lone calls, which needed none.
    pub fn mean_confidence(&self) -> f64 {
        let decisions = (self.positions.len() - 1) as u64 * self.count();
        if decisions == 0 {
            1.0
        } else {
            self.confidence_sum / decisions as f64
        }
    }
}

/// A distribution in summary: mean and nearest-rank percentiles, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: Nanos,
    /// 90th percentile.
    pub p90: Nanos,
    /// 99th percentile.
    pub p99: Nanos,
}

impl Summary {
    /// Summarises samples (there must be at least one).
    pub fn of(samples: &[Nanos]) -> Summary {
        assert!(
            !samples.is_empty(),
            "a pattern position has one sample per instance"
        );
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let rank =
            |q: f64| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1];
        let sum: i128 = samples.iter().map(|&s| i128::from(s)).sum();
        Summary {
            mean: sum as f64 / samples.len() as f64,
            p50: rank(0.5),
            p90: rank(0.9),
            p99: rank(0.99),
        }
    }
}

/// Values a pattern position has once per instance. A nesting of the whole trace keeps
/// every value, in instance order (the HTML report draws single requests from them);
/// a nesting done in segments ([`crate::streaming`]) keeps them while a position has at
/// most [`EXACT_SAMPLES`], past which they go into a DDSketch (sketches-ddsketch) whose
/// percentiles are within [`SKETCH_ERROR`] of the value: memory bounded by the range
/// of values, not by the trace's length. Count, sum and mean stay exact either way.
#[derive(Clone, Default)]
pub struct Samples {
    values: Vec<Nanos>,
    sketch: Option<Box<sketches_ddsketch::DDSketch>>,
    count: u64,
    sum: i128,
}

/// Values a position of a segmented nesting keeps one by one before sketching them.
pub const EXACT_SAMPLES: usize = 512;

/// The relative error of a sketched percentile.
pub const SKETCH_ERROR: f64 = 0.001;

impl Samples {
    /// Adds one instance's value.
    pub fn push(&mut self, value: Nanos) {
        self.count += 1;
        self.sum += i128::from(value);
        match &mut self.sketch {
            Some(sketch) => sketch.add(value as f64),
            None => self.values.push(value),
        }
    }

    /// How many instances.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The exact sum of the values.
    pub fn sum(&self) -> i128 {
        self.sum
    }

    /// Every value in instance order, or `None` once they were sketched.
    pub fn values(&self) -> Option<&[Nanos]> {
        self.sketch.is_none().then_some(self.values.as_slice())
    }

    /// Mean and percentiles: exact (nearest rank) while every value is kept, else the
    /// sketch's percentiles with the exact mean.
    pub fn summary(&self) -> Summary {
        match &self.sketch {
            None => Summary::of(&self.values),
            Some(sketch) => {
                let at = |q: f64| {
                    sketch
                        .quantile(q)
                        .ok()
                        .flatten()
                        .map_or(0, |v| v.round() as Nanos)
                };
                Summary {
                    mean: self.sum as f64 / self.count.max(1) as f64,
                    p50: at(0.5),
                    p90: at(0.9),
                    p99: at(0.99),
                }
            }
        }
    }

    /// [`Self::summary`], or zeros where there are no values (a trace that knows no
    /// transits keeps none).
    pub fn summary_or_zero(&self) -> Summary {
        match self.is_empty() {
            true => Summary {
                mean: 0.0,
                p50: 0,
                p90: 0,
                p99: 0,
            },
            false => self.summary(),
        }
    }

    /// Adds `other`'s values after these; past `exact` values in all, both go into a
    /// sketch.
    pub fn merge(&mut self, other: &Samples, exact: usize) {
        self.count += other.count;
        self.sum += other.sum;
        if self.sketch.is_none()
            && other.sketch.is_none()
            && self.values.len() + other.values.len() <= exact
        {
            self.values.extend_from_slice(&other.values);
            return;
        }
        let sketch = self.sketch.get_or_insert_with(|| {
            let config = sketches_ddsketch::Config::new(SKETCH_ERROR, 1 << 14, 1.0);
            Box::new(sketches_ddsketch::DDSketch::new(config))
        });
        for &value in self.values.iter().chain(&other.values) {
            sketch.add(value as f64);
        }
        if let Some(theirs) = &other.sketch {
            sketch
                .merge(theirs)
                .expect("every sketch here has the same configuration");
        }
        self.values = Vec::new();
    }
}

impl std::fmt::Debug for Samples {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.values() {
            Some(values) => values.fmt(f),
            None => write!(f, "{} sketched values, sum {}", self.count, self.sum),
        }
    }
}

impl PartialEq for Samples {
    fn eq(&self, other: &Samples) -> bool {
        (self.count, self.sum, self.values()) == (other.count, other.sum, other.values())
    }
}

/// A call's own time: its `latency` less the union of its calls' spans, each given as
/// (when it left after the call arrived, its latency) and clamped into the call.
/// `intervals` is scratch space.
pub fn own_time(
    latency: Nanos,
    calls: impl Iterator<Item = (Nanos, Nanos)>,
    intervals: &mut Vec<(Nanos, Nanos)>,
) -> Nanos {
    intervals.clear();
    intervals.extend(calls.map(|(delay, length)| {
        let from = delay.clamp(0, latency);
        (from, (from + length).clamp(from, latency))
    }));
    intervals.sort_unstable();
    let mut covered = 0;
    let mut reach = Nanos::MIN;
    for &(from, to) in intervals.iter() {
        let from = from.max(reach);
        if to > from {
            covered += to - from;
            reach = to;
        }
    }
    (latency - covered).max(0)
}

/// Children of every call in call-time order, in compressed rows.
pub struct ChildLists {
    offsets: Vec<u32>,
    children: Vec<u32>,
}

impl ChildLists {
    /// Builds the lists from the parent of each call; `pairs` are in call-time order, so
    /// the rows are too.
    pub fn new(parent: &[u32]) -> Self {
        let mut offsets = vec![0u32; parent.len() + 1];
        for &p in parent.iter().filter(|&&p| p != NO_PARENT) {
            offsets[p as usize + 1] += 1;
        }
        for i in 0..parent.len() {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut children = vec![0u32; offsets[parent.len()] as usize];
        for (child, &p) in parent.iter().enumerate() {
            if p != NO_PARENT {
                children[fill[p as usize] as usize] = child as u32;
                fill[p as usize] += 1;
            }
        }
        ChildLists { offsets, children }
    }

    /// The children of call `i`.
    pub fn of(&self, i: u32) -> &[u32] {
        &self.children[self.offsets[i as usize] as usize..self.offsets[i as usize + 1] as usize]
    }
}

/// Groups the trees under every root into patterns, in order of first appearance.
pub fn find_patterns(
    trace: &Trace,
    pairs: &[CallPair],
    tree: Tree<'_>,
    by_operation: bool,
) -> Vec<Pattern> {
    find_patterns_of(trace, pairs, tree, by_operation, &|_| true)
}

/// What the patterns are made of, per call pair: its parent ([`NO_PARENT`] for a
/// root), the confidence of that choice and how sure it is that no other call is its
/// child ([`whole_share`]); and the deliveries that are asynchronous hops through a
/// broker, ascending ([`super::hops`]).
#[derive(Debug, Clone, Copy)]
pub struct Tree<'a> {
    /// Per call, its parent.
    pub parent: &'a [u32],
    /// Per call, how sure its parent choice is.
    pub confidence: &'a [f32],
    /// Per call, how sure it is that it has no other child.
    pub complete: &'a [f32],
    /// The asynchronous hops.
    pub hops: &'a [u32],
}

impl<'a> Tree<'a> {
    /// The tree of a nesting.
    pub fn of(nesting: &'a super::Nesting) -> Self {
        Tree {
            parent: &nesting.parent,
            confidence: &nesting.confidence,
            complete: &nesting.complete,
            hops: &nesting.hops,
        }
    }
}

/// How far call `call` keeps its request whole, as a pattern's `sure` counts it: the
/// confidence of its parent choice (`chosen`: it has a parent) times how sure it is that
/// no call outside its children is its own. A request's sureness is the product over
/// its calls.
pub fn whole_share(chosen: bool, confidence: &[f32], complete: &[f32], call: usize) -> f64 {
    let choice = if chosen { confidence[call] } else { 1.0 };
    f64::from(choice) * f64::from(complete.get(call).copied().unwrap_or(1.0))
}

/// The roots among the calls, lazily: a trace has millions.
fn roots(parent: &[u32]) -> impl Iterator<Item = u32> + '_ {
    (0..parent.len() as u32).filter(|&i| parent[i as usize] == NO_PARENT)
}

/// [`find_patterns`] of the trees whose root `keep` keeps (`blackbox diff`'s time
/// ranges).
pub fn find_patterns_of(
    trace: &Trace,
    pairs: &[CallPair],
    tree: Tree<'_>,
    by_operation: bool,
    keep: &dyn Fn(u32) -> bool,
) -> Vec<Pattern> {
    patterns_among(
        trace,
        pairs,
        (&ChildLists::new(tree.parent), tree),
        by_operation,
        roots(tree.parent).filter(|&root| keep(root)),
    )
}

/// [`find_patterns`] per group of trees: `group` puts each root in one of `groups`
/// groups, or none (`--window`'s windows). The call tree is walked once for all.
pub fn find_patterns_by_group(
    trace: &Trace,
    pairs: &[CallPair],
    tree: Tree<'_>,
    by_operation: bool,
    (group, groups): (&dyn Fn(u32) -> Option<usize>, usize),
) -> Vec<Vec<Pattern>> {
    let children = ChildLists::new(tree.parent);
    let mut grouped = vec![Vec::new(); groups];
    for root in roots(tree.parent) {
        if let Some(g) = group(root).filter(|&g| g < groups) {
            grouped[g].push(root);
        }
    }
    grouped
        .into_iter()
        .map(|roots| {
            patterns_among(
                trace,
                pairs,
                (&children, tree),
                by_operation,
                roots.into_iter(),
            )
        })
        .collect()
}

fn patterns_among(
    trace: &Trace,
    pairs: &[CallPair],
    (children, tree): (&ChildLists, Tree<'_>),
    by_operation: bool,
    roots: impl Iterator<Item = u32>,
) -> Vec<Pattern> {
    let Tree {
        confidence,
        complete,
        hops,
        ..
    } = tree;
    let hop = |call: u32| hops.binary_search(&call).is_ok();
    let mut by_signature: HashMap<String, u32> = HashMap::new();
    let mut patterns: Vec<Pattern> = Vec::new();
    let mut signature = String::new();
    let mut order = Vec::new();
    let mut intervals = Vec::new();
    let (mut timings, mut on_path) = (Vec::new(), Vec::new());
    let transits = trace.has_transits();
    let spread = |pair: &CallPair, kind: Kind| match transits {
        true => trace.transit(pair.call_id, kind).spread,
        false => 0,
    };
    for root in roots {
        write_signature(
            trace,
            (pairs, children, &hop),
            root,
            by_operation,
            &mut signature,
        );
        let index = match by_signature.get(signature.as_str()) {
            Some(&index) => index,
            None => {
                let index = patterns.len() as u32;
                patterns.push(Pattern {
                    signature: signature.clone(),
                    positions: shape(pairs, children, root, &hop),
                    instances: Vec::new(),
                    confidence_sum: 0.0,
                    confidence_min: 1.0,
                    expected_exact: 0.0,
                    tails: Samples::default(),
                });
                by_signature.insert(signature.clone(), index);
                index
            }
        };
        let pattern = &mut patterns[index as usize];
        pattern.instances.push(root);
        preorder(children, root, &mut order);
        let mut all_right = 1.0f64;
        for (position, &(call, parent_call)) in pattern.positions.iter_mut().zip(&order) {
            let pair = &pairs[call as usize];
            position.latencies.push(pair.latency());
            // Waiting for the rest of the request, then each call out until the last
            // byte of its answer.
            let request = spread(pair, Kind::Call);
            let calls = children.of(call).iter().map(|&kid| {
                let kid = &pairs[kid as usize];
                let answer = spread(kid, Kind::Return);
                (kid.caller_send - pair.callee_recv, kid.latency() + answer)
            });
            let calls = std::iter::once((0, request)).chain(calls);
            position.own_time_sum += own_time(pair.latency(), calls, &mut intervals) as f64;
            if transits {
                let (ask, answer) = (
                    trace.transit(pair.call_id, Kind::Call),
                    trace.transit(pair.call_id, Kind::Return),
                );
                position.request_transit.push(ask.spread);
                position.reply_transit.push(answer.spread);
                position.held_sum += (ask.held + answer.held) as f64;
                let longer = if ask.held >= answer.held { ask } else { answer };
                if let Some(why) = longer.why {
                    position.held[why as usize] += 1;
                }
            }
            position.count_operation(trace.operation(pair.call_id));
            let chosen = parent_call != NO_PARENT;
            all_right *= whole_share(chosen, confidence, complete, call as usize);
            match trace.status(pair.call_id) {
                Status::Unknown => {}
                Status::Ok => position.with_status += 1,
                Status::Failed(_) => {
                    position.with_status += 1;
                    position.errors += 1;
                }
            }
            let delay = if parent_call == NO_PARENT {
                position.confidence_sum += 1.0;
                0
            } else {
                let sure = confidence[call as usize];
                position.confidence_sum += f64::from(sure);
                pattern.confidence_sum += f64::from(sure);
                pattern.confidence_min = pattern.confidence_min.min(sure);
                let parent = &pairs[parent_call as usize];
                if super::candidates::outlives(pair, parent, 0) {
                    position.unawaited += 1;
                }
                pair.caller_send - parent.callee_recv
            };
            position.call_delays.push(delay);
        }
        pattern.expected_exact += all_right;
        if pattern
            .positions
            .iter()
            .any(|position| position.through_broker)
        {
            // Every call's last moment, on its own node's clock, after the answer the
            // caller of the root had.
            let answered = pairs[root as usize].caller_return;
            let ended = (order.iter())
                .map(|&(call, _)| {
                    let pair = &pairs[call as usize];
                    pair.caller_return.max(pair.callee_return)
                })
                .max()
                .unwrap_or(answered);
            pattern.tails.push((ended - answered).max(0));
        }
        timings.clear();
        timings.extend(order.iter().map(|&(call, parent_call)| {
            let pair = &pairs[call as usize];
            critical::Timing {
                latency: pair.latency(),
                start: match parent_call {
                    NO_PARENT => 0,
                    parent => pair.caller_send - pairs[parent as usize].callee_recv,
                },
                request: spread(pair, Kind::Call),
                reply: spread(pair, Kind::Return),
            }
        }));
        let positions = &pattern.positions;
        critical::walk(&timings, |i| &positions[i].children, &mut on_path);
        for (position, path) in pattern.positions.iter_mut().zip(&on_path) {
            position.critical_own_sum += path.own as f64;
            position.critical_transit_sum += path.transit as f64;
            for (k, &share) in critical::WHAT_IF_SHARES.iter().enumerate() {
                position.savings[0][k] += path.saving(false, share);
                position.savings[1][k] += path.saving(true, share);
            }
        }
    }
    patterns
}

/// Each call's part in its request's critical path ([`critical::walk`]), for every
/// call of every tree: what the OTLP export tells of each span.
pub fn critical_paths(trace: &Trace, pairs: &[CallPair], parent: &[u32]) -> Vec<critical::OnPath> {
    let children = ChildLists::new(parent);
    let transits = trace.has_transits();
    let spread = |pair: &CallPair, kind: Kind| match transits {
        true => trace.transit(pair.call_id, kind).spread,
        false => 0,
    };
    let mut out = vec![critical::OnPath::default(); pairs.len()];
    let mut position = vec![0u32; pairs.len()];
    let (mut order, mut timings, mut kids, mut on_path) =
        (Vec::new(), Vec::new(), Vec::<Vec<u32>>::new(), Vec::new());
    for root in roots(parent) {
        preorder(&children, root, &mut order);
        for (k, &(call, _)) in order.iter().enumerate() {
            position[call as usize] = k as u32;
        }
        timings.clear();
        kids.clear();
        for &(call, parent_call) in &order {
            let pair = &pairs[call as usize];
            timings.push(critical::Timing {
                latency: pair.latency(),
                start: match parent_call {
                    NO_PARENT => 0,
                    p => pair.caller_send - pairs[p as usize].callee_recv,
                },
                request: spread(pair, Kind::Call),
                reply: spread(pair, Kind::Return),
            });
            kids.push(
                children
                    .of(call)
                    .iter()
                    .map(|&c| position[c as usize])
                    .collect(),
            );
        }
        critical::walk(&timings, |k| &kids[k], &mut on_path);
        for (&(call, _), path) in order.iter().zip(&on_path) {
            out[call as usize] = *path;
        }
    }
    out
}

/// Writes `caller->tree` for the tree under `root`, without recursion so that deep
/// trees cannot exhaust the stack.
///
/// A delivery through a broker that its publish did not wait for (`hop`) is written
/// after the publish as `⇒consumer(...)`, not among its children: the asynchronous hop
/// drawn apart, `client->web(nats⇒worker(cache))`.
fn write_signature(
    trace: &Trace,
    (pairs, children, hop): (&[CallPair], &ChildLists, &dyn Fn(u32) -> bool),
    root: u32,
    by_operation: bool,
    out: &mut String,
) {
    enum Step {
        Node(u32),
        Text(&'static str),
    }
    out.clear();
    out.push_str(trace.node_name(pairs[root as usize].caller));
    out.push_str("->");
    let mut stack = vec![Step::Node(root)];
    while let Some(step) = stack.pop() {
        match step {
            Step::Text(text) => out.push_str(text),
            Step::Node(call) => {
                let pair = &pairs[call as usize];
                out.push_str(trace.node_name(pair.callee));
                if by_operation {
                    if let Some(name) = trace.operation_name(trace.operation(pair.call_id)) {
                        push_operation(name, out);
                    }
                }
                let kids = children.of(call);
                // Pushed in reverse: the hops come out after the parentheses.
                for &kid in kids.iter().rev().filter(|&&kid| hop(kid)) {
                    stack.push(Step::Node(kid));
                    stack.push(Step::Text("⇒"));
                }
                let nested = kids.iter().filter(|&&kid| !hop(kid)).count();
                if nested > 0 {
                    out.push('(');
                    stack.push(Step::Text(")"));
                    let mut before = nested;
                    for &kid in kids.iter().rev().filter(|&&kid| !hop(kid)) {
                        stack.push(Step::Node(kid));
                        before -= 1;
                        if before > 0 {
                            stack.push(Step::Text(","));
                        }
                    }
                }
            }
        }
    }
}

/// `[name]`, with what a signature cannot hold (blanks, parentheses, commas, brackets)
/// written as `_`, as the text trace writes an operation's blanks.
fn push_operation(name: &str, out: &mut String) {
    out.push('[');
    out.extend(name.chars().map(|c| match c {
        ' ' | '\t' | '(' | ')' | ',' | '[' | ']' => '_',
        c => c,
    }));
    out.push(']');
}

/// (call, its parent call) in pre-order under `root`.
fn preorder(children: &ChildLists, root: u32, out: &mut Vec<(u32, u32)>) {
    out.clear();
    let mut stack = vec![(root, NO_PARENT)];
    while let Some((call, parent)) = stack.pop() {
        out.push((call, parent));
        for &kid in children.of(call).iter().rev() {
            stack.push((kid, call));
        }
    }
}

fn shape(
    pairs: &[CallPair],
    children: &ChildLists,
    root: u32,
    hop: &dyn Fn(u32) -> bool,
) -> Vec<Position> {
    let mut order = Vec::new();
    preorder(children, root, &mut order);
    let index_of: HashMap<u32, u32> = order
        .iter()
        .enumerate()
        .map(|(i, &(call, _))| (call, i as u32))
        .collect();
    order
        .iter()
        .map(|&(call, _)| Position {
            node: pairs[call as usize].callee,
            caller: pairs[call as usize].caller,
            children: children.of(call).iter().map(|kid| index_of[kid]).collect(),
            latencies: Samples::default(),
            call_delays: Samples::default(),
            own_time_sum: 0.0,
            request_transit: Samples::default(),
            reply_transit: Samples::default(),
            held_sum: 0.0,
            held: [0; 2],
            critical_own_sum: 0.0,
            critical_transit_sum: 0.0,
            savings: [[0.0; 2]; 2],
            unawaited: 0,
            operations: Vec::new(),
            errors: 0,
            with_status: 0,
            confidence_sum: 0.0,
            through_broker: hop(call),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let samples: Vec<Nanos> = (1..=100).collect();
        let s = Summary::of(&samples);
        assert_eq!((s.p50, s.p90, s.p99), (50, 90, 99));
        assert_eq!(s.mean, 50.5);
        let one = Summary::of(&[7]);
        assert_eq!((one.p50, one.p90, one.p99, one.mean), (7, 7, 7, 7.0));
    }

    #[test]
    fn own_time_counts_overlapping_calls_once() {
        let mut scratch = Vec::new();
        // 30 ns at the node; calls over 0..10, 5..15 and 20..25: 20 ns covered.
        let calls = [(0, 10), (5, 10), (20, 5)].into_iter();
        assert_eq!(own_time(30, calls, &mut scratch), 10);
        // A call reaching past its caller's answer is clamped into it.
        assert_eq!(own_time(10, [(5, 100)].into_iter(), &mut scratch), 5);
        assert_eq!(own_time(7, std::iter::empty(), &mut scratch), 7);
    }

    #[test]
    fn samples_past_the_exact_limit_are_sketched_within_its_error() {
        let (mut a, mut b) = (Samples::default(), Samples::default());
        for v in 1..=5_000 {
            a.push(v * 1_000);
            b.push((5_000 + v) * 1_000);
        }
        let mut merged = Samples::default();
        merged.merge(&a, EXACT_SAMPLES);
        assert_eq!(
            merged.values().map(<[_]>::len),
            None,
            "5,000 values sketched"
        );
        merged.merge(&b, EXACT_SAMPLES);
        let s = merged.summary();
        assert_eq!((merged.len(), s.mean), (10_000, 5_000_500.0));
        for (got, exact) in [
            (s.p50, 5_000_000.0),
            (s.p90, 9_000_000.0),
            (s.p99, 9_900_000.0),
        ] {
            assert!(
                (got as f64 - exact).abs() <= 2.0 * SKETCH_ERROR * exact,
                "{got} vs {exact}"
            );
        }
        // Few values stay exact, in order.
        let of = |values: &[Nanos]| {
            let mut samples = Samples::default();
            values.iter().for_each(|&v| samples.push(v));
            samples
        };
        let mut few = Samples::default();
        few.merge(&of(&[3, 1, 2]), EXACT_SAMPLES);
        few.merge(&of(&[9]), EXACT_SAMPLES);
        assert_eq!(few.values(), Some(&[3, 1, 2, 9][..]));
        assert_eq!(few.summary(), Summary::of(&[3, 1, 2, 9]));
    }

    #[test]
    fn child_lists_keep_call_order() {
        let lists = ChildLists::new(&[NO_PARENT, 0, 0, 1, NO_PARENT, 0]);
        assert_eq!(lists.of(0), &[1, 2, 5]);
        assert_eq!(lists.of(1), &[3]);
        assert_eq!(lists.of(4), &[] as &[u32]);
    }
}
