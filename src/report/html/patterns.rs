//! The nesting page: the ranked, sortable pattern table, then for each pattern its call
//! tree with per-node latency, own time, call delay and each edge's time in transit
//! (what TCP held back, and why), what adds the most latency (a node or an edge)
//! highlighted, a typical request's timeline (medians, which a two-humped distribution
//! does not pull into the gap between its humps), the slowest requests each as its own
//! timeline, latency and rate over time, and latency histograms per node. A pattern of
//! one request shows that request.

use super::charts::{self, Bar};
use super::{input_section, write_page, InputNotes};
use crate::nesting::{Pattern, Summary};
use crate::report::own_time::{most_added, most_added_words, own_times, MostAdded};
use crate::report::NestReport;
use crate::trace::time::human_duration;
use crate::trace::Nanos;
use maud::{html, Markup, PreEscaped};
use std::io::{self, Write};

/// Patterns drawn in full; the table lists every ranked one.
pub const DRAWN_PATTERNS: usize = 40;
/// Calls per pattern drawn in the timelines and as histograms.
pub const DRAWN_CALLS: usize = 60;
/// Slowest requests of a pattern drawn each as its own timeline.
pub const SLOWEST: usize = 3;

/// Writes the nesting page.
pub fn write_nesting(
    report: &NestReport<'_>,
    notes: &InputNotes,
    out: &mut dyn Write,
) -> io::Result<()> {
    let nesting = report.nesting;
    // The page draws each request: a nesting that kept only summaries (nested in
    // segments, where values are sketched) cannot be drawn, and says so.
    let sketched = nesting.patterns.iter().any(|pattern| {
        pattern.positions.iter().any(|position| {
            position.latencies.values().is_none() || position.call_delays.values().is_none()
        })
    });
    if sketched {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the HTML report draws every request, and this nesting kept only their summaries \
             (it was nested in segments): nest the trace whole (--segment-lines 0)",
        ));
    }
    let views: Vec<View> = report
        .ranked
        .iter()
        .map(|&i| View::of(&nesting.patterns[i]))
        .collect();
    let count = nesting.patterns.len();
    let body = html! {
        header {
            h1 { "Where the time goes" }
            p.lead {
                "blackbox found " b { (count) } " kind" @if count != 1 { "s" } " of request (path patterns) among "
                b { (nesting.stats.roots) } " requests made of " b { (nesting.stats.call_pairs) } " calls. "
                "A pattern is the tree of calls one request makes; each call's latency is the time spent at the node it entered, its own calls included. "
                "What adds the most latency to a pattern is the node with the most " i { "own time" } " (time not covered by the calls it makes, each until the last byte of its answer) "
                "or the edge whose messages spent longer " i { "in transit" } ", from their first byte to their last (where TCP held bytes back, the page says why)."
            }
        }
        (pattern_table(report, &views))
        @for (rank, (&i, view)) in report.ranked.iter().zip(&views).enumerate().take(DRAWN_PATTERNS) {
            (pattern_section(report, rank + 1, &nesting.patterns[i], view))
        }
        @if report.ranked.len() > DRAWN_PATTERNS {
            p.hint { "The " (report.ranked.len() - DRAWN_PATTERNS) " patterns after the first " (DRAWN_PATTERNS) " are in the table only." }
        }
        (input_section(notes))
    };
    let title = format!(
        "blackbox: {count} path patterns from {}",
        notes.files.join(", ")
    );
    write_page(out, &title, body)
}

/// What the page shows of one pattern beyond its raw samples.
struct View {
    /// Root latency summary.
    root: Summary,
    /// Own time of each position in each instance.
    own: Vec<Vec<Nanos>>,
    /// Median own time of each position.
    typical_own: Vec<f64>,
    /// What adds the most (by the mean: where the time goes in total).
    most: MostAdded,
    /// Its position, where it is a node's own time (not an edge's transit).
    hot: Option<usize>,
    /// Depth of each position, 0 at the root.
    depth: Vec<usize>,
}

impl View {
    fn of(pattern: &Pattern) -> View {
        let positions = &pattern.positions;
        let n = positions.len();
        let mut depth = vec![0usize; n];
        // Pre-order: a parent comes before its children.
        for (i, p) in positions.iter().enumerate() {
            for &c in &p.children {
                depth[c as usize] = depth[i] + 1;
            }
        }
        let own = own_times(pattern);
        let typical_own = own.iter().map(|o| Summary::of(o).p50 as f64).collect();
        let most = most_added(pattern);
        View {
            root: positions[0].latencies.summary(),
            own,
            typical_own,
            most,
            hot: (!most.transit).then_some(most.position),
            depth,
        }
    }

    /// The bars of a typical request: each call at its median delay after its caller's
    /// start, lasting its median latency.
    fn typical(&self, report: &NestReport<'_>, pattern: &Pattern) -> Vec<Bar> {
        let positions = &pattern.positions;
        let mut start = vec![0f64; positions.len()];
        for (i, p) in positions.iter().enumerate() {
            for &c in &p.children {
                let c = c as usize;
                start[c] = start[i] + positions[c].call_delays.summary().p50 as f64;
            }
        }
        (0..positions.len().min(DRAWN_CALLS))
            .map(|i| Bar {
                label: node_label(report, pattern, i),
                depth: self.depth[i],
                start: start[i],
                length: positions[i].latencies.summary().p50 as f64,
                own: self.typical_own[i],
                hot: self.hot == Some(i),
                answer_transit: positions[i].reply_transit.summary_or_zero().p50 as f64,
                transit_hot: self.most.transit && self.most.position == i,
            })
            .collect()
    }

    /// The bars of instance `k` as it happened.
    fn instance(&self, report: &NestReport<'_>, pattern: &Pattern, k: usize) -> Vec<Bar> {
        let positions = &pattern.positions;
        let mut start = vec![0f64; positions.len()];
        for (i, p) in positions.iter().enumerate() {
            for &c in &p.children {
                let c = c as usize;
                start[c] = start[i] + each(&positions[c].call_delays)[k] as f64;
            }
        }
        (0..positions.len().min(DRAWN_CALLS))
            .map(|i| Bar {
                label: node_label(report, pattern, i),
                depth: self.depth[i],
                start: start[i],
                length: each(&positions[i].latencies)[k] as f64,
                own: self.own[i][k] as f64,
                hot: self.hot == Some(i),
                answer_transit: positions[i]
                    .reply_transit
                    .values()
                    .and_then(|values| values.get(k))
                    .copied()
                    .unwrap_or(0) as f64,
                transit_hot: self.most.transit && self.most.position == i,
            })
            .collect()
    }
}

fn node_label(report: &NestReport<'_>, pattern: &Pattern, position: usize) -> String {
    report
        .trace
        .node_name(pattern.positions[position].node)
        .to_owned()
}

fn pattern_table(report: &NestReport<'_>, views: &[View]) -> Markup {
    html! {
        section id="patterns" {
            h2 { "Path patterns" }
            p.hint { "Click a column to sort. Click a pattern for its call tree, timelines and histograms." }
            div.table-wrap { table.sortable {
                thead { tr {
                    th data-key="rank" data-first="ascending" { "#" }
                    th data-key="count" { "requests" }
                    th data-key="total" { "total latency" }
                    th data-key="mean" { "mean latency" }
                    th data-key="p90" { "p90 latency" }
                    th.text data-key="hot" data-first="ascending" { "adds the most" }
                    th data-key="own" title="Its own time, or the edge's time in transit, per request on average" { "its time" }
                    th data-key="sure" title="The share of its requests whose every call has its true parent, as the confidence of each choice promises" { "sure" }
                    th.text data-key="pattern" data-first="ascending" { "pattern" }
                } }
                tbody {
                    @for (rank, (&i, view)) in report.ranked.iter().zip(views).enumerate() {
                        @let p = &report.nesting.patterns[i];
                        @let total = p.total_latency() as f64;
                        tr {
                            td data-v=(rank + 1) { (rank + 1) }
                            td data-v=(p.count()) { (p.count()) }
                            td data-v=(total) { (human_duration(total)) }
                            td data-v=(p.mean_latency()) { (human_duration(p.mean_latency())) }
                            td data-v=(view.root.p90) { (human_duration(view.root.p90 as f64)) }
                            td.text.hot-name { (most_words(report, p, &view.most)) }
                            td data-v=(view.most.mean) { (human_duration(view.most.mean)) }
                            td data-v=(p.sure()) { (super::super::sure_percent(p.sure())) }
                            td.text.signature {
                                @if rank < DRAWN_PATTERNS {
                                    a href={ "#pattern-" (rank + 1) } { (p.signature) }
                                } @else { (p.signature) }
                            }
                        }
                    }
                }
            } }
            @if report.hidden() > 0 {
                p.hint { (report.hidden()) " more pattern" @if report.hidden() != 1 { "s" } " hidden by --top or --min-count." }
            }
        }
    }
}

fn pattern_section(report: &NestReport<'_>, rank: usize, pattern: &Pattern, view: &View) -> Markup {
    let positions = &pattern.positions;
    let mean_root = pattern.mean_latency();
    let drawn = positions.len().min(DRAWN_CALLS);
    let count = pattern.instances.len();
    let share = if mean_root > 0.0 {
        100.0 * view.most.mean / mean_root
    } else {
        0.0
    };
    let most = &view.most;
    let held = most.held.map(|(why, instances)| {
        (
            why.meaning(),
            100.0 * instances as f64 / pattern.count().max(1) as f64,
        )
    });
    // Instances from the slowest, ties to the earliest.
    let mut slowest: Vec<usize> = (0..count).collect();
    slowest.sort_by_key(|&k| (std::cmp::Reverse(each(&positions[0].latencies)[k]), k));
    let started = |k: usize| report.nesting.pairs[pattern.instances[k] as usize].callee_recv;
    html! {
        section.pattern id={ "pattern-" (rank) } {
            h2 { "#" (rank) " " code { (pattern.signature) } }
            div.facts {
                div { b { (count) } span { @if count == 1 { "request" } @else { "requests" } } }
                @if count > 1 {
                    div { b { (human_duration(view.root.p50 as f64)) } span { "median" } }
                    div { b { (human_duration(view.root.p99 as f64)) } span { "p99" } }
                    div { b { (human_duration(mean_root)) } span { "mean" } }
                }
                div { b { (human_duration(pattern.total_latency() as f64)) } span { "total" } }
                div { b { (super::super::sure_percent(pattern.sure())) } span { "sure" } }
            }
            p.callout {
                @if most.transit {
                    b { (most_words(report, pattern, most)) } " adds the most latency: "
                    (human_duration(most.mean)) " in transit on average, between the first and the last byte of its messages, "
                    (format!("{share:.0}")) "% of the request's mean."
                    @if let Some((meaning, held_share)) = held {
                        " TCP held bytes back until the peer's ACK in " (format!("{held_share:.0}")) "% of requests (" (meaning) "): "
                        "the node receiving it is not slow: it waits for the rest of the message."
                    }
                } @else {
                    b { (node_label(report, pattern, most.position)) } " adds the most latency: "
                    (human_duration(most.mean)) " of its own on average, "
                    (format!("{share:.0}")) "% of the request's mean."
                }
            }
            (what_to_fix(report, pattern))
            h3 { "Call tree" }
            p.hint { "Median latency at each node (its calls included), its own time, and how long after its caller was called it was called." }
            (tree(report, pattern, view))
            @if count == 1 {
                h3 { "Its one request" }
                p.hint { "Started at " (clock(started(0))) "; each call at its delay after its caller's start, lasting its latency; the dark strip is its own time, the thin one after a call its answer in transit." }
                (PreEscaped(charts::timeline(&view.instance(report, pattern, 0))))
            } @else {
                h3 { "Timeline of a typical request" }
                p.hint { "Each call starts at its median call delay after its caller's start and lasts its median latency; the dark strip is its own time, the thin one after a call its answer in transit (first byte to last), red where that adds the most. Calls made in parallel overlap." }
                (PreEscaped(charts::timeline(&view.typical(report, pattern))))
                h3 { "The slowest requests" }
                p.hint { "As they happened, to compare with the typical one." }
                div.slowest {
                    @for &k in slowest.iter().take(SLOWEST) {
                        h4 { (human_duration(each(&positions[0].latencies)[k] as f64)) ", started at " (clock(started(k))) }
                        (PreEscaped(charts::timeline(&view.instance(report, pattern, k))))
                    }
                }
                h3 { "Latency over time" }
                @let requests: Vec<(Nanos, Nanos)> = (0..count).map(|k| (started(k), each(&positions[0].latencies)[k])).collect();
                @let changed = report.windows.and_then(|windows| {
                    crate::windows::most_changed(windows, &pattern.signature).map(|k| &windows[k])
                });
                @if let Some(window) = changed {
                    p.hint.window-mark {
                        "Shaded: the --window where its median latency moved most from the window before, "
                        (clock(window.start)) " to " (clock(window.end)) "."
                    }
                }
                (PreEscaped(charts::over_time(&requests, changed.map(|w| (w.start, w.end)))))
                h3 { "Latency per node" }
                p.hint { "Histograms in bins of equal ratio; black line: median, red: p99." }
                div.hists {
                    @for (i, position) in positions.iter().enumerate().take(drawn) {
                        @let s = position.latencies.summary();
                        figure class=@if view.hot == Some(i) { "hot" } @else { "" } {
                            (PreEscaped(charts::histogram(each(&position.latencies), s.p50, s.p99)))
                            figcaption {
                                b { (node_label(report, pattern, i)) } " "
                                span { "called by " (report.trace.node_name(position.caller)) }
                                br;
                                "median " (human_duration(s.p50 as f64)) " · p90 " (human_duration(s.p90 as f64)) " · p99 " (human_duration(s.p99 as f64))
                            }
                        }
                    }
                }
            }
            @if positions.len() > drawn {
                p.hint { (positions.len() - drawn) " more calls in this pattern are in the tree only." }
            }
        }
    }
}

/// The critical path's parts ranked by what making each shorter would save.
fn what_to_fix(report: &NestReport<'_>, pattern: &Pattern) -> Markup {
    let fixes = crate::report::own_time::fixes(pattern);
    let mean = pattern.mean_latency().max(1.0);
    let words = |fix: &crate::report::own_time::Fix| {
        let name = |i: usize| node_label(report, pattern, i);
        match fix.transit {
            false => format!("{}'s own time", name(fix.position)),
            true => {
                let position = &pattern.positions[fix.position];
                let caller = report.trace.node_name(position.caller);
                let edge =
                    crate::report::own_time::edge_words(position, caller, &name(fix.position));
                match position.held_most() {
                    Some((why, _)) => format!("{edge} in transit (held by TCP: {})", why.short()),
                    None => format!("{edge} in transit"),
                }
            }
        }
    };
    html! {
        h3 { "What to fix" }
        p.hint {
            "The critical path: what each request waited for, walking back from its answer (of calls made in parallel, the one that answered last). "
            "For each node's own time and each edge's time in transit on it: its mean share, and the mean latency saved were it 10% or 50% shorter, "
            "on each request's path, up to where a call beside it would become the one waited for."
        }
        div.table-wrap { table {
            thead { tr {
                th.text { "on the critical path" }
                th { "mean time on it" }
                th { "share" }
                th { "saved if 10% shorter" }
                th { "saved if 50% shorter" }
            } }
            tbody {
                @for (k, fix) in fixes.iter().take(SHOWN_FIXES).enumerate() {
                    tr {
                        td.text class=@if k == 0 { "hot-name" } @else { "" } { (words(fix)) }
                        td { (human_duration(fix.on_path)) }
                        td { (format!("{:.0}%", 100.0 * fix.on_path / mean)) }
                        td { (human_duration(fix.savings[0])) }
                        td { (human_duration(fix.savings[1])) " (" (format!("{:.0}%", 100.0 * fix.savings[1] / mean)) ")" }
                    }
                }
            }
        } }
        @if fixes.len() > SHOWN_FIXES {
            p.hint { (fixes.len() - SHOWN_FIXES) " smaller parts of the path are in the JSON (--json)." }
        }
    }
}

/// Parts of the critical path the page ranks.
const SHOWN_FIXES: usize = 8;

/// What adds the most to `pattern`, in words.
fn most_words(report: &NestReport<'_>, pattern: &Pattern, most: &MostAdded) -> String {
    let name = |i: usize| node_label(report, pattern, i);
    most_added_words(pattern, most, &name)
}

/// A time of day, UTC, to the microsecond, for when a request started.
fn clock(nanos: Nanos) -> String {
    format!("{} UTC", super::super::clock(nanos, 6))
}

/// Operations shown per node in the tree, most frequent first.
const SHOWN_OPERATIONS: usize = 3;

/// A node's operations with their counts, and its error rate, where the protocol
/// told them; nothing otherwise.
fn operations_and_errors(
    report: &NestReport<'_>,
    position: &crate::nesting::patterns::Position,
) -> Markup {
    let operations = position.operations_by_count(report.trace);
    html! {
        @if !operations.is_empty() {
            span.ops {
                @for (name, count) in operations.iter().take(SHOWN_OPERATIONS) {
                    code { (name) } " ×" (count) " "
                }
                @if operations.len() > SHOWN_OPERATIONS {
                    "and " (operations.len() - SHOWN_OPERATIONS) " more"
                }
            }
        }
        @if position.with_status > 0 {
            span class=@if position.errors > 0 { "ops err" } @else { "ops" } {
                (format!("{:.1}", 100.0 * position.errors as f64 / position.with_status as f64))
                "% errors (" (position.errors) " of " (position.with_status) ")"
            }
        }
    }
}

/// The call tree as nested lists. Written as a flat run of opening and closing tags,
/// not recursively (patterns can be deep); each node's content is a template.
fn tree(report: &NestReport<'_>, pattern: &Pattern, view: &View) -> Markup {
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
        let hot = view.hot == Some(i);
        let hot_edge = view.most.transit && view.most.position == i;
        let transit = position.mean_transit();
        let held = position.held_most();
        let node = html! {
            li {
                span class=@if hot { "call hot" } @else { "call" } {
                    span.name { (report.trace.node_name(position.node)) }
                    span.m { (human_duration(position.latencies.summary().p50 as f64)) " latency" }
                    span.m { (human_duration(view.typical_own[i])) " own" }
                    span.m {
                        @if i == 0 { "called by " (report.trace.node_name(position.caller)) }
                        @else if position.through_broker { "⇒ delivered by " (report.trace.node_name(position.caller)) " after " (human_duration(position.call_delays.summary().p50 as f64)) " in it" }
                        @else { "called " (human_duration(position.call_delays.summary().p50 as f64)) " after its caller" }
                    }
                    @if i > 0 {
                        span.m title="Mean confidence that this call's parent is the call above it" {
                            (super::super::sure_percent(position.confidence_sum / position.latencies.len().max(1) as f64)) " sure of its caller"
                        }
                    }
                    @if transit >= 1_000.0 {
                        span.m class=@if hot_edge { "transit hot-name" } @else { "transit" } title="The call's and its answer's time between their first and last byte, per request on average" {
                            (human_duration(transit)) " in transit"
                            @if let Some((why, instances)) = held {
                                ", held by TCP (" (why.short()) ") in "
                                (format!("{:.0}", 100.0 * instances as f64 / position.latencies.len().max(1) as f64)) "%"
                            }
                        }
                    }
                    @if hot || hot_edge { span.badge { "adds the most" } }
                }
                (operations_and_errors(report, position))
            }
        };
        // The item stays open for its children: drop the template's closing tag.
        let node = node.into_string();
        html.push_str(node.strip_suffix("</li>").unwrap_or(&node));
    }
    html.push_str("</li>");
    for _ in 0..open {
        html.push_str("</ul></li>");
    }
    html.push_str("</ul>");
    PreEscaped(html)
}

/// Every instance's value: [`write_nesting`] refuses a nesting that sketched them.
fn each(samples: &crate::nesting::patterns::Samples) -> &[Nanos] {
    samples.values().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typical_request_is_drawn_from_medians_not_means() {
        // Two humps: three fast requests (1 ms) and two slow ones (100 ms). The mean,
        // 40.6 ms, lies in the gap between them; the median is a fast request.
        let mut text = String::new();
        for (k, ms) in [1, 1, 1, 100, 100].iter().enumerate() {
            let t = k as f64 * 10.0;
            text.push_str(&format!(
                "{t} CALL A B {k}\n{} RET B A {k}\n",
                t + *ms as f64 / 1000.0
            ));
        }
        let trace = crate::trace::text::trace_from_str(&text);
        let nesting = crate::nesting::nest(&trace, &Default::default()).unwrap();
        let options = crate::nesting::NestOptions::default();
        let report = NestReport::new(&trace, &nesting, &options, Default::default());
        let view = View::of(&nesting.patterns[0]);
        let bars = view.typical(&report, &nesting.patterns[0]);
        assert_eq!(bars[0].length, 1e6);
    }

    #[test]
    fn a_nesting_that_kept_only_summaries_is_refused_not_drawn() {
        let text = "0 CALL A B 1\n0.001 RET B A 1\n";
        let trace = crate::trace::text::trace_from_str(text);
        let mut nesting = crate::nesting::nest(&trace, &Default::default()).unwrap();
        // As segments merge them past the exact limit: sketched.
        let latencies = nesting.patterns[0].positions[0].latencies.clone();
        let mut sketched = crate::nesting::patterns::Samples::default();
        sketched.merge(&latencies, 0);
        nesting.patterns[0].positions[0].latencies = sketched;
        let options = crate::nesting::NestOptions::default();
        let report = NestReport::new(&trace, &nesting, &options, Default::default());
        let error = write_nesting(&report, &Default::default(), &mut Vec::new()).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(error.to_string().contains("--segment-lines 0"), "{error}");
    }

    #[test]
    fn a_request_started_at_its_time_of_day() {
        assert_eq!(clock(1_700_000_000_084_250_000), "22:13:20.084250 UTC");
    }
}
