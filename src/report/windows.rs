//! `nest --window` in words: a table per time window of the requests that started in
//! it, each pattern's count, median and p99 latency, and the node adding the most.

use super::own_time::hottest;
use super::NestReport;
use crate::trace::time::human_duration;
use crate::windows::Window;
use std::io::{self, Write};

/// Writes one table per window, patterns by count (`--top` applies to each).
pub fn write(report: &NestReport<'_>, windows: &[Window], out: &mut dyn Write) -> io::Result<()> {
    for (k, window) in windows.iter().enumerate() {
        writeln!(out)?;
        writeln!(
            out,
            "window {} of {}: {} to {} UTC, {} request{}",
            k + 1,
            windows.len(),
            super::clock(window.start, 3),
            super::clock(window.end, 3),
            window.requests(),
            if window.requests() == 1 { "" } else { "s" }
        )?;
        if window.patterns.is_empty() {
            continue;
        }
        let mut order: Vec<usize> = (0..window.patterns.len()).collect();
        order.sort_by(|&a, &b| {
            let (pa, pb) = (&window.patterns[a], &window.patterns[b]);
            pb.count()
                .cmp(&pa.count())
                .then_with(|| pa.signature.cmp(&pb.signature))
        });
        if let Some(top) = report.ranking.top {
            order.truncate(top);
        }
        let rows: Vec<[String; 5]> = order
            .iter()
            .map(|&i| {
                let p = &window.patterns[i];
                let latency = p.positions[0].latencies.summary();
                let own = p.mean_own_times();
                let hot = hottest(&own);
                [
                    p.count().to_string(),
                    human_duration(latency.p50 as f64),
                    human_duration(latency.p99 as f64),
                    format!(
                        "{} {}",
                        report.trace.node_name(p.positions[hot].node),
                        human_duration(own[hot])
                    ),
                    p.signature.clone(),
                ]
            })
            .collect();
        use super::Align::{Left, Right};
        super::write_columns(
            out,
            "",
            (
                [
                    "count",
                    "p50 latency",
                    "p99 latency",
                    "adds the most",
                    "pattern",
                ],
                [Right, Right, Right, Left, Left],
            ),
            &rows,
        )?;
    }
    Ok(())
}
