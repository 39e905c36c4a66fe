//! Scores of the convolution algorithm against the truth column: each path instance's
//! messages, in time order, spell its true path (`a->b->c`); a found path that no
//! instance followed is a false positive, a true path followed at least `min_count`
//! times but not found is a false negative.
//!
//! [`score_paths`] scores against true chains instead, for `eval --convolve`: each
//! instance's hops in their own order (for mail, the order of its Received headers,
//! which the relays' clocks may contradict), cut where a hop does not leave the node
//! the hop before reached, since no search that follows nodes could cross there. A
//! true path not found exactly is told apart by where it is: as the start of a longer
//! reported path, inside one, or nowhere; each hop of an exact one has its delay
//! compared with the true chains' median, and one found as the start of a longer
//! path says how many of its runs went on, after their cut, where the longer one goes.

use super::paths::Counts;
use crate::convolution::{signature, Convolution};
use crate::trace::mbox::MailChain;
use crate::trace::{Nanos, NodeId, Trace};
use hashbrown::{HashMap, HashSet};
use serde::Serialize;

/// How many instances followed each true path.
pub fn true_paths(trace: &Trace) -> HashMap<String, u64> {
    let mut counts = HashMap::new();
    for messages in instances(trace) {
        // Messages are in time order already; a path is its first sender, then receivers.
        let first = trace.messages[messages[0]].sender();
        let nodes: Vec<NodeId> = std::iter::once(first)
            .chain(messages.iter().map(|&i| trace.messages[i].receiver()))
            .collect();
        *counts.entry(signature(trace, &nodes)).or_insert(0) += 1;
    }
    counts
}

/// Distinct paths: true ones followed at least `min_count` times against those found.
pub fn score(trace: &Trace, found: &Convolution, min_count: u64) -> Counts {
    let truth: HashSet<String> = true_paths(trace)
        .into_iter()
        .filter(|&(_, n)| n >= min_count)
        .map(|(s, _)| s)
        .collect();
    let inferred: HashSet<String> = found.paths.iter().map(|p| p.signature(trace)).collect();
    Counts {
        truth: truth.len() as u64,
        inferred: inferred.len() as u64,
        false_positives: inferred.difference(&truth).count() as u64,
        false_negatives: truth.difference(&inferred).count() as u64,
    }
}

/// One run of an instance's hops, each leaving the node the one before reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrueChain {
    /// The nodes passed, the first sender first.
    pub nodes: Vec<NodeId>,
    /// Per node after the first, when the hop reached it (the receiver's clock) and,
    /// for the hop that left it, when that hop left (the sender's clock; the receiver's
    /// where only that end was seen, as for mail): the delay the convolution measures
    /// at a node is the second minus the first.
    pub times: Vec<(Nanos, Nanos)>,
    /// Where the instance went from the run's last node after all, by a later hop
    /// that leaves it after a cut (mail handed over loopback to a host's other name,
    /// then sent on): the node that hop reached. A longer reported path that goes on
    /// there follows the instance, where the cut run cannot.
    pub later_to: Option<NodeId>,
}

/// The true chains of a trace and how they were cut.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrueChains {
    /// Runs of linked hops.
    pub chains: Vec<TrueChain>,
    /// Instances (path ids, emails) with at least one hop.
    pub instances: u64,
    /// Instances cut into two runs or more: a hop left a node other than the one the
    /// hop before reached (a relay that names itself otherwise than the next one names
    /// it, a header left out).
    pub cut: u64,
}

/// Each tagged instance's messages (indexes, in time order), instances in order of
/// their first message.
fn instances(trace: &Trace) -> Vec<Vec<usize>> {
    let mut at: HashMap<u32, usize> = HashMap::new();
    let mut instances: Vec<Vec<usize>> = Vec::new();
    for (i, m) in trace.messages.iter().enumerate() {
        if m.truth() == crate::trace::Truth::NONE {
            continue;
        }
        let k = *at.entry(m.truth().0).or_insert_with(|| {
            instances.push(Vec::new());
            instances.len() - 1
        });
        instances[k].push(i);
    }
    instances
}

/// Chains from the truth column: each instance's messages in time order.
pub fn chains_by_time(trace: &Trace) -> TrueChains {
    let mut chains = TrueChains::default();
    for instance in instances(trace) {
        let hops = instance.iter().map(|&i| {
            let m = &trace.messages[i];
            (m.sender(), m.receiver(), m.at_sender(), m.at_receiver())
        });
        add_runs(&mut chains, hops);
    }
    chains
}

/// Chains from mail: each email's hops in the order of its Received headers.
pub fn chains_of_mail(trace: &Trace, mail: &[MailChain]) -> TrueChains {
    let mut chains = TrueChains::default();
    let node = |name: &str| trace.nodes.get(name).map(NodeId);
    for email in mail {
        let hops: Vec<_> = email
            .hops
            .iter()
            .filter_map(|(from, by, time)| Some((node(from)?, node(by)?, *time, *time)))
            .collect();
        add_runs(&mut chains, hops.into_iter());
    }
    chains
}

/// Adds one instance's hops (sender, receiver, time at the sender, time at the
/// receiver), in order, as runs of linked hops.
fn add_runs(chains: &mut TrueChains, hops: impl Iterator<Item = (NodeId, NodeId, Nanos, Nanos)>) {
    let hops: Vec<(NodeId, NodeId, Nanos, Nanos)> = hops.collect();
    let first = chains.chains.len();
    // Per run, the index of the hop after its last.
    let mut ends = Vec::new();
    let mut runs = 0;
    let mut current: Option<TrueChain> = None;
    for (k, &(from, to, left, arrived)) in hops.iter().enumerate() {
        let linked = current.as_ref().and_then(|c| c.nodes.last()) == Some(&from);
        match (&mut current, linked) {
            (Some(chain), true) => {
                let at = chain.times.len() - 1;
                chain.times[at].1 = left;
                chain.nodes.push(to);
                chain.times.push((arrived, Nanos::MIN));
            }
            _ => {
                if current.is_some() {
                    ends.push(k);
                }
                chains.chains.extend(current.take());
                runs += 1;
                current = Some(TrueChain {
                    nodes: vec![from, to],
                    times: vec![(arrived, Nanos::MIN)],
                    later_to: None,
                });
            }
        }
    }
    chains.chains.extend(current);
    ends.push(hops.len());
    for (chain, end) in chains.chains[first..].iter_mut().zip(ends) {
        let last = chain.nodes.last().copied();
        chain.later_to = hops[end..]
            .iter()
            .find(|&&(from, ..)| Some(from) == last)
            .map(|&(_, to, ..)| to);
    }
    if runs > 0 {
        chains.instances += 1;
    }
    if runs > 1 {
        chains.cut += 1;
    }
}

/// Where a true path is among the reported ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Found {
    /// A reported path is exactly it.
    Exact,
    /// Only as the start of a longer reported path.
    Start,
    /// Only inside a reported path, not from its start.
    Inside,
    /// In no reported path.
    Nowhere,
}

/// One hop of a true path found exactly: the delay at the node it left.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HopDelay {
    /// The node the delay is spent at.
    pub node: String,
    /// The median of the true chains' delays there, ns.
    pub true_median: Nanos,
    /// The reported path's median delay there ([`crate::convolution::Edge::median`]), ns.
    pub median: Nanos,
    /// Whether the median is within max(quantum, 10% of the true median) of it.
    pub within: bool,
    /// The reported path's main spike there (its most frequent delay), ns.
    pub main_spike: Nanos,
    /// Whether the main spike is within the same of it.
    pub spike_within: bool,
}

/// A true path followed at least `min_count` times.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruePath {
    /// `a->b->c`.
    pub signature: String,
    /// Runs that followed it.
    pub count: u64,
    /// Where it was found.
    pub found: Found,
    /// For one found exactly, each hop's delay after the first.
    pub delays: Vec<HopDelay>,
    /// For one found only as the start of a longer path: where the most carried such
    /// path goes next, and how many of the runs went there later all the same
    /// ([`TrueChain::later_to`]).
    pub went_on: Option<WentOn>,
}

/// Where a longer reported path takes a true path's runs next, and how many of them
/// went there after their cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WentOn {
    /// The node the longer path goes to next.
    pub node: String,
    /// Runs that went there later.
    pub runs: u64,
}

/// A reported path of at least `min_count` messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReportedPath {
    /// `a->b->c`.
    pub signature: String,
    /// Messages on its last hop, as reported.
    pub count: u64,
    /// Runs of the true chains that followed it exactly; 0 for a false positive.
    pub taken_by: u64,
}

/// The convolution's paths against the true chains, at one threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathScores {
    /// The threshold: true paths followed, and reported paths carried, this often.
    pub min_count: u64,
    /// True paths at or above the threshold, most followed first.
    pub true_paths: Vec<TruePath>,
    /// Reported paths at or above the threshold, most carried first.
    pub reported: Vec<ReportedPath>,
    /// True paths not found exactly.
    pub false_negatives: u64,
    /// Reported paths no run followed.
    pub false_positives: u64,
    /// Hops of exactly found paths whose median delay is within tolerance.
    pub delays_within: u64,
    /// Hops of exactly found paths whose main spike is within tolerance.
    pub spikes_within: u64,
    /// Hops of exactly found paths.
    pub delays: u64,
}

/// Scores `found` against `chains` at `min_count`; delays are judged within
/// max(`quantum`, 10% of the true median).
pub fn score_paths(
    trace: &Trace,
    chains: &TrueChains,
    found: &Convolution,
    min_count: u64,
    quantum: Nanos,
) -> PathScores {
    let mut by_path: HashMap<&[NodeId], Vec<&TrueChain>> = HashMap::new();
    for chain in &chains.chains {
        by_path.entry(&chain.nodes).or_default().push(chain);
    }
    let reported: Vec<(Vec<NodeId>, &crate::convolution::PathPattern)> =
        found.paths.iter().map(|p| (p.nodes(), p)).collect();
    let mut true_paths: Vec<TruePath> = by_path
        .iter()
        .filter(|(_, runs)| runs.len() as u64 >= min_count)
        .map(|(&nodes, runs)| {
            let exact = reported.iter().find(|(r, _)| r.as_slice() == nodes);
            // Reported paths are most carried first.
            let longer = reported
                .iter()
                .find(|(r, _)| r.len() > nodes.len() && r.starts_with(nodes));
            let found = if exact.is_some() {
                Found::Exact
            } else if longer.is_some() {
                Found::Start
            } else if reported
                .iter()
                .any(|(r, _)| r.windows(nodes.len()).any(|w| w == nodes))
            {
                Found::Inside
            } else {
                Found::Nowhere
            };
            let delays = exact.map_or_else(Vec::new, |(_, path)| {
                (1..nodes.len() - 1)
                    .map(|i| {
                        let mut delays: Vec<Nanos> = runs
                            .iter()
                            .map(|run| run.times[i - 1].1 - run.times[i - 1].0)
                            .collect();
                        delays.sort_unstable();
                        let true_median = delays[delays.len() / 2];
                        let edge = &path.edges[i];
                        let main_spike = edge.delays.first().map_or(0, |d| d.delay);
                        let median = edge.median.unwrap_or(0);
                        let tolerance = quantum.max(true_median.abs() / 10);
                        HopDelay {
                            node: trace.node_name(nodes[i]).to_owned(),
                            true_median,
                            median,
                            within: (median - true_median).abs() <= tolerance,
                            main_spike,
                            spike_within: (main_spike - true_median).abs() <= tolerance,
                        }
                    })
                    .collect()
            });
            let went_on = longer.filter(|_| exact.is_none()).map(|(r, _)| {
                let next = r[nodes.len()];
                WentOn {
                    node: trace.node_name(next).to_owned(),
                    runs: runs.iter().filter(|c| c.later_to == Some(next)).count() as u64,
                }
            });
            TruePath {
                signature: signature(trace, nodes),
                count: runs.len() as u64,
                found,
                delays,
                went_on,
            }
        })
        .collect();
    true_paths.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.signature.cmp(&b.signature))
    });
    let mut reported: Vec<ReportedPath> = reported
        .iter()
        .filter(|(_, p)| p.count() >= min_count)
        .map(|(nodes, p)| ReportedPath {
            signature: signature(trace, nodes),
            count: p.count(),
            taken_by: by_path
                .get(nodes.as_slice())
                .map_or(0, |runs| runs.len() as u64),
        })
        .collect();
    reported.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.signature.cmp(&b.signature))
    });
    let hops = true_paths.iter().flat_map(|p| &p.delays);
    PathScores {
        min_count,
        false_negatives: true_paths
            .iter()
            .filter(|p| p.found != Found::Exact)
            .count() as u64,
        false_positives: reported.iter().filter(|p| p.taken_by == 0).count() as u64,
        delays_within: hops.clone().filter(|h| h.within).count() as u64,
        spikes_within: hops.clone().filter(|h| h.spike_within).count() as u64,
        delays: hops.count() as u64,
        true_paths,
        reported,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convolution::{convolve, ConvolveOptions};
    use crate::trace::{text, TraceBuilder};
    use std::path::Path;

    #[test]
    fn a_found_chain_scores_no_errors_and_a_missing_one_is_a_false_negative() {
        let trace = forwarded();
        assert_eq!(true_paths(&trace).get("a->b->c"), Some(&300));
        let found = convolve(
            &trace,
            &ConvolveOptions {
                quantum: 1_000_000,
                ..ConvolveOptions::default()
            },
        )
        .unwrap();
        assert_eq!(
            score(&trace, &found, 10),
            Counts {
                truth: 1,
                inferred: 1,
                false_positives: 0,
                false_negatives: 0
            }
        );
        let none = Convolution {
            roots: found.roots.clone(),
            roots_by_unexplained_sends: Vec::new(),
            paths: Vec::new(),
            stats: found.stats.clone(),
        };
        assert_eq!(score(&trace, &none, 10).false_negatives, 1);
    }

    /// 300 instances of a->b->c, b forwarding 30 ms after it receives.
    fn forwarded() -> Trace {
        let mut s = String::new();
        for i in 0..300u64 {
            let t = i * 97_000_000 + (i * i * 7_919 % 40) * 1_000_000;
            s.push_str(&format!(
                "{} MSG a b - r{i}\n{} MSG b c - r{i}\n",
                t as f64 / 1e9,
                (t + 30_000_000) as f64 / 1e9
            ));
        }
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), s.as_bytes(), &mut b).unwrap();
        b.finish()
    }

    /// A result of only `paths`.
    fn found_only(paths: Vec<crate::convolution::PathPattern>) -> Convolution {
        Convolution {
            roots: Vec::new(),
            roots_by_unexplained_sends: Vec::new(),
            paths,
            stats: Default::default(),
        }
    }

    /// A reported path through `names`, carrying `count` messages, with `delay` at
    /// every node after the first.
    fn reported(
        trace: &Trace,
        names: &[&str],
        count: u64,
        delay: i64,
    ) -> crate::convolution::PathPattern {
        let node = |n: &str| NodeId(trace.nodes.get(n).unwrap());
        crate::convolution::PathPattern {
            edges: names
                .windows(2)
                .enumerate()
                .map(|(i, w)| crate::convolution::Edge {
                    from: node(w[0]),
                    to: node(w[1]),
                    count,
                    delays: if i == 0 {
                        Vec::new()
                    } else {
                        vec![crate::convolution::Delay { delay, count }]
                    },
                    median: (i > 0).then_some(delay),
                })
                .collect(),
        }
    }

    #[test]
    fn a_chain_found_exactly_has_its_delay_judged_against_the_true_median() {
        let trace = forwarded();
        let chains = chains_by_time(&trace);
        assert_eq!(
            (chains.instances, chains.chains.len(), chains.cut),
            (300, 300, 0)
        );
        let options = ConvolveOptions {
            quantum: 1_000_000,
            ..ConvolveOptions::default()
        };
        let found = convolve(&trace, &options).unwrap();
        let scores = score_paths(&trace, &chains, &found, 100, options.quantum);
        assert_eq!((scores.false_negatives, scores.false_positives), (0, 0));
        assert_eq!(scores.true_paths.len(), 1);
        let path = &scores.true_paths[0];
        assert_eq!(
            (path.signature.as_str(), path.count, path.found),
            ("a->b->c", 300, Found::Exact)
        );
        assert_eq!(path.delays.len(), 1);
        let hop = &path.delays[0];
        assert_eq!((hop.node.as_str(), hop.true_median), ("b", 30_000_000));
        assert!(hop.within && hop.spike_within, "{hop:?}");
        assert_eq!(
            (scores.delays_within, scores.spikes_within, scores.delays),
            (1, 1, 1)
        );
    }

    #[test]
    fn a_hops_median_and_its_main_spike_are_judged_apart() {
        // A queue's delays are skewed: its most frequent delay (10 ms here) is far from
        // the middle of them (30 ms), which the median gets right.
        let trace = forwarded();
        let chains = chains_by_time(&trace);
        let mut path = reported(&trace, &["a", "b", "c"], 300, 10_000_000);
        path.edges[1].median = Some(31_000_000);
        let found = found_only(vec![path]);
        let scores = score_paths(&trace, &chains, &found, 100, 1_000_000);
        let hop = &scores.true_paths[0].delays[0];
        assert_eq!((hop.median, hop.main_spike), (31_000_000, 10_000_000));
        assert!(hop.within && !hop.spike_within, "{hop:?}");
        assert_eq!(
            (scores.delays_within, scores.spikes_within, scores.delays),
            (1, 0, 1)
        );
    }

    #[test]
    fn a_true_path_missed_is_told_apart_by_where_it_is() {
        let trace = forwarded();
        let chains = chains_by_time(&trace);
        let found_as = |paths| score_paths(&trace, &chains, &found_only(paths), 100, 1_000_000);
        let longer = found_as(vec![reported(
            &trace,
            &["a", "b", "c", "b"],
            300,
            30_000_000,
        )]);
        assert_eq!(longer.true_paths[0].found, Found::Start);
        // The longer path is a false positive too: no chain followed it.
        assert_eq!((longer.false_negatives, longer.false_positives), (1, 1));
        let inside = found_as(vec![reported(
            &trace,
            &["c", "a", "b", "c"],
            300,
            30_000_000,
        )]);
        assert_eq!(inside.true_paths[0].found, Found::Inside);
        let nowhere = found_as(vec![reported(&trace, &["a", "b"], 300, 0)]);
        assert_eq!(nowhere.true_paths[0].found, Found::Nowhere);
        // A spike far from the true delay is counted as off.
        let off = found_as(vec![reported(&trace, &["a", "b", "c"], 300, 90_000_000)]);
        assert_eq!(off.true_paths[0].found, Found::Exact);
        assert_eq!((off.delays_within, off.delays), (0, 1));
        // Below the threshold neither side is scored.
        let rare = score_paths(&trace, &chains, &found_only(Vec::new()), 301, 1_000_000);
        assert!(rare.true_paths.is_empty() && rare.reported.is_empty());
    }

    #[test]
    fn a_run_cut_where_mail_came_back_by_another_name_knows_where_it_went_on() {
        // Each of 100 instances: a->b, then c->b (b handing it to itself under the name
        // c, as a list manager does over loopback), then b->d. The run a->b is cut from
        // c->b->d, but its instance did leave b for d later.
        let mut text = String::new();
        for i in 0..100 {
            let t = f64::from(i) * 10.0;
            text.push_str(&format!(
                "{t} MSG a b - r{i}\n{} MSG c b - r{i}\n{} MSG b d - r{i}\n",
                t + 1.0,
                t + 2.0
            ));
        }
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), text.as_bytes(), &mut b).unwrap();
        let trace = b.finish();
        let chains = chains_by_time(&trace);
        let node = |n: &str| NodeId(trace.nodes.get(n).unwrap());
        let cut = chains.chains.iter().find(|c| c.nodes.len() == 2).unwrap();
        assert_eq!(cut.later_to, Some(node("d")));
        let whole = chains.chains.iter().find(|c| c.nodes.len() == 3).unwrap();
        assert_eq!(whole.later_to, None);
        // A search that sees b forward a's messages to d reports a->b->d: a->b is found
        // only as its start, and every one of its runs went on to d.
        let found = found_only(vec![reported(&trace, &["a", "b", "d"], 100, 2_000_000_000)]);
        let scores = score_paths(&trace, &chains, &found, 100, 1_000_000_000);
        let path = scores
            .true_paths
            .iter()
            .find(|p| p.signature == "a->b")
            .unwrap();
        assert_eq!(path.found, Found::Start);
        assert_eq!(
            path.went_on,
            Some(WentOn {
                node: "d".to_owned(),
                runs: 100
            })
        );
    }

    #[test]
    fn hops_that_do_not_link_cut_a_chain_into_runs() {
        // r0: a->b, then c->d (c is not where the hop before arrived); r1: a->b->b->c.
        let text = "1.0 MSG a b - r0\n2.0 MSG c d - r0\n1.0 MSG a b - r1\n2.0 MSG b b - r1\n3.0 MSG b c - r1\n";
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), text.as_bytes(), &mut b).unwrap();
        let trace = b.finish();
        let chains = chains_by_time(&trace);
        assert_eq!((chains.instances, chains.cut), (2, 1));
        let mut runs: Vec<String> = chains
            .chains
            .iter()
            .map(|c| signature(&trace, &c.nodes))
            .collect();
        runs.sort();
        assert_eq!(runs, ["a->b", "a->b->b->c", "c->d"]);
        // The delay at the repeated b is the hop's own: 1 s, then 1 s.
        let long = chains.chains.iter().find(|c| c.nodes.len() == 4).unwrap();
        let delays: Vec<i64> = long.times[..2]
            .iter()
            .map(|&(at, left)| left - at)
            .collect();
        assert_eq!(delays, [1_000_000_000, 1_000_000_000]);
    }
}
