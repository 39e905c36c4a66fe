//! Step 1 of the nesting algorithm (paper §5.1.1.1, FindCallPairs): matching each call
//! with its return. Owns the pairing rule and the count of what could not be paired;
//! does not look at nesting.

use crate::trace::{CallId, Kind, Message, Nanos, NodeId, Trace, Truth};

/// One call and its matching return, with the four times at which they were seen.
///
/// Each time falls back to the other end of its message when that end was not
/// observed, so the caller's and the callee's views are always defined; when both ends
/// were seen, each view is on that node's own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallPair {
    /// Who called.
    pub caller: NodeId,
    /// Who was called.
    pub callee: NodeId,
    /// The id that matched call and return.
    pub call_id: CallId,
    /// Call leaves the caller (caller's clock).
    pub caller_send: Nanos,
    /// Call reaches the callee (callee's clock).
    pub callee_recv: Nanos,
    /// Return leaves the callee (callee's clock).
    pub callee_return: Nanos,
    /// Return reaches the caller (caller's clock).
    pub caller_return: Nanos,
    /// Ground-truth tag of the call message, for evaluation only.
    pub truth: Truth,
}

impl CallPair {
    /// Time spent at the callee, children included, on the callee's clock.
    pub fn latency(&self) -> Nanos {
        self.callee_return - self.callee_recv
    }
}

/// What pairing set aside.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PairingStats {
    /// Calls whose return never appeared (dropped, timed out, or cut by the trace end).
    pub unmatched_calls: u64,
    /// Returns with no earlier open call (dropped call, or trace started mid-call).
    pub unmatched_returns: u64,
    /// Free-form (`MSG_*`) messages, which have no place in call nesting.
    pub free_messages: u64,
}

/// Pairs calls with returns.
///
/// Returns are matched through the key (caller, callee, call id): each return takes the
/// earliest still-open call with its key that started no later than it, so missing or
/// reused ids degrade to the paper's "earliest unmatched call" rule. Times compared are
/// the caller's (the same clock for call and return when both were captured there).
/// The pairs come out ordered by `caller_send`, ties in a fixed order.
pub fn find_call_pairs(trace: &Trace) -> (Vec<CallPair>, PairingStats) {
    let mut stats = PairingStats::default();
    // (key, caller-side time, call before return at equal times, message index)
    let mut entries: Vec<(NodeId, NodeId, CallId, Nanos, u8, u32)> = Vec::new();
    for (i, m) in trace.messages.iter().enumerate() {
        match m.kind {
            Kind::Call => {
                entries.push((m.sender, m.receiver, m.call_id, m.at_sender(), 0, i as u32))
            }
            Kind::Return => entries.push((
                m.receiver,
                m.sender,
                m.call_id,
                m.at_receiver(),
                1,
                i as u32,
            )),
            Kind::Free => stats.free_messages += 1,
        }
    }
    entries.sort_unstable();

    let mut pairs = Vec::with_capacity(entries.len() / 2);
    let mut open: Vec<u32> = Vec::new();
    let mut group_start = 0;
    while group_start < entries.len() {
        let key = (
            entries[group_start].0,
            entries[group_start].1,
            entries[group_start].2,
        );
        let mut group_end = group_start;
        open.clear();
        let mut oldest_open = 0;
        while group_end < entries.len()
            && (
                entries[group_end].0,
                entries[group_end].1,
                entries[group_end].2,
            ) == key
        {
            let (.., is_return, index) = entries[group_end];
            if is_return == 0 {
                open.push(index);
            } else if oldest_open < open.len() {
                let call = &trace.messages[open[oldest_open] as usize];
                oldest_open += 1;
                pairs.push(pair(call, &trace.messages[index as usize]));
            } else {
                stats.unmatched_returns += 1;
            }
            group_end += 1;
        }
        stats.unmatched_calls += (open.len() - oldest_open) as u64;
        group_start = group_end;
    }
    pairs.sort_unstable_by_key(|p| (p.caller_send, p.caller, p.callee, p.call_id, p.callee_recv));
    (pairs, stats)
}

fn pair(call: &Message, ret: &Message) -> CallPair {
    CallPair {
        caller: call.sender,
        callee: call.receiver,
        call_id: call.call_id,
        caller_send: call.at_sender(),
        callee_recv: call.at_receiver(),
        callee_return: ret.at_sender(),
        caller_return: ret.at_receiver(),
        truth: call.truth,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{text, TraceBuilder};
    use std::path::Path;

    fn trace(text: &str) -> Trace {
        let mut b = TraceBuilder::new();
        text::read(Path::new("t"), text.as_bytes(), &mut b).unwrap();
        b.finish()
    }

    #[test]
    fn ids_match_calls_with_returns() {
        let t = trace("1 CALL a b x\n2 CALL a b y\n3 RET b a x\n4 RET b a y\n");
        let (pairs, stats) = find_call_pairs(&t);
        assert_eq!(pairs.len(), 2);
        assert_eq!(
            (pairs[0].caller_send, pairs[0].caller_return),
            (1_000_000_000, 3_000_000_000)
        );
        assert_eq!(
            (pairs[1].caller_send, pairs[1].caller_return),
            (2_000_000_000, 4_000_000_000)
        );
        assert_eq!(stats, PairingStats::default());
    }

    #[test]
    fn without_ids_each_return_takes_the_earliest_open_call() {
        let t = trace("1 CALL a b -\n2 CALL a b -\n3 RET b a -\n4 RET b a -\n");
        let (pairs, _) = find_call_pairs(&t);
        let spans: Vec<_> = pairs
            .iter()
            .map(|p| {
                (
                    p.caller_send / 1_000_000_000,
                    p.caller_return / 1_000_000_000,
                )
            })
            .collect();
        assert_eq!(spans, vec![(1, 3), (2, 4)]);
    }

    #[test]
    fn unmatched_calls_returns_and_free_messages_are_counted() {
        let t = trace("1 RET b a q\n2 CALL a b x\n3 CALL a b z\n4 RET b a x\n5 MSG a c -\n");
        let (pairs, stats) = find_call_pairs(&t);
        assert_eq!(pairs.len(), 1);
        assert_eq!(
            stats,
            PairingStats {
                unmatched_calls: 1,
                unmatched_returns: 1,
                free_messages: 1
            }
        );
    }

    #[test]
    fn a_return_before_its_call_does_not_match() {
        let t = trace("1 RET b a -\n2 CALL a b -\n");
        let (pairs, stats) = find_call_pairs(&t);
        assert!(pairs.is_empty());
        assert_eq!((stats.unmatched_calls, stats.unmatched_returns), (1, 1));
    }

    #[test]
    fn each_view_uses_its_own_end() {
        let t =
            trace("1 CALL_SENT a b x\n1.5 CALL_RECV a b x\n2 RET_SENT b a x\n2.5 RET_RECV b a x\n");
        let (pairs, _) = find_call_pairs(&t);
        let p = pairs[0];
        assert_eq!(
            (
                p.caller_send,
                p.callee_recv,
                p.callee_return,
                p.caller_return
            ),
            (1_000_000_000, 1_500_000_000, 2_000_000_000, 2_500_000_000)
        );
        assert_eq!(p.latency(), 500_000_000);
    }
}
