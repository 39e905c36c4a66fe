//! The HTML report (`--html FILE`): one self-contained page — inline CSS, inline SVG and
//! a few lines of script for sorting; no fonts, images or scripts fetched, so it opens
//! offline and can be mailed. The page is written with maud's templates, which escape
//! every value; the charts are plotters' ([`charts`]). Owns the page frame and the input
//! section shared by the nesting page ([`patterns`]) and the convolution page
//! ([`paths`]); the numbers come from the algorithms.

pub mod charts;
mod paths;
mod patterns;

pub use paths::write_convolution;
pub use patterns::write_nesting;

use crate::align::fit::Quality;
use crate::align::Alignment;
use crate::input::CaptureRead;
use crate::trace::time::human_duration;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use std::io::{self, Write};

/// What reading the input reported, shown at the foot of the page.
#[derive(Debug, Clone, Default)]
pub struct InputNotes {
    /// The files read, as the user named them.
    pub files: Vec<String>,
    /// The run summary's lines (what was read, skipped and why, what the algorithm
    /// found).
    pub summary: Vec<String>,
    /// What each capture held.
    pub captures: Vec<CaptureRead>,
    /// Other lines of what reading reported (the causality repair).
    pub notes: Vec<String>,
    /// Warnings.
    pub warnings: Vec<String>,
    /// The clock alignment, when captures were aligned.
    pub alignment: Option<Alignment>,
}

/// Writes a whole page around `body`.
fn write_page(out: &mut dyn Write, title: &str, body: Markup) -> io::Result<()> {
    let version = env!("CARGO_PKG_VERSION");
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="generator" content={ "blackbox " (version) };
                title { (title) }
                script { (PreEscaped(ERRORS)) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                (body)
                footer { "Made by blackbox " (version) " from packet captures and traces alone: every parent link is inferred, none is instrumented." }
                script { (PreEscaped(SCRIPT)) }
            }
        }
    };
    out.write_all(page.into_string().as_bytes())?;
    writeln!(out)
}

/// The input section: files, summary, captures, warnings; then the clock alignment.
fn input_section(notes: &InputNotes) -> Markup {
    html! {
        section id="input" {
            h2 { "Input" }
            p {
                "Files: "
                @for (i, file) in notes.files.iter().enumerate() {
                    @if i > 0 { ", " }
                    code { (file) }
                }
                "."
            }
            p.hint { "Every packet, line or message that was set aside is counted here with its reason." }
            ul.summary {
                @for line in &notes.summary { li { (line) } }
                @for line in &notes.notes { li { (line) } }
            }
            @if !notes.captures.is_empty() { (captures_table(&notes.captures)) }
            @for warning in &notes.warnings { p.warning { (warning) } }
        }
        @if let Some(alignment) = &notes.alignment { (alignment_section(alignment)) }
    }
}

/// One row per capture: what it held and what was set aside.
fn captures_table(captures: &[CaptureRead]) -> Markup {
    html! {
        div.table-wrap {
            table.captures {
                thead { tr {
                    th.text { "capture" } th.text { "host" } th.text { "own address" }
                    th { "packets" } th { "TCP" } th { "UDP" } th { "messages" }
                    th.text { "by protocol" } th { "connections" } th.text { "set aside" }
                } }
                tbody {
                    @for capture in captures {
                        @let stats = &capture.stats;
                        tr {
                            td.text { code { (crate::input::source::name(&capture.path)) } }
                            td.text { (capture.host) }
                            td.text {
                                @for (i, address) in capture.local.iter().enumerate() {
                                    @if i > 0 { ", " }
                                    (address)
                                }
                                @if capture.local.is_empty() { "unknown" }
                                @if let Some(why) = capture.local_uncertain {
                                    br; span.guess { "a guess: " (why) }
                                }
                            }
                            td { (stats.packets) } td { (stats.tcp) } td { (stats.udp) }
                            td { (stats.total_messages()) }
                            td.text {
                                @for (i, (protocol, n)) in stats.messages.iter().enumerate() {
                                    @if i > 0 { ", " }
                                    (protocol) " " (n)
                                }
                            }
                            td { (stats.tcp_flows) }
                            td.text {
                                @for (reason, n) in &stats.skipped { (n) " " (reason) br; }
                                @for (what, n) in &stats.housekeeping { (n) " " (what) " (housekeeping)" br; }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The clock alignment as a table: per host its offset and drift against the
/// reference, the bound, quality, samples and route.
fn alignment_section(alignment: &Alignment) -> Markup {
    let pairing = &alignment.pairing;
    html! {
        section id="alignment" {
            h2 { "Clock alignment" }
            p.hint {
                "Each host's clock against the reference"
                @if let Some(reference) = &alignment.reference { " (" b { (reference) } ")" }
                ", from TCP segments seen in both captures; the bound is how far the true offset can be from the estimate. Offset = host clock − reference clock."
            }
            div.table-wrap { table {
                thead { tr {
                    th.text { "host" } th { "offset" } th { "drift" } th { "bound" }
                    th.text { "quality" } th { "samples" } th.text { "via" }
                } }
                tbody {
                    @for host in &alignment.hosts {
                        tr {
                            td.text { (host.host) }
                            @if host.reference {
                                td { "reference" } td {} td {} td.text {} td {} td.text {}
                            } @else if host.quality == Quality::Absent {
                                td { "–" } td { "–" } td { "–" } td.text { "unaligned" } td {} td.text {}
                            } @else {
                                td { (signed_duration(host.offset_ns)) }
                                td { (format!("{:+.3} ppm", host.drift_ppm)) }
                                td { @match host.bound_ns {
                                    Some(bound) => { "±" (human_duration(bound)) }
                                    None => { "one-sided" }
                                } }
                                td.text { (host.quality) }
                                td { (host.samples) }
                                td.text { (host.via.join(" → ")) }
                            }
                        }
                    }
                }
            } }
            p.hint { (format!(
                "{} segment ends between captured hosts, {} matched at both ends; left out: {} repeated (retransmissions), {} seen at one end only.",
                pairing.segments, pairing.matched, pairing.repeated, pairing.one_ended
            )) }
        }
    }
}

/// A duration with its sign (`+10.00 s`, `−1.432 µs`).
fn signed_duration(nanos: f64) -> String {
    crate::trace::time::signed_human_duration(nanos).replacen('-', "−", 1)
}

/// Records script errors before anything else runs, so a test (or a curious user) can
/// read them from the page.
const ERRORS: &str = r#"window.addEventListener('error', function (e) {
  var all = document.documentElement.getAttribute('data-errors');
  document.documentElement.setAttribute('data-errors', (all ? all + ' | ' : '') + e.message);
});"#;

/// Sortable tables: click a header; `#sort=KEY` in the address sorts on load.
const SCRIPT: &str = r#"(function () {
  function key(row, col) {
    var cell = row.cells[col];
    var v = cell.getAttribute('data-v');
    return v === null ? cell.textContent.toLowerCase() : parseFloat(v);
  }
  function sortBy(table, col, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a, col), y = key(b, col);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.setAttribute('aria-sort', i === col ? (descending ? 'descending' : 'ascending') : 'none');
    });
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      if (!th.hasAttribute('data-key')) { return; }
      th.tabIndex = 0;
      function toggle() {
        var state = th.getAttribute('aria-sort');
        var descending = state === 'none' || state === null ? th.getAttribute('data-first') !== 'ascending' : state !== 'descending';
        sortBy(table, i, descending);
      }
      th.addEventListener('click', toggle);
      th.addEventListener('keydown', function (e) { if (e.key === 'Enter') { toggle(); } });
    });
  });
  var wanted = /sort=([a-z0-9]+)/.exec(location.hash);
  if (wanted) {
    var th = document.querySelector('table.sortable th[data-key="' + wanted[1] + '"]');
    if (th) { th.click(); }
  }
  document.documentElement.setAttribute('data-ready', 'yes');
})();"#;

const STYLE: &str = r#"
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --bar: #4c8bf5; --own: #1a3d7c; --hot: #d93025; --hot-bg: #fdecea; --bg: #ffffff; --panel: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); background: var(--bg); margin: 0 auto; max-width: 1100px; padding: 24px 28px 48px; }
h1 { font-size: 26px; margin: 0 0 6px; }
h2 { font-size: 20px; margin: 36px 0 8px; padding-top: 8px; border-top: 1px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 6px; color: var(--muted); text-transform: uppercase; letter-spacing: .04em; }
p { margin: 6px 0; }
.lead { font-size: 16px; max-width: 860px; }
.hint { color: var(--muted); font-size: 13px; }
code, pre { font: 12.5px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; overflow-x: auto; }
pre.warning { background: #fff8c5; border-color: #d4a72c; }
a { color: #0969da; text-decoration: none; }
a:hover { text-decoration: underline; }
table { border-collapse: collapse; width: 100%; font-size: 14px; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; }
th { background: var(--panel); position: sticky; top: 0; font-weight: 600; white-space: nowrap; }
.table-wrap { max-height: 460px; overflow-y: auto; border: 1px solid var(--line); border-radius: 6px; }
th[data-key] { cursor: pointer; user-select: none; }
th[data-key]::after { content: " \2195"; color: var(--muted); font-size: 11px; }
th[aria-sort="descending"]::after { content: " \25BC"; color: var(--ink); }
th[aria-sort="ascending"]::after { content: " \25B2"; color: var(--ink); }
th.text { text-align: left; }
td.text { text-align: left; white-space: normal; }
td.signature { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; word-break: break-all; }
tbody tr:hover { background: #f0f6ff; }
.hot-name { color: var(--hot); font-weight: 600; }
.pattern { margin-top: 28px; }
.facts { display: flex; flex-wrap: wrap; gap: 8px 22px; margin: 8px 0; }
.facts div { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 6px 12px; }
.facts b { display: block; font-size: 18px; }
.facts span { color: var(--muted); font-size: 12px; }
.callout { border-left: 4px solid var(--hot); background: var(--hot-bg); padding: 8px 12px; border-radius: 0 6px 6px 0; margin: 10px 0; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 22px; }
ul.tree { padding-left: 0; }
ul.tree li { position: relative; margin: 3px 0; }
ul.tree ul li::before { content: ""; position: absolute; left: -14px; top: 0; bottom: 50%; width: 10px; border-left: 1px solid var(--line); border-bottom: 1px solid var(--line); }
.call { display: inline-block; border: 1px solid var(--line); border-radius: 6px; padding: 3px 10px; background: #fff; }
.call.hot { border-color: var(--hot); background: var(--hot-bg); }
.call .name { font-weight: 600; }
.call .m { color: var(--muted); font-size: 13px; margin-left: 8px; }
.ops { color: var(--muted); font-size: 12.5px; margin-left: 8px; }
.ops.err { color: var(--hot); font-weight: 600; }
.call .badge { color: #fff; background: var(--hot); border-radius: 10px; padding: 0 7px; font-size: 11px; margin-left: 8px; }
svg { display: block; max-width: 100%; height: auto; }
.hists { display: flex; flex-wrap: wrap; gap: 10px 18px; }
.hists figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; }
.hists figure.hot { border-color: var(--hot); }
.hists figcaption { font-size: 12.5px; }
.hists figcaption span { color: var(--muted); }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
ul.summary { font-size: 13.5px; padding-left: 20px; }
p.warning { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 6px 10px; }
table.captures td.text { font-size: 12.5px; }
.guess { color: var(--hot); font-size: 12px; }
.chart { margin: 6px 0; }
.slowest { display: grid; gap: 4px; }
.slowest h4 { margin: 10px 0 0; font-size: 13.5px; font-weight: 600; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signed_durations_keep_their_sign() {
        assert_eq!(signed_duration(-1432.0), "−1.432 µs");
        assert!(signed_duration(10e9).starts_with('+'));
    }
}
