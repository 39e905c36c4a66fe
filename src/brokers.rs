//! Messages followed through brokers. A broker's capture holds each message twice, on
//! its way in (a publish) and on its way out (its delivery), and the broker readers name
//! both by the same digest of destination and payload ([`Trace::content`]); where the
//! broker was not captured, the producer's and the consumer's captures hold the same
//! digest. So a delivery is linked to the message that brought it in by the message
//! itself, not by time. Owns finding the brokers and the links, and the time each
//! message spent in its broker; reading the protocols is [`crate::capture::protocol`]'s,
//! and what the links mean for paths is the nesting's.

use crate::trace::{BrokerHops, Nanos, NodeId, Trace};
use hashbrown::HashMap;

/// A node is a broker when at least this share of the payloads it sent came in
/// through it first: a service that publishes what it computed links none.
const BROKER_SHARE: f64 = 0.5;

/// One delivery linked to the message that brought its payload into the broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// The message in (index in [`Trace::messages`]).
    pub publish: usize,
    /// The message out.
    pub delivery: usize,
    /// Whether the broker's own capture saw both (the time in the broker is then its
    /// own clock's).
    pub at_broker: bool,
}

/// The links, and what they say per broker.
#[derive(Debug, Clone, Default)]
pub struct Followed {
    /// Every delivery linked, in the order of the deliveries.
    pub hops: Vec<Hop>,
    /// Per broker, by name.
    pub brokers: Vec<BrokerHops>,
}

/// Links each payload a node sent to the latest message with the same payload the node
/// received before it (a payload published twice is delivered from the later; one
/// published once and delivered to several subscribers links each delivery to it), and
/// keeps the nodes where most payloads link: the brokers.
pub fn follow(trace: &Trace) -> Followed {
    // Most traces hold no broker message: then this costs nothing, wherever it runs.
    if !trace.has_content() {
        return Followed::default();
    }
    // Arrivals per (node, payload): the times and indices of the messages that brought
    // it, in time order.
    let mut arrivals: HashMap<(NodeId, u32), Vec<(Nanos, usize)>> = HashMap::new();
    let mut departures: Vec<(NodeId, u32, Nanos, usize)> = Vec::new();
    for (index, message) in trace.messages.iter().enumerate() {
        let Some(content) = trace.content(message.call_id(), message.kind()) else {
            continue;
        };
        // The broker's view where it has one: the time the message reached it, the time
        // the delivery left it.
        let arrived = message.received().or(message.sent()).expect("one end");
        let left = message.sent().or(message.received()).expect("one end");
        arrivals
            .entry((message.receiver(), content))
            .or_default()
            .push((arrived, index));
        departures.push((message.sender(), content, left, index));
    }
    for times in arrivals.values_mut() {
        times.sort_unstable();
    }
    let mut per_node: HashMap<NodeId, (u64, Vec<Hop>)> = HashMap::new();
    for &(node, content, left, index) in &departures {
        let entry = per_node.entry(node).or_default();
        entry.0 += 1;
        let Some(times) = arrivals.get(&(node, content)) else {
            continue;
        };
        let before = times.partition_point(|&(arrived, _)| arrived <= left);
        if let Some(&(_, publish)) = before.checked_sub(1).map(|k| &times[k]) {
            let at_broker = trace.messages[publish].received().is_some()
                && trace.messages[index].sent().is_some();
            entry.1.push(Hop {
                publish,
                delivery: index,
                at_broker,
            });
        }
    }
    let mut followed = Followed::default();
    let mut nodes: Vec<_> = per_node.into_iter().collect();
    nodes.sort_unstable_by(|a, b| trace.node_name(a.0).cmp(trace.node_name(b.0)));
    for (node, (sent, hops)) in nodes {
        if (hops.len() as f64) < BROKER_SHARE * sent as f64 || hops.is_empty() {
            continue;
        }
        let mut in_broker: Vec<Nanos> = hops
            .iter()
            .map(|hop| {
                let message = |k: usize| &trace.messages[k];
                let left = message(hop.delivery)
                    .sent()
                    .or(message(hop.delivery).received());
                let arrived = message(hop.publish)
                    .received()
                    .or(message(hop.publish).sent());
                left.expect("one end") - arrived.expect("one end")
            })
            .collect();
        in_broker.sort_unstable();
        let percentile = |p: f64| in_broker[((in_broker.len() - 1) as f64 * p).round() as usize];
        followed.brokers.push(BrokerHops {
            broker: trace.node_name(node).to_string(),
            deliveries: sent,
            linked: hops.len() as u64,
            through_its_capture: hops.iter().filter(|hop| hop.at_broker).count() as u64,
            in_broker_p50_ns: percentile(0.5),
            in_broker_p99_ns: percentile(0.99),
        });
        followed.hops.extend(hops);
    }
    followed.hops.sort_unstable_by_key(|hop| hop.delivery);
    followed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::text::trace_from_str;

    #[test]
    fn a_delivery_is_linked_to_the_publish_that_brought_its_payload() {
        // web publishes two orders to the broker; the broker delivers them to a
        // worker; web also publishes a payload of its own making to the cache, which
        // passes nothing on.
        let trace = trace_from_str(
            "1.000 MSG_SENT web nats p1 msg=000000a1\n\
             1.001 MSG_RECV web nats p1 msg=000000a1\n\
             1.002 MSG_SENT web nats p2 msg=000000a2\n\
             1.003 MSG_RECV web nats p2 msg=000000a2\n\
             1.010 MSG_SENT nats worker d2 msg=000000a2\n\
             1.012 MSG_SENT nats worker d1 msg=000000a1\n\
             1.013 MSG_RECV nats worker d1 msg=000000a1\n\
             1.020 CALL_SENT worker cache c1 msg=000000b1\n",
        );
        let followed = follow(&trace);
        assert_eq!(followed.brokers.len(), 1, "{:?}", followed.brokers);
        let nats = &followed.brokers[0];
        assert_eq!(
            (
                nats.broker.as_str(),
                nats.deliveries,
                nats.linked,
                nats.through_its_capture
            ),
            ("nats", 2, 2, 2)
        );
        // 7 ms and 11 ms in the broker.
        assert_eq!(nats.in_broker_p50_ns, 11_000_000);
        let call = |k: usize| trace.call_id_text(trace.messages[k].call_id()).to_string();
        let links: Vec<(String, String)> = followed
            .hops
            .iter()
            .map(|hop| (call(hop.publish), call(hop.delivery)))
            .collect();
        assert_eq!(
            links,
            [("p2".into(), "d2".into()), ("p1".into(), "d1".into())]
        );
    }

    #[test]
    fn a_node_that_sends_payloads_of_its_own_is_no_broker() {
        let trace = trace_from_str(
            "1.0 MSG_SENT a b m1 msg=00000001\n\
             2.0 MSG_SENT b c m2 msg=00000002\n",
        );
        assert!(follow(&trace).brokers.is_empty());
    }
}
