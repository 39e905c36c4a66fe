//! Properties of the nesting algorithm over generated traces.

use blackbox::nesting::{nest, parents::NO_PARENT, NestOptions};
use blackbox::trace::{text, TraceBuilder};
use proptest::prelude::*;
use rand::{seq::SliceRandom, Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::path::Path;

/// One generated call: caller, callee, id, and the id of its true parent.
struct Truth {
    parent: Option<String>,
}

struct Generator {
    rng: ChaCha8Rng,
    lines: Vec<(i64, String)>,
    truth: HashMap<String, Truth>,
    next_id: u64,
    two_ended: bool,
}

impl Generator {
    /// Emits a call from `caller` into `callee` sent at `t`, with the callee's subtree
    /// drawn from `pool` (node names not yet on this instance). Returns the time the
    /// reply reaches the caller.
    fn call(
        &mut self,
        caller: &str,
        callee: &str,
        parent: Option<String>,
        t: i64,
        pool: &mut Vec<String>,
        budget: &mut usize,
    ) -> i64 {
        let id = format!("c{}", self.next_id);
        self.next_id += 1;
        let net = if self.two_ended {
            self.rng.gen_range(0..50)
        } else {
            0
        };
        let arrive = t + net;
        let mut now = arrive + self.rng.gen_range(0..20);
        let mut parallel_end = now;
        let children = if *budget == 0 || pool.is_empty() {
            0
        } else {
            self.rng.gen_range(0..=pool.len().min(3))
        };
        for _ in 0..children {
            if *budget == 0 {
                break;
            }
            *budget -= 1;
            let callee_of_child = pool.pop().expect("pool is not empty");
            let parallel = self.rng.gen_bool(0.3);
            let start = if parallel { now } else { parallel_end.max(now) };
            let end = self.call(
                callee,
                &callee_of_child,
                Some(id.clone()),
                start,
                pool,
                budget,
            );
            parallel_end = parallel_end.max(end);
            now = start + self.rng.gen_range(0..5);
        }
        let reply = parallel_end.max(now) + self.rng.gen_range(0..20);
        let back = reply + net;
        self.emit(t, "CALL_SENT", caller, callee, &id);
        self.emit(reply, "RET_SENT", callee, caller, &id);
        if self.two_ended {
            self.emit(arrive, "CALL_RECV", caller, callee, &id);
            self.emit(back, "RET_RECV", callee, caller, &id);
        }
        self.truth.insert(id, Truth { parent });
        back
    }

    fn emit(&mut self, t: i64, op: &str, from: &str, to: &str, id: &str) {
        self.lines
            .push((t, format!("0.{t:09} {op} {from} {to} {id}\n")));
    }
}

/// Builds a trace of `instances` path instances laid end to end, each a random tree in
/// which no node is called twice (so an instance alone never offers a call two parents).
fn sequential_instances(
    seed: u64,
    instances: usize,
    two_ended: bool,
) -> (String, HashMap<String, Truth>) {
    let mut g = Generator {
        rng: ChaCha8Rng::seed_from_u64(seed),
        lines: Vec::new(),
        truth: HashMap::new(),
        next_id: 0,
        two_ended,
    };
    let mut t = 1_000;
    for _ in 0..instances {
        let mut pool: Vec<String> = (0..8).map(|i| format!("n{i}")).collect();
        pool.shuffle(&mut g.rng);
        let root = pool.pop().unwrap();
        let mut budget = g.rng.gen_range(0..7);
        let end = g.call("client", &root, None, t, &mut pool, &mut budget);
        t = end + g.rng.gen_range(1..30);
    }
    g.lines.shuffle(&mut g.rng); // input need not be sorted
    let text = g.lines.into_iter().map(|(_, l)| l).collect();
    (text, g.truth)
}

fn check_exact(text: &str, truth: &HashMap<String, Truth>) -> Result<(), TestCaseError> {
    let mut builder = TraceBuilder::new();
    text::read(Path::new("generated"), text.as_bytes(), &mut builder).unwrap();
    let trace = builder.finish();
    let nesting = nest(&trace, &NestOptions::default()).unwrap();
    prop_assert_eq!(nesting.pairs.len(), truth.len());
    for (i, pair) in nesting.pairs.iter().enumerate() {
        let id = trace.call_id_text(pair.call_id);
        let inferred = match nesting.parent[i] {
            NO_PARENT => None,
            p => Some(
                trace
                    .call_id_text(nesting.pairs[p as usize].call_id)
                    .to_owned(),
            ),
        };
        prop_assert_eq!(&inferred, &truth[id].parent, "call {}", id);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn non_overlapping_instances_are_inferred_exactly(seed in any::<u64>(), instances in 1usize..40) {
        let (text, truth) = sequential_instances(seed, instances, false);
        check_exact(&text, &truth)?;
    }

    #[test]
    fn non_overlapping_two_ended_instances_are_inferred_exactly(seed in any::<u64>(), instances in 1usize..40) {
        let (text, truth) = sequential_instances(seed, instances, true);
        check_exact(&text, &truth)?;
    }

    #[test]
    fn text_round_trip_is_exact(seed in any::<u64>(), instances in 1usize..20) {
        let (text, _) = sequential_instances(seed, instances, true);
        let mut builder = TraceBuilder::new();
        text::read(Path::new("generated"), text.as_bytes(), &mut builder).unwrap();
        let trace = builder.finish();
        let mut written = Vec::new();
        text::write(&trace, &mut written).unwrap();
        let mut again = TraceBuilder::new();
        text::read(Path::new("written"), &written[..], &mut again).unwrap();
        let again = again.finish();
        prop_assert_eq!(trace.messages.len(), again.messages.len());
        for (a, b) in trace.messages.iter().zip(&again.messages) {
            prop_assert_eq!((a.sent(), a.received(), a.kind()), (b.sent(), b.received(), b.kind()));
            prop_assert_eq!(trace.call_id_text(a.call_id()), again.call_id_text(b.call_id()));
        }
    }
}
