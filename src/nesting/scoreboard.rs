//! Step 2 of the nesting algorithm (paper §5.1.1.2, ScoreNestings): the scoreboard, one
//! histogram of parent-to-child call delays per (A, B, C) triple, in exponential bins.
//! Owns binning, weighting and smoothing; which nestings are candidates is decided
//! elsewhere.

use crate::trace::{Nanos, NodeId};
use hashbrown::HashMap;

/// Exponential delay bins: bin `k` holds delays in `[floor·base^k, floor·base^(k+1))`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bins {
    inv_ln_base: f64,
    floor: f64,
    count: usize,
}

impl Bins {
    /// Bins of ratio `base` from `floor` up to `ceiling` (both positive nanoseconds).
    pub fn new(base: f64, floor: Nanos, ceiling: Nanos) -> Self {
        assert!(
            base > 1.0 && floor > 0 && ceiling > floor,
            "bins need base > 1 and 0 < floor < ceiling"
        );
        let inv_ln_base = 1.0 / base.ln();
        let count = ((ceiling as f64 / floor as f64).ln() * inv_ln_base).floor() as usize + 1;
        Bins {
            inv_ln_base,
            floor: floor as f64,
            count,
        }
    }

    /// The bin of a delay: ⌊log_base(delay / floor)⌋, clamped to the bins. Delays below
    /// the floor, negative ones (clock skew inside the skew window) included, go to the
    /// first bin; delays past the ceiling to the last.
    pub fn index(&self, delay: Nanos) -> usize {
        let ratio = delay as f64 / self.floor;
        if ratio < 1.0 {
            return 0;
        }
        ((ratio.ln() * self.inv_ln_base) as usize).min(self.count - 1)
    }

    /// Per bin, ln of the span of time it stands for: its width, or the trace's tick
    /// where that is coarser (a delay read at a coarse tick takes one of few values, so
    /// a bin finer than the tick holds a value's whole chance).
    /// The first bin also holds the negative delays a skew window of `skew_window` admits.
    pub fn ln_spans(&self, tick: Nanos, skew_window: Nanos) -> Vec<f64> {
        let base = (1.0 / self.inv_ln_base).exp();
        let tick = tick.max(1) as f64;
        (0..self.count)
            .map(|i| {
                let width = if i == 0 {
                    self.floor * base + skew_window.max(0) as f64
                } else {
                    self.floor * base.powi(i as i32) * (base - 1.0)
                };
                width.max(tick).ln()
            })
            .collect()
    }

    /// How many bins there are.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The same bins as a table of where each starts, for callers that bin a great
    /// many delays: two lookups instead of a logarithm.
    pub fn table(&self) -> BinTable {
        // starts[i] is the smallest delay in bin i + 1, found by bisecting `index`
        // itself, so the table and `index` agree wherever `index` is monotone.
        let starts: Vec<Nanos> = (1..self.count)
            .map(|bin| {
                let (mut low, mut high) = (0 as Nanos, Nanos::MAX);
                while low < high {
                    let middle = low + (high - low) / 2;
                    if self.index(middle) >= bin {
                        high = middle;
                    } else {
                        low = middle + 1;
                    }
                }
                low
            })
            .collect();
        let guide = (0..64 << GUIDE_BITS)
            .map(|cell: u64| {
                let (octave, step) = (cell >> GUIDE_BITS, cell & ((1 << GUIDE_BITS) - 1));
                // The cell's smallest delay, rounded down: its bin is no later than
                // that of any delay in the cell.
                let low = (u128::from((1 << GUIDE_BITS) + step) << octave) >> GUIDE_BITS;
                let low = Nanos::try_from(low).unwrap_or(Nanos::MAX);
                starts.partition_point(|&start| start <= low) as u32
            })
            .collect();
        BinTable { starts, guide }
    }
}

/// Each power of two of delays is cut into 2^this cells for [`BinTable`]'s guide: cells
/// 1.6% wide, so with bins 5% wide a cell holds at most one bin's start.
const GUIDE_BITS: u32 = 6;

/// [`Bins`] as the smallest delay of every bin but the first, with a guide from the
/// delay's leading bits to the first bin it can be in.
#[derive(Debug, Clone, PartialEq)]
pub struct BinTable {
    starts: Vec<Nanos>,
    guide: Vec<u32>,
}

impl BinTable {
    /// The bin of a delay, as [`Bins::index`] gives it.
    pub fn index(&self, delay: Nanos) -> usize {
        if delay <= 0 {
            return self.starts.partition_point(|&start| start <= delay);
        }
        let d = delay as u64;
        let zeros = d.leading_zeros();
        let octave = u64::from(63 - zeros);
        let step = ((d << zeros) >> (63 - GUIDE_BITS)) & ((1 << GUIDE_BITS) - 1);
        let mut bin = self.guide[((octave << GUIDE_BITS) | step) as usize] as usize;
        while bin < self.starts.len() && self.starts[bin] <= delay {
            bin += 1;
        }
        bin
    }
}

/// The scoreboard for the children of one node B: a histogram per (caller A of B,
/// callee C of B). Scoreboards for different B never share a histogram, so each node's
/// can be built and used on its own thread.
#[derive(Debug, Clone)]
pub struct Scoreboard {
    bins: Bins,
    slots: HashMap<(NodeId, NodeId), usize>,
    weights: Vec<f64>,
}

impl Scoreboard {
    /// An empty scoreboard.
    pub fn new(bins: Bins) -> Self {
        Scoreboard {
            bins,
            slots: HashMap::new(),
            weights: Vec::new(),
        }
    }

    /// Adds `weight` to the bin of `delay` in the histogram of (A = `parent_caller`,
    /// C = `child_callee`).
    pub fn add(&mut self, parent_caller: NodeId, child_callee: NodeId, delay: Nanos, weight: f64) {
        let start = self.histogram_start(parent_caller, child_callee);
        self.weights[start + self.bins.index(delay)] += weight;
    }

    fn histogram_start(&mut self, a: NodeId, c: NodeId) -> usize {
        let next = self.weights.len();
        let count = self.bins.count();
        let start = *self.slots.entry((a, c)).or_insert(next);
        if start == next {
            self.weights.resize(next + count, 0.0);
        }
        start
    }

    /// The raw score of a nesting: the histogram's weight at this delay.
    pub fn score(&self, parent_caller: NodeId, child_callee: NodeId, delay: Nanos) -> f64 {
        match self.slots.get(&(parent_caller, child_callee)) {
            Some(&start) => self.weights[start + self.bins.index(delay)],
            None => 0.0,
        }
    }

    /// Convolves every histogram with a Gaussian of `sigma` bins (truncated at 3σ and
    /// normalised, so total weight is kept away from the edges). Widens peaks so that
    /// skewed timestamps still land near them (paper §7.5.6).
    pub fn smooth(&mut self, sigma: f64) {
        smooth_histograms(&mut self.weights, self.bins.count(), sigma);
    }

    /// How many (A, C) histograms this node has.
    pub fn histograms(&self) -> usize {
        self.slots.len()
    }
}

/// Convolves each histogram of `count` bins in `weights` with a Gaussian of `sigma`
/// bins, truncated at 3σ and normalised; all-zero histograms are left alone.
pub fn smooth_histograms(weights: &mut [f64], count: usize, sigma: f64) {
    if sigma <= 0.0 {
        return;
    }
    let reach = (3.0 * sigma).ceil() as usize;
    let kernel: Vec<f64> = (0..=2 * reach)
        .map(|i| {
            let x = i as f64 - reach as f64;
            (-0.5 * (x / sigma).powi(2)).exp()
        })
        .collect();
    let norm: f64 = kernel.iter().sum();
    let mut out = vec![0.0; count];
    for histogram in weights.chunks_mut(count) {
        if histogram.iter().all(|&w| w == 0.0) {
            continue;
        }
        out.iter_mut().for_each(|w| *w = 0.0);
        for (i, &w) in histogram.iter().enumerate() {
            if w == 0.0 {
                continue;
            }
            for (k, &g) in kernel.iter().enumerate() {
                let j = i as isize + k as isize - reach as isize;
                if (0..count as isize).contains(&j) {
                    out[j as usize] += w * g / norm;
                }
            }
        }
        histogram.copy_from_slice(&out);
    }
}

/// Turns each histogram of `count` bins in `weights` into the natural logarithm of a
/// probability density over its bins, mixed with a uniform share `uniform` so that no
/// bin is impossible; an empty histogram becomes uniform.
pub fn log_densities(weights: &mut [f64], count: usize, uniform: f64) {
    let floor = uniform / count as f64;
    for histogram in weights.chunks_mut(count) {
        let total: f64 = histogram.iter().sum();
        if total <= 0.0 {
            histogram.fill((1.0 / count as f64).ln());
            continue;
        }
        let scale = (1.0 - uniform) / total;
        for w in histogram.iter_mut() {
            *w = (*w * scale + floor).ln();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Nanos = 1_000;

    fn paper_bins() -> Bins {
        Bins::new(1.05, US, 2 * 3600 * 1_000_000_000)
    }

    #[test]
    fn bins_cover_one_microsecond_to_two_hours() {
        let bins = paper_bins();
        assert_eq!(bins.count(), 466);
        assert_eq!(bins.index(0), 0);
        assert_eq!(bins.index(-5 * US), 0);
        assert_eq!(bins.index(US), 0);
        assert_eq!(bins.index(1_049), 0);
        assert_eq!(bins.index(1_051), 1);
        assert_eq!(bins.index(1_000 * US), 141); // ln(1000)/ln(1.05) = 141.6
        assert_eq!(bins.index(i64::MAX), 465);
    }

    #[test]
    fn the_bin_table_agrees_with_the_logarithm() {
        let bins = paper_bins();
        let table = bins.table();
        let mut delay: Nanos = -5;
        while delay < 3 * 3600 * 1_000_000_000 {
            assert_eq!(table.index(delay), bins.index(delay), "delay {delay}");
            assert_eq!(
                table.index(delay + 1),
                bins.index(delay + 1),
                "delay {delay}"
            );
            delay = delay * 21 / 20 + 7;
        }
        assert_eq!(table.index(i64::MAX), bins.index(i64::MAX));
        assert_eq!(table.index(i64::MIN), 0);
    }

    #[test]
    fn the_bin_table_agrees_at_every_bin_edge_for_coarse_and_fine_bins() {
        for bins in [
            paper_bins(),
            Bins::new(1.001, 10, 1_000_000_000),
            Bins::new(2.0, 1, 1 << 40),
        ] {
            let table = bins.table();
            for &start in &table.starts {
                for delay in [start - 1, start, start + 1] {
                    assert_eq!(table.index(delay), bins.index(delay), "delay {delay}");
                }
            }
        }
    }

    #[test]
    fn scores_accumulate_per_triple_and_bin() {
        let mut board = Scoreboard::new(paper_bins());
        let (a, c, d) = (NodeId(0), NodeId(2), NodeId(3));
        board.add(a, c, 2_000 * US, 0.5);
        board.add(a, c, 2_001 * US, 0.5);
        board.add(a, d, 2_000 * US, 1.0);
        assert_eq!(board.score(a, c, 2_000 * US), 1.0);
        assert_eq!(board.score(a, c, 9_000 * US), 0.0);
        assert_eq!(board.score(a, d, 2_000 * US), 1.0);
        assert_eq!(board.score(d, a, 2_000 * US), 0.0);
        assert_eq!(board.histograms(), 2);
    }

    #[test]
    fn log_densities_sum_to_one_and_never_reach_zero() {
        let mut weights = vec![0.0, 3.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        log_densities(&mut weights, 4, 0.02);
        let first: f64 = weights[..4].iter().map(|w| w.exp()).sum();
        assert!((first - 1.0).abs() < 1e-12);
        assert!(weights[0].is_finite() && weights[1] > weights[2]);
        assert!((weights[4] - 0.25f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn smoothing_spreads_a_peak_and_keeps_its_centre_highest() {
        let bins = paper_bins();
        let mut board = Scoreboard::new(bins);
        let (a, c) = (NodeId(0), NodeId(1));
        board.add(a, c, 10_000 * US, 1.0);
        board.smooth(2.0);
        let peak = board.score(a, c, 10_000 * US);
        let near = board.score(a, c, 10_500 * US); // next bin
        let far = board.score(a, c, 20_000 * US); // 14 bins away, past 3σ
        assert!(peak > near && near > 0.0, "{peak} {near}");
        assert_eq!(far, 0.0);
        let total: f64 = (0..bins.count()).map(|k| board.weights[k]).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_bin_spans_its_width_or_the_tick_and_the_first_also_the_skew_window() {
        let bins = paper_bins();
        let spans: Vec<f64> = bins.ln_spans(1, 0).iter().map(|s| s.exp()).collect();
        // Bin k ≥ 1 holds [1 µs · 1.05^k, 1 µs · 1.05^(k+1)): 5% of its start wide.
        for k in [1, 100, 300] {
            let width = 1.05f64.powi(k as i32) * 0.05 * US as f64;
            assert!((spans[k] / width - 1.0).abs() < 1e-9, "bin {k}");
        }
        assert!((spans[0] - 1.05 * US as f64).abs() < 1e-6);
        // A millisecond tick: every bin narrower than 1 ms stands for 1 ms.
        let coarse: Vec<f64> = bins
            .ln_spans(1_000 * US, 0)
            .iter()
            .map(|s| s.exp())
            .collect();
        let narrow = bins.index(20 * 1_000 * US) - 1;
        assert!((coarse[narrow] - 1e6).abs() < 1e-3);
        assert_eq!(coarse[narrow + 2], spans[narrow + 2]);
        let skewed = bins.ln_spans(1, 30 * 1_000 * US)[0].exp();
        assert!((skewed - (30e6 + 1.05 * US as f64)).abs() < 1e-3);
    }
}
