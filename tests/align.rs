//! Clock alignment of per-host captures against known skews: accuracy floors per
//! scenario (the study in examples/alignment.rs measures the same at a larger scale), the
//! `align` command, skewed captures restored, and nesting on skewed captures equal to
//! nesting on the true ones.

#[path = "support/clocks.rs"]
mod clocks;

mod support;

use blackbox::align::fit::Method;
use clocks::{quantile, run, scenarios, write_captures, Scenario};
use std::path::Path;
use support::{blackbox, outputs_of, stdout_of};

/// Runs a command that must succeed; its stdout.
/// Hull and regression errors (ns) over two seeds, and the hull bounds' hold.
fn figures(scenario: &Scenario, dir: &Path) -> (Vec<f64>, Vec<f64>, (u64, u64)) {
    let (mut hull, mut regression, mut contained) = (Vec::new(), Vec::new(), (0, 0));
    for (seed, hosts) in [(1u64, 3usize), (2, 5)] {
        let out = run(
            scenario,
            hosts,
            seed,
            &[(Method::Hull, false), (Method::Regression, false)],
            &dir.join(format!("{seed}")),
        );
        assert_eq!(out[0].unaligned, 0, "{}: every host aligned", scenario.name);
        hull.extend(&out[0].errors);
        regression.extend(&out[1].errors);
        contained.0 += out[0].contained.0;
        contained.1 += out[0].contained.1;
    }
    (hull, regression, contained)
}

#[test]
fn hull_alignment_meets_its_floors_in_every_scenario() {
    let dir = tempfile::tempdir().unwrap();
    for (index, scenario) in scenarios(20).into_iter().enumerate() {
        let (hull, regression, contained) =
            figures(&scenario, &dir.path().join(format!("{index}")));
        let median = quantile(&hull, 0.5);
        let regression_median = quantile(&regression, 0.5);
        let held = contained.0 as f64 / contained.1 as f64;
        eprintln!(
            "{}: hull median {median:.0} ns, p99 {:.0} ns; regression median {regression_median:.0} ns; bounds held {held:.3}",
            scenario.name,
            quantile(&hull, 0.99)
        );
        let floor = match index {
            1 => 2_000.0, // asymmetric queueing
            4 => 3_000.0, // wander
            _ => 1_000.0,
        };
        assert!(
            median <= floor,
            "{}: hull median {median} ns",
            scenario.name
        );
        assert!(held >= 0.99, "{}: bounds held {held}", scenario.name);
        if index == 1 {
            assert!(
                regression_median >= 5.0 * median,
                "asymmetric queueing: regression {regression_median} ns vs hull {median} ns"
            );
        }
    }
}

/// The names in a capture directory, sorted.
fn captures_in(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn nesting_on_captures_skewed_by_seconds_and_100_ppm_equals_nesting_on_true_ones() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenarios(20).remove(0);
    let (truth, skewed, skews) = write_captures(&scenario, 5, 9, 10_000_000_000, 100, dir.path());
    assert!(skews.iter().any(|s| s.offset.abs() > 1_000_000_000));
    // The patterns with their counts, and every call's parent: the latencies are in
    // the reference host's clock, whose own rate error (up to 100 ppm) no capture shows.
    let nest = |files: &[std::path::PathBuf], align: &str| -> (Vec<String>, Vec<String>) {
        let assignments = dir.path().join(format!("assignments-{align}.tsv"));
        let stdout = stdout_of(
            blackbox()
                .args(["nest", "-q", "--align", align, "--assignments"])
                .arg(&assignments)
                .args(files),
        );
        let patterns = stdout
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                format!("{} {}", f[1], f[f.len() - 1])
            })
            .collect();
        let mut parents: Vec<String> = std::fs::read_to_string(&assignments)
            .unwrap()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                format!("{} <- {}", f[2], f[6])
            })
            .collect();
        parents.sort();
        (patterns, parents)
    };
    let on_truth = nest(&truth, "off");
    assert!(on_truth.0.iter().any(|p| p.contains("h0->h1(h2(")));
    assert!(on_truth.1.len() > 1_000);
    let on_skewed = nest(&skewed, "hull");
    assert!(
        on_skewed == on_truth,
        "aligned skewed captures give other results"
    );
}

#[test]
fn align_writes_captures_in_the_reference_clock_and_json_for_scripts() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenarios(10).remove(0);
    let (_, skewed, skews) = write_captures(&scenario, 4, 5, 2_000_000_000, 100, dir.path());
    let aligned = dir.path().join("aligned");
    let stdout = stdout_of(
        blackbox()
            .args(["align", "--json", "-", "--write"])
            .arg(&aligned)
            .args(&skewed),
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let reference = json["reference"].as_str().unwrap().to_string();
    let hosts = json["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 4);
    let r = hosts
        .iter()
        .position(|h| h["host"] == reference.as_str())
        .unwrap();
    for (h, host) in hosts.iter().enumerate() {
        assert_eq!(host["quality"], "accurate", "{host}");
        if h == r {
            continue;
        }
        // Offset at the host's first segment: within its bound (plus what the drift
        // adds over the first second) of the true difference of the two clocks.
        let first_ns = host["offset_ns"].as_f64().unwrap();
        let truth = (skews[h].offset - skews[r].offset) as f64;
        assert!(
            (first_ns - truth).abs() < 300_000.0,
            "{}: {first_ns} vs {truth}",
            host["host"]
        );
        let drift = host["drift_ppm"].as_f64().unwrap();
        let true_drift = (skews[h].drift - skews[r].drift) as f64 / 1e9;
        assert!(
            (drift - true_drift).abs() < 0.05,
            "{drift} vs {true_drift} ppm"
        );
    }
    // Aligned again, the written captures share one clock.
    let again = blackbox()
        .args(["align", "--json", "-"])
        .args(captures_in(&aligned))
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    for host in json["hosts"].as_array().unwrap() {
        let offset = host["offset_ns"].as_f64().unwrap_or(0.0);
        assert!(offset.abs() < 1_000.0, "{host}");
    }
    // The table names the reference and every host; the fan-out from h0 makes loops,
    // which --least-squares solves over.
    let table = stdout_of(blackbox().arg("align").args(&skewed));
    assert!(table.contains(&format!("reference {reference}")), "{table}");
    assert!(table.contains("accurate"), "{table}");
    assert!(table.contains("loop "), "{table}");
    let combined = stdout_of(blackbox().args(["align", "--least-squares"]).args(&skewed));
    assert!(
        combined.contains("--least-squares: corrections solved"),
        "{combined}"
    );
}

#[test]
fn skewed_captures_inverted_give_back_every_packet_time() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = scenarios(5).remove(0);
    let (truth, skewed, skews) = write_captures(&scenario, 3, 4, 10_000_000_000, 100, dir.path());
    for ((truth, skewed), skew) in truth.iter().zip(&skewed).zip(&skews) {
        let restored = dir.path().join("restored.pcap");
        skewer::skew_capture(skewed, &restored, skew, clocks::START, true).unwrap();
        let times = |path: &Path| {
            let mut times = Vec::new();
            let mut stats = blackbox::capture::stats::FileStats::default();
            let file = std::fs::File::open(path).unwrap();
            blackbox::capture::file::read_frames(path, file, &mut stats, |f, _| times.push(f.time))
                .unwrap();
            times
        };
        assert_eq!(times(truth), times(&restored));
        assert_ne!(times(truth), times(skewed));
    }
}

#[test]
fn repair_leaves_no_receive_before_its_send() {
    let dir = tempfile::tempdir().unwrap();
    // One-way queueing: the regression's error exceeds the smallest delay, so its
    // alignment leaves receives before their sends.
    let scenario = scenarios(20).remove(1);
    let (_, skewed, _) = write_captures(&scenario, 4, 3, 2_000_000_000, 100, dir.path());
    let regression = clocks::repaired(&skewed, Method::Regression);
    assert!(regression.violations_before > 0, "{regression:?}");
    assert_eq!(regression.violations_after, 0, "{regression:?}");
    let hull = clocks::repaired(&skewed, Method::Hull);
    assert_eq!(hull.violations_before, 0, "{hull:?}");
    // Unaligned, every host's seconds of offset show, and the repair still mends them.
    let output = blackbox()
        .args(["nest", "--align", "off", "--repair"])
        .args(&skewed)
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let line = stderr
        .lines()
        .find(|l| l.starts_with("causality repair:"))
        .unwrap();
    assert!(line.contains("; after repair 0;"), "{line}");
    assert!(!line.starts_with("causality repair: 0 of"), "{line}");
}

#[test]
fn align_rejects_text_traces_and_align_off() {
    blackbox()
        .args(["align", "traces/multitier.trace"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("align reads captures only"));
    blackbox()
        .args([
            "align",
            "--align",
            "off",
            "traces/shop/app.pcap",
            "traces/shop/web.pcap",
        ])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--align off leaves nothing to do",
        ));
    // What is about the merged trace, which align does not build, is refused, and
    // align's help does not offer it.
    for (flag, value) in [
        ("--repair", None),
        ("--truth-ids", Some("tests/data/sample.mbox")),
        ("--node-by", Some("pod")),
    ] {
        blackbox()
            .args(["align", flag])
            .args(value)
            .args(["traces/shop/app.pcap", "traces/shop/web.pcap"])
            .assert()
            .code(2)
            .stderr(predicates::str::contains(format!(
                "{flag} is about the merged trace, which align does not build"
            )));
    }
    let help = stdout_of(blackbox().args(["align", "--help"]));
    for flag in ["--repair", "--min-latency", "--truth-ids", "--node-by <"] {
        assert!(!help.contains(flag), "align --help offers {flag}:\n{help}");
    }
}

#[test]
fn eval_lists_the_convolutions_knobs_with_convolve_not_among_the_nestings() {
    let help = stdout_of(blackbox().args(["eval", "--help"]));
    let (nesting, convolution) = help
        .split_once("Convolution (--convolve):")
        .expect("a convolution heading");
    for flag in [
        "--spike-sigma",
        "--gap-sigma",
        "--variance",
        "--max-depth",
        "--max-correlations",
    ] {
        assert!(convolution.contains(flag), "{flag}:\n{help}");
        assert!(!nesting.contains(flag), "{flag}:\n{help}");
    }
}

#[test]
fn ignore_connections_says_what_it_left_out_or_that_there_was_nothing() {
    let shop = support::shop_captures();
    let (_, summary) = outputs_of(
        blackbox()
            .args(["nest", "--ignore-connections"])
            .args(&shop),
    );
    assert!(
        summary.contains("connections ignored (--ignore-connections): the parent choice did not weigh the connections 3360 calls travelled on"),
        "{summary}"
    );
    for args in [
        &["nest", "--ignore-connections", "traces/multitier.trace"][..],
        &[
            "nest",
            "--ignore-connections",
            "--algorithm",
            "paper",
            "traces/shop/app.pcap",
        ],
    ] {
        let (_, summary) = outputs_of(blackbox().args(args));
        assert!(
            summary.contains("--ignore-connections changed nothing: no call here names"),
            "{args:?}: {summary}"
        );
    }
    let (_, summary) = outputs_of(blackbox().args(["nest"]).args(&shop));
    assert!(
        !summary.contains("--ignore-connections changed"),
        "{summary}"
    );
}

#[test]
fn shop_captures_on_one_kernel_clock_align_to_zero_within_their_bounds() {
    let shop: Vec<_> = captures_in(&Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/shop"))
        .into_iter()
        .filter(|p| blackbox::capture::is_capture(p))
        .collect();
    let output = blackbox()
        .args(["align", "--json", "-"])
        .args(&shop)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for host in json["hosts"].as_array().unwrap() {
        if host["reference"] == true {
            continue;
        }
        let offset = host["offset_ns"].as_f64().unwrap();
        let bound = host["bound_ns"].as_f64().unwrap();
        // The namespaces share the kernel's clock; tcpdump stamps in microseconds.
        assert!(offset.abs() <= bound + 1_000.0, "{host}");
    }
}

/// The records of a pcap from `from` to `to`, shares of the whole.
fn cut_pcap(path: &str, (from, to): (f64, f64), into: &std::path::Path) {
    let bytes = std::fs::read(path).unwrap();
    let mut records = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let captured = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        records.push(&bytes[at..at + 16 + captured]);
        at += 16 + captured;
    }
    let n = records.len() as f64;
    let kept = &records[(n * from) as usize..(n * to) as usize];
    let mut out = bytes[..24].to_vec();
    out.extend(kept.iter().flat_map(|r| r.iter()));
    std::fs::write(into, out).unwrap();
}

#[test]
fn a_clock_left_unaligned_is_told_why() {
    // A host none of the others talks to.
    let output = blackbox()
        .args(["nest", "traces/shop/web.pcap", "traces/shop/app.pcap"])
        .arg("traces/grpc/db.pcap")
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("warning: no TCP segment links db to the other captures, its clock stays its own: it exchanged none with the hosts they own"),
        "{stderr}"
    );
    // Two hosts that talk, captured at different times.
    let dir = tempfile::tempdir().unwrap();
    let (early, late) = (dir.path().join("early.pcap"), dir.path().join("late.pcap"));
    cut_pcap("traces/shop/client.pcap", (0.0, 0.4), &early);
    cut_pcap("traces/shop/web.pcap", (0.6, 1.0), &late);
    let output = blackbox()
        .arg("nest")
        .args([&early, &late])
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("warning: no TCP segment links early to the other captures, its clock stays its own: none of the 1369 segments it exchanged with the hosts they own was seen at the other end (do the captures cover the same time?)"),
        "{stderr}"
    );
}
