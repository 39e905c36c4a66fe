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
    /// Where paths start; empty: the nodes that send before they ever receive.
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

    /// `a->b->c`.
    pub fn signature(&self, trace: &Trace) -> String {
        let mut s = trace.node_name(self.edges[0].from).to_owned();
        for e in &self.edges {
            s.push_str("->");
            s.push_str(trace.node_name(e.to));
        }
        s
    }
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
    /// Edges with fewer than `min_count` messages, dropped as noise.
    pub edges_below_min_count: u64,
    /// Paths stopped because a hop occurred `max_repeats` times (a cycle).
    pub repeated_edges: u64,
    /// Paths stopped at the depth limit.
    pub depth_limited: u64,
    /// Paths cut when the correlation budget ran out (the result is then incomplete).
    pub budget_cut: u64,
}

/// The result.
#[derive(Debug, Clone)]
pub struct Convolution {
    /// The roots searched from.
    pub roots: Vec<NodeId>,
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
    let roots = search.roots()?;
    let mut stats = ConvolveStats {
        messages: trace.messages.len() as u64,
        ..ConvolveStats::default()
    };
    let mut paths = Vec::new();
    for &root in &roots {
        search.search_root(root, &mut paths, &mut stats);
    }
    let mut ranked: Vec<(u64, String, PathPattern)> = paths
        .into_iter()
        .map(|p| (p.count(), p.signature(trace), p))
        .collect();
    ranked.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    Ok(Convolution {
        roots,
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
    correlator: Correlator,
    max_lag: i64,
    variance: Nanos,
}

/// Messages caused at one node towards one destination.
struct Caused {
    to: NodeId,
    delays: Vec<Delay>,
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
        let origin = trace
            .messages
            .iter()
            .map(|m| m.first_time())
            .min()
            .unwrap_or(0);
        let max_lag = options.max_delay / options.quantum;
        Search {
            trace,
            options,
            origin,
            departures,
            correlator: Correlator::new(max_lag as usize),
            max_lag,
            variance: options.variance.unwrap_or(options.quantum),
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
        let roots: Vec<NodeId> = (0..self.trace.nodes.len())
            .filter(|&n| first_send[n] < first_receive[n])
            .map(|n| NodeId(n as u32))
            .collect();
        if roots.is_empty() {
            return Err(ConvolveError::NoRoots);
        }
        Ok(roots)
    }

    /// FindPathsFromRoot: a path search from each destination of the root's messages.
    fn search_root(&self, root: NodeId, paths: &mut Vec<PathPattern>, stats: &mut ConvolveStats) {
        let mut by_destination: HashMap<NodeId, Vec<u32>> = HashMap::new();
        for &(_, i) in &self.departures[root.0 as usize] {
            by_destination
                .entry(self.trace.messages[i as usize].receiver())
                .or_default()
                .push(i);
        }
        let mut destinations: Vec<(NodeId, Vec<u32>)> = by_destination.into_iter().collect();
        destinations.sort_by_key(|(to, _)| *to);
        for (to, messages) in destinations {
            if (messages.len() as u64) < self.options.min_count {
                stats.edges_below_min_count += 1;
                continue;
            }
            let mut path = vec![Edge {
                from: root,
                to,
                count: messages.len() as u64,
                delays: Vec::new(),
            }];
            self.process(to, &messages, &mut path, paths, stats);
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
                self.process(c.to, &c.messages, path, paths, stats);
            }
            path.pop();
        }
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
        let mut by_destination: HashMap<NodeId, Vec<(Nanos, u32)>> = HashMap::new();
        for &(t, i) in departures {
            by_destination
                .entry(self.trace.messages[i as usize].receiver())
                .or_default()
                .push((t, i));
        }
        let mut destinations: Vec<(NodeId, Vec<(Nanos, u32)>)> =
            by_destination.into_iter().collect();
        destinations.sort_by_key(|(to, _)| *to);
        let mut caused = Vec::new();
        for (to, leaving) in destinations {
            if (leaving.len() as u64) < self.options.min_count {
                continue;
            }
            let times: Vec<Nanos> = leaving.iter().map(|&(t, _)| t).collect();
            let c = self
                .correlator
                .correlate(&arrival_signal, &Signal::from_times(&times, self.origin, q));
            stats.correlations += 1;
            let mut taken = vec![false; leaving.len()];
            let mut delays = Vec::new();
            let mut messages = Vec::new();
            // Negative delays are suppressed (5.2.3), and judged apart: the calls that
            // caused these very arrivals make a large spike at a negative lag, which
            // would raise the deviation enough to hide a genuine later spike.
            let (before, after) = c.split_at(self.max_lag as usize);
            stats.negative_delay_spikes +=
                spikes::find_spikes(before, self.options.spike_sigma, self.options.gap_sigma).len()
                    as u64;
            for lag in spikes::find_spikes(after, self.options.spike_sigma, self.options.gap_sigma)
            {
                let lag = lag as i64;
                let (mut sum, mut count) = (0i128, 0u64);
                for (k, &(t, i)) in leaving.iter().enumerate() {
                    if taken[k] {
                        continue;
                    }
                    // The arrival nearest to t − delay, within ± variance, and never after
                    // the departure: an effect does not precede its cause.
                    let target = t - lag * q;
                    let from = arrival_times.partition_point(|&a| a < target - self.variance);
                    let nearest = arrival_times[from..]
                        .iter()
                        .take_while(|&&a| a <= (target + self.variance).min(t))
                        .min_by_key(|&&a| (a - target).abs());
                    if let Some(&a) = nearest {
                        taken[k] = true;
                        sum += i128::from(t - a);
                        count += 1;
                        messages.push(i);
                    }
                }
                if count > 0 {
                    delays.push(Delay {
                        delay: (sum / i128::from(count)) as Nanos,
                        count,
                    });
                }
            }
            if messages.is_empty() {
                continue;
            }
            if (messages.len() as u64) < self.options.min_count {
                stats.edges_below_min_count += 1;
                continue;
            }
            delays.sort_by(|a, b| b.count.cmp(&a.count).then(a.delay.cmp(&b.delay)));
            caused.push(Caused {
                to,
                delays,
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
}
