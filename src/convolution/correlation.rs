//! Sparse message signals and their cross-correlation over a bounded window of lags
//! (paper §5.2, §5.2.1). Owns the discretisation (√count per quantum) and the blocked
//! real-to-complex FFT; which signals to correlate is the caller's.
//!
//! A trace of 10⁸ quanta is mostly empty quanta, and causal delays are far shorter than
//! the trace. So a signal is kept as its non-empty quanta, the lag window is bounded
//! (±L), and the correlation is summed over blocks of the first signal, each an FFT of
//! about 4L points: blocks where the first signal is silent are skipped, so the cost
//! grows with the busy part of the trace times log L, never with the trace length times
//! log of it, and nothing wraps around.

use crate::trace::Nanos;
use rayon::prelude::*;
use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use std::sync::Arc;

/// A signal: the square root of the number of messages in each non-empty quantum, as
/// (quantum index from the trace's origin, value), in index order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Signal {
    /// Non-empty quanta.
    pub points: Vec<(i64, f64)>,
}

impl Signal {
    /// The signal of message times (any order).
    pub fn from_times(times: &[Nanos], origin: Nanos, quantum: Nanos) -> Signal {
        let mut quanta: Vec<i64> = times
            .iter()
            .map(|&t| (t - origin).div_euclid(quantum))
            .collect();
        quanta.sort_unstable();
        let mut points = Vec::new();
        let mut i = 0;
        while i < quanta.len() {
            let mut j = i;
            while j < quanta.len() && quanta[j] == quanta[i] {
                j += 1;
            }
            points.push((quanta[i], ((j - i) as f64).sqrt()));
            i = j;
        }
        Signal { points }
    }
}

/// Blocks summed by one task before results are combined, in a fixed order so that the
/// floating-point sum (and so every spike) is the same on every run.
const BLOCKS_PER_TASK: usize = 64;

/// Correlates signals for lags −L..=L with one FFT size.
pub struct Correlator {
    max_lag: usize,
    block: usize,
    len: usize,
    forward: Arc<dyn RealToComplex<f64>>,
    inverse: Arc<dyn ComplexToReal<f64>>,
}

impl Correlator {
    /// A correlator for lags up to `max_lag` quanta either way.
    pub fn new(max_lag: usize) -> Self {
        let len = (4 * max_lag + 4).next_power_of_two().max(256);
        let mut planner = RealFftPlanner::<f64>::new();
        Correlator {
            max_lag,
            block: len - 2 * max_lag,
            len,
            forward: planner.plan_fft_forward(len),
            inverse: planner.plan_fft_inverse(len),
        }
    }

    /// `C[m] = Σ_t s1(t)·s2(t + m − L)` for `m` in `0..=2L`: the lag `d = m − L` at which
    /// copies of `s1` appear in `s2`.
    pub fn correlate(&self, s1: &Signal, s2: &Signal) -> Vec<f64> {
        let lags = 2 * self.max_lag + 1;
        // Runs of s1's points by block.
        let mut blocks: Vec<(i64, usize, usize)> = Vec::new();
        for (i, &(t, _)) in s1.points.iter().enumerate() {
            let b = t.div_euclid(self.block as i64);
            match blocks.last_mut() {
                Some((last, _, end)) if *last == b => *end = i + 1,
                _ => blocks.push((b, i, i + 1)),
            }
        }
        let partials: Vec<Vec<f64>> = blocks
            .par_chunks(BLOCKS_PER_TASK)
            .map(|chunk| {
                let mut work = Work::new(self);
                let mut sum = vec![0.0; lags];
                for &(b, start, end) in chunk {
                    self.block_into(&s1.points[start..end], b, s2, &mut work, &mut sum);
                }
                sum
            })
            .collect();
        let mut total = vec![0.0; lags];
        for partial in partials {
            for (t, p) in total.iter_mut().zip(partial) {
                *t += p;
            }
        }
        total
    }

    fn block_into(&self, s1: &[(i64, f64)], b: i64, s2: &Signal, work: &mut Work, sum: &mut [f64]) {
        let block_start = b * self.block as i64;
        let window_start = block_start - self.max_lag as i64;
        let window_end = window_start + self.len as i64;
        let from = s2.points.partition_point(|&(t, _)| t < window_start);
        let to = s2.points.partition_point(|&(t, _)| t < window_end);
        if from == to {
            return;
        }
        work.a.iter_mut().for_each(|x| *x = 0.0);
        work.c.iter_mut().for_each(|x| *x = 0.0);
        for &(t, v) in s1 {
            work.a[(t - block_start) as usize] = v;
        }
        for &(t, v) in &s2.points[from..to] {
            work.c[(t - window_start) as usize] = v;
        }
        self.forward
            .process_with_scratch(&mut work.a, &mut work.fa, &mut work.scratch)
            .expect("buffers sized by the plan");
        self.forward
            .process_with_scratch(&mut work.c, &mut work.fc, &mut work.scratch)
            .expect("buffers sized by the plan");
        for (x, y) in work.fa.iter_mut().zip(&work.fc) {
            *x = x.conj() * y;
        }
        // A real signal's spectrum is real at DC and Nyquist; rounding must not say otherwise.
        let last = work.fa.len() - 1;
        work.fa[0].im = 0.0;
        work.fa[last].im = 0.0;
        self.inverse
            .process_with_scratch(&mut work.fa, &mut work.out, &mut work.scratch)
            .expect("buffers sized by the plan");
        let scale = 1.0 / self.len as f64;
        for (s, r) in sum.iter_mut().zip(&work.out) {
            *s += r * scale;
        }
    }
}

/// Buffers one task reuses across its blocks.
struct Work {
    a: Vec<f64>,
    c: Vec<f64>,
    fa: Vec<Complex<f64>>,
    fc: Vec<Complex<f64>>,
    out: Vec<f64>,
    scratch: Vec<Complex<f64>>,
}

impl Work {
    fn new(c: &Correlator) -> Self {
        let scratch = c.forward.get_scratch_len().max(c.inverse.get_scratch_len());
        Work {
            a: c.forward.make_input_vec(),
            c: c.forward.make_input_vec(),
            fa: c.forward.make_output_vec(),
            fc: c.forward.make_output_vec(),
            out: c.inverse.make_output_vec(),
            scratch: vec![Complex::default(); scratch],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, summed directly.
    fn direct(s1: &Signal, s2: &Signal, max_lag: i64) -> Vec<f64> {
        (-max_lag..=max_lag)
            .map(|d| {
                s1.points
                    .iter()
                    .map(|&(t, v)| {
                        s2.points
                            .iter()
                            .find(|p| p.0 == t + d)
                            .map_or(0.0, |p| p.1 * v)
                    })
                    .sum()
            })
            .collect()
    }

    #[test]
    fn signals_hold_the_square_root_of_counts() {
        let s = Signal::from_times(&[0, 5, 9, 25, 31, 31, 31, 31], 0, 10);
        assert_eq!(s.points, vec![(0, 3f64.sqrt()), (2, 1.0), (3, 2.0)]);
    }

    #[test]
    fn blocked_fft_correlation_equals_the_definition() {
        // Sparse points spread over many blocks, including ones where s2 is silent.
        let s1 = Signal {
            points: (0..200)
                .map(|i| (i * 37 % 5000, 1.0 + (i % 3) as f64))
                .collect::<std::collections::BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        };
        let s2 = Signal {
            points: s1
                .points
                .iter()
                .filter(|p| p.0 % 2 == 0)
                .map(|&(t, v)| (t + 7, v * 0.5))
                .collect(),
        };
        for max_lag in [3usize, 10, 40] {
            let c = Correlator::new(max_lag);
            let fast = c.correlate(&s1, &s2);
            let slow = direct(&s1, &s2, max_lag as i64);
            for (f, s) in fast.iter().zip(&slow) {
                assert!((f - s).abs() < 1e-9, "lag window {max_lag}: {f} vs {s}");
            }
        }
    }

    #[test]
    fn a_shifted_copy_peaks_at_its_shift() {
        let times: Vec<Nanos> = (0..500).map(|i| i * 1_000 + (i * i) % 700).collect();
        let shifted: Vec<Nanos> = times.iter().map(|t| t + 30 * 100).collect();
        let (s1, s2) = (
            Signal::from_times(&times, 0, 100),
            Signal::from_times(&shifted, 0, 100),
        );
        let c = Correlator::new(50).correlate(&s1, &s2);
        let best = (0..c.len()).max_by(|&a, &b| c[a].total_cmp(&c[b])).unwrap();
        assert_eq!(best as i64 - 50, 30);
    }
}
