//! The HTML report's charts, drawn as SVG with plotters: a request's timeline, latency
//! histograms, latency and rate over time, and a convolution path as a chain. Each axis
//! is in one unit chosen for its range (ticks read `0 50 100` under "ms", never
//! "0 ns" or "5.000 ms"). Owns the drawing; what is drawn comes from the pages.

use crate::trace::Nanos;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::fmt::Write;

/// Width of every chart, in CSS pixels.
pub const WIDTH: u32 = 920;
const LABEL_WIDTH: u32 = 230;
const ROW: u32 = 22;
const BAR: RGBColor = RGBColor(76, 139, 245);
const OWN: RGBColor = RGBColor(26, 61, 124);
const HOT: RGBColor = RGBColor(217, 48, 37);
const HOT_OWN: RGBColor = RGBColor(122, 22, 16);
/// An answer in transit after the call's latency (first byte to last).
const TRANSIT: RGBColor = RGBColor(242, 153, 0);
const MUTED: RGBColor = RGBColor(89, 99, 110);
const GRID: RGBColor = RGBColor(234, 238, 242);
/// The shaded window of [`over_time`].
const MARK: RGBColor = RGBColor(253, 226, 180);
const INK: RGBColor = RGBColor(31, 35, 40);

/// A unit for an axis of durations, chosen so that its values run from 1 to 1000.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit {
    nanos: f64,
    /// The unit's name, under the axis.
    pub name: &'static str,
}

impl Unit {
    /// The unit for an axis whose largest value is `largest` nanoseconds.
    pub fn for_largest(largest: f64) -> Unit {
        const UNITS: [(f64, &str); 5] = [
            (1.0, "ns"),
            (1e3, "µs"),
            (1e6, "ms"),
            (1e9, "s"),
            (60e9, "min"),
        ];
        let (nanos, name) = UNITS
            .iter()
            .rev()
            .find(|(nanos, _)| largest >= *nanos)
            .copied()
            .unwrap_or(UNITS[0]);
        Unit { nanos, name }
    }

    /// `nanos` in this unit.
    pub fn of(&self, nanos: f64) -> f64 {
        nanos / self.nanos
    }
}

/// A tick's number: as few digits as tell it apart (`0`, `2.5`, `150`).
pub fn tick(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return "0".to_owned();
    }
    let digits = (2 - value.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let text = format!("{value:.digits$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// Text of `size` CSS pixels. (plotters' SVG backend writes 0.806 of the size it is
/// given, its points to pixels.)
fn font(size: u32) -> TextStyle<'static> {
    ("sans-serif", f64::from(size) / 0.806)
        .into_font()
        .color(&INK)
}

/// Secondary text of `size` CSS pixels.
fn muted(size: u32) -> TextStyle<'static> {
    font(size).color(&MUTED)
}

/// Draws with `draw` on a `width` × `height` SVG, wrapped in a `<div class="chart
/// CLASS">`. A failure to draw (which plotters reports for values it cannot place)
/// leaves the chart out with a note rather than failing the page.
fn svg(
    class: &str,
    width: u32,
    height: u32,
    draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Result<(), String>,
) -> String {
    let mut svg = String::new();
    let drawn = {
        let area = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        let drawn = area
            .fill(&WHITE)
            .map_err(|e| e.to_string())
            .and_then(|()| draw(&area));
        drawn.and_then(|()| area.present().map_err(|e| e.to_string()))
    };
    let mut html = format!("<div class=\"chart {class}\">");
    match drawn {
        Ok(()) => html.push_str(&svg),
        Err(e) => {
            let _ = write!(html, "<p class=\"hint\">(chart not drawn: {e})</p>");
        }
    }
    html.push_str("</div>");
    html
}

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
    /// Time not covered by the call's own calls, shown as a darker strip.
    pub own: f64,
    /// The node that adds the most latency.
    pub hot: bool,
    /// The answer's time in transit after `length` (its first byte to its last), drawn
    /// as a thinner strip after the bar.
    pub answer_transit: f64,
    /// Whether that transit adds the most latency.
    pub transit_hot: bool,
}

/// A Gantt chart of one request: each call a bar on its own row at its start, as long
/// as it lasted, with its own time as a dark strip and its answer's time in transit as
/// a thin strip after it; calls made in parallel overlap.
pub fn timeline(bars: &[Bar]) -> String {
    let end = bars
        .iter()
        .map(|b| b.start + b.length + b.answer_transit)
        .fold(0.0f64, f64::max)
        .max(1.0);
    let unit = Unit::for_largest(end);
    let height = ROW * bars.len() as u32 + 60;
    svg("timeline", WIDTH, height, |area| {
        let (labels, plot) = area.split_horizontally(LABEL_WIDTH);
        let mut chart = ChartBuilder::on(&plot)
            .margin_top(6)
            .margin_right(110)
            .x_label_area_size(40)
            .build_cartesian_2d(0.0..unit.of(end) * 1.02, 0.0..bars.len() as f64)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .light_line_style(GRID)
            .bold_line_style(GRID)
            .x_labels(8)
            .x_label_formatter(&|v| tick(*v))
            .x_desc(unit.name)
            .axis_desc_style(muted(12))
            .label_style(muted(11))
            .draw()
            .map_err(|e| e.to_string())?;
        let row_top = |row: usize| bars.len() as f64 - row as f64;
        for (row, bar) in bars.iter().enumerate() {
            let (fill, strip) = if bar.hot { (HOT, HOT_OWN) } else { (BAR, OWN) };
            let (x0, x1) = (unit.of(bar.start), unit.of(bar.start + bar.length));
            let y = row_top(row);
            let own_end = (x0 + unit.of(bar.own)).min(x1);
            let transit_end = unit.of(bar.start + bar.length + bar.answer_transit);
            let transit = if bar.transit_hot { HOT } else { TRANSIT };
            chart
                .draw_series([
                    Rectangle::new([(x0, y - 0.15), (x1, y - 0.85)], fill.filled()),
                    Rectangle::new([(x0, y - 0.62), (own_end, y - 0.85)], strip.filled()),
                    Rectangle::new([(x1, y - 0.38), (transit_end, y - 0.62)], transit.filled()),
                ])
                .map_err(|e| e.to_string())?;
            let mut said = crate::trace::time::human_duration(bar.length);
            if bar.answer_transit >= 1_000.0 {
                said.push_str(&format!(
                    " +{}",
                    crate::trace::time::human_duration(bar.answer_transit)
                ));
            }
            chart
                .draw_series([Text::new(
                    said,
                    (transit_end, y - 0.3),
                    muted(11).pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Left,
                        plotters::style::text_anchor::VPos::Center,
                    )),
                )])
                .map_err(|e| e.to_string())?;
            let (_, pixel_y) = chart.backend_coord(&(0.0, y - 0.5));
            let indent = 4 + 12 * bar.depth.min(12) as i32;
            labels
                .draw(&Text::new(
                    bar.label.clone(),
                    (indent, pixel_y - 7),
                    if bar.hot {
                        font(12).color(&HOT)
                    } else {
                        font(12)
                    },
                ))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// A histogram of latencies in bins of equal ratio (latencies spread over orders of
/// magnitude) on a log axis, with the median and the 99th percentile marked.
pub fn histogram(samples: &[Nanos], p50: Nanos, p99: Nanos) -> String {
    const BINS: usize = 24;
    let lo = samples.iter().copied().min().unwrap_or(1).max(1) as f64;
    let hi = samples.iter().copied().max().unwrap_or(1).max(1) as f64;
    let unit = Unit::for_largest(hi);
    let (from, to) = if hi > lo {
        (lo, hi)
    } else {
        (lo / 1.5, hi * 1.5)
    };
    let span = (to / from).ln();
    let mut counts = [0u64; BINS];
    for &s in samples {
        let f = ((s.max(1) as f64) / from).ln() / span;
        counts[((f * BINS as f64) as usize).min(BINS - 1)] += 1;
    }
    let edge = |i: usize| unit.of(from * (span * i as f64 / BINS as f64).exp());
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    svg("histogram", 290, 150, |area| {
        let mut chart = ChartBuilder::on(area)
            .margin(6)
            .x_label_area_size(34)
            .y_label_area_size(34)
            .build_cartesian_2d((edge(0)..edge(BINS)).log_scale(), 0u64..top + top / 8 + 1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(4)
            .y_labels(3)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| v.to_string())
            .x_desc(unit.name)
            .axis_desc_style(muted(11))
            .label_style(muted(10))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(
                counts
                    .iter()
                    .enumerate()
                    .filter(|(_, &c)| c > 0)
                    .map(|(i, &c)| Rectangle::new([(edge(i), 0), (edge(i + 1), c)], BAR.filled())),
            )
            .map_err(|e| e.to_string())?;
        for (value, color) in [(p50, INK), (p99, HOT)] {
            let x = unit.of(value.max(1) as f64).clamp(edge(0), edge(BINS));
            chart
                .draw_series([PathElement::new(
                    vec![(x, 0), (x, top)],
                    color.stroke_width(2),
                )])
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    })
}

/// Requests' latency over time: per time bucket the median and the 99th percentile
/// (above), and the requests per second (below). `requests` are (start, latency),
/// in any order.
/// `mark`, a span of absolute times, is shaded (the window where the latency changed
/// most, with `--window`).
pub fn over_time(requests: &[(Nanos, Nanos)], mark: Option<(Nanos, Nanos)>) -> String {
    let mut sorted = requests.to_vec();
    sorted.sort_unstable();
    let (first, last) = match (sorted.first(), sorted.last()) {
        (Some(f), Some(l)) => (f.0, l.0),
        _ => return String::new(),
    };
    let buckets = (sorted.len() / 8).clamp(1, 40);
    let width = ((last - first) as f64 / buckets as f64).max(1.0);
    let mut latencies: Vec<Vec<Nanos>> = vec![Vec::new(); buckets];
    for &(start, latency) in &sorted {
        let b = (((start - first) as f64 / width) as usize).min(buckets - 1);
        latencies[b].push(latency);
    }
    let quantile = |v: &mut Vec<Nanos>, q: f64| -> Option<Nanos> {
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        Some(v[((v.len() - 1) as f64 * q).round() as usize])
    };
    let time_unit = Unit::for_largest(width * buckets as f64);
    let mid = |b: usize| time_unit.of(width * (b as f64 + 0.5));
    let mut p50 = Vec::new();
    let mut p99 = Vec::new();
    let mut rate = Vec::new();
    for (b, bucket) in latencies.iter_mut().enumerate() {
        rate.push((b, bucket.len() as f64 / (width / 1e9)));
        if let (Some(m), Some(t)) = (quantile(bucket, 0.5), quantile(bucket, 0.99)) {
            p50.push((mid(b), m as f64));
            p99.push((mid(b), t as f64));
        }
    }
    let highest = p99.iter().map(|p| p.1).fold(1.0, f64::max);
    let unit = Unit::for_largest(highest);
    let most = rate.iter().map(|r| r.1).fold(1.0, f64::max);
    let x_end = time_unit.of(width * buckets as f64);
    svg("over-time", WIDTH, 260, |area| {
        let (upper, lower) = area.split_vertically(160);
        let mut chart = ChartBuilder::on(&upper)
            .margin(6)
            .margin_left(10)
            .x_label_area_size(10)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_end, 0.0..unit.of(highest) * 1.1)
            .map_err(|e| e.to_string())?;
        if let Some((from, to)) = mark {
            let x = |t: Nanos| time_unit.of((t - first) as f64).clamp(0.0, x_end);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x(from), 0.0), (x(to), unit.of(highest) * 1.1)],
                    MARK.filled(),
                )))
                .map_err(|e| e.to_string())?;
        }
        chart
            .configure_mesh()
            .light_line_style(GRID)
            .bold_line_style(GRID)
            .x_labels(0)
            .y_labels(4)
            .y_label_formatter(&|v| tick(*v))
            .y_desc(format!("latency, {}", unit.name))
            .axis_desc_style(muted(11))
            .label_style(muted(10))
            .draw()
            .map_err(|e| e.to_string())?;
        for (series, color, name) in [(&p50, INK, "median"), (&p99, HOT, "p99")] {
            chart
                .draw_series(LineSeries::new(
                    series.iter().map(|&(x, y)| (x, unit.of(y))),
                    color.stroke_width(2),
                ))
                .map_err(|e| e.to_string())?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(GRID)
            .label_font(muted(11))
            .position(SeriesLabelPosition::UpperRight)
            .draw()
            .map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&lower)
            .margin(6)
            .margin_left(10)
            .x_label_area_size(34)
            .y_label_area_size(60)
            .build_cartesian_2d(0.0..x_end, 0.0..most * 1.1)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .light_line_style(GRID)
            .bold_line_style(GRID)
            .x_labels(8)
            .y_labels(3)
            .x_label_formatter(&|v| tick(*v))
            .y_label_formatter(&|v| tick(*v))
            .x_desc(format!("since the first request, {}", time_unit.name))
            .y_desc("requests/s")
            .axis_desc_style(muted(11))
            .label_style(muted(10))
            .draw()
            .map_err(|e| e.to_string())?;
        chart
            .draw_series(rate.iter().map(|&(b, r)| {
                let x0 = time_unit.of(width * b as f64);
                Rectangle::new(
                    [(x0, 0.0), (x0 + time_unit.of(width) * 0.9, r)],
                    BAR.filled(),
                )
            }))
            .map_err(|e| e.to_string())?;
        Ok(())
    })
}

/// One hop of a convolution path: the node it reaches and its spikes' labels.
pub struct Hop {
    /// The node the message reaches.
    pub to: String,
    /// The median delay at the sender before it sends on, then one line per delay
    /// spike (`30.0 ms × 412`).
    pub delays: Vec<String>,
    /// Messages on this edge.
    pub count: u64,
}

/// A convolution path as a chain of boxes, each arrow labelled with its delay spikes
/// and its message count; long paths wrap onto further rows.
pub fn chain(first: &str, hops: &[Hop]) -> String {
    const PER_ROW: usize = 4;
    const BOX_W: i32 = 120;
    const GAP: i32 = 110;
    const ROW_H: i32 = 110;
    let nodes: Vec<&str> = std::iter::once(first)
        .chain(hops.iter().map(|h| h.to.as_str()))
        .collect();
    let rows = nodes.len().div_ceil(PER_ROW) as i32;
    let width = PER_ROW as i32 * BOX_W + (PER_ROW as i32 - 1) * GAP + 20;
    let height = (rows - 1) * ROW_H + 80;
    let place = |i: usize| -> (i32, i32) {
        (
            10 + (i % PER_ROW) as i32 * (BOX_W + GAP),
            30 + (i / PER_ROW) as i32 * ROW_H,
        )
    };
    let centred = |style: TextStyle<'static>| {
        style.pos(plotters::style::text_anchor::Pos::new(
            plotters::style::text_anchor::HPos::Center,
            plotters::style::text_anchor::VPos::Center,
        ))
    };
    svg("chain", width as u32, height as u32, |area| {
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        for (i, hop) in hops.iter().enumerate() {
            let ((x1, y1), (x2, y2)) = (place(i), place(i + 1));
            let (from, to) = if y1 == y2 {
                ((x1 + BOX_W, y1 + 18), (x2, y2 + 18))
            } else {
                // Wraps to the next row: from the bottom of this box to the top of the next.
                ((x1 + BOX_W / 2, y1 + 36), (x2 + BOX_W / 2, y2))
            };
            area.draw(&PathElement::new(vec![from, to], MUTED.stroke_width(2)))
                .map_err(e)?;
            let length = (((to.0 - from.0).pow(2) + (to.1 - from.1).pow(2)) as f64)
                .sqrt()
                .max(1.0);
            let (dx, dy) = (
                f64::from(to.0 - from.0) / length,
                f64::from(to.1 - from.1) / length,
            );
            let point = |back: f64, side: f64| {
                (
                    (f64::from(to.0) - back * dx - side * dy) as i32,
                    (f64::from(to.1) - back * dy + side * dx) as i32,
                )
            };
            area.draw(&Polygon::new(
                vec![to, point(8.0, 4.0), point(8.0, -4.0)],
                MUTED.filled(),
            ))
            .map_err(e)?;
            let (lx, ly) = ((from.0 + to.0) / 2, (from.1 + to.1) / 2 - 8);
            let mut lines: Vec<(String, TextStyle)> = hop
                .delays
                .iter()
                .map(|d| (d.clone(), font(12).color(&HOT)))
                .collect();
            lines.push((format!("{} messages", hop.count), muted(11)));
            let above = lines.len() as i32 - 1;
            for (k, (text, style)) in lines.into_iter().enumerate() {
                area.draw(&Text::new(
                    text,
                    (lx, ly - 14 * (above - k as i32)),
                    centred(style),
                ))
                .map_err(e)?;
            }
        }
        for (i, node) in nodes.iter().enumerate() {
            let (x, y) = place(i);
            area.draw(&Rectangle::new(
                [(x, y), (x + BOX_W, y + 36)],
                WHITE.filled(),
            ))
            .map_err(e)?;
            area.draw(&Rectangle::new(
                [(x, y), (x + BOX_W, y + 36)],
                INK.stroke_width(1),
            ))
            .map_err(e)?;
            area.draw(&Text::new(
                node.to_string(),
                (x + BOX_W / 2, y + 18),
                centred(font(12)),
            ))
            .map_err(e)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_keep_axis_values_between_one_and_a_thousand() {
        assert_eq!(Unit::for_largest(192e6).name, "ms");
        assert_eq!(Unit::for_largest(999.0).name, "ns");
        assert_eq!(Unit::for_largest(5e3).name, "µs");
        assert_eq!(Unit::for_largest(3.2e9).name, "s");
        assert_eq!(Unit::for_largest(0.0).name, "ns");
    }

    #[test]
    fn ticks_carry_no_needless_digits() {
        assert_eq!(tick(0.0), "0");
        assert_eq!(tick(5.0), "5");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(150.0), "150");
        assert_eq!(tick(0.05), "0.05");
    }

    #[test]
    fn a_histogram_of_equal_samples_draws_one_bar() {
        let svg = histogram(&[5, 5, 5], 5, 5);
        assert!(
            svg.starts_with("<div class=\"chart histogram\"><svg"),
            "{svg}"
        );
        assert!(!svg.contains("not drawn"), "{svg}");
    }

    #[test]
    fn labels_are_escaped() {
        let svg = chain("<a>", &[]);
        assert!(svg.contains("&lt;a&gt;") && !svg.contains("<a>"), "{svg}");
    }

    #[test]
    fn ticks_on_a_timeline_are_plain_numbers_in_one_unit() {
        let svg = timeline(&[Bar {
            label: "web".into(),
            depth: 0,
            start: 0.0,
            length: 192e6,
            own: 10e6,
            hot: true,
            answer_transit: 0.0,
            transit_hot: false,
        }]);
        assert!(svg.contains("\nms\n</text>"), "{svg}");
        assert!(!svg.contains("0 ns") && !svg.contains(".000"), "{svg}");
    }
}
