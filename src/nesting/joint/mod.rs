//! The improved parent choice (`--algorithm joint`, the default): the children of one
//! node are given parents jointly, under a model learned from the trace itself, instead
//! of one at a time under fixed penalties. Owns the model and the search; candidates and
//! the first, greedy answer come from the paper's steps.
//!
//! The model is of what one call into node B does while it is open. For node B, an
//! assignment of parents to B's outgoing calls is scored by its log-likelihood, the
//! sum of four parts, each learned from the assignment itself:
//!
//! - a sequence of actions per parent (its calls out, in the order they left, then its
//!   answer), each timed from the latest event of that parent before it — its arrival,
//!   its previous call leaving, or one of its calls returning — under a density per
//!   (parent's caller A, kind of that event, action): a sequential call leaves soon
//!   after its sibling returns, a parallel one soon after its sibling left, a service
//!   answers soon after the last call it waited for;
//! - which action follows which, as a Markov chain per A over the actions' kinds (a
//!   call to C, or the answer): the order a parent makes its calls in;
//! - in the pinned start's model (below), which event each action follows, given
//!   A, the action before it and the action: a sequential service calls on after the
//!   call before returned, a fan-out one while it is still open. The delay densities
//!   are each normalised per event, so without this an assignment chooses its events
//!   for free, and at saturation hard EM did: it piled calls onto a few parents, where
//!   some sibling had always just left or returned, and left the rest with none (the
//!   80-client shop: 0.0% of requests exactly right; 21.0% with this factor in every
//!   start). In every start it also let the piles of penalty-breaker at ×8, whose
//!   parents make zero, two or three calls, win as consistent (53% of instances in
//!   false patterns against 5.3%); with counts pinned there are no piles to reward;
//! - per child, the delay from its parent's arrival to the child leaving and the gap
//!   from the child's return to the parent's answer, under densities per (A, C): the
//!   paper's scoreboard, normalised, and its mirror on the return side, which still
//!   speaks for children that neither follow a sibling nor return last;
//! - per parent, the set of children it makes (which kinds, how many of each), under a
//!   distribution per A, smoothed towards the kinds counted independently under
//!   distributions per (A, C): fan-out services make one of each, serial ones several,
//!   and a service that calls C, D and E or none of them never calls only two. This
//!   replaces the paper's fixed overlap penalty, which is right for serial services
//!   and wrong for fan-out.
//!
//! The sequence's densities are in time: a bin's learned share divided by the span of
//! time the bin stands for (its width, or the trace's tick where that is coarser; the
//! first bin also holds the negative delays of the skew window). Shares of exponential
//! bins would favour long delays, whose bins are wider: at high parallelism, where
//! most candidates are wrong, that led the search to give calls to the oldest open
//! request, and a skew window's negative delays, all in the first bin, to none. The
//! per-child fits stay shares per bin, as the paper's scoreboard reads them.
//!
//! Where a node's children have several candidates each, the search runs from three
//! starts and keeps the likeliest end: the paper's greedy answer; the same answer with
//! hard EM made robust, each delay density learned again from the three quarters of
//! its delays that fit it best; and one from soft EM over the per-link densities, which
//! weighs every candidate and does not commit early. Where the end kept of those makes
//! counts of children vary more than their means need, a fourth follows
//! ([`super::NestOptions::pinned_start`]), the pinned start: soft EM's
//! answer with each parent's shares of each kind of child balanced towards the mean
//! of its caller's parents (Sinkhorn's scaling), so that no parent draws the children
//! of its neighbours, settled by robust hard EM with each kind's count of children
//! pinned near its mean (nine tenths of the distribution on the two counts next to
//! it) and, before each round's search, the children of each kind placed again at
//! once by a least-cost assignment to their parents' first, second and third places
//! for that kind (`by_kind`, `assign`). At saturation hard EM learns counts from its
//! own piles and keeps them (the 80-client shop: 0.0% of requests exactly right, 64.6%
//! from the truth); pinned, it cannot pile up or starve parents, and moves of whole
//! kinds reach what moves of one or two children cannot (53.0% at a million messages).
//! It is tried only where it could win: where the kept end's counts, scored under the
//! narrowest distributions their means allow, would be likelier by more than
//! [`REPLACE_MARGIN`] per child (`Assignment::count_narrowing_bound`: roughly the most
//! a pinned end's counts can gain); at light load the kept end's counts are as narrow
//! as the truth's and it costs nothing. Its end replaces the kept one only where
//! likelier by [`PINNED_MARGIN`] per child as a whole and by [`REPLACE_MARGIN`] in its
//! counts alone, both under models learned again without pins: where a node's counts
//! do vary widely
//! (penalty-breaker's parents make zero, two or three calls), the pinned end still won
//! as a whole on some seeds, by fitting its delays and events to its own assignment
//! (at ×4, seed 11, 23.3% of requests exact against 41.9%; at ×8, seeds 12 and 13, 58%
//! of instances in false patterns against 5%), but never in its counts, which pins
//! that do not fit make less likely (−0.12 to +0.015 nats per child, against +0.31 to
//! +0.38 on the saturated shops). Where the pinned end is not kept and parents make
//! at most one call of each kind on average, one more start follows: each child given
//! to the open parent that answered first after it returned ([`StartKind::Returns`]),
//! which reads a proxy whose FIFO queue makes every delay since arrival look alike
//! (the 4-worker gRPC proxy at 32 streams: 0.0% of requests exact, 77.0% from it).
//! Then, where some kind of child is made about once per parent, the start ordered by
//! arrivals ([`StartKind::Arrivals`]): each child of such a kind given to the parent
//! whose place among the node's arrivals is nearest its own among the calls out of its
//! kind, settled with one more factor per link, the offset between those places
//! (`Assignment::ranks`). A queue that serves first in, first out keeps them in step
//! however long its wait, even where a saturated proxy passes answers on so late that
//! the order of returns says little (the 16-worker gRPC proxy at 64 streams: 0.0% of
//! requests exact from every other start, 26.7% from this).
//! At high parallelism most
//! of the greedy answer's links are wrong, and hard EM, learning from them, keeps
//! densities broad enough to hold them (multi-tier at ×4: the parents given two AUTH
//! calls, where each makes one or none, grew from 405 to 558 over the rounds);
//! learning from the delays that fit best lets the densities sharpen towards the true
//! ones. Robust learning also cuts the true tails of broad delays, so its end must be
//! clearly likelier under a model learned from all delays. The greedy start can also
//! give a whole kind of call to the wrong requests, and hard EM, learning from that,
//! keeps it so (multi-tier at ×4: every AUTH call); elsewhere it ends as well or
//! better, so the soft start's end must be clearly likelier to replace it. The ends
//! are compared with each parent's calls ordered given its set of children: the chain
//! the search uses also says how many calls a parent makes, which the set already
//! said, and that second count favours an end that piles children onto a few parents.
//!
//! Where the trace lost calls into a node, a child may also have no parent: its
//! parent's call was lost. That is scored as a density in time too, the share of calls
//! lost times the rate at which children of its kind leave, so a child whose every
//! candidate fits worse than chance stays a root rather than joining another request.
//!
//! Every child is an action of exactly one parent (or, an orphan, scored by one
//! density instead) and every parent answers once, so every assignment is scored by
//! the same number of factors. A sequence density seen
//! few times is shrunk towards one pooled over callers and kinds of event, so hard EM
//! cannot fit it to its own first guess. From each start, the
//! search moves single children, swaps the parents of two children of one kind, and
//! exchanges the whole sets of children of two parents, while the log-likelihood
//! rises; then it re-learns the model from the new assignment and searches again
//! (hard EM) until a round changes almost nothing: first with the kinds of children
//! counted independently, then with whole sets. Every step rescores only the two
//! parents it touches, so the work stays linear in the trace.
//!
//! A round looks at every child again, and a start needs up to twelve, so on a node
//! with many children three starts from scratch were the cost of the default choice
//! at real concurrency. There the starts are settled and compared on the first
//! [`LEARN_WINDOW`] children only, and the end kept is carried over the rest by the
//! same rounds, its window's children where they settled and the others where its
//! start put them. Where an instant with no call open across it leaves a window's
//! worth of children on each side, the children after it settle from the kept end's
//! start as a node of their own, on the other core.
//!
//! The rooms: `calls` holds one node's calls as arrays and walks a parent's sequence
//! of actions; `model` learns the densities, the chain and the sets from an
//! assignment; `likelihood` scores a parent's children under them; `families`
//! keeps each parent's children as threaded lists; `search` improves an assignment
//! step by step; `by_kind` places a whole kind of children again at once, by
//! `assign`'s least-cost assignment; `starts` makes the starts, settles each by hard
//! EM and carries an end over a larger scope; `split` finds where a node's calls fall
//! in two. This file chooses among the ends.

mod apart;
mod assign;
mod by_kind;
mod calls;
mod families;
mod likelihood;
mod model;
mod search;
mod split;
mod starts;
#[cfg(test)]
pub(super) mod tests;

use super::call_pairs::CallPair;
use super::candidates::Candidates;
use super::parents::NO_PARENT;
use super::scoreboard::Bins;
use crate::trace::Nanos;
use apart::PartView;
use calls::NodeCalls;
use search::Assignment;
use search::Scope;
use split::{after_cut, middle_cut, start_after_cut, Cut};
use starts::{arrivals_start, extend, returns_start, settle, soft_start, Learning};

pub use apart::{Part, Sharing, Window, Work, Worked};
pub use starts::async_start;

/// Mean candidates per child from which the robust and soft starts are tried too:
/// below it the greedy start's end was always kept, at twice the time (docs/tuning.md).
const SOFT_FROM_PARALLELISM: f64 = 3.0;
/// Calls out of one node on which the starts are settled and compared, when it
/// has more: the end kept is then carried over the rest by the same rounds of hard EM
/// (`starts::extend`), so that only one start's rounds cost the whole trace.
/// Above every node of the dev traces and of the accuracy studies but top-N's
/// 200 k-message trace, whose answers are those of settling every start on everything;
/// a quarter of the 40-client shop's app node in 60 s. (At twice this, the 40-client
/// shop's 1 M messages took 5.8 s against 4.7 s, to as many right answers.)
pub const LEARN_WINDOW: usize = 1 << 14;
/// In a later segment of a trace, where the start is known ([`NodeSettings::start`]),
/// the window only gives the first model something settled to learn from, and a
/// quarter of it does: on the 6.6 GB capture set in six segments, 17.6% of requests
/// exact as whole (17.9% with the full window), on the 40-client shop 73.1% either
/// way, and the 10.8 GB set took 137 s instead of 142 to 150 s.
const CARRIED_WINDOW_DIVISOR: usize = 4;
/// ln-likelihood per child by which another start's end must beat the greedy start's
/// to replace it: above the noise between two good ends (docs/tuning.md).
const REPLACE_MARGIN: f64 = 0.05;

/// ln-likelihood per child by which the pinned start's end must beat the end kept of
/// the others to replace it (and by [`REPLACE_MARGIN`] in its counts of children alone):
/// pinned counts are a strong guess, wrong where a node's counts vary, and there its
/// end still won as a whole by up to 0.127 nats per child (penalty-breaker at ×4, whose
/// parents make zero, two or three calls), though in its counts by at most 0.030; where
/// the pins are right it won by 0.10 (the 160-client shop) to 0.86 (the 80-client
/// shop), in its counts by 0.31 to 0.38 (docs/tuning.md).
const PINNED_MARGIN: f64 = 0.1;

// Every "none" of the search's indexes is u32::MAX, named here for what it stands for.
/// "No link": a child without a parent.
const NO_LINK: u32 = u32::MAX;
/// "No child": the end of a parent's list of children, or no child in an edit of one.
const NO_CHILD: u32 = u32::MAX;
/// "No density": a key the model learned no density for.
const NO_DENSITY: u32 = u32::MAX;
/// The stamp of a gain never computed: the clock starts at 0 and counts up.
const STALE: u32 = u32::MAX;

/// What the trace says of a call pair (by its index) beyond its times.
#[derive(Clone, Copy)]
pub struct CallFacts<'a> {
    /// The operation it asked for (`OperationId::NONE` where the protocol names none):
    /// a parent's kind is its caller and operation, so that a gateway's GetItem and
    /// PlaceOrder learn their own calls.
    pub operation: &'a (dyn Fn(u32) -> crate::trace::OperationId + Sync),
    /// A key of the connection it travelled on, the same for every call on it
    /// ([`NO_CONNECTION`] where the input does not say): the model learns how the
    /// connections of a node's calls out follow those of its calls in.
    pub connection: &'a (dyn Fn(u32) -> u64 + Sync),
}

/// The connection key of a call whose connection is not known.
pub const NO_CONNECTION: u64 = u64::MAX;

/// The joint choice for one node.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct JointChoice {
    /// Per child, the index into `incoming` of its parent, or [`NO_PARENT`].
    pub parents: Vec<u32>,
    /// Per child, the probability of its choice against every alternative the search
    /// weighs (see [`search::Assignment::confidence`]); 1 for a child with one
    /// candidate or none.
    pub confidence: Vec<f32>,
    /// Per parent (index into `incoming`), the probability that no child it was not
    /// given is its own: each child's share at it, among the alternatives weighed for
    /// the child's confidence, taken away. A request left with no call out at a node
    /// whose requests usually call on is no surer than the calls that could be its own.
    pub complete: Vec<f32>,
    /// Per child, 1 − e^(−margin), the margin being the log-likelihood the assignment
    /// would lose if the child moved alone to its best other candidate: the lead of its
    /// parent over the next, by which an asynchronous link is kept.
    pub lead: Vec<f32>,
    /// For the child named by `explain`: each candidate (index into `incoming`) with the
    /// log-likelihood the final assignment would lose if the child moved there (0 for
    /// its parent), and what the connection affinity says of it (ln odds, where the
    /// node learned one).
    pub explained: Vec<(u32, f64, Option<f64>)>,
    /// Whether the final model learned a connection affinity: the node's calls out
    /// follow the connection of the call they serve.
    pub connection_affinity: bool,
    /// Whether the final model learned how the connections of a parent's calls out
    /// follow each other: each request's calls go out on its worker's own connections.
    pub sibling_affinity: bool,
    /// Where children have several candidates each and the starts were compared on a
    /// full window (or one was carried), the start whose end was kept: what a later
    /// segment of the same trace settles alone ([`NodeSettings::start`]).
    pub kept: Option<StartKind>,
}

/// The start of the joint search whose end a node kept, where its children have
/// several candidates each and the starts were compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StartKind {
    /// The paper's greedy answer, settled by hard EM.
    Greedy,
    /// The greedy answer settled by robust hard EM.
    Robust,
    /// Soft EM's answer over the per-link densities, settled by hard EM.
    Soft,
    /// Soft EM's answer, balanced per parent, settled by robust hard EM with counts
    /// pinned, whole kinds placed at once and the events actions follow learned.
    Pinned,
    /// Each child given to the open parent that answered first after it returned
    /// ([`returns_start`]), settled by hard EM.
    Returns,
    /// Each child given to the parent whose place among arrivals is nearest its own
    /// among calls out ([`arrivals_start`]), settled by hard EM with those places
    /// weighed.
    Arrivals,
}

impl StartKind {
    /// How hard EM learns as it settles this start.
    fn learning(self) -> Learning {
        match self {
            StartKind::Greedy | StartKind::Soft | StartKind::Returns => Learning::PLAIN,
            StartKind::Robust => Learning::ROBUST,
            StartKind::Pinned => Learning::PINNED,
            StartKind::Arrivals => Learning::RANKED,
        }
    }
}

/// Where the search starts: per child, an index into `incoming` (a candidate of the
/// child's) or [`NO_PARENT`].
pub enum Start {
    /// The paper's greedy choice; where children have several candidates each, the
    /// robust start from it and soft EM's answer join it, and the likelier end is kept.
    Greedy(Vec<u32>),
    /// Only this assignment (for evaluation: the true parents).
    Given(Vec<u32>),
}

/// Improves `start` for the children of one node. `incoming` and `outgoing` are sorted
/// as for the candidates.
///
/// `facts` tells each call pair's operation and connection (see [`CallFacts`]);
/// `sharing`, where the parts that can run apart run (the robust start on the learning
/// window, the second half of a node cut in two).
#[allow(clippy::too_many_arguments)]
pub fn choose_jointly(
    pairs: &[CallPair],
    incoming: &[u32],
    outgoing: &[u32],
    candidates: &Candidates,
    scale: NodeSettings,
    start: Start,
    (explain, sharing): (Option<usize>, Sharing<'_>),
    facts: CallFacts<'_>,
) -> JointChoice {
    let mut calls = NodeCalls::new(pairs, incoming, outgoing, candidates, scale, facts);
    // The robust and soft starts run where children have several candidates each.
    // Parallelism among the open calls: answered ones, with asynchronous children, are
    // far more numerous than the parents they turn out to be.
    let open: Vec<usize> = (0..outgoing.len())
        .map(|k| {
            candidates
                .of(k)
                .iter()
                .filter(|&&p| !calls.answered(k as u32, p))
                .count()
        })
        .collect();
    let (links, with_candidates) = open
        .iter()
        .filter(|&&n| n > 0)
        .fold((0, 0), |(links, children), &n| (links + n, children + 1));
    let parallelism = links as f64 / f64::from(with_candidates.max(1));
    calls.set_dense(parallelism >= SOFT_FROM_PARALLELISM);
    let calls = calls;
    let all = Scope::all(candidates, incoming.len());
    let initial = match start {
        Start::Greedy(initial) => initial,
        Start::Given(given) => {
            let state = settle(&calls, candidates, given, Learning::PLAIN, all);
            return chosen(&state, candidates, explain);
        }
    };
    let node = Node {
        pairs,
        incoming,
        outgoing,
        candidates,
        scale,
        facts,
        sharing,
    };
    if !calls.dense {
        // One start, settled in two halves on two cores where a quiet instant leaves a
        // window's worth of children on each side.
        let Some(cut) = middle_cut(candidates, scale.learn_window) else {
            let state = settle(&calls, candidates, initial, Learning::PLAIN, all);
            return chosen(&state, candidates, explain);
        };
        let head = Scope::before(candidates, cut);
        let first = |explain| {
            let state = settle(&calls, candidates, initial.clone(), Learning::PLAIN, head);
            chosen(&state, candidates, explain)
        };
        return node.in_two(cut, first, (&initial, Learning::PLAIN, false), explain);
    }
    let learn_window = match scale.start {
        Some(_) => scale.learn_window / CARRIED_WINDOW_DIVISOR,
        None => scale.learn_window,
    };
    let window = Scope::window(candidates, incoming.len(), learn_window);
    let (mut state, kept, kept_start) = match scale.start {
        Some(kind) => one_start((&calls, candidates), kind, (&open, initial), window),
        None => best_start(
            (&calls, candidates, &node),
            (&open, initial),
            window,
            scale.pinned_start,
        ),
    };
    let learning = kept.learning();
    // (The ends not kept are gone by now: carrying the kept one over every child is
    // the peak of memory.)
    // A start is handed on only where it won on a full window: compared on a few
    // hundred children, the winner is chance (the multi-tier trace in segments of 3,000
    // lines lost a point of exact requests carrying it).
    let kept = (scale.start.is_some() || window != all).then_some(kept);
    if window == all {
        state.remember_gains();
        return JointChoice {
            kept,
            ..chosen(&state, candidates, explain)
        };
    }
    let carried = |mut state: Assignment<'_>, scope: Scope, explain: Option<usize>| {
        extend(&mut state, learning, scope);
        chosen(&settled(state, learning), candidates, explain)
    };
    let Some(cut) = middle_cut(candidates, window.children as usize) else {
        return JointChoice {
            kept,
            ..carried(state, all, explain)
        };
    };
    // The children before the cut carry the kept end over, those after it settle from
    // the kept end's start: both halves are as large as the trace allows and no step
    // of one reaches the other.
    let head = Scope::before(candidates, cut);
    let first = |explain| carried(state, head, explain);
    JointChoice {
        kept,
        ..node.in_two(cut, first, (&kept_start, learning, true), explain)
    }
}

/// The three starts settled on `window` side by side, then the pinned start where it
/// could win and `pinned_start` lets it, and where its end is not kept, the start
/// ordered by returns; and the end kept with its kind and its start: the greedy
/// answer's end, or another's where clearly likelier.
/// `open` counts, per child, its candidates that enclose it; `initial` is the greedy
/// answer. Where `node` shares its work with another process, the robust start is
/// settled there, and only its likelihood comes back: its end is settled here again
/// only where it is kept.
fn best_start<'a>(
    (calls, candidates, node): (&'a NodeCalls<'a>, &'a Candidates, &Node<'_>),
    (open, initial): (&[usize], Vec<u32>),
    window: Scope,
    pinned_start: bool,
) -> (Assignment<'a>, StartKind, Vec<u32>) {
    let robust_end = || {
        relearned(settle(
            calls,
            candidates,
            initial.clone(),
            Learning::ROBUST,
            window,
        ))
    };
    let plain_end = || {
        relearned(settle(
            calls,
            candidates,
            initial.clone(),
            Learning::PLAIN,
            window,
        ))
    };
    let sent = match node.sharing {
        Sharing::Elsewhere(send) => {
            let start = Work::robust_start(&node.whole(), initial.clone(), calls.dense, window);
            Some(send(start))
        }
        Sharing::Here => None,
    };
    let away = sent.is_some();
    // The starts are independent: on two cores, a trace whose time goes to one node
    // takes the time of two starts instead of three.
    let ((robust, plain), soft) = rayon::join(
        || match away {
            true => (None, plain_end()),
            false => {
                let (robust, plain) = rayon::join(robust_end, plain_end);
                (Some(robust), plain)
            }
        },
        || {
            let soft = soft_start(calls, candidates, open, &initial, false);
            (soft != initial).then(|| {
                let mut end = settle(calls, candidates, soft.clone(), Learning::PLAIN, window);
                end.forget_gains();
                (end, soft)
            })
        },
    );
    // The greedy answer's end, or the robust start's from it if clearly likelier, both
    // scored under models learned again from all their delays; on a node larger than
    // the window, the ends on the window.
    let margin = REPLACE_MARGIN * f64::from(window.children);
    let robust_likelihood = match (&robust, sent) {
        (Some(end), _) => end.sequence_likelihood(),
        (None, Some(answer)) => answer().likelihood(),
        (None, None) => unreachable!("the robust start is settled here unless sent"),
    };
    let gain = robust_likelihood - plain.sequence_likelihood();
    let (state, kept) = if gain > margin {
        drop(plain);
        (robust.unwrap_or_else(robust_end), StartKind::Robust)
    } else {
        drop(robust);
        (plain, StartKind::Greedy)
    };
    let (mut state, mut kept, mut start) = (state, kept, initial);
    if let Some((other, soft)) = soft {
        let gain = other.sequence_likelihood() - state.sequence_likelihood();
        if gain > margin {
            (state, kept, start) = (other, StartKind::Soft, soft);
        }
    }
    // The pinned end, where clearly likelier as a whole and in its counts, both ends
    // scored under models learned again without pins, with whole sets and with the
    // events actions follow: so a node whose counts do vary keeps an end that lets
    // them. Settled after the others, not beside them: only their end says whether it
    // could win, and at light load it cannot (the 10- and 40-client shops at a
    // million messages: no node tries it).
    let [pinning, narrowing] =
        [PINNED_MARGIN, REPLACE_MARGIN].map(|m| m * f64::from(window.children));
    if !pinned_start || state.count_narrowing_bound() <= narrowing {
        return (state, kept, start);
    }
    let balanced = soft_start(calls, candidates, open, &start, true);
    let pinned = relearned(settle(
        calls,
        candidates,
        balanced.clone(),
        Learning::PINNED,
        window,
    ));
    state.follows = true;
    let state = relearned(state);
    let gain = pinned.sequence_likelihood() - state.sequence_likelihood();
    let counts_gain = pinned.count_likelihood() - state.count_likelihood();
    // Where parents make at most one call of each kind on average, the starts that
    // give each parent one child of a kind are tried too: penalty-breaker's make none,
    // two or three, and there the start ordered by returns won wrongly (×4, seeds 13
    // and 14: 28.9% of instances in false patterns against 2.7% and 2.2%).
    let one_each = calls.at_most_one_of_each_kind();
    let ranked = calls.ranked_kind.iter().any(|&r| r);
    if gain > pinning && counts_gain > narrowing {
        let kept = (pinned, StartKind::Pinned, balanced);
        if !one_each || !ranked {
            return kept;
        }
        return by_arrivals((calls, candidates), kept, window);
    }
    let mut state = state;
    state.follows = false;
    let state = relearned(state);
    if !one_each {
        return (state, kept, start);
    }
    // Where a node answers as soon as its last call returns (a proxy, a gateway), the
    // order of returns and answers says which parent each child served even where a
    // queue's wait makes every delay since arrival look alike: the 4-worker gRPC proxy
    // at 32 streams, whose calls waited 56 ms in its queue, had 0.0% of requests exact
    // from the other starts and the pinned one, 77.0% from this, whose end was likelier
    // by 1.2 nats per child (79.4% from the truth). Tried only where the pinned end was
    // not kept: on the 80-client shop this end beat the piled one by 0.08 nats per
    // child and, kept first, left the pinned end (53.9% exact) out for itself (38.8%).
    let returns = returns_start(calls, candidates, &start);
    let end = relearned(settle(
        calls,
        candidates,
        returns.clone(),
        Learning::PLAIN,
        window,
    ));
    let kept = if end.sequence_likelihood() - state.sequence_likelihood() > margin {
        (end, StartKind::Returns, returns)
    } else {
        (state, kept, start)
    };
    if !ranked {
        return kept;
    }
    by_arrivals((calls, candidates), kept, window)
}

/// The start ordered by arrivals ([`arrivals_start`]) settled on `window`, and its end
/// kept where likelier by [`REPLACE_MARGIN`] per child than `kept`'s, both scored with
/// the places weighed; `kept` otherwise, as it was.
fn by_arrivals<'a>(
    (calls, candidates): (&'a NodeCalls<'a>, &'a Candidates),
    (mut state, kept, start): (Assignment<'a>, StartKind, Vec<u32>),
    window: Scope,
) -> (Assignment<'a>, StartKind, Vec<u32>) {
    let arrivals = arrivals_start(calls, candidates, &start);
    let mut ranked = settle(
        calls,
        candidates,
        arrivals.clone(),
        Learning::RANKED,
        window,
    );
    ranked.follows = state.follows;
    let ranked = relearned(ranked);
    // `state` was learned again already; the offsets are all its model lacks, and the
    // rest of it does not read them, so learning them alone is learning it again.
    state.ranks = true;
    state.rank_log = state.learn_ranks();
    if ranked.sequence_likelihood() - state.sequence_likelihood()
        > REPLACE_MARGIN * f64::from(window.children)
    {
        return (ranked, StartKind::Arrivals, arrivals);
    }
    state.ranks = false;
    state.rank_log = Vec::new();
    (state, kept, start)
}

/// The one start `kind` settled on `window`, as [`best_start`] settles it: the start
/// a previous segment of the same trace kept for this node. Comparing the starts on
/// every segment was each segment's cost at real concurrency, and which start wins
/// is a property of the node's calls, not of the hour (on the 6.6 GB capture set, the
/// same on 23 of 24 node-segments). A window is still settled first: settling the
/// start on every child at once, without a window's model to begin from, lost 3
/// points of exact requests there.
fn one_start<'a>(
    (calls, candidates): (&'a NodeCalls<'a>, &'a Candidates),
    kind: StartKind,
    (open, initial): (&[usize], Vec<u32>),
    window: Scope,
) -> (Assignment<'a>, StartKind, Vec<u32>) {
    let start = match kind {
        StartKind::Soft => soft_start(calls, candidates, open, &initial, false),
        StartKind::Pinned => soft_start(calls, candidates, open, &initial, true),
        StartKind::Returns => returns_start(calls, candidates, &initial),
        StartKind::Arrivals => arrivals_start(calls, candidates, &initial),
        StartKind::Greedy | StartKind::Robust => initial,
    };
    let mut end = settle(calls, candidates, start.clone(), kind.learning(), window);
    end = match kind {
        StartKind::Soft => {
            end.forget_gains();
            end
        }
        StartKind::Greedy
        | StartKind::Robust
        | StartKind::Pinned
        | StartKind::Returns
        | StartKind::Arrivals => relearned(end),
    };
    (end, kind, start)
}

/// One node's calls and what the joint choice reads of them, for settling part of them
/// as a node of their own.
struct Node<'a> {
    pairs: &'a [CallPair],
    incoming: &'a [u32],
    outgoing: &'a [u32],
    candidates: &'a Candidates,
    scale: NodeSettings,
    facts: CallFacts<'a>,
    sharing: Sharing<'a>,
}

impl Node<'_> {
    /// The whole node, as a part of itself.
    fn whole(&self) -> PartView<'_> {
        PartView {
            pairs: self.pairs,
            incoming: self.incoming,
            outgoing: self.outgoing,
            candidates: self.candidates,
            settings: self.scale,
            facts: self.facts,
        }
    }

    /// The choice for the children before `cut` by `first` (given the child to explain
    /// among them), and for those after it settled at the same time as a node of their
    /// own, under a model of their own, from `start` (with the start's robustness and
    /// whether the node is dense): side by side here, or sent to another worker while
    /// this one settles the first (but for a child to explain among them).
    fn in_two(
        &self,
        cut: Cut,
        first: impl FnOnce(Option<usize>) -> JointChoice + Send,
        (start, learning, dense): (&[u32], Learning, bool),
        explain: Option<usize>,
    ) -> JointChoice {
        let rest = after_cut(self.candidates, cut);
        let after = PartView {
            pairs: self.pairs,
            incoming: &self.incoming[cut.parents as usize..],
            outgoing: &self.outgoing[cut.children..],
            candidates: &rest,
            settings: self.scale,
            facts: self.facts,
        };
        let start = start_after_cut(start, cut);
        let explain_after = explain.and_then(|k| k.checked_sub(cut.children));
        let explain_before = explain.filter(|&k| k < cut.children);
        let (mut before, after) = match self.sharing {
            Sharing::Elsewhere(send) if explain_after.is_none() => {
                let answer = send(Work::SecondHalf(after.owned(start, (learning, dense))));
                let before = first(explain_before);
                (before, answer().choice())
            }
            _ => rayon::join(
                || first(explain_before),
                || after.settle(start, (learning, dense), explain_after),
            ),
        };
        let shifted = |p: u32| if p == NO_PARENT { p } else { p + cut.parents };
        before
            .parents
            .extend(after.parents.into_iter().map(shifted));
        before.confidence.extend(after.confidence);
        before.complete.resize(cut.parents as usize, 1.0);
        before.complete.extend(after.complete);
        before.lead.extend(after.lead);
        before.connection_affinity |= after.connection_affinity;
        before.sibling_affinity |= after.sibling_affinity;
        before.explained.extend(
            after
                .explained
                .into_iter()
                .map(|(p, loss, connection)| (shifted(p), loss, connection)),
        );
        before
    }
}

/// A settled end ready to choose from: where it was robust, its model learned again
/// from all its delays, as the ends are compared, with room for gains again.
fn settled(state: Assignment, learning: Learning) -> Assignment {
    if learning == Learning::PLAIN {
        return state;
    }
    let mut state = relearned(state);
    state.remember_gains();
    state
}

/// `state` with its model learned again from all its delays and whole sets.
fn relearned(mut state: Assignment) -> Assignment {
    state.forget_gains();
    state.robust = false;
    state.pinned = false;
    state.learn();
    state.learn_sets();
    state
}

/// The parents the children in `state`'s scope ended with, their confidences, and the
/// explanation asked for.
fn chosen(state: &Assignment, candidates: &Candidates, explain: Option<usize>) -> JointChoice {
    let search::Confidence {
        choice: confidence,
        lead,
        complete,
    } = state.confidence();
    let explained = explain.map_or_else(Vec::new, |k| {
        let k = k as u32;
        let current = state.chosen[k as usize];
        state
            .row(k)
            .map(|link| {
                let loss = if link == current {
                    0.0
                } else {
                    -state.move_gain(k, link)
                };
                let parent = candidates.parents[link as usize];
                let connection = state
                    .affinity
                    .as_ref()
                    .map(|a| a.log_odds(state.calls, k, parent, link == current));
                (parent, loss, connection)
            })
            .collect()
    });
    let parents = state.chosen[..state.scope.children as usize]
        .iter()
        .map(|&link| {
            if link == NO_LINK {
                NO_PARENT
            } else {
                candidates.parents[link as usize]
            }
        })
        .collect();
    JointChoice {
        parents,
        confidence,
        complete,
        lead,
        explained,
        connection_affinity: state.affinity.is_some(),
        sibling_affinity: state.siblings.is_some(),
        kept: None,
    }
}

/// What the joint choice needs to know of one node besides its calls: how delays are
/// binned and how early a child may seem, how many calls the trace lost, whether
/// children may be asynchronous, and how thoroughly the search weighs again.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NodeSettings {
    /// The delay bins.
    pub bins: Bins,
    /// The trace's tick (see [`super::call_pairs::tick`]).
    pub tick: Nanos,
    /// How early a child may seem to start (see [`super::candidates::find_candidates`]).
    pub skew_window: Nanos,
    /// Share of the calls into the node that the trace lost a message of.
    pub lost: f64,
    /// Whether a parent may answer before a child returns (see
    /// [`super::NestOptions::async_window`]): then every parent's sequence goes on past
    /// its answer, to its calls out after it and an end, and says of each call out
    /// whether it was waited for.
    pub async_children: bool,
    /// How a child looked at again is weighed.
    pub reweighing: Reweighing,
    /// Children on which the starts are settled before the kept end is carried over
    /// the rest ([`LEARN_WINDOW`] by default; `usize::MAX`, all of them).
    pub learn_window: usize,
    /// Where children have several candidates each, settle this start alone instead
    /// of comparing the three, on a quarter of the window: the one a previous segment
    /// of the same trace kept.
    pub start: Option<StartKind>,
    /// Whether the pinned start may be tried ([`super::NestOptions::pinned_start`]).
    pub pinned_start: bool,
}

/// How the search weighs a child it looks at again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Reweighing {
    /// Only the steps a change since its last look could alter, and each pair of
    /// parents' exchange and split once per change of either.
    #[default]
    OnlyWhatChanged,
    /// Every step, every time: the same choices, slower; a check of the other.
    Everything,
}
