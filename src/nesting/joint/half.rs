//! The second half of a node cut in two ([`super::split`]) as a node of its own: what
//! settling it reads, owned and serialisable ([`Half`]), so that another worker (of
//! this process or another machine) can settle it while this one settles the first;
//! and where it is settled ([`Halves`]). The same code settles it wherever it runs, so
//! the answer never depends on where. Owns no search and no learning; sending a half
//! and waiting for its answer belong to [`crate::nesting::dataflow`].

use super::calls::NodeCalls;
use super::search::Scope;
use super::starts::{settle, Learning};
use super::{chosen, settled, CallFacts, JointChoice, NodeSettings};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::candidates::Candidates;
use crate::trace::OperationId;
use serde::{Deserialize, Serialize};

/// The children after a cut and their candidate parents, as a node of their own, with
/// the start they settle from and how. Calls are numbered afresh, in the node's order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Half {
    /// The calls the half reads: its parents and its children, each once.
    calls: Vec<CallPair>,
    /// Its parents and children, as indexes into `calls`, ascending.
    incoming: Vec<u32>,
    outgoing: Vec<u32>,
    /// Per child, its candidates among `incoming`.
    candidates: Candidates,
    settings: NodeSettings,
    /// Per child, its parent in the start (an index into `incoming` or `NO_PARENT`).
    start: Vec<u32>,
    learning: Learning,
    dense: bool,
    /// Per call, its operation and its connection's key.
    operation: Vec<OperationId>,
    connection: Vec<u64>,
}

/// Where the second half of a node cut in two is settled.
#[derive(Clone, Copy, Default)]
pub enum Halves<'a> {
    /// Beside the first, on rayon's pool.
    #[default]
    Here,
    /// Sent off: the function sends the half and returns what waits for its answer,
    /// which is called once the first half is settled.
    Elsewhere(&'a (dyn Fn(Half) -> Box<dyn FnOnce() -> JointChoice + Send> + Sync)),
}

/// What settles one half, borrowed: the node's calls, the half's parents and children
/// among them, and their candidates.
pub(super) struct HalfView<'a> {
    pub(super) pairs: &'a [CallPair],
    pub(super) incoming: &'a [u32],
    pub(super) outgoing: &'a [u32],
    pub(super) candidates: &'a Candidates,
    pub(super) settings: NodeSettings,
    pub(super) facts: CallFacts<'a>,
}

impl HalfView<'_> {
    /// The half settled from `start` as a node of its own, under a model of its own:
    /// the choice for its children, with `explain`'s (an index among them) recorded.
    pub(super) fn settle(
        &self,
        start: Vec<u32>,
        (learning, dense): (Learning, bool),
        explain: Option<usize>,
    ) -> JointChoice {
        let mut calls = NodeCalls::new(
            self.pairs,
            self.incoming,
            self.outgoing,
            self.candidates,
            self.settings,
            self.facts,
        );
        calls.set_dense(dense);
        let all = Scope::all(self.candidates, self.incoming.len());
        let end = settle(&calls, self.candidates, start, learning, all);
        chosen(&settled(end, learning), self.candidates, explain)
    }

    /// The half, owned, with only the calls it reads, numbered afresh: the numbering
    /// keeps their order, and the search reads nothing else of it.
    pub(super) fn owned(&self, start: Vec<u32>, (learning, dense): (Learning, bool)) -> Half {
        let mut keys: Vec<u32> = Vec::with_capacity(self.incoming.len() + self.outgoing.len());
        keys.extend_from_slice(self.incoming);
        keys.extend_from_slice(self.outgoing);
        keys.sort_unstable();
        keys.dedup();
        let renumbered = |list: &[u32]| -> Vec<u32> {
            list.iter()
                .map(|call| keys.binary_search(call).expect("a key of its own") as u32)
                .collect()
        };
        Half {
            calls: keys.iter().map(|&key| self.pairs[key as usize]).collect(),
            incoming: renumbered(self.incoming),
            outgoing: renumbered(self.outgoing),
            candidates: self.candidates.clone(),
            settings: self.settings,
            start,
            learning,
            dense,
            operation: keys
                .iter()
                .map(|&key| (self.facts.operation)(key))
                .collect(),
            connection: keys
                .iter()
                .map(|&key| (self.facts.connection)(key))
                .collect(),
        }
    }
}

impl Half {
    /// How many calls the half reads.
    pub fn calls(&self) -> usize {
        self.calls.len()
    }

    /// Settles the half: the same choice as settling it where it was cut.
    pub fn settle(self) -> JointChoice {
        let Half {
            calls,
            incoming,
            outgoing,
            candidates,
            settings,
            start,
            learning,
            dense,
            operation,
            connection,
        } = self;
        let view = HalfView {
            pairs: &calls,
            incoming: &incoming,
            outgoing: &outgoing,
            candidates: &candidates,
            settings,
            facts: CallFacts {
                operation: &|local| operation[local as usize],
                connection: &|local| connection[local as usize],
            },
        };
        view.settle(start, (learning, dense), None)
    }
}
