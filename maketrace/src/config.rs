//! The tracelet configuration: TOML in, a validated [`Model`] out. Owns the step syntax
//! and every config error message; generation is elsewhere.
//!
//! ```toml
//! [alternatives]            # a name standing for a set: one member per instance
//! WS = ["ws1", "ws2"]
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

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// Alternative sets, indexed by [`Slot::OneOf`].
    pub alternatives: Vec<Vec<String>>,
    /// The tracelets.
    pub tracelets: Vec<Tracelet>,
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
    Ok(Model {
        alternatives,
        tracelets,
    })
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
}
