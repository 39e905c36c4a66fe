//! The convolution page: the ranked table of paths, then each path drawn as a chain
//! whose arrows carry the delay spikes found at each sender and the message counts.

use super::charts::{self, Hop};
use super::{escape, input_section, write_page, InputNotes};
use crate::convolution::Convolution;
use crate::trace::time::human_duration;
use crate::trace::Trace;
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
    let roots: Vec<String> = result
        .roots
        .iter()
        .map(|&r| format!("<b>{}</b>", escape(trace.node_name(r))))
        .collect();
    let mut body = format!(
        "<header><h1>Causal paths by convolution</h1><p class=\"lead\">blackbox followed the messages each node sends after it receives, from {}, at the delays where arrivals and departures correlate. \
         It found <b>{}</b> path{}. A delay on an arrow is the time the sender took before sending on: where the time goes.</p></header>",
        if roots.is_empty() { "no root".to_owned() } else { roots.join(", ") },
        result.paths.len(),
        if result.paths.len() == 1 { "" } else { "s" },
    );
    body.push_str(
        r#"<section id="paths"><h2>Paths</h2><p class="hint">Click a column to sort.</p><div class="table-wrap"><table class="sortable"><thead><tr><th data-key="rank" data-first="ascending">#</th><th data-key="count">messages</th><th data-key="delay">sum of main delays</th><th class="text" data-key="path" data-first="ascending">path</th></tr></thead><tbody>"#,
    );
    for (rank, path) in result.paths.iter().take(shown).enumerate() {
        let delay: i64 = path
            .edges
            .iter()
            .filter_map(|e| e.delays.first())
            .map(|d| d.delay)
            .sum();
        let signature = escape(&path.signature(trace));
        let link = if rank < DRAWN_PATHS {
            format!("<a href=\"#path-{}\">{signature}</a>", rank + 1)
        } else {
            signature
        };
        body.push_str(&format!(
            "<tr><td data-v=\"{r}\">{r}</td><td data-v=\"{c}\">{c}</td><td data-v=\"{delay}\">{}</td><td class=\"text signature\">{link}</td></tr>",
            human_duration(delay as f64),
            r = rank + 1,
            c = path.count(),
        ));
    }
    body.push_str("</tbody></table></div>");
    if shown < result.paths.len() {
        body.push_str(&format!(
            "<p class=\"hint\">{} more paths hidden by --top.</p>",
            result.paths.len() - shown
        ));
    }
    body.push_str("</section>");
    for (rank, path) in result.paths.iter().take(shown.min(DRAWN_PATHS)).enumerate() {
        let hops: Vec<Hop> = path
            .edges
            .iter()
            .map(|e| Hop {
                to: trace.node_name(e.to).to_owned(),
                delays: e
                    .delays
                    .iter()
                    .map(|d| format!("{} × {}", human_duration(d.delay as f64), d.count))
                    .collect(),
                count: e.count,
            })
            .collect();
        body.push_str(&format!(
            "<section class=\"pattern\" id=\"path-{r}\"><h2>#{r} <code>{}</code></h2><p>{} messages followed the whole path. On each arrow: the delays at the sender before it sent on (delay × messages caused at it), then the messages on the hop.</p>{}</section>",
            escape(&path.signature(trace)),
            path.count(),
            charts::chain(trace.node_name(path.edges[0].from), &hops),
            r = rank + 1,
        ));
    }
    body.push_str(&input_section(notes));
    write_page(
        out,
        &format!("blackbox: {} causal paths", result.paths.len()),
        &body,
    )
}
