//! The HTML report (`--html FILE`): one self-contained page — inline CSS, inline SVG and
//! a few lines of script for sorting; no fonts, images or scripts fetched, so it opens
//! offline and can be mailed. Owns the page frame and the input section shared by the
//! nesting page ([`patterns`]) and the convolution page ([`paths`]); the numbers come
//! from the algorithms.

pub mod charts;
mod paths;
mod patterns;

pub use paths::write_convolution;
pub use patterns::write_nesting;

use std::io::{self, Write};

/// What reading the input reported, shown at the foot of the page.
#[derive(Debug, Clone, Default)]
pub struct InputNotes {
    /// The files read, as the user named them.
    pub files: Vec<String>,
    /// The run summary (what was read, skipped and why, what the algorithm found).
    pub summary: String,
    /// Per-capture lines (packets, protocols, skipped packets by reason).
    pub captures: String,
    /// Warnings.
    pub warnings: String,
    /// The clock alignment table, when captures were aligned.
    pub alignment: Option<String>,
}

/// Escapes text for HTML and SVG, in content and in quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Writes a whole page around `body`.
fn write_page(out: &mut dyn Write, title: &str, body: &str) -> io::Result<()> {
    write!(
        out,
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="blackbox {version}">
<title>{title}</title>
<script>{ERRORS}</script>
<style>{STYLE}</style>
</head>
<body>
{body}
<footer>Made by blackbox {version} from packet captures and traces alone: every parent link is inferred, none is instrumented.</footer>
<script>{SCRIPT}</script>
</body>
</html>
"#,
        version = env!("CARGO_PKG_VERSION"),
        title = escape(title),
    )
}

/// The input section: files, summary, captures, warnings, alignment.
fn input_section(notes: &InputNotes) -> String {
    let mut html = String::from(r#"<section id="input"><h2>Input</h2>"#);
    html.push_str("<p>Files: ");
    let files: Vec<String> = notes
        .files
        .iter()
        .map(|f| format!("<code>{}</code>", escape(f)))
        .collect();
    html.push_str(&files.join(", "));
    html.push_str(".</p><p class=\"hint\">Every packet, line or message that was set aside is counted here with its reason.</p>");
    let text = format!("{}{}", notes.summary, notes.captures);
    html.push_str(&format!("<pre>{}</pre>", escape(text.trim_end())));
    if !notes.warnings.is_empty() {
        html.push_str(&format!(
            "<pre class=\"warning\">{}</pre>",
            escape(notes.warnings.trim_end())
        ));
    }
    html.push_str("</section>");
    if let Some(table) = &notes.alignment {
        html.push_str(&format!(
            "<section id=\"alignment\"><h2>Clock alignment</h2><p class=\"hint\">Each host's clock against the reference, from TCP segments seen in both captures; the bound is how far the true offset can be from the estimate.</p><pre>{}</pre></section>",
            escape(table.trim_end())
        ));
    }
    html
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
svg text { font: 11.5px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; fill: var(--ink); }
svg .tick { fill: var(--muted); font-size: 10.5px; }
svg .grid { stroke: #eaeef2; }
.timeline .bar rect { fill: var(--bar); }
.timeline .bar rect.own { fill: var(--own); }
.timeline .bar.hot rect { fill: var(--hot); }
.timeline .bar.hot rect.own { fill: #7a1610; }
.timeline .value { fill: var(--muted); font-size: 10.5px; }
.hists { display: flex; flex-wrap: wrap; gap: 10px 18px; }
.hists figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 6px 8px; }
.hists figure.hot { border-color: var(--hot); }
.hists figcaption { font-size: 12.5px; }
.hists figcaption span { color: var(--muted); }
.histogram rect { fill: var(--bar); }
.histogram line.mean { stroke: var(--ink); stroke-width: 1.5; }
.histogram line.p90 { stroke: var(--hot); stroke-dasharray: 3 2; stroke-width: 1.5; }
.chain .node rect { fill: #fff; stroke: var(--ink); }
.chain .hop line { stroke: var(--muted); stroke-width: 1.5; }
.chain .hop polygon { fill: var(--muted); }
.chain .delay { fill: var(--hot); font-weight: 600; }
.chain .count { fill: var(--muted); font-size: 10.5px; }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_quotes() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
