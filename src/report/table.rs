//! The ranked table on stdout: rank, count, total and mean latency, how sure the
//! pattern's instances are, what adds the most to it (a node's own time, or an edge's
//! time in transit, [`super::own_time::most_added`]) with its mean, signature; then, for
//! the patterns a broker carried on after their answer (`⇒`), how long their work went
//! on after it and each hop's time in its broker.

use super::{NestReport, Render};
use crate::trace::time::human_duration;
use std::io::{self, Write};

/// The plain-text table.
pub struct Table;

impl Render for Table {
    fn render(&self, report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()> {
        let rows: Vec<[String; 7]> = report
            .ranked
            .iter()
            .enumerate()
            .map(|(rank, &i)| {
                let p = &report.nesting.patterns[i];
                [
                    (rank + 1).to_string(),
                    p.count().to_string(),
                    human_duration(p.total_latency() as f64),
                    human_duration(p.mean_latency()),
                    super::sure_percent(p.sure()),
                    adds_most(report, p),
                    p.signature.clone(),
                ]
            })
            .collect();
        let header = [
            "rank",
            "count",
            "total latency",
            "mean latency",
            "sure",
            "adds most",
            "pattern",
        ];
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: &[&str]| {
            format!(
                "{:>w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {:>w4$}  {:<w5$}  {}\n",
                cells[0],
                cells[1],
                cells[2],
                cells[3],
                cells[4],
                cells[5],
                cells[6],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3],
                w4 = widths[4],
                w5 = widths[5]
            )
        };
        out.write_all(line(&header).as_bytes())?;
        for row in &rows {
            let cells: Vec<&str> = row.iter().map(String::as_str).collect();
            out.write_all(line(&cells).as_bytes())?;
        }
        write_tails(report, out)?;
        let hidden = report.hidden();
        if hidden > 0 {
            writeln!(
                out,
                "({hidden} more pattern{} not shown; see --top and --min-count)",
                if hidden == 1 { "" } else { "s" }
            )?;
        }
        if let Some(windows) = report.windows {
            super::windows::write(report, windows, out)?;
        }
        Ok(())
    }
}

/// "web 0.61 ms", "app → web held by TCP (Nagle + delayed ACK) 33.44 ms": what adds the
/// most to the pattern's latency, with its mean per request.
fn adds_most(report: &NestReport<'_>, pattern: &crate::nesting::Pattern) -> String {
    use super::own_time::{most_added, most_added_words};
    let most = most_added(pattern);
    let name = |i: usize| report.trace.node_name(pattern.positions[i].node).to_owned();
    format!(
        "{} {}",
        most_added_words(pattern, &most, &name),
        human_duration(most.mean)
    )
}

/// For each pattern shown with an asynchronous hop (`⇒`), the request's latency told
/// apart from its tail: how long its work went on after the answer, and each hop's
/// time in its broker.
fn write_tails(report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()> {
    let mut header = false;
    for (rank, &i) in report.ranked.iter().enumerate() {
        let p = &report.nesting.patterns[i];
        if p.tails.is_empty() {
            continue;
        }
        if !header {
            writeln!(
                out,
                "\nwork after the answer (⇒: a broker carried the request on; p50, with p99):"
            )?;
            header = true;
        }
        let tail = p.tails.summary();
        let hops: Vec<String> = (p.positions.iter())
            .filter(|position| position.through_broker)
            .map(|position| {
                let queued = position.call_delays.summary();
                format!(
                    "{} held it {} ({}) for {}",
                    report.trace.node_name(position.caller),
                    human_duration(queued.p50 as f64),
                    human_duration(queued.p99 as f64),
                    report.trace.node_name(position.node)
                )
            })
            .collect();
        let latency = p.positions[0].latencies.summary();
        writeln!(
            out,
            "  rank {}: answered in {} ({}), work went on {} ({}) after it; {}",
            rank + 1,
            human_duration(latency.p50 as f64),
            human_duration(latency.p99 as f64),
            human_duration(tail.p50 as f64),
            human_duration(tail.p99 as f64),
            hops.join("; ")
        )?;
    }
    Ok(())
}
