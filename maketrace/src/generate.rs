//! Instantiating tracelets into a time-ordered list of message observations. Owns
//! timing (delays, think times, network delay, resolution), the hosts' worker pools and
//! their queues, alternative choice, call ids and truth tags; loss and text output are
//! elsewhere.
//!
//! An event simulation: lanes start instances (earliest first), and an instance makes
//! its steps one after the other until a pooled host must act for a call no worker has
//! taken yet. Calls arrive at pooled hosts, and workers free up, as events in time
//! order; a free worker (the lowest numbered) takes the waiting call first in the queue
//! and its instance goes on from then. Without pools every instance is made whole when
//! it starts, as before pools existed: the same config and seed give the same bytes.

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
    /// What each host with a worker pool did, in the config's order.
    pub pools: Vec<PoolStats>,
    /// Per call (id − 1), the worker of its callee's pool that took it, [`NO_WORKER`]
    /// for calls that took none; empty without pools.
    pub workers: Vec<u32>,
}

/// [`Generated::workers`]' mark of a call that took no worker.
pub const NO_WORKER: u32 = u32::MAX;

impl Generated {
    /// The worker of its callee's pool that took call `id`, if one did.
    pub fn worker(&self, id: u64) -> Option<u32> {
        let index = usize::try_from(id.checked_sub(1)?).ok()?;
        self.workers.get(index).copied().filter(|&w| w != NO_WORKER)
    }
}

/// What one host's worker pool did: the calls that took a worker and how long they
/// waited for it (from their arrival to when a worker took them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PoolStats {
    /// The host.
    pub host: String,
    /// Its workers.
    pub workers: u32,
    /// Calls that took a worker.
    pub requests: u64,
    /// Of them, those that waited (found every worker busy).
    pub waited: u64,
    /// Mean wait over all requests, ns.
    pub mean_wait: f64,
    /// Nearest-rank 99th percentile of the waits, ns.
    pub p99_wait: Nanos,
    /// Longest wait, ns.
    pub max_wait: Nanos,
}

/// A Gaussian delay that is never negative.
fn delay(rng: &mut ChaCha8Rng, mean: Nanos, sd: Nanos) -> Nanos {
    if sd == 0 {
        return mean;
    }
    let normal = Normal::new(mean as f64, sd as f64).expect("sd is positive and finite");
    normal.sample(rng).max(0.0).round() as Nanos
}

/// Event kinds, in the order they go at equal times: a worker freed at an instant takes
/// a call arriving at it without a wait; lanes start last.
const RELEASE: u8 = 0;
const ARRIVAL: u8 = 1;
const START: u8 = 2;

/// (time, kind, a, b): a start's `a` is its tracelet and `b` its lane (the order of
/// lanes before pools); an arrival's `a` its sequence number and `b` its instance's
/// slot << 32 | pool; a release's `a` its pool and `b` the worker.
type Event = Reverse<(Nanos, u8, u64, u64)>;

/// Node names numbered in order of first use, and each node's pool.
struct Nodes<'m> {
    ids: HashMap<String, u32>,
    names: Vec<String>,
    pool: Vec<Option<u32>>,
    model: &'m Model,
}

impl Nodes<'_> {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(name.to_owned(), id);
        self.names.push(name.to_owned());
        let pool = self.model.pools.iter().position(|p| p.host == name);
        self.pool.push(pool.map(|p| p as u32));
        id
    }

    fn resolve(&mut self, slot: &Slot, choice: &[usize]) -> u32 {
        let model = self.model;
        match slot {
            Slot::Node(n) => self.id(n),
            Slot::OneOf(i) => self.id(&model.alternatives[*i][choice[*i]]),
        }
    }
}

/// One instance's place at one pooled host: its open calls there, which share one
/// worker, and the worker once one took the first.
struct Served {
    pool: u32,
    /// Open calls of the instance into the host.
    calls: u32,
    /// The call that asked for the worker, and when it arrived.
    call: u64,
    arrival: Nanos,
    /// The worker and when it took the call.
    worker: Option<(u32, Nanos)>,
}

/// An instance being made.
struct Running {
    tracelet: u32,
    lane: u32,
    instance: u64,
    start: Nanos,
    choice: Vec<usize>,
    /// The next step to make.
    next: usize,
    /// (sender, time sent, time received) of the previous step: a step's delay runs
    /// from the sender's last own action, or from when the last message reached it.
    previous: Option<(u32, Nanos, Nanos)>,
    /// Open calls: (caller, callee, id).
    open: Vec<(u32, u32, u64)>,
    served: Vec<Served>,
    /// Waiting for a worker of its next step's sender.
    blocked: bool,
    end: Nanos,
}

/// A pooled host's free workers, its queue and the waits so far.
struct Server {
    free: BinaryHeap<Reverse<u32>>,
    /// (place, sequence number, slot): the place is the arrival plus the jitter.
    queue: BinaryHeap<Reverse<(Nanos, u64, usize)>>,
    jitter: Nanos,
    waits: Vec<Nanos>,
}

struct Simulation<'m> {
    model: &'m Model,
    options: &'m Options,
    out: Generated,
    nodes: Nodes<'m>,
    servers: Vec<Server>,
    events: BinaryHeap<Event>,
    running: Vec<Running>,
    idle: Vec<usize>,
    instance_count: Vec<u64>,
    next_call: u64,
    sequence: u64,
}

/// Instantiates the model's tracelets until `options.stop`.
pub fn generate(model: &Model, options: &Options, rng: &mut ChaCha8Rng) -> Generated {
    let mut sim = Simulation {
        model,
        options,
        out: Generated {
            tracelets: model.tracelets.iter().map(|t| t.name.clone()).collect(),
            ..Generated::default()
        },
        nodes: Nodes {
            ids: HashMap::new(),
            names: Vec::new(),
            pool: Vec::new(),
            model,
        },
        servers: model
            .pools
            .iter()
            .map(|p| Server {
                free: (0..p.workers).map(Reverse).collect(),
                queue: BinaryHeap::new(),
                jitter: p.queue_jitter,
                waits: Vec::new(),
            })
            .collect(),
        events: BinaryHeap::new(),
        running: Vec::new(),
        idle: Vec::new(),
        instance_count: vec![0; model.tracelets.len()],
        next_call: 0,
        sequence: 0,
    };
    // Each lane runs one tracelet's instances back to back; the earliest lane goes next.
    for (t, tracelet) in model.tracelets.iter().enumerate() {
        for lane in 0..tracelet.parallel {
            let offset = if tracelet.think.1 > 0 {
                rng.gen_range(0..=tracelet.think.1)
            } else {
                0
            };
            sim.events.push(Reverse((
                options.start + offset,
                START,
                t as u64,
                u64::from(lane),
            )));
        }
    }
    while let Some(Reverse((time, kind, a, b))) = sim.events.pop() {
        match kind {
            START => sim.start(time, a as u32, b as u32, rng),
            ARRIVAL => sim.arrive((b >> 32) as usize, b as u32, time, rng),
            _ => sim.release(a as u32, b as u32, time, rng),
        }
    }
    assert_eq!(
        sim.idle.len(),
        sim.running.len(),
        "every instance finishes: config validation refuses pools that could deadlock"
    );
    sim.finish()
}

impl Simulation<'_> {
    /// A lane's next instance, unless the trace is long enough.
    fn start(&mut self, time: Nanos, t: u32, lane: u32, rng: &mut ChaCha8Rng) {
        let done = match self.options.stop {
            Stop::Duration(d) => time >= self.options.start + d,
            Stop::Messages(n) => self.out.messages >= n,
        };
        if done {
            return;
        }
        let instance = self.instance_count[t as usize];
        self.instance_count[t as usize] += 1;
        self.out.instances += 1;
        let slot = match self.idle.pop() {
            Some(slot) => slot,
            None => {
                self.running.push(Running {
                    tracelet: 0,
                    lane: 0,
                    instance: 0,
                    start: 0,
                    choice: Vec::new(),
                    next: 0,
                    previous: None,
                    open: Vec::new(),
                    served: Vec::new(),
                    blocked: false,
                    end: 0,
                });
                self.running.len() - 1
            }
        };
        let run = &mut self.running[slot];
        run.choice.clear();
        run.choice.extend(
            self.model
                .alternatives
                .iter()
                .map(|a| rng.gen_range(0..a.len())),
        );
        (run.tracelet, run.lane, run.instance, run.start) = (t, lane, instance, time);
        (run.next, run.previous, run.blocked, run.end) = (0, None, false, time);
        run.open.clear();
        run.served.clear();
        self.advance(slot, rng);
    }

    /// Makes `slot`'s steps until a pooled host must act for a call no worker has taken
    /// yet, or to its end (then its lane's next instance is due after a think time).
    fn advance(&mut self, slot: usize, rng: &mut ChaCha8Rng) {
        let Simulation {
            model,
            options,
            out,
            nodes,
            events,
            running,
            next_call,
            sequence,
            ..
        } = self;
        let run = &mut running[slot];
        let tracelet = &model.tracelets[run.tracelet as usize];
        let round = |t: Nanos| {
            (t + options.resolution / 2).div_euclid(options.resolution) * options.resolution
        };
        while let Some(step) = tracelet.steps.get(run.next) {
            let from = nodes.resolve(&step.from, &run.choice);
            let to = nodes.resolve(&step.to, &run.choice);
            let mut base = match run.previous {
                None => run.start,
                Some((sender, sent, _)) if sender == from => sent,
                Some((_, _, received)) => received,
            };
            // A pooled host acts for the calls it serves once a worker took them.
            if let Some(pool) = nodes.pool[from as usize] {
                if let Some(served) = run.served.iter().find(|s| s.pool == pool) {
                    match served.worker {
                        None => {
                            run.blocked = true;
                            return;
                        }
                        Some((_, since)) => base = base.max(since),
                    }
                }
            }
            let sent = base + delay(rng, step.mean, step.sd);
            let received = match options.network {
                Some((mean, sd)) => sent + delay(rng, mean, sd),
                None => sent,
            };
            let call = match step.kind {
                StepKind::Call => {
                    *next_call += 1;
                    run.open.push((from, to, *next_call));
                    if let Some(pool) = nodes.pool[to as usize] {
                        match run.served.iter_mut().find(|s| s.pool == pool) {
                            Some(served) => served.calls += 1,
                            None => {
                                run.served.push(Served {
                                    pool,
                                    calls: 1,
                                    call: *next_call,
                                    arrival: received,
                                    worker: None,
                                });
                                *sequence += 1;
                                let at = (slot as u64) << 32 | u64::from(pool);
                                events.push(Reverse((received, ARRIVAL, *sequence, at)));
                            }
                        }
                    }
                    Some(*next_call)
                }
                StepKind::Return => {
                    let i = run
                        .open
                        .iter()
                        .position(|&(f, t, _)| f == to && t == from)
                        .expect("config validation pairs every return with a call");
                    let id = run.open.remove(i).2;
                    if let Some(pool) = nodes.pool[from as usize] {
                        let k = run
                            .served
                            .iter()
                            .position(|s| s.pool == pool)
                            .expect("a call into a pooled host is served there");
                        run.served[k].calls -= 1;
                        if run.served[k].calls == 0 {
                            let (worker, _) = run
                                .served
                                .swap_remove(k)
                                .worker
                                .expect("taken before it acts");
                            events.push(Reverse((
                                sent,
                                RELEASE,
                                u64::from(pool),
                                u64::from(worker),
                            )));
                        }
                    }
                    Some(id)
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
                tracelet: run.tracelet,
                instance: run.instance,
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
            run.previous = Some((from, sent, received));
            run.end = received;
            run.next += 1;
        }
        let think = if tracelet.think.1 > tracelet.think.0 {
            rng.gen_range(tracelet.think.0..=tracelet.think.1)
        } else {
            tracelet.think.0
        };
        let (t, lane) = (u64::from(run.tracelet), u64::from(run.lane));
        events.push(Reverse((run.end + think, START, t, lane)));
        self.idle.push(slot);
    }

    /// A call of `slot`'s into `pool` arrives: a free worker takes it, or it waits.
    fn arrive(&mut self, slot: usize, pool: u32, now: Nanos, rng: &mut ChaCha8Rng) {
        let server = &mut self.servers[pool as usize];
        match server.free.pop() {
            Some(Reverse(worker)) => self.serve(slot, pool, worker, now, rng),
            None => {
                let place = now
                    + if server.jitter > 0 {
                        rng.gen_range(0..=server.jitter)
                    } else {
                        0
                    };
                self.sequence += 1;
                server.queue.push(Reverse((place, self.sequence, slot)));
            }
        }
    }

    /// A worker of `pool` is done: it takes the first waiting call, or waits itself.
    fn release(&mut self, pool: u32, worker: u32, now: Nanos, rng: &mut ChaCha8Rng) {
        let server = &mut self.servers[pool as usize];
        match server.queue.pop() {
            Some(Reverse((_, _, slot))) => self.serve(slot, pool, worker, now, rng),
            None => server.free.push(Reverse(worker)),
        }
    }

    /// `worker` of `pool` takes `slot`'s call at `now`; the instance goes on if it was
    /// waiting for it.
    fn serve(&mut self, slot: usize, pool: u32, worker: u32, now: Nanos, rng: &mut ChaCha8Rng) {
        let run = &mut self.running[slot];
        let served = run
            .served
            .iter_mut()
            .find(|s| s.pool == pool)
            .expect("a call waits at its own host");
        served.worker = Some((worker, now));
        self.servers[pool as usize].waits.push(now - served.arrival);
        let index = (served.call - 1) as usize;
        if self.out.workers.len() <= index {
            self.out.workers.resize(index + 1, NO_WORKER);
        }
        self.out.workers[index] = worker;
        if run.blocked {
            run.blocked = false;
            self.advance(slot, rng);
        }
    }

    /// The nodes, the pools' waits summed up, the lines in time order.
    fn finish(mut self) -> Generated {
        self.out.nodes = self.nodes.names;
        if !self.model.pools.is_empty() {
            self.out.workers.resize(self.next_call as usize, NO_WORKER);
        }
        for (pool, server) in self.model.pools.iter().zip(self.servers) {
            let mut waits = server.waits;
            let requests = waits.len();
            let mut stats = PoolStats {
                host: pool.host.clone(),
                workers: pool.workers,
                requests: requests as u64,
                waited: waits.iter().filter(|&&w| w > 0).count() as u64,
                ..PoolStats::default()
            };
            if requests > 0 {
                stats.mean_wait = waits.iter().map(|&w| w as f64).sum::<f64>() / requests as f64;
                let rank = (requests * 99).div_ceil(100) - 1;
                stats.p99_wait = *waits.select_nth_unstable(rank).1;
                stats.max_wait = waits.iter().copied().max().unwrap_or(0);
            }
            self.out.pools.push(stats);
        }
        // Stable: equal times keep the order in which they were made.
        self.out.lines.sort_by_key(|l| l.time);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;
    use rand::SeedableRng;

    fn make(config: &str, messages: u64) -> Generated {
        let model = parse(config).unwrap();
        let options = Options {
            start: 0,
            stop: Stop::Messages(messages),
            network: Some((100_000, 20_000)),
            resolution: 1,
        };
        generate(&model, &options, &mut ChaCha8Rng::seed_from_u64(9))
    }

    /// Every call is answered, at each end: no instance is left waiting.
    fn all_answered(trace: &Generated) {
        let calls = trace
            .lines
            .iter()
            .filter(|l| l.kind == StepKind::Call)
            .count();
        let returns = trace
            .lines
            .iter()
            .filter(|l| l.kind == StepKind::Return)
            .count();
        assert_eq!(calls, returns);
    }

    #[test]
    fn calls_back_and_side_by_side_share_their_instance_s_worker() {
        let back = make(
            "[hosts.b]\nworkers = 1\n[[tracelet]]\nname = \"t\"\nparallel = 4\nsteps = [\"call a b\", \"call b c after 1ms\", \"call c b after 1ms\", \"return b c after 1ms\", \"return c b after 1ms\", \"return b a after 1ms\"]\n",
            6_000,
        );
        all_answered(&back);
        // One worker taken per instance, the call back riding on it.
        assert_eq!(back.pools[0].requests, back.instances);
        assert!(back.pools[0].waited > back.instances / 2);
        let fan_out = make(
            "[hosts.c]\nworkers = 1\n[[tracelet]]\nname = \"t\"\nparallel = 4\nsteps = [\"call a b\", \"call b c after 1ms\", \"call b c after 0.5ms\", \"return c b after 3ms\", \"return c b after 1ms\", \"return b a after 1ms\"]\n",
            6_000,
        );
        all_answered(&fan_out);
        assert_eq!(fan_out.pools[0].requests, fan_out.instances);
        // The workers of calls into c: taken ones are recorded, others are not.
        let into_c: Vec<Option<u32>> = fan_out
            .lines
            .iter()
            .filter(|l| {
                l.kind == StepKind::Call && !l.received && fan_out.nodes[l.to as usize] == "c"
            })
            .map(|l| fan_out.worker(l.call.unwrap()))
            .collect();
        assert_eq!(
            into_c.iter().filter(|w| **w == Some(0)).count() as u64,
            fan_out.instances
        );
        assert_eq!(
            into_c.iter().filter(|w| w.is_none()).count() as u64,
            fan_out.instances
        );
    }

    #[test]
    fn a_host_acts_after_its_answer_without_a_worker() {
        // A write-back: b answers, then calls c; its worker is free from the answer on.
        let trace = make(
            "[hosts.b]\nworkers = 1\n[[tracelet]]\nname = \"t\"\nparallel = 3\nsteps = [\"call a b\", \"return b a after 1ms\", \"call b c after 5ms\", \"return c b after 1ms\"]\n",
            3_000,
        );
        all_answered(&trace);
        let stats = &trace.pools[0];
        assert_eq!(stats.requests, trace.instances);
        // Waits are at most the service of the calls ahead (1 ms each, 2 ahead at most).
        assert!(stats.max_wait <= 2_000_000 + 400_000, "{stats:?}");
        assert!(stats.mean_wait <= stats.p99_wait as f64 && stats.p99_wait <= stats.max_wait);
    }
}
