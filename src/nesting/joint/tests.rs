//! The joint choice on small traces made to test one part of the model or search each.

use super::Reweighing;
use crate::nesting::{nest, Algorithm, NestOptions, Nesting};
use crate::trace::text::trace_from_str;
use crate::trace::Trace;

/// A seeded linear congruential generator of numbers in [0, 1): the same traces
/// on every platform, without a dependency.
fn unit_numbers(mut seed: u64) -> impl FnMut() -> f64 {
    move || {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        (seed >> 33) as f64 / (1u64 << 31) as f64
    }
}

/// Uniform numbers in [low, high) from [`unit_numbers`].
fn uniform_numbers(seed: u64) -> impl FnMut(f64, f64) -> f64 {
    let mut next = unit_numbers(seed);
    move |low, high| low + (high - low) * next()
}

/// The paper's choice and the joint choice on `trace`.
fn paper_and_joint(trace: &Trace) -> (Nesting, Nesting) {
    let with = |algorithm| {
        let options = NestOptions {
            algorithm,
            ..NestOptions::default()
        };
        nest(trace, &options).unwrap()
    };
    (with(Algorithm::Paper), with(Algorithm::Joint))
}

/// Lines at times in milliseconds, as a trace in time order.
fn as_trace(mut lines: Vec<(f64, String)>) -> String {
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    lines
        .iter()
        .map(|(at, line)| format!("{:.6} {line}\n", at / 1000.0))
        .collect()
}

/// The six lines of request `r` from A into B at `t` that calls C and D (each as (left,
/// returned)) and answers at `end`.
fn calling_c_and_d(
    r: u32,
    t: f64,
    (c, c_end): (f64, f64),
    (d, d_end): (f64, f64),
    end: f64,
) -> [(f64, String); 6] {
    [
        (t, format!("CALL A B p{r}")),
        (c, format!("CALL B C c{r}")),
        (c_end, format!("RET C B c{r}")),
        (d, format!("CALL B D d{r}")),
        (d_end, format!("RET D B d{r}")),
        (end, format!("RET B A p{r}")),
    ]
}

/// Requests into B every 1–5 ms (so up to three are open at once); each makes
/// calls to C and D in parallel 4 ms after it arrives and answers 6 ms after them.
fn overlapping_fan_out(requests: u32) -> String {
    let mut next = unit_numbers(12_345);
    let mut jitter = |scale: f64| (next() - 0.5) * scale;
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += 1.0 + 4.0 * (jitter(1.0) + 0.5);
        let c = t + 4.0 + jitter(0.2);
        let d = c + 0.2 + jitter(0.1);
        let (c_end, d_end) = (c + 1.0 + jitter(0.2), d + 1.0 + jitter(0.2));
        let end = c_end.max(d_end) + 5.0 + jitter(0.2);
        lines.extend(calling_c_and_d(r, t, (c, c_end), (d, d_end), end));
    }
    as_trace(lines)
}

/// Requests into B every 1–3 ms; each calls C after a wait of 1–8 ms, and D 50 µs
/// after C returns, which takes 1–6 ms; B answers 100 µs after D returns. Measured
/// from B's arrival, D's start is as spread as the two waits together: only its
/// sibling's return places it.
fn overlapping_sequences(requests: u32) -> String {
    let mut uniform = uniform_numbers(99);
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += uniform(1.0, 3.0);
        let c = t + uniform(1.0, 8.0);
        let c_end = c + uniform(1.0, 6.0);
        let d = c_end + 0.05 + uniform(-0.01, 0.01);
        let d_end = d + uniform(1.0, 3.0);
        let end = d_end + 0.1 + uniform(-0.02, 0.02);
        lines.extend(calling_c_and_d(r, t, (c, c_end), (d, d_end), end));
    }
    as_trace(lines)
}

/// Requests into B from A every 1–2 ms. One in three makes calls to C, D and E in
/// parallel, each 1–2.5 ms after it arrives and taking 0.5–1 ms, and answers 0.1 ms
/// after they all return; the others answer after 2–8 ms with no calls. Counted one
/// kind at a time, "C and D but no E" is as likely as "C, D and E"; as whole sets
/// it never happens.
fn all_or_none(requests: u32) -> String {
    let mut uniform = uniform_numbers(4_242);
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += uniform(1.0, 2.0);
        lines.push((t, format!("CALL A B p{r}")));
        if r % 3 != 2 {
            lines.push((t + uniform(2.0, 8.0), format!("RET B A p{r}")));
            continue;
        }
        let mut end: f64 = t;
        for child in ["C", "D", "E"] {
            let start = t + uniform(1.0, 2.5);
            let back = start + uniform(0.5, 1.0);
            end = end.max(back);
            let lower = child.to_lowercase();
            lines.push((start, format!("CALL B {child} {lower}{r}")));
            lines.push((back, format!("RET {child} B {lower}{r}")));
        }
        lines.push((end + 0.1 + uniform(-0.02, 0.02), format!("RET B A p{r}")));
    }
    as_trace(lines)
}

/// Requests into B every 0–8 ms, so that some 40 are open at once. Each calls C
/// after 45–55 ms, which answers in 9–11 ms; 45–55 ms after that it calls D, which
/// answers in 60–80 ms; B answers 9–11 ms after D. (The multi-tier trace's web
/// server, with AUTH as C and the application server as D.)
fn dense_two_steps(requests: u32) -> String {
    dense_two_steps_in_bursts(requests, requests)
}

/// [`dense_two_steps`], a second's pause after every `burst` requests.
pub(crate) fn dense_two_steps_in_bursts(requests: u32, burst: u32) -> String {
    let mut uniform = uniform_numbers(2_024);
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        if r > 0 && r % burst == 0 {
            t += 1000.0;
        }
        t += uniform(0.0, 8.0);
        let c = t + uniform(45.0, 55.0);
        let c_end = c + uniform(9.0, 11.0);
        let d = c_end + uniform(45.0, 55.0);
        let d_end = d + uniform(60.0, 80.0);
        let end = d_end + uniform(9.0, 11.0);
        lines.extend(calling_c_and_d(r, t, (c, c_end), (d, d_end), end));
    }
    as_trace(lines)
}

/// Dense requests into B from two callers, each making one to three calls among
/// C, D and E, one after another or two at once, with broad delays: many
/// candidates per child and many steps of every kind before the search settles.
fn tangled_requests(requests: u32) -> String {
    let mut uniform = uniform_numbers(77);
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += uniform(0.0, 2.0);
        let caller = if uniform(0.0, 1.0) < 0.5 { "A" } else { "Z" };
        lines.push((t, format!("CALL {caller} B p{r}")));
        let mut at = t + uniform(1.0, 6.0);
        let calls = 1 + (uniform(0.0, 3.0) as usize);
        for (i, kind) in ["C", "D", "E"].iter().take(calls).enumerate() {
            let back = at + uniform(2.0, 12.0);
            lines.push((at, format!("CALL B {kind} {kind}{r}")));
            lines.push((back, format!("RET {kind} B {kind}{r}")));
            at = if i == 0 && uniform(0.0, 1.0) < 0.4 {
                at + uniform(0.1, 0.5)
            } else {
                back + uniform(0.5, 4.0)
            };
        }
        lines.push((at + uniform(0.5, 3.0), format!("RET B {caller} p{r}")));
    }
    as_trace(lines)
}

#[test]
fn weighing_again_only_what_changed_chooses_as_weighing_everything_again() {
    // Dense enough for all three starts, each searching many rounds. (Weighing
    // steps from a parent that changed since as if it had not gives 296 children
    // other parents here; trusting a pair's gain after one of the two changed, 80.)
    let trace = trace_from_str(&tangled_requests(400));
    let narrow = paper_and_joint(&trace).1;
    let everything = NestOptions {
        reweighing: Reweighing::Everything,
        ..NestOptions::default()
    };
    let every = nest(&trace, &everything).unwrap();
    assert!(
        narrow.stats.mean_parallelism > 10.0,
        "{}",
        narrow.stats.mean_parallelism
    );
    assert_eq!(differ(&narrow.parent, &every.parent), 0);
    assert_eq!(differ(&narrow.confidence, &every.confidence), 0);
}

#[test]
fn dense_requests_do_not_hand_every_first_call_to_an_older_request() {
    let trace = trace_from_str(&dense_two_steps(1500));
    let (paper, joint) = paper_and_joint(&trace);
    let (paper_right, joint_right) = (right(&trace, &paper), right(&trace, &joint));
    assert!(
        paper.stats.mean_parallelism > 20.0,
        "{}",
        paper.stats.mean_parallelism
    );
    assert!(
        // 63.5% here; 0.4% from the greedy start alone, 0.6% for the paper.
        joint_right >= 0.55 && joint_right > paper_right + 0.4,
        "joint {joint_right}, paper {paper_right}"
    );
}

#[test]
fn a_service_that_calls_all_or_none_is_not_given_part_of_a_set() {
    let trace = trace_from_str(&all_or_none(900));
    let (paper, joint) = paper_and_joint(&trace);
    let (paper_right, joint_right) = (right(&trace, &paper), right(&trace, &joint));
    assert!(
        // 86.8% here (86.3% without sharing children out anew), 68.1% with the kinds
        // counted independently, 50.1% for the paper.
        joint_right >= 0.8 && joint_right > paper_right + 0.2,
        "joint {joint_right}, paper {paper_right}"
    );
}

#[test]
fn a_sequential_call_is_placed_by_its_siblings_return() {
    let trace = trace_from_str(&overlapping_sequences(400));
    let (paper, joint) = paper_and_joint(&trace);
    let (paper_right, joint_right) = (right(&trace, &paper), right(&trace, &joint));
    assert!(
        paper.stats.mean_parallelism > 2.0,
        "{}",
        paper.stats.mean_parallelism
    );
    assert!(
        // 98.0% here, 91.4% without the sequence's factors, 39.8% for the paper.
        joint_right >= 0.95 && joint_right > paper_right + 0.1,
        "joint {joint_right}, paper {paper_right}"
    );
}

/// How many places two choices differ in.
fn differ<T: PartialEq>(a: &[T], b: &[T]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x != y).count()
}

/// Fraction of the C and D calls given the request they belong to.
fn right(trace: &Trace, nesting: &Nesting) -> f64 {
    right_among(trace, nesting, |id| !id.starts_with('p'))
}

/// Fraction of the calls whose id `counts` that have their own request's call into
/// B (the same number after the letter) as parent.
fn right_among(trace: &Trace, nesting: &Nesting, counts: impl Fn(&str) -> bool) -> f64 {
    let id = |i: usize| trace.call_id_text(nesting.pairs[i].call_id);
    let calls: Vec<usize> = (0..nesting.pairs.len())
        .filter(|&i| counts(id(i)))
        .collect();
    let good = calls
        .iter()
        .filter(|&&i| {
            let parent = nesting.parent[i] as usize;
            parent < nesting.pairs.len() && id(parent)[1..] == id(i)[1..]
        })
        .count();
    good as f64 / calls.len() as f64
}

#[test]
fn overlapping_fan_out_is_untangled_where_the_paper_penalty_misleads() {
    let trace = trace_from_str(&overlapping_fan_out(400));
    let (paper, joint) = paper_and_joint(&trace);
    let (paper_right, joint_right) = (right(&trace, &paper), right(&trace, &joint));
    assert!(
        paper.stats.mean_parallelism > 1.5,
        "{}",
        paper.stats.mean_parallelism
    );
    assert!(
        joint_right >= 0.99 && joint_right > paper_right,
        "joint {joint_right}, paper {paper_right}"
    );
}

#[test]
fn a_skew_window_does_not_draw_calls_to_requests_that_arrived_after_them() {
    // The window admits parents that arrive up to 3 ms after a child leaves, all
    // with delays in the first bin; counted per bin rather than per unit of time,
    // that narrow bin drew children to them.
    let trace = trace_from_str(&overlapping_sequences(400));
    let with_window = |skew_window| {
        let options = NestOptions {
            skew_window,
            ..NestOptions::default()
        };
        right(&trace, &nest(&trace, &options).unwrap())
    };
    let (without, with) = (with_window(0), with_window(3_000_000));
    assert!(with >= without - 0.02, "with {with}, without {without}");
}

/// Requests into B every 0.5–3 ms; B calls C 1 ms after arriving, answers 0.5 ms
/// after C returns, and then, every other request, writes to D 4 ms (±0.5) after it
/// answered: a write-back, a call out that the answered call caused.
fn write_backs(requests: u32) -> String {
    let mut next = uniform_numbers(4_242);
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += next(0.5, 3.0);
        let c = t + next(0.8, 1.2);
        let c_end = c + next(0.5, 1.5);
        let end = c_end + next(0.4, 0.6);
        lines.extend([
            (t, format!("CALL A B p{r}")),
            (c, format!("CALL B C c{r}")),
            (c_end, format!("RET C B c{r}")),
            (end, format!("RET B A p{r}")),
        ]);
        if r % 2 == 0 {
            let d = end + next(3.5, 4.5);
            lines.extend([
                (d, format!("CALL B D d{r}")),
                (d + next(1.0, 3.0), format!("RET D B d{r}")),
            ]);
        }
    }
    as_trace(lines)
}

#[test]
fn a_write_back_after_the_answer_joins_its_request_only_with_an_async_window() {
    let trace = trace_from_str(&write_backs(800));
    // (share of the writes right, writes left roots, writes)
    let writes = |nesting: &Nesting| {
        let writes: Vec<usize> = (0..nesting.pairs.len())
            .filter(|&i| {
                trace
                    .call_id_text(nesting.pairs[i].call_id)
                    .starts_with('d')
            })
            .collect();
        let rooted = writes
            .iter()
            .filter(|&&i| nesting.parent[i] == crate::nesting::parents::NO_PARENT)
            .count();
        (right_calls_to(&trace, nesting, 'd'), rooted, writes.len())
    };
    let strict = nest(&trace, &NestOptions::default()).unwrap();
    let (right, _, all) = writes(&strict);
    assert_eq!(right, 0.0, "without a window, a root or another request's");
    let options = NestOptions {
        async_window: 20_000_000,
        ..NestOptions::default()
    };
    let with_window = nest(&trace, &options).unwrap();
    let (right, rooted, _) = writes(&with_window);
    let stats = &with_window.stats;
    assert_eq!(
        (stats.async_children + stats.async_left_roots) as usize,
        all,
        "every write-back was weighed"
    );
    assert_eq!(stats.async_left_roots as usize, rooted);
    // Every link kept is right: 47.3% of the 400 here, the ones timing sets apart
    // (the next request's answer is often within the write's 1 ms of spread), and
    // the rest stay roots rather than guess.
    let kept = 1.0 - rooted as f64 / all as f64;
    assert!(
        right >= 0.4 && (right - kept).abs() < 1e-9,
        "right {right}, kept {kept}"
    );
    // The synchronous calls to C keep their parents.
    assert!(right_calls_to(&trace, &with_window, 'c') >= 0.99);
}

#[test]
fn a_call_its_parent_did_not_wait_for_joins_its_request_only_with_an_async_window() {
    // Requests into B every 0.5–3 ms; B calls C after 0.5 ms, sends a log line to L
    // 0.2 ms after C returns and answers 0.3 ms later, without waiting for L, which
    // takes 3–6 ms: no call into B encloses the call to L.
    let mut next = uniform_numbers(77);
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..800 {
        t += next(0.5, 3.0);
        let c = t + next(0.4, 0.6);
        let c_end = c + next(0.5, 1.5);
        let l = c_end + next(0.15, 0.25);
        let end = l + next(0.25, 0.35);
        lines.extend([
            (t, format!("CALL A B p{r}")),
            (c, format!("CALL B C c{r}")),
            (c_end, format!("RET C B c{r}")),
            (l, format!("CALL B L l{r}")),
            (end, format!("RET B A p{r}")),
            (l + next(3.0, 6.0), format!("RET L B l{r}")),
        ]);
    }
    let trace = trace_from_str(&as_trace(lines));
    let strict = nest(&trace, &NestOptions::default()).unwrap();
    assert_eq!(right_calls_to(&trace, &strict, 'l'), 0.0);
    let options = NestOptions {
        async_window: 1_000_000,
        ..NestOptions::default()
    };
    let with_window = nest(&trace, &options).unwrap();
    // 100% here: the log line leaves 0.2 ms after its sibling returned.
    assert!(right_calls_to(&trace, &with_window, 'l') >= 0.95);
    assert!(right_calls_to(&trace, &with_window, 'c') >= 0.99);
}

/// Share of the calls whose id starts with `prefix` that have their own request's
/// call into B as parent.
fn right_calls_to(trace: &Trace, nesting: &Nesting, prefix: char) -> f64 {
    right_among(trace, nesting, |id| id.starts_with(prefix))
}

#[test]
fn children_of_a_lost_call_stay_roots_instead_of_joining_another_request() {
    // Every tenth request's call into B is lost: its calls to C and D have no
    // parent in the trace, and any parent given them is another request's.
    let text: String = overlapping_sequences(600)
        .lines()
        .filter(|line| {
            let id = line.rsplit(' ').next().unwrap();
            !(line.contains(" CALL A B ") && id[1..].parse::<u32>().unwrap() % 10 == 0)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let trace = trace_from_str(&text);
    let joint = nest(&trace, &NestOptions::default()).unwrap();
    let id = |i: usize| trace.call_id_text(joint.pairs[i].call_id);
    let (mut orphans, mut rooted, mut others, mut right) = (0, 0, 0, 0);
    for i in 0..joint.pairs.len() {
        let request: u32 = id(i)[1..].parse().unwrap();
        if id(i).starts_with('p') {
            continue;
        }
        let parent = joint.parent[i];
        if request.is_multiple_of(10) {
            orphans += 1;
            rooted += usize::from(parent == crate::nesting::parents::NO_PARENT);
        } else {
            others += 1;
            right += usize::from(
                parent != crate::nesting::parents::NO_PARENT
                    && id(parent as usize)[1..] == id(i)[1..],
            );
        }
    }
    let (rooted, right) = (rooted as f64 / orphans as f64, right as f64 / others as f64);
    // 94.2% and 99.0% here; without the choice of no parent, 1.7% and 99.1%.
    assert!(
        rooted >= 0.85 && right >= 0.98,
        "rooted {rooted}, right {right}"
    );
}

#[test]
fn confidence_is_a_margin_between_zero_and_one() {
    let trace = trace_from_str(&overlapping_fan_out(200));
    let n = nest(&trace, &NestOptions::default()).unwrap();
    assert!(n.confidence.iter().all(|c| (0.0..=1.0).contains(c)));
    // Roots have no candidate: nothing to doubt.
    for (i, &p) in n.parent.iter().enumerate() {
        if p == crate::nesting::parents::NO_PARENT {
            assert_eq!(n.confidence[i], 1.0);
        }
    }
    let mean = n.confidence.iter().map(|&c| f64::from(c)).sum::<f64>() / n.confidence.len() as f64;
    assert!(mean > 0.5, "mean confidence {mean}");
}

#[test]
fn the_same_trace_gives_the_same_choice() {
    let trace = trace_from_str(&overlapping_fan_out(150));
    let a = nest(&trace, &NestOptions::default()).unwrap();
    let b = nest(&trace, &NestOptions::default()).unwrap();
    assert_eq!(a.parent, b.parent);
    assert_eq!(a.confidence, b.confidence);
}

/// Every order of the multiset `actions`, each once.
fn orders(actions: &[u32]) -> Vec<Vec<u32>> {
    if actions.is_empty() {
        return vec![Vec::new()];
    }
    let mut distinct = actions.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut all = Vec::new();
    for first in distinct {
        let at = actions.iter().position(|&a| a == first).unwrap();
        let mut rest = actions.to_vec();
        rest.remove(at);
        for mut tail in orders(&rest) {
            tail.insert(0, first);
            all.push(tail);
        }
    }
    all
}

/// The chance of each order of a set, the answer where the chain allows it, under
/// a chain whose transitions depend on the action before.
fn chances_of_orders(set: &[(u32, u32)], answer_any_time: bool) -> Vec<f64> {
    const ANSWER: u32 = 9;
    // ln-weights of (previous, next), unnormalised on purpose: only ratios count.
    let weight = |previous: u32, next: u32| f64::from((previous * 7 + next * 3) % 5 + 1).ln();
    let mut actions: Vec<u32> = set
        .iter()
        .flat_map(|&(a, n)| std::iter::repeat_n(a, n as usize))
        .collect();
    if answer_any_time {
        actions.push(ANSWER);
    }
    orders(&actions)
        .into_iter()
        .map(|mut order| {
            if !answer_any_time {
                order.push(ANSWER);
            }
            let mut chain = super::likelihood::OrderGivenSet {
                remaining: set.iter().copied().chain([(ANSWER, 1)]).collect(),
                answer: ANSWER,
                answer_any_time,
            };
            let mut previous = 0;
            let mut ln = 0.0_f64;
            for action in order {
                ln += chain.next(action, |a| weight(previous, a));
                previous = action;
            }
            ln.exp()
        })
        .collect()
}

#[test]
fn the_orders_of_a_set_share_all_the_chance() {
    for answer_any_time in [false, true] {
        let chances = chances_of_orders(&[(1, 2), (2, 1), (3, 1)], answer_any_time);
        assert_eq!(chances.len(), if answer_any_time { 60 } else { 12 });
        let total: f64 = chances.iter().sum();
        assert!((total - 1.0).abs() < 1e-9, "total {total}");
        assert!(chances.iter().any(|&c| (c - chances[0]).abs() > 1e-6));
    }
}

#[test]
fn children_of_one_kind_have_one_order() {
    let chances = chances_of_orders(&[(4, 5)], false);
    assert_eq!(chances, vec![1.0]);
}

/// The joint choice on `trace` with the starts settled on the first `window` calls out
/// of each node.
/// `trace` nested with the starts settled on `window` children, without the pinned
/// start: on these dense traces it settles on the same answer with a window and
/// without, which would hide whether the window was used at all
/// ([`the_pinned_start_settles_a_window_as_well_as_everything`] checks it).
fn joint_with_window(trace: &Trace, window: usize) -> Nesting {
    let options = NestOptions {
        learn_window: window,
        pinned_start: false,
        ..NestOptions::default()
    };
    nest(trace, &options).unwrap()
}

#[test]
fn the_starts_for_saturation_settle_a_window_as_well_as_everything() {
    // Every request makes one call to C and one to D: hard EM's ends pile them up
    // (62% of calls right), the pinned start's do not, settled on all 3,000 children
    // or on a window of 500 and carried over the rest. Each kind made once per request,
    // requests a few milliseconds apart and C called 45 to 55 ms after arrival, the
    // start ordered by arrivals follows and its end is kept, likelier by 0.14 to 0.19
    // nats per child (75.5% of calls right, against 77.2% from the pinned end alone).
    let trace = trace_from_str(&dense_two_steps(1500));
    let right_with = |window: usize, pinned_start: bool| {
        let options = NestOptions {
            learn_window: window,
            pinned_start,
            ..NestOptions::default()
        };
        right(&trace, &nest(&trace, &options).unwrap())
    };
    let without = right_with(usize::MAX, false);
    let (whole, windowed) = (right_with(usize::MAX, true), right_with(500, true));
    assert!(
        whole > without + 0.1 && windowed >= whole - 0.01,
        "without the pinned start {without}, whole {whole}, windowed {windowed}"
    );
    // Handed on to a later segment, which settles that start alone.
    let options = NestOptions {
        learn_window: 500,
        ..NestOptions::default()
    };
    let everything = (crate::trace::Nanos::MIN, crate::trace::Nanos::MAX);
    let segment = |learned| crate::nesting::nest_core(&trace, &options, everything, learned);
    let (_, learned) = segment(Default::default()).unwrap();
    assert_eq!(learned.start_of("B"), Some(super::StartKind::Arrivals));
    let (carried, _) = segment(learned).unwrap();
    let carried = right(&trace, &carried);
    assert!(carried >= whole - 0.01, "carried {carried}, whole {whole}");
}

#[test]
fn a_window_as_large_as_the_node_settles_every_start_on_everything() {
    let trace = trace_from_str(&tangled_requests(400));
    let whole = joint_with_window(&trace, usize::MAX);
    let calls_out = whole.pairs.len();
    let windowed = joint_with_window(&trace, calls_out);
    assert_eq!(whole.parent, windowed.parent);
    assert_eq!(whole.confidence, windowed.confidence);
}

#[test]
fn an_end_carried_over_from_a_window_chooses_as_well_as_settling_everything() {
    // Dense enough for all three starts; the window holds a sixth of B's calls out,
    // and no instant after it is free of open requests: the end is carried over all.
    let trace = trace_from_str(&dense_two_steps(1500));
    window_chooses_as_well_as_settling_everything(&trace, 500);
}

#[test]
fn the_calls_after_a_quiet_instant_settle_apart_as_well_as_settling_everything() {
    // Bursts of requests with pauses between: the kept end is carried over the calls
    // before the pause nearest the middle, and those after it settle from its start.
    let trace = trace_from_str(&dense_two_steps_in_bursts(2400, 600));
    window_chooses_as_well_as_settling_everything(&trace, 500);
}

fn window_chooses_as_well_as_settling_everything(trace: &Trace, window: usize) {
    let whole = joint_with_window(trace, usize::MAX);
    let windowed = joint_with_window(trace, window);
    let (whole_right, windowed_right) = (right(trace, &whole), right(trace, &windowed));
    assert!(
        differ(&whole.parent, &windowed.parent) > 0,
        "the window was not used"
    );
    assert!(
        windowed_right >= whole_right - 0.01,
        "windowed {windowed_right}, whole {whole_right}"
    );
}

/// `trace` nested as one segment of itself, starting from `learned`, with the starts
/// settled on `window` children (without the pinned start, as [`joint_with_window`]).
fn as_a_segment(
    trace: &Trace,
    window: usize,
    learned: crate::nesting::Learned,
) -> (Nesting, crate::nesting::Learned) {
    let options = NestOptions {
        learn_window: window,
        pinned_start: false,
        ..NestOptions::default()
    };
    let everything = (crate::trace::Nanos::MIN, crate::trace::Nanos::MAX);
    crate::nesting::nest_core(trace, &options, everything, learned).unwrap()
}

#[test]
fn a_start_is_handed_on_only_where_it_won_on_a_full_window() {
    let trace = trace_from_str(&dense_two_steps(1500));
    // Compared on all of B's 3,000 children, fewer than a window: nothing to hand on.
    let (_, learned) = as_a_segment(&trace, usize::MAX, Default::default());
    assert_eq!(learned.nodes(), 0, "{learned:?}");
    // Compared on a window of 500: B's winner is handed on, and carried it stays.
    let (_, learned) = as_a_segment(&trace, 500, Default::default());
    assert!(learned.start_of("B").is_some(), "{learned:?}");
    assert_eq!(learned.nodes(), 1, "{learned:?}");
    let (_, learned_again) = as_a_segment(&trace, 500, learned.clone());
    assert_eq!(learned_again, learned);
}

#[test]
fn a_carried_start_settled_on_a_smaller_window_chooses_as_well() {
    let trace = trace_from_str(&dense_two_steps(1500));
    let (compared, learned) = as_a_segment(&trace, 500, Default::default());
    let (carried, _) = as_a_segment(&trace, 500, learned);
    assert!(
        differ(&compared.parent, &carried.parent) > 0,
        "the smaller window was not used"
    );
    let (compared_right, carried_right) = (right(&trace, &compared), right(&trace, &carried));
    assert!(
        carried_right >= compared_right - 0.01,
        "carried {carried_right}, compared {compared_right}"
    );
}

/// Requests from A into B that each call C once, a millisecond after they arrive, and
/// `pairs` pairs of requests 20 µs apart of which only one calls C: which one, the
/// times cannot tell.
fn one_call_for_two(pairs: u32) -> String {
    let mut next = uniform_numbers(43);
    let mut lines = Vec::new();
    for r in 0..300u32 {
        let t = f64::from(r) * 10.0;
        let c = t + next(0.9, 1.1);
        lines.push((t, format!("CALL A B p{r}")));
        lines.push((c, format!("CALL B C c{r}")));
        lines.push((c + 0.3, format!("RET C B c{r}")));
        lines.push((c + 0.8, format!("RET B A p{r}")));
    }
    for r in 0..pairs {
        let t = 3000.0 + f64::from(r) * 10.0;
        let c = t + 1.01;
        lines.push((t, format!("CALL A B q{r}")));
        lines.push((t + 0.02, format!("CALL A B s{r}")));
        lines.push((c, format!("CALL B C e{r}")));
        lines.push((c + 0.3, format!("RET C B e{r}")));
        lines.push((c + 0.8, format!("RET B A q{r}")));
        lines.push((c + 0.81, format!("RET B A s{r}")));
    }
    as_trace(lines)
}

#[test]
fn a_request_left_with_no_call_that_could_well_be_its_own_is_not_sure() {
    let trace = trace_from_str(&one_call_for_two(30));
    let (_, joint) = paper_and_joint(&trace);
    let childless = joint
        .patterns
        .iter()
        .find(|p| p.signature == "A->B")
        .expect("one of each pair is left without C");
    assert_eq!(childless.count(), 30);
    // Either request of a pair could have made the call: the one left without it is
    // about as likely to be wrong as the one given it.
    assert!(
        childless.sure() < 0.9,
        "A->B shown {:.3} sure",
        childless.sure()
    );
    let calling = joint
        .patterns
        .iter()
        .find(|p| p.signature == "A->B(C)")
        .unwrap();
    assert!(calling.sure() > 0.85, "A->B(C) shown {:.3}", calling.sure());
}

#[test]
fn pinned_counts_keep_the_mean_on_the_two_counts_beside_it() {
    // Learned from piles: most parents with none, a few with four.
    let mut shares = vec![0.7, 0.0, 0.0, 0.0, 0.3, 0.0];
    let mean = 1.2;
    super::model::pin(&mut shares, mean);
    let total: f64 = shares.iter().sum();
    let kept_mean: f64 = shares.iter().enumerate().map(|(n, s)| n as f64 * s).sum();
    assert!((total - 1.0).abs() < 1e-12, "{shares:?}");
    // Nine tenths on one and two (0.8 and 0.2 of it), a tenth as learned.
    assert!((shares[1] - 0.72).abs() < 1e-12 && (shares[2] - 0.18).abs() < 1e-12);
    assert!((shares[0] - 0.07).abs() < 1e-12 && (shares[4] - 0.03).abs() < 1e-12);
    assert!(
        (kept_mean - (0.9 * mean + 0.1 * 1.2)).abs() < 1e-12,
        "{kept_mean}"
    );
}

#[test]
fn counts_on_the_two_whole_numbers_beside_their_mean_cannot_be_narrowed() {
    use super::likelihood::narrowing_gain;
    // The shop's app: seven in eight requests make one cache call, one in eight two.
    assert_eq!(narrowing_gain(&[0.0, 70.0, 10.0, 0.0]), 0.0);
    assert_eq!(narrowing_gain(&[0.0, 0.0, 0.0]), 0.0);
    // Penalty-breaker: none, two or three, a third each (mean 5/3). Scored as their own
    // distribution, ln 3 per parent; as the narrowest (a third on one, two thirds on
    // two), the two-point entropy of 2/3.
    let third = 1.0f64 / 3.0;
    let narrowest = -(third * third.ln() + (1.0 - third) * (1.0 - third).ln());
    let gain = narrowing_gain(&[30.0, 0.0, 30.0, 30.0]);
    assert!(
        (gain - 90.0 * (3.0f64.ln() - narrowest)).abs() < 1e-9,
        "{gain}"
    );
    // Piles, as hard EM leaves them at saturation: half the parents with none, the rest
    // with one to five (mean 1.3).
    let piled = narrowing_gain(&[50.0, 20.0, 10.0, 0.0, 10.0, 10.0]);
    assert!(piled > 70.0, "{piled}");
    // Two piles in the proportions of the narrowest have its spread of shares: scored
    // each under its own distribution, neither is likelier, so the bound is nothing.
    assert!(narrowing_gain(&[75.0, 0.0, 0.0, 0.0, 0.0, 25.0]).abs() < 1e-9);
}

/// Requests from A into B, about one a millisecond, served first in, first out by
/// `workers` workers, each of which calls C once after a moment and, once C returned,
/// answers after up to `answer_ms` more (a proxy busy enough to pass answers on late).
fn fifo_proxy(requests: u32, workers: usize, answer_ms: f64) -> String {
    fifo_proxy_calling_twice(requests, workers, answer_ms, u32::MAX)
}

/// [`fifo_proxy`], with every `twice`-th request calling C a second time once its
/// first call returned.
fn fifo_proxy_calling_twice(requests: u32, workers: usize, answer_ms: f64, twice: u32) -> String {
    let mut next = uniform_numbers(4_242);
    let mut free = vec![0.0f64; workers];
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += next(0.2, 1.8);
        let (w, &at) = free
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .unwrap();
        let call = t.max(at) + next(0.05, 0.6);
        let mut back = call + next(2.0, 6.0);
        lines.push((call, format!("CALL B C c{r}")));
        lines.push((back, format!("RET C B c{r}")));
        if r % twice == twice - 1 {
            let again = back + next(0.05, 0.6);
            back = again + next(2.0, 6.0);
            lines.push((again, format!("CALL B C d{r}")));
            lines.push((back, format!("RET C B d{r}")));
        }
        let end = back + next(0.05, answer_ms);
        free[w] = back;
        lines.push((t, format!("CALL A B p{r}")));
        lines.push((end, format!("RET B A p{r}")));
    }
    as_trace(lines)
}

/// Four workers, a call to C of 2 to 6 ms and about a request a millisecond: requests
/// wait in the queue, every open request's delay since arrival looks alike, and the
/// late answers leave their order loose. The places of the requests among arrivals and
/// of their calls among calls out keep step: 67% of the calls go to their request with
/// the start ordered by arrivals, 11% without the starts for saturation (and 11% with
/// every other start but that one).
#[test]
fn places_among_arrivals_and_calls_out_keep_step_in_a_first_in_first_out_queue() {
    let trace = trace_from_str(&fifo_proxy(400, 4, 12.0));
    let with = |pinned_start| {
        let options = NestOptions {
            pinned_start,
            ..NestOptions::default()
        };
        right(&trace, &nest(&trace, &options).unwrap())
    };
    let (default, without) = (with(true), with(false));
    assert!(
        default > 0.6 && without < 0.2,
        "{default} with the starts for saturation, {without} without"
    );
}

#[test]
fn rank_bins_run_in_the_order_of_offsets_and_hold_as_many_as_they_say() {
    use super::calls::{ln_rank_width, rank_bin, RANK_BINS};
    let mut held = [0u32; RANK_BINS];
    let mut last = 0;
    for offset in -1024..=1024 {
        let bin = rank_bin(offset);
        assert!(bin >= last, "offset {offset} in bin {bin} after {last}");
        last = bin;
        held[bin] += 1;
    }
    assert_eq!(rank_bin(0), RANK_BINS / 2);
    assert_eq!(rank_bin(1 << 20), RANK_BINS - 1);
    assert_eq!(rank_bin(-(1 << 20)), 0);
    // Every bin but the two unbounded ones holds exactly as many offsets as its width.
    for (bin, &n) in held.iter().enumerate().skip(1).take(RANK_BINS - 2) {
        assert_eq!(f64::from(n), ln_rank_width(bin).exp().round(), "bin {bin}");
    }
}

/// Requests from A into B, about one every `gap_ms`, queued for `workers` workers that
/// each own one connection to C and one to D, as a servlet pool's workers do: the
/// worker that takes a request calls C, then D, then C again for one request in three,
/// each on its own connections, and answers. The connection a request came in on says
/// nothing of the worker (all arrive on one).
fn worker_pool(requests: u32, workers: usize, gap_ms: f64) -> String {
    let mut next = uniform_numbers(7_117);
    let mut free = vec![0.0f64; workers];
    let mut lines = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += next(0.5, 1.5) * gap_ms;
        let (w, &at) = free
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1))
            .unwrap();
        let mut now = t.max(at);
        let mut call =
            |callee: char, n: u32, now: &mut f64, next: &mut dyn FnMut(f64, f64) -> f64| {
                let left = *now + next(0.05, 0.5);
                let back = left + next(0.5, 3.0);
                let id = format!("tcp:w{w}>{callee}#{}{r}-{n}", callee.to_ascii_lowercase());
                lines.push((left, format!("CALL B {callee} {id}")));
                lines.push((back, format!("RET {callee} B {id}")));
                *now = back;
            };
        call('C', 0, &mut now, &mut next);
        call('D', 0, &mut now, &mut next);
        if next(0.0, 3.0) < 1.0 {
            call('C', 1, &mut now, &mut next);
        }
        let end = now + next(0.05, 0.5);
        free[w] = end;
        lines.push((t, format!("CALL A B tcp:a>b#p{r}")));
        lines.push((end, format!("RET B A tcp:a>b#p{r}")));
    }
    as_trace(lines)
}

/// The share of B's calls out given the request they belong to, in [`worker_pool`]'s
/// trace: the request's number follows the letter after `#` in both ids.
fn right_in_pool(trace: &Trace, nesting: &Nesting) -> f64 {
    let request = |i: usize| {
        let id = trace.call_id_text(nesting.pairs[i].call_id);
        let (_, call) = id.split_once('#').expect("a capture's id");
        call[1..].split('-').next().unwrap_or_default().to_string()
    };
    let children: Vec<usize> = (0..nesting.pairs.len())
        .filter(|&i| !trace.call_id_text(nesting.pairs[i].call_id).contains("#p"))
        .collect();
    let good = children
        .iter()
        .filter(|&&i| {
            let parent = nesting.parent[i] as usize;
            parent < nesting.pairs.len() && request(parent) == request(i)
        })
        .count();
    good as f64 / children.len() as f64
}

/// Twelve workers, busy most of the time: a call to C or D has several open requests
/// of like delays to choose from, but the calls of one request go out on one worker's
/// connections. Learned from the assignment, which connection follows which among a
/// request's calls out puts 98.5% of them with their request, against 82.7% from
/// timing alone.
#[test]
fn the_calls_of_one_request_keep_to_one_workers_connections() {
    let trace = trace_from_str(&worker_pool(1_000, 12, 0.6));
    let with = |connections| {
        let options = NestOptions {
            connections,
            ..NestOptions::default()
        };
        let nesting = nest(&trace, &options).unwrap();
        (
            right_in_pool(&trace, &nesting),
            nesting.stats.sibling_affinity_nodes,
        )
    };
    let ((kept, learned), (alone, _)) = (with(true), with(false));
    assert!(
        learned == 1 && kept > 0.95 && alone < 0.86,
        "{kept} of the calls right with connections ({learned} nodes learned how \
         they follow), {alone} without"
    );
}

/// Where a few requests call C twice, the calls' places among calls out drift from the
/// arrivals' by one at each of them, and the start ordered by arrivals is not tried:
/// 33 second calls among 2,033 (1.6%, within the 2% first allowed). What that costs
/// where the queue is first in, first out, as here: 8.3% of the calls right against
/// 50.4% with the start (69.0% where every request calls once); what it saves where it
/// is not, as on the shop's app at 128 clients: 24.7% of requests exact against 0.3%
/// (docs/tuning.md, `UNMATCHED_PLACES`).
#[test]
fn places_are_not_weighed_where_some_requests_call_twice() {
    let options = NestOptions {
        learn_window: 500,
        ..NestOptions::default()
    };
    let everything = (crate::trace::Nanos::MIN, crate::trace::Nanos::MAX);
    let kept = |twice| {
        let trace = trace_from_str(&fifo_proxy_calling_twice(2_000, 4, 12.0, twice));
        let (_, learned) =
            crate::nesting::nest_core(&trace, &options, everything, Default::default()).unwrap();
        learned.start_of("B")
    };
    let (once, sometimes_twice) = (kept(u32::MAX), kept(60));
    assert_eq!(once, Some(super::StartKind::Arrivals));
    assert_ne!(sometimes_twice, Some(super::StartKind::Arrivals));
}
