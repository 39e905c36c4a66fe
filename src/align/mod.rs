//! Clock alignment of per-host captures: every host's clock turned into one reference
//! host's, from the TCP segments both ends captured. [`pairing`] finds the samples,
//! [`fit`] fits each pair of hosts, [`graph`] picks the reference and the route of each
//! host to it; this module composes the routes, checks the loops the routes leave out,
//! and turns times. [`repair`] then restores causality in the merged trace. Knows nothing of
//! messages or inference: captures are read by [`crate::capture`], which asks this
//! module for each time. [`mail`] estimates mail relays' clocks the same way from what
//! mail has instead of shared segments: the emails' own chains of Received headers.

pub mod combine;
pub mod fit;
pub mod graph;
pub mod mail;
pub mod pairing;
pub mod repair;

use crate::capture::HostCapture;
use crate::trace::Nanos;
use fit::{FitOptions, Method, PairFit, Quality};
use pairing::PairingStats;
use serde::Serialize;

/// One host's clock against the reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostClock {
    /// The host's name.
    pub host: String,
    /// Whether it is the reference.
    pub reference: bool,
    /// How well it is aligned: the worst pair on its route (absent: not aligned).
    pub quality: Quality,
    /// Its clock minus the reference's at its first segment, ns.
    pub offset_ns: f64,
    /// Its clock rate minus the reference's, ppm.
    pub drift_ppm: f64,
    /// Half the width of the guaranteed bounds on its offset at its middle, summed
    /// along its route, ns; `None` when a pair on the route is not bounded both ways.
    pub bound_ns: Option<f64>,
    /// Samples of the pairs on its route (the fewest of any pair).
    pub samples: usize,
    /// Hosts crossed on the way to the reference, the reference last.
    pub via: Vec<String>,
    #[serde(skip)]
    hops: Vec<usize>,
    #[serde(skip)]
    span: (Nanos, Nanos),
}

/// A pair left out of the routes, checked against them: its direct fit and the routes
/// should agree within their bounds; when they do not, a fit on the loop is wrong.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopCheck {
    /// The pair's hosts.
    pub hosts: (String, String),
    /// The direct offset minus the one through the routes, ns.
    pub residual_ns: f64,
    /// What the bounds allow, ns (`None`: not bounded).
    pub allowed_ns: Option<f64>,
    /// Whether the residual is beyond what the bounds allow.
    pub disagrees: bool,
}

/// The alignment of a set of captures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alignment {
    /// The method used for every pair.
    pub method: Method,
    /// The reference host's name.
    pub reference: Option<String>,
    /// Per capture, in the order given.
    pub hosts: Vec<HostClock>,
    /// Every pair with samples.
    pub pairs: Vec<PairSummary>,
    /// Pairs outside the routes, checked against them.
    pub loops: Vec<LoopCheck>,
    /// What pairing found.
    pub pairing: PairingStats,
    /// Whether the corrections were solved over all pairs together (the graph has
    /// loops) rather than along shortest paths only.
    pub least_squares: bool,
    #[serde(skip)]
    fits: Vec<PairFit>,
    #[serde(skip)]
    grids: Vec<Option<combine::Grid>>,
}

/// A pair's fit, for reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairSummary {
    /// Its hosts.
    pub hosts: (String, String),
    /// How well it is known.
    pub quality: Quality,
    /// Samples each way.
    pub samples: (usize, usize),
    /// Samples dropped because no line agreed with them.
    pub dropped: usize,
    /// Lines over time.
    pub pieces: usize,
    /// Its weight in the graph: half the width of its bounds (or its residual
    /// deviation), ns.
    pub uncertainty_ns: f64,
}

/// Aligns `captures`, read with [`crate::capture::CaptureOptions::clock_stamps`]: each
/// host along its shortest path to the reference.
pub fn align(captures: &[HostCapture], method: Method) -> Alignment {
    align_with(captures, method, false)
}

/// Like [`align`]; with `least_squares`, where the graph has loops, all hosts are then
/// solved together by weighted least squares. That helps when the pairs' errors are
/// independent (−18% under a wandering drift in the study) and hurts when they share a
/// sign (+9% under one-way queueing, which biases every pair the same way), so it is
/// not the default.
pub fn align_with(captures: &[HostCapture], method: Method, least_squares: bool) -> Alignment {
    align_paired(
        captures,
        &pairing::pair_samples(captures),
        method,
        least_squares,
    )
}

/// Like [`align_with`], from the segments already paired.
pub fn align_paired(
    captures: &[HostCapture],
    paired: &pairing::Pairing,
    method: Method,
    least_squares: bool,
) -> Alignment {
    let samples = &paired.samples;
    let pairing = paired.stats.clone();
    let options = FitOptions {
        method,
        ..FitOptions::default()
    };
    let fits: Vec<PairFit> = {
        use rayon::prelude::*;
        samples.par_iter().map(|s| fit::fit(s, &options)).collect()
    };
    let names: Vec<String> = captures.iter().map(|c| c.host.clone()).collect();
    let routes = graph::routes(&names, &fits);
    let mut alignment = Alignment {
        method,
        reference: routes.reference.map(|r| names[r].clone()),
        hosts: Vec::new(),
        pairs: fits
            .iter()
            .map(|f| PairSummary {
                hosts: (names[f.a].clone(), names[f.b].clone()),
                quality: f.quality,
                samples: (f.forward, f.backward),
                dropped: f.dropped,
                pieces: f.pieces.len(),
                uncertainty_ns: f.uncertainty(),
            })
            .collect(),
        loops: Vec::new(),
        pairing,
        least_squares: false,
        fits,
        grids: Vec::new(),
    };
    for (index, capture) in captures.iter().enumerate() {
        let span = capture
            .stamps
            .iter()
            .flat_map(|r| r.stamps.first().into_iter().chain(r.stamps.last()))
            .map(|s| s.time)
            .fold(None, |acc: Option<(Nanos, Nanos)>, t| match acc {
                None => Some((t, t)),
                Some((a, b)) => Some((a.min(t), b.max(t))),
            })
            .unwrap_or((0, 0));
        let route = routes.routes[index].as_ref();
        let hops = route.map(|r| r.hops.clone()).unwrap_or_default();
        let mut clock = HostClock {
            host: names[index].clone(),
            reference: routes.reference == Some(index),
            quality: if route.is_some() {
                Quality::Accurate
            } else {
                Quality::Absent
            },
            offset_ns: 0.0,
            drift_ppm: 0.0,
            bound_ns: route.map(|_| 0.0),
            samples: 0,
            via: Vec::new(),
            hops,
            span,
        };
        if route.is_some() && !clock.reference {
            let fits = &alignment.fits;
            clock.quality = clock
                .hops
                .iter()
                .map(|&h| fits[h].quality)
                .max()
                .unwrap_or(Quality::Absent);
            clock.samples = clock
                .hops
                .iter()
                .map(|&h| fits[h].forward + fits[h].backward)
                .min()
                .unwrap_or(0);
            let mut at = index;
            for &h in &clock.hops {
                at = if fits[h].a == at {
                    fits[h].b
                } else {
                    fits[h].a
                };
                clock.via.push(names[at].clone());
            }
        }
        alignment.hosts.push(clock);
    }
    alignment.loops = alignment.check_loops(&names);
    if let (true, Some(reference)) = (least_squares, routes.reference) {
        let spans: Vec<Option<(Nanos, Nanos)>> = alignment
            .hosts
            .iter()
            .map(|h| (h.quality != Quality::Absent).then_some(h.span))
            .collect();
        let grids = combine::least_squares(&alignment, &spans, reference);
        alignment.least_squares = grids.iter().any(Option::is_some);
        alignment.grids = grids;
    }
    // Offsets and drifts as corrected (by least squares where solved); bounds along
    // the routes.
    for index in 0..alignment.hosts.len() {
        let (first, last) = alignment.hosts[index].span;
        if alignment.hosts[index].hops.is_empty() {
            continue;
        }
        let error = |t: Nanos| -alignment.correction(index, t);
        let (at_first, at_last) = (error(first), error(last));
        let bound = alignment.route_bound(index, first + (last - first) / 2);
        let clock = &mut alignment.hosts[index];
        clock.offset_ns = at_first;
        if last > first {
            clock.drift_ppm = (at_last - at_first) / (last - first) as f64 * 1e6;
        }
        clock.bound_ns = bound;
    }
    alignment
}

impl Alignment {
    /// A time in capture `host`'s clock in the reference's clock (unchanged for a host
    /// that is not aligned).
    pub fn to_reference(&self, host: usize, t: Nanos) -> Nanos {
        t + self.correction(host, t).round() as Nanos
    }

    /// The reference's clock minus the host's at the host's time `t`, ns, unrounded:
    /// the least-squares solution where there is one, else along the host's route.
    pub fn correction(&self, host: usize, t: Nanos) -> f64 {
        match self
            .grids
            .get(host)
            .and_then(Option::as_ref)
            .and_then(|g| g.at(t))
        {
            Some(correction) => correction,
            None => self.walk(host, t).1,
        }
    }

    /// The correction along the host's route alone (what least squares starts from).
    fn route_correction(&self, host: usize, t: Nanos) -> f64 {
        self.walk(host, t).1
    }

    /// Half the width of the bounds along a host's route at its time `t` (`None` when
    /// a pair on the route is bounded from one side only).
    pub fn route_bound(&self, host: usize, t: Nanos) -> Option<f64> {
        self.walk(host, t).2
    }

    /// Follows a host's route from its time `t`: the time in the reference's clock,
    /// the correction, and the bound.
    fn walk(&self, host: usize, t: Nanos) -> (Nanos, f64, Option<f64>) {
        let Some(clock) = self.hosts.get(host) else {
            return (t, 0.0, None);
        };
        let (mut at, mut time, mut total, mut bound) = (host, t, 0.0, Some(0.0));
        for &h in &clock.hops {
            let fit = &self.fits[h];
            // The pair's line is written in `a`'s clock.
            let (a_time, sign) = if fit.a == at {
                (time, 1.0)
            } else {
                (fit.b_to_a(time), -1.0)
            };
            total += sign * fit.offset_at(a_time);
            bound = match (bound, fit.bounds_at(a_time)) {
                (Some(b), Some((low, high))) => Some(b + (high - low) / 2.0),
                _ => None,
            };
            time = t + total.round() as Nanos;
            at = if fit.a == at { fit.b } else { fit.a };
        }
        (time, total, bound)
    }

    fn check_loops(&self, names: &[String]) -> Vec<LoopCheck> {
        let used: std::collections::BTreeSet<usize> = self
            .hosts
            .iter()
            .flat_map(|h| h.hops.iter().copied())
            .collect();
        let mut loops = Vec::new();
        for (index, fit) in self.fits.iter().enumerate() {
            let routed = |h: usize| !self.hosts[h].hops.is_empty() || self.hosts[h].reference;
            if used.contains(&index)
                || fit.quality != Quality::Accurate
                || !routed(fit.a)
                || !routed(fit.b)
            {
                continue;
            }
            let Some(piece) = fit.pieces.get(fit.pieces.len() / 2) else {
                continue;
            };
            // One instant seen from a and from b: in the reference's clock the two
            // routes should agree.
            let t = piece.origin;
            let direct = fit.offset_at(t);
            let t_b = t + direct.round() as Nanos;
            let via_a = self.correction(fit.a, t);
            let via_b = self.correction(fit.b, t_b);
            let residual = (direct.round() + via_b) - via_a;
            let allowed = match (
                fit.bounds_at(t),
                self.route_bound(fit.a, t),
                self.route_bound(fit.b, t_b),
            ) {
                (Some((low, high)), Some(x), Some(y)) => Some((high - low) / 2.0 + x + y + 1.0),
                _ => None,
            };
            loops.push(LoopCheck {
                hosts: (names[fit.a].clone(), names[fit.b].clone()),
                residual_ns: residual,
                allowed_ns: allowed,
                disagrees: allowed.is_some_and(|a| residual.abs() > a),
            });
        }
        loops
    }

    /// Hosts that could not be aligned.
    pub fn unaligned(&self) -> Vec<&str> {
        self.hosts
            .iter()
            .filter(|h| h.quality == Quality::Absent)
            .map(|h| h.host.as_str())
            .collect()
    }
}
