//! End-to-end tests of `blackbox eval`.

mod support;

use predicates::prelude::*;
use support::{blackbox, golden, written_and_stdout, written_by};

/// Sequential requests: the algorithm cannot go wrong, so eval must report no error.
const SEQUENTIAL: &str = "1 CALL A B 1 r1\n3 CALL B C 2 r1\n5 RET C B 2 r1\n7 CALL B D 3 r1\n9 RET D B 3 r1\n11 RET B A 1 r1\n\
                          20 CALL A B 4 r2\n21 CALL B C 5 r2\n22 RET C B 5 r2\n23 RET B A 4 r2\n";

/// A temporary directory holding [`SEQUENTIAL`] as `t.trace`, and that file's path.
fn sequential_trace() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    std::fs::write(&trace, SEQUENTIAL).unwrap();
    (dir, trace)
}

#[test]
fn a_perfect_inference_reports_zero_errors() {
    let (_dir, trace) = sequential_trace();
    let (json, stdout) = written_and_stdout(&["eval", "-q", trace.to_str().unwrap()], "--json");
    assert!(
        stdout.contains("instances inferred exactly: 2 of 2 (100.0%)"),
        "{stdout}"
    );
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    for kind in ["patterns", "instances", "messages"] {
        assert_eq!(doc["paths"][kind]["false_positives"], 0, "{kind}");
        assert_eq!(doc["paths"][kind]["false_negatives"], 0, "{kind}");
    }
    assert_eq!(doc["paths"]["latency"][0]["worst"], 0.0);
}

#[test]
fn planted_errors_in_a_truth_file_are_counted_exactly() {
    let (dir, trace) = sequential_trace();
    let right = written_by(&["nest", "-q", trace.to_str().unwrap()], "--assignments");
    let truth = dir.path().join("truth.tsv");
    // Scores the trace against `parents` as its truth file.
    let scored_against = |parents: &str| {
        std::fs::write(&truth, parents).unwrap();
        blackbox()
            .args(["eval", "-q", "--truth"])
            .args([&truth, &trace])
            .assert()
            .success()
    };
    scored_against(&right).stdout(
        predicate::str::contains("calls with their true parent: 5 of 5 (100.00%)")
            .and(predicate::str::contains("2 of 2 (100.00%)")),
    );
    // Plant two errors: C of request 2 and D of request 1 are said to belong elsewhere.
    let planted = right
        .replace("B\tC\t5\t21.000000\tA\tB\t4", "B\tC\t5\t21.000000\tA\tB\t1")
        .replace("B\tD\t3\t7.000000\tA\tB\t1", "B\tD\t3\t7.000000\t-\t-\t-");
    assert_ne!(planted, right);
    scored_against(&planted).stdout(
        predicate::str::contains("calls with their true parent: 3 of 5 (60.00%)")
            .and(predicate::str::contains("0 of 3 (0.00%)")),
    );
}

#[test]
fn a_trace_without_truth_column_is_refused_clearly() {
    blackbox()
        .args(["eval", "tests/data/figure2.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "6 of 6 messages have no truth column",
        ));
}

#[test]
fn a_bad_truth_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let truth = dir.path().join("truth.tsv");
    std::fs::write(&truth, "A\tB\n").unwrap();
    blackbox()
        .args([
            "eval",
            "--truth",
            truth.to_str().unwrap(),
            "tests/data/figure2.trace",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "truth.tsv:1: expected 7 tab-separated fields",
        ));
}

#[test]
fn eval_of_the_sample_matches_golden() {
    let out = blackbox()
        .args([
            "eval",
            "-q",
            "--top-n",
            "10",
            "tests/data/multitier-sample.trace",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    golden("multitier-sample.eval", &String::from_utf8(out).unwrap());
}

#[test]
fn a_search_started_from_the_truth_says_so_and_needs_the_joint_choice() {
    let (dir, trace) = sequential_trace();
    let json = dir.path().join("eval.json");
    blackbox()
        .args(["eval", "-q", "--start-from-truth", "--json"])
        .args([json.to_str().unwrap(), trace.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::starts_with(
            "search started from the true parents: a bound on the search, not a result\n",
        ))
        .stdout(predicate::str::contains(
            "instances inferred exactly: 2 of 2 (100.0%)",
        ));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(doc["start"], "true parents");
    blackbox()
        .args(["eval", "-q", "--start-from-truth", "--algorithm", "paper"])
        .arg(&trace)
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "a given start needs the joint parent choice",
        ));
}

/// On the multi-tier study the stated confidence is a probability: in each bucket with
/// enough calls the share given their true parent is within 5 points of the bucket's
/// mean confidence, and the patterns' `sure` (the share of instances the confidences
/// promise exactly right) adds up to within 2 points of the instances measured exact.
#[test]
fn the_confidence_means_what_it_says_on_the_multitier_study() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("multitier.trace");
    let lines = support::generated::Generation {
        seed: 3,
        ..support::generated::Generation::messages("multitier", 80_000)
    }
    .lines();
    let mut bytes = Vec::new();
    maketrace::write_text(&lines, &mut bytes).unwrap();
    std::fs::write(&trace, bytes).unwrap();
    let trace = trace.to_str().unwrap();

    let scores = written_by(&["eval", "-q", trace], "--json");
    let scores: serde_json::Value = serde_json::from_str(&scores).unwrap();
    let mut checked = 0;
    for bucket in scores["paths"]["reliability"].as_array().unwrap() {
        let calls = bucket["calls"].as_f64().unwrap();
        if calls < 300.0 {
            continue;
        }
        let share = bucket["right"].as_f64().unwrap() / calls;
        let stated = bucket["mean_confidence"].as_f64().unwrap();
        assert!((share - stated).abs() <= 0.05, "{bucket}");
        checked += 1;
    }
    assert!(checked >= 3, "{}", scores["paths"]["reliability"]);
    let exact = scores["paths"]["instances_exact"].as_f64().unwrap()
        / scores["paths"]["instances"]["truth"].as_f64().unwrap();

    let nesting = written_by(&["nest", "-q", trace], "--json");
    let nesting: serde_json::Value = serde_json::from_str(&nesting).unwrap();
    let (mut promised, mut instances) = (0.0, 0.0);
    for pattern in nesting["patterns"].as_array().unwrap() {
        let count = pattern["count"].as_f64().unwrap();
        promised += count * pattern["confidence"]["exact"].as_f64().unwrap();
        instances += count;
        let below = &pattern["tree"]["children"][0]["confidence"];
        assert!(
            below.as_f64().is_some_and(|c| (0.0..=1.0).contains(&c)),
            "{pattern}"
        );
    }
    let promised = promised / instances;
    assert!(
        (promised - exact).abs() <= 0.02,
        "promised {promised:.4}, measured {exact:.4}"
    );
}
