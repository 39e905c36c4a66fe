//! Losing observations as a capture would (paper §7.5.5): at random, and through a
//! sniffer with a peak capture rate and a finite queue, which drops what arrives while
//! the queue is full, so bursts lose the most.

use crate::generate::Line;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// A sniffer that captures at most `rate` observations per second, buffering `queue`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sniffer {
    /// Peak capture rate, observations per second.
    pub rate: f64,
    /// Queue length (the paper used 64).
    pub queue: usize,
}

/// How many observations each model dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dropped {
    /// At random.
    pub random: u64,
    /// By the sniffer's full queue.
    pub sniffer: u64,
}

/// Drops each observation with probability `rate`, then passes the rest through the
/// sniffer, if any. `lines` must be in time order; it stays so.
pub fn apply(
    lines: &mut Vec<Line>,
    rate: f64,
    sniffer: Option<Sniffer>,
    rng: &mut ChaCha8Rng,
) -> Dropped {
    let mut dropped = Dropped::default();
    if rate > 0.0 {
        let before = lines.len();
        lines.retain(|_| !rng.gen_bool(rate));
        dropped.random = (before - lines.len()) as u64;
    }
    if let Some(s) = sniffer {
        let service = 1e9 / s.rate;
        let mut departures: VecDeque<f64> = VecDeque::with_capacity(s.queue);
        let mut last_departure = f64::MIN;
        let before = lines.len();
        lines.retain(|line| {
            let t = line.time as f64;
            while departures.front().is_some_and(|&d| d <= t) {
                departures.pop_front();
            }
            if departures.len() >= s.queue {
                return false;
            }
            last_departure = last_departure.max(t) + service;
            departures.push_back(last_departure);
            true
        });
        dropped.sniffer = (before - lines.len()) as u64;
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StepKind;
    use rand::SeedableRng;

    fn burst(times: &[i64]) -> Vec<Line> {
        times
            .iter()
            .map(|&time| Line {
                time,
                kind: StepKind::Message,
                received: false,
                from: 0,
                to: 1,
                call: None,
                tracelet: 0,
                instance: 0,
            })
            .collect()
    }

    #[test]
    fn a_burst_overflows_the_sniffer_queue() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // 10 observations at once, queue 4, 1 per ms: 4 kept, then one every ms.
        let mut lines = burst(&[0; 10]);
        let d = apply(
            &mut lines,
            0.0,
            Some(Sniffer {
                rate: 1000.0,
                queue: 4,
            }),
            &mut rng,
        );
        assert_eq!((lines.len(), d.sniffer), (4, 6));
        let mut spaced = burst(&(0..10).map(|i| i * 2_000_000).collect::<Vec<_>>());
        let d = apply(
            &mut spaced,
            0.0,
            Some(Sniffer {
                rate: 1000.0,
                queue: 4,
            }),
            &mut rng,
        );
        assert_eq!(d.sniffer, 0);
    }

    #[test]
    fn random_drops_follow_the_rate() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut lines = burst(&vec![0; 100_000]);
        let d = apply(&mut lines, 0.01, None, &mut rng);
        assert!((900..1100).contains(&d.random), "{}", d.random);
    }
}
