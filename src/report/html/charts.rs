//! Inline SVG for the HTML report: a request timeline, latency histograms and a
//! convolution path drawn as a chain. Plain strings, sized in CSS pixels, so the page
//! needs nothing but a browser.

use super::escape;
use crate::trace::time::human_duration;
use crate::trace::Nanos;
use std::fmt::Write;

/// One call in a timeline, in nanoseconds from the request's start.
pub struct Bar {
    /// Shown at the left, indented by `depth`.
    pub label: String,
    /// Nesting depth, 0 for the request itself.
    pub depth: usize,
    /// Start, from the request's start.
    pub start: f64,
    /// Length.
    pub length: f64,
    /// Time not covered by the call's own calls, shown as a darker part.
    pub own: f64,
    /// The node that adds the most latency.
    pub hot: bool,
}

const WIDTH: f64 = 920.0;
const LABEL: f64 = 230.0;
const ROW: f64 = 22.0;

/// A Gantt chart of one request: each call a bar at its start, as long as it lasted;
/// calls that overlap in time are visible as overlapping bars on their own rows.
pub fn timeline(bars: &[Bar]) -> String {
    let end = bars
        .iter()
        .map(|b| b.start + b.length)
        .fold(0.0f64, f64::max)
        .max(1.0);
    // Room on the right for the value after the longest bar.
    let plot = WIDTH - LABEL - 70.0;
    let x = |t: f64| LABEL + t / end * plot;
    let height = ROW * bars.len() as f64 + 34.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="timeline" role="img" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">"#
    );
    let axis_y = ROW * bars.len() as f64 + 6.0;
    for tick in ticks(end) {
        let tx = x(tick);
        let _ = write!(
            svg,
            r#"<line class="grid" x1="{tx:.1}" y1="0" x2="{tx:.1}" y2="{axis_y:.1}"/><text class="tick" x="{tx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            axis_y + 16.0,
            escape(&human_duration(tick))
        );
    }
    for (row, bar) in bars.iter().enumerate() {
        let y = row as f64 * ROW + 3.0;
        let class = if bar.hot { "bar hot" } else { "bar" };
        let (bx, bw) = (x(bar.start), (bar.length / end * plot).max(1.0));
        let own_w = (bar.own / end * plot).clamp(0.0, bw);
        let _ = write!(
            svg,
            r#"<g class="{class}"><title>{label}: starts at {start}, lasts {length}, {own} of it its own</title><text class="label" x="{lx:.1}" y="{ty:.1}">{label}</text><rect x="{bx:.1}" y="{y:.1}" width="{bw:.1}" height="{h:.1}" rx="2"/><rect class="own" x="{bx:.1}" y="{oy:.1}" width="{own_w:.1}" height="4" rx="1"/><text class="value" x="{vx:.1}" y="{ty:.1}">{length}</text></g>"#,
            label = escape(&bar.label),
            start = escape(&human_duration(bar.start)),
            length = escape(&human_duration(bar.length)),
            own = escape(&human_duration(bar.own)),
            lx = 4.0 + 12.0 * bar.depth.min(12) as f64,
            ty = y + 13.0,
            h = ROW - 6.0,
            oy = y + ROW - 10.0,
            vx = bx + bw + 4.0,
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A histogram of latencies in bins of equal ratio (latencies spread over orders of
/// magnitude), with the mean and the 90th percentile marked.
pub fn histogram(samples: &[Nanos], mean: f64, p90: Nanos) -> String {
    const W: f64 = 280.0;
    const H: f64 = 110.0;
    const BINS: usize = 24;
    let lo = samples.iter().copied().min().unwrap_or(0).max(1) as f64;
    let hi = samples.iter().copied().max().unwrap_or(1).max(1) as f64;
    let span = (hi / lo).ln();
    let bin = |v: Nanos| -> usize {
        if span <= 0.0 {
            return 0;
        }
        let f = ((v.max(1) as f64) / lo).ln() / span;
        ((f * BINS as f64) as usize).min(BINS - 1)
    };
    let mut counts = [0u64; BINS];
    for &s in samples {
        counts[bin(s)] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1) as f64;
    let plot_h = H - 30.0;
    let bar_w = (W - 10.0) / BINS as f64;
    let position = |v: f64| -> f64 {
        if span <= 0.0 {
            5.0
        } else {
            5.0 + ((v.max(lo) / lo).ln() / span).min(1.0) * (W - 10.0)
        }
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="histogram" role="img" viewBox="0 0 {W} {H}" width="{W}" height="{H}">"#
    );
    for (i, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let h = (c as f64 / top * plot_h).max(1.0);
        let from = lo * (span * i as f64 / BINS as f64).exp();
        let to = lo * (span * (i + 1) as f64 / BINS as f64).exp();
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}"><title>{c} between {} and {}</title></rect>"#,
            5.0 + i as f64 * bar_w,
            plot_h - h + 4.0,
            (bar_w - 1.0).max(1.0),
            escape(&human_duration(from)),
            escape(&human_duration(to)),
        );
    }
    for (class, value, name) in [("mean", mean, "mean"), ("p90", p90 as f64, "p90")] {
        let mx = position(value);
        let _ = write!(
            svg,
            r#"<line class="{class}" x1="{mx:.1}" y1="2" x2="{mx:.1}" y2="{:.1}"><title>{name} {}</title></line>"#,
            plot_h + 4.0,
            escape(&human_duration(value))
        );
    }
    let _ = write!(
        svg,
        r#"<text class="tick" x="5" y="{y:.1}">{}</text><text class="tick" x="{:.1}" y="{y:.1}" text-anchor="end">{}</text></svg>"#,
        escape(&human_duration(lo)),
        W - 5.0,
        escape(&human_duration(hi)),
        y = H - 8.0
    );
    svg
}

/// One hop of a convolution path: the node it reaches and its spikes' labels.
pub struct Hop {
    /// The node the message reaches.
    pub to: String,
    /// One line per delay spike at the sender before it sends on (`30.0 ms × 412`).
    pub delays: Vec<String>,
    /// Messages on this edge.
    pub count: u64,
}

/// A convolution path as a chain of boxes, each arrow labelled with its delay spikes
/// and its message count; long paths wrap onto further rows.
pub fn chain(first: &str, hops: &[Hop]) -> String {
    const PER_ROW: usize = 4;
    const BOX_W: f64 = 120.0;
    const GAP: f64 = 110.0;
    const ROW_H: f64 = 110.0;
    let nodes: Vec<&str> = std::iter::once(first)
        .chain(hops.iter().map(|h| h.to.as_str()))
        .collect();
    let rows = nodes.len().div_ceil(PER_ROW);
    let width = PER_ROW as f64 * BOX_W + (PER_ROW - 1) as f64 * GAP + 20.0;
    let height = (rows - 1) as f64 * ROW_H + 70.0;
    let place = |i: usize| -> (f64, f64) {
        (
            10.0 + (i % PER_ROW) as f64 * (BOX_W + GAP),
            20.0 + (i / PER_ROW) as f64 * ROW_H,
        )
    };
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg class="chain" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}">"#
    );
    for (i, hop) in hops.iter().enumerate() {
        let ((x1, y1), (x2, y2)) = (place(i), place(i + 1));
        let (ax, ay, bx, by) = if y1 == y2 {
            (x1 + BOX_W, y1 + 18.0, x2, y2 + 18.0)
        } else {
            // Wraps to the next row: from the bottom of this box to the top of the next.
            (x1 + BOX_W / 2.0, y1 + 36.0, x2 + BOX_W / 2.0, y2)
        };
        // Arrowhead: back 8 px along the line, 4 px to either side.
        let length = ((bx - ax).powi(2) + (by - ay).powi(2)).sqrt().max(1.0);
        let (dx, dy) = ((bx - ax) / length, (by - ay) / length);
        let _ = write!(
            svg,
            r#"<g class="hop"><line x1="{ax:.1}" y1="{ay:.1}" x2="{bx:.1}" y2="{by:.1}"/><polygon points="{bx:.1},{by:.1} {:.1},{:.1} {:.1},{:.1}"/>"#,
            bx - 8.0 * dx - 4.0 * dy,
            by - 8.0 * dy + 4.0 * dx,
            bx - 8.0 * dx + 4.0 * dy,
            by - 8.0 * dy - 4.0 * dx,
        );
        let (lx, ly) = ((ax + bx) / 2.0, (ay + by) / 2.0 - 6.0);
        let mut lines = hop.delays.clone();
        lines.push(format!("{} messages", hop.count));
        for (k, line) in lines.iter().enumerate() {
            let _ = write!(
                svg,
                r#"<text class="{}" x="{lx:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                if k + 1 == lines.len() {
                    "count"
                } else {
                    "delay"
                },
                ly - 13.0 * (lines.len() - 1 - k) as f64,
                escape(line)
            );
        }
        svg.push_str("</g>");
    }
    for (i, node) in nodes.iter().enumerate() {
        let (x, y) = place(i);
        let _ = write!(
            svg,
            r#"<g class="node"><rect x="{x:.1}" y="{y:.1}" width="{BOX_W}" height="36" rx="6"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text></g>"#,
            x + BOX_W / 2.0,
            y + 23.0,
            escape(node)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Round tick values from 0 to `end`: 4 to 8 of them, steps of 1, 2 or 5 × 10^k.
pub fn ticks(end: f64) -> Vec<f64> {
    if !(end > 0.0 && end.is_finite()) {
        return vec![0.0];
    }
    let raw = end / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| end / s <= 8.0)
        .unwrap_or(10.0 * magnitude);
    (0..)
        .map(|k| k as f64 * step)
        .take_while(|&t| t <= end * 1.0001)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = ticks(192_400_000.0);
        assert_eq!(t[1], 50_000_000.0);
        assert!(t.len() >= 4 && t.len() <= 9, "{t:?}");
        assert_eq!(ticks(0.0), vec![0.0]);
    }

    #[test]
    fn a_histogram_of_equal_samples_draws_one_bar() {
        let svg = histogram(&[5, 5, 5], 5.0, 5);
        assert_eq!(svg.matches("<rect").count(), 1);
    }

    #[test]
    fn labels_are_escaped() {
        let svg = chain("<a>", &[]);
        assert!(svg.contains("&lt;a&gt;") && !svg.contains("<a>"));
    }
}
