//! `nest --window` in words: a table per time window of the requests that started in
//! it, each pattern's count, median and p99 latency, and the node adding the most.

use super::own_time::{hottest, mean_own_times, own_times};
use super::NestReport;
use crate::nesting::Summary;
use crate::trace::time::human_duration;
use crate::trace::Nanos;
use crate::windows::Window;
use std::io::{self, Write};

/// A time as the clock reads it, UTC.
pub fn clock(nanos: Nanos) -> String {
    let seconds = nanos.div_euclid(1_000_000_000);
    let millis = nanos.rem_euclid(1_000_000_000) / 1_000_000;
    let of_day = seconds.rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02}.{millis:03}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

/// Writes one table per window, patterns by count (`--top` applies to each).
pub fn write(report: &NestReport<'_>, windows: &[Window], out: &mut dyn Write) -> io::Result<()> {
    for (k, window) in windows.iter().enumerate() {
        writeln!(out)?;
        writeln!(
            out,
            "window {} of {}: {} to {} UTC, {} request{}",
            k + 1,
            windows.len(),
            clock(window.start),
            clock(window.end),
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
                let latency = Summary::of(&p.positions[0].latencies);
                let own = mean_own_times(&own_times(p));
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
        let header = [
            "count",
            "p50 latency",
            "p99 latency",
            "adds the most",
            "pattern",
        ];
        let mut widths = header.map(str::len);
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: [&str; 5], out: &mut dyn Write| {
            writeln!(
                out,
                "{:>w0$}  {:>w1$}  {:>w2$}  {:<w3$}  {}",
                cells[0],
                cells[1],
                cells[2],
                cells[3],
                cells[4],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3]
            )
        };
        line(header, out)?;
        for row in &rows {
            line([&row[0], &row[1], &row[2], &row[3], &row[4]], out)?;
        }
    }
    Ok(())
}
