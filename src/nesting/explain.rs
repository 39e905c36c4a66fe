//! Why a call got its parent (`--explain`): finds the call a user names, re-runs its
//! node's parent choice (the paper's greedy step, then the joint search when that is the
//! algorithm) with the scores of that one decision recorded, and returns them as plain
//! data. Owns the lookup of calls by id or by sender, receiver and time; the
//! wording belongs to [`crate::report::explanation`].

use super::call_pairs::CallPair;
use super::node::{decide_explained, NodeInput, NodeScalars};
use super::parents::{CandidateScore, NO_PARENT};
use super::{Algorithm, NestOptions, Nesting};
use crate::trace::time::{self, TimeError};
use crate::trace::{Nanos, NodeId, Trace};

/// Which call to explain, as a user names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallQuery {
    /// Every call with this call id.
    Id(String),
    /// The call from `sender` to `receiver` sent nearest to `time`.
    At {
        /// Node that sent the call.
        sender: String,
        /// Node that received it.
        receiver: String,
        /// Seconds, as in the trace.
        time: Nanos,
    },
}

/// Why a call could not be explained.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    /// Neither one call id nor `SENDER RECEIVER TIME`.
    #[error("--explain takes a call id, or `SENDER RECEIVER TIME` in one argument; got {0:?}")]
    BadQuery(String),
    /// The time of `SENDER RECEIVER TIME` is not a number of seconds.
    #[error("--explain: {time:?} is not a time in seconds: {source}")]
    BadTime {
        /// What was given.
        time: String,
        /// Why it does not parse.
        source: TimeError,
    },
    /// No call pair carries the id.
    #[error("no call with id {0:?} was matched with its return")]
    NoSuchId(String),
    /// No call pair goes from sender to receiver.
    #[error("no call from {sender} to {receiver} was matched with its return")]
    NoSuchCall {
        /// Node that sent the call.
        sender: String,
        /// Node that received it.
        receiver: String,
    },
}

impl CallQuery {
    /// Reads `ID` or `SENDER RECEIVER TIME`.
    pub fn parse(text: &str) -> Result<Self, ExplainError> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        match fields[..] {
            [id] => Ok(CallQuery::Id(id.to_owned())),
            [sender, receiver, at] => Ok(CallQuery::At {
                sender: sender.to_owned(),
                receiver: receiver.to_owned(),
                time: time::parse_seconds(at.as_bytes()).map_err(|source| {
                    ExplainError::BadTime {
                        time: at.to_owned(),
                        source,
                    }
                })?,
            }),
            _ => Err(ExplainError::BadQuery(text.to_owned())),
        }
    }
}

/// The calls a query names, as indexes into `nesting.pairs`, in call-time order.
pub fn find_calls(
    trace: &Trace,
    nesting: &Nesting,
    query: &CallQuery,
) -> Result<Vec<u32>, ExplainError> {
    let pairs = &nesting.pairs;
    match query {
        CallQuery::Id(id) => {
            let found: Vec<u32> = match trace.call_ids.get(id) {
                Some(wanted) => (0..pairs.len() as u32)
                    .filter(|&i| pairs[i as usize].call_id.0 == wanted)
                    .collect(),
                None => Vec::new(),
            };
            if found.is_empty() {
                return Err(ExplainError::NoSuchId(id.clone()));
            }
            Ok(found)
        }
        CallQuery::At {
            sender,
            receiver,
            time,
        } => {
            let node = |name: &str| trace.nodes.get(name).map(NodeId);
            let no_such = || ExplainError::NoSuchCall {
                sender: sender.clone(),
                receiver: receiver.clone(),
            };
            let (from, to) = (
                node(sender).ok_or_else(no_such)?,
                node(receiver).ok_or_else(no_such)?,
            );
            (0..pairs.len() as u32)
                .filter(|&i| pairs[i as usize].caller == from && pairs[i as usize].callee == to)
                .min_by_key(|&i| (pairs[i as usize].caller_send - time).unsigned_abs())
                .map(|i| vec![i])
                .ok_or_else(no_such)
        }
    }
}

/// One candidate parent of the explained call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// The candidate, as an index into the pairs.
    pub parent: u32,
    /// Child's call time minus the candidate's, both on the node's clock.
    pub delay: Nanos,
    /// Whether it answered before the call returned (an asynchronous parent, admitted by
    /// [`NestOptions::async_window`]).
    pub answered_before: bool,
    /// How it scored in the paper's greedy choice; none for a call that answered before
    /// the call returned, which that step does not weigh.
    pub score: Option<CandidateScore>,
    /// With the joint choice: the log-likelihood the final assignment would lose with
    /// this parent instead (0 for the chosen one).
    pub joint_loss: Option<f64>,
    /// Where the node learned a connection affinity: ln of how much likelier the call's
    /// connection is given this candidate's than given its kind alone.
    pub connection: Option<f64>,
}

/// The parent choice of one call, replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The call, as an index into the pairs.
    pub call: u32,
    /// The node whose children are decided together (the call's sender).
    pub node: NodeId,
    /// Calls leaving that node, decided in call-time order.
    pub decisions: usize,
    /// This call's place in that order, from 0.
    pub order: usize,
    /// Its candidates, best first (by joint loss with the joint choice, else by score;
    /// ties: earliest start first, as decided).
    pub candidates: Vec<Candidate>,
    /// The parent the paper's greedy choice gave, or [`NO_PARENT`].
    pub greedy: u32,
    /// The parent the algorithm chose (the greedy one with `--algorithm paper`).
    pub chosen: u32,
    /// The parent in the result: differs from `chosen` only when cutting a cycle made
    /// the call a root.
    pub parent: u32,
    /// How sure the choice is (the nesting's confidence of it).
    pub confidence: f32,
    /// Calls open around it set aside because its propagated id named its parent.
    pub set_aside_by_id: usize,
    /// How its parent was given before any choice, where it was: then there are no
    /// candidates and no decisions.
    pub placed: Option<Placed>,
}

/// How a call got its parent without the per-node choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// A broker's delivery: its parent is the message that brought it in, linked by
    /// what both carry.
    ThroughBroker,
    /// A call of a node at an end of a broker that serves in order: its parent is the
    /// call of its place in that order.
    InOrder,
}

/// Replays the parent choice of `call` (an index into `nesting.pairs`) at its sender,
/// through the same per-node steps as [`super::nest`], with that decision recorded.
/// Costs one pass over the pairs plus one node's share of the nesting.
pub fn explain(trace: &Trace, nesting: &Nesting, options: &NestOptions, call: u32) -> Explanation {
    let pairs: &[CallPair] = &nesting.pairs;
    let node = pairs[call as usize].caller;
    // As the nesting did: the calls placed before the choice are left out of it.
    let hops = super::hops::pair_hops(trace, pairs, &crate::brokers::follow(trace));
    let in_order = super::hops::serve_in_order(trace, pairs, (&hops, options.ids));
    let before_choice = super::hops::placed_before_choice(&hops, &in_order);
    if before_choice.binary_search(&call).is_ok() {
        let linked = hops
            .links
            .binary_search_by_key(&call, |link| link.0)
            .is_ok();
        return Explanation {
            call,
            node,
            decisions: 0,
            order: 0,
            candidates: Vec::new(),
            greedy: NO_PARENT,
            chosen: nesting.parent[call as usize],
            parent: nesting.parent[call as usize],
            confidence: nesting.confidence[call as usize],
            set_aside_by_id: 0,
            placed: Some(match linked {
                true => Placed::ThroughBroker,
                false => Placed::InOrder,
            }),
        };
    }
    let incoming: Vec<u32> = (0..pairs.len() as u32)
        .filter(|&i| pairs[i as usize].callee == node)
        .collect();
    let outgoing: Vec<u32> = (0..pairs.len() as u32)
        .filter(|&i| pairs[i as usize].caller == node && before_choice.binary_search(&i).is_err())
        .collect();
    let scalars = NodeScalars {
        lost: super::lost_shares(trace, pairs, &|_| true)[node.0 as usize],
        tick: super::call_pairs::tick(pairs),
        core: None,
        carried: None,
        given: None,
        deliveries: &hops.one_way,
    };
    let input = NodeInput::gather(trace, pairs, node, (&incoming, &outgoing), scalars, options);
    let (_, mut record) = decide_explained(input, options, call);
    // Local indexes count the node's calls in as the choice sorted them.
    let incoming = std::mem::take(&mut record.incoming);
    let global = |local: u32| match local {
        NO_PARENT => NO_PARENT,
        local => incoming[local as usize],
    };
    let child = &pairs[call as usize];
    // The paper's candidates with their scores, then the ones answered before the call
    // returned that only an asynchronous window admits, which the paper never scored.
    let mut candidates: Vec<Candidate> = std::mem::take(&mut record.scores)
        .into_iter()
        .map(|score| (score.local, Some(score)))
        .chain(
            record
                .search_row
                .iter()
                .filter(|&&local| !record.paper_row.contains(&local))
                .map(|&local| (local, None)),
        )
        .map(|(local, score)| {
            let parent = incoming[local as usize];
            let joint = record.joint_losses.iter().find(|&&(at, _, _)| at == local);
            Candidate {
                parent,
                delay: child.caller_send - pairs[parent as usize].callee_recv,
                answered_before: super::candidates::outlives(
                    child,
                    &pairs[parent as usize],
                    options.skew_window,
                ),
                score,
                joint_loss: joint.map(|&(_, loss, _)| loss),
                connection: joint.and_then(|&(_, _, connection)| connection),
            }
        })
        .collect();
    // Stable: equal values keep the earliest-start-first order the choice used.
    match options.algorithm {
        Algorithm::Paper => candidates.sort_by(|a, b| {
            let score = |c: &Candidate| c.score.map_or(-1.0, |s| s.score);
            score(b).total_cmp(&score(a))
        }),
        Algorithm::Joint => candidates.sort_by(|a, b| {
            let loss = |c: &Candidate| c.joint_loss.unwrap_or(f64::INFINITY);
            loss(a).total_cmp(&loss(b))
        }),
    }
    Explanation {
        call,
        node,
        decisions: record.decisions,
        order: record.order,
        candidates,
        greedy: global(record.greedy),
        chosen: global(record.chosen),
        parent: nesting.parent[call as usize],
        confidence: nesting.confidence[call as usize],
        set_aside_by_id: record.set_aside_by_id,
        placed: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nesting::nest;
    use crate::trace::text::trace_from_str;

    /// Paper Figure 5 again: c2 could belong to p1 or p2; p1 already has c1, which
    /// overlaps c2, so the overlap penalty (x = 2) quarters p1's score.
    const FIGURE_5: &str = "0 CALL A B p1\n1 CALL A B p2\n2 CALL B C c1\n3 CALL B C c2\n\
                            4 RET C B c1\n5 RET C B c2\n6 RET B A p1\n7 RET B A p2\n";

    #[test]
    fn the_explanation_agrees_with_the_choice_and_shows_the_penalty() {
        let trace = trace_from_str(FIGURE_5);
        let options = NestOptions::default();
        let nesting = nest(&trace, &options).unwrap();
        let calls = find_calls(&trace, &nesting, &CallQuery::Id("c2".into())).unwrap();
        assert_eq!(calls.len(), 1);
        let e = explain(&trace, &nesting, &options, calls[0]);
        assert_eq!(trace.node_name(e.node), "B");
        assert_eq!((e.order, e.decisions), (1, 2));
        assert_eq!(e.candidates.len(), 2);
        let id = |i: u32| trace.call_id_text(nesting.pairs[i as usize].call_id);
        assert_eq!(id(e.chosen), "p2");
        assert_eq!(e.chosen, e.parent);
        let best = &e.candidates[0];
        assert_eq!(best.parent, e.chosen);
        assert_eq!(best.delay, 2_000_000_000);
        let other = &e.candidates[1];
        assert_eq!(id(other.parent), "p1");
        let (best, other) = (best.score.unwrap(), other.score.unwrap());
        assert_eq!((other.overlapping, other.children), (1, 1));
        assert_eq!(other.penalty, 0.25);
        assert_eq!(other.score, other.scoreboard * 0.25);
        assert!(best.score > other.score);
    }

    #[test]
    fn a_call_is_found_by_sender_receiver_and_nearest_time() {
        let trace = trace_from_str(FIGURE_5);
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        let query = CallQuery::parse("B C 2.9").unwrap();
        let calls = find_calls(&trace, &nesting, &query).unwrap();
        assert_eq!(
            trace.call_id_text(nesting.pairs[calls[0] as usize].call_id),
            "c2"
        );
        assert_eq!(
            find_calls(&trace, &nesting, &CallQuery::parse("C B 1").unwrap()),
            Err(ExplainError::NoSuchCall {
                sender: "C".into(),
                receiver: "B".into()
            })
        );
        assert_eq!(
            find_calls(&trace, &nesting, &CallQuery::parse("zz").unwrap()),
            Err(ExplainError::NoSuchId("zz".into()))
        );
        assert!(matches!(
            CallQuery::parse("A B"),
            Err(ExplainError::BadQuery(_))
        ));
        assert!(matches!(
            CallQuery::parse("A B soon"),
            Err(ExplainError::BadTime { .. })
        ));
    }

    /// Where the joint search overrules the paper's greedy step, the explanation names
    /// both, and its choice is the one in the result.
    #[test]
    fn the_explanation_follows_the_joint_choice_where_it_overrules_the_greedy_one() {
        let trace = trace_from_str(include_str!("../../tests/data/multitier-sample.trace"));
        let joint = NestOptions::default();
        let paper = NestOptions {
            algorithm: Algorithm::Paper,
            ..joint
        };
        let (j, p) = (nest(&trace, &joint).unwrap(), nest(&trace, &paper).unwrap());
        let overruled: Vec<u32> = (0..j.pairs.len() as u32)
            .filter(|&i| j.parent[i as usize] != p.parent[i as usize])
            .collect();
        assert!(overruled.len() > 10, "{} calls differ", overruled.len());
        for &call in overruled.iter().step_by(overruled.len() / 10) {
            let e = explain(&trace, &j, &joint, call);
            assert_eq!(e.chosen, j.parent[call as usize]);
            assert_eq!(e.greedy, p.parent[call as usize]);
            assert_eq!(e.candidates[0].parent, e.chosen);
            assert_eq!(e.candidates[0].joint_loss, Some(0.0));
            assert!(e.candidates[1..]
                .iter()
                .all(|c| c.joint_loss.is_some_and(|l| l >= 0.0)));
        }
    }

    #[test]
    fn a_call_with_no_open_parent_is_explained_as_a_root() {
        let trace = trace_from_str(FIGURE_5);
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        let calls = find_calls(&trace, &nesting, &CallQuery::Id("p1".into())).unwrap();
        let e = explain(&trace, &nesting, &NestOptions::default(), calls[0]);
        assert!(e.candidates.is_empty());
        assert_eq!((e.chosen, e.parent), (NO_PARENT, NO_PARENT));
    }

    #[test]
    fn a_call_placed_before_the_choice_is_explained_by_how() {
        // The deliveries are linked by their payloads, the SETs placed by the order of
        // service.
        let trace = trace_from_str(crate::nesting::hops::tests::TWO_ORDERS_SERVED_IN_TURN);
        let options = NestOptions::default();
        let nesting = nest(&trace, &options).unwrap();
        let explained = |id: &str| {
            let calls = find_calls(&trace, &nesting, &CallQuery::Id(id.into())).unwrap();
            explain(&trace, &nesting, &options, calls[0])
        };
        let id = |i: u32| trace.call_id_text(nesting.pairs[i as usize].call_id);
        let (delivery, set) = (explained("d2"), explained("s2"));
        assert_eq!(delivery.placed, Some(Placed::ThroughBroker));
        assert_eq!(id(delivery.parent), "p2");
        assert_eq!(set.placed, Some(Placed::InOrder));
        assert_eq!(id(set.parent), "d2");
        assert!(set.candidates.is_empty() && set.decisions == 0);
    }
}
