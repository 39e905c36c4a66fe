//! Paths across brokers: where a broker passed a message on, the delivery's parent is
//! the message that brought it in ([`crate::brokers::follow`] links them by what they
//! carry), so the consumer's work joins the producer's request. Owns turning those
//! links into parent links between call pairs, which of them the producer did not wait
//! for (the asynchronous hops a signature writes `⇒`), and which nodes consume one-way
//! deliveries (whose work after a delivery is its children), and the calls of nodes at
//! either end of a broker that the order of service places, before the per-node choice,
//! which leaves out every call placed here. Finding the links is [`crate::brokers`]'s;
//! choosing the parents of the calls left is the per-node choice's.

use super::call_pairs::{is_one_way, CallPair};
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
    /// (delivery, publish) of the linked pairs whose answers carry the same message,
    /// the delivery's first: the delivery's answer carried back through the broker as
    /// the publish's (a request/reply: NATS request, AMQP `reply_to`, MQTT 5 Response
    /// Topic, Kafka reply topic), ascending. The only hops the producer waits for.
    pub answered: Vec<(u32, u32)>,
}

/// The links of `followed` between the pairs they are the calls of: a publish and a
/// delivery are each a call or a one-way message ([`is_one_way`]); links between
/// answers (a reply passed back to its requester) are the calls' own returns and need
/// none. A linked delivery was waited for ([`PairHops::answered`]) where its answer
/// and its publish's carry the same message and the delivery's came first: told by the
/// two answers themselves, not by which reply the broker's links paired them with
/// (two replies of like body to one reply queue are one message to them).
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
        let (consumer, producer) = (&pairs[delivery as usize], &pairs[publish as usize]);
        let answer = |pair: &CallPair| trace.content(pair.call_id, Kind::Return);
        if answer(consumer).is_some()
            && answer(consumer) == answer(producer)
            && consumer.callee_return <= producer.caller_return
        {
            hops.answered.push((delivery, publish));
        }
    }
    hops.links.sort_unstable();
    hops.links.dedup_by_key(|link| link.0);
    hops.one_way.sort_unstable();
    hops.one_way.dedup();
    hops.answered.sort_unstable();
    hops.answered.dedup();
    hops
}

/// Sets each linked delivery's parent to its publish, sure: the message itself links
/// them. Returns the deliveries whose publish did not wait for them: the asynchronous
/// hops, ascending. A producer waits for a delivery only where the delivery's answer
/// came back as the publish's ([`PairHops::answered`]); a broker's own
/// answer (a PUBACK, a confirm, a Produce response) never waits for the consumer, even
/// where it came after the consumer's ack: Nagle's algorithm held mosquitto's PUBACKs
/// ~40 ms, after the worker had done.
pub fn link(hops: &PairHops, parent: &mut [u32], confidence: &mut [f32]) -> Vec<u32> {
    let mut asynchronous = Vec::new();
    for &(delivery, publish) in &hops.links {
        parent[delivery as usize] = publish;
        confidence[delivery as usize] = 1.0;
        if hops.answered.binary_search(&(delivery, publish)).is_err() {
            asynchronous.push(delivery);
        }
    }
    asynchronous
}

/// A node that serves its calls of one type one at a time, first in, first out, at
/// either end of a broker: where a node that consumes a broker's deliveries, or
/// publishes to one, makes exactly as many calls of one kind (callee and operation: a
/// cache's `SET`, a broker's `publish orders`) as it got calls of one type (caller and
/// operation: `deliver orders`, `POST /order`), and giving the n-th call to the n-th of
/// them never has a call leave before its parent came (or, where the parent is
/// answered, return after its answer), the n-th call is the n-th parent's; where no type
/// fits so but exactly one has a causal one-to-one choice, the calls are given it, in
/// the order of its answers ([`causal_matching`]).
/// Under a queue the joint choice times a delivery's work from its own arrival and gives it to
/// the newest of the deliveries waiting (at 32 clients, 737 of 920 wrong calls at
/// RabbitMQ's consumer); the order of service tells them apart. At a producer only the
/// kinds that are broker messages are placed so. A kind two types could take is left
/// to the choice, and so is a kind whose calls carry the request id of a call into the
/// node, which the choice places by it (`ids`: they are read). Runs before the choice,
/// which then weighs only the calls left: a consumer's calls out are candidates of
/// every delivery in its window (500 ms), and placing them here spares that search.
/// Returns (call, parent) of the calls placed, ascending by call.
pub fn serve_in_order(
    trace: &Trace,
    pairs: &[CallPair],
    (hops, ids): (&PairHops, bool),
) -> Vec<(u32, u32)> {
    type Kind = (NodeId, crate::trace::OperationId);
    // Per node at an end of a broker (consuming: true; only publishing: false), its
    // calls in and out.
    let mut nodes: std::collections::BTreeMap<NodeId, (bool, Vec<u32>, Vec<u32>)> =
        std::collections::BTreeMap::new();
    for &(delivery, publish) in &hops.links {
        nodes.entry(pairs[delivery as usize].callee).or_default().0 = true;
        nodes.entry(pairs[publish as usize].caller).or_default();
    }
    for (index, pair) in pairs.iter().enumerate() {
        if let Some(node) = nodes.get_mut(&pair.callee) {
            node.1.push(index as u32);
        }
        if let Some(node) = nodes.get_mut(&pair.caller) {
            let message = trace
                .content(pair.call_id, crate::trace::Kind::Call)
                .is_some();
            if node.0 || message {
                node.2.push(index as u32);
            }
        }
    }
    let mut placed = Vec::new();
    for (_, deliveries, calls) in nodes.values_mut() {
        let group = |list: &mut Vec<u32>, key: &dyn Fn(&CallPair) -> Kind| {
            let mut groups: std::collections::BTreeMap<Kind, Vec<u32>> = Default::default();
            for &index in list.iter() {
                groups
                    .entry(key(&pairs[index as usize]))
                    .or_default()
                    .push(index);
            }
            groups
        };
        let operation = |pair: &CallPair| trace.operation(pair.call_id);
        let mut types = group(deliveries, &|p| (p.caller, operation(p)));
        for list in types.values_mut() {
            list.sort_unstable_by_key(|&i| (pairs[i as usize].callee_recv, i));
        }
        let mut kinds = group(calls, &|p| (p.callee, operation(p)));
        for list in kinds.values_mut() {
            list.sort_unstable_by_key(|&i| (pairs[i as usize].caller_send, i));
        }
        let ids_in: hashbrown::HashSet<crate::trace::PropagatedId> = match ids {
            true => (deliveries.iter())
                .map(|&call| trace.propagated(pairs[call as usize].call_id))
                .filter(|&id| id != crate::trace::PropagatedId::NONE)
                .collect(),
            false => Default::default(),
        };
        for kind in kinds.values() {
            let by_id =
                |&call: &u32| ids_in.contains(&trace.propagated(pairs[call as usize].call_id));
            if kind.iter().any(by_id) {
                continue;
            }
            // First in, first out where exactly one type fits so; else any causal
            // order where exactly one type has one.
            let same_count = || (types.values()).filter(|parents| parents.len() == kind.len());
            let in_order = |parents: &&Vec<u32>| {
                parents.iter().zip(kind).all(|(&p, &call)| {
                    let (parent, call) = (&pairs[p as usize], &pairs[call as usize]);
                    call.caller_send >= parent.callee_recv
                        && (is_one_way(trace, parent) || call.caller_return <= parent.callee_return)
                })
            };
            let mut fifo = same_count().filter(in_order);
            let chosen = match (fifo.next(), fifo.next()) {
                (Some(parents), None) => parents.clone(),
                _ => {
                    let mut fitting = same_count()
                        .filter_map(|parents| causal_matching(trace, pairs, parents, kind));
                    match (fitting.next(), fitting.next()) {
                        (Some(chosen), None) => chosen,
                        _ => continue,
                    }
                }
            };
            placed.extend(kind.iter().copied().zip(chosen));
        }
    }
    placed.sort_unstable();
    placed
}

/// The calls whose parents the broker's links and the order of service give, ascending:
/// the per-node choice leaves them out.
pub fn placed_before_choice(hops: &PairHops, in_order: &[(u32, u32)]) -> Vec<u32> {
    let mut placed: Vec<u32> = (hops.links.iter().map(|&(delivery, _)| delivery))
        .chain(in_order.iter().map(|&(call, _)| call))
        .collect();
    placed.sort_unstable();
    placed.dedup();
    placed
}

/// Gives each call of `placed` ((call, parent) from [`serve_in_order`]) its parent,
/// sure. Returns how many.
pub fn place(placed: &[(u32, u32)], parent: &mut [u32], confidence: &mut [f32]) -> u64 {
    for &(call, chosen) in placed {
        parent[call as usize] = chosen;
        confidence[call as usize] = 1.0;
    }
    placed.len() as u64
}

/// Each of `calls` (one kind, in the order they left) given one of `parents` (one
/// type, in the order they came, as many) that was there when it left and, where the
/// parents are answered, did not answer before it returned; `None` where no such
/// one-to-one choice exists. One-way parents (deliveries) are taken first in, first
/// out. Answered ones by the earliest answer still to come: the parent being served is
/// the one that answers next, which takes the order of service from the answers where
/// it is not the order of arrival (a producer that batches: aiokafka's records) and is
/// the order of arrival where it is (a consumer's acks). Taking, for each call in turn,
/// the earliest answer it fits never leaves a later call without a parent that another
/// choice would have had (the parents it could take only grow, and a later answer
/// serves every call an earlier one does).
fn causal_matching(
    trace: &Trace,
    pairs: &[CallPair],
    parents: &[u32],
    calls: &[u32],
) -> Option<Vec<u32>> {
    let one_way = parents
        .iter()
        .all(|&p| is_one_way(trace, &pairs[p as usize]));
    let mut open: std::collections::BTreeSet<(Nanos, u32)> = Default::default();
    let mut next = 0;
    let mut chosen = Vec::with_capacity(calls.len());
    for &call in calls {
        let call = &pairs[call as usize];
        while let Some(&p) = parents.get(next) {
            let parent = &pairs[p as usize];
            if parent.callee_recv > call.caller_send {
                break;
            }
            let key = match one_way {
                true => parent.callee_recv,
                false => parent.callee_return,
            };
            open.insert((key, p));
            next += 1;
        }
        let from = match one_way {
            true => Nanos::MIN,
            false => call.caller_return,
        };
        let &taken = open.range((from, 0)..).next()?;
        open.remove(&taken);
        chosen.push(taken.1);
    }
    Some(chosen)
}

#[cfg(test)]
pub(crate) mod tests {
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

    #[test]
    fn a_brokers_own_answer_that_comes_after_the_consumers_does_not_wait_for_it() {
        // MQTT at QoS 1: the broker's PUBACK to web (held 40 ms by Nagle's algorithm)
        // comes after the worker's PUBACK of the delivery, yet the broker did not wait
        // for it: only a reply the broker carries back is waited for, as the quote's.
        let trace = trace_from_str(&format!(
            "{ORDER_AND_QUOTE}\
             3.000 CALL client web r3\n\
             3.001 CALL web nats p3 msg=000000c1\n\
             3.002 CALL nats worker d3 msg=000000c1\n\
             3.003 CALL worker cache c4\n\
             3.004 RET cache worker c4\n\
             3.005 RET worker nats d3\n\
             3.045 RET nats web p3\n\
             3.046 RET web client r3\n"
        ));
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        let mut signatures: Vec<(&str, u64)> = (nesting.patterns.iter())
            .map(|p| (p.signature.as_str(), p.count()))
            .collect();
        signatures.sort_unstable();
        assert_eq!(
            signatures,
            [
                ("client->web(nats(worker(cache)))", 1),
                ("client->web(nats⇒worker(cache))", 1),
                ("client->web(nats⇒worker(cache,cache))", 1)
            ]
        );
    }

    /// Two orders wait at the worker together; it serves them in turn, each with a SET,
    /// and acks each after its SET.
    pub(crate) const TWO_ORDERS_SERVED_IN_TURN: &str =
        "1.000 MSG web rabbit p1 msg=000000a1 op=publish_orders\n\
        1.002 MSG web rabbit p2 msg=000000a2 op=publish_orders\n\
        1.010 CALL rabbit worker d1 msg=000000a1 op=deliver_orders\n\
        1.011 CALL rabbit worker d2 msg=000000a2 op=deliver_orders\n\
        1.020 CALL worker cache s1 op=SET\n\
        1.021 RET cache worker s1\n\
        1.022 RET worker rabbit d1\n\
        1.030 CALL worker cache s2 op=SET\n\
        1.031 RET cache worker s2\n\
        1.032 RET worker rabbit d2\n";

    #[test]
    fn a_consumer_serving_in_order_gives_each_delivery_its_place_in_the_queue() {
        let trace = trace_from_str(TWO_ORDERS_SERVED_IN_TURN);
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        assert_eq!(nesting.stats.served_in_order, 2);
        let id = |i: usize| trace.call_id_text(nesting.pairs[i].call_id).to_owned();
        let parent_of = |name: &str| {
            let i = (0..nesting.pairs.len()).find(|&i| id(i) == name).unwrap();
            id(nesting.parent[i] as usize)
        };
        assert_eq!(
            (parent_of("s1"), parent_of("s2")),
            ("d1".into(), "d2".into())
        );
        assert_eq!(nesting.patterns.len(), 1, "{:?}", nesting.patterns);
        assert_eq!(nesting.patterns[0].signature, "web->rabbit⇒worker(cache)");
    }
}
