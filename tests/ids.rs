//! Propagated request ids end to end: maketrace writes multi-tier captures whose HTTP or
//! gRPC calls carry a `traceparent` or `X-Request-ID`; `nest` and `eval` use them by
//! default, `--ignore-ids` leaves them out, `records` keeps them as `id=`, and
//! `eval --against-ids` estimates from them what the truth measures.

mod support;

use maketrace::capture::{IdHeader, Ids, Payload, Servers};
use std::path::{Path, PathBuf};
use support::generated::Generation;
use support::{blackbox, outputs_of, stdout_of};

/// Multi-tier captures of 40 k messages whose instances carry ids with `ids`.
fn captures(dir: &Path, payload: Payload, ids: Option<Ids>) -> (Vec<PathBuf>, PathBuf) {
    let trace = Generation {
        network: Some((100_000, 20_000)),
        resolution: 1,
        seed: 5,
        ..Generation::messages("multitier", 40_000)
    }
    .lines();
    let hosts = dir.join("hosts");
    let written = maketrace::capture::write_with(
        &trace,
        &hosts,
        payload,
        maketrace::capture::Container::Pcap,
        None,
        Servers {
            connections: Default::default(),
            ids,
        },
    )
    .unwrap();
    (written.files, hosts.join("truth.tsv"))
}

/// The number after `label` and before " (" or ")" on the line starting with `line`.
fn figure(text: &str, line: &str, label: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(line))
        .unwrap_or_else(|| panic!("no `{line}` in\n{text}"));
    let rest = &line[line
        .find(label)
        .unwrap_or_else(|| panic!("{label} in {line}"))
        + label.len()..];
    let open = rest.find('(').expect("a share in parentheses");
    rest[open + 1..rest[open..].find('%').unwrap() + open]
        .trim()
        .parse()
        .unwrap()
}

fn eval<F: AsRef<std::ffi::OsStr>>(files: &[F], extra: &[&str]) -> String {
    stdout_of(blackbox().args(["eval", "-q"]).args(extra).args(files))
}

#[test]
fn ids_on_half_the_requests_fix_their_links_and_teach_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Ids {
        header: IdHeader::RequestId,
        share: 0.5,
    };
    let (files, truth) = captures(dir.path(), Payload::Http, Some(ids));
    let truth = truth.to_str().unwrap();
    let exact = |extra: &[&str]| {
        let scores = eval(&files, &[&["--truth-ids", truth], extra].concat());
        figure(&scores, "instances inferred exactly", "exactly:")
    };
    let (with, without) = (exact(&[]), exact(&["--ignore-ids"]));
    // Half the instances are right by their ids; the labelled links teach the rest.
    assert!(with >= 95.0, "with ids {with}%");
    assert!(without <= 90.0, "without ids {without}%");

    let (json, summary) = outputs_of(blackbox().args(["nest", "--json", "-"]).args(&files));
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let input = &json["input"];
    let carried = input["calls_with_ids"].as_u64().unwrap();
    // About half of the 20 k calls; the client's calls carry them too but have no parent.
    assert!(
        (8_000..12_000).contains(&carried),
        "{carried} calls with ids"
    );
    assert_eq!(input["id_nodes"], 4, "WS1, WS2, AP1, AP2 pass ids on");
    assert!(
        summary.contains(&format!("propagated ids: {carried} of ")),
        "{summary}"
    );
    assert!(
        summary.contains("at the 4 nodes that pass them on"),
        "{summary}"
    );
}

#[test]
fn against_ids_estimates_the_truth_within_half_a_point() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Ids {
        header: IdHeader::TraceParent,
        share: 0.6,
    };
    let (files, truth) = captures(dir.path(), Payload::Http, Some(ids));
    let truth = eval(
        &files,
        &["--ignore-ids", "--truth-ids", truth.to_str().unwrap()],
    );
    let measured = figure(&truth, "instances inferred exactly", "with one:");
    let estimate = eval(&files, &["--against-ids"]);
    let estimated = figure(&estimate, "calls given the parent their ids name", "name:");
    assert!(
        (measured - estimated).abs() <= 0.5,
        "truth {measured}%, estimated from ids {estimated}%\n{estimate}"
    );
    for node in ["AP1", "AP2", "WS1", "WS2"] {
        assert!(
            estimate.lines().any(|l| l.starts_with(node)),
            "{node} in\n{estimate}"
        );
    }
    assert!(estimate.contains("confidence      labelled"), "{estimate}");
}

#[test]
fn grpc_metadata_carries_ids_and_records_keeps_them() {
    let dir = tempfile::tempdir().unwrap();
    let ids = Ids {
        header: IdHeader::TraceParent,
        share: 1.0,
    };
    let (files, truth) = captures(dir.path(), Payload::Grpc, Some(ids));
    let truth = truth.to_str().unwrap();
    let scores = eval(&files, &["--truth-ids", truth]);
    assert_eq!(
        figure(&scores, "instances inferred exactly", "exactly:"),
        100.0
    );

    // records writes each call's id; nest reads it back from the text trace.
    let text = dir.path().join("trace.txt");
    blackbox()
        .args(["records", "-q", "-o"])
        .arg(&text)
        .args(&files)
        .assert()
        .success();
    let written = std::fs::read_to_string(&text).unwrap();
    let call = written
        .lines()
        .find(|l| l.contains("CALL_SENT"))
        .expect("a call");
    assert!(
        call.contains(" id=") && call.contains(" op=/maketrace."),
        "{call}"
    );
    let from_text = stdout_of(blackbox().args(["nest", "-q", "--json", "-"]).arg(&text));
    let json: serde_json::Value = serde_json::from_str(&from_text).unwrap();
    assert_eq!(json["input"]["id_nodes"], 4);
}

#[test]
fn against_ids_without_ids_says_there_is_nothing_to_score() {
    let dir = tempfile::tempdir().unwrap();
    let (files, _) = captures(dir.path(), Payload::Http, None);
    blackbox()
        .args(["eval", "-q", "--against-ids"])
        .args(&files)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "no call carries a request id or trace context",
        ));
}

/// The shop under 32 clients, its clients sending a `traceparent` that its application
/// passes on to its SQL (not to Redis), with the truth from the programs' own logs
/// (`traces/shop/truth.py`).
fn traced_shop() -> (Vec<String>, String) {
    let truth = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/shop-traced/truth.tsv.gz");
    (
        support::captures_in("shop-traced"),
        truth.to_str().unwrap().to_owned(),
    )
}

#[test]
fn on_the_traced_shop_ids_fix_web_and_the_database_calls_and_help_the_cache_calls() {
    let (files, truth) = traced_shop();
    let scores = eval(&files, &["--truth-ids", &truth]);
    let with = figure(&scores, "instances inferred exactly", "exactly:");
    let scores = eval(&files, &["--ignore-ids", "--truth-ids", &truth]);
    let without = figure(&scores, "instances inferred exactly", "exactly:");
    assert!(
        with >= 99.5 && with > without,
        "{with}% with ids, {without}% without"
    );
}

#[test]
fn on_the_traced_shop_against_ids_agrees_with_the_programs_truth_within_half_a_point() {
    let (files, truth) = traced_shop();
    let scores = eval(&files, &["--ignore-ids", "--truth-ids", &truth]);
    let measured = figure(&scores, "instances inferred exactly", "with one:");
    let estimate = eval(&files, &["--against-ids"]);
    let estimated = figure(&estimate, "calls given the parent their ids name", "name:");
    assert!(
        (measured - estimated).abs() <= 0.5,
        "truth {measured}%, from the ids {estimated}%\n{estimate}"
    );
    assert!(
        estimate.lines().any(|l| l.starts_with("app "))
            && estimate.lines().any(|l| l.starts_with("web ")),
        "{estimate}"
    );
}

#[test]
fn explain_says_when_a_request_id_named_the_parent() {
    let (files, _) = traced_shop();
    let records = stdout_of(blackbox().args(["records", "-q"]).args(&files));
    let query = records
        .lines()
        .find(|l| l.contains("CALL_SENT app db") && l.contains(" id="))
        .expect("a database query carrying its request's id");
    let call = query.split_whitespace().nth(4).unwrap();
    let explained = stdout_of(
        blackbox()
            .args(["nest", "-q", "--explain", call])
            .args(&files),
    );
    assert!(
        explained.contains("Its request id names that parent"),
        "{explained}"
    );
    let ignored = stdout_of(
        blackbox()
            .args(["nest", "-q", "--ignore-ids", "--explain", call])
            .args(&files),
    );
    assert!(!ignored.contains("request id"), "{ignored}");
}
