//! End-to-end tests of `blackbox convolve`, on traces maketrace makes in-process.

use blackbox::convolution::{convolve, ConvolveOptions};
use blackbox::trace::Trace;
use predicates::prelude::*;
use support::blackbox;
use support::generated::generated;

mod support;

const QUANTUM: i64 = 10_000_000;

/// (signature, delays of each hop after the first, ms) of every path found.
fn paths(trace: &Trace) -> Vec<(String, Vec<f64>, u64)> {
    let result = convolve(trace, &ConvolveOptions::default()).unwrap();
    result
        .paths
        .iter()
        .map(|p| {
            (
                p.signature(trace),
                p.edges[1..]
                    .iter()
                    .map(|e| e.delays[0].delay as f64 / 1e6)
                    .collect(),
                p.count(),
            )
        })
        .collect()
}

#[test]
fn free_form_edges_and_delays_are_found_within_a_quantum() {
    let trace = generated("freeform", 1.0, 30_000, 5);
    let found = paths(&trace);
    let signatures: Vec<&str> = found.iter().map(|p| p.0.as_str()).collect();
    assert_eq!(
        signatures,
        ["source->relay->processor->sink", "source->relay->archive"],
        "{found:?}"
    );
    let within = |got: f64, want: f64| (got - want).abs() <= QUANTUM as f64 / 1e6;
    assert!(
        within(found[0].1[0], 20.0) && within(found[0].1[1], 35.0),
        "{found:?}"
    );
    assert!(within(found[1].1[0], 80.0), "{found:?}");
    // Every true message was followed: six lanes of three messages, three of two.
    assert!(found[0].2 > 2_000 && found[1].2 > 1_000, "{found:?}");
}

#[test]
fn the_added_delay_is_blamed_on_the_ws2_edge_within_a_quantum() {
    // Paper Figure 13: the path through WS2, AUTH and AP1 carries the extra 200 ms on the
    // edge from WS2 to AP1.
    let delay = |config: &str| {
        let trace = generated(config, 1.0, 100_000, 3);
        paths(&trace)
            .into_iter()
            .find(|p| p.0 == "client->WS2->AUTH->WS2->AP1->DB->AP1->WS2->client")
            .map(|p| p.1[2])
            .expect("the WS2 path with AUTH and AP1 is found")
    };
    let (normal, added) = (delay("multitier"), delay("multitier-added-delay"));
    assert!(
        ((added - normal) - 200.0).abs() <= QUANTUM as f64 / 1e6,
        "normal {normal} ms, added {added} ms"
    );
}

#[test]
fn json_and_dot_follow_the_design() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("c.json");
    blackbox()
        .args([
            "convolve",
            "-q",
            "--json",
            json.to_str().unwrap(),
            "--dot",
            dir.path().to_str().unwrap(),
            "traces/freeform.trace",
        ])
        .assert()
        .success()
        .stdout(predicate::str::contains("source -> relay -[20."));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    assert_eq!(doc["algorithm"], "convolution");
    assert_eq!(doc["roots"], serde_json::json!(["source"]));
    let first = &doc["patterns"][0];
    assert_eq!(first["rank"], 1);
    assert_eq!(first["signature"], "source->relay->processor->sink");
    let hop = &first["edges"][1];
    assert_eq!(
        (hop["from"].as_str(), hop["to"].as_str()),
        (Some("relay"), Some("processor"))
    );
    assert!((hop["delays_s"][0]["delay"].as_f64().unwrap() - 0.020).abs() < 0.01);
    assert!((hop["median_delay_s"].as_f64().unwrap() - 0.020).abs() < 0.01);
    assert!(first["edges"][0]["median_delay_s"].is_null());
    assert!(doc["input"]["correlations"].as_u64().unwrap() > 0);
    let dot = std::fs::read_to_string(dir.path().join("path-001.dot")).unwrap();
    assert!(
        dot.contains("v1 -> v2 [label=\"20.") && dot.contains("rankdir=\"LR\""),
        "{dot}"
    );
}

#[test]
fn roots_can_be_named_and_unknown_ones_are_refused() {
    blackbox()
        .args(["convolve", "-q", "--root", "relay", "traces/freeform.trace"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("relay -> processor -[")
                .and(predicate::str::contains("source").not()),
        );
    blackbox()
        .args(["convolve", "--root", "nobody", "traces/freeform.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--root nobody: no such node"));
}

#[test]
fn rpc_traces_work_as_plain_messages_and_the_summary_counts_what_was_cut() {
    blackbox()
        .args(["convolve", "traces/multitier.trace"])
        .assert()
        .success()
        .stdout(predicate::str::contains("client -> WS1 -[50."))
        .stderr(
            predicate::str::contains("roots: client")
                .and(predicate::str::contains("spikes at negative delays")),
        );
}

#[test]
fn bad_input_and_options_are_refused_clearly() {
    blackbox()
        .args(["convolve", "tests/data/empty.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no messages"));
    blackbox()
        .args(["convolve", "--quantum", "0", "traces/freeform.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("quantum must be positive"));
    blackbox()
        .args([
            "convolve",
            "--spike-sigma",
            "2",
            "--gap-sigma",
            "3",
            "traces/freeform.trace",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("0 ≤ S < N"));
}

#[test]
fn records_turns_an_mbox_into_hops_and_counts_what_it_skips() {
    let out = blackbox()
        .args(["records", "--mbox", "tests/data/sample.mbox"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "2 emails, 5 Received headers -> 2 hops; skipped 1 with unreadable dates, 1 naming a generic host, 1 missing a host",
        ))
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "1047405602.000000 MSG_RECV mail.sender.net relay.example.org - hello.1@sender.net\n1047405605.000000 MSG_RECV relay.example.org mx.example.com - hello.1@sender.net\n"
    );
    blackbox()
        .args(["records", "--mbox", "no/such.mbox"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no/such.mbox"));
}

/// An mbox of `n` emails from sender.net through relay1.org or relay2.org (in turn) to
/// mx.org, each 10 s at the relay and 5 s on to mx.org, as mx.org's clock (`mx_skew`
/// seconds off) writes it.
fn mbox_with_a_skewed_relay(n: u32, mx_skew: i64) -> String {
    let mut mbox = String::new();
    for i in 0..n {
        let at = |s: i64| {
            let t = 1_000 + i64::from(i) * 600 + s;
            format!(
                "Tue, 11 Mar 2003 {:02}:{:02}:{:02} +0000",
                t / 3600,
                t / 60 % 60,
                t % 60
            )
        };
        mbox.push_str(&format!(
            "From a@sender.net Tue Mar 11 00:00:00 2003\n\
Received: from relay{r}.org by mx.org; {}\n\
Received: from sender.net by relay{r}.org; {}\n\
Message-ID: <{i}@sender.net>\n\n\
body\n\n",
            at(15 + mx_skew),
            at(10),
            r = 1 + i % 2
        ));
    }
    mbox
}

#[test]
fn records_corrects_a_relay_whose_clock_is_behind_from_the_emails_chains() {
    let dir = tempfile::tempdir().unwrap();
    let mbox = dir.path().join("skewed.mbox");
    // mx.org is two minutes behind: as read, every email reaches it before it left its
    // relay. Both relays agree against mx.org, so it is mx.org's clock that is corrected.
    std::fs::write(&mbox, mbox_with_a_skewed_relay(12, -120)).unwrap();
    let out = blackbox()
        .args(["records", "--mbox"])
        .arg(&mbox)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "relay clocks, from the delays between consecutive Received headers: 12 delays, 12 below zero as read, 0 after correcting 1 of 3 relays",
        ))
        .stderr(predicate::str::contains("mx.org    -115.0 s      2      12"))
        .get_output()
        .stdout
        .clone();
    // One-way delays prove 115 of the 120 s: the hop to mx.org no longer comes before
    // the one before it.
    let trace = String::from_utf8(out).unwrap();
    let mut first: Vec<&str> = trace.lines().take(2).collect();
    first.sort_unstable();
    assert_eq!(
        first,
        [
            "1047341810.000000 MSG_RECV relay1.org mx.org - 0@sender.net",
            "1047341810.000000 MSG_RECV sender.net relay1.org - 0@sender.net"
        ]
    );
    // eval --convolve --mbox scores on the same clocks, and says how it set them.
    let out = blackbox()
        .args(["eval", "-q", "--convolve", "--mbox", "--quantum", "1s"])
        .args(["--max-delay", "1h", "--json", "-"])
        .arg(&mbox)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let clocks = &json["relay_clocks"];
    assert_eq!(clocks["negative_before"], 12);
    assert_eq!(clocks["negative_after"], 0);
    assert_eq!(clocks["corrected"][0]["host"], "mx.org");
    assert_eq!(clocks["corrected"][0]["offset_ns"], -115_000_000_000i64);
    // align --mbox shows the same estimate alone.
    blackbox()
        .args(["align", "--mbox"])
        .arg(&mbox)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "mx.org    -115.0 s      2      12",
        ))
        .stderr(predicate::str::contains(
            "12 emails, 24 Received headers -> 24 hops",
        ));
    // --align off keeps every relay's clock as written.
    blackbox()
        .args(["records", "--align", "off", "--mbox"])
        .arg(&mbox)
        .assert()
        .success()
        .stderr(predicate::str::contains("relay clocks").not())
        .stdout(predicate::str::contains(
            "1047341695.000000 MSG_RECV relay1.org mx.org - 0@sender.net",
        ));
}

#[test]
fn eval_convolve_scores_paths_against_the_true_chains() {
    let out = blackbox()
        .args([
            "eval",
            "--convolve",
            "--min-paths",
            "100",
            "--min-paths",
            "200",
            "--json",
            "-",
            "traces/freeform.trace",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "true chains: 422 instances, 422 runs of linked hops (0 instances cut",
        ))
        .stderr(predicate::str::contains(
            "paths followed at least 100 times: 2 true: 2 found exactly, 0 only as the start of a longer path, 0 only inside one, 0 nowhere (0 false negatives); 2 reported, 0 followed by no chain (0 false positives)",
        ))
        .stderr(predicate::str::contains("292  exact    source->relay->processor->sink"))
        .get_output()
        .stdout
        .clone();
    let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(json["algorithm"], "convolution");
    let scores = json["scores"].as_array().unwrap();
    // Thresholds highest first: at 200 only the 292-instance path is scored.
    assert_eq!(scores[0]["min_count"], 200);
    assert_eq!(scores[0]["true_paths"].as_array().unwrap().len(), 1);
    assert_eq!(scores[1]["min_count"], 100);
    assert_eq!(scores[1]["delays"], 3);
    for hop in scores[1]["true_paths"][0]["delays"].as_array().unwrap() {
        assert_eq!(hop["within"], true, "{hop}");
    }
}

#[test]
fn eval_convolve_reads_an_mbox_in_its_headers_order_and_refuses_no_truth() {
    // One email, two hops: too few for any path, so its chain is found nowhere.
    blackbox()
        .args([
            "eval",
            "--convolve",
            "--mbox",
            "--min-paths",
            "1",
            "--quantum",
            "1s",
            "--max-delay",
            "1h",
            "tests/data/sample.mbox",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "2 emails, 5 Received headers -> 2 hops",
        ))
        .stdout(predicate::str::contains(
            "true chains: 1 instance, 1 run of linked hops",
        ))
        .stdout(predicate::str::contains(
            "1  nowhere  mail.sender.net->relay.example.org->mx.example.com",
        ));
    // A trace without truth tags has nothing to be scored against.
    let dir = tempfile::tempdir().unwrap();
    let untagged = dir.path().join("untagged.trace");
    std::fs::write(&untagged, "1.0 MSG a b -\n2.0 MSG b c -\n").unwrap();
    blackbox()
        .args(["eval", "--convolve"])
        .arg(&untagged)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no message carries a truth tag"));
    // --mbox belongs to --convolve.
    blackbox()
        .args(["eval", "--mbox", "tests/data/sample.mbox"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--convolve"));
}
