//! The JSON report of the design: `algorithm`, `input` counts (with every reason for
//! skipping), the options used, and the ranked patterns with per-node latency and
//! call-delay distributions in seconds, each node's latency split into its own time,
//! waiting on its calls and its request's transit, each edge's time in transit, and
//! what adds the most.

use super::{seconds, NestReport, Render};
use crate::nesting::{Pattern, Summary};
use serde::Serialize;
use std::io::{self, Write};

/// The JSON report.
pub struct Json;

#[derive(Serialize)]
struct Document<'a> {
    algorithm: &'static str,
    input: Input<'a>,
    options: OptionsOut,
    sort: super::SortKey,
    patterns_total: usize,
    patterns: Vec<PatternOut<'a>>,
    /// With `--window`: per window, its patterns (a time series).
    #[serde(skip_serializing_if = "Option::is_none")]
    windows: Option<Vec<WindowOut<'a>>>,
}

#[derive(Serialize)]
struct WindowOut<'a> {
    start: f64,
    end: f64,
    requests: u64,
    patterns: Vec<WindowPatternOut<'a>>,
}

#[derive(Serialize)]
struct WindowPatternOut<'a> {
    signature: &'a str,
    count: u64,
    latency_s: Distribution,
    /// Each node's mean own time, in the pattern's pre-order.
    nodes: Vec<WindowNodeOut<'a>>,
}

#[derive(Serialize)]
struct WindowNodeOut<'a> {
    node: &'a str,
    caller: &'a str,
    own_time_s: f64,
}

#[derive(Serialize)]
struct OptionsOut {
    skew_window_s: f64,
    async_window_s: f64,
    bin_base: f64,
    bin_floor_s: f64,
    bin_ceiling_s: f64,
    smoothing_bins: f64,
    penalties: crate::nesting::Penalties,
}

impl From<&crate::nesting::NestOptions> for OptionsOut {
    fn from(o: &crate::nesting::NestOptions) -> Self {
        OptionsOut {
            skew_window_s: seconds(o.skew_window as f64),
            async_window_s: seconds(o.async_window as f64),
            bin_base: o.bin_base,
            bin_floor_s: seconds(o.bin_floor as f64),
            bin_ceiling_s: seconds(o.bin_ceiling as f64),
            smoothing_bins: o.smoothing,
            penalties: o.penalties,
        }
    }
}

#[derive(Serialize)]
struct Input<'a> {
    #[serde(flatten)]
    read: &'a crate::trace::InputStats,
    /// What the packet captures among the inputs gave, summed over files.
    #[serde(skip_serializing_if = "Option::is_none")]
    capture: Option<&'a crate::capture::stats::FileStats>,
    #[serde(flatten)]
    nesting: &'a crate::nesting::NestStats,
    /// How a nesting done in segments was cut (`nest --segment-lines`).
    #[serde(skip_serializing_if = "Option::is_none")]
    streamed: Option<StreamedOut>,
}

#[derive(Serialize)]
struct StreamedOut {
    segments: u64,
    margin_s: f64,
    largest_segment_lines: u64,
    late_lines: u64,
}

#[derive(Serialize)]
struct PatternOut<'a> {
    rank: usize,
    signature: &'a str,
    count: u64,
    total_latency_s: f64,
    mean_latency_s: f64,
    confidence: Confidence,
    /// What adds the most to the latency on average: a node's own time or an edge's
    /// time in transit.
    adds_most: AddsMostOut<'a>,
    /// Where a broker carried the request on after its answer (a `⇒` hop): how long
    /// after the root's answer its last call ended, per request.
    #[serde(skip_serializing_if = "Option::is_none")]
    async_tail_s: Option<Distribution>,
    tree: NodeOut<'a>,
}

#[derive(Serialize)]
struct AddsMostOut<'a> {
    /// `own_time` (the node's) or `transit` (the edge from its caller to it).
    what: &'static str,
    node: &'a str,
    caller: &'a str,
    mean_s: f64,
    /// Why TCP held the edge's messages back, where it held most of their transit.
    #[serde(skip_serializing_if = "Option::is_none")]
    held_by: Option<&'static str>,
}

#[derive(Serialize)]
struct CriticalOut {
    own_time_s: f64,
    transit_s: f64,
}

#[derive(Serialize)]
struct WhatIfOut {
    own_time: Savings,
    transit: Savings,
}

#[derive(Serialize)]
struct Savings {
    #[serde(rename = "10%")]
    ten_s: f64,
    #[serde(rename = "50%")]
    fifty_s: f64,
}

impl From<[f64; 2]> for Savings {
    fn from([ten, fifty]: [f64; 2]) -> Self {
        Savings {
            ten_s: seconds(ten),
            fifty_s: seconds(fifty),
        }
    }
}

/// An edge's messages between first and last byte, per request on average; only where
/// the captures told it.
#[derive(Serialize)]
struct TransitOut {
    request_s: f64,
    reply_s: f64,
    /// Of the two, what TCP held back until the peer's ACK.
    held_s: f64,
    /// Share of requests in which TCP held part of either message back.
    held_share: f64,
    /// Why, where it did: `nagle` (after a small segment, a delayed ACK) or `window`.
    #[serde(skip_serializing_if = "Option::is_none")]
    held_by: Option<&'static str>,
}

/// How solid a pattern's instances are: the confidence of the parent choices that
/// built them (0 to 1), and the share of instances exactly right as they promise.
#[derive(Serialize)]
struct Confidence {
    mean: f64,
    min: f32,
    exact: f64,
}

#[derive(Serialize)]
struct NodeOut<'a> {
    node: &'a str,
    caller: &'a str,
    latency_s: Distribution,
    call_delay_s: Distribution,
    /// Mean confidence that this call's parent is right (1 at the root).
    confidence: f64,
    /// The mean latency's parts: the node's own time, waiting on its calls (each until
    /// the last byte of its answer), and the rest of its request in transit.
    own_time_s: f64,
    waiting_on_calls_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    transit: Option<TransitOut>,
    /// Per request on average: its own time and its edge's transit on the request's
    /// critical path (what the request waited for).
    critical_path: CriticalOut,
    /// The pattern's mean latency saved were its own time, or its edge's transit, 10%
    /// or 50% shorter (on each request's critical path, up to where another call
    /// becomes the one waited for).
    what_if: WhatIfOut,
    /// Share of instances in which the parent answered before this call returned (did
    /// not wait for it); only where some did (asynchronous children, `--async-window`).
    #[serde(skip_serializing_if = "Option::is_none")]
    unawaited_share: Option<f64>,
    /// A broker's delivery of what its caller's parent published (`⇒`), not awaited:
    /// its `call_delay_s` is the message's time in the broker.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    through_broker: bool,
    /// The operations called here, most frequent first; only where the protocol names
    /// them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    operations: Vec<OperationOut<'a>>,
    /// Calls here answered with a failure; only where the protocol tells.
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<u64>,
    children: Vec<NodeOut<'a>>,
}

#[derive(Serialize)]
struct OperationOut<'a> {
    name: &'a str,
    count: u64,
}

#[derive(Serialize)]
struct Distribution {
    mean: f64,
    p50: f64,
    p90: f64,
    p99: f64,
}

impl From<Summary> for Distribution {
    fn from(s: Summary) -> Self {
        Distribution {
            mean: seconds(s.mean),
            p50: seconds(s.p50 as f64),
            p90: seconds(s.p90 as f64),
            p99: seconds(s.p99 as f64),
        }
    }
}

/// Deepest call tree the JSON nests. Real systems are a few dozen calls deep; a
/// crafted trace could be far deeper, and nested JSON is written recursively.
pub const MAX_DEPTH: usize = 1_000;

impl Render for Json {
    fn render(&self, report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()> {
        if let Some((rank, p)) = report
            .ranked
            .iter()
            .map(|&i| &report.nesting.patterns[i])
            .enumerate()
            .find(|(_, p)| p.depth() > MAX_DEPTH)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "pattern {} is {} calls deep; JSON output nests at most {MAX_DEPTH}",
                    rank + 1,
                    p.depth()
                ),
            ));
        }
        let patterns = report
            .ranked
            .iter()
            .enumerate()
            .map(|(rank, &i)| {
                let p = &report.nesting.patterns[i];
                PatternOut {
                    rank: rank + 1,
                    signature: &p.signature,
                    count: p.count(),
                    total_latency_s: seconds(p.total_latency() as f64),
                    mean_latency_s: seconds(p.mean_latency()),
                    adds_most: adds_most(report, p),
                    async_tail_s: (!p.tails.is_empty()).then(|| p.tails.summary().into()),
                    confidence: Confidence {
                        mean: p.mean_confidence(),
                        min: p.confidence_min,
                        exact: p.sure(),
                    },
                    tree: node(report, p, 0),
                }
            })
            .collect();
        let document = Document {
            algorithm: "nesting",
            input: Input {
                read: &report.trace.stats,
                capture: report.capture,
                nesting: &report.nesting.stats,
                streamed: report.streamed.map(|cut| StreamedOut {
                    segments: cut.segments,
                    margin_s: seconds(cut.margin as f64),
                    largest_segment_lines: cut.largest_segment_lines,
                    late_lines: cut.late_lines,
                }),
            },
            options: report.options.into(),
            sort: report.ranking.sort,
            patterns_total: report.nesting.patterns.len(),
            patterns,
            windows: report.windows.map(|windows| {
                windows
                    .iter()
                    .map(|window| WindowOut {
                        start: seconds(window.start as f64),
                        end: seconds(window.end as f64),
                        requests: window.requests(),
                        patterns: window
                            .patterns
                            .iter()
                            .map(|p| {
                                let own = p.mean_own_times();
                                WindowPatternOut {
                                    signature: &p.signature,
                                    count: p.count(),
                                    latency_s: p.positions[0].latencies.summary().into(),
                                    nodes: p
                                        .positions
                                        .iter()
                                        .zip(own)
                                        .map(|(at, own)| WindowNodeOut {
                                            node: report.trace.node_name(at.node),
                                            caller: report.trace.node_name(at.caller),
                                            own_time_s: seconds(own),
                                        })
                                        .collect(),
                                }
                            })
                            .collect(),
                    })
                    .collect()
            }),
        };
        serde_json::to_writer_pretty(&mut *out, &document)?;
        out.write_all(b"\n")
    }
}

fn adds_most<'a>(report: &NestReport<'a>, pattern: &'a Pattern) -> AddsMostOut<'a> {
    let most = super::own_time::most_added(pattern);
    let at = &pattern.positions[most.position];
    AddsMostOut {
        what: if most.transit { "transit" } else { "own_time" },
        node: report.trace.node_name(at.node),
        caller: report.trace.node_name(at.caller),
        mean_s: seconds(most.mean),
        held_by: most.held.map(|(why, _)| why.token()),
    }
}

/// The tree under one position. Pattern depth is bounded by what a signature can say,
/// and signatures of real systems are shallow, so recursion is fine here.
fn node<'a>(report: &NestReport<'a>, pattern: &'a Pattern, position: u32) -> NodeOut<'a> {
    let pos = &pattern.positions[position as usize];
    let count = pos.latencies.len().max(1) as f64;
    let own = pos.own_time_sum / count;
    let request = pos.request_transit.sum() as f64 / count;
    let latency = pos.latencies.sum() as f64 / count;
    let transit = (!pos.request_transit.is_empty()).then(|| TransitOut {
        request_s: seconds(request),
        reply_s: seconds(pos.reply_transit.sum() as f64 / count),
        held_s: seconds(pos.held_sum / count),
        held_share: (pos.held[0] + pos.held[1]) as f64 / count,
        held_by: pos.held_most().map(|(why, _)| why.token()),
    });
    let (critical_own, critical_transit) = pos.mean_critical();
    NodeOut {
        critical_path: CriticalOut {
            own_time_s: seconds(critical_own),
            transit_s: seconds(critical_transit),
        },
        what_if: WhatIfOut {
            own_time: pos.mean_savings(false).into(),
            transit: pos.mean_savings(true).into(),
        },
        own_time_s: seconds(own),
        waiting_on_calls_s: seconds((latency - own - request.min(latency)).max(0.0)),
        transit,
        node: report.trace.node_name(pos.node),
        caller: report.trace.node_name(pos.caller),
        latency_s: pos.latencies.summary().into(),
        call_delay_s: pos.call_delays.summary().into(),
        confidence: pos.confidence_sum / pos.latencies.len().max(1) as f64,
        unawaited_share: (pos.unawaited > 0)
            .then(|| pos.unawaited as f64 / pos.latencies.len() as f64),
        through_broker: pos.through_broker,
        operations: pos
            .operations_by_count(report.trace)
            .into_iter()
            .map(|(name, count)| OperationOut { name, count })
            .collect(),
        errors: (pos.with_status > 0).then_some(pos.errors),
        children: pos
            .children
            .iter()
            .map(|&c| node(report, pattern, c))
            .collect(),
    }
}
