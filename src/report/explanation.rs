//! `--explain`: one call's parent choice in words and a table of its candidates, so a
//! user can see why it was placed where it was. The numbers come from
//! [`crate::nesting::explain`].

use crate::nesting::explain::Explanation;
use crate::nesting::parents::{Penalties, NO_PARENT};
use crate::nesting::Nesting;
use crate::trace::time::{format_seconds, human_duration};
use crate::trace::Trace;
use std::io::{self, Write};

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
        writeln!(
            out,
            "call {}, sent at {} s, answered after {}",
            call_name(e.call),
            format_seconds(call.caller_send),
            human_duration((call.caller_return - call.caller_send) as f64)
        )?;
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
        writeln!(
            out,
            "{} candidate parent{} (calls into {node} open around it); score = scoreboard × (1+overlapping)^-{} × (1+same callee)^-{} × (1+children)^-{}:",
            e.candidates.len(),
            if e.candidates.len() == 1 { "" } else { "s" },
            penalties.overlap,
            penalties.same_callee,
            penalties.any_child
        )?;
        let rows: Vec<[String; 9]> = e
            .candidates
            .iter()
            .map(|c| {
                let s = &c.score;
                [
                    if c.parent == e.chosen { "*" } else { "" }.to_owned(),
                    call_name(c.parent),
                    human_duration(c.delay as f64),
                    format!("{:.4}", s.scoreboard),
                    s.overlapping.to_string(),
                    s.same_callee.to_string(),
                    s.children.to_string(),
                    format!("{:.4}", s.penalty),
                    format!("{:.4}", s.score),
                ]
            })
            .collect();
        let header = [
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
        let mut widths = header.map(|h| h.chars().count());
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 9], out: &mut dyn Write| -> io::Result<()> {
            let mut text = String::new();
            for (i, (cell, &w)) in cells.iter().zip(&widths).enumerate() {
                let pad = w - cell.chars().count();
                // Names left, numbers right.
                if i <= 1 {
                    text.push_str(cell);
                    text.extend(std::iter::repeat(' ').take(pad));
                } else {
                    text.extend(std::iter::repeat(' ').take(pad));
                    text.push_str(cell);
                }
                text.push_str("  ");
            }
            writeln!(out, "  {}", text.trim_end())
        };
        line(header, out)?;
        for row in &rows {
            line(row.each_ref().map(String::as_str), out)?;
        }
        match (e.chosen, e.candidates.get(1)) {
            (NO_PARENT, _) => writeln!(out, "No candidate scored: it is a root.")?,
            (chosen, next) => {
                let best = e.candidates[0].score.score;
                let margin = match next {
                    Some(next) if next.score.score > 0.0 => {
                        format!(", {:.2}× the next best score", best / next.score.score)
                    }
                    Some(_) => ", the only one with a score above zero".to_owned(),
                    None => ", the only candidate".to_owned(),
                };
                writeln!(out, "Chosen: {}{margin}.", call_name(chosen))?;
            }
        }
        if e.parent != e.chosen {
            writeln!(
                out,
                "That parent made a cycle (coarse or skewed times), which was cut here: the call is a root."
            )?;
        }
    }
    Ok(())
}
