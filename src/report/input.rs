//! What reading the input reported, in words: one line per capture (its host, own
//! addresses and counts), the causality repair's line, and the warnings. The numbers
//! are [`crate::input`]'s; the alignment table is [`super::alignment`]'s.

use crate::input::{Input, Repaired};
use crate::trace::mbox::MboxStats;
use crate::trace::time::human_duration;
use std::io::{self, Write};
use std::path::Path;

/// One line per capture: what it held and which of its addresses are the host's.
pub fn write_captures(input: &Input, out: &mut dyn Write) -> io::Result<()> {
    for capture in &input.captures {
        let own: Vec<String> = capture.local.iter().map(|a| a.to_string()).collect();
        let guess = match capture.local_uncertain {
            Some(why) => format!(
                ", a guess: {why}; if it is wrong, give the right one with --names FILE, a line `ADDRESS {}`",
                capture.host
            ),
            None => String::new(),
        };
        writeln!(
            out,
            "{} (host {}, own address {}{guess}): {}",
            crate::input::source::name(&capture.path),
            capture.host,
            if own.is_empty() {
                "unknown".to_string()
            } else {
                own.join(", ")
            },
            capture.stats
        )?;
    }
    Ok(())
}

/// The line that says what the causality repair moved.
pub fn write_repair(repaired: &Repaired, out: &mut dyn Write) -> io::Result<()> {
    let report = &repaired.report;
    writeln!(
        out,
        "causality repair: {} of {} messages seen at both ends arrived before they left (+{}); after repair {}; {} event times moved, by {} at most, {} on average",
        report.violations_before,
        report.messages,
        human_duration(repaired.min_latency as f64),
        report.violations_after,
        report.moved,
        human_duration(report.largest_move_ns as f64),
        human_duration(report.mean_move_ns),
    )
}

/// The lines that say what an mbox gave and what it set aside.
pub fn write_mbox(path: &Path, stats: &MboxStats, out: &mut dyn Write) -> io::Result<()> {
    use crate::words::counted;
    write!(
        out,
        "{}: {}, {} -> {}; skipped {} with unreadable dates, {} naming a generic host, {} missing a host",
        path.display(),
        counted(stats.emails, "email"),
        counted(stats.received_headers, "Received header"),
        counted(stats.hops, "hop"),
        stats.unparseable_date,
        stats.generic_host,
        stats.missing_host
    )?;
    match stats.loopback_handoffs {
        0 => writeln!(out)?,
        n => writeln!(
            out,
            "; {} inside one machine (a loopback sender), no hop",
            counted(n, "hand-off")
        )?,
    }
    if !stats.one_machine.is_empty() {
        const SHOWN: usize = 5;
        let groups: Vec<String> = stats
            .one_machine
            .iter()
            .take(SHOWN)
            .map(|names| names.join(" = "))
            .collect();
        let more = stats.one_machine.len().saturating_sub(SHOWN);
        writeln!(
            out,
            "one node per machine, named as its hops name it most: {}{}",
            groups.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        )?;
    }
    if stats.without_message_id + stats.repeated_message_id > 0 {
        writeln!(
            out,
            "truth tags: {} emails without a Message-ID tagged by their number (mailN), {} repeating an earlier email's tagged #2, #3, ...",
            stats.without_message_id, stats.repeated_message_id
        )?;
    }
    Ok(())
}

/// Every warning, one per line.
pub fn write_warnings(input: &Input, out: &mut dyn Write) -> io::Result<()> {
    for warning in &input.warnings {
        writeln!(out, "{warning}")?;
    }
    Ok(())
}
