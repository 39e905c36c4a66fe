//! Rendering results for people and programs: ranking the patterns, then one file per
//! output format behind the [`Render`] trait (table, dot, JSON, assignments), plus the
//! run summary for stderr. Owns presentation only; every number comes from
//! [`crate::nesting`].

pub mod alignment;
pub mod assignments;
pub mod diff;
pub mod dot;
pub mod evaluation;
pub mod explanation;
pub mod html;
pub mod input;
pub mod json;
pub mod otlp;
pub mod own_time;
pub mod paths;
pub mod summary;
pub mod svg;
pub mod table;
pub mod translation;
pub mod windows;

use crate::nesting::{NestOptions, Nesting};
use crate::trace::Trace;
use std::cmp::Ordering;
use std::io::{self, Write};

/// What orders the patterns, always descending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SortKey {
    /// Number of path instances (the paper's order).
    #[default]
    Count,
    /// Sum of the root latency over all instances: where the time goes overall.
    Total,
    /// Mean root latency: the slowest kinds of request.
    Mean,
}

/// Which patterns to show, and in what order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ranking {
    /// Sort key.
    pub sort: SortKey,
    /// Show at most this many.
    pub top: Option<usize>,
    /// Hide patterns seen fewer times than this.
    pub min_count: u64,
}

impl Default for Ranking {
    fn default() -> Self {
        Ranking {
            sort: SortKey::Count,
            top: None,
            min_count: 1,
        }
    }
}

/// A nesting result ready to render: the trace it came from and the ranked patterns.
pub struct NestReport<'a> {
    /// The input, for names.
    pub trace: &'a Trace,
    /// The result.
    pub nesting: &'a Nesting,
    /// The settings used.
    pub options: &'a NestOptions,
    /// How the patterns were ranked.
    pub ranking: Ranking,
    /// Indexes into `nesting.patterns`, best first, after `top` and `min_count`.
    pub ranked: Vec<usize>,
    /// What the packet captures among the inputs gave, summed, if any were read.
    pub capture: Option<&'a crate::capture::stats::FileStats>,
    /// The requests by time window, with `--window`.
    pub windows: Option<&'a [crate::windows::Window]>,
    /// How a nesting done in segments was cut.
    pub streamed: Option<&'a crate::streaming::Cut>,
    /// How the captures' clocks were aligned, if they were.
    pub alignment: Option<&'a crate::align::Alignment>,
}

impl<'a> NestReport<'a> {
    /// Ranks the patterns. Ties fall to the higher count, then to the signature, so the
    /// order never depends on hashing.
    pub fn new(
        trace: &'a Trace,
        nesting: &'a Nesting,
        options: &'a NestOptions,
        ranking: Ranking,
    ) -> Self {
        let patterns = &nesting.patterns;
        let mut ranked: Vec<usize> = (0..patterns.len())
            .filter(|&i| patterns[i].count() >= ranking.min_count)
            .collect();
        ranked.sort_by(|&a, &b| {
            let (pa, pb) = (&patterns[a], &patterns[b]);
            let primary = match ranking.sort {
                SortKey::Count => pb.count().cmp(&pa.count()),
                SortKey::Total => pb.total_latency().cmp(&pa.total_latency()),
                SortKey::Mean => pb
                    .mean_latency()
                    .partial_cmp(&pa.mean_latency())
                    .unwrap_or(Ordering::Equal),
            };
            primary
                .then_with(|| pb.count().cmp(&pa.count()))
                .then_with(|| pa.signature.cmp(&pb.signature))
        });
        if let Some(top) = ranking.top {
            ranked.truncate(top);
        }
        NestReport {
            trace,
            nesting,
            options,
            ranking,
            ranked,
            capture: None,
            windows: None,
            streamed: None,
            alignment: None,
        }
    }

    /// The report of captures whose clocks were aligned.
    pub fn with_alignment(mut self, alignment: Option<&'a crate::align::Alignment>) -> Self {
        self.alignment = alignment;
        self
    }

    /// The report with the requests by time window (`--window`).
    pub fn with_windows(mut self, windows: Option<&'a [crate::windows::Window]>) -> Self {
        self.windows = windows;
        self
    }

    /// The report of a nesting done in segments, saying how it was cut.
    pub fn with_streamed(mut self, cut: Option<&'a crate::streaming::Cut>) -> Self {
        self.streamed = cut;
        self
    }

    /// The report with the captures' summed counts, for the input block.
    pub fn with_capture_totals(
        mut self,
        capture: Option<&'a crate::capture::stats::FileStats>,
    ) -> Self {
        self.capture = capture;
        self
    }

    /// Patterns hidden by `top` or `min_count`.
    pub fn hidden(&self) -> usize {
        self.nesting.patterns.len() - self.ranked.len()
    }
}

/// One output format.
pub trait Render {
    /// Writes the report in this format.
    fn render(&self, report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()>;
}

/// Nanoseconds to seconds, for the formats that speak seconds.
/// "s" after a count other than one.
pub(crate) fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

pub(crate) fn seconds(ns: f64) -> f64 {
    ns / 1e9
}

/// A confidence or a share promised by confidences, as a percentage to a tenth,
/// rounded down so that only certainty shows 100%.
pub fn sure_percent(share: f64) -> String {
    if share >= 1.0 {
        return "100%".into();
    }
    format!("{:.1}%", (share * 1000.0).floor() / 10.0)
}

/// How a column of [`write_columns`] lines up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Against the left edge (names).
    Left,
    /// Against the right edge (numbers).
    Right,
}

/// Writes `header` and `rows` as columns two spaces apart, each as wide as its widest
/// cell, the last one left as it is (signatures run long); every line starts with
/// `indent`.
pub fn write_columns<const N: usize>(
    out: &mut dyn std::io::Write,
    indent: &str,
    (header, align): ([&str; N], [Align; N]),
    rows: &[[String; N]],
) -> std::io::Result<()> {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; N], out: &mut dyn std::io::Write| {
        let mut text = String::from(indent);
        for (k, cell) in cells.iter().enumerate() {
            if k + 1 == N {
                text.push_str(cell);
                break;
            }
            let pad = " ".repeat(widths[k] - cell.chars().count());
            match align[k] {
                Align::Left => {
                    text.push_str(cell);
                    text.push_str(&pad);
                }
                Align::Right => {
                    text.push_str(&pad);
                    text.push_str(cell);
                }
            }
            text.push_str("  ");
        }
        writeln!(out, "{text}")
    };
    line(header, out)?;
    for row in rows {
        line(row.each_ref().map(String::as_str), out)?;
    }
    Ok(())
}

/// A time as a UTC clock reads it, to `digits` decimals of a second (3 or 6).
pub fn clock(nanos: crate::trace::Nanos, digits: u32) -> String {
    let seconds = nanos.div_euclid(1_000_000_000);
    let fraction = nanos.rem_euclid(1_000_000_000) / 10i64.pow(9 - digits);
    let of_day = seconds.rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02}.{fraction:0width$}",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60,
        width = digits as usize
    )
}
