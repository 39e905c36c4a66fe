//! `--explain`: one call's parent choice in words and a table of its candidates, so a
//! user can see why it was placed where it was, and where the call's own time went (its
//! own, waiting on its calls, its messages in transit). The numbers come from
//! [`crate::nesting::explain`] and the nesting.

use crate::nesting::explain::{Explanation, Placed};
use crate::nesting::{Nesting, ASYNC_CONFIDENCE};
use crate::nesting::{Penalties, NO_PARENT};
use crate::trace::time::{format_seconds, human_duration};
use crate::trace::Trace;
use std::io::{self, Write};

/// The call's latency in parts, as the patterns count them: "at app: 755.0 µs, 666.0 µs
/// its own, 89.0 µs waiting on its 1 call; then its answer 41.6 ms in transit (41.5 ms
/// held by TCP: ...)".
fn latency_parts(trace: &Trace, nesting: &Nesting, call: u32) -> String {
    use crate::trace::Kind;
    let pairs = &nesting.pairs;
    let pair = &pairs[call as usize];
    let latency = pair.latency();
    let children: Vec<&crate::nesting::call_pairs::CallPair> = (0..pairs.len())
        .filter(|&i| nesting.parent.get(i) == Some(&call))
        .map(|i| &pairs[i])
        .collect();
    let (ask, answer) = (
        trace.transit(pair.call_id, Kind::Call),
        trace.transit(pair.call_id, Kind::Return),
    );
    let calls = children.iter().map(|kid| {
        let spread = trace.transit(kid.call_id, Kind::Return).spread;
        (kid.caller_send - pair.callee_recv, kid.latency() + spread)
    });
    let calls = std::iter::once((0, ask.spread)).chain(calls);
    let own = crate::nesting::patterns::own_time(latency, calls, &mut Vec::new());
    let request = ask.spread.clamp(0, latency);
    let waiting = (latency - own - request).max(0);
    let mut said = format!(
        "at {}: {} from its request's first byte to its answer's, ",
        trace.node_name(pair.callee),
        human_duration(latency as f64),
    );
    match children.len() {
        0 if own == latency => said.push_str("all its own (it made no calls)"),
        calls => said.push_str(&format!(
            "{} its own, {} waiting on its {calls} call{}",
            human_duration(own as f64),
            human_duration(waiting as f64),
            if calls == 1 { "" } else { "s" },
        )),
    }
    let held = |transit: crate::trace::Transit| match transit.why {
        Some(why) => format!(
            " ({} held by TCP, {})",
            human_duration(transit.held as f64),
            why.meaning()
        ),
        None => String::new(),
    };
    if request > 0 {
        said.push_str(&format!(
            ", {} for the rest of its request{}",
            human_duration(request as f64),
            held(ask)
        ));
    }
    if answer.spread > 0 {
        said.push_str(&format!(
            "; then its answer {} in transit{}",
            human_duration(answer.spread as f64),
            held(answer)
        ));
    }
    said.push('.');
    said
}

/// Writes the explanations, one block each, separated by blank lines.
pub fn write(
    trace: &Trace,
    nesting: &Nesting,
    penalties: Penalties,
    explanations: &[Explanation],
    out: &mut dyn Write,
) -> io::Result<()> {
    let call_name = |i: u32| {
        let p = &nesting.pairs[i as usize];
        format!(
            "{} → {} (id {})",
            trace.node_name(p.caller),
            trace.node_name(p.callee),
            trace.call_id_text(p.call_id)
        )
    };
    for (n, e) in explanations.iter().enumerate() {
        if n > 0 {
            writeln!(out)?;
        }
        let call = &nesting.pairs[e.call as usize];
        let node = trace.node_name(e.node);
        let answer = trace
            .transit(call.call_id, crate::trace::Kind::Return)
            .spread;
        writeln!(
            out,
            "call {}, sent at {} s, answered after {}{}",
            call_name(e.call),
            format_seconds(call.caller_send),
            human_duration((call.caller_return - call.caller_send) as f64),
            match answer {
                0 => String::new(),
                _ => format!(
                    " (its answer's last byte after {})",
                    human_duration((call.caller_return - call.caller_send + answer) as f64)
                ),
            }
        )?;
        writeln!(out, "{}", latency_parts(trace, nesting, e.call))?;
        let parent = match e.parent {
            NO_PARENT => "no parent".to_owned(),
            parent => call_name(parent),
        };
        match e.placed {
            Some(Placed::ThroughBroker) => {
                writeln!(
                    out,
                    "A delivery through the broker {}: its parent is the message that brought it in, {parent}, linked by the destination and payload both carry; no choice was made.",
                    trace.node_name(call.caller)
                )?;
                continue;
            }
            Some(Placed::InOrder) => {
                writeln!(
                    out,
                    "{node} serves its calls in order at an end of a broker: exactly as many calls of this kind left it as calls of one type came in, so each is the work of the call of its place in that order. Its parent is {parent}; no choice was made.",
                )?;
                continue;
            }
            None => {}
        }
        writeln!(
            out,
            "{node} decides the parents of its {} outgoing calls in call-time order; this is number {}.",
            e.decisions,
            e.order + 1
        )?;
        if e.candidates.is_empty() {
            writeln!(
                out,
                "No call into {node} was open around it on {node}'s clock: it starts a path (a root)."
            )?;
            continue;
        }
        // Answered calls the paper's step scored are the late-return repair's; those it
        // did not are the asynchronous window's.
        let answered = e.candidates.iter().filter(|c| c.answered_before);
        let late = answered.clone().any(|c| c.score.is_some());
        let answered = answered.count();
        writeln!(
            out,
            "{} candidate parent{} (calls into {node} open around it{}); score = scoreboard × (1+overlapping)^-{} × (1+same callee)^-{} × (1+children)^-{}:",
            e.candidates.len(),
            if e.candidates.len() == 1 { "" } else { "s" },
            if late {
                "; none enclosed it, so those open when it left: calls of its kind almost always are enclosed, read as a late timestamp".to_owned()
            } else if answered > 0 {
                format!(", or answered before it returned: {answered}, which only the joint choice weighs")
            } else {
                String::new()
            },
            penalties.overlap,
            penalties.same_callee,
            penalties.any_child
        )?;
        let joint = e.candidates.iter().any(|c| c.joint_loss.is_some());
        let connection = e.candidates.iter().any(|c| c.connection.is_some());
        let rows: Vec<Vec<String>> = e
            .candidates
            .iter()
            .map(|c| {
                let mut row = vec![
                    if c.parent == e.chosen { "*" } else { "" }.to_owned(),
                    if c.answered_before {
                        format!("{} (answered)", call_name(c.parent))
                    } else {
                        call_name(c.parent)
                    },
                    human_duration(c.delay as f64),
                ];
                match &c.score {
                    Some(s) => row.extend([
                        format!("{:.4}", s.scoreboard),
                        s.overlapping.to_string(),
                        s.same_callee.to_string(),
                        s.children.to_string(),
                        format!("{:.4}", s.penalty),
                        format!("{:.4}", s.score),
                    ]),
                    None => row.extend(std::iter::repeat_n("-".to_owned(), 6)),
                }
                if joint {
                    row.push(c.joint_loss.map_or("-".to_owned(), |l| format!("{l:.3}")));
                }
                if connection {
                    row.push(c.connection.map_or("-".to_owned(), |l| format!("{l:+.3}")));
                }
                row
            })
            .collect();
        let mut header = vec![
            "",
            "candidate parent",
            "delay",
            "scoreboard",
            "overlapping",
            "same callee",
            "children",
            "penalty",
            "score",
        ];
        if joint {
            header.push("joint loss");
        }
        if connection {
            header.push("connection");
        }
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str], out: &mut dyn Write| -> io::Result<()> {
            let mut text = String::new();
            for (i, (cell, &w)) in cells.iter().zip(&widths).enumerate() {
                let pad = " ".repeat(w - cell.chars().count());
                // Names left, numbers right.
                if i <= 1 {
                    text.push_str(cell);
                    text.push_str(&pad);
                } else {
                    text.push_str(&pad);
                    text.push_str(cell);
                }
                text.push_str("  ");
            }
            writeln!(out, "  {}", text.trim_end())
        };
        line(&header, out)?;
        for row in &rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            line(&cells, out)?;
        }
        if joint {
            writeln!(
                out,
                "The joint choice (the default) weighs every candidate under a model of what each call does while open, learned from the trace: when it calls out after its latest event (arrival, a call leaving or returning), the gaps from its arrival and to its answer, and how many calls of each kind it makes in which order; joint loss = log-likelihood the whole assignment would lose with that parent instead."
            )?;
            if connection {
                writeln!(
                    out,
                    "connection = ln of how much likelier this call's connection is, given the connection the candidate came in on, than given its kind alone, as the node learned it (above 0: the calls served on that connection go out on this one)."
                )?;
            }
            if e.greedy != e.chosen {
                writeln!(
                    out,
                    "The paper's greedy step chose {}; the joint search moved the call.",
                    if e.greedy == NO_PARENT {
                        "no parent".to_owned()
                    } else {
                        call_name(e.greedy)
                    }
                )?;
            }
        }
        match (e.chosen, e.candidates.get(1)) {
            (NO_PARENT, _) => writeln!(out, "No candidate scored: it is a root.")?,
            (chosen, next) => {
                let margin = match next {
                    Some(next) if joint => {
                        let lead = next.joint_loss.unwrap_or(0.0).max(0.0);
                        format!(
                            ", ahead of the next by {lead:.3} in log-likelihood (confidence {:.3}, swaps and exchanges weighed too)",
                            e.confidence
                        )
                    }
                    Some(next) if next.score.is_some_and(|s| s.score > 0.0) => format!(
                        ", {:.2}× the next best score",
                        e.candidates[0].score.map_or(0.0, |s| s.score)
                            / next.score.map_or(1.0, |s| s.score)
                    ),
                    Some(_) => ", the only one with a score above zero".to_owned(),
                    None => ", the only candidate".to_owned(),
                };
                writeln!(out, "Chosen: {}{margin}.", call_name(chosen))?;
            }
        }
        if e.set_aside_by_id > 0 {
            writeln!(
                out,
                "Its request id names that parent: {} other call{} open around it, carrying another request's id or none, {} set aside (--ignore-ids to weigh them).",
                e.set_aside_by_id,
                if e.set_aside_by_id == 1 { "" } else { "s" },
                if e.set_aside_by_id == 1 { "was" } else { "were" },
            )?;
        }
        let answered = |parent: u32| {
            e.candidates
                .iter()
                .any(|c| c.parent == parent && c.answered_before)
        };
        if e.parent != e.chosen && answered(e.chosen) {
            writeln!(
                out,
                "That parent answered before the call returned, and was not likelier than the next by odds of {:.0} to 1: the call is left a root.",
                1.0 / (1.0 - ASYNC_CONFIDENCE)
            )?;
        } else if e.parent != e.chosen {
            writeln!(
                out,
                "That parent made a cycle (coarse or skewed times), which was cut here: the call is a root."
            )?;
        }
    }
    Ok(())
}
