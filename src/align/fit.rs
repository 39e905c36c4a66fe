//! Fitting the clock relation of one pair of hosts from its one-way samples: the
//! line `offset(t) = offset₀ + drift·(t − origin)` that turns host `a`'s clock into host
//! `b`'s (`t_b = t_a + offset(t_a)`), by the paper's regression or by convex hulls.
//! Owns the fits, their pieces, bounds and quality; knows nothing of other pairs.
//!
//! In `a`'s clock, a segment `a → b` gives an upper bound on the line (the offset
//! plus a delay that is never negative: `offset(sent) ≤ received − sent`), a segment
//! `b → a` a lower bound (`offset(received) ≥ sent − received`). The lines under every
//! upper point and over every lower point form a convex polygon in (offset₀, drift):
//! its corners give guaranteed bounds at every instant, and the line through the middle
//! of those bounds is the estimate.

use super::pairing::{PairSamples, Sample};
use crate::trace::Nanos;
use serde::Serialize;

/// How a pair is fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// The offline-trace-sync paper's method: offsets of exchanges, the 10% with the
    /// largest round-trip error dropped, a least-squares line per 30 minutes.
    Regression,
    /// Convex hulls of the samples in each direction: guaranteed bounds, and an
    /// estimate that queueing in one direction does not pull away.
    Hull,
}

/// How well a pair is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Quality {
    /// Samples in both directions that bound the line from both sides.
    Accurate,
    /// Samples in one direction only (or never interleaved): the line is bounded from
    /// one side, and the estimate assumes the smallest delay seen is zero.
    Approximate,
    /// No samples.
    Absent,
}

impl std::fmt::Display for Quality {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Quality::Accurate => "accurate",
            Quality::Approximate => "approximate",
            Quality::Absent => "absent",
        })
    }
}

/// One stretch of time with one line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Piece {
    /// The first sample's time in `a`'s clock; the piece holds from here to the next.
    pub start: Nanos,
    /// The last sample's time.
    pub end: Nanos,
    /// The time the line is written around, in `a`'s clock.
    pub origin: Nanos,
    /// `b`'s clock minus `a`'s at `origin`, ns.
    pub offset: f64,
    /// d(offset)/dt: `b`'s clock rate relative to `a`'s, minus one.
    pub drift: f64,
    /// Corners (offset at `origin`, drift) of every line consistent with the samples:
    /// empty when the samples do not bound the line from both sides.
    pub corners: Vec<(f64, f64)>,
    /// Residual standard deviation of a regression, ns (0 for a hull fit).
    pub residual_sd: f64,
}

impl Piece {
    /// The estimated offset at `t` in `a`'s clock.
    pub fn offset_at(&self, t: Nanos) -> f64 {
        self.offset + self.drift * (t - self.origin) as f64
    }

    /// The smallest and largest offset consistent with the samples at `t`.
    pub fn bounds_at(&self, t: Nanos) -> Option<(f64, f64)> {
        let x = (t - self.origin) as f64;
        let values = self.corners.iter().map(|&(a, b)| a + b * x);
        let low = values.clone().fold(f64::INFINITY, f64::min);
        let high = values.fold(f64::NEG_INFINITY, f64::max);
        (low <= high).then_some((low, high))
    }

    /// How uncertain the piece is, ns: half the width of its bounds at its middle, or
    /// its residual deviation.
    fn spread(&self) -> f64 {
        match self.bounds_at(self.start + (self.end - self.start) / 2) {
            Some((low, high)) => ((high - low) / 2.0).max(self.residual_sd),
            None => self.residual_sd,
        }
    }
}

/// The fit of one pair of hosts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairFit {
    /// The first host (capture index).
    pub a: usize,
    /// The second host.
    pub b: usize,
    /// The method used.
    pub method: Method,
    /// How well the pair is known.
    pub quality: Quality,
    /// Samples `a → b`.
    pub forward: usize,
    /// Samples `b → a`.
    pub backward: usize,
    /// Samples left out because no line could agree with them.
    pub dropped: usize,
    /// The lines, in time order.
    pub pieces: Vec<Piece>,
}

/// Above this uncertainty a pair is only used when there is no other way: a one-sided
/// fit carries the unknown smallest delay.
const APPROXIMATE_WEIGHT: f64 = 1e9;

impl PairFit {
    /// The piece in force at `t` (in `a`'s clock).
    fn piece(&self, t: Nanos) -> Option<&Piece> {
        let after = self.pieces.partition_point(|p| p.start <= t);
        self.pieces.get(after.saturating_sub(1))
    }

    /// `b`'s clock minus `a`'s at `t` in `a`'s clock, ns.
    pub fn offset_at(&self, t: Nanos) -> f64 {
        self.piece(t).map_or(0.0, |p| p.offset_at(t))
    }

    /// Bounds on that offset, when both directions bound it.
    pub fn bounds_at(&self, t: Nanos) -> Option<(f64, f64)> {
        self.piece(t).and_then(|p| p.bounds_at(t))
    }

    /// The weight of this pair in the graph of hosts: its largest spread, ns.
    pub fn uncertainty(&self) -> f64 {
        let spread = self.pieces.iter().map(Piece::spread).fold(0.0, f64::max);
        match self.quality {
            Quality::Accurate => spread,
            _ => APPROXIMATE_WEIGHT + spread,
        }
    }

    /// Turns a time in `b`'s clock into `a`'s (the line's inverse, by fixed point:
    /// the offset changes by nanoseconds over the microseconds it moves a time).
    pub fn b_to_a(&self, t: Nanos) -> Nanos {
        let mut a = t - self.offset_at(t).round() as Nanos;
        for _ in 0..2 {
            a = t - self.offset_at(a).round() as Nanos;
        }
        a
    }
}

/// Options of a fit.
#[derive(Debug, Clone, Copy)]
pub struct FitOptions {
    /// The method.
    pub method: Method,
    /// Longest piece of a regression (the paper's 30 minutes).
    pub regression_window: Nanos,
}

impl Default for FitOptions {
    fn default() -> Self {
        FitOptions {
            method: Method::Hull,
            regression_window: 30 * 60 * 1_000_000_000,
        }
    }
}

/// Fits one pair.
pub fn fit(samples: &PairSamples, options: &FitOptions) -> PairFit {
    let mut fit = PairFit {
        a: samples.a,
        b: samples.b,
        method: options.method,
        quality: Quality::Absent,
        forward: samples.forward.len(),
        backward: samples.backward.len(),
        dropped: 0,
        pieces: Vec::new(),
    };
    if samples.forward.is_empty() && samples.backward.is_empty() {
        return fit;
    }
    let points = Points::new(&samples.forward, &samples.backward);
    if !points.interleaved() {
        fit.quality = Quality::Approximate;
        fit.pieces.push(one_sided(&points));
        return fit;
    }
    fit.quality = Quality::Accurate;
    match options.method {
        Method::Hull => {
            fit.dropped = hull_pieces(points, &mut fit.pieces);
        }
        Method::Regression => {
            regression_pieces(samples, options.regression_window, &mut fit.pieces);
            if fit.pieces.is_empty() {
                fit.quality = Quality::Approximate;
                fit.pieces.push(one_sided(&points));
            }
        }
    }
    fit
}

/// Integer points in `a`'s clock: x the time, y the offset bound, both ns.
#[derive(Debug, Clone)]
struct Points {
    /// Upper bounds (from `a → b`), by x.
    upper: Vec<(i64, i64)>,
    /// Lower bounds (from `b → a`), by x.
    lower: Vec<(i64, i64)>,
}

impl Points {
    fn new(forward: &[Sample], backward: &[Sample]) -> Points {
        let mut upper: Vec<(i64, i64)> = forward
            .iter()
            .map(|s| (s.sent, s.received - s.sent))
            .collect();
        let mut lower: Vec<(i64, i64)> = backward
            .iter()
            .map(|s| (s.received, s.sent - s.received))
            .collect();
        upper.sort_unstable();
        lower.sort_unstable();
        Points { upper, lower }
    }

    /// Whether each direction has a sample after one of the other's, so that the
    /// drift is bounded both ways.
    fn interleaved(&self) -> bool {
        match (
            self.upper.first(),
            self.upper.last(),
            self.lower.first(),
            self.lower.last(),
        ) {
            (Some(u0), Some(u1), Some(l0), Some(l1)) => u1.0 > l0.0 && l1.0 > u0.0,
            _ => false,
        }
    }

    /// Whether both directions have enough samples to split in two.
    fn splittable(&self) -> bool {
        self.upper.len() >= 2 * SPLIT_MIN && self.lower.len() >= 2 * SPLIT_MIN
    }

    /// Drops one point of the upper (or lower) bounds.
    fn remove(&mut self, upper: bool, p: (i64, i64)) {
        remove_point(
            if upper {
                &mut self.upper
            } else {
                &mut self.lower
            },
            p,
        );
    }

    fn span(&self) -> (i64, i64) {
        let first = self.upper.iter().chain(&self.lower).map(|p| p.0).min();
        let last = self.upper.iter().chain(&self.lower).map(|p| p.0).max();
        (first.unwrap_or(0), last.unwrap_or(0))
    }
}

fn cross(o: (i64, i64), p: (i64, i64), q: (i64, i64)) -> i128 {
    i128::from(p.0 - o.0) * i128::from(q.1 - o.1) - i128::from(p.1 - o.1) * i128::from(q.0 - o.0)
}

/// The lower convex hull of points sorted by x (the lowest point of each x only).
fn lower_hull(points: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut hull: Vec<(i64, i64)> = Vec::new();
    for &p in points {
        if hull.last().is_some_and(|q| q.0 == p.0) {
            continue; // sorted by (x, y): the first of an x is its lowest
        }
        while hull.len() >= 2 && cross(hull[hull.len() - 2], hull[hull.len() - 1], p) <= 0 {
            hull.pop();
        }
        hull.push(p);
    }
    hull
}

/// The upper convex hull of points sorted by x (the highest point of each x only).
fn upper_hull(points: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut hull: Vec<(i64, i64)> = Vec::new();
    for &p in points {
        if hull.last().is_some_and(|q| q.0 == p.0) {
            hull.pop(); // sorted by (x, y): the last of an x is its highest
        }
        while hull.len() >= 2 && cross(hull[hull.len() - 2], hull[hull.len() - 1], p) >= 0 {
            hull.pop();
        }
        hull.push(p);
    }
    hull
}

/// The two hulls in coordinates around an origin, and the feasible polygon.
struct Hulls {
    origin: i64,
    upper: Vec<(f64, f64)>,
    lower: Vec<(f64, f64)>,
}

impl Hulls {
    fn new(points: &Points, origin: i64) -> Hulls {
        Hulls::of(
            &lower_hull(&points.upper),
            &upper_hull(&points.lower),
            origin,
        )
    }

    /// From the lower hull of the upper bounds and the upper hull of the lower ones.
    fn of(upper: &[(i64, i64)], lower: &[(i64, i64)], origin: i64) -> Hulls {
        let shift = |h: &[(i64, i64)]| -> Vec<(f64, f64)> {
            h.iter()
                .map(|&(x, y)| ((x - origin) as f64, y as f64))
                .collect()
        };
        Hulls {
            origin,
            upper: shift(upper),
            lower: shift(lower),
        }
    }

    /// The highest offset at the origin a line of slope `b` may have, and its point.
    fn ceiling(&self, b: f64) -> (f64, usize) {
        arg_best(&self.upper, b, |v, best| v < best)
    }

    /// The lowest offset at the origin a line of slope `b` may have, and its point.
    fn floor(&self, b: f64) -> (f64, usize) {
        arg_best(&self.lower, b, |v, best| v > best)
    }

    /// Room between floor and ceiling at slope `b`.
    fn room(&self, b: f64) -> f64 {
        self.ceiling(b).0 - self.floor(b).0
    }

    /// The slopes where either boundary changes its point, in order.
    fn breakpoints(&self) -> Vec<f64> {
        let slopes = |h: &[(f64, f64)]| -> Vec<f64> {
            h.windows(2)
                .map(|w| (w[1].1 - w[0].1) / (w[1].0 - w[0].0))
                .collect()
        };
        let mut all = slopes(&self.upper);
        all.extend(slopes(&self.lower));
        all.sort_by(f64::total_cmp);
        all.dedup();
        all
    }

    /// The slope with the most room, and that room (negative: the hulls cross).
    fn widest(&self, breaks: &[f64]) -> (f64, f64) {
        breaks
            .iter()
            .map(|&b| (b, self.room(b)))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .unwrap_or((0.0, self.room(0.0)))
    }

    /// The corners of the feasible polygon, when there is room.
    fn polygon(&self) -> Option<Vec<(f64, f64)>> {
        let breaks = self.breakpoints();
        let (best, room) = self.widest(&breaks);
        if room < 0.0 {
            return None;
        }
        // The room shrinks linearly past the outermost breakpoints, at the rate the
        // outermost points' times differ (interleaving makes it shrink).
        let root = |from: f64, toward_high: bool| -> f64 {
            let inner: Vec<f64> = if toward_high {
                breaks.iter().copied().filter(|&b| b > from).collect()
            } else {
                breaks.iter().rev().copied().filter(|&b| b < from).collect()
            };
            let mut previous = (from, self.room(from));
            for b in inner {
                let r = self.room(b);
                if r < 0.0 {
                    return previous.0 + (b - previous.0) * previous.1 / (previous.1 - r);
                }
                previous = (b, r);
            }
            let step = 1e-6f64.max(previous.0.abs() * 1e-3);
            let probe = if toward_high {
                previous.0 + step
            } else {
                previous.0 - step
            };
            let rate = (self.room(probe) - previous.1) / (probe - previous.0);
            let outward = if toward_high { rate < 0.0 } else { rate > 0.0 };
            if outward {
                previous.0 - previous.1 / rate
            } else {
                previous.0
            }
        };
        let (low, high) = (root(best, false), root(best, true));
        let mut slopes = vec![low];
        slopes.extend(breaks.iter().copied().filter(|&b| b > low && b < high));
        slopes.push(high);
        let mut corners: Vec<(f64, f64)> = slopes.iter().map(|&b| (self.ceiling(b).0, b)).collect();
        corners.extend(slopes.iter().rev().map(|&b| (self.floor(b).0, b)));
        Some(corners)
    }
}

fn arg_best(points: &[(f64, f64)], b: f64, better: impl Fn(f64, f64) -> bool) -> (f64, usize) {
    let mut best = (f64::NAN, 0);
    for (i, &(x, y)) in points.iter().enumerate() {
        let v = y - b * x;
        if i == 0 || better(v, best.0) {
            best = (v, i);
        }
    }
    best
}

/// Most samples one piece drops to restore consistency before it is split instead.
const DROP_BUDGET: usize = 16;
/// The shortest piece a bend of the drift splits off, ns.
const SHORTEST_BEND: Nanos = 10_000_000_000;
/// Fewest samples per direction in a piece that may be split further.
const SPLIT_MIN: usize = 16;
/// A sample whose slack is below its neighbours' by this much (ns)...
const SPIKE_FLOOR: f64 = 10_000.0;
/// ...and by this many times the 90th percentile of such gaps, is a bad timestamp.
const SPIKE_SPREAD: f64 = 4.0;

/// Fits hull pieces: one line while the samples agree; bad samples dropped (up to a
/// budget), else the time split in two. Returns the samples dropped.
fn hull_pieces(mut points: Points, pieces: &mut Vec<Piece>) -> usize {
    let (first, last) = points.span();
    let origin = first + (last - first) / 2;
    let mut dropped = 0;
    let mut crossing = 0;
    // Bad timestamps are looked for once a line exists: a few at most (a rank of the
    // samples), else the samples are what they are.
    let mut spikes_checked = false;
    loop {
        if !points.interleaved() {
            pieces.push(one_sided(&points));
            return dropped;
        }
        let hulls = Hulls::new(&points, origin);
        if let Some(corners) = hulls.polygon() {
            let mut piece = Piece {
                start: first,
                end: last,
                origin,
                offset: 0.0,
                drift: 0.0,
                corners,
                residual_sd: 0.0,
            };
            // The truth lies anywhere between the bounds, so the middle of the bounds is
            // the estimate with the least worst-case error at each instant; the line is
            // their least-squares fit over the piece (the centroid of a lopsided polygon
            // is pulled to one side).
            if let Some((offset, drift)) = middle_line(&piece, first, last) {
                (piece.offset, piece.drift) = (offset, drift);
            }
            if !spikes_checked {
                spikes_checked = true;
                let found = spikes(&points, &piece);
                let most = spike_rank(points.upper.len().min(points.lower.len()));
                if !found.is_empty() && found.len() <= most {
                    for (upper, point) in found {
                        points.remove(upper, point);
                        dropped += 1;
                    }
                    continue;
                }
            }
            // Clocks bend over minutes (temperature), not within seconds: shorter
            // pieces would only follow the noise of the smallest delays.
            let splittable = points.splittable() && last - first >= 2 * SHORTEST_BEND;
            if splittable && curved(&points, &piece) {
                break;
            }
            pieces.push(piece);
            return dropped;
        }
        if points.splittable() && crossing >= DROP_BUDGET {
            break;
        }
        drop_crossing(&mut points, &hulls);
        crossing += 1;
        dropped += 1;
    }
    // Split at the middle of the time span; each half fitted on its own.
    let middle = origin;
    let half = |keep: &dyn Fn(i64) -> bool| Points {
        upper: points.upper.iter().copied().filter(|p| keep(p.0)).collect(),
        lower: points.lower.iter().copied().filter(|p| keep(p.0)).collect(),
    };
    let (early, late) = (half(&|x| x < middle), half(&|x| x >= middle));
    for part in [early, late] {
        if part.interleaved() {
            dropped += hull_pieces(part, pieces);
        } else if !part.upper.is_empty() || !part.lower.is_empty() {
            pieces.push(one_sided(&part));
        }
    }
    dropped
}

/// The least-squares line through the middles of a piece's bounds at evenly spaced
/// instants, as (offset at the origin, drift).
fn middle_line(piece: &Piece, first: Nanos, last: Nanos) -> Option<(f64, f64)> {
    const STEPS: i64 = 64;
    if last <= first {
        return None;
    }
    let mut points = Vec::with_capacity(STEPS as usize + 1);
    for i in 0..=STEPS {
        let t = first + ((last - first) as i128 * i128::from(i) / i128::from(STEPS)) as Nanos;
        let (low, high) = piece.bounds_at(t)?;
        points.push(((t - piece.origin) as f64, (low + high) / 2.0));
    }
    Some(least_squares(&points))
}

/// The least-squares line through points, as (value at x = 0, slope); flat when the
/// points share one x.
fn least_squares(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (mean_y - slope * mean_x, slope)
}

/// Whether the clocks' relation bends within a piece although one line still fits
/// (a drift that wanders less than the smallest delays): in time bins, the middle of
/// the two directions' smallest slacks tracks the true offset; when it strays from a
/// line by more than the tolerance, the piece is split.
fn curved(points: &Points, piece: &Piece) -> bool {
    const BINS: i64 = 8;
    let span = piece.end - piece.start;
    if span <= 0 {
        return false;
    }
    let bin_of = |x: i64| {
        let bin = (x - piece.start) as i128 * i128::from(BINS) / (span as i128 + 1);
        (bin as usize).min(BINS as usize - 1)
    };
    // The KEEP smallest slacks of each direction per bin: the smallest tracks the
    // offset, the gap to the last says how noisy that is (segments of one message
    // often share a delay, so the next few can equal the smallest).
    const KEEP: usize = 8;
    let mut least = vec![[[f64::INFINITY; KEEP]; 2]; BINS as usize];
    let mut keep = |bin: usize, side: usize, slack: f64| {
        let kept = &mut least[bin][side];
        if slack < kept[KEEP - 1] {
            kept[KEEP - 1] = slack;
            let mut i = KEEP - 1;
            while i > 0 && kept[i] < kept[i - 1] {
                kept.swap(i, i - 1);
                i -= 1;
            }
        }
    };
    for &(x, y) in &points.upper {
        keep(bin_of(x), 0, y as f64 - piece.offset_at(x));
    }
    for &(x, y) in &points.lower {
        keep(bin_of(x), 1, piece.offset_at(x) - y as f64);
    }
    let full: Vec<(usize, &[[f64; KEEP]; 2])> = least
        .iter()
        .enumerate()
        .filter(|(_, b)| b[0][KEEP - 1].is_finite() && b[1][KEEP - 1].is_finite())
        .collect();
    if full.len() < 4 {
        return false;
    }
    let middles: Vec<(f64, f64)> = full
        .iter()
        .map(|&(k, b)| (k as f64, (b[0][0] - b[1][0]) / 2.0))
        .collect();
    let mut gaps: Vec<f64> = full
        .iter()
        .flat_map(|(_, b)| [b[0][KEEP - 1] - b[0][0], b[1][KEEP - 1] - b[1][0]])
        .collect();
    gaps.sort_by(f64::total_cmp);
    let tolerance = CURVE_TOLERANCE.max(CURVE_NOISE * gaps[gaps.len() / 2]);
    let (at_zero, slope) = least_squares(&middles);
    middles
        .iter()
        .any(|m| (m.1 - at_zero - slope * m.0).abs() > tolerance)
}

/// How far (ns) the middle of the smallest slacks may stray from a line before a piece
/// is split: twice the accuracy the fits aim at.
const CURVE_TOLERANCE: f64 = 2_000.0;
/// ...or this many times the typical gap between a bin's smallest and eighth smallest
/// slacks, when the smallest delays are that noisy.
const CURVE_NOISE: f64 = 3.0;

/// Drops the one sample whose removal most widens the room where the hulls cross.
fn drop_crossing(points: &mut Points, hulls: &Hulls) {
    let (best, _) = hulls.widest(&hulls.breakpoints());
    let (_, u) = hulls.ceiling(best);
    let (_, l) = hulls.floor(best);
    let unshift = |p: (f64, f64)| ((p.0 as i64) + hulls.origin, p.1 as i64);
    let (u, l) = (unshift(hulls.upper[u]), unshift(hulls.lower[l]));
    let try_without = |which: bool| -> f64 {
        let mut trial = points.clone();
        remove_point(
            if which {
                &mut trial.upper
            } else {
                &mut trial.lower
            },
            if which { u } else { l },
        );
        let h = Hulls::new(&trial, hulls.origin);
        h.widest(&h.breakpoints()).1
    };
    if try_without(true) >= try_without(false) {
        points.remove(true, u);
    } else {
        points.remove(false, l);
    }
}

fn remove_point(points: &mut Vec<(i64, i64)>, p: (i64, i64)) {
    if let Ok(i) = points.binary_search(&p) {
        points.remove(i);
    }
}

/// Samples that claim a far shorter delay than their neighbours: a timestamp taken
/// early (or late) by tens of microseconds gives a bound that is consistent but false,
/// and pulls the whole line. Slack is a sample's apparent delay past the current line;
/// a sample is a spike when its slack is below the third smallest of the samples on
/// each side of it (the same direction, in time order) by more than the floor and four
/// times the 90th percentile of such gaps (what honest samples reach). Neighbours share
/// the line's error, so a line the spike itself has pulled does not hide it.
fn spikes(points: &Points, piece: &Piece) -> Vec<(bool, (i64, i64))> {
    const AROUND: usize = 16;
    let mut found = Vec::new();
    for upper in [true, false] {
        let list = if upper { &points.upper } else { &points.lower };
        if list.len() < 2 * AROUND {
            continue;
        }
        let slack: Vec<f64> = list
            .iter()
            .map(|&(x, y)| {
                let line = piece.offset_at(x);
                if upper {
                    y as f64 - line
                } else {
                    line - y as f64
                }
            })
            .collect();
        // The third smallest on each side, the smaller of the two: an error of the
        // line's slope raises one side and lowers the other. Samples with fewer than
        // three on a side are not judged.
        let third = |range: std::ops::Range<usize>| -> Option<f64> {
            // The three smallest in one pass: this runs twice per sample.
            let mut least = [f64::INFINITY; 3];
            for &v in &slack[range] {
                if v < least[2] {
                    least[2] = v;
                    if least[2] < least[1] {
                        least.swap(1, 2);
                        if least[1] < least[0] {
                            least.swap(0, 1);
                        }
                    }
                }
            }
            least[2].is_finite().then_some(least[2])
        };
        let gaps: Vec<f64> = (0..list.len())
            .map(|i| {
                let left = third(i.saturating_sub(AROUND)..i);
                let right = third(i + 1..(i + AROUND + 1).min(list.len()));
                match (left, right) {
                    (Some(l), Some(r)) => l.min(r) - slack[i],
                    _ => f64::NEG_INFINITY,
                }
            })
            .collect();
        // What honest samples reach: on an idle LAN's sharp edge a bad timestamp
        // stands out by microseconds; wide delays (a Gaussian tail) give honest
        // samples large gaps too, and raise the bar with them.
        let mut sorted = gaps.clone();
        sorted.sort_by(f64::total_cmp);
        let honest = sorted[sorted.len() * 9 / 10];
        let threshold = SPIKE_FLOOR.max(SPIKE_SPREAD * honest);
        found.extend(
            gaps.iter()
                .zip(list)
                .filter(|(&gap, _)| gap > threshold)
                .map(|(_, &p)| (upper, p)),
        );
    }
    found
}

/// The rank a spike is measured against: a few percent of a direction's samples, at
/// least four; 0 when there are too few samples to tell.
fn spike_rank(samples: usize) -> usize {
    if samples < 16 {
        0
    } else {
        (samples / 50).max(4)
    }
}

/// A line bounded from one side only: the hull edge under (or over) the middle sample,
/// taken as if the smallest delay seen were zero; with both directions but no
/// interleaving, the flat line midway.
fn one_sided(points: &Points) -> Piece {
    let (first, last) = points.span();
    let origin = first + (last - first) / 2;
    let edge = |hull: Vec<(i64, i64)>| -> (f64, f64) {
        let i = hull
            .partition_point(|p| p.0 < origin)
            .clamp(1, hull.len().max(1));
        match (hull.get(i - 1), hull.get(i)) {
            (Some(p), Some(q)) => {
                let slope = (q.1 - p.1) as f64 / (q.0 - p.0) as f64;
                (p.1 as f64 + slope * (origin - p.0) as f64, slope)
            }
            (Some(p), None) => (p.1 as f64, 0.0),
            _ => (0.0, 0.0),
        }
    };
    let (offset, drift) = match (points.upper.is_empty(), points.lower.is_empty()) {
        (false, true) => edge(lower_hull(&points.upper)),
        (true, false) => edge(upper_hull(&points.lower)),
        _ => {
            let ceiling = points.upper.iter().map(|p| p.1).min().unwrap_or(0);
            let floor = points.lower.iter().map(|p| p.1).max().unwrap_or(0);
            ((ceiling as f64 + floor as f64) / 2.0, 0.0)
        }
    };
    Piece {
        start: first,
        end: last,
        origin,
        offset,
        drift,
        corners: Vec::new(),
        residual_sd: 0.0,
    }
}

/// One exchange: a segment one way and the next the other way.
struct Exchange {
    /// When, in `a`'s clock.
    at: Nanos,
    /// The exchange's offset estimate: half the difference of the two one-way delays.
    offset: f64,
    /// Half the round trip less the time at the far end: how wrong `offset` can be.
    error: f64,
}

/// Longest wait at the far end for an exchange to count.
const EXCHANGE_TURN: Nanos = 1_000_000_000;

/// The paper's regression (its equations 3–8), per window of time.
fn regression_pieces(samples: &PairSamples, window: Nanos, pieces: &mut Vec<Piece>) {
    let mut exchanges = Vec::new();
    // a → b answered by b → a, and b → a answered by a → b.
    for (out, back, a_first) in [
        (&samples.forward, &samples.backward, true),
        (&samples.backward, &samples.forward, false),
    ] {
        for s in out {
            let i = back.partition_point(|r| r.sent < s.received);
            let Some(r) = back.get(i).filter(|r| r.sent - s.received <= EXCHANGE_TURN) else {
                continue;
            };
            let (t1, t2, t3, t4) = (s.sent, s.received, r.sent, r.received);
            let offset = ((t2 - t1) + (t3 - t4)) as f64 / 2.0;
            let error = ((t4 - t1) - (t3 - t2)) as f64 / 2.0;
            exchanges.push(if a_first {
                Exchange {
                    at: t1,
                    offset,
                    error,
                }
            } else {
                Exchange {
                    at: t2,
                    offset: -offset,
                    error,
                }
            });
        }
    }
    exchanges.sort_by_key(|e| e.at);
    let mut start = 0;
    while start < exchanges.len() {
        let until = exchanges[start].at.saturating_add(window);
        let end = start + exchanges[start..].partition_point(|e| e.at < until);
        if let Some(piece) = regression_line(&exchanges[start..end]) {
            pieces.push(piece);
        }
        start = end;
    }
}

/// The least-squares line through the 90% of exchanges with the smallest error.
fn regression_line(exchanges: &[Exchange]) -> Option<Piece> {
    let mut kept: Vec<&Exchange> = exchanges.iter().collect();
    kept.sort_by(|x, y| x.error.total_cmp(&y.error));
    kept.truncate(((exchanges.len() as f64) * 0.9).ceil() as usize);
    if kept.len() < 2 {
        return None;
    }
    let start = exchanges.first()?.at;
    let end = exchanges.last()?.at;
    let origin = start + (end - start) / 2;
    let n = kept.len() as f64;
    let line: Vec<(f64, f64)> = kept
        .iter()
        .map(|e| ((e.at - origin) as f64, e.offset))
        .collect();
    let (offset, drift) = least_squares(&line);
    let residuals: f64 = kept
        .iter()
        .map(|e| {
            let r = e.offset - offset - drift * (e.at - origin) as f64;
            r * r
        })
        .sum();
    let residual_sd = if kept.len() > 2 {
        (residuals / (n - 2.0)).sqrt()
    } else {
        0.0
    };
    Some(Piece {
        start,
        end,
        origin,
        offset,
        drift,
        corners: Vec::new(),
        residual_sd,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples of a pair whose `b` clock reads `offset + drift·t` ahead of `a`'s, one
    /// exchange every `period`, with delays given per exchange.
    fn exchanges(offset: f64, drift: f64, delays: &[(Nanos, Nanos)], period: Nanos) -> PairSamples {
        let b_clock = |t: Nanos| t + (offset + drift * t as f64).round() as Nanos;
        let mut pair = PairSamples {
            a: 0,
            b: 1,
            ..PairSamples::default()
        };
        for (i, &(forward, backward)) in delays.iter().enumerate() {
            let t = 1_000_000_000 + i as Nanos * period;
            pair.forward.push(Sample {
                sent: t,
                received: b_clock(t + forward),
            });
            let answer = t + forward + 20_000;
            pair.backward.push(Sample {
                sent: b_clock(answer),
                received: answer + backward,
            });
        }
        pair
    }

    #[test]
    fn hull_recovers_offset_and_drift_and_its_bounds_hold_the_truth() {
        let delays: Vec<(Nanos, Nanos)> = (0..200)
            .map(|i| {
                // Jitter of 0–63 µs from a multiplicative hash: irregular, as
                // queues are, but the same on every run.
                let jitter =
                    |k: u64| ((k.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as Nanos) * 1_000;
                (50_000 + jitter(2 * i), 50_000 + jitter(2 * i + 1))
            })
            .collect();
        let pair = exchanges(2.5e9, 80e-6, &delays, 1_000_000_000);
        let fit = fit(&pair, &FitOptions::default());
        assert_eq!(fit.quality, Quality::Accurate);
        assert_eq!(fit.pieces.len(), 1);
        for second in 1..200 {
            let t = second * 1_000_000_000;
            let truth = 2.5e9 + 80e-6 * t as f64;
            let (low, high) = fit.bounds_at(t).unwrap();
            assert!(
                low <= truth + 1.0 && truth <= high + 1.0,
                "{low} {truth} {high}"
            );
            // Never further than half the bounds' width; in the middle, within 1 µs.
            let error = (fit.offset_at(t) - truth).abs();
            assert!(
                error <= (high - low) / 2.0 + 1.0,
                "{error} at {second} s, dropped {}",
                fit.dropped
            );
            if (50..150).contains(&second) {
                assert!(
                    error < 1_000.0,
                    "{error} at {second} s, dropped {}",
                    fit.dropped
                );
            }
        }
        assert!((fit.pieces[0].drift - 80e-6).abs() < 1e-8);
    }

    #[test]
    fn queueing_one_way_pulls_the_regression_but_not_the_hull() {
        // Every third segment a → b waits 100 µs in a queue.
        let delays: Vec<(Nanos, Nanos)> = (0..300)
            .map(|i| (50_000 + if i % 3 == 0 { 0 } else { 100_000 }, 50_000))
            .collect();
        let pair = exchanges(1e6, 0.0, &delays, 100_000_000);
        let hull = fit(&pair, &FitOptions::default());
        let regression = fit(
            &pair,
            &FitOptions {
                method: Method::Regression,
                ..FitOptions::default()
            },
        );
        let t = 10_000_000_000;
        assert!(
            (hull.offset_at(t) - 1e6).abs() < 1_000.0,
            "{} {:?}",
            hull.offset_at(t),
            hull
        );
        assert!((regression.offset_at(t) - 1e6).abs() > 20_000.0);
    }

    #[test]
    fn a_crossing_sample_is_dropped_and_an_early_one_is_a_spike() {
        let delays: Vec<(Nanos, Nanos)> = (0..100)
            .map(|i| (50_000 + (i % 7) * 500, 50_000 + (i % 5) * 500))
            .collect();
        let mut pair = exchanges(0.0, 0.0, &delays, 1_000_000_000);
        // A receive stamped 120 µs early: the sample claims a negative delay.
        pair.forward[40].received -= 120_000;
        // A receive stamped 40 µs early: consistent, but far tighter than the rest.
        pair.backward[70].received -= 40_000;
        let fit = fit(&pair, &FitOptions::default());
        assert_eq!(fit.quality, Quality::Accurate);
        assert_eq!(fit.dropped, 2);
        assert!(fit.offset_at(50_000_000_000).abs() < 1_000.0);
    }

    proptest::proptest! {
        /// Any samples at all (repeated times, huge offsets, one direction, a handful)
        /// fit without a panic, and a fit with bounds holds its own estimate inside them.
        #[test]
        fn any_samples_fit_without_panicking(
            forward in proptest::collection::vec((0i64..1_000_000_000_000, -2_000_000_000i64..2_000_000_000), 0..80),
            backward in proptest::collection::vec((0i64..1_000_000_000_000, -2_000_000_000i64..2_000_000_000), 0..80),
            regression in proptest::bool::ANY,
        ) {
            let sample = |&(t, d): &(i64, i64)| Sample { sent: t, received: t + d };
            let mut pair = PairSamples {
                a: 0,
                b: 1,
                forward: forward.iter().map(sample).collect(),
                backward: backward.iter().map(sample).collect(),
            };
            pair.forward.sort_by_key(|s| s.sent);
            pair.backward.sort_by_key(|s| s.sent);
            let method = if regression { Method::Regression } else { Method::Hull };
            let fit = fit(&pair, &FitOptions { method, ..FitOptions::default() });
            for piece in &fit.pieces {
                let middle = piece.start + (piece.end - piece.start) / 2;
                proptest::prop_assert!(piece.offset_at(middle).is_finite());
                if let (Method::Hull, Some((low, high))) = (method, piece.bounds_at(middle)) {
                    let estimate = piece.offset_at(middle);
                    proptest::prop_assert!(low - 1.0 <= estimate && estimate <= high + 1.0, "{low} {estimate} {high}");
                }
            }
        }
    }

    #[test]
    fn regression_fits_a_line_per_30_minutes() {
        // Two hours, an exchange every 10 s.
        let delays: Vec<(Nanos, Nanos)> = (0..720).map(|_| (50_000, 50_000)).collect();
        let pair = exchanges(3e6, 20e-6, &delays, 10_000_000_000);
        let options = FitOptions {
            method: Method::Regression,
            ..FitOptions::default()
        };
        let fit = fit(&pair, &options);
        assert_eq!(fit.quality, Quality::Accurate);
        assert_eq!(fit.pieces.len(), 4);
        let t = 5_000_000_000_000;
        assert!((fit.offset_at(t) - (3e6 + 20e-6 * t as f64)).abs() < 100.0);
    }

    #[test]
    fn one_direction_only_is_approximate() {
        let delays: Vec<(Nanos, Nanos)> = (0..10).map(|_| (50_000, 50_000)).collect();
        let mut pair = exchanges(7e6, 0.0, &delays, 1_000_000_000);
        pair.backward.clear();
        let fit = fit(&pair, &FitOptions::default());
        assert_eq!(fit.quality, Quality::Approximate);
        // The smallest delay is taken as zero.
        assert!((fit.offset_at(5_000_000_000) - 7.05e6).abs() < 1.0);
        assert!(fit.bounds_at(5_000_000_000).is_none());
    }
}
