//! `blackbox diff` in words: what appeared, vanished or changed share, and which
//! node's own time changed beyond noise (the JSON is the comparison's serde form).

use crate::compare::Comparison;
use crate::trace::time::human_duration;
use std::io::{self, Write};

fn percent(share: f64) -> String {
    format!("{:.1}%", 100.0 * share)
}

/// Writes the comparison for people.
pub fn write(c: &Comparison, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "before: {} requests; after: {} requests; {} tests, beyond noise at {} together (Mann-Whitney U, Bonferroni)",
        c.requests_before, c.requests_after, c.tests, c.alpha
    )?;
    for (title, list, sign) in [
        ("appeared (after only)", &c.appeared, '+'),
        ("vanished (before only)", &c.vanished, '-'),
    ] {
        if list.is_empty() {
            writeln!(out, "{title}: none")?;
            continue;
        }
        writeln!(out, "{title}:")?;
        for p in list {
            let (count, share) = if sign == '+' {
                (p.after, p.share_after)
            } else {
                (p.before, p.share_before)
            };
            writeln!(
                out,
                "  {sign} {} ({count} request{}, {})",
                p.signature,
                if count == 1 { "" } else { "s" },
                percent(share)
            )?;
        }
    }
    let changed: Vec<_> = c.common.iter().filter(|p| p.significant).collect();
    if changed.is_empty() {
        writeln!(
            out,
            "share of requests: no common pattern changed beyond noise"
        )?;
    } else {
        writeln!(out, "share of requests changed:")?;
        for p in changed {
            writeln!(
                out,
                "  {} -> {}  {}",
                percent(p.share_before),
                percent(p.share_after),
                p.signature
            )?;
        }
    }
    let nodes: Vec<_> = c.nodes.iter().filter(|n| n.significant).collect();
    if nodes.is_empty() {
        return writeln!(
            out,
            "own time: no node of a common pattern changed beyond noise"
        );
    }
    writeln!(
        out,
        "own time changed (mean before -> after; median before -> after; `A -> B`: added before A calls B):"
    )?;
    let rows: Vec<[String; 5]> = nodes
        .iter()
        .map(|n| {
            let change = (n.mean_after_s - n.mean_before_s) * 1e9;
            [
                match &n.before_call_to {
                    Some(callee) => format!("{} -> {callee} (called by {})", n.node, n.caller),
                    None => format!("{} (called by {})", n.node, n.caller),
                },
                format!(
                    "{}{}",
                    if change >= 0.0 { "+" } else { "-" },
                    human_duration(change.abs())
                ),
                format!(
                    "{} -> {}",
                    human_duration(n.mean_before_s * 1e9),
                    human_duration(n.mean_after_s * 1e9)
                ),
                format!(
                    "{} -> {}",
                    human_duration(n.median_before_s * 1e9),
                    human_duration(n.median_after_s * 1e9)
                ),
                n.signature.clone(),
            ]
        })
        .collect();
    use super::Align::{Left, Right};
    super::write_columns(
        out,
        "  ",
        (
            ["node", "change", "mean", "median", "pattern"],
            [Left, Right, Right, Right, Left],
        ),
        &rows,
    )
}
