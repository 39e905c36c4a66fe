//! The clock alignment as a table for people: per host its offset and drift against
//! the reference, bounds, quality, samples and route; then the pairs, what pairing
//! left out, and the loop checks; and mail relays' clocks. Every number comes from
//! [`crate::align`].

use super::plural;
use crate::align::fit::Quality;
use crate::align::mail::MailClocks;
use crate::align::Alignment;
use crate::trace::time::human_duration;
use std::io::{self, Write};

/// Writes the alignment table.
pub fn write_alignment(alignment: &Alignment, out: &mut dyn Write) -> io::Result<()> {
    let method = match alignment.method {
        crate::align::fit::Method::Hull => "convex hulls",
        crate::align::fit::Method::Regression => "regression",
    };
    match &alignment.reference {
        Some(reference) => writeln!(
            out,
            "clock alignment ({method}), reference {reference}; offset = host clock − reference clock"
        )?,
        None => writeln!(out, "clock alignment ({method}): no two hosts share a TCP segment")?,
    }
    let width = alignment
        .hosts
        .iter()
        .map(|h| h.host.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "  {:<width$}  {:>20}  {:>12}  {:>11}  {:<11}  {:>9}  via",
        "host", "offset", "drift", "bound", "quality", "samples"
    )?;
    for host in &alignment.hosts {
        if host.reference {
            writeln!(out, "  {:<width$}  {:>20}", host.host, "reference")?;
            continue;
        }
        if host.quality == Quality::Absent {
            writeln!(
                out,
                "  {:<width$}  {:>20}  {:>12}  {:>11}  {:<11}",
                host.host, "-", "-", "-", "unaligned"
            )?;
            continue;
        }
        let bound = match host.bound_ns {
            Some(b) => format!("±{}", human_duration(b)),
            None => "one-sided".to_string(),
        };
        writeln!(
            out,
            "  {:<width$}  {:>20}  {:>12}  {:>11}  {:<11}  {:>9}  {}",
            host.host,
            crate::trace::time::signed_exact_duration(host.offset_ns),
            format!("{:+.3} ppm", host.drift_ppm),
            bound,
            host.quality.to_string(),
            host.samples,
            host.via.join(" → ")
        )?;
    }
    if alignment.least_squares {
        writeln!(
            out,
            "  --least-squares: corrections solved over all pairs by weighted least squares, within each route's bounds"
        )?;
    }
    let p = &alignment.pairing;
    writeln!(
        out,
        "  segments: {} ends between captured hosts, {} matched at both ends{}; left out: {} repeated (retransmissions), {} seen at one end only",
        p.segments,
        p.matched,
        match p.pieces {
            0 => String::new(),
            pieces => format!(", {pieces} found inside a longer segment of the other end (segmentation offloads)"),
        },
        p.repeated,
        p.one_ended
    )?;
    for pair in &alignment.pairs {
        let mut notes = Vec::new();
        if pair.dropped > 0 {
            notes.push(format!(
                "{} dropped (no line agreed with them, or they claimed a far shorter delay than their neighbours)",
                crate::words::counted(pair.dropped as u64, "sample")
            ));
        }
        if pair.pieces > 1 {
            notes.push(format!(
                "{} lines over time (the smallest delays did not follow one line)",
                pair.pieces
            ));
        }
        if !notes.is_empty() {
            writeln!(
                out,
                "  note: {}–{}: {}",
                pair.hosts.0,
                pair.hosts.1,
                notes.join("; ")
            )?;
        }
    }
    for check in &alignment.loops {
        let allowed = match check.allowed_ns {
            Some(a) => format!("±{}", human_duration(a)),
            None => "unbounded".to_string(),
        };
        writeln!(
            out,
            "  loop {}–{}: direct fit {} from the routes ({} allowed){}",
            check.hosts.0,
            check.hosts.1,
            human_duration(check.residual_ns),
            allowed,
            if check.disagrees {
                ": DISAGREES, one fit on this loop is wrong"
            } else {
                ""
            }
        )?;
    }
    Ok(())
}

/// Writes the relays' clocks as estimated from the emails' chains: what the correction
/// did to the delays below zero, then the corrected relays with the most delays, at
/// most `shown` of them by name (the rest counted).
pub fn write_mail_clocks(clocks: &MailClocks, shown: usize, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "relay clocks, from the delays between consecutive Received headers: {} delay{}, {} below zero as read, {} after correcting {} of {} relay{} ({} pair{} of relays with {} delays or more); offset = relay clock − the others'",
        clocks.delays,
        plural(clocks.delays),
        clocks.negative_before,
        clocks.negative_after,
        clocks.corrected.len(),
        clocks.relays_estimated,
        plural(clocks.relays_estimated as u64),
        clocks.pairs,
        plural(clocks.pairs as u64),
        crate::align::mail::MIN_PAIR_DELAYS
    )?;
    if clocks.corrected.is_empty() {
        return Ok(());
    }
    let shown = &clocks.corrected[..clocks.corrected.len().min(shown)];
    let width = shown
        .iter()
        .map(|r| r.host.chars().count())
        .max()
        .unwrap_or(5)
        .max(5);
    writeln!(
        out,
        "  {:<width$}  {:>10}  {:>5}  {:>6}",
        "relay", "offset", "pairs", "delays"
    )?;
    for relay in shown {
        let sign = if relay.offset_ns > 0 { "+" } else { "" };
        writeln!(
            out,
            "  {:<width$}  {:>10}  {:>5}  {:>6}",
            relay.host,
            format!("{sign}{}", human_duration(relay.offset_ns as f64)),
            relay.pairs,
            relay.delays
        )?;
    }
    let rest = clocks.corrected.len() - shown.len();
    if rest > 0 {
        writeln!(
            out,
            "  and {rest} more relays corrected, each with {} delays or fewer",
            shown.last().map_or(0, |r| r.delays)
        )?;
    }
    Ok(())
}
