//! Parts of one node's joint choice that can run apart from the rest, on a worker of
//! another process (threads of one process share its pool already): the second half of a node cut in two
//! ([`super::split`]), settled as a node of its own while this worker settles the
//! first; and the robust start on the learning window, settled while this worker
//! settles the others, of which only the likelihood comes back. What each reads is
//! owned and serialisable ([`Work`]), and the same code runs it wherever it runs, so
//! the answer never depends on where. Where the parts run is [`Sharing`]. Owns no
//! search and no learning; sending work and waiting for it belong to
//! [`crate::nesting::dataflow`].

use super::calls::NodeCalls;
use super::search::Scope;
use super::starts::{settle, Learning};
use super::{chosen, relearned, settled, CallFacts, JointChoice, NodeSettings};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::candidates::Candidates;
use crate::trace::OperationId;
use serde::{Deserialize, Serialize};

/// Calls of one node, or of the second half of one cut in two, as a node of their own,
/// with the start they settle from and how. Calls are numbered afresh, in the node's
/// order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// The calls the part reads: its parents and its children, each once.
    calls: Vec<CallPair>,
    /// Its parents and children, as indexes into `calls`, in the node's order.
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

/// A part to run apart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Work {
    /// Settle the part on all its children: the second half of a node cut in two.
    SecondHalf(Part),
    /// Settle the whole node on the learning window from its start, robustly, and learn
    /// its model again: the robust start compared with the others.
    RobustStart(Window),
}

/// A whole node and its learning window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    node: Part,
    window: Scope,
}

/// What a part came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Worked {
    /// The second half's choice.
    Choice(JointChoice),
    /// The likelihood of the robust start's end: all the comparison reads of it.
    Likelihood(f64),
}

/// Where the parts of a node's choice run.
#[derive(Clone, Copy, Default)]
pub enum Sharing<'a> {
    /// Beside the rest, on rayon's pool.
    #[default]
    Here,
    /// Sent off: the function sends the work and returns what waits for its answer,
    /// which is called once this worker's own share is done.
    Elsewhere(&'a (dyn Fn(Work) -> Box<dyn FnOnce() -> Worked + Send> + Sync)),
}

/// What settles one part, borrowed: the node's calls, the part's parents and children
/// among them, and their candidates.
pub(super) struct PartView<'a> {
    pub(super) pairs: &'a [CallPair],
    pub(super) incoming: &'a [u32],
    pub(super) outgoing: &'a [u32],
    pub(super) candidates: &'a Candidates,
    pub(super) settings: NodeSettings,
    pub(super) facts: CallFacts<'a>,
}

impl PartView<'_> {
    /// The part settled from `start` as a node of its own, under a model of its own:
    /// the choice for its children, with `explain`'s (an index among them) recorded.
    pub(super) fn settle(
        &self,
        start: Vec<u32>,
        (learning, dense): (Learning, bool),
        explain: Option<usize>,
    ) -> JointChoice {
        let calls = self.calls(dense);
        let all = Scope::all(self.candidates, self.incoming.len());
        let end = settle(&calls, self.candidates, start, learning, all);
        chosen(&settled(end, learning), self.candidates, explain)
    }

    /// The likelihood of the end `start` settles to on `window`, learning as `learning`
    /// says, its model learned again: as [`super::best_start`] scores the robust start.
    fn start_likelihood(
        &self,
        start: Vec<u32>,
        (learning, dense): (Learning, bool),
        window: Scope,
    ) -> f64 {
        let calls = self.calls(dense);
        relearned(settle(&calls, self.candidates, start, learning, window)).sequence_likelihood()
    }

    fn calls(&self, dense: bool) -> NodeCalls<'_> {
        let mut calls = NodeCalls::new(
            self.pairs,
            self.incoming,
            self.outgoing,
            self.candidates,
            self.settings,
            self.facts,
        );
        calls.set_dense(dense);
        calls
    }

    /// The part, owned, with only the calls it reads, numbered afresh: the numbering
    /// keeps their order, and the search reads nothing else of it.
    pub(super) fn owned(&self, start: Vec<u32>, (learning, dense): (Learning, bool)) -> Part {
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
        Part {
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

impl Work {
    /// Runs the work: the same answer as running it where it was sent from.
    pub fn run(self) -> Worked {
        match self {
            Work::SecondHalf(part) => part.with_view(|view, start, learning, dense| {
                Worked::Choice(view.settle(start, (learning, dense), None))
            }),
            Work::RobustStart(Window { node, window }) => {
                node.with_view(|view, start, learning, dense| {
                    Worked::Likelihood(view.start_likelihood(start, (learning, dense), window))
                })
            }
        }
    }
}

impl Work {
    /// The robust start of the node `view` from `start` on `window`, to send.
    pub(super) fn robust_start(
        view: &PartView<'_>,
        start: Vec<u32>,
        dense: bool,
        window: Scope,
    ) -> Work {
        Work::RobustStart(Window {
            node: view.owned(start, (Learning::ROBUST, dense)),
            window,
        })
    }
}

impl Worked {
    /// The choice, for the second half it answers.
    pub(super) fn choice(self) -> JointChoice {
        match self {
            Worked::Choice(choice) => choice,
            Worked::Likelihood(_) => panic!("a second half came back as a start's likelihood"),
        }
    }

    /// The likelihood, for the start it answers.
    pub(super) fn likelihood(self) -> f64 {
        match self {
            Worked::Likelihood(likelihood) => likelihood,
            Worked::Choice(_) => panic!("a start came back as a second half's choice"),
        }
    }
}

impl Part {
    /// Calls `run` with the part's view, its start, learning and density.
    fn with_view<T>(self, run: impl FnOnce(&PartView<'_>, Vec<u32>, Learning, bool) -> T) -> T {
        let Part {
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
        let view = PartView {
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
        run(&view, start, learning, dense)
    }
}
