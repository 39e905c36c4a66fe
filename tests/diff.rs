//! `blackbox diff`: the paper's added-delay experiment must be found where it was made,
//! and two runs of one system must show no change.

mod support;

use std::path::{Path, PathBuf};
use support::generated::Generation;
use support::{blackbox, stdout_of};

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces")
        .join(name)
}

fn diff_json(before: &Path, after: &Path) -> serde_json::Value {
    let out = stdout_of(
        blackbox()
            .args(["diff", "-q", "--json", "-", "--before"])
            .arg(before)
            .arg("--after")
            .arg(after),
    );
    serde_json::from_str(&out).unwrap()
}

/// The nodes whose own time changed beyond noise.
fn significant_nodes(c: &serde_json::Value) -> Vec<&serde_json::Value> {
    c["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["significant"] == true)
        .collect()
}

#[test]
fn the_added_delay_is_found_at_ws2_before_it_calls_ap() {
    let c = diff_json(
        &shipped("multitier.trace"),
        &shipped("multitier-added-delay.trace"),
    );
    let changed = significant_nodes(&c);
    assert!(!changed.is_empty(), "{c}");
    for node in changed {
        assert_eq!(node["node"], "WS2", "{node}");
        assert!(
            node["before_call_to"].as_str().unwrap().starts_with("AP"),
            "{node}"
        );
        let added =
            node["mean_after_s"].as_f64().unwrap() - node["mean_before_s"].as_f64().unwrap();
        assert!((0.19..0.21).contains(&added), "{node}");
    }
    let text = stdout_of(
        blackbox()
            .args(["diff", "-q", "--before"])
            .arg(shipped("multitier.trace"))
            .arg("--after")
            .arg(shipped("multitier-added-delay.trace")),
    );
    assert!(
        text.contains("WS2 -> AP1 (called by client)  +201.6 ms"),
        "{text}"
    );
}

#[test]
fn two_runs_of_one_system_show_no_change() {
    let dir = tempfile::tempdir().unwrap();
    let write = |seed: u64| {
        let lines = Generation {
            seed,
            ..Generation::messages("multitier", 60_000)
        }
        .lines();
        let path = dir.path().join(format!("seed{seed}.trace"));
        let mut bytes = Vec::new();
        maketrace::write_text(&lines, &mut bytes).unwrap();
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let c = diff_json(&write(21), &write(22));
    assert!(c["tests"].as_u64().unwrap() >= 20, "{c}");
    for list in ["common", "nodes"] {
        for entry in c[list].as_array().unwrap() {
            assert_eq!(entry["significant"], false, "{entry}");
        }
    }
    // The rare patterns that happen in one run only are a request or two.
    for list in ["appeared", "vanished"] {
        for entry in c[list].as_array().unwrap() {
            let requests = entry["before"].as_u64().unwrap() + entry["after"].as_u64().unwrap();
            assert!(requests <= 5, "{entry}");
        }
    }
}

#[test]
fn diff_needs_both_runs_and_a_level_between_0_and_1() {
    blackbox()
        .args(["diff", "--before"])
        .arg(shipped("multitier.trace"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--after"));
    blackbox()
        .args(["diff", "--alpha", "2", "--before"])
        .arg(shipped("multitier.trace"))
        .arg("--after")
        .arg(shipped("multitier.trace"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not a level between 0 and 1"));
}

#[test]
fn two_time_ranges_of_one_capture_find_the_delay_added_in_the_second() {
    let dir = tempfile::tempdir().unwrap();
    let trace = support::deployed_delay_trace(dir.path());
    let out = stdout_of(
        blackbox()
            .args(["diff", "-q", "--json", "-"])
            .arg(&trace)
            .args(["--before", "0s-20s", "--after", "100s-120s"]),
    );
    let c: serde_json::Value = serde_json::from_str(&out).unwrap();
    let changed = significant_nodes(&c);
    assert!(!changed.is_empty(), "{c}");
    assert!(changed.iter().all(|n| n["node"] == "WS2"), "{c}");
    // A range that is not one is refused, naming it.
    blackbox()
        .arg("diff")
        .arg(&trace)
        .args(["--before", "soon", "--after", "100s-120s"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--before `soon`"));
}
