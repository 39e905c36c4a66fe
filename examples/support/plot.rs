//! Line plots for the studies (`examples/accuracy.rs`, `examples/concurrency.rs`,
//! `examples/performance.rs`): one SVG per figure, every series a line with its points
//! marked, a legend. Owns the look of the figures; what they show is each study's.

// Each study uses part of this file.
#![allow(dead_code)]

use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use std::path::Path;

/// Named series of (x, y) points.
pub type Series = Vec<(String, Vec<(f64, f64)>)>;

/// How the x axis is scaled.
#[derive(Clone, Copy, PartialEq, Eq)]
enum XAxis {
    Linear,
    /// Logarithmic, for doublings (message counts, clients).
    Log,
}

/// Writes `series` as an SVG line plot at `path`, y from 0.
pub fn plot(path: &Path, title: &str, x_label: &str, y_label: &str, series: &Series) {
    plot_with(path, title, (x_label, y_label), XAxis::Linear, series);
}

/// [`plot`] with x on a logarithmic scale.
pub fn plot_log_x(path: &Path, title: &str, x_label: &str, y_label: &str, series: &Series) {
    plot_with(path, title, (x_label, y_label), XAxis::Log, series);
}

fn plot_with(path: &Path, title: &str, labels: (&str, &str), x_axis: XAxis, series: &Series) {
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in points {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let y1 = if y1 <= 0.0 { 1.0 } else { y1 * 1.1 };
    let area = SVGBackend::new(path, (760, 460)).into_drawing_area();
    area.fill(&WHITE).expect("svg");
    match x_axis {
        XAxis::Linear => draw(&area, title, labels, x0..x1, y1, series),
        XAxis::Log => draw(
            &area,
            title,
            labels,
            (x0 * 0.8..x1 * 1.25).log_scale(),
            y1,
            series,
        ),
    }
    area.present().expect("svg");
}

fn draw<X>(
    area: &DrawingArea<SVGBackend, plotters::coord::Shift>,
    title: &str,
    (x_label, y_label): (&str, &str),
    x_range: X,
    y1: f64,
    series: &Series,
) where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range, 0.0..y1)
        .expect("svg");
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .expect("svg");
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(214, 39, 40),
        RGBColor(44, 160, 44),
        RGBColor(148, 103, 189),
        RGBColor(255, 127, 14),
        RGBColor(23, 190, 207),
    ];
    for (i, (name, points)) in series.iter().enumerate() {
        let colour = colours[i % colours.len()];
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
            .expect("svg")
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
            .expect("svg");
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .expect("svg");
}
