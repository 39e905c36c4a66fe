//! The nesting page: the ranked, sortable pattern table, then for each pattern its call
//! tree with per-node latency and call delay, the node that adds the most latency
//! highlighted, a timeline of a typical request and latency histograms per node.

use super::charts::{self, Bar};
use super::{escape, input_section, write_page, InputNotes};
use crate::nesting::{Pattern, Summary};
use crate::report::NestReport;
use crate::trace::time::human_duration;
use crate::trace::Nanos;
use std::io::{self, Write};

/// Patterns drawn in full; the table lists every ranked one.
pub const DRAWN_PATTERNS: usize = 40;
/// Calls per pattern drawn in the timeline and as histograms.
pub const DRAWN_CALLS: usize = 60;

/// Writes the nesting page.
pub fn write_nesting(
    report: &NestReport<'_>,
    notes: &InputNotes,
    out: &mut dyn Write,
) -> io::Result<()> {
    let nesting = report.nesting;
    let views: Vec<View> = report
        .ranked
        .iter()
        .map(|&i| View::of(&nesting.patterns[i]))
        .collect();
    let mut body = String::new();
    body.push_str(&format!(
        "<header><h1>Where the time goes</h1><p class=\"lead\">blackbox found <b>{}</b> kind{} of request (path patterns) among <b>{}</b> requests made of <b>{}</b> calls. \
         A pattern is the tree of calls one request makes; each call's latency is the time spent at the node it entered, its own calls included. \
         The node that adds the most latency to a pattern is the one with the most <i>own time</i>: time not covered by the calls it makes.</p></header>",
        nesting.patterns.len(),
        if nesting.patterns.len() == 1 { "" } else { "s" },
        nesting.stats.roots,
        nesting.stats.call_pairs,
    ));
    body.push_str(&pattern_table(report, &views));
    for (rank, (&i, view)) in report
        .ranked
        .iter()
        .zip(&views)
        .enumerate()
        .take(DRAWN_PATTERNS)
    {
        body.push_str(&pattern_section(
            report,
            rank + 1,
            &nesting.patterns[i],
            view,
        ));
    }
    if report.ranked.len() > DRAWN_PATTERNS {
        body.push_str(&format!(
            "<p class=\"hint\">The {} patterns after the first {DRAWN_PATTERNS} are in the table only.</p>",
            report.ranked.len() - DRAWN_PATTERNS
        ));
    }
    body.push_str(&input_section(notes));
    let title = format!(
        "blackbox: {} path patterns from {}",
        nesting.patterns.len(),
        notes.files.join(", ")
    );
    write_page(out, &title, &body)
}

/// What the page shows of one pattern beyond its raw samples.
struct View {
    /// Root latency summary.
    root: Summary,
    /// Mean own time of each position.
    own: Vec<f64>,
    /// Position with the most own time.
    hot: usize,
    /// Mean start of each position from the request's start.
    start: Vec<f64>,
    /// Depth of each position, 0 at the root.
    depth: Vec<usize>,
}

impl View {
    fn of(pattern: &Pattern) -> View {
        let positions = &pattern.positions;
        let n = positions.len();
        let mut depth = vec![0usize; n];
        let mut start = vec![0f64; n];
        let mean = |samples: &[Nanos]| {
            samples.iter().map(|&s| s as f64).sum::<f64>() / samples.len().max(1) as f64
        };
        // Pre-order: a parent comes before its children.
        for (i, p) in positions.iter().enumerate() {
            for &c in &p.children {
                depth[c as usize] = depth[i] + 1;
                start[c as usize] = start[i] + mean(&positions[c as usize].call_delays);
            }
        }
        let own: Vec<f64> = positions
            .iter()
            .map(|p| {
                let mut intervals = Vec::with_capacity(p.children.len());
                let mut total = 0f64;
                for (k, &latency) in p.latencies.iter().enumerate() {
                    intervals.clear();
                    intervals.extend(p.children.iter().map(|&c| {
                        let c = &positions[c as usize];
                        let from = c.call_delays[k].clamp(0, latency);
                        (from, (from + c.latencies[k]).clamp(from, latency))
                    }));
                    total += (latency - covered(&mut intervals)).max(0) as f64;
                }
                total / p.latencies.len().max(1) as f64
            })
            .collect();
        let hot = (0..n)
            .max_by(|&a, &b| own[a].total_cmp(&own[b]).then(b.cmp(&a)))
            .unwrap_or(0);
        View {
            root: Summary::of(&positions[0].latencies),
            own,
            hot,
            start,
            depth,
        }
    }
}

/// Length of the union of intervals.
fn covered(intervals: &mut [(Nanos, Nanos)]) -> Nanos {
    intervals.sort_unstable();
    let mut total = 0;
    let mut reach = Nanos::MIN;
    for &(from, to) in intervals.iter() {
        let from = from.max(reach);
        if to > from {
            total += to - from;
            reach = to;
        }
    }
    total
}

fn node_label(report: &NestReport<'_>, pattern: &Pattern, position: usize) -> String {
    report
        .trace
        .node_name(pattern.positions[position].node)
        .to_owned()
}

fn pattern_table(report: &NestReport<'_>, views: &[View]) -> String {
    let mut html = String::from(
        r#"<section id="patterns"><h2>Path patterns</h2><p class="hint">Click a column to sort. Click a pattern for its call tree, timeline and histograms.</p>
<div class="table-wrap"><table class="sortable"><thead><tr><th data-key="rank" data-first="ascending">#</th><th data-key="count">requests</th><th data-key="total">total latency</th><th data-key="mean">mean latency</th><th data-key="p90">p90 latency</th><th class="text" data-key="hot" data-first="ascending">adds the most</th><th data-key="own">its own time</th><th class="text" data-key="pattern" data-first="ascending">pattern</th></tr></thead><tbody>"#,
    );
    for (rank, (&i, view)) in report.ranked.iter().zip(views).enumerate() {
        let p = &report.nesting.patterns[i];
        let total = p.total_latency() as f64;
        let link = if rank < DRAWN_PATTERNS {
            format!(
                "<a href=\"#pattern-{}\">{}</a>",
                rank + 1,
                escape(&p.signature)
            )
        } else {
            escape(&p.signature)
        };
        html.push_str(&format!(
            "<tr><td data-v=\"{r}\">{r}</td><td data-v=\"{c}\">{c}</td><td data-v=\"{total}\">{}</td><td data-v=\"{mean}\">{}</td><td data-v=\"{p90}\">{}</td><td class=\"text hot-name\">{}</td><td data-v=\"{own}\">{}</td><td class=\"text signature\">{link}</td></tr>",
            human_duration(total),
            human_duration(p.mean_latency()),
            human_duration(view.root.p90 as f64),
            escape(&node_label(report, p, view.hot)),
            human_duration(view.own[view.hot]),
            r = rank + 1,
            c = p.count(),
            mean = p.mean_latency(),
            p90 = view.root.p90,
            own = view.own[view.hot],
        ));
    }
    html.push_str("</tbody></table></div>");
    if report.hidden() > 0 {
        html.push_str(&format!(
            "<p class=\"hint\">{} more pattern{} hidden by --top or --min-count.</p>",
            report.hidden(),
            if report.hidden() == 1 { "" } else { "s" }
        ));
    }
    html.push_str("</section>");
    html
}

fn pattern_section(report: &NestReport<'_>, rank: usize, pattern: &Pattern, view: &View) -> String {
    let positions = &pattern.positions;
    let mean_root = pattern.mean_latency();
    let hot_name = node_label(report, pattern, view.hot);
    let mut html = format!(
        "<section class=\"pattern\" id=\"pattern-{rank}\"><h2>#{rank} <code>{}</code></h2>",
        escape(&pattern.signature)
    );
    let fact = |value: String, what: &str| format!("<div><b>{value}</b><span>{what}</span></div>");
    html.push_str("<div class=\"facts\">");
    html.push_str(&fact(pattern.count().to_string(), "requests"));
    html.push_str(&fact(human_duration(mean_root), "mean latency"));
    html.push_str(&fact(human_duration(view.root.p50 as f64), "median"));
    html.push_str(&fact(human_duration(view.root.p90 as f64), "p90"));
    html.push_str(&fact(human_duration(view.root.p99 as f64), "p99"));
    html.push_str(&fact(
        human_duration(pattern.total_latency() as f64),
        "total",
    ));
    html.push_str("</div>");
    html.push_str(&format!(
        "<p class=\"callout\"><b>{}</b> adds the most latency: {} of its own on average, {:.0}% of the request's mean.</p>",
        escape(&hot_name),
        human_duration(view.own[view.hot]),
        if mean_root > 0.0 { 100.0 * view.own[view.hot] / mean_root } else { 0.0 }
    ));

    html.push_str("<h3>Call tree</h3><p class=\"hint\">Mean latency at each node (its calls included), its own time, and how long after its caller was called it was called.</p>");
    html.push_str(&tree(report, pattern, view));

    let drawn = positions.len().min(DRAWN_CALLS);
    html.push_str("<h3>Timeline of a typical request</h3><p class=\"hint\">Each call starts at its mean call delay after its caller's start and lasts its mean latency; the dark strip is its own time. Calls made in parallel overlap.</p>");
    let bars: Vec<Bar> = (0..drawn)
        .map(|i| Bar {
            label: node_label(report, pattern, i),
            depth: view.depth[i],
            start: view.start[i],
            length: Summary::of(&positions[i].latencies).mean,
            own: view.own[i],
            hot: i == view.hot,
        })
        .collect();
    html.push_str(&charts::timeline(&bars));

    html.push_str("<h3>Latency per node</h3><p class=\"hint\">Histograms in bins of equal ratio; solid line: mean, dashed: p90.</p><div class=\"hists\">");
    for (i, position) in positions.iter().enumerate().take(drawn) {
        let s = Summary::of(&position.latencies);
        html.push_str(&format!(
            "<figure{}>{}<figcaption><b>{}</b> <span>called by {}</span><br>mean {} · p50 {} · p90 {} · p99 {}</figcaption></figure>",
            if i == view.hot { " class=\"hot\"" } else { "" },
            charts::histogram(&position.latencies, s.mean, s.p90),
            escape(&node_label(report, pattern, i)),
            escape(report.trace.node_name(position.caller)),
            human_duration(s.mean),
            human_duration(s.p50 as f64),
            human_duration(s.p90 as f64),
            human_duration(s.p99 as f64),
        ));
    }
    html.push_str("</div>");
    if positions.len() > drawn {
        html.push_str(&format!(
            "<p class=\"hint\">{} more calls in this pattern are in the tree only.</p>",
            positions.len() - drawn
        ));
    }
    html.push_str("</section>");
    html
}

/// Operations shown per node in the tree, most frequent first.
const SHOWN_OPERATIONS: usize = 3;

/// A node's operations with their counts, and its error rate, where the protocol
/// told them; empty otherwise.
fn operations_and_errors(
    report: &NestReport<'_>,
    position: &crate::nesting::patterns::Position,
) -> String {
    let operations = position.operations_by_count(report.trace);
    let mut html = String::new();
    if !operations.is_empty() {
        html.push_str("<span class=\"ops\">");
        for (name, count) in operations.iter().take(SHOWN_OPERATIONS) {
            html.push_str(&format!("<code>{}</code> ×{count} ", escape(name)));
        }
        if operations.len() > SHOWN_OPERATIONS {
            html.push_str(&format!("and {} more", operations.len() - SHOWN_OPERATIONS));
        }
        html.push_str("</span>");
    }
    if position.with_status > 0 {
        html.push_str(&format!(
            "<span class=\"ops{}\">{:.1}% errors ({} of {})</span>",
            if position.errors > 0 { " err" } else { "" },
            100.0 * position.errors as f64 / position.with_status as f64,
            position.errors,
            position.with_status
        ));
    }
    html
}

/// The call tree as nested lists, written without recursion (patterns can be deep).
fn tree(report: &NestReport<'_>, pattern: &Pattern, view: &View) -> String {
    let positions = &pattern.positions;
    let mut html = String::from("<ul class=\"tree\">");
    let mut open = 0usize;
    for (i, position) in positions.iter().enumerate() {
        let depth = view.depth[i];
        if i > 0 {
            if depth > open {
                html.push_str("<ul>");
            } else {
                html.push_str("</li>");
                for _ in depth..open {
                    html.push_str("</ul></li>");
                }
            }
        }
        open = depth;
        let latency = Summary::of(&position.latencies).mean;
        let delay = if i == 0 {
            format!(
                "called by {}",
                escape(report.trace.node_name(position.caller))
            )
        } else {
            format!(
                "called {} after its caller",
                human_duration(Summary::of(&position.call_delays).mean)
            )
        };
        html.push_str(&format!(
            "<li><span class=\"call{}\"><span class=\"name\">{}</span><span class=\"m\">{} latency</span><span class=\"m\">{} own</span><span class=\"m\">{delay}</span>{}</span>",
            if i == view.hot { " hot" } else { "" },
            escape(report.trace.node_name(position.node)),
            human_duration(latency),
            human_duration(view.own[i]),
            if i == view.hot { "<span class=\"badge\">adds the most</span>" } else { "" },
        ));
        html.push_str(&operations_and_errors(report, position));
    }
    html.push_str("</li>");
    for _ in 0..open {
        html.push_str("</ul></li>");
    }
    html.push_str("</ul>");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_time_counts_overlaps_once() {
        assert_eq!(covered(&mut [(0, 10), (5, 15), (20, 25)]), 20);
        assert_eq!(covered(&mut [(3, 3)]), 0);
        assert_eq!(covered(&mut []), 0);
    }

    #[test]
    fn own_time_is_latency_not_covered_by_children() {
        // Figure 2: A->B (10 s) calls C at +2 s for 2 s and D at +6 s for 2 s.
        let trace = crate::trace::text::trace_from_str(
            "1 CALL A B 1\n3 CALL B C 2\n5 RET C B 2\n7 CALL B D 3\n9 RET D B 3\n11 RET B A 1\n",
        );
        let n = crate::nesting::nest(&trace, &Default::default()).unwrap();
        let view = View::of(&n.patterns[0]);
        assert_eq!(view.own, vec![6e9, 2e9, 2e9]);
        assert_eq!(view.hot, 0);
        assert_eq!(view.start, vec![0.0, 2e9, 6e9]);
        assert_eq!(view.depth, vec![0, 1, 1]);
    }
}
