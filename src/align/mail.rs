//! Relays' clocks from the emails themselves. Mail carries no TCP segment seen at both
//! ends, but each email's Received headers are a chain of times written by successive
//! relays, in an order the headers fix: the relay that wrote a later header received
//! the email after the relay that wrote the one before it. So along every chain each
//! delay between consecutive headers, read on two relays' clocks, is the true delay
//! (never below zero) plus the later relay's offset minus the earlier one's. Owns the
//! estimate of each relay's offset from those delays, and turning the chains' times
//! ([`MailClocks::correct`]); reading the mbox and writing the hops into a trace are
//! [`crate::trace::mbox`]'s.
//!
//! The estimate: for every ordered pair of relays with at least [`MIN_PAIR_DELAYS`]
//! delays, the lower envelope (the [`ENVELOPE_QUANTILE`] quantile, so that one misdated
//! header moves nothing) bounds the difference of their offsets; offsets are then the
//! smallest corrections (their sum of absolute values, by linear programming) that
//! bring every envelope to zero or above, where leaving a pair's envelope below zero
//! costs its number of delays per second. A relay whose clock is behind all its
//! upstreams' is corrected once rather than each upstream; a relay with no evidence
//! against its clock keeps it (offset 0), since one-way delays cannot tell a slow
//! link from a fast clock.

use crate::trace::mbox::MailChain;
use crate::trace::Nanos;
use hashbrown::HashMap;
use serde::Serialize;

/// A pair of relays needs this many delays before its envelope counts.
pub const MIN_PAIR_DELAYS: usize = 5;

/// The quantile of a pair's delays taken as its lower envelope.
pub const ENVELOPE_QUANTILE: f64 = 0.05;

/// One relay's estimated clock.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelayClock {
    /// The relay's name (the `by` host of its headers).
    pub host: String,
    /// Its clock minus the consensus of the relays it exchanges mail with, ns; its
    /// times are corrected by subtracting it.
    pub offset_ns: Nanos,
    /// Pairs of relays with enough delays that include it.
    pub pairs: usize,
    /// Delays between consecutive headers with this relay at one end.
    pub delays: usize,
}

/// The relays' clocks estimated from a set of emails.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MailClocks {
    /// Relays whose clock was corrected (offset not zero), most delays first.
    pub corrected: Vec<RelayClock>,
    /// Relays in some pair with enough delays (the others keep their clocks: nothing
    /// to estimate from).
    pub relays_estimated: usize,
    /// Ordered pairs of relays with enough delays.
    pub pairs: usize,
    /// Delays between consecutive Received headers of one email (by different relays).
    pub delays: u64,
    /// Of them, below zero as read.
    pub negative_before: u64,
    /// Of them, below zero after the correction.
    pub negative_after: u64,
    #[serde(skip)]
    offsets: HashMap<String, Nanos>,
}

impl MailClocks {
    /// The offset of a relay's clock, ns (0 for a relay not corrected).
    pub fn offset(&self, host: &str) -> Nanos {
        self.offsets.get(host).copied().unwrap_or(0)
    }

    /// Turns every hop's time into the consensus clock.
    pub fn correct(&self, chains: &mut [MailChain]) {
        for chain in chains {
            for (_, by, time) in &mut chain.hops {
                *time = time.saturating_sub(self.offset(by));
            }
        }
    }
}

/// The delays between consecutive headers, per ordered pair of relays (earlier, later).
fn delays_by_pair(chains: &[MailChain]) -> HashMap<(&str, &str), Vec<Nanos>> {
    let mut pairs: HashMap<(&str, &str), Vec<Nanos>> = HashMap::new();
    for chain in chains {
        for step in chain.hops.windows(2) {
            let ((_, earlier, t0), (_, later, t1)) = (&step[0], &step[1]);
            // A relay handing mail to itself says nothing of its clock.
            if earlier != later {
                pairs
                    .entry((earlier.as_str(), later.as_str()))
                    .or_default()
                    .push(t1.saturating_sub(*t0));
            }
        }
    }
    pairs
}

/// Estimates every relay's offset from the emails' chains (oldest hop first).
pub fn estimate(chains: &[MailChain]) -> MailClocks {
    let by_pair = delays_by_pair(chains);
    // Sorted so that the program, and so its answer where several are as small, is the
    // same on every run.
    let mut pairs: Vec<(&str, &str, Nanos, usize)> = by_pair
        .iter()
        .filter(|(_, delays)| delays.len() >= MIN_PAIR_DELAYS)
        .map(|(&(a, b), delays)| {
            let mut sorted = delays.clone();
            sorted.sort_unstable();
            let at = ((sorted.len() as f64 * ENVELOPE_QUANTILE) as usize).min(sorted.len() - 1);
            (a, b, sorted[at], sorted.len())
        })
        .collect();
    pairs.sort_unstable();
    let mut relays: Vec<&str> = pairs.iter().flat_map(|p| [p.0, p.1]).collect();
    relays.sort_unstable();
    relays.dedup();
    let index: HashMap<&str, usize> = relays.iter().enumerate().map(|(i, r)| (*r, i)).collect();

    let seconds = solve(&relays, &index, &pairs);
    let mut clocks = MailClocks {
        relays_estimated: relays.len(),
        pairs: pairs.len(),
        ..MailClocks::default()
    };
    let mut involvement = vec![(0usize, 0usize); relays.len()];
    for &(a, b, _, n) in &pairs {
        for r in [a, b] {
            involvement[index[r]].0 += 1;
            involvement[index[r]].1 += n;
        }
    }
    for (i, relay) in relays.iter().enumerate() {
        // Header dates are whole seconds: so are the offsets worth stating. (The cast
        // saturates: dates centuries apart cannot overflow.)
        let offset = (seconds[i].round() * 1e9) as Nanos;
        if offset != 0 {
            clocks.offsets.insert((*relay).to_owned(), offset);
            clocks.corrected.push(RelayClock {
                host: (*relay).to_owned(),
                offset_ns: offset,
                pairs: involvement[i].0,
                delays: involvement[i].1,
            });
        }
    }
    clocks
        .corrected
        .sort_by(|a, b| b.delays.cmp(&a.delays).then_with(|| a.host.cmp(&b.host)));
    for ((earlier, later), delays) in &by_pair {
        let shift = clocks.offset(later).saturating_sub(clocks.offset(earlier));
        clocks.delays += delays.len() as u64;
        clocks.negative_before += delays.iter().filter(|&&d| d < 0).count() as u64;
        clocks.negative_after += delays
            .iter()
            .filter(|&&d| d.saturating_sub(shift) < 0)
            .count() as u64;
    }
    clocks
}

/// The offsets, in seconds: minimise Σ|offset| + Σ delays × shortfall, where a pair's
/// shortfall is how far its envelope stays below zero after the correction.
fn solve(
    relays: &[&str],
    index: &HashMap<&str, usize>,
    pairs: &[(&str, &str, Nanos, usize)],
) -> Vec<f64> {
    use microlp::{ComparisonOp, OptimizationDirection, Problem};
    if pairs.iter().all(|p| p.2 >= 0) {
        return vec![0.0; relays.len()];
    }
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let unbounded = (0.0, f64::INFINITY);
    // offset = ahead − behind, both at least zero, so that the sum of both is |offset|.
    let ahead: Vec<_> = relays
        .iter()
        .map(|_| problem.add_var(1.0, unbounded))
        .collect();
    let behind: Vec<_> = relays
        .iter()
        .map(|_| problem.add_var(1.0, unbounded))
        .collect();
    for &(earlier, later, envelope, n) in pairs {
        let (e, l) = (index[earlier], index[later]);
        let shortfall = problem.add_var(n as f64, unbounded);
        // later's offset − earlier's offset − shortfall ≤ envelope
        problem.add_constraint(
            [
                (ahead[l], 1.0),
                (behind[l], -1.0),
                (ahead[e], -1.0),
                (behind[e], 1.0),
                (shortfall, -1.0),
            ],
            ComparisonOp::Le,
            envelope as f64 / 1e9,
        );
    }
    match problem.solve().map(|outcome| outcome.into_solution()) {
        Ok(Ok(solution)) => (0..relays.len())
            .map(|i| solution[ahead[i]] - solution[behind[i]])
            .collect(),
        // Every constraint can be met by its shortfall, so the program is always
        // feasible and bounded below by zero; should the solver still fail, no relay is
        // corrected rather than a wrong correction made.
        _ => vec![0.0; relays.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Nanos = 1_000_000_000;

    fn chain(hops: &[(&str, &str, i64)]) -> MailChain {
        MailChain {
            truth: "t".into(),
            hops: hops
                .iter()
                .map(|(f, b, t)| ((*f).into(), (*b).into(), t * S))
                .collect(),
        }
    }

    #[test]
    fn a_relay_behind_all_its_upstreams_is_corrected_once() {
        // Three senders hand mail to hub; hub's clock is 200 s behind, so every delay
        // into it reads 200 s short; hub then hands it to mx 5 s later, as read.
        let mut chains = Vec::new();
        for (k, up) in ["a", "b", "c"].iter().enumerate() {
            for i in 0..10 {
                let t = 1000 * (k as i64 * 10 + i);
                chains.push(chain(&[
                    ("origin", up, t),
                    (up, "hub", t + 3 + i - 200),
                    ("hub", "mx", t + 3 + i - 200 + 5),
                ]));
            }
        }
        let clocks = estimate(&chains);
        // The shortest true delay into hub is 3 s: one-way delays prove 197 s of the 200.
        assert_eq!(clocks.offset("hub"), -197 * S);
        // mx is 5 s after hub as read: to stay after it, mx must be behind too.
        assert_eq!(clocks.offset("mx"), -192 * S);
        assert_eq!(clocks.offset("a"), 0);
        assert_eq!(clocks.negative_before, 30);
        assert_eq!(clocks.negative_after, 0);
        let mut fixed = chains.clone();
        clocks.correct(&mut fixed);
        assert!(fixed
            .iter()
            .all(|c| c.hops.windows(2).all(|w| w[1].2 >= w[0].2)));
    }

    #[test]
    fn clocks_with_no_evidence_against_them_are_kept() {
        let chains: Vec<MailChain> = (0..20)
            .map(|i| chain(&[("a", "b", i * 100), ("b", "c", i * 100 + 7)]))
            .collect();
        let clocks = estimate(&chains);
        assert!(clocks.corrected.is_empty());
        assert_eq!((clocks.delays, clocks.negative_before), (20, 0));
    }

    #[test]
    fn one_misdated_header_moves_no_clock() {
        let mut chains: Vec<MailChain> = (0..40)
            .map(|i| chain(&[("a", "b", i * 100), ("b", "c", i * 100 + 7)]))
            .collect();
        chains.push(chain(&[("a", "b", 5000), ("b", "c", 5000 - 3600)]));
        let clocks = estimate(&chains);
        assert!(clocks.corrected.is_empty(), "{:?}", clocks.corrected);
        assert_eq!(clocks.negative_after, 1);
    }

    #[test]
    fn pairs_with_too_few_delays_say_nothing() {
        let chains: Vec<MailChain> = (0..(MIN_PAIR_DELAYS as i64 - 1))
            .map(|i| chain(&[("a", "b", i * 100), ("b", "c", i * 100 - 60)]))
            .collect();
        let clocks = estimate(&chains);
        assert_eq!((clocks.pairs, clocks.corrected.len()), (0, 0));
        assert_eq!(clocks.negative_after, clocks.negative_before);
    }

    #[test]
    fn dates_centuries_apart_neither_overflow_nor_panic() {
        // A relay whose clock reads 1970 after one that read 2250: absurd, but a date
        // the reader accepts.
        let far = 8_800_000_000;
        let chains: Vec<MailChain> = (0..6)
            .map(|i| chain(&[("a", "b", far + i), ("b", "c", i)]))
            .collect();
        let mut fixed = chains.clone();
        let clocks = estimate(&chains);
        clocks.correct(&mut fixed);
        assert_eq!(clocks.negative_before, 6);
        assert_eq!(clocks.negative_after, 0);
    }
}
