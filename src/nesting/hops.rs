//! Paths across brokers: where a broker passed a message on, the delivery's parent is
//! the message that brought it in ([`crate::brokers::follow`] links them by what they
//! carry), so the consumer's work joins the producer's request. Owns turning those
//! links into parent links between call pairs, which of them the producer did not wait
//! for (the asynchronous hops a signature writes `⇒`), and which nodes consume one-way
//! deliveries (whose work after a delivery is its children). Finding the links is
//! [`crate::brokers`]'s; choosing the consumer's parents is the per-node choice's.

use super::call_pairs::{is_one_way, CallPair};
use super::candidates::outlives;
use crate::brokers::Followed;
use crate::trace::{CallId, Kind, Nanos, NodeId, Trace};
use hashbrown::HashMap;

/// How long after a one-way delivery reached its consumer the consumer's calls out may
/// still be its work: the asynchronous window of a node that consumes them. A consumer
/// that takes a Kafka fetch's records one by one starts on the last of them tens of
/// milliseconds after they came (69 records at 32 clients); a queue that builds up at
/// the consumer takes longer.
pub const CONSUMER_WINDOW: Nanos = 500_000_000;

/// A broker's links as links between call pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PairHops {
    /// (delivery, publish) as indexes into the pairs, ascending by delivery.
    pub links: Vec<(u32, u32)>,
    /// The deliveries that are one-way messages, ascending: their consumers' calls out
    /// after them are their work.
    pub one_way: Vec<u32>,
}

/// The links of `followed` between the pairs they are the calls of: a publish and a
/// delivery are each a call or a one-way message ([`is_one_way`]); links between
/// answers (a NATS reply passed back to its requester) are the calls' own returns and
/// need none.
pub fn pair_hops(trace: &Trace, pairs: &[CallPair], followed: &Followed) -> PairHops {
    if followed.hops.is_empty() {
        return PairHops::default();
    }
    // The pairs of broker messages, by the message that made them.
    let mut by_message: HashMap<(NodeId, NodeId, CallId, Nanos), u32> = HashMap::new();
    for (index, pair) in pairs.iter().enumerate() {
        if trace.content(pair.call_id, Kind::Call).is_some() {
            let key = (pair.caller, pair.callee, pair.call_id, pair.caller_send);
            by_message.insert(key, index as u32);
        }
    }
    let pair_of = |message: usize| {
        let message = &trace.messages[message];
        if message.kind() == Kind::Return {
            return None;
        }
        let key = (
            message.sender(),
            message.receiver(),
            message.call_id(),
            message.at_sender(),
        );
        by_message.get(&key).copied()
    };
    let mut hops = PairHops::default();
    for hop in &followed.hops {
        let (Some(delivery), Some(publish)) = (pair_of(hop.delivery), pair_of(hop.publish)) else {
            continue;
        };
        hops.links.push((delivery, publish));
        if is_one_way(trace, &pairs[delivery as usize]) {
            hops.one_way.push(delivery);
        }
    }
    hops.links.sort_unstable();
    hops.links.dedup_by_key(|link| link.0);
    hops.one_way.sort_unstable();
    hops.one_way.dedup();
    hops
}

/// Sets each linked delivery's parent to its publish, sure: the message itself links
/// them. Returns the deliveries whose publish did not wait for them (its broker
/// answered it, or it was one-way, before the delivery was answered): the
/// asynchronous hops, ascending.
pub fn link(
    pairs: &[CallPair],
    hops: &PairHops,
    parent: &mut [u32],
    confidence: &mut [f32],
) -> Vec<u32> {
    let mut asynchronous = Vec::new();
    for &(delivery, publish) in &hops.links {
        parent[delivery as usize] = publish;
        confidence[delivery as usize] = 1.0;
        if outlives(&pairs[delivery as usize], &pairs[publish as usize], 0) {
            asynchronous.push(delivery);
        }
    }
    asynchronous
}

#[cfg(test)]
mod tests {
    use crate::nesting::{nest, NestOptions};
    use crate::trace::text::trace_from_str;

    /// web publishes an order one-way and answers its client; the broker delivers it
    /// to a worker one-way, which then calls the cache twice. A quote goes through the
    /// broker as a call and comes back as its answer.
    const ORDER_AND_QUOTE: &str = "\
        1.000 CALL client web r1\n\
        1.001 MSG_SENT web nats p1 msg=000000a1\n\
        1.002 MSG_RECV web nats p1 msg=000000a1\n\
        1.003 RET web client r1\n\
        1.010 MSG_SENT nats worker d1 msg=000000a1\n\
        1.011 MSG_RECV nats worker d1 msg=000000a1\n\
        1.012 CALL worker cache c1\n\
        1.013 RET cache worker c1\n\
        1.014 CALL worker cache c2\n\
        1.015 RET cache worker c2\n\
        2.000 CALL client web r2\n\
        2.001 CALL web nats q1 msg=000000b1\n\
        2.002 CALL nats worker q2 msg=000000b1\n\
        2.003 CALL worker cache c3\n\
        2.004 RET cache worker c3\n\
        2.005 RET worker nats q2 msg=000000b2\n\
        2.006 RET nats web q1 msg=000000b2\n\
        2.007 RET web client r2\n";

    #[test]
    fn a_delivery_joins_the_request_that_published_it() {
        let trace = trace_from_str(ORDER_AND_QUOTE);
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        let mut signatures: Vec<&str> = nesting
            .patterns
            .iter()
            .map(|p| p.signature.as_str())
            .collect();
        signatures.sort_unstable();
        assert_eq!(
            signatures,
            [
                "client->web(nats(worker(cache)))",
                "client->web(nats⇒worker(cache,cache))"
            ]
        );
        assert_eq!(
            nesting.hops.len(),
            1,
            "only the order's hop is asynchronous"
        );
        let order = nesting
            .patterns
            .iter()
            .find(|p| p.signature.contains('⇒'))
            .unwrap();
        // Position 2 is the delivery: its delay after the publish reached the broker
        // is the time in the broker.
        assert!(order.positions[2].through_broker);
        assert_eq!(
            order.positions[2].call_delays.values(),
            Some(&[8_000_000][..])
        );
        // The request answered at 1.003; the worker's last call returned at 1.015.
        assert_eq!(order.tails.values(), Some(&[12_000_000][..]));
    }
}
