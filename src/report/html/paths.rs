//! The convolution page: the ranked table of paths, then each path drawn as a chain
//! whose arrows carry the delay spikes found at each sender and the message counts.

use super::charts::{self, Hop};
use super::{input_section, write_page, InputNotes};
use crate::convolution::Convolution;
use crate::trace::time::human_duration;
use crate::trace::Trace;
use maud::{html, PreEscaped};
use std::io::{self, Write};

/// Paths drawn as chains; the table lists every shown one.
pub const DRAWN_PATHS: usize = 40;

/// Writes the convolution page (`top` paths at most).
pub fn write_convolution(
    trace: &Trace,
    result: &Convolution,
    top: Option<usize>,
    notes: &InputNotes,
    out: &mut dyn Write,
) -> io::Result<()> {
    let shown = top.unwrap_or(usize::MAX).min(result.paths.len());
    let found = result.paths.len();
    let body = html! {
        header {
            h1 { "Causal paths by convolution" }
            p.lead {
                "blackbox followed the messages each node sends after it receives, from "
                @if result.roots.is_empty() { "no root" }
                @for (i, &root) in result.roots.iter().enumerate() {
                    @if i > 0 { ", " }
                    b { (trace.node_name(root)) }
                }
                ", at the delays where arrivals and departures correlate. It found " b { (found) } " path" @if found != 1 { "s" } ". "
                "A delay on an arrow is the time the sender took before sending on: where the time goes."
            }
        }
        section id="paths" {
            h2 { "Paths" }
            p.hint { "Click a column to sort." }
            div.table-wrap { table.sortable {
                thead { tr {
                    th data-key="rank" data-first="ascending" { "#" }
                    th data-key="count" { "messages" }
                    th data-key="delay" { "sum of median delays" }
                    th.text data-key="path" data-first="ascending" { "path" }
                } }
                tbody {
                    @for (rank, path) in result.paths.iter().take(shown).enumerate() {
                        @let delay: i64 = path.edges.iter().filter_map(|e| e.median).sum();
                        tr {
                            td data-v=(rank + 1) { (rank + 1) }
                            td data-v=(path.count()) { (path.count()) }
                            td data-v=(delay) { (human_duration(delay as f64)) }
                            td.text.signature {
                                @if rank < DRAWN_PATHS {
                                    a href={ "#path-" (rank + 1) } { (path.signature(trace)) }
                                } @else { (path.signature(trace)) }
                            }
                        }
                    }
                }
            } }
            @if shown < found {
                p.hint { (found - shown) " more paths hidden by --top." }
            }
        }
        @for (rank, path) in result.paths.iter().take(shown.min(DRAWN_PATHS)).enumerate() {
            @let hops: Vec<Hop> = path.edges.iter().map(|e| Hop {
                to: trace.node_name(e.to).to_owned(),
                delays: e.median.map(|m| format!("median {}", human_duration(m as f64))).into_iter()
                    .chain(e.delays.iter().map(|d| format!("{} × {}", human_duration(d.delay as f64), d.count)))
                    .collect(),
                count: e.count,
            }).collect();
            section.pattern id={ "path-" (rank + 1) } {
                h2 { "#" (rank + 1) " " code { (path.signature(trace)) } }
                p { (path.count()) " messages followed the whole path. On each arrow: the median delay at the sender before it sent on, the delays its correlation spiked at (delay × messages caused at it), then the messages on the hop." }
                (PreEscaped(charts::chain(trace.node_name(path.edges[0].from), &hops)))
            }
        }
        (input_section(notes))
    };
    write_page(out, &format!("blackbox: {found} causal paths"), body)
}
