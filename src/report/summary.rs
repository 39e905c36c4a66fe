//! The run summary for stderr: what was read, what was set aside and why, and what the
//! algorithm found. Every skipped line or message appears here with its reason.

use super::plural;
use crate::capture::stats::FileStats;
use crate::nesting::NestStats;
use crate::trace::InputStats;
use std::io::{self, Write};

/// Writes the summary of reading (`capture`: the captures' counts summed, if any were
/// read) and nesting.
pub fn write(
    input: &InputStats,
    capture: Option<&FileStats>,
    nest: &NestStats,
    patterns: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    write_input(input, capture, out)?;
    write_nesting(nest, patterns, out)
}

/// Writes, per broker, what its deliveries were linked to.
pub fn write_brokers(brokers: &[crate::trace::BrokerHops], out: &mut dyn Write) -> io::Result<()> {
    for broker in brokers {
        write_broker(broker, out)?;
    }
    Ok(())
}

/// Writes what a broker's deliveries were linked to.
fn write_broker(broker: &crate::trace::BrokerHops, out: &mut dyn Write) -> io::Result<()> {
    use crate::trace::time::human_duration;
    use crate::words::counted_as;
    let share = 100.0 * broker.linked as f64 / broker.deliveries.max(1) as f64;
    let by = match broker.through_its_capture {
        n if n == broker.linked => "all through its own capture".to_string(),
        0 => "all by the payloads at the producers' and consumers' ends".to_string(),
        n => format!("{n} through its own capture, the rest by the payloads at the ends"),
    };
    writeln!(
        out,
        "broker {}: {} sent, {} linked to the message that brought it in ({share:.1}%; {by}); time in the broker p50 {}, p99 {}",
        broker.broker,
        counted_as(broker.deliveries, "delivery", "deliveries"),
        broker.linked,
        human_duration(broker.in_broker_p50_ns as f64),
        human_duration(broker.in_broker_p99_ns as f64),
    )
}

/// Writes the line that says what was read: lines, packets, files, and the messages
/// they made.
pub fn write_input(
    input: &InputStats,
    capture: Option<&FileStats>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let what = match capture {
        Some(capture) if input.lines == 0 => format!(
            "read {} packet{} from {} capture{}",
            capture.packets,
            plural(capture.packets),
            input.files,
            plural(input.files)
        ),
        Some(capture) => format!(
            "read {} line{} and {} packet{} from {} file{}",
            input.lines,
            plural(input.lines),
            capture.packets,
            plural(capture.packets),
            input.files,
            plural(input.files)
        ),
        None => format!(
            "read {} line{} from {} file{}",
            input.lines,
            plural(input.lines),
            input.files,
            plural(input.files)
        ),
    };
    writeln!(
        out,
        "{what}: {} observation{} -> {} message{} ({} seen at both ends, {} at the sender only, {} at the receiver only){}{}",
        input.observations,
        plural(input.observations),
        input.messages,
        plural(input.messages),
        input.seen_at_both_ends,
        input.seen_at_sender_only,
        input.seen_at_receiver_only,
        [
            match input.passed_through {
                0 => String::new(),
                passed => format!(
                    "; {passed} observation{} left out, seen passing between hosts whose own captures hold them",
                    plural(passed)
                ),
            },
            match input.call_ids_past_limit {
                0 => String::new(),
                past => format!(
                    "; {past} kept without their call id, past the 2^30 distinct ids one trace can name (nest it in segments: --segment-lines)"
                ),
            },
        ]
        .concat(),
        if input.lines > 0 {
            let ignored = if input.ignored_fields > 0 {
                format!(
                    "; {} key=value field{} with unknown keys ignored",
                    input.ignored_fields,
                    plural(input.ignored_fields)
                )
            } else {
                String::new()
            };
            format!(
                "; {} blank or comment line{}{ignored}",
                input.blank_or_comment_lines,
                plural(input.blank_or_comment_lines)
            )
        } else {
            String::new()
        },
    )?;
    write_brokers(&input.brokers, out)
}

/// Writes what pairing set aside and what nesting found.
fn write_nesting(nest: &NestStats, patterns: usize, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "skipped: {} unmatched call{}, {} unmatched return{}, {} free-form message{} (not RPC)",
        nest.pairing.unmatched_calls,
        plural(nest.pairing.unmatched_calls),
        nest.pairing.unmatched_returns,
        plural(nest.pairing.unmatched_returns),
        nest.pairing.free_messages,
        plural(nest.pairing.free_messages),
    )?;
    writeln!(
        out,
        "nesting: {} call pair{}, {} path instance{} in {} pattern{}; mean per-node parallelism {:.2}; {} parent cycle{} cut; {} child{} of lost calls kept as root{}",
        nest.call_pairs,
        plural(nest.call_pairs),
        nest.roots,
        plural(nest.roots),
        patterns,
        plural(patterns as u64),
        nest.mean_parallelism,
        nest.cycles_broken,
        plural(nest.cycles_broken),
        nest.orphans,
        if nest.orphans == 1 { "" } else { "ren" },
        plural(nest.orphans),
    )?;
    if nest.async_children + nest.async_left_roots > 0 {
        writeln!(
            out,
            "asynchronous children: {} call{} given a parent that answered before it returned; {} more left as root{} (no such parent clearly likelier)",
            nest.async_children,
            plural(nest.async_children),
            nest.async_left_roots,
            plural(nest.async_left_roots),
        )?;
    }
    if nest.broker_links > 0 {
        writeln!(
            out,
            "through brokers: {} deliver{} given the message that brought {} in as parent, {} of them not waited for (⇒); {} consumer call{} given the delivery of {} place in first-in, first-out order",
            nest.broker_links,
            if nest.broker_links == 1 { "y" } else { "ies" },
            if nest.broker_links == 1 { "it" } else { "them" },
            nest.broker_hops,
            nest.served_in_order,
            plural(nest.served_in_order),
            if nest.served_in_order == 1 { "its" } else { "their" },
        )?;
    }
    if nest.connection_affinity_nodes > 0 {
        writeln!(
            out,
            "connection affinity: learned at {} node{} (their calls out follow the connection of the call they serve; --ignore-connections to leave it out)",
            nest.connection_affinity_nodes,
            plural(nest.connection_affinity_nodes),
        )?;
    }
    if nest.sibling_affinity_nodes > 0 {
        writeln!(
            out,
            "connections kept together: learned at {} node{} (a call's calls out go out on its worker's own connections; --ignore-connections to leave it out)",
            nest.sibling_affinity_nodes,
            plural(nest.sibling_affinity_nodes),
        )?;
    }
    match nest.connections_ignored {
        Some(0) => writeln!(
            out,
            "--ignore-connections changed nothing: no call here names the connection it travelled on, or the paper's parent choice, which never weighs them, was used"
        )?,
        Some(calls) => writeln!(
            out,
            "connections ignored (--ignore-connections): the parent choice did not weigh the connections {calls} call{} travelled on",
            plural(calls),
        )?,
        None => {}
    }
    if nest.calls_with_ids > 0 {
        let share = 100.0 * nest.calls_with_ids as f64 / nest.call_pairs.max(1) as f64;
        let used = if nest.id_nodes > 0 {
            format!(
                "at the {} node{} that pass them on, they fixed {} parent{} (--ignore-ids to leave them out)",
                nest.id_nodes,
                plural(nest.id_nodes),
                nest.links_fixed_by_ids,
                plural(nest.links_fixed_by_ids),
            )
        } else {
            "no node passes them on to the calls it makes, so they told no parent".into()
        };
        writeln!(
            out,
            "propagated ids: {} of {} call{} ({share:.1}%) carried a request id or trace context; {used}",
            nest.calls_with_ids,
            nest.call_pairs,
            plural(nest.call_pairs),
        )?;
    }
    if nest.late_children > 0 {
        writeln!(
            out,
            "late returns: {} call{} enclosed by no call given one open when it left (calls of its kind almost always are enclosed, so read as a late timestamp)",
            nest.late_children,
            plural(nest.late_children),
        )?;
    }
    Ok(())
}

/// Writes how a nesting done in segments was cut, then [`write_late_lines`].
pub fn write_streamed(cut: &crate::streaming::Cut, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "streamed: nested in {} segments (at most {} lines each, margins of {} on either side), in bounded memory; percentiles past {} requests of a pattern within {}%",
        cut.segments,
        cut.largest_segment_lines,
        crate::trace::time::human_duration(cut.margin as f64),
        crate::nesting::patterns::EXACT_SAMPLES,
        100.0 * crate::nesting::patterns::SKETCH_ERROR,
    )?;
    write_late_lines(cut, out)
}

/// Writes the lines a nesting in segments set aside for coming after their segment
/// was nested, if any: told even when quiet, as every skipped line is.
pub fn write_late_lines(cut: &crate::streaming::Cut, out: &mut dyn Write) -> io::Result<()> {
    if cut.late_lines > 0 {
        writeln!(
            out,
            "skipped: {} line{} earlier than a segment already nested (the input is not in time order; sort it, or pass --segment-lines 0 to hold the whole trace)",
            cut.late_lines,
            plural(cut.late_lines),
        )?;
    }
    Ok(())
}
