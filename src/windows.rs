//! Time windows (`nest --window`): the requests grouped by when their root call
//! arrived, in windows of one width aligned to the clock (60 s windows start on the
//! minute), each with its own patterns, so a user sees when a path got slow. Owns the
//! grouping and which window a pattern's latency changed most in; the parent choice is
//! the whole trace's ([`crate::nesting`]), and printing is the report's.

use crate::nesting::{Nesting, Pattern, NO_PARENT};
use crate::trace::{Nanos, Trace};

/// One window's requests.
#[derive(Debug, Clone)]
pub struct Window {
    /// Its start (inclusive) and end (exclusive), on the root callee's clock.
    pub start: Nanos,
    /// See `start`.
    pub end: Nanos,
    /// The patterns of the requests whose root call arrived in it.
    pub patterns: Vec<Pattern>,
}

impl Window {
    /// Requests in the window.
    pub fn requests(&self) -> u64 {
        self.patterns.iter().map(Pattern::count).sum()
    }
}

/// At most this many windows: a width too small for the trace is refused rather than
/// printing a million tables.
pub const MAX_WINDOWS: u64 = 10_000;

/// The windows of `width` that the requests of `nesting` fall in, from the first to
/// the last, empty ones included; `None` if that would be more than [`MAX_WINDOWS`].
pub fn windows(
    trace: &Trace,
    nesting: &Nesting,
    width: Nanos,
    by_operation: bool,
) -> Option<Vec<Window>> {
    let arrivals = || {
        nesting
            .parent
            .iter()
            .enumerate()
            .filter(|&(_, &p)| p == NO_PARENT)
            .map(|(i, _)| nesting.pairs[i].callee_recv)
    };
    let (Some(first), Some(last)) = (arrivals().min(), arrivals().max()) else {
        return Some(Vec::new());
    };
    let start = first.div_euclid(width) * width;
    let count = (last - start).div_euclid(width) as u64 + 1;
    if count > MAX_WINDOWS {
        return None;
    }
    let pairs = &nesting.pairs;
    let group = |root: u32| Some(((pairs[root as usize].callee_recv - start) / width) as usize);
    let patterns = crate::nesting::patterns::find_patterns_by_group(
        trace,
        pairs,
        crate::nesting::patterns::Tree::of(nesting),
        by_operation,
        (&group, count as usize),
    );
    Some(
        patterns
            .into_iter()
            .enumerate()
            .map(|(k, patterns)| Window {
                start: start + k as Nanos * width,
                end: start + (k as Nanos + 1) * width,
                patterns,
            })
            .collect(),
    )
}

/// The window in which the median latency of the pattern `signature` moved most from
/// the last window before it that had the pattern, if it is in two windows or more.
pub fn most_changed(windows: &[Window], signature: &str) -> Option<usize> {
    let mut previous: Option<Nanos> = None;
    let mut best: Option<(Nanos, usize)> = None;
    for (k, window) in windows.iter().enumerate() {
        let Some(pattern) = window.patterns.iter().find(|p| p.signature == signature) else {
            continue;
        };
        let median = pattern.positions[0].latencies.summary().p50;
        if let Some(before) = previous {
            let moved = (median - before).abs();
            if best.is_none_or(|(most, _)| moved > most) {
                best = Some((moved, k));
            }
        }
        previous = Some(median);
    }
    best.map(|(_, k)| k)
}
