//! The convolution algorithm (paper §5.2, Figure 6) for free-form message systems:
//! from each root, follow the messages a node sends after it receives, at the delays
//! where the cross-correlation of arrivals and departures spikes, depth first. Owns the
//! options, the path search and its stopping rules; the signal arithmetic is in
//! [`correlation`], the spike rule in [`spikes`], printing in [`crate::report`].
//!
//! Calls and returns are treated as plain messages. Every time is read on the clock of
//! the node in question: arrivals at j at j's receive time, departures from j at j's send
//! time ("local clocks first").

pub mod correlation;
pub mod spikes;

use crate::trace::{Nanos, NodeId, Trace};
use correlation::{Correlator, Signal};
use hashbrown::HashMap;

/// Settings of the convolution algorithm.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvolveOptions {
    /// Time quantum μ of the signals.
    pub quantum: Nanos,
    /// Longest causal delay searched for.
    pub max_delay: Nanos,
    /// A spike stands this many standard deviations above the mean (N).
    pub spike_sigma: f64,
    /// Spikes are separated by a point under this many deviations (S).
    pub gap_sigma: f64,
    /// A departure is caused at delay d if it is d ± this after an arrival (v);
    /// `None`: one quantum.
    pub variance: Option<Nanos>,
    /// Edges with fewer messages are dropped as noise.
    pub min_count: u64,
    /// Longest path, in edges.
    pub max_depth: usize,
    /// Most times one hop (sender, receiver) may occur on a path: RPC paths revisit
    /// nodes, but a hop repeated more often is a cycle of coincidences.
    pub max_repeats: usize,
    /// The search stops after this many correlations, so it always ends; paths cut
    /// there are counted.
    pub max_correlations: u64,
    /// Where paths start; empty: the nodes that send before they receive, then every
    /// node whose sends to one destination no arrival explains, where at least
    /// [`ROOT_SHARE`] of them and `min_count` are unexplained.
    pub roots: Vec<String>,
}

impl Default for ConvolveOptions {
    fn default() -> Self {
        ConvolveOptions {
            quantum: 10_000_000,
            max_delay: 1_000_000_000,
            spike_sigma: 4.0,
            gap_sigma: 3.0,
            variance: None,
            min_count: 10,
            max_depth: 24,
            max_repeats: 3,
            max_correlations: 20_000,
            roots: Vec::new(),
        }
    }
}

/// Share of a node's sends to one destination that no arrival may explain for the
/// node to start paths there (with at least `min_count` of them): a relay that also
/// originates mail, or a service whose requests come from outside the trace. Below it
/// the unexplained sends are taken for the misses of matching (a departure whose
/// cause fell outside ± variance), which a node that only relays has too.
pub const ROOT_SHARE: f64 = 0.5;

/// Share of chance's median wait since the latest arrival below which a node's sends
/// are taken as caused by its arrivals ([`Search::follow_arrivals`]): chance gives
/// about 1, a relay's sends far less.
const FOLLOWING_SHARE: f64 = 0.5;

/// Lags at which matches are counted to learn how many chance gives
/// ([`Search::chance_matches`]).
const CHANCE_LAGS: usize = 33;

/// Share of departures that matches at delays taken as chance may reach before
/// matching says nothing of causes ([`Search::chance_matches`]).
const SATURATED: f64 = 0.5;

/// Arrivals per window of ± variance below which matches can be counted against chance.
const SPARSE: f64 = 0.1;

/// The coarsest resolution the roots' test and a hop's median delay widen to, in
/// quanta. Where a hop's delays
/// spread over many quanta (mail relays queue for seconds to hours), no one quantum
/// holds enough of them to spike, and the sends matching left unexplained looked like a
/// node's own (easy-ham-1 at 5 s: 417 of xent.com's 647 deliveries to dogma, 153 of
/// usw-sf-list2's, each reported as a path of its own). So before they start paths, the
/// departures no spike took are correlated again at 2, 4, ... quanta while arrivals
/// stay sparse at that width ([`Search::spike_matches`]). Which messages a path carries
/// is decided at the quantum, since matches at coarse scales joined unrelated hops into
/// paths (easy-ham-1's self-hops repeated again; multi-tier at 2 ms, 10 more false
/// positives), except where the quantum's spikes carry fewer than `--min-count`: there
/// the path would end, and the coarse matches carry it on (easy-ham-1 at 5 s with a day's
/// maximum delay: four paths of 50 to 60 emails that ended at a relay holding mail for
/// minutes, found whole; multi-tier at 2 ms: 2 more true paths, 2 more false).
const COARSEST: i64 = 64;

/// Why the algorithm could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvolveError {
    /// No messages.
    #[error("the trace has no messages ({lines} lines read, all blank or comments)")]
    NoMessages {
        /// Lines read.
        lines: u64,
    },
    /// A root that is not in the trace.
    #[error("--root {0}: no such node in the trace")]
    UnknownRoot(String),
    /// No node sends before receiving, and no root was given.
    #[error("no node sends before it receives; name the roots with --root")]
    NoRoots,
    /// Settings that cannot work.
    #[error("invalid option: {0}")]
    BadOption(String),
}

/// One delay of an edge and how many of its messages were caused at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delay {
    /// Mean of the matched delays, ns.
    pub delay: Nanos,
    /// Messages caused at this delay.
    pub count: u64,
}

/// One hop of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// Sender.
    pub from: NodeId,
    /// Receiver.
    pub to: NodeId,
    /// Messages on this hop of this path.
    pub count: u64,
    /// Delays at the sender before this hop, most frequent first; empty on a root's hop.
    pub delays: Vec<Delay>,
    /// The median delay at the sender before this hop; `None` on a root's hop. Where
    /// a hop's delays spread (a relay's queue), most of them fall at no spike, and the
    /// most frequent delay is the mode of a skewed spread, not its middle (easy-ham-1
    /// at 30 s, egwn.net: main spike 391 s, the emails' median 506 s). So the median
    /// is taken over the departures matched at the quantum and, where arrivals are
    /// sparse, at each coarser scale up to [`COARSEST`] quanta, as the roots' test
    /// matches them: those matched only at coarser scales count here and nowhere else
    /// (not in `count` or on the path), since matches there joined unrelated hops.
    pub median: Option<Nanos>,
}

/// A path from a root: its hops in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathPattern {
    /// Hops, root first.
    pub edges: Vec<Edge>,
}

impl PathPattern {
    /// Messages on the last hop: how many times the whole path was followed.
    pub fn count(&self) -> u64 {
        self.edges.last().map_or(0, |e| e.count)
    }

    /// The nodes passed, the first sender first.
    pub fn nodes(&self) -> Vec<NodeId> {
        let mut nodes = Vec::with_capacity(self.edges.len() + 1);
        nodes.extend(self.edges.first().map(|e| e.from));
        nodes.extend(self.edges.iter().map(|e| e.to));
        nodes
    }

    /// `a->b->c`.
    pub fn signature(&self, trace: &Trace) -> String {
        signature(trace, &self.nodes())
    }
}

/// The signature of a sequence of nodes, `a->b->c`, as paths are named.
pub fn signature(trace: &Trace, nodes: &[NodeId]) -> String {
    nodes
        .iter()
        .map(|&n| trace.node_name(n))
        .collect::<Vec<_>>()
        .join("->")
}

/// What the search set aside, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ConvolveStats {
    /// Messages in the trace.
    pub messages: u64,
    /// Correlations computed.
    pub correlations: u64,
    /// Spikes at negative delays, suppressed (5.2.3).
    pub negative_delay_spikes: u64,
    /// Spikes whose matched departures were no more than chance gives at other delays.
    pub coincidental_spikes: u64,
    /// Edges with fewer than `min_count` messages, dropped as noise.
    pub edges_below_min_count: u64,
    /// Paths stopped because a hop occurred `max_repeats` times (a cycle).
    pub repeated_edges: u64,
    /// Paths stopped at the depth limit.
    pub depth_limited: u64,
    /// Paths cut when the correlation budget ran out (the result is then incomplete).
    pub budget_cut: u64,
    /// Messages that started paths from a node that also receives: sends no arrival
    /// explained.
    pub unexplained_sends: u64,
}

/// The result.
#[derive(Debug, Clone)]
pub struct Convolution {
    /// The roots searched from: the nodes that send before they receive (or those
    /// named), then those whose unexplained sends started paths.
    pub roots: Vec<NodeId>,
    /// Of `roots`, those that start paths only with their unexplained sends.
    pub roots_by_unexplained_sends: Vec<NodeId>,
    /// Paths, most followed first (ties by signature).
    pub paths: Vec<PathPattern>,
    /// Counts of what was set aside.
    pub stats: ConvolveStats,
}

/// Runs the convolution algorithm on a trace.
pub fn convolve(trace: &Trace, options: &ConvolveOptions) -> Result<Convolution, ConvolveError> {
    validate(options)?;
    if trace.messages.is_empty() {
        return Err(ConvolveError::NoMessages {
            lines: trace.stats.lines,
        });
    }
    let search = Search::new(trace, options);
    let mut roots = search.roots()?;
    let mut stats = ConvolveStats {
        messages: trace.messages.len() as u64,
        ..ConvolveStats::default()
    };
    let mut paths = Vec::new();
    let mut explained = vec![false; trace.messages.len()];
    for &root in &roots {
        let sends = search.departures[root.0 as usize].iter().map(|&(_, i)| i);
        search.search_from(root, sends, &mut paths, &mut stats, &mut explained);
    }
    // Then every other node's sends that no path explained, node by node in a fixed
    // order (each one's paths explain more): only named roots when roots are named.
    let mut by_unexplained = Vec::new();
    if options.roots.is_empty() {
        for node in (0..trace.nodes.len() as u32).map(NodeId) {
            if roots.contains(&node) {
                continue;
            }
            let unexplained = search.unexplained_sends(node, &explained, &mut stats);
            if unexplained.is_empty() {
                continue;
            }
            stats.unexplained_sends += unexplained.len() as u64;
            search.search_from(
                node,
                unexplained.into_iter(),
                &mut paths,
                &mut stats,
                &mut explained,
            );
            by_unexplained.push(node);
        }
        roots.extend(&by_unexplained);
    }
    if roots.is_empty() {
        return Err(ConvolveError::NoRoots);
    }
    let mut ranked: Vec<(u64, String, PathPattern)> = paths
        .into_iter()
        .map(|p| (p.count(), p.signature(trace), p))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(Convolution {
        roots,
        roots_by_unexplained_sends: by_unexplained,
        paths: ranked.into_iter().map(|(_, _, p)| p).collect(),
        stats,
    })
}

fn validate(o: &ConvolveOptions) -> Result<(), ConvolveError> {
    let bad = |s: &str| Err(ConvolveError::BadOption(s.to_owned()));
    if o.quantum <= 0 {
        return bad("the quantum must be positive");
    }
    if o.max_delay < o.quantum {
        return bad("the maximum delay must be at least one quantum");
    }
    if o.max_delay / o.quantum > 50_000_000 {
        return bad("more than 50 million lags: raise the quantum or lower the maximum delay");
    }
    if !(o.spike_sigma > 0.0 && o.gap_sigma >= 0.0 && o.gap_sigma < o.spike_sigma) {
        return bad("spike thresholds need 0 ≤ S < N");
    }
    if o.variance.is_some_and(|v| v < 0) {
        return bad("the variance cannot be negative");
    }
    if o.max_depth == 0 || o.max_repeats == 0 {
        return bad("the depth limit and the repeat limit must be at least 1");
    }
    Ok(())
}

/// The trace indexed for the search.
struct Search<'a> {
    trace: &'a Trace,
    options: &'a ConvolveOptions,
    origin: Nanos,
    /// Per sender: (time at the sender, message index), in time order.
    departures: Vec<Vec<(Nanos, u32)>>,
    /// Per receiver: (time at the receiver, message index), in time order.
    arrivals: Vec<Vec<(Nanos, u32)>>,
    /// The resolutions searched: the quantum first, then each twice as coarse.
    scales: Vec<Scale>,
}

/// One resolution of the search: what a signal's bin, a match's ± window and the lags
/// correlated are at it.
struct Scale {
    quantum: Nanos,
    variance: Nanos,
    max_lag: i64,
    correlator: Correlator,
}

impl Scale {
    fn new(options: &ConvolveOptions, factor: i64) -> Scale {
        let quantum = options.quantum * factor;
        let max_lag = options.max_delay / quantum;
        Scale {
            quantum,
            variance: options.variance.unwrap_or(options.quantum) * factor,
            max_lag,
            correlator: Correlator::new(max_lag as usize),
        }
    }
}

/// What [`Search::spike_matches`] found.
#[derive(Default)]
struct SpikeMatches {
    /// Per spike kept at the quantum, highest first, its departures (index into
    /// `leaving`, delay).
    spikes: Vec<Vec<(usize, Nanos)>>,
    /// The same for the spikes kept at coarser scales, coarsest last.
    wider: Vec<Vec<(usize, Nanos)>>,
    /// Spikes at negative delays, at the quantum.
    negative: u64,
    /// Spikes that matched no more than chance, at the quantum.
    coincidental: u64,
}

/// Messages caused at one node towards one destination.
struct Caused {
    to: NodeId,
    delays: Vec<Delay>,
    median: Nanos,
    messages: Vec<u32>,
}

impl<'a> Search<'a> {
    fn new(trace: &'a Trace, options: &'a ConvolveOptions) -> Self {
        let mut departures = vec![Vec::new(); trace.nodes.len()];
        for (i, m) in trace.messages.iter().enumerate() {
            departures[m.sender().0 as usize].push((m.at_sender(), i as u32));
        }
        for d in &mut departures {
            d.sort_unstable();
        }
        let mut arrivals = vec![Vec::new(); trace.nodes.len()];
        for (i, m) in trace.messages.iter().enumerate() {
            arrivals[m.receiver().0 as usize].push((m.at_receiver(), i as u32));
        }
        for a in &mut arrivals {
            a.sort_unstable();
        }
        let origin = trace
            .messages
            .iter()
            .map(|m| m.first_time())
            .min()
            .unwrap_or(0);
        // Coarser scales keep at least as many lags as chance is counted at.
        let scales = std::iter::successors(Some(1i64), |f| Some(f * 2))
            .take_while(|&f| {
                f == 1
                    || (f <= COARSEST
                        && options.max_delay / (options.quantum * f) >= CHANCE_LAGS as i64)
            })
            .map(|f| Scale::new(options, f))
            .collect();
        Search {
            trace,
            options,
            origin,
            departures,
            arrivals,
            scales,
        }
    }

    /// The roots given, or the nodes whose first message is one they send.
    fn roots(&self) -> Result<Vec<NodeId>, ConvolveError> {
        if !self.options.roots.is_empty() {
            return self
                .options
                .roots
                .iter()
                .map(|r| {
                    self.trace
                        .nodes
                        .get(r)
                        .map(NodeId)
                        .ok_or_else(|| ConvolveError::UnknownRoot(r.clone()))
                })
                .collect();
        }
        let mut first_send = vec![Nanos::MAX; self.trace.nodes.len()];
        let mut first_receive = vec![Nanos::MAX; self.trace.nodes.len()];
        for m in &self.trace.messages {
            let s = &mut first_send[m.sender().0 as usize];
            *s = (*s).min(m.at_sender());
            let r = &mut first_receive[m.receiver().0 as usize];
            *r = (*r).min(m.at_receiver());
        }
        Ok((0..self.trace.nodes.len())
            .filter(|&n| first_send[n] < first_receive[n])
            .map(|n| NodeId(n as u32))
            .collect())
    }

    /// The sends of `node` that no path explained, for the destinations where they
    /// are at least `min_count` and [`ROOT_SHARE`] of its sends there, and where the
    /// node's arrivals do not explain them either: where spikes above chance, at the
    /// quantum or any coarser scale up to [`COARSEST`], match more than [`ROOT_SHARE`]
    /// of them, something that arrives causes them, only not the arrivals the paths
    /// followed (matching missed them), and they start no path.
    fn unexplained_sends(
        &self,
        node: NodeId,
        explained: &[bool],
        stats: &mut ConvolveStats,
    ) -> Vec<u32> {
        let departures = self.departures[node.0 as usize].iter().copied();
        let q = self.options.quantum;
        let mut sends = Vec::new();
        for (to, all) in self.by_receiver(departures, |&(_, i)| i) {
            let unexplained: Vec<u32> = all
                .iter()
                .map(|&(_, i)| i)
                .filter(|&i| !explained[i as usize])
                .collect();
            let n = unexplained.len() as u64;
            if n < self.options.min_count || (n as f64) < ROOT_SHARE * all.len() as f64 {
                continue;
            }
            // Sends to itself arrive at the node too, each at its own time: a message
            // does not explain itself.
            let own: hashbrown::HashSet<u32> = match to == node {
                true => unexplained.iter().copied().collect(),
                false => hashbrown::HashSet::new(),
            };
            let arrival_times: Vec<Nanos> = self.arrivals[node.0 as usize]
                .iter()
                .filter(|(_, i)| !own.contains(i))
                .map(|&(t, _)| t)
                .collect();
            // Were every arrival the cause of one of them, at least n − (arrivals) would
            // still be the node's own: where that is ROOT_SHARE of them, no timing
            // needs to be asked (easy-ham-1 at 360 s: auth02.nl.egwn.net sends 203 to
            // egwn.net and receives 88 in all, too close together to count matches).
            let uncaused = n.saturating_sub(arrival_times.len() as u64);
            if uncaused as f64 >= ROOT_SHARE * n as f64 {
                sends.extend(unexplained);
                continue;
            }
            // Where arrivals are dense, some arrival precedes every send at every
            // delay: sends the paths left unexplained are matching's misses, and
            // counting matches cannot tell otherwise.
            if !self.sparse(&self.scales[0], &arrival_times) {
                continue;
            }
            let arrivals = Signal::from_times(&arrival_times, self.origin, q);
            let leaving: Vec<(Nanos, u32)> = unexplained
                .iter()
                .map(|&i| (self.trace.messages[i as usize].at_sender(), i))
                .collect();
            // Caused where the spikes above chance match most of them; a spike that
            // matches a few (a batch that happened to follow some arrival) does not.
            let found = self.spike_matches((&arrivals, &arrival_times), &leaving, stats);
            let caused: usize = found.spikes.iter().chain(&found.wider).map(Vec::len).sum();
            let caused = caused as f64 >= (1.0 - ROOT_SHARE) * n as f64;
            if caused {
                continue;
            }
            // A node's sends to itself come in batches (a cron job's reports), so each
            // would seem to follow its batch's first: none of them counts as an arrival
            // here (easy-ham-1 at 360 s: dogma's 583 sends to itself, the 45 others
            // left in, waited 0.05 of chance).
            let others: Vec<Nanos> = match to == node {
                true => {
                    let all: hashbrown::HashSet<u32> = all.iter().map(|&(_, i)| i).collect();
                    self.arrivals[node.0 as usize]
                        .iter()
                        .filter(|(_, i)| !all.contains(i))
                        .map(|&(t, _)| t)
                        .collect()
                }
                false => arrival_times,
            };
            let send_times: Vec<Nanos> = leaving.iter().map(|&(t, _)| t).collect();
            if !self.follow_arrivals(&others, &send_times) {
                sends.extend(unexplained);
            }
        }
        sends
    }

    /// Whether `sends` (sorted) wait for `arrival_times` (sorted) as a relay's do,
    /// whatever their delays: the median time from a send back to the latest arrival
    /// before it is under [`FOLLOWING_SHARE`] of chance's, the same median with the
    /// sends moved by [`CHANCE_LAGS`] lags over ± `max_delay`. Spikes need a delay
    /// that recurs; a relay whose queue holds mail for minutes to hours has none, yet
    /// its sends still come soon after something arrives, and a node's own mail does
    /// not wait for arrivals at all (easy-ham-1: webnote.net's 70 deliveries to dogma,
    /// each one relayed, 0.39 of chance; dogma's 628 to itself, 1.12).
    fn follow_arrivals(&self, arrival_times: &[Nanos], sends: &[Nanos]) -> bool {
        if arrival_times.is_empty() || sends.is_empty() {
            return false;
        }
        let median_wait = |shift: Nanos| {
            let mut waits: Vec<Nanos> = sends
                .iter()
                .map(|&t| {
                    let t = t + shift;
                    match arrival_times.partition_point(|&a| a <= t) {
                        0 => Nanos::MAX,
                        k => t - arrival_times[k - 1],
                    }
                })
                .collect();
            let mid = waits.len() / 2;
            *waits.select_nth_unstable(mid).1
        };
        let half = CHANCE_LAGS as i64 / 2;
        let mut chance: Vec<Nanos> = (1..=half)
            .flat_map(|j| [j, -j])
            .map(|j| median_wait(j * self.options.max_delay / half))
            .collect();
        let mid = chance.len() / 2;
        let chance = *chance.select_nth_unstable(mid).1;
        (median_wait(0) as f64) < FOLLOWING_SHARE * chance as f64
    }

    /// FindPathsFromRoot: a path search from each destination of `sends`, messages the
    /// root sent; every message a path follows is marked `explained`.
    fn search_from(
        &self,
        root: NodeId,
        sends: impl Iterator<Item = u32>,
        paths: &mut Vec<PathPattern>,
        stats: &mut ConvolveStats,
        explained: &mut [bool],
    ) {
        for (to, messages) in self.by_receiver(sends, |&i| i) {
            if (messages.len() as u64) < self.options.min_count {
                stats.edges_below_min_count += 1;
                continue;
            }
            for &i in &messages {
                explained[i as usize] = true;
            }
            let mut path = vec![Edge {
                from: root,
                to,
                count: messages.len() as u64,
                delays: Vec::new(),
                median: None,
            }];
            self.process(to, &messages, &mut path, paths, stats, explained);
        }
    }

    /// ProcessNode: extends `path` (which ends at `node`, carried by `arrivals`).
    fn process(
        &self,
        node: NodeId,
        arrivals: &[u32],
        path: &mut Vec<Edge>,
        paths: &mut Vec<PathPattern>,
        stats: &mut ConvolveStats,
        explained: &mut [bool],
    ) {
        if stats.correlations >= self.options.max_correlations {
            stats.budget_cut += 1;
            paths.push(PathPattern {
                edges: path.clone(),
            });
            return;
        }
        let caused = self.find_caused(node, arrivals, stats);
        if caused.is_empty() {
            paths.push(PathPattern {
                edges: path.clone(),
            });
            return;
        }
        for c in caused {
            for &i in &c.messages {
                explained[i as usize] = true;
            }
            // A hop may recur (a service calling the database twice), but not without
            // end. The same hop at the same delay is exactly what a second call looks like,
            // so only the number of occurrences can tell a cycle.
            let occurrences = path
                .iter()
                .filter(|e| e.from == node && e.to == c.to)
                .count()
                + 1;
            path.push(Edge {
                from: node,
                to: c.to,
                count: c.messages.len() as u64,
                delays: c.delays,
                median: Some(c.median),
            });
            if occurrences >= self.options.max_repeats {
                stats.repeated_edges += 1;
                paths.push(PathPattern {
                    edges: path.clone(),
                });
            } else if path.len() >= self.options.max_depth {
                stats.depth_limited += 1;
                paths.push(PathPattern {
                    edges: path.clone(),
                });
            } else {
                self.process(c.to, &c.messages, path, paths, stats, explained);
            }
            path.pop();
        }
    }

    /// `items` grouped by the receiver of the message each names (`message`), receivers
    /// in id order, each group in the order given.
    fn by_receiver<T>(
        &self,
        items: impl Iterator<Item = T>,
        message: impl Fn(&T) -> u32,
    ) -> Vec<(NodeId, Vec<T>)> {
        let mut groups: HashMap<NodeId, Vec<T>> = HashMap::new();
        for item in items {
            let to = self.trace.messages[message(&item) as usize].receiver();
            groups.entry(to).or_default().push(item);
        }
        let mut groups: Vec<(NodeId, Vec<T>)> = groups.into_iter().collect();
        groups.sort_by_key(|(to, _)| *to);
        groups
    }

    /// The departures in `leaving` (time, message) that the arrivals caused, spike by
    /// spike, highest first: the correlation of the arrivals (their signal and times)
    /// with the departures, its spikes at positive delays, and at each the departures
    /// no higher spike took matched to arrivals, where more than chance gives
    /// ([`Self::chance_matches`]). Where arrivals are sparse, the departures still
    /// untaken are then correlated again at each coarser scale in turn, under the same
    /// test: a delay spread over many quanta spikes only when the quanta are merged.
    fn spike_matches(
        &self,
        (arrivals, arrival_times): (&Signal, &[Nanos]),
        leaving: &[(Nanos, u32)],
        stats: &mut ConvolveStats,
    ) -> SpikeMatches {
        let mut found = SpikeMatches::default();
        let mut taken = vec![false; leaving.len()];
        let mut tally = (&mut taken[..], &mut found);
        self.spikes_at(
            &self.scales[0],
            (arrivals, arrival_times),
            leaving,
            &mut tally,
            stats,
        );
        for scale in &self.scales[1..] {
            // Sparse first: where arrivals are dense (RPC links) no coarser scale runs,
            // and the count of what is left would be work for nothing on every hop.
            if !self.sparse(scale, arrival_times)
                || (tally.0.iter().filter(|&&t| !t).count() as u64) < self.options.min_count
            {
                break;
            }
            let signal = Signal::from_times(arrival_times, self.origin, scale.quantum);
            self.spikes_at(scale, (&signal, arrival_times), leaving, &mut tally, stats);
        }
        found
    }

    /// One scale of [`Self::spike_matches`]: the spikes of the correlation of the
    /// arrivals with the departures not yet taken, and their matches, added to `tally`
    /// (which departures are taken, and what was found).
    fn spikes_at(
        &self,
        scale: &Scale,
        (arrivals, arrival_times): (&Signal, &[Nanos]),
        leaving: &[(Nanos, u32)],
        (taken, found): &mut (&mut [bool], &mut SpikeMatches),
        stats: &mut ConvolveStats,
    ) {
        let times: Vec<Nanos> = leaving
            .iter()
            .zip(taken.iter())
            .filter(|(_, &t)| !t)
            .map(|(&(t, _), _)| t)
            .collect();
        let c = scale.correlator.correlate(
            arrivals,
            &Signal::from_times(&times, self.origin, scale.quantum),
        );
        stats.correlations += 1;
        // Negative delays are suppressed (5.2.3), and judged apart: the calls that
        // caused these very arrivals make a large spike at a negative lag, which would
        // raise the deviation enough to hide a genuine later spike.
        let (before, after) = c.split_at(scale.max_lag as usize);
        let (n, s) = (self.options.spike_sigma, self.options.gap_sigma);
        let at_quantum = scale.quantum == self.options.quantum;
        if at_quantum {
            // Read from lag -1 outwards: the end a run must come down before is the
            // most negative lag, not lag 0.
            let outwards: Vec<f64> = before.iter().rev().copied().collect();
            found.negative += spikes::find_spikes(&outwards, n, s).len() as u64;
        }
        for lag in spikes::find_spikes(after, n, s) {
            // Chance among the departures no higher spike took.
            let chance = self.chance_matches(scale, arrival_times, leaving, taken);
            let matched = self.match_at(scale, arrival_times, leaving, lag as i64, taken);
            if (matched.len() as f64) < chance {
                found.coincidental += u64::from(at_quantum);
                continue;
            }
            for &(k, _) in &matched {
                taken[k] = true;
            }
            match (matched.is_empty(), at_quantum) {
                (true, _) => {}
                (false, true) => found.spikes.push(matched),
                (false, false) => found.wider.push(matched),
            }
        }
    }

    /// The departures in `leaving` (time, message) that arrivals caused at `lag`
    /// quanta of `scale`, as (index into `leaving`, delay): each one not `taken` yet,
    /// matched to the arrival nearest to its time minus the lag, within ± variance and
    /// never after it (an effect does not precede its cause). At one delay an arrival
    /// causes one departure to a destination, so each arrival is matched once: a burst
    /// of departures near one arrival is that arrival's effect once, or a coincidence.
    /// (A service that calls the same one twice per request does so at two delays.)
    fn match_at(
        &self,
        scale: &Scale,
        arrival_times: &[Nanos],
        leaving: &[(Nanos, u32)],
        lag: i64,
        taken: &[bool],
    ) -> Vec<(usize, Nanos)> {
        let unique = self.sparse(scale, arrival_times);
        let mut used = vec![false; arrival_times.len()];
        let mut matched = Vec::new();
        for (k, &(t, _)) in leaving.iter().enumerate() {
            if taken[k] {
                continue;
            }
            let target = t - lag * scale.quantum;
            let from = arrival_times.partition_point(|&a| a < target - scale.variance);
            let nearest = arrival_times[from..]
                .iter()
                .enumerate()
                .take_while(|&(_, &a)| a <= (target + scale.variance).min(t))
                .filter(|&(j, _)| !unique || !used[from + j])
                .min_by_key(|&(_, &a)| (a - target).abs());
            if let Some((j, &a)) = nearest {
                used[from + j] = true;
                matched.push((k, t - a));
            }
        }
        matched
    }

    /// How many departures a spike must match to stand above chance: the matches at
    /// [`CHANCE_LAGS`] lags spread over the whole range, taken as chance (a true delay
    /// or two among them moves their median little), their median plus `spike_sigma`
    /// deviations (from their spread, and at least a count's own √). The correlation's
    /// spike rule alone let bursty traffic through: a relay that delivers its own mail
    /// in batches correlates with any arrivals at some lag (easy-ham-1 at 30 s: three
    /// of eight paths of 100 emails or more were such, none after). Where arrivals are
    /// dense (not [`Self::sparse`]) or chance alone matches [`SATURATED`] of the
    /// departures, matches cannot tell a cause from a coincidence and the spike decides
    /// alone (0): busy RPC links lost true paths to the test (multi-tier at sd ×2, four
    /// of eight paths missed in each of six seeds, against one to three).
    fn chance_matches(
        &self,
        scale: &Scale,
        arrival_times: &[Nanos],
        leaving: &[(Nanos, u32)],
        taken: &[bool],
    ) -> f64 {
        if !self.sparse(scale, arrival_times) {
            return 0.0;
        }
        let mut counts: Vec<f64> = (0..CHANCE_LAGS)
            .map(|j| {
                let lag = (j as i64 * scale.max_lag) / (CHANCE_LAGS as i64 - 1);
                self.match_at(scale, arrival_times, leaving, lag, taken)
                    .len() as f64
            })
            .collect();
        counts.sort_by(f64::total_cmp);
        let median = counts[counts.len() / 2];
        let mut deviations: Vec<f64> = counts.iter().map(|c| (c - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let untaken = taken.iter().filter(|&&t| !t).count();
        if median >= SATURATED * untaken as f64 {
            return 0.0;
        }
        let spread = (1.4826 * deviations[deviations.len() / 2]).max(median.max(1.0).sqrt());
        median + self.options.spike_sigma * spread
    }

    /// Whether arrivals are sparse at `scale`: on average fewer than [`SPARSE`] fall
    /// within its ± variance of a moment.
    fn sparse(&self, scale: &Scale, arrival_times: &[Nanos]) -> bool {
        let (Some(first), Some(last)) = (arrival_times.first(), arrival_times.last()) else {
            return true;
        };
        let span = (last - first).max(1) as f64;
        let per_window = (arrival_times.len() as f64 / span) * (2 * scale.variance) as f64;
        per_window < SPARSE
    }

    /// FindCausedMessages: the messages leaving `node` caused by `arrivals`, grouped by
    /// destination. Each destination's departures are correlated with the arrivals on
    /// their own: a busy node's other traffic, correlated as one signal, would lend its
    /// spikes to every destination, and the ± variance window then catches unrelated
    /// messages by coincidence.
    fn find_caused(
        &self,
        node: NodeId,
        arrivals: &[u32],
        stats: &mut ConvolveStats,
    ) -> Vec<Caused> {
        let departures = &self.departures[node.0 as usize];
        if departures.is_empty() {
            return Vec::new();
        }
        let mut arrival_times: Vec<Nanos> = arrivals
            .iter()
            .map(|&i| self.trace.messages[i as usize].at_receiver())
            .collect();
        arrival_times.sort_unstable();
        let q = self.options.quantum;
        let arrival_signal = Signal::from_times(&arrival_times, self.origin, q);
        let destinations = self.by_receiver(departures.iter().copied(), |&(_, i)| i);
        let mut caused = Vec::new();
        // On a hop back to the node itself, the messages that arrived by it are among
        // its departures, each at its own arrival time: a message cannot cause itself,
        // and left in, every arrival would match itself at delay 0, so the hop would
        // repeat until the repeat limit on any path that reaches it once.
        let arrived: hashbrown::HashSet<u32> = match destinations.iter().any(|(to, _)| *to == node)
        {
            true => arrivals.iter().copied().collect(),
            false => hashbrown::HashSet::new(),
        };
        for (to, mut leaving) in destinations {
            if to == node {
                leaving.retain(|(_, i)| !arrived.contains(i));
            }
            if (leaving.len() as u64) < self.options.min_count {
                continue;
            }
            let found = self.spike_matches((&arrival_signal, &arrival_times), &leaving, stats);
            stats.negative_delay_spikes += found.negative;
            stats.coincidental_spikes += found.coincidental;
            let mut matched_delays: Vec<Nanos> = found
                .spikes
                .iter()
                .chain(&found.wider)
                .flatten()
                .map(|&(_, delay)| delay)
                .collect();
            let mut delays = Vec::new();
            let mut messages = Vec::new();
            // Where the quantum's spikes carry too few to make an edge, the delays are
            // spread over more quanta than one spike holds (a relay's queue): the matches
            // at the coarser scales, which passed the same test against chance, carry
            // the path on.
            let at_quantum: usize = found.spikes.iter().map(Vec::len).sum();
            let carried = if (at_quantum as u64) < self.options.min_count {
                found.spikes.into_iter().chain(found.wider).collect()
            } else {
                found.spikes
            };
            for matched in carried {
                let sum: i128 = matched.iter().map(|&(_, delay)| i128::from(delay)).sum();
                messages.extend(matched.iter().map(|&(k, _)| leaving[k].1));
                let count = matched.len() as u64;
                delays.push(Delay {
                    delay: (sum / i128::from(count)) as Nanos,
                    count,
                });
            }
            if messages.is_empty() {
                continue;
            }
            if (messages.len() as u64) < self.options.min_count {
                stats.edges_below_min_count += 1;
                continue;
            }
            delays.sort_by(|a, b| b.count.cmp(&a.count).then(a.delay.cmp(&b.delay)));
            let middle = matched_delays.len() / 2;
            caused.push(Caused {
                to,
                delays,
                median: *matched_delays.select_nth_unstable(middle).1,
                messages,
            });
        }
        caused.sort_by(|a, b| {
            b.messages
                .len()
                .cmp(&a.messages.len())
                .then(a.to.cmp(&b.to))
        });
        caused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::text::trace_from_str as trace;

    /// a sends to b; b forwards to c 30 ms later; c answers d 5 ms later. Irregular
    /// arrivals so that only the true delays correlate.
    fn chain() -> String {
        let mut s = String::new();
        for i in 0..300u64 {
            let t = i * 97_000_000 + (i * i * 7_919 % 40) * 1_000_000;
            s.push_str(&format!("{} MSG a b -\n", t as f64 / 1e9));
            s.push_str(&format!("{} MSG b c -\n", (t + 30_000_000) as f64 / 1e9));
            s.push_str(&format!("{} MSG c d -\n", (t + 35_000_000) as f64 / 1e9));
        }
        s
    }

    /// The default options with a 1 ms quantum.
    fn millisecond() -> ConvolveOptions {
        ConvolveOptions {
            quantum: 1_000_000,
            ..ConvolveOptions::default()
        }
    }

    #[test]
    fn a_chain_of_forwarded_messages_is_one_path_with_its_delays() {
        let t = trace(&chain());
        let result = convolve(&t, &millisecond()).unwrap();
        assert_eq!(result.roots, vec![t.nodes.get("a").map(NodeId).unwrap()]);
        assert_eq!(result.paths.len(), 1);
        let p = &result.paths[0];
        assert_eq!(p.signature(&t), "a->b->c->d");
        assert_eq!(p.count(), 300);
        assert_eq!(
            p.edges[1].delays,
            vec![Delay {
                delay: 30_000_000,
                count: 300
            }]
        );
        assert_eq!(
            p.edges[2].delays,
            vec![Delay {
                delay: 5_000_000,
                count: 300
            }]
        );
    }

    #[test]
    fn rare_edges_are_dropped_and_counted() {
        let mut text = chain();
        text.push_str("1.5 MSG b x -\n");
        let t = trace(&text);
        let result = convolve(&t, &millisecond()).unwrap();
        assert_eq!(result.paths.len(), 1);
        let options = ConvolveOptions {
            quantum: 1_000_000,
            roots: vec!["nobody".into()],
            ..ConvolveOptions::default()
        };
        assert_eq!(
            convolve(&t, &options).unwrap_err(),
            ConvolveError::UnknownRoot("nobody".into())
        );
    }

    #[test]
    fn a_ping_pong_cycle_stops_and_is_counted() {
        // Conversations of three round trips: a pings b, b answers 2 ms later, a pings
        // again 3 ms after that; conversations start at irregular times. (Longer regular
        // exchanges make the correlation periodic, and then no lag stands out.)
        let mut s = String::new();
        for c in 0..200u64 {
            let mut t = c * 200_000_000 + (c * c * 7_919 % 50) * 1_000_000;
            for _ in 0..3 {
                s.push_str(&format!("{} MSG a b -\n", t as f64 / 1e9));
                s.push_str(&format!("{} MSG b a -\n", (t + 2_000_000) as f64 / 1e9));
                t += 5_000_000;
            }
        }
        let tr = trace(&s);
        let options = ConvolveOptions {
            quantum: 1_000_000,
            roots: vec!["a".into()],
            max_delay: 50_000_000,
            ..ConvolveOptions::default()
        };
        let result = convolve(&tr, &options).unwrap();
        assert!(
            result.stats.repeated_edges + result.stats.depth_limited >= 1,
            "{:?}",
            result.stats
        );
        assert!(result
            .paths
            .iter()
            .all(|p| p.edges.len() <= options.max_depth));
    }

    /// The chain of [`chain`] where b hands each message to itself 5 ms after it
    /// arrives (filtering, then local delivery) before it forwards it.
    fn chain_through_itself() -> String {
        let mut s = String::new();
        for i in 0..300u64 {
            let t = i * 97_000_000 + (i * i * 7_919 % 40) * 1_000_000;
            s.push_str(&format!("{} MSG a b -\n", t as f64 / 1e9));
            s.push_str(&format!("{} MSG b b -\n", (t + 5_000_000) as f64 / 1e9));
            s.push_str(&format!("{} MSG b c -\n", (t + 30_000_000) as f64 / 1e9));
        }
        s
    }

    #[test]
    fn a_hop_to_itself_repeats_only_where_the_data_repeats_it() {
        let t = trace(&chain_through_itself());
        let result = convolve(&t, &millisecond()).unwrap();
        let signatures: Vec<String> = result.paths.iter().map(|p| p.signature(&t)).collect();
        // Without a message counted as its own cause, b->b is followed once, not up to
        // the repeat limit at delay 0. (a's arrivals also correlate with b->c at 30 ms,
        // so a->b->c is found too, as for any two effects of one cause.)
        assert_eq!(signatures, ["a->b->b->c", "a->b->c"], "{signatures:?}");
        assert_eq!(result.stats.repeated_edges, 0);
        assert_eq!(
            result.paths[0].edges[2].delays[0],
            Delay {
                delay: 25_000_000,
                count: 300
            }
        );
    }

    #[test]
    fn a_relay_that_sends_its_own_bursts_starts_paths_of_them() {
        // b relays a's messages to c, and sends batches of its own to d: 10 bursts of
        // 20 messages, 1 ms apart, at times no arrival explains.
        let mut text = chain();
        for burst in 0..10u64 {
            let start =
                1_500_000_000 + burst * 2_870_000_000 + (burst * burst * 7_919 % 50) * 1_000_000;
            for k in 0..20u64 {
                text.push_str(&format!(
                    "{} MSG b d -\n",
                    (start + k * 1_000_000) as f64 / 1e9
                ));
            }
        }
        let t = trace(&text);
        let result = convolve(&t, &millisecond()).unwrap();
        let mut found: Vec<(String, u64)> = result
            .paths
            .iter()
            .map(|p| (p.signature(&t), p.count()))
            .collect();
        found.sort();
        assert_eq!(
            found,
            [("a->b->c->d".to_owned(), 300), ("b->d".to_owned(), 200)],
            "{:?}",
            result.stats
        );
        let b = NodeId(t.nodes.get("b").unwrap());
        assert_eq!(result.roots_by_unexplained_sends, [b]);
        assert_eq!(result.stats.unexplained_sends, 200);
    }

    /// 300 of a's messages, `period` apart with up to 4 s more, each forwarded by b to
    /// c after `delay_ms(i)` ms.
    fn forwarded_after(period: u64, delay_ms: impl Fn(u64) -> u64) -> Trace {
        let mut text = String::new();
        for i in 0..300u64 {
            let t = i * period + (i * i * 7_919 % 4_000) * 1_000_000;
            let delay = delay_ms(i) * 1_000_000;
            text.push_str(&format!("{} MSG a b -\n", t as f64 / 1e9));
            text.push_str(&format!("{} MSG b c -\n", (t + delay) as f64 / 1e9));
        }
        trace(&text)
    }

    /// Millisecond quanta, delays up to 10 s.
    fn over_ten_seconds() -> ConvolveOptions {
        ConvolveOptions {
            max_delay: 10_000_000_000,
            ..millisecond()
        }
    }

    #[test]
    fn a_path_goes_on_where_delays_spread_too_wide_for_the_quantum_to_carry_it() {
        // As below, but an edge needs 30 messages: the 22 that 1 ms spikes match are
        // too few, and the path ended at b. The coarser scales' matches carry it on.
        let t = forwarded_after(19_997_000_000, |i| (i * 37 + i * i * 13) % 1_501);
        let options = ConvolveOptions {
            min_count: 30,
            ..over_ten_seconds()
        };
        let result = convolve(&t, &options).unwrap();
        let found: Vec<String> = result.paths.iter().map(|p| p.signature(&t)).collect();
        assert_eq!(found, ["a->b->c"], "{:?}", result.stats);
        let hop = &result.paths[0].edges[1];
        assert!(hop.count >= 270, "{hop:?}");
        assert!(result.roots_by_unexplained_sends.is_empty());
    }

    #[test]
    fn sends_after_arrivals_at_delays_spread_over_many_quanta_start_no_path_and_give_their_median()
    {
        // b forwards each of a's messages to c after 0 to 1.5 s, spread evenly: at 1 ms
        // no quantum holds enough of them to stand out, so matching leaves most of them
        // unexplained (the path a->b->c carries a few), and before the roots' test
        // looked at coarser scales, b->c started a path of its own of the other 278,
        // though every one of them follows an arrival.
        let t = forwarded_after(19_997_000_000, |i| (i * 37 + i * i * 13) % 1_501);
        let result = convolve(&t, &over_ten_seconds()).unwrap();
        let found: Vec<String> = result.paths.iter().map(|p| p.signature(&t)).collect();
        assert_eq!(found, ["a->b->c"], "{:?}", result.stats);
        assert!(result.roots_by_unexplained_sends.is_empty());
        // The path carries the 22 departures matched at 1 ms; the median is taken over
        // those the coarser scales matched too, and lands within 5% of the middle of
        // the 300 delays (795 ms: 812). The 22 alone give 722, and the main spike, one
        // of many small ones, 703.
        let hop = &result.paths[0].edges[1];
        let median = hop.median.unwrap();
        assert!((median - 795_000_000).abs() < 39_750_000, "{hop:?}");
        assert!(
            (hop.delays[0].delay - 795_000_000).abs() > 79_500_000,
            "{hop:?}"
        );
    }

    #[test]
    fn a_hops_median_delay_is_the_middle_of_its_delays_not_the_most_frequent() {
        // b forwards 120 of a's messages after 30 ms, 100 after 50 ms and 80 after
        // 70 ms: the main spike is at 30 ms, the middle of the 300 delays at 50.
        let mut text = String::new();
        for i in 0..300u64 {
            let t = i * 97_000_000 + (i * i * 7_919 % 40) * 1_000_000;
            let delay = match i % 15 {
                0..=5 => 30_000_000,
                6..=10 => 50_000_000,
                _ => 70_000_000,
            };
            text.push_str(&format!("{} MSG a b -\n", t as f64 / 1e9));
            text.push_str(&format!("{} MSG b c -\n", (t + delay) as f64 / 1e9));
        }
        let t = trace(&text);
        let result = convolve(&t, &millisecond()).unwrap();
        let p = &result.paths[0];
        assert_eq!((p.signature(&t).as_str(), p.count()), ("a->b->c", 300));
        let delays: Vec<(Nanos, u64)> = p.edges[1]
            .delays
            .iter()
            .map(|d| (d.delay, d.count))
            .collect();
        assert_eq!(
            delays,
            [(30_000_000, 120), (50_000_000, 100), (70_000_000, 80)]
        );
        assert_eq!(p.edges[1].median, Some(50_000_000));
        assert_eq!(p.edges[0].median, None);
    }

    #[test]
    fn a_relay_whose_delays_recur_at_no_scale_starts_no_path() {
        // b forwards each of a's messages to c after 0 to 4 s, spread evenly, and a's
        // messages come 20 s or more apart: no delay recurs at 1 ms or at the coarser
        // scales the roots' test widens to (64 ms at most), so only the waits tell
        // that b's sends follow its arrivals (their median 1.9 s, chance's 11 s).
        // Before they were asked, b->c started a path of its own.
        let t = forwarded_after(20_000_000_000, |i| (i * 4_001 + i * i * 13) % 4_001);
        let result = convolve(&t, &over_ten_seconds()).unwrap();
        assert!(
            result.roots_by_unexplained_sends.is_empty(),
            "{:?}",
            result.stats
        );
        let found: Vec<String> = result.paths.iter().map(|p| p.signature(&t)).collect();
        assert!(!found.iter().any(|p| p == "b->c"), "{found:?}");
    }

    #[test]
    fn a_node_that_sends_far_more_than_it_receives_starts_paths_of_the_rest() {
        // b receives 20 messages within 0.2 s (too close together at 1 ms to count
        // matches against chance) and sends 100 to c over 100 s: 80 at least are its own.
        let mut text = String::new();
        for i in 0..20u64 {
            text.push_str(&format!("1.{:02} MSG a b -\n", i));
        }
        for i in 0..100u64 {
            let t = 2_000_000_000 + i * 1_000_000_000 + (i * i * 7_919 % 300) * 1_000_000;
            text.push_str(&format!("{} MSG b c -\n", t as f64 / 1e9));
        }
        let t = trace(&text);
        let result = convolve(&t, &millisecond()).unwrap();
        let found: Vec<(String, u64)> = result
            .paths
            .iter()
            .map(|p| (p.signature(&t), p.count()))
            .collect();
        assert!(found.contains(&("b->c".to_owned(), 100)), "{found:?}");
        let b = NodeId(t.nodes.get("b").unwrap());
        assert_eq!(result.roots_by_unexplained_sends, [b]);
    }
}
