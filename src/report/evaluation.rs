//! Text rendering of evaluation scores (the JSON is their serde form).

use crate::eval::calls::CallScores;
use crate::eval::ids::IdScores;
use crate::eval::message_paths::{Found, PathScores as MessagePathScores, TrueChains};
use crate::eval::paths::{PathScores, TOLERANCES};
use crate::eval::reliability::ConfidenceBucket;
use crate::eval::signatures::SignatureScores;
use crate::trace::time::human_duration;
use crate::trace::Nanos;
use std::io::{self, Write};

/// How many correctly inferred patterns the latency table lists.
const LATENCY_ROWS: usize = 10;

fn percent(part: u64, whole: u64) -> String {
    format!("{:.1}%", 100.0 * part as f64 / whole.max(1) as f64)
}

/// Writes path-level scores: counts, top-N, latency errors.
pub fn write_paths(s: &PathScores, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "{:<10} {:>9} {:>9} {:>10} {:>10}",
        "", "truth", "inferred", "false pos", "false neg"
    )?;
    for (name, c) in [
        ("patterns", &s.patterns),
        ("instances", &s.instances),
        ("messages", &s.messages),
    ] {
        writeln!(
            out,
            "{name:<10} {:>9} {:>9} {:>10} {:>10}",
            c.truth, c.inferred, c.false_positives, c.false_negatives
        )?;
    }
    writeln!(
        out,
        "instances inferred exactly: {} of {} ({}); calls with their true parent: {} of {} ({}), of the {} with one: {} ({:.2}%)",
        s.instances_exact,
        s.instances.truth,
        percent(s.instances_exact, s.instances.truth),
        s.calls_right,
        s.calls,
        percent(s.calls_right, s.calls),
        s.children,
        s.children_right,
        100.0 * s.children_right as f64 / s.children.max(1) as f64
    )?;
    writeln!(out)?;
    writeln!(out, "top-N ground-truth patterns missing from the inferred top N (forgiving near-ties within a tolerance)")?;
    let headers: Vec<String> = TOLERANCES
        .iter()
        .map(|t| format!("within {:.0}%", t * 100.0))
        .collect();
    writeln!(
        out,
        "{:>4}  {:>9}  {:>9}  {:>9}",
        "N", "missing", headers[1], headers[2]
    )?;
    for t in &s.top_n {
        writeln!(
            out,
            "{:>4}  {:>9}  {:>9}  {:>9}",
            t.n, t.missing[0], t.missing[1], t.missing[2]
        )?;
    }
    writeln!(out)?;
    writeln!(out, "mean latency of each node in correctly inferred patterns, worst relative error (top {LATENCY_ROWS} by truth count)")?;
    writeln!(
        out,
        "{:>6}  {:>8}  {:>11}  pattern",
        "truth", "inferred", "worst error"
    )?;
    for l in s.latency.iter().take(LATENCY_ROWS) {
        let worst = l
            .nodes
            .iter()
            .max_by(|a, b| a.3.total_cmp(&b.3))
            .map_or("", |n| n.0.as_str());
        writeln!(
            out,
            "{:>6}  {:>8}  {:>10.2}%  {} (at {worst})",
            l.truth_count,
            l.inferred_count,
            100.0 * l.worst,
            l.signature
        )?;
    }
    write_reliabilities(&s.reliability, &s.request_reliability, out)
}

/// The calls' and the requests' reliability tables against a truth, each after a blank
/// line and its heading.
fn write_reliabilities(
    calls: &[ConfidenceBucket],
    requests: &[ConfidenceBucket],
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out)?;
    writeln!(out, "{RELIABILITY}")?;
    write_reliability(calls, "calls", out)?;
    writeln!(out)?;
    writeln!(out, "{REQUEST_RELIABILITY}")?;
    write_reliability(requests, "requests", out)
}

/// The heading of the reliability table against a truth.
const RELIABILITY: &str = "calls with a true parent by the stated confidence of their choice (calibrated: share right = mean confidence)";
/// The heading of the requests' reliability table against a truth.
const REQUEST_RELIABILITY: &str = "requests by how sure their whole tree is, as patterns' `sure` averages it (calibrated: share exact = mean confidence)";

/// Writes call-level scores against a truth file.
pub fn write_calls(s: &CallScores, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "calls with their true parent: {} of {} ({:.2}%); {} true calls were not paired in the trace",
        s.calls_right,
        s.calls,
        100.0 * s.call_accuracy(),
        s.calls_not_inferred
    )?;
    writeln!(
        out,
        "requests whose whole tree is right: {} of {} ({:.2}%)",
        s.requests_right,
        s.requests,
        100.0 * s.request_accuracy()
    )?;
    write_reliabilities(&s.reliability, &s.request_reliability, out)
}

/// `eval --true-signatures`: requests in their true pattern, and each true pattern's
/// rank among the inferred ones.
pub fn write_signatures(s: &SignatureScores, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "requests in their true pattern: {} of {} ({:.2}%); {} carried by no root call",
        s.right,
        s.requests,
        100.0 * s.accuracy(),
        s.not_found
    )?;
    writeln!(
        out,
        "true patterns among the inferred top {}: {} of {}",
        s.patterns.len(),
        s.in_top,
        s.patterns.len()
    )?;
    writeln!(out)?;
    let rows: Vec<[String; 4]> = (s.patterns.iter())
        .map(|p| {
            [
                p.requests.to_string(),
                format!("{} ({})", p.right, percent(p.right, p.requests)),
                p.rank.map_or("-".to_owned(), |rank| rank.to_string()),
                p.signature.clone(),
            ]
        })
        .collect();
    use super::Align::{Left, Right};
    super::write_columns(
        out,
        "",
        (
            ["requests", "in it", "rank", "true pattern"],
            [Right, Right, Right, Left],
        ),
        &rows,
    )
}

/// `eval --against-ids`: the agreement with the ids, per node, and by stated
/// confidence.
pub fn write_ids(s: &IdScores, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "scored against the system's own request ids, hidden from the inference: {} of {} calls ({}) carry an id that names their parent",
        s.labelled,
        s.calls,
        percent(s.labelled, s.calls)
    )?;
    writeln!(
        out,
        "calls given the parent their ids name: {} of {} ({:.2}%)",
        s.agree,
        s.labelled,
        100.0 * s.agree as f64 / s.labelled.max(1) as f64
    )?;
    writeln!(out)?;
    let width = s
        .nodes
        .iter()
        .map(|n| n.node.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "{:<width$}  {:>9}  {:>9}  {:>7}  {:>15}",
        "node", "labelled", "agree", "share", "mean confidence"
    )?;
    for node in &s.nodes {
        writeln!(
            out,
            "{:<width$}  {:>9}  {:>9}  {:>7}  {:>15.4}",
            node.node,
            node.labelled,
            node.agree,
            percent(node.agree, node.labelled),
            node.mean_confidence
        )?;
    }
    writeln!(out)?;
    write_reliability(&s.confidence, "labelled", out)?;
    writeln!(out)?;
    writeln!(
        out,
        "requests holding a labelled call, by how sure their whole tree is, as patterns' `sure` averages it (right: their labelled calls agree with the ids and none is missing; calls without ids unchecked)"
    )?;
    write_reliability(&s.requests, "requests", out)
}

/// The reliability table: per confidence bucket, the known calls, how many are right
/// and the mean stated confidence, which a calibrated confidence matches.
pub fn write_reliability(
    buckets: &[ConfidenceBucket],
    known: &str,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "{:<13}  {:>9}  {:>9}  {:>7}  {:>15}",
        "confidence", known, "right", "share", "mean confidence"
    )?;
    for bucket in buckets {
        let close = if bucket.high >= 1.0 { ']' } else { ')' };
        writeln!(
            out,
            "{:<13}  {:>9}  {:>9}  {:>7}  {:>15.4}",
            format!("[{}, {}{close}", bucket.low, bucket.high),
            bucket.calls,
            bucket.right,
            percent(bucket.right, bucket.calls),
            bucket.mean_confidence
        )?;
    }
    Ok(())
}

/// Writes the convolution's paths against the true chains: how the chains were cut,
/// then per threshold the counts, every true path with where it was found (and each
/// hop's median delay and main spike against the true median), and every reported
/// path no chain took.
pub fn write_message_paths(
    chains: &TrueChains,
    scores: &[MessagePathScores],
    quantum: Nanos,
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(
        out,
        "true chains: {}, {} of linked hops ({} cut where a hop left another node than the one the hop before reached)",
        crate::words::counted(chains.instances, "instance"),
        crate::words::counted(chains.chains.len() as u64, "run"),
        crate::words::counted(chains.cut, "instance")
    )?;
    for s in scores {
        let count = |found: Found| s.true_paths.iter().filter(|p| p.found == found).count();
        writeln!(out)?;
        writeln!(
            out,
            "paths followed at least {} times: {} true: {} found exactly, {} only as the start of a longer path, {} only inside one, {} nowhere ({} false negatives); {} reported, {} followed by no chain ({} false positives); median delays within max({}, 10%) of the true median at {} of {} hops (main spikes at {})",
            s.min_count,
            s.true_paths.len(),
            count(Found::Exact),
            count(Found::Start),
            count(Found::Inside),
            count(Found::Nowhere),
            s.false_negatives,
            s.reported.len(),
            s.false_positives,
            s.false_positives,
            human_duration(quantum as f64),
            s.delays_within,
            s.delays,
            s.spikes_within
        )?;
        for path in &s.true_paths {
            let found = match path.found {
                Found::Exact => "exact",
                Found::Start => "start",
                Found::Inside => "inside",
                Found::Nowhere => "nowhere",
            };
            writeln!(out, "  {:>7}  {found:<7}  {}", path.count, path.signature)?;
            if let Some(went) = &path.went_on {
                writeln!(
                    out,
                    "  {:>7}  {:<7}    {} of the {} went on to {} after a cut, as the longer path has them",
                    "", "", went.runs, path.count, went.node
                )?;
            }
            for hop in &path.delays {
                writeln!(
                    out,
                    "  {:>7}  {:<7}    at {}: median {}{}, main spike {}{}, against {} true",
                    "",
                    "",
                    hop.node,
                    human_duration(hop.median as f64),
                    if hop.within { "" } else { " (off)" },
                    human_duration(hop.main_spike as f64),
                    if hop.spike_within { "" } else { " (off)" },
                    human_duration(hop.true_median as f64),
                )?;
            }
        }
        for path in s.reported.iter().filter(|p| p.taken_by == 0) {
            writeln!(
                out,
                "  {:>7}  {:<7}  {}",
                path.count, "false", path.signature
            )?;
        }
    }
    Ok(())
}
