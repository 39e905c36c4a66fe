//! A seeded synthetic trace of the paper's multi-tier system (Figure 10: client, two
//! web servers behind a balancer, an authentication server, two application servers,
//! one database), for benchmarks and the shipped sample. Every call is observed at both
//! ends with a small network delay, and carries its request id as the truth column.
//!
//! `maketrace` (config-driven tracelets) supersedes this for accuracy studies; this
//! generator exists so that benchmarks need no external files.

#![allow(dead_code)]

use blackbox::trace::{End, Kind, Message, Nanos, TraceBuilder, Truth};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, LogNormal};
use std::io::{self, Write};

const NODES: [&str; 7] = ["client", "ws1", "ws2", "auth", "ap1", "ap2", "db"];
const CLIENT: u8 = 0;
const AUTH: u8 = 3;
const DB: u8 = 6;
const US: f64 = 1_000.0;

/// One observed end of one message.
#[derive(Clone, Copy)]
pub struct Event {
    pub time: Nanos,
    pub end: End,
    pub kind: Kind,
    pub from: u8,
    pub to: u8,
    pub call: u64,
    pub request: u64,
}

/// Generates `requests` requests arriving as a Poisson process with mean gap `gap_us`.
pub struct MultiTier {
    rng: ChaCha8Rng,
    next_call: u64,
    events: Vec<Event>,
    request: u64,
}

impl MultiTier {
    /// Generates the whole trace, ordered by time.
    pub fn generate(seed: u64, requests: u64, gap_us: f64) -> Vec<Event> {
        let mut g = MultiTier {
            rng: ChaCha8Rng::seed_from_u64(seed),
            next_call: 0,
            events: Vec::new(),
            request: 0,
        };
        let start: Nanos = 1_700_000_000_000_000_000;
        let gaps = Exp::new(1.0 / (gap_us * US)).expect("positive rate");
        let mut t = start as f64;
        for r in 0..requests {
            g.request = r;
            g.one_request(t as Nanos);
            t += gaps.sample(&mut g.rng);
        }
        let mut events = g.events;
        events.sort_by_key(|e| (e.time, e.call, e.kind, e.end));
        events
    }

    fn pause(&mut self, median_us: f64) -> Nanos {
        let d = LogNormal::new((median_us * US).ln(), 0.5).expect("finite");
        d.sample(&mut self.rng) as Nanos
    }

    fn network(&mut self) -> Nanos {
        self.rng.gen_range(60_000..140_000)
    }

    /// A call from `from` to `to` sent at `t`; `body` runs at the callee from the arrival
    /// time and returns when the callee replies. Returns when the reply reaches `from`.
    fn call(
        &mut self,
        from: u8,
        to: u8,
        t: Nanos,
        body: impl FnOnce(&mut Self, Nanos) -> Nanos,
    ) -> Nanos {
        let call = self.next_call;
        self.next_call += 1;
        let arrive = t + self.network();
        let reply = body(self, arrive);
        let back = reply + self.network();
        let request = self.request;
        let mut push = |time, end, kind, from, to| {
            self.events.push(Event {
                time,
                end,
                kind,
                from,
                to,
                call,
                request,
            })
        };
        push(t, End::Sent, Kind::Call, from, to);
        push(arrive, End::Received, Kind::Call, from, to);
        push(reply, End::Sent, Kind::Return, to, from);
        push(back, End::Received, Kind::Return, to, from);
        back
    }

    fn one_request(&mut self, t: Nanos) {
        let web = self.rng.gen_range(1..=2);
        self.call(CLIENT, web, t, |g, t| {
            let mut t = t + g.pause(300.0);
            if g.rng.gen_bool(0.9) {
                t = g.call(web, AUTH, t, |g, t| t + g.pause(2_000.0));
                t += g.pause(200.0);
            }
            let app = g.rng.gen_range(4..=5);
            t = g.call(web, app, t, |g, t| {
                let mut t = t + g.pause(1_000.0);
                for _ in 0..g.rng.gen_range(0..=2) {
                    t = g.call(app, DB, t, |g, t| t + g.pause(3_000.0));
                    t += g.pause(300.0);
                }
                t
            });
            t + g.pause(200.0)
        });
    }
}

/// Feeds the events to a trace builder, as a capture reader would.
pub fn build(events: &[Event], builder: &mut TraceBuilder) {
    let nodes: Vec<_> = NODES.iter().map(|n| builder.node(n)).collect();
    for e in events {
        let call_id = builder.call_id(&format!("c{}", e.call));
        let message = Message::observed(
            e.end,
            e.time,
            e.kind,
            nodes[e.from as usize],
            nodes[e.to as usize],
            call_id,
            Truth::NONE,
        );
        builder.push(message);
    }
}

/// Writes the events as a text trace with the request as the truth column.
pub fn write_text(events: &[Event], out: &mut impl Write) -> io::Result<()> {
    let mut line = String::with_capacity(96);
    for e in events {
        line.clear();
        blackbox::trace::time::push_seconds(&mut line, e.time);
        let op = blackbox::trace::text::op_text(e.kind, e.end);
        use std::fmt::Write as _;
        let _ = writeln!(
            line,
            " {op} {} {} c{} r{}",
            NODES[e.from as usize], NODES[e.to as usize], e.call, e.request
        );
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}
