//! The critical path of one request: the chain of work it waited for. Walking back from
//! each call's answer, the call out that answered last before that point is what the
//! node was waiting for (with calls made in parallel, the one that finished last); the
//! time between is the node's own; then on from that call's start. Each call's own time
//! on the path, each edge's time in transit on it (the call's rest of request inside the
//! callee, its answer's after), and how far each could shrink before another call
//! becomes the one waited for (its slack: a parallel sibling that ended a little earlier
//! takes over) give the what-if: the request's latency with a node's own time or an
//! edge's transit a share shorter. Owns the walk and the savings; not the patterns
//! ([`super::patterns`] sums them per position) nor their wording.

use crate::trace::Nanos;

/// What the walk needs of one call of a request, in the request's pre-order.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// From the call's arrival to its answer, at the callee.
    pub latency: Nanos,
    /// When it left its caller, after the caller's own call arrived (0 at the root).
    pub start: Nanos,
    /// Its request's time between first and last byte (inside `latency`).
    pub request: Nanos,
    /// Its answer's time between first and last byte (after `latency`).
    pub reply: Nanos,
}

/// One call's part in its request's critical path.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OnPath {
    /// Its own time on the path.
    pub own: Nanos,
    /// Its edge's time in transit on the path (request and answer).
    pub transit: Nanos,
    /// How much it can shrink before the path goes another way (`Nanos::MAX` at the
    /// root, which nothing runs beside).
    pub slack: Nanos,
}

/// The shares of a node's own time or an edge's transit the what-if takes away.
pub const WHAT_IF_SHARES: [f64; 2] = [0.1, 0.5];

impl OnPath {
    /// The request's latency saved were its own time (`transit`: false) or its edge's
    /// transit (true) `share` shorter: that much of its time on the path, up to its slack.
    pub fn saving(&self, transit: bool, share: f64) -> f64 {
        let on_path = if transit { self.transit } else { self.own };
        (share * on_path as f64).min(self.slack as f64)
    }
}

/// Walks one request's critical path. `calls[i]` is position `i`'s timing and
/// `children(i)` its children's positions (pre-order: a child after its parent); the
/// result, per position, is written into `out`.
pub fn walk<'c>(calls: &[Timing], children: impl Fn(usize) -> &'c [u32], out: &mut Vec<OnPath>) {
    out.clear();
    out.resize(calls.len(), OnPath::default());
    if calls.is_empty() {
        return;
    }
    // (position, the part of its latency on the path, its slack)
    let mut stack = vec![(0usize, calls[0].latency, Nanos::MAX)];
    let mut open: Vec<(u32, Nanos, Nanos)> = Vec::new();
    while let Some((at, window, slack)) = stack.pop() {
        let call = calls[at];
        out[at].slack = slack;
        // The children's spans in this call's time, clamped into its window.
        open.clear();
        open.extend(children(at).iter().map(|&c| {
            let child = calls[c as usize];
            let from = child.start.clamp(0, window);
            let to = (child.start + child.latency + child.reply).clamp(from, window);
            (c, from, to)
        }));
        let mut t = window;
        loop {
            // The call out that answered last by `t`: what the node waited for (one still
            // running at `t` was not waited for yet: the node was working beside it).
            let waited = open
                .iter()
                .enumerate()
                .filter(|(_, &(_, from, to))| to <= t && from < t)
                .max_by_key(|(_, &(_, from, to))| (to, from))
                .map(|(k, _)| k);
            let Some(k) = waited else { break };
            let (child, from, end) = open.swap_remove(k);
            out[at].own += t - end;
            // How far it can shrink before a call beside it becomes the last to answer.
            let next = open
                .iter()
                .filter(|&&(_, _, other_to)| other_to <= end)
                .map(|&(_, _, other_to)| other_to)
                .max()
                .unwrap_or(from)
                .max(from);
            let timing = calls[child as usize];
            let answered = from + timing.latency;
            out[child as usize].transit += (end - answered).clamp(0, timing.reply);
            let inside = (end - from).clamp(0, timing.latency);
            stack.push((child as usize, inside, slack.min(end - next)));
            t = from;
        }
        let request = call.request.clamp(0, t);
        out[at].transit += request;
        out[at].own += t - request;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(latency: Nanos, start: Nanos) -> Timing {
        Timing {
            latency,
            start,
            ..Timing::default()
        }
    }

    #[test]
    fn of_two_calls_in_parallel_the_path_waits_for_the_one_that_answered_last() {
        // A (100) calls B at 10 for 50 and C at 12 for 70; answers 18 after C.
        let calls = [timing(100, 0), timing(50, 10), timing(70, 12)];
        let kids: [&[u32]; 3] = [&[1, 2], &[], &[]];
        let mut out = Vec::new();
        walk(&calls, |i| kids[i], &mut out);
        assert_eq!((out[0].own, out[2].own, out[1].own), (30, 70, 0));
        // C can shrink by 22 before B (ending at 60) is the last to answer.
        assert_eq!(out[2].slack, 22);
        assert_eq!(out[2].saving(false, 0.1), 7.0);
        assert_eq!(out[2].saving(false, 0.5), 22.0);
        assert_eq!(out[0].saving(false, 0.5), 15.0);
    }

    #[test]
    fn an_answer_held_in_transit_is_on_the_path_as_its_edges() {
        // web (40) calls app at 1; app answers after 2, its answer's last byte 35 later.
        let calls = [
            timing(40, 0),
            Timing {
                reply: 35,
                ..timing(2, 1)
            },
        ];
        let kids: [&[u32]; 2] = [&[1], &[]];
        let mut out = Vec::new();
        walk(&calls, |i| kids[i], &mut out);
        assert_eq!(out[1].transit, 35);
        assert_eq!((out[0].own, out[1].own), (3, 2));
        assert_eq!(out[1].saving(true, 0.5), 17.5);
    }

    #[test]
    fn calls_one_after_another_are_all_on_the_path() {
        let calls = [timing(100, 0), timing(20, 10), timing(30, 40)];
        let kids: [&[u32]; 3] = [&[1, 2], &[], &[]];
        let mut out = Vec::new();
        walk(&calls, |i| kids[i], &mut out);
        assert_eq!((out[0].own, out[1].own, out[2].own), (50, 20, 30));
        assert_eq!((out[1].slack, out[2].slack), (20, 30));
    }
}
