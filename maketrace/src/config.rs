//! The tracelet configuration: TOML in, a validated [`Model`] out. Owns the step syntax
//! and every config error message; generation is elsewhere.
//!
//! ```toml
//! [alternatives]            # a name standing for a set: one member per instance
//! WS = ["ws1", "ws2"]
//!
//! [hosts.db]                # a bounded worker pool (hosts not named here have no bound)
//! workers = 4               # at most 4 calls into db served at once; the rest wait
//! queue_jitter = "0.2ms"    # optional: waiting calls are served in arrival order, each
//!                           # keyed by its arrival plus a uniform draw in [0, 0.2 ms]
//!
//! [[tracelet]]
//! name = "browse"
//! parallel = 8              # instances running side by side
//! think = ["0ms", "20ms"]   # uniform pause before each lane's next instance
//! steps = [
//!   "call client WS",
//!   "call WS db after 1ms±0.2ms",   # Gaussian delay before the step (never negative)
//!   "return db WS after 5ms±1ms",   # closes the oldest open call WS→db
//!   "return WS client after 0.5ms",
//! ]
//! ```
//!
//! A host with a pool serves each call into it on one of its `workers`: a call that
//! arrives while all are busy waits in a first-in, first-out queue, and the host's first
//! action for it (its first call out, or its return) is timed from when a worker takes
//! it, instead of from its arrival. A worker is busy from then until the host sends the
//! return. Clients are closed loops (each lane's next instance starts after its last
//! one's answer and a think time), so with more lanes than workers calls queue. A proxy
//! is a pooled host whose steps forward each call as one call out (`call web app`, then
//! `return app web`, `return web client`): its worker is held while the call it
//! forwarded waits and is served downstream. The rules of the model:
//!
//! - Only calls take workers; free-form messages and what a host sends outside any call
//!   it serves (a write-back after its answer) wait for none.
//! - The calls of one path instance into a host it is already served at (calls back, or
//!   calls side by side) share that instance's worker there and never wait for another,
//!   so a pool of 1 cannot deadlock on itself.
//! - Pools whose workers could wait for each other in a loop are refused, as they could
//!   deadlock: `a` waits for `b` where some tracelet has `b` act first for a call while
//!   a call into `a` is open (`a` calls `b`, say), so `a` then `b` in one tracelet and
//!   `b` then `a` in another are a loop.
//! - With `--connections worker-pool` captures carry each pooled host's calls out on the
//!   keep-alive connections of the worker that served the call they are made for.

use blackbox::trace::time::{parse_duration, Nanos};
use serde::Deserialize;
use std::collections::BTreeMap;

/// What a step sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// A call, opened until its return.
    Call,
    /// The return of the oldest open call from `to` to `from`.
    Return,
    /// A free-form message.
    Message,
}

/// A node slot: a fixed node, or an alternative chosen once per instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slot {
    /// This node.
    Node(String),
    /// One of these nodes, the same one for the whole instance.
    OneOf(usize),
}

/// One validated step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Call, return or message.
    pub kind: StepKind,
    /// Sender.
    pub from: Slot,
    /// Receiver.
    pub to: Slot,
    /// Mean delay before the step, ns.
    pub mean: Nanos,
    /// Standard deviation of that delay, ns.
    pub sd: Nanos,
}

/// One validated tracelet.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracelet {
    /// Its name (the truth column is `name-k`).
    pub name: String,
    /// Instances side by side.
    pub parallel: u32,
    /// Uniform think time between instances of one lane, ns.
    pub think: (Nanos, Nanos),
    /// The steps, in order.
    pub steps: Vec<Step>,
}

/// A host's bounded worker pool with its first-in, first-out queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool {
    /// The host.
    pub host: String,
    /// How many calls into it are served at once (at least 1).
    pub workers: u32,
    /// The largest random amount added to a waiting call's arrival time to order the
    /// queue, ns (0: strict arrival order).
    pub queue_jitter: Nanos,
}

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Alternative sets, indexed by [`Slot::OneOf`].
    pub alternatives: Vec<Vec<String>>,
    /// The tracelets.
    pub tracelets: Vec<Tracelet>,
    /// The hosts with bounded worker pools, by name.
    pub pools: Vec<Pool>,
}

impl Model {
    /// Multiplies every tracelet's parallel instances (at least 1 each): the
    /// parallelism knob of the paper's Figure 19.
    pub fn scale_parallel(&mut self, factor: f64) {
        for t in &mut self.tracelets {
            t.parallel = ((f64::from(t.parallel) * factor).round() as u32).max(1);
        }
    }

    /// Multiplies every step's delay deviation: the knob of the paper's Figure 20.
    pub fn scale_sd(&mut self, factor: f64) {
        for step in self.tracelets.iter_mut().flat_map(|t| t.steps.iter_mut()) {
            step.sd = (step.sd as f64 * factor).round() as Nanos;
        }
    }
}

/// A configuration that cannot be used, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not TOML, or a field of the wrong type, or an unknown field.
    #[error("{0}")]
    Syntax(String),
    /// A problem in one tracelet.
    #[error("tracelet `{tracelet}`: {problem}")]
    Tracelet {
        /// The tracelet's name.
        tracelet: String,
        /// What is wrong.
        problem: String,
    },
    /// A problem in one step.
    #[error("tracelet `{tracelet}`, step {step} (`{text}`): {problem}")]
    Step {
        /// The tracelet's name.
        tracelet: String,
        /// 1-based step number.
        step: usize,
        /// The step as written.
        text: String,
        /// What is wrong.
        problem: String,
    },
    /// A problem in one host's `[hosts.<name>]` table.
    #[error("[hosts.{host}]: {problem}")]
    Host {
        /// The host's name as written.
        host: String,
        /// What is wrong.
        problem: String,
    },
    /// No tracelet at all.
    #[error("the config has no [[tracelet]]")]
    Empty,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    alternatives: BTreeMap<String, Vec<String>>,
    #[serde(default, rename = "tracelet")]
    tracelets: Vec<RawTracelet>,
    #[serde(default)]
    hosts: BTreeMap<String, RawHost>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    workers: Option<i64>,
    #[serde(default)]
    queue_jitter: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTracelet {
    name: String,
    #[serde(default = "one")]
    parallel: u32,
    #[serde(default)]
    think: Option<(String, String)>,
    steps: Vec<String>,
}

fn one() -> u32 {
    1
}

/// Parses and validates a configuration.
pub fn parse(text: &str) -> Result<Model, ConfigError> {
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))?;
    if raw.tracelets.is_empty() {
        return Err(ConfigError::Empty);
    }
    let names: Vec<&String> = raw.alternatives.keys().collect();
    for (name, members) in &raw.alternatives {
        check_name(name).map_err(|p| ConfigError::Syntax(format!("alternatives `{name}`: {p}")))?;
        if members.is_empty() {
            return Err(ConfigError::Syntax(format!(
                "alternatives `{name}` has no members"
            )));
        }
        for m in members {
            check_name(m)
                .map_err(|p| ConfigError::Syntax(format!("alternatives `{name}`: {p}")))?;
        }
    }
    let alternatives: Vec<Vec<String>> = raw.alternatives.values().cloned().collect();
    let slot = |name: &str| match names.iter().position(|n| n.as_str() == name) {
        Some(i) => Slot::OneOf(i),
        None => Slot::Node(name.to_owned()),
    };
    let mut tracelets = Vec::new();
    for t in raw.tracelets {
        let tracelet_error = |problem: String| ConfigError::Tracelet {
            tracelet: t.name.clone(),
            problem,
        };
        check_name(&t.name).map_err(tracelet_error)?;
        if t.parallel == 0 {
            return Err(tracelet_error("parallel must be at least 1".into()));
        }
        let think = match &t.think {
            None => (0, 0),
            Some((lo, hi)) => {
                let lo =
                    parse_duration(lo).map_err(|e| tracelet_error(format!("think `{lo}`: {e}")))?;
                let hi =
                    parse_duration(hi).map_err(|e| tracelet_error(format!("think `{hi}`: {e}")))?;
                if lo < 0 || hi < lo {
                    return Err(tracelet_error(
                        "think must be [low, high] with 0 ≤ low ≤ high".into(),
                    ));
                }
                (lo, hi)
            }
        };
        if t.steps.is_empty() {
            return Err(tracelet_error("no steps".into()));
        }
        let mut steps = Vec::new();
        let mut open: Vec<(Slot, Slot)> = Vec::new();
        for (k, text) in t.steps.iter().enumerate() {
            let step_error = |problem: String| ConfigError::Step {
                tracelet: t.name.clone(),
                step: k + 1,
                text: text.clone(),
                problem,
            };
            let step = parse_step(text, &slot).map_err(step_error)?;
            match step.kind {
                StepKind::Call => open.push((step.from.clone(), step.to.clone())),
                StepKind::Return => {
                    let Some(i) = open
                        .iter()
                        .position(|(f, to)| *f == step.to && *to == step.from)
                    else {
                        return Err(step_error(format!(
                            "a return with no open call from {} to {}",
                            words(&step.to, &names),
                            words(&step.from, &names)
                        )));
                    };
                    open.remove(i);
                }
                StepKind::Message => {}
            }
            steps.push(step);
        }
        if let Some((from, to)) = open.first() {
            return Err(tracelet_error(format!(
                "the call from {} to {} is never returned",
                words(from, &names),
                words(to, &names)
            )));
        }
        tracelets.push(Tracelet {
            name: t.name,
            parallel: t.parallel,
            think,
            steps,
        });
    }
    let pools = pools(&raw.hosts, &names, &alternatives, &tracelets)?;
    Ok(Model {
        alternatives,
        tracelets,
        pools,
    })
}

/// The `[hosts]` tables, validated: every host a node of some tracelet, at least one
/// worker, a jitter that is a duration, and no loop of pools that could deadlock.
fn pools(
    hosts: &BTreeMap<String, RawHost>,
    names: &[&String],
    alternatives: &[Vec<String>],
    tracelets: &[Tracelet],
) -> Result<Vec<Pool>, ConfigError> {
    let mut nodes: Vec<&str> = alternatives.iter().flatten().map(String::as_str).collect();
    for step in tracelets.iter().flat_map(|t| &t.steps) {
        for slot in [&step.from, &step.to] {
            if let Slot::Node(n) = slot {
                nodes.push(n);
            }
        }
    }
    nodes.sort_unstable();
    nodes.dedup();
    let mut pools = Vec::new();
    for (host, raw) in hosts {
        let host_error = |problem: String| ConfigError::Host {
            host: host.clone(),
            problem,
        };
        if let Some(i) = names.iter().position(|n| *n == host) {
            return Err(host_error(format!(
                "`{host}` is a set of [alternatives]; give each of its members ({}) a table \
                 of its own",
                alternatives[i].join(", ")
            )));
        }
        if nodes.binary_search(&host.as_str()).is_err() {
            return Err(host_error(format!(
                "no tracelet has a node `{host}` (the nodes: {})",
                nodes.join(", ")
            )));
        }
        let workers = match raw.workers {
            None => return Err(host_error("`workers` is missing (how many at once)".into())),
            Some(w) if !(1..=i64::from(u32::MAX)).contains(&w) => {
                return Err(host_error(format!("workers = {w}: must be at least 1")))
            }
            Some(w) => w as u32,
        };
        let queue_jitter = match &raw.queue_jitter {
            None => 0,
            Some(text) => match parse_duration(text) {
                Ok(j) if j >= 0 => j,
                Ok(_) => return Err(host_error(format!("queue_jitter `{text}` is negative"))),
                Err(e) => return Err(host_error(format!("queue_jitter `{text}`: {e}"))),
            },
        };
        pools.push(Pool {
            host: host.clone(),
            workers,
            queue_jitter,
        });
    }
    if let Some(cycle) = waiting_loop(&pools, alternatives, tracelets) {
        return Err(ConfigError::Host {
            host: cycle[0].clone(),
            problem: format!(
                "the pools of {} could deadlock: along each arrow some tracelet has the \
                 next host act first for a call while a call into the one before is open, \
                 so each could hold its workers while waiting for the next's",
                cycle.join(" → ")
            ),
        });
    }
    Ok(pools)
}

/// A loop of pooled hosts in which each could hold a worker while waiting for the
/// next's, as its hosts from the first back to the first; `None` if there is none.
/// An instance waits for a host's worker only where that host acts first for a call
/// into it (calls while one of the instance's is open there share its worker); it holds
/// a worker wherever it has a call open. So `a` waits for `b` where some tracelet has
/// `b` act first while a call into `a` is open.
fn waiting_loop(
    pools: &[Pool],
    alternatives: &[Vec<String>],
    tracelets: &[Tracelet],
) -> Option<Vec<String>> {
    let pooled = |name: &str| pools.iter().position(|p| p.host == name);
    let members = |slot: &Slot| -> Vec<usize> {
        match slot {
            Slot::Node(n) => pooled(n).into_iter().collect(),
            Slot::OneOf(i) => alternatives[*i].iter().filter_map(|m| pooled(m)).collect(),
        }
    };
    let mut waits = vec![Vec::new(); pools.len()];
    for t in tracelets {
        // Open calls (caller, callee), and the callees yet to act for a first call.
        let mut open: Vec<(&Slot, &Slot)> = Vec::new();
        let mut fresh: Vec<&Slot> = Vec::new();
        for step in &t.steps {
            if let Some(k) = fresh.iter().position(|s| **s == step.from) {
                fresh.remove(k);
                for (_, holder) in &open {
                    // One alternative slot is one member per instance.
                    let same_set = matches!((holder, &step.from),
                        (Slot::OneOf(a), Slot::OneOf(b)) if a == b);
                    for a in members(holder) {
                        for b in members(&step.from) {
                            if a != b && !same_set {
                                waits[a].push(b);
                            }
                        }
                    }
                }
            }
            match step.kind {
                StepKind::Call => {
                    if !open.iter().any(|(_, to)| **to == step.to) {
                        fresh.push(&step.to);
                    }
                    open.push((&step.from, &step.to));
                }
                StepKind::Return => {
                    if let Some(i) = open
                        .iter()
                        .position(|(from, to)| **from == step.to && **to == step.from)
                    {
                        open.remove(i);
                    }
                }
                StepKind::Message => {}
            }
        }
    }
    for w in &mut waits {
        w.sort_unstable();
        w.dedup();
    }
    // Depth-first search for a back edge; `path` holds the hosts on the current walk.
    fn walk(at: usize, waits: &[Vec<usize>], state: &mut [u8], path: &mut Vec<usize>) -> bool {
        state[at] = 1;
        path.push(at);
        for &next in &waits[at] {
            if state[next] == 1 {
                let from = path.iter().position(|&p| p == next).expect("on the walk");
                path.drain(..from);
                path.push(next);
                return true;
            }
            if state[next] == 0 && walk(next, waits, state, path) {
                return true;
            }
        }
        state[at] = 2;
        path.pop();
        false
    }
    let mut state = vec![0u8; pools.len()];
    for start in 0..pools.len() {
        let mut path = Vec::new();
        if state[start] == 0 && walk(start, &waits, &mut state, &mut path) {
            return Some(path.iter().map(|&p| pools[p].host.clone()).collect());
        }
    }
    None
}

fn words(slot: &Slot, names: &[&String]) -> String {
    match slot {
        Slot::Node(n) => n.clone(),
        Slot::OneOf(i) => names[*i].clone(),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || "(),#".contains(c)) {
        return Err(format!(
            "`{name}` is not a usable name (no spaces, parentheses, commas or #)"
        ));
    }
    Ok(())
}

/// `<call|return|message> <from> <to> [after <mean>[±<sd>]]`; `+-` may stand for `±`.
fn parse_step(text: &str, slot: &dyn Fn(&str) -> Slot) -> Result<Step, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let kind = match words.first().copied() {
        Some("call") => StepKind::Call,
        Some("return") => StepKind::Return,
        Some("message") => StepKind::Message,
        Some(other) => {
            return Err(format!(
                "unknown step `{other}` (expected call, return or message)"
            ))
        }
        None => return Err("empty step".into()),
    };
    let (from, to) = match (words.get(1), words.get(2)) {
        (Some(f), Some(t)) => (*f, *t),
        _ => return Err("a step needs a sender and a receiver".into()),
    };
    check_name(from)?;
    check_name(to)?;
    let (mean, sd) = match words.get(3..) {
        Some([]) | None => (0, 0),
        Some(["after", delay]) => parse_delay(delay)?,
        Some(rest) => {
            return Err(format!(
                "expected `after <delay>`, found `{}`",
                rest.join(" ")
            ))
        }
    };
    Ok(Step {
        kind,
        from: slot(from),
        to: slot(to),
        mean,
        sd,
    })
}

/// Parses `MEAN[±SD]` (`+-` for `±`) into nanoseconds.
pub fn parse_delay(text: &str) -> Result<(Nanos, Nanos), String> {
    let normalised = text.replace("+-", "±");
    let (mean, sd) = match normalised.split_once('±') {
        Some((m, s)) => (m, s),
        None => (normalised.as_str(), "0"),
    };
    let mean = parse_duration(mean).map_err(|e| format!("delay `{text}`: {e}"))?;
    let sd = parse_duration(sd).map_err(|e| format!("delay `{text}`: {e}"))?;
    if mean < 0 {
        return Err(format!("delay `{text}`: the mean cannot be negative"));
    }
    if sd < 0 {
        return Err(format!("delay `{text}`: a negative sd"));
    }
    Ok((mean, sd))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[alternatives]
WS = ["ws1", "ws2"]

[[tracelet]]
name = "req"
parallel = 3
think = ["1ms", "2ms"]
steps = ["call client WS", "call WS db after 1ms±0.5ms", "return db WS after 2ms+-1ms", "return WS client"]
"#;

    #[test]
    fn a_good_config_parses() {
        let m = parse(GOOD).unwrap();
        assert_eq!(
            m.alternatives,
            vec![vec!["ws1".to_string(), "ws2".to_string()]]
        );
        let t = &m.tracelets[0];
        assert_eq!((t.parallel, t.think), (3, (1_000_000, 2_000_000)));
        assert_eq!(
            t.steps[1],
            Step {
                kind: StepKind::Call,
                from: Slot::OneOf(0),
                to: Slot::Node("db".into()),
                mean: 1_000_000,
                sd: 500_000
            }
        );
        assert_eq!((t.steps[2].mean, t.steps[2].sd), (2_000_000, 1_000_000));
    }

    fn error(config: &str) -> String {
        parse(config).unwrap_err().to_string()
    }

    #[test]
    fn a_return_with_no_open_call_names_tracelet_and_step() {
        let e = error("[[tracelet]]\nname = \"t\"\nsteps = [\"call a b\", \"return c a\"]\n");
        assert_eq!(
            e,
            "tracelet `t`, step 2 (`return c a`): a return with no open call from a to c"
        );
    }

    #[test]
    fn an_unknown_field_is_named() {
        let e = error(
            "[[tracelet]]\nname = \"t\"\nparalel = 2\nsteps = [\"call a b\", \"return b a\"]\n",
        );
        assert!(e.contains("unknown field `paralel`"), "{e}");
    }

    #[test]
    fn a_negative_sd_is_refused() {
        let e = error(
            "[[tracelet]]\nname = \"t\"\nsteps = [\"call a b after 1ms±-1ms\", \"return b a\"]\n",
        );
        assert_eq!(
            e,
            "tracelet `t`, step 1 (`call a b after 1ms±-1ms`): delay `1ms±-1ms`: a negative sd"
        );
    }

    #[test]
    fn an_unreturned_call_and_bad_words_are_refused() {
        assert_eq!(
            error("[[tracelet]]\nname = \"t\"\nsteps = [\"call a b\"]\n"),
            "tracelet `t`: the call from a to b is never returned"
        );
        assert!(
            error("[[tracelet]]\nname = \"t\"\nsteps = [\"send a b\"]\n")
                .contains("unknown step `send`")
        );
        assert!(error(
            "[[tracelet]]\nname = \"t\"\nsteps = [\"call a b later 3ms\", \"return b a\"]\n"
        )
        .contains("expected `after <delay>`"));
        assert!(error(
            "[[tracelet]]\nname = \"t\"\nsteps = [\"call a b after 3d\", \"return b a\"]\n"
        )
        .contains("unknown unit"));
        assert_eq!(error(""), "the config has no [[tracelet]]");
    }

    const TIERS: &str = "[[tracelet]]\nname = \"t\"\nsteps = [\"call a AP\", \"call AP db\", \"return db AP\", \"return AP a\"]\n";

    #[test]
    fn pools_parse_and_name_their_host() {
        let m = parse(&format!(
            "[alternatives]\nAP = [\"ap1\", \"ap2\"]\n[hosts.ap2]\nworkers = 3\nqueue_jitter = \"0.5ms\"\n[hosts.db]\nworkers = 1\n{TIERS}"
        ))
        .unwrap();
        assert_eq!(
            m.pools,
            vec![
                Pool {
                    host: "ap2".into(),
                    workers: 3,
                    queue_jitter: 500_000
                },
                Pool {
                    host: "db".into(),
                    workers: 1,
                    queue_jitter: 0
                }
            ]
        );
        let e = error(&format!(
            "[alternatives]\nAP = [\"ap1\", \"ap2\"]\n[hosts.AP]\nworkers = 3\n{TIERS}"
        ));
        assert_eq!(
            e,
            "[hosts.AP]: `AP` is a set of [alternatives]; give each of its members (ap1, ap2) a table of its own"
        );
        let e = error(&format!(
            "[alternatives]\nAP = [\"ap1\", \"ap2\"]\n[hosts.db]\nworkers = -1\n{TIERS}"
        ));
        assert_eq!(e, "[hosts.db]: workers = -1: must be at least 1");
    }

    #[test]
    fn only_pools_that_could_wait_on_each_other_in_a_loop_are_refused() {
        let hosts = "[hosts.b]\nworkers = 1\n[hosts.c]\nworkers = 1\n[hosts.d]\nworkers = 1\n";
        let b_and_c = "[hosts.b]\nworkers = 1\n[hosts.c]\nworkers = 1\n";
        // b calls c and c calls back into b: the instance shares b's worker, and c's
        // workers serve only calls from b's, so they never wait for each other.
        let back = "[[tracelet]]\nname = \"back\"\nsteps = [\"call a b\", \"call b c\", \"call c b\", \"return b c\", \"return c b\", \"return b a\"]\n";
        assert!(parse(&format!("{b_and_c}{back}")).is_ok());
        let hop = |name: &str, from: &str, to: &str| {
            format!(
                "[[tracelet]]\nname = \"{name}\"\nsteps = [\"call a {from}\", \"call {from} {to}\", \"return {to} {from}\", \"return {from} a\"]\n"
            )
        };
        // b calls c in one tracelet, c calls b in another: b's workers could all wait
        // for c's while c's wait for b's.
        let (down, up) = (hop("down", "b", "c"), hop("up", "c", "b"));
        assert!(parse(&format!("{b_and_c}{down}")).is_ok());
        assert!(error(&format!("{b_and_c}{down}{up}"))
            .starts_with("[hosts.b]: the pools of b → c → b could deadlock"));
        // b → c, c → d and d → b, each in a tracelet of its own: a loop of three.
        let (on, around) = (hop("on", "c", "d"), hop("around", "d", "b"));
        assert!(parse(&format!("{hosts}{down}{on}")).is_ok());
        assert!(error(&format!("{hosts}{down}{on}{around}"))
            .starts_with("[hosts.b]: the pools of b → c → d → b could deadlock"));
        // Two members of one alternative set are never in one instance together.
        let alternatives = "[alternatives]\nS = [\"s1\", \"s2\"]\n[hosts.s1]\nworkers = 1\n[hosts.s2]\nworkers = 1\n";
        let nested = "[[tracelet]]\nname = \"n\"\nsteps = [\"call a S\", \"call S x\", \"call x S\", \"return S x\", \"return x S\", \"return S a\"]\n";
        assert!(parse(&format!("{alternatives}{nested}")).is_ok());
    }
}
