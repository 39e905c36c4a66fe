//! Instantiating tracelets into a time-ordered list of message observations. Owns
//! timing (delays, think times, network delay, resolution), alternative choice, call
//! ids and truth tags; loss and text output are elsewhere.

use crate::config::{Model, Slot, StepKind};
use blackbox::trace::time::Nanos;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// When to stop starting instances.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// No instance starts this long after the trace start.
    Duration(Nanos),
    /// No instance starts once this many messages were made.
    Messages(u64),
}

/// Generation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Trace start, ns since the epoch.
    pub start: Nanos,
    /// Length.
    pub stop: Stop,
    /// Gaussian network delay (mean, sd) per message; each message is then written at
    /// both ends. `None`: one line per message, at the sender.
    pub network: Option<(Nanos, Nanos)>,
    /// Times are rounded to a multiple of this (1 µs, as most captures).
    pub resolution: Nanos,
}

/// One end of one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    /// When, ns.
    pub time: Nanos,
    /// Call, return or free-form.
    pub kind: StepKind,
    /// Seen at the receiver (else at the sender).
    pub received: bool,
    /// Sender, index into [`Generated::nodes`].
    pub from: u32,
    /// Receiver.
    pub to: u32,
    /// Call id number (calls and returns), `None` for messages.
    pub call: Option<u64>,
    /// Tracelet index.
    pub tracelet: u32,
    /// Instance number within the tracelet.
    pub instance: u64,
}

/// A generated trace.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Generated {
    /// Node names.
    pub nodes: Vec<String>,
    /// Tracelet names.
    pub tracelets: Vec<String>,
    /// Observations in time order.
    pub lines: Vec<Line>,
    /// Messages made.
    pub messages: u64,
    /// Path instances made.
    pub instances: u64,
}

/// A Gaussian delay that is never negative.
fn delay(rng: &mut ChaCha8Rng, mean: Nanos, sd: Nanos) -> Nanos {
    if sd == 0 {
        return mean;
    }
    let normal = Normal::new(mean as f64, sd as f64).expect("sd is positive and finite");
    normal.sample(rng).max(0.0).round() as Nanos
}

/// Instantiates the model's tracelets until `options.stop`.
pub fn generate(model: &Model, options: &Options, rng: &mut ChaCha8Rng) -> Generated {
    let mut out = Generated {
        tracelets: model.tracelets.iter().map(|t| t.name.clone()).collect(),
        ..Generated::default()
    };
    let mut node_ids: HashMap<String, u32> = HashMap::new();
    let mut node = |name: &str, nodes: &mut Vec<String>| {
        *node_ids.entry(name.to_owned()).or_insert_with(|| {
            nodes.push(name.to_owned());
            nodes.len() as u32 - 1
        })
    };
    // Each lane runs one tracelet's instances back to back; the earliest lane goes next.
    let mut lanes = BinaryHeap::new();
    for (t, tracelet) in model.tracelets.iter().enumerate() {
        for lane in 0..tracelet.parallel {
            let offset = if tracelet.think.1 > 0 {
                rng.gen_range(0..=tracelet.think.1)
            } else {
                0
            };
            lanes.push(Reverse((options.start + offset, t as u32, lane)));
        }
    }
    let mut instance_count = vec![0u64; model.tracelets.len()];
    let mut next_call = 0u64;
    let round =
        |t: Nanos| (t + options.resolution / 2).div_euclid(options.resolution) * options.resolution;
    while let Some(Reverse((start, t, lane))) = lanes.pop() {
        let done = match options.stop {
            Stop::Duration(d) => start >= options.start + d,
            Stop::Messages(n) => out.messages >= n,
        };
        if done {
            if matches!(options.stop, Stop::Messages(_)) {
                break;
            }
            continue;
        }
        let tracelet = &model.tracelets[t as usize];
        let instance = instance_count[t as usize];
        instance_count[t as usize] += 1;
        out.instances += 1;
        let choice: Vec<usize> = model
            .alternatives
            .iter()
            .map(|a| rng.gen_range(0..a.len()))
            .collect();
        let mut resolve = |slot: &Slot, nodes: &mut Vec<String>| match slot {
            Slot::Node(n) => node(n, nodes),
            Slot::OneOf(i) => node(&model.alternatives[*i][choice[*i]], nodes),
        };
        // (sender, time sent, time received) of the previous step: a step's delay runs
        // from the sender's last own action, or from when the last message reached it.
        let mut previous: Option<(u32, Nanos, Nanos)> = None;
        let mut open: Vec<(u32, u32, u64)> = Vec::new();
        let mut end = start;
        for step in &tracelet.steps {
            let (from, to) = (
                resolve(&step.from, &mut out.nodes),
                resolve(&step.to, &mut out.nodes),
            );
            let base = match previous {
                None => start,
                Some((sender, sent, _)) if sender == from => sent,
                Some((_, _, received)) => received,
            };
            let sent = base + delay(rng, step.mean, step.sd);
            let received = match options.network {
                Some((mean, sd)) => sent + delay(rng, mean, sd),
                None => sent,
            };
            let call = match step.kind {
                StepKind::Call => {
                    next_call += 1;
                    open.push((from, to, next_call));
                    Some(next_call)
                }
                StepKind::Return => {
                    let i = open
                        .iter()
                        .position(|&(f, t, _)| f == to && t == from)
                        .expect("config validation pairs every return with a call");
                    Some(open.remove(i).2)
                }
                StepKind::Message => None,
            };
            let line = Line {
                time: round(sent),
                kind: step.kind,
                received: false,
                from,
                to,
                call,
                tracelet: t,
                instance,
            };
            out.lines.push(line);
            if options.network.is_some() {
                out.lines.push(Line {
                    time: round(received),
                    received: true,
                    ..line
                });
            }
            out.messages += 1;
            previous = Some((from, sent, received));
            end = received;
        }
        let think = if tracelet.think.1 > tracelet.think.0 {
            rng.gen_range(tracelet.think.0..=tracelet.think.1)
        } else {
            tracelet.think.0
        };
        lanes.push(Reverse((end + think, t, lane)));
    }
    // Stable: equal times keep the order in which they were made.
    out.lines.sort_by_key(|l| l.time);
    out
}
