//! Causality repair of a merged trace: after alignment no receive may come before its
//! send plus a minimum latency. The controlled logical clock (Rabenseifner; Becker et
//! al.): receives that violate the clock condition are moved forward, the events after
//! them on the same node follow with a correction that fades (forward amortisation,
//! γ just under 1), and the events shortly before them are moved forward linearly to
//! smooth the jump (backward amortisation), never pushing a send past its receive.
//! Owns the events, the two passes and the report; knows nothing of captures.

use crate::trace::{Nanos, Trace};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How to repair.
#[derive(Debug, Clone, Copy)]
pub struct RepairOptions {
    /// A receive must come at least this long after its send, ns.
    pub min_latency: Nanos,
    /// The rate at which the clock runs after a jump, as a fraction of the local clock:
    /// the jump fades by 1 − γ of every interval after it.
    pub gamma: f64,
    /// The jump over the length of the backward amortisation interval: a few percent.
    pub slope: f64,
}

impl Default for RepairOptions {
    fn default() -> Self {
        RepairOptions {
            min_latency: 0,
            gamma: 0.99,
            slope: 0.02,
        }
    }
}

/// What the repair found and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RepairReport {
    /// Messages seen at both ends.
    pub messages: u64,
    /// Receives before their send plus the minimum latency, before the repair.
    pub violations_before: u64,
    /// The same after it (0 unless something is wrong).
    pub violations_after: u64,
    /// Event times that moved.
    pub moved: u64,
    /// The largest move, ns.
    pub largest_move_ns: Nanos,
    /// The mean of the moves that happened, ns.
    pub mean_move_ns: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Send,
    Receive,
    /// A message end whose other end was not seen: it keeps its node's intervals.
    Alone,
}

#[derive(Debug, Clone, Copy)]
struct Event {
    time: Nanos,
    role: Role,
    /// The other end's event, for sends and receives.
    other: u32,
}

fn violations(trace: &Trace, min_latency: Nanos) -> (u64, u64) {
    let mut both = 0;
    let mut bad = 0;
    for m in &trace.messages {
        if let (Some(s), Some(r)) = (m.sent(), m.received()) {
            both += 1;
            bad += u64::from(r < s + min_latency);
        }
    }
    (both, bad)
}

/// Repairs `trace` in place (and orders it again).
pub fn repair(trace: &mut Trace, options: &RepairOptions) -> RepairReport {
    let (messages, before) = violations(trace, options.min_latency);
    let mut report = RepairReport {
        messages,
        violations_before: before,
        ..RepairReport::default()
    };
    if before == 0 {
        return report;
    }
    // Events: per message its send and receive (or its one end), and per node its
    // events in local time order.
    let mut events: Vec<Event> = Vec::with_capacity(trace.messages.len() * 2);
    let mut ends: Vec<(u32, u32)> = Vec::with_capacity(trace.messages.len());
    let nodes = trace.nodes.len();
    let mut per_node: Vec<Vec<u32>> = vec![Vec::new(); nodes];
    for m in &trace.messages {
        let at = events.len() as u32;
        match (m.sent(), m.received()) {
            (Some(s), Some(r)) => {
                events.push(Event {
                    time: s,
                    role: Role::Send,
                    other: at + 1,
                });
                events.push(Event {
                    time: r,
                    role: Role::Receive,
                    other: at,
                });
                per_node[m.sender().0 as usize].push(at);
                per_node[m.receiver().0 as usize].push(at + 1);
                ends.push((at, at + 1));
            }
            (Some(t), None) | (None, Some(t)) => {
                events.push(Event {
                    time: t,
                    role: Role::Alone,
                    other: at,
                });
                let node = if m.sent().is_some() {
                    m.sender()
                } else {
                    m.receiver()
                };
                per_node[node.0 as usize].push(at);
                ends.push((at, at));
            }
            (None, None) => unreachable!("a message is observed at one end at least"),
        }
    }
    for list in &mut per_node {
        list.sort_by_key(|&e| (events[e as usize].time, e));
    }
    let (mut clock, jumps) = forward(&events, &per_node, options);
    // Messages crossed on clocks far apart can leave every node waiting on another; the
    // forward pass then lets one go on without its send, which a further pass over the
    // corrected times mends.
    for _ in 0..3 {
        let crossed = events.iter().enumerate().any(|(e, event)| {
            event.role == Role::Receive
                && clock[e] < clock[event.other as usize] + options.min_latency
        });
        if !crossed {
            break;
        }
        let moved: Vec<Event> = events
            .iter()
            .enumerate()
            .map(|(e, event)| Event {
                time: clock[e],
                ..*event
            })
            .collect();
        clock = forward(&moved, &per_node, options).0;
    }
    let clock = backward(&events, &per_node, clock, &jumps, options);
    for (e, event) in events.iter().enumerate() {
        let moved = clock[e] - event.time;
        if moved != 0 {
            report.moved += 1;
            report.largest_move_ns = report.largest_move_ns.max(moved);
            report.mean_move_ns += moved as f64;
        }
    }
    if report.moved > 0 {
        report.mean_move_ns /= report.moved as f64;
    }
    for (m, &(send, receive)) in trace.messages.iter_mut().zip(&ends) {
        *m = m.with_times(clock[send as usize], clock[receive as usize]);
    }
    trace.sort_messages();
    report.violations_after = violations(trace, options.min_latency).1;
    report
}

/// The forward pass (the paper's equations 4a and 4b), nodes replayed in time order
/// with a receive waiting for its send. Returns every event's new time and the jumps:
/// (node, position in the node's list, size).
fn forward(
    events: &[Event],
    per_node: &[Vec<u32>],
    options: &RepairOptions,
) -> (Vec<Nanos>, Vec<(usize, usize, Nanos)>) {
    const DELTA: Nanos = 1;
    let mut clock: Vec<Nanos> = events.iter().map(|e| e.time).collect();
    let mut done = vec![false; events.len()];
    let mut cursor = vec![0usize; per_node.len()];
    // Nodes waiting for the send of their next receive, by that send's event.
    let mut waiting: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    let mut heap: BinaryHeap<Reverse<(Nanos, usize)>> = per_node
        .iter()
        .enumerate()
        .filter_map(|(n, list)| list.first().map(|&e| Reverse((events[e as usize].time, n))))
        .collect();
    let mut jumps = Vec::new();
    // A node may go on without its receive's send when every node waits on another
    // (crossed messages on clocks far apart): the send's time is then its own.
    let mut forced = vec![false; per_node.len()];
    loop {
        let Some(Reverse((_, node))) = heap.pop() else {
            let Some((&send, &node)) = waiting.iter().min_by_key(|(&send, &node)| (node, send))
            else {
                break;
            };
            waiting.remove(&send);
            forced[node] = true;
            let next = per_node[node][cursor[node]];
            heap.push(Reverse((events[next as usize].time, node)));
            continue;
        };
        let list = &per_node[node];
        let position = cursor[node];
        let e = list[position] as usize;
        let event = events[e];
        if event.role == Role::Receive && !done[event.other as usize] && !forced[node] {
            waiting.insert(event.other, node);
            continue;
        }
        forced[node] = false;
        let mut time = event.time;
        if position > 0 {
            let previous = list[position - 1] as usize;
            let elapsed = (event.time - events[previous].time) as f64;
            time = time
                .max(clock[previous] + DELTA)
                .max(clock[previous] + (options.gamma * elapsed) as Nanos);
        }
        if event.role == Role::Receive {
            let earliest = clock[event.other as usize] + options.min_latency;
            if earliest > time {
                jumps.push((node, position, earliest - time));
                time = earliest;
            }
        }
        clock[e] = time;
        done[e] = true;
        cursor[node] += 1;
        if let Some(&next) = list.get(position + 1) {
            heap.push(Reverse((events[next as usize].time, node)));
        }
        if let Some(waiter) = waiting.remove(&(e as u32)) {
            let next = per_node[waiter][cursor[waiter]];
            heap.push(Reverse((events[next as usize].time, waiter)));
        }
    }
    (clock, jumps)
}

/// The backward pass: before each jump, the events of its node within
/// jump / slope of it move forward linearly toward the jump, a send no further than its
/// receive less the minimum latency, and never past the event after it.
fn backward(
    events: &[Event],
    per_node: &[Vec<u32>],
    mut clock: Vec<Nanos>,
    jumps: &[(usize, usize, Nanos)],
    options: &RepairOptions,
) -> Vec<Nanos> {
    // Latest jumps first, so a later jump's smoothing sees the earlier ones' times.
    for &(node, position, jump) in jumps.iter().rev() {
        let list = &per_node[node];
        let receive = list[position] as usize;
        let interval = (jump as f64 / options.slope) as Nanos;
        let start = events[receive].time - interval;
        let mut next = clock[receive];
        for p in (0..position).rev() {
            let e = list[p] as usize;
            if events[e].time <= start {
                break;
            }
            let share = (events[e].time - start) as f64 / interval as f64;
            let mut target = clock[e] + (jump as f64 * share) as Nanos;
            target = target.min(next - 1);
            if events[e].role == Role::Send {
                target = target.min(clock[events[e].other as usize] - options.min_latency);
            }
            if target > clock[e] {
                clock[e] = target;
            }
            next = clock[e];
        }
    }
    clock
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{End, Kind, Message, TraceBuilder, Truth};

    /// a calls b, b answers; b's clock is 100 µs behind, so b receives the call before
    /// a sent it.
    fn skewed_exchange() -> Trace {
        let mut builder = TraceBuilder::new();
        let (a, b) = (builder.node("a"), builder.node("b"));
        let id = builder.call_id("1");
        let mut push = |end, time, kind, from, to| {
            builder.push(Message::observed(
                end,
                time,
                kind,
                from,
                to,
                id,
                Truth::NONE,
            ))
        };
        push(End::Sent, 1_000_000, Kind::Call, a, b);
        push(
            End::Received,
            1_000_000 - 100_000 + 50_000,
            Kind::Call,
            a,
            b,
        );
        push(End::Sent, 1_000_000 - 100_000 + 250_000, Kind::Return, b, a);
        push(End::Received, 1_000_000 + 300_000, Kind::Return, b, a);
        builder.finish()
    }

    #[test]
    fn a_receive_before_its_send_moves_and_the_reply_keeps_its_interval() {
        let mut trace = skewed_exchange();
        let report = repair(
            &mut trace,
            &RepairOptions {
                min_latency: 10_000,
                ..RepairOptions::default()
            },
        );
        assert_eq!(report.violations_before, 1);
        assert_eq!(report.violations_after, 0);
        let call = trace
            .messages
            .iter()
            .find(|m| m.kind() == Kind::Call)
            .unwrap();
        assert_eq!(call.received(), Some(1_010_000));
        // The reply left 200 µs after the call arrived on b's clock; γ = 0.99 keeps
        // 198 µs of it, and it still arrives after it left.
        let reply = trace
            .messages
            .iter()
            .find(|m| m.kind() == Kind::Return)
            .unwrap();
        assert_eq!(reply.sent(), Some(1_010_000 + 198_000));
        assert!(reply.received().unwrap() >= reply.sent().unwrap() + 10_000);
    }

    #[test]
    fn a_trace_without_violations_is_left_alone() {
        let mut trace = skewed_exchange();
        let before: Vec<Message> = trace.messages.clone();
        let report = repair(
            &mut trace,
            &RepairOptions {
                min_latency: -1_000_000,
                ..RepairOptions::default()
            },
        );
        assert_eq!(report.violations_before, 0);
        assert_eq!(trace.messages, before);
    }
}
