//! Step 1 of the nesting algorithm (paper §5.1.1.1, FindCallPairs): matching each call
//! with its return. Owns the pairing rule and the count of what could not be paired;
//! does not look at nesting.

use crate::trace::{call_id_order, CallId, Kind, Message, Nanos, NodeId, Trace, Truth};
use hashbrown::hash_map::{Entry, HashMap};
use rayon::slice::ParallelSliceMut;

/// One call and its matching return, with the four times at which they were seen.
///
/// Each time falls back to the other end of its message when that end was not
/// observed, so the caller's and the callee's views are always defined; when both ends
/// were seen, each view is on that node's own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// The trace's tick: the largest duration that divides every time of every pair (1 ns
/// for a trace stamped to the nanosecond, 1 ms for one stamped to the millisecond).
pub fn tick(pairs: &[CallPair]) -> Nanos {
    fn gcd(mut a: u64, mut b: u64) -> u64 {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let mut tick = 0u64;
    for pair in pairs {
        for time in [
            pair.caller_send,
            pair.callee_recv,
            pair.callee_return,
            pair.caller_return,
        ] {
            tick = gcd(tick, time.unsigned_abs());
        }
        if tick == 1 {
            break;
        }
    }
    Nanos::try_from(tick.max(1)).unwrap_or(Nanos::MAX)
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
    /// One-way broker messages (free-form, naming what they carry: a publish or a
    /// delivery no answer acknowledges), nested as calls answered the moment they
    /// arrived ([`is_one_way`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub one_way_messages: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether `pair` is a one-way broker message rather than a call: it carries what it
/// delivers ([`Trace::content`]) and was answered at both ends the moment it was sent
/// and arrived, as [`find_call_pairs`] makes those. A call is never answered in the
/// nanosecond it arrived, and only broker messages carry contents.
pub fn is_one_way(trace: &Trace, pair: &CallPair) -> bool {
    pair.callee_return == pair.callee_recv
        && pair.caller_return == pair.caller_send
        && trace.content(pair.call_id, Kind::Free).is_some()
}

/// Pairs calls with returns in one pass over the time-ordered trace (Figure 4,
/// FindCallPairs).
///
/// Open calls are kept in a table keyed by (caller, callee, call id); a return takes
/// the earliest open call with its key, so missing or reused ids degrade to the
/// paper's "earliest unmatched call" rule. The table holds only calls in flight, plus
/// one link per message for keys that repeat. The trace puts calls before returns at
/// equal times, so a call and its return in the same tick still pair. A one-way broker
/// message (a NATS publish, a Kafka fetch's records) is a pair of its own, answered
/// where and when it arrived: the publish is its sender's child, and the consumer's
/// work after a delivery is the delivery's ([`is_one_way`]). The pairs come out
/// ordered by `caller_send`, ties in a fixed order.
pub fn find_call_pairs(trace: &Trace) -> (Vec<CallPair>, PairingStats) {
    find_call_pairs_counting(trace, &|_| true)
}

/// [`find_call_pairs`], counting in the stats only the messages first seen at a time
/// `counts` keeps (a segment's core: [`crate::streaming`]).
pub fn find_call_pairs_counting(
    trace: &Trace,
    counts: &dyn Fn(Nanos) -> bool,
) -> (Vec<CallPair>, PairingStats) {
    const END: u32 = u32::MAX;
    let mut stats = PairingStats::default();
    // key -> (oldest open call, newest open call), as message indexes; `later[i]` links
    // an open call to the next one opened with the same key.
    let mut open: HashMap<(NodeId, NodeId, CallId), (u32, u32)> = HashMap::new();
    let mut later: Vec<u32> = vec![END; trace.messages.len()];
    let mut pairs = Vec::with_capacity(trace.messages.len() / 2);
    for (i, m) in trace.messages.iter().enumerate() {
        let i = i as u32;
        match m.kind() {
            Kind::Call => match open.entry((m.sender(), m.receiver(), m.call_id())) {
                Entry::Occupied(mut slot) => {
                    let (_, newest) = slot.get_mut();
                    later[*newest as usize] = i;
                    *newest = i;
                }
                Entry::Vacant(slot) => {
                    slot.insert((i, i));
                }
            },
            Kind::Return => match open.entry((m.receiver(), m.sender(), m.call_id())) {
                Entry::Occupied(mut slot) => {
                    let (oldest, newest) = *slot.get();
                    if oldest == newest {
                        slot.remove();
                    } else {
                        slot.get_mut().0 = later[oldest as usize];
                    }
                    pairs.push(pair(&trace.messages[oldest as usize], m));
                }
                Entry::Vacant(_) => stats.unmatched_returns += u64::from(counts(m.first_time())),
            },
            Kind::Free if trace.content(m.call_id(), Kind::Free).is_some() => {
                stats.one_way_messages += u64::from(counts(m.first_time()));
                pairs.push(pair(m, m));
            }
            Kind::Free => stats.free_messages += u64::from(counts(m.first_time())),
        }
    }
    let counted = |at: u32| u64::from(counts(trace.messages[at as usize].first_time()));
    for &(oldest, newest) in open.values() {
        let mut at = oldest;
        stats.unmatched_calls += counted(at);
        while at != newest {
            at = later[at as usize];
            stats.unmatched_calls += counted(at);
        }
    }
    pairs.par_sort_unstable_by(|a, b| {
        (a.caller_send, a.caller, a.callee)
            .cmp(&(b.caller_send, b.caller, b.callee))
            .then_with(|| call_id_order(&trace.call_ids, a.call_id, b.call_id))
            .then_with(|| a.callee_recv.cmp(&b.callee_recv))
    });
    (pairs, stats)
}

fn pair(call: &Message, ret: &Message) -> CallPair {
    CallPair {
        caller: call.sender(),
        callee: call.receiver(),
        call_id: call.call_id(),
        caller_send: call.at_sender(),
        callee_recv: call.at_receiver(),
        callee_return: match call.kind() {
            // Answered where it arrived, when it arrived.
            Kind::Free => call.at_receiver(),
            _ => ret.at_sender(),
        },
        caller_return: match call.kind() {
            Kind::Free => call.at_sender(),
            _ => ret.at_receiver(),
        },
        truth: call.truth(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::text::trace_from_str as trace;

    /// A pair's four times: call sent, call received, answer sent, answer received.
    fn times(p: &CallPair) -> (Nanos, Nanos, Nanos, Nanos) {
        (
            p.caller_send,
            p.callee_recv,
            p.callee_return,
            p.caller_return,
        )
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
                free_messages: 1,
                one_way_messages: 0,
            }
        );
    }

    #[test]
    fn a_one_way_broker_message_is_a_pair_answered_when_it_arrived() {
        let t = trace(
            "1 MSG_SENT web nats p msg=0000000a\n1.5 MSG_RECV web nats p msg=0000000a\n2 MSG a b -\n",
        );
        let (pairs, stats) = find_call_pairs(&t);
        assert_eq!((stats.free_messages, stats.one_way_messages), (1, 1));
        assert_eq!(
            times(&pairs[0]),
            (1_000_000_000, 1_500_000_000, 1_500_000_000, 1_000_000_000)
        );
        assert!(is_one_way(&t, &pairs[0]));
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
        assert_eq!(
            times(&pairs[0]),
            (1_000_000_000, 1_500_000_000, 2_000_000_000, 2_500_000_000)
        );
        assert_eq!(pairs[0].latency(), 500_000_000);
    }

    #[test]
    fn the_tick_is_the_coarsest_step_every_time_is_a_multiple_of() {
        let millis = trace("1.002 CALL a b x\n1.010 RET b a x\n1.013 CALL a b y\n1.1 RET b a y\n");
        assert_eq!(tick(&find_call_pairs(&millis).0), 1_000_000);
        let micros = trace("1.000501 CALL a b x\n1.002 RET b a x\n");
        assert_eq!(tick(&find_call_pairs(&micros).0), 1_000);
        assert_eq!(tick(&[]), 1);
    }
}
