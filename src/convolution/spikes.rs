//! Spike detection in a correlation (paper §5.2): a spike is the largest point of a run
//! above S standard deviations over the mean, provided it stands N deviations over the
//! mean; runs are separated by at least one point below S, and a run must end within
//! the correlation. Owns only that rule.

/// Indexes of the spikes of `c`, highest first.
pub fn find_spikes(c: &[f64], spike_sigma: f64, gap_sigma: f64) -> Vec<usize> {
    if c.is_empty() {
        return Vec::new();
    }
    let n = c.len() as f64;
    let mean = c.iter().sum::<f64>() / n;
    let sd = (c.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    if sd <= f64::EPSILON * mean.abs().max(1.0) {
        return Vec::new();
    }
    let (high, low) = (mean + spike_sigma * sd, mean + gap_sigma * sd);
    let mut spikes = Vec::new();
    let mut best: Option<usize> = None;
    for (i, &x) in c.iter().enumerate() {
        if x > low {
            if best.is_none_or(|b| x > c[b]) {
                best = Some(i);
            }
        } else if let Some(b) = best.take() {
            if c[b] > high {
                spikes.push(b);
            }
        }
    }
    // A run still above S at the last point has not been seen to come down: its peak
    // may lie beyond, at a delay longer than was asked for, and a coincidence of two
    // schedules lands there as readily as anywhere (easy-ham-1 at 360 s: cpu59's
    // deliveries "caused" dogma's own mail 21,614 s later, the last lag of 6 h; none
    // of those emails went there).
    spikes.sort_by(|&a, &b| c[b].total_cmp(&c[a]).then(a.cmp(&b)));
    spikes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separated_peaks_are_two_spikes_and_a_plateau_is_one() {
        let mut c = vec![1.0; 100];
        c[20] = 30.0;
        c[21] = 25.0; // same run as 20: not a spike of its own
        c[60] = 20.0;
        assert_eq!(find_spikes(&c, 4.0, 3.0), vec![20, 60]);
    }

    #[test]
    fn a_run_that_does_not_come_down_before_the_end_is_no_spike() {
        let mut c = vec![1.0; 100];
        c[40] = 30.0;
        c[98] = 20.0;
        c[99] = 25.0;
        assert_eq!(find_spikes(&c, 4.0, 3.0), vec![40]);
        c[99] = 1.0;
        assert_eq!(find_spikes(&c, 4.0, 3.0), vec![40, 98]);
    }

    #[test]
    fn a_flat_or_noisy_correlation_has_no_spike() {
        assert!(find_spikes(&[2.0; 50], 4.0, 3.0).is_empty());
        let noisy: Vec<f64> = (0..200).map(|i| ((i * 7919) % 13) as f64).collect();
        assert!(find_spikes(&noisy, 4.0, 3.0).is_empty());
    }
}
