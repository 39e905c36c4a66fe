//! Scoring against the system's own propagated ids (`eval --against-ids`): the ids
//! are hidden from the inference, and each call whose id names its parent (the one
//! call into its caller with the same id that encloses it) scores whether the inferred
//! parent is that one. A user learns how far to trust blackbox on their own system,
//! node by node, and whether its confidence means what it says. Owns the id-named
//! parents and the scores; hiding the ids is [`crate::trace::Trace`]'s, inference
//! [`crate::nesting`]'s.

use super::reliability::{self, ConfidenceBucket};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::{Nesting, NO_PARENT};
use crate::trace::{Nanos, PropagatedId, Trace};
use hashbrown::HashMap;
use serde::Serialize;

/// Per call pair, the parent its id names, or [`NO_PARENT`] where it names none: the
/// call carries no id, or no single call into its caller with the same id encloses it
/// (within `skew_window`), or its caller does not pass ids on (fewer than half of the
/// id-carrying calls out of it find one).
pub fn id_parents(trace: &Trace, pairs: &[CallPair], skew_window: Nanos) -> Vec<u32> {
    let id = |pair: &CallPair| trace.propagated(pair.call_id);
    let mut into: HashMap<(u32, PropagatedId), Vec<u32>> = HashMap::new();
    for (i, pair) in pairs.iter().enumerate() {
        let carried = id(pair);
        if carried != PropagatedId::NONE {
            into.entry((pair.callee.0, carried))
                .or_default()
                .push(i as u32);
        }
    }
    let mut named = vec![NO_PARENT; pairs.len()];
    // Per node, id-carrying calls out and those that found their parent.
    let mut found: HashMap<u32, (u64, u64)> = HashMap::new();
    for (i, child) in pairs.iter().enumerate() {
        let carried = id(child);
        if carried == PropagatedId::NONE {
            continue;
        }
        let counts = found.entry(child.caller.0).or_default();
        counts.0 += 1;
        let Some(same) = into.get(&(child.caller.0, carried)) else {
            continue;
        };
        let mut enclosing = same.iter().copied().filter(|&p| {
            let parent = &pairs[p as usize];
            p as usize != i
                && parent.callee_recv <= child.caller_send + skew_window
                && child.caller_return <= parent.callee_return + skew_window
        });
        if let (Some(parent), None) = (enclosing.next(), enclosing.next()) {
            named[i] = parent;
            counts.1 += 1;
        }
    }
    for (i, child) in pairs.iter().enumerate() {
        if named[i] != NO_PARENT {
            let (carried, matched) = found[&child.caller.0];
            if (matched as f64) < crate::nesting::propagated::PROPAGATES * carried as f64 {
                named[i] = NO_PARENT;
            }
        }
    }
    named
}

/// How the inferred parents agree with the ids'.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IdScores {
    /// Call pairs in the trace.
    pub calls: u64,
    /// Calls whose id names their parent.
    pub labelled: u64,
    /// Of those, calls whose inferred parent is the one named.
    pub agree: u64,
    /// Per node the calls leave, sorted by name.
    pub nodes: Vec<NodeIdScores>,
    /// By the inference's stated confidence, in rising buckets.
    pub confidence: Vec<ConfidenceBucket>,
    /// The inferred requests that hold a labelled call, by how sure their whole tree is
    /// (what a pattern's `sure` averages); right: every labelled call in it has the
    /// parent its id names, and no call whose id names a parent in it went elsewhere.
    /// Calls without ids are not checked, so this bounds the share exact from above.
    pub requests: Vec<ConfidenceBucket>,
}

/// One node's share of [`IdScores`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeIdScores {
    /// The node the calls leave (whose parent choice is scored).
    pub node: String,
    /// Its calls out whose id names their parent.
    pub labelled: u64,
    /// Of those, calls given that parent.
    pub agree: u64,
    /// Mean stated confidence of the labelled calls' choices.
    pub mean_confidence: f64,
}

/// Scores `nesting` (inferred without ids) against `named` ([`id_parents`]).
pub fn evaluate(trace: &Trace, nesting: &Nesting, named: &[u32]) -> IdScores {
    let mut nodes: HashMap<u32, (u64, u64, f64)> = HashMap::new();
    let (mut labelled, mut agree) = (0, 0);
    for (i, &parent) in named.iter().enumerate() {
        if parent == NO_PARENT {
            continue;
        }
        let right = nesting.parent[i] == parent;
        let sure = f64::from(nesting.confidence[i]);
        labelled += 1;
        agree += u64::from(right);
        let node = nodes.entry(nesting.pairs[i].caller.0).or_default();
        node.0 += 1;
        node.1 += u64::from(right);
        node.2 += sure;
    }
    let mut nodes: Vec<NodeIdScores> = nodes
        .into_iter()
        .map(|(node, (labelled, agree, sure))| NodeIdScores {
            node: trace.nodes.resolve(node).to_owned(),
            labelled,
            agree,
            mean_confidence: sure / labelled as f64,
        })
        .collect();
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    let root = crate::nesting::roots(&nesting.parent);
    let (mut checked, mut wrong) = (vec![false; root.len()], vec![false; root.len()]);
    for (i, &parent) in named.iter().enumerate() {
        if parent == NO_PARENT {
            continue;
        }
        checked[root[i] as usize] = true;
        if nesting.parent[i] != parent {
            // Wrong where it was put, and missing where its id says it belongs.
            wrong[root[i] as usize] = true;
            checked[root[parent as usize] as usize] = true;
            wrong[root[parent as usize] as usize] = true;
        }
    }
    let sureness = reliability::tree_sureness(nesting);
    let requests = reliability::bucketed(
        (0..root.len())
            .filter(|&r| nesting.parent[r] == NO_PARENT && checked[r])
            .map(|r| (sureness[r], !wrong[r])),
    );
    IdScores {
        calls: nesting.pairs.len() as u64,
        labelled,
        agree,
        nodes,
        confidence: reliability::buckets(
            nesting,
            named
                .iter()
                .enumerate()
                .filter(|(_, &parent)| parent != NO_PARENT)
                .map(|(i, &parent)| (i, nesting.parent[i] == parent)),
        ),
        requests,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nesting::{nest, NestOptions};
    use crate::trace::{text, TraceBuilder};
    use std::path::Path;

    /// Two overlapping requests into b, each making one call to c with its id; a third
    /// call to c carries an id no request into b has.
    const TRACE: &str =
        "1 CALL a b r1 id=x\n2 CALL a b r2 id=y\n3 CALL b c c1 id=y\n4 RET c b c1\n\
                         5 CALL b c c2 id=x\n6 RET c b c2\n6 CALL b c c3 id=z\n6.5 RET c b c3\n\
                         7 RET b a r1\n8 RET b a r2\n";

    #[test]
    fn ids_name_the_enclosing_call_with_the_same_id() {
        let mut builder = TraceBuilder::new();
        text::read(Path::new("t"), TRACE.as_bytes(), &mut builder).unwrap();
        let trace = builder.finish();
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        let named = id_parents(&trace, &nesting.pairs, 0);
        let name = |i: u32| {
            trace
                .call_id_text(nesting.pairs[i as usize].call_id)
                .to_owned()
        };
        let by_call: Vec<(String, Option<String>)> = named
            .iter()
            .enumerate()
            .map(|(i, &p)| (name(i as u32), (p != NO_PARENT).then(|| name(p))))
            .collect();
        assert!(by_call.contains(&("c1".into(), Some("r2".into()))));
        assert!(by_call.contains(&("c2".into(), Some("r1".into()))));
        assert!(by_call.contains(&("c3".into(), None)));
        assert!(by_call.contains(&("r1".into(), None)));
        // With the ids used, the inference agrees with them.
        let scores = evaluate(&trace, &nesting, &named);
        assert_eq!((scores.labelled, scores.agree), (2, 2));
        assert_eq!(scores.nodes[0].node, "b");
        let requests = |scores: &IdScores| {
            let all = scores.requests.iter().map(|b| b.calls).sum::<u64>();
            (all, scores.requests.iter().map(|b| b.right).sum::<u64>())
        };
        // Both requests hold a labelled call and are right; c3's lone tree holds none.
        assert_eq!(requests(&scores), (2, 2));
        // Give c1 to r1: r1 holds a call that is not its own, r2 lacks one.
        let mut swapped = nesting.clone();
        let index = |call: &str| (0..swapped.pairs.len()).find(|&i| name(i as u32) == call);
        let (c1, r1) = (index("c1").unwrap(), index("r1").unwrap());
        swapped.parent[c1] = r1 as u32;
        assert_eq!(requests(&evaluate(&trace, &swapped, &named)), (2, 0));
    }
}
