//! The joint parent choice against the paper's on maketrace's studies at high
//! parallelism (Figure 19), on traces made in-process: the joint choice must stay no
//! worse than the paper's on every seed, not only on the seed the accuracy study
//! tabulates.

mod support;

use blackbox::eval::paths;
use blackbox::nesting::{nest, nest_from, Algorithm, NestOptions};
use blackbox::trace::Trace;
use support::generated::generated;

/// The algorithm's (share of instances exactly right, share of instances in patterns
/// that do not exist).
fn exact_and_false_positive_rates(trace: &Trace, algorithm: Algorithm) -> (f64, f64) {
    let options = NestOptions {
        algorithm,
        ..NestOptions::default()
    };
    let inferred = nest(trace, &options).unwrap();
    let truth = paths::ground_truth(trace, &options).unwrap();
    let scores = paths::evaluate(trace, &inferred, &truth, 1);
    (
        scores.instances_exact as f64 / scores.instances.truth.max(1) as f64,
        scores.instances.false_positives as f64 / scores.instances.inferred.max(1) as f64,
    )
}

/// The share of instances the algorithm puts in patterns that do not exist.
fn false_positive_rate(trace: &Trace, algorithm: Algorithm) -> f64 {
    exact_and_false_positive_rates(trace, algorithm).1
}

/// Penalty-breaker's parents call C zero, two or three times, one after another. At ×4
/// with seed 14, soft EM's start ended with most parents given no child and a few given
/// up to twelve, and it won the choice of start because the Markov chain, free to stop,
/// found those sequences more predictable: 44.2% of instances in false patterns against
/// the paper's 18.8%. Compared with each parent's order scored given its set, the
/// greedy start's end (2.2%) is kept.
#[test]
fn piling_children_onto_few_parents_does_not_win_the_choice_of_start() {
    let trace = generated("penalty-breaker", 4.0, 40_000, 14);
    let paper = false_positive_rate(&trace, Algorithm::Paper);
    let joint = false_positive_rate(&trace, Algorithm::Joint);
    eprintln!("penalty-breaker ×4, seed 14: false positives paper {paper:.3}, joint {joint:.3}");
    assert!(
        joint < paper / 2.0,
        "joint {joint:.3} should be well under the paper's {paper:.3}"
    );
}

/// Multi-tier at ×8: most of each child's candidates are wrong, and hard EM from the
/// greedy answer learned delay densities broad enough to keep its wrong links, parents
/// with two AUTH calls among them. The robust start learns each density from the
/// delays that fit it best, and its end is likelier. Here 125 of 1,500 instances were
/// exactly right without it (45.3% in false patterns), 230 with it (32.7%).
#[test]
fn broad_densities_learned_from_a_mostly_wrong_start_do_not_hold_its_links() {
    let trace = generated("multitier", 8.0, 12_000, 11);
    let (exact, false_positives) = exact_and_false_positive_rates(&trace, Algorithm::Joint);
    eprintln!("multi-tier ×8, seed 11: exact {exact:.3}, false positives {false_positives:.3}");
    assert!(
        exact > 0.12 && false_positives < 0.4,
        "exact {exact:.3}, false positives {false_positives:.3}"
    );
}

/// `eval --start-from-truth` runs the same search from the true parents. At ×4 on
/// multi-tier, where most of each child's candidates are wrong, the model learned from
/// the truth keeps far more of it than the one hard EM learns from the greedy answer
/// (here 1,371 instances exactly right against 1,133), and the search still runs: it
/// moves calls away from the truth where the model prefers another parent, so the
/// truth is not simply handed back.
#[test]
fn the_search_started_from_the_truth_keeps_more_of_it_but_still_searches() {
    let trace = generated("multitier", 4.0, 20_000, 11);
    let options = NestOptions::default();
    let truth = paths::ground_truth(&trace, &options).unwrap();
    let exact = |nesting| paths::evaluate(&trace, nesting, &truth, 1).instances_exact;
    let from_greedy = nest(&trace, &options).unwrap();
    let from_truth = nest_from(&trace, &options, &|pairs| {
        assert_eq!(pairs.len(), truth.pairs.len());
        truth.parent.clone()
    })
    .unwrap();
    let right = |nesting: &blackbox::nesting::Nesting| {
        nesting
            .parent
            .iter()
            .zip(&truth.parent)
            .filter(|(a, b)| a == b)
            .count()
    };
    let (greedy, started) = (exact(&from_greedy), exact(&from_truth));
    eprintln!(
        "multi-tier ×4, seed 11: exactly right from the greedy answer {greedy}, from the truth {started}; calls kept {} of {}",
        right(&from_truth),
        truth.parent.len()
    );
    assert!(
        started > greedy,
        "from the truth {started}, from greedy {greedy}"
    );
    assert!(right(&from_truth) < truth.parent.len());
}

/// Share of `trace`'s requests inferred exactly, with or without the pinned start.
fn exact(trace: &Trace, pinned_start: bool) -> f64 {
    let options = NestOptions {
        pinned_start,
        ..NestOptions::default()
    };
    let inferred = nest(trace, &options).unwrap();
    let truth = paths::ground_truth(trace, &options).unwrap();
    let scores = paths::evaluate(trace, &inferred, &truth, 1);
    scores.instances_exact as f64 / scores.instances.truth.max(1) as f64
}

/// The shop at 80 clients (×2): app serves about 17 requests at once, each making one
/// or two cache calls and at most one db call. Hard EM learned its counts from its own
/// answers and settled on piles: most requests given an app that called nothing, a few
/// one that made seven cache calls (0.0% of requests exactly right at seed 3 without
/// the pinned start, against 62.8% from the truth). Its piles make counts vary far more
/// than their means need, so the pinned start (counts pinned, moves of whole kinds, the
/// event each call follows) is tried, and keeps it whole.
#[test]
fn a_saturated_service_does_not_pile_calls_onto_a_few_requests() {
    let trace = generated("shop", 2.0, 20_000, 3);
    let (without, default) = (exact(&trace, false), exact(&trace, true));
    eprintln!(
        "shop ×2, seed 3: exactly right {default:.3} by default, {without:.3} without the pinned start"
    );
    assert!(
        default >= 0.45 && default > without + 0.2,
        "default {default:.3}, without the pinned start {without:.3}"
    );
}

/// Penalty-breaker at ×8: B's requests make none, two or three calls to C. The pinned
/// start's end, C's calls held to one or two per request, fitted its delays to itself
/// and won as a whole (by 0.107 nats per child at 40,000 messages), leaving 11.2% of requests
/// exactly right against 40.5%; it does not win in its counts, so it is not kept.
#[test]
fn a_service_whose_counts_vary_keeps_them_under_load() {
    let trace = generated("penalty-breaker", 8.0, 16_000, 12);
    let (without, default) = (exact(&trace, false), exact(&trace, true));
    assert!(
        default >= 0.35 && default >= without - 0.01,
        "default {default:.3}, without the pinned start {without:.3}"
    );
}

#[test]
fn a_start_is_refused_with_the_papers_choice() {
    let trace = generated("multitier", 1.0, 2_000, 11);
    let options = NestOptions {
        algorithm: Algorithm::Paper,
        ..NestOptions::default()
    };
    let refused = nest_from(&trace, &options, &|pairs| vec![0; pairs.len()]);
    assert!(refused.is_err());
}
