//! `nest` of text traces longer than one segment: nested in segments in bounded memory,
//! every line and call counted once, the patterns those of the whole trace.

mod support;

use std::io::Write;
use support::{blackbox, outputs_of, stdout_of};

const TRACE: &str = "traces/multitier.trace";

fn json(args: &[&str]) -> serde_json::Value {
    let out = stdout_of(blackbox().args(["nest", "-q", "--json", "-"]).args(args));
    serde_json::from_str(&out).unwrap()
}

/// Pattern counts by signature.
fn counts(doc: &serde_json::Value) -> Vec<(String, u64)> {
    let mut counts: Vec<(String, u64)> = doc["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let signature = p["signature"].as_str().unwrap().to_owned();
            (signature, p["count"].as_u64().unwrap())
        })
        .collect();
    counts.sort();
    counts
}

#[test]
fn a_trace_of_one_segment_is_nested_as_a_whole_trace() {
    // 11,136 lines: under the default segment, and under --segment-lines 20000.
    for args in [
        &["--segment-lines", "0"][..],
        &[],
        &["--segment-lines", "20000"],
    ] {
        let (out, err) = outputs_of(blackbox().args(["nest", TRACE]).args(args));
        let (whole, whole_err) =
            outputs_of(blackbox().args(["nest", TRACE, "--segment-lines", "0"]));
        assert_eq!((&out, &err), (&whole, &whole_err), "{args:?}");
        assert!(!err.contains("streamed"), "{err}");
    }
    let doc = json(&[TRACE]);
    assert!(doc["input"].get("streamed").is_none());
}

#[test]
fn segments_count_every_line_and_call_once() {
    let whole = json(&[TRACE, "--segment-lines", "0"]);
    let doc = json(&[TRACE, "--segment-lines", "3000"]);
    let streamed = &doc["input"]["streamed"];
    assert!(streamed["segments"].as_u64().unwrap() >= 3, "{streamed}");
    assert_eq!(streamed["late_lines"], 0);
    // A margin of twice the longest call (about 0.2 s).
    let margin = streamed["margin_s"].as_f64().unwrap();
    assert!((0.3..0.6).contains(&margin), "{margin}");
    for key in [
        "lines",
        "observations",
        "messages",
        "seen_at_both_ends",
        "unmatched_calls",
        "unmatched_returns",
        "call_pairs",
    ] {
        assert_eq!(doc["input"][key], whole["input"][key], "{key}");
    }
    // Requests too: each root is counted in the segment of its call, once.
    let requests = |doc: &serde_json::Value| -> u64 { counts(doc).iter().map(|c| c.1).sum() };
    assert_eq!(requests(&doc), doc["input"]["roots"].as_u64().unwrap());
    let roots = doc["input"]["roots"].as_u64().unwrap();
    assert!(
        (696..=700).contains(&roots),
        "{roots} roots of 696 requests"
    );
}

#[test]
fn segments_find_the_patterns_of_the_whole_trace() {
    let whole = counts(&json(&[TRACE, "--segment-lines", "0"]));
    let doc = json(&[TRACE, "--segment-lines", "3000"]);
    let streamed = counts(&doc);
    // The eight true patterns, each within two requests of the whole trace's count.
    for (signature, count) in whole.iter().filter(|c| c.1 >= 50) {
        let found = streamed
            .iter()
            .find(|c| &c.0 == signature)
            .map_or(0, |c| c.1);
        assert!(
            found.abs_diff(*count) <= 2,
            "{signature}: {found} vs {count}"
        );
    }
    // Latencies are merged from the segments: the top pattern's mean is the whole's.
    let top = &doc["patterns"][0];
    let whole_doc = json(&[TRACE, "--segment-lines", "0"]);
    let whole_top = whole_doc["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["signature"] == top["signature"])
        .unwrap();
    let (a, b) = (
        top["mean_latency_s"].as_f64().unwrap(),
        whole_top["mean_latency_s"].as_f64().unwrap(),
    );
    assert!((a - b).abs() < 0.002, "{a} vs {b}");
}

#[test]
fn eval_scores_the_nesting_in_segments_as_nest_makes_it() {
    let exact = |segment: &str| -> f64 {
        let out = stdout_of(blackbox().args(["eval", "-q", TRACE, "--segment-lines", segment]));
        let line = out
            .lines()
            .find(|l| l.starts_with("instances inferred exactly"))
            .unwrap()
            .to_owned();
        let share = line.split('(').nth(1).unwrap().split('%').next().unwrap();
        share.parse().unwrap()
    };
    let (whole, streamed) = (exact("0"), exact("3000"));
    assert!(whole > 80.0, "{whole}");
    assert!((whole - streamed).abs() <= 0.5, "{whole} vs {streamed}");
}

#[test]
fn files_are_merged_in_time_order_as_they_are_read() {
    // The trace split in two files by sender: read together they are the one trace.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(TRACE).unwrap();
    let (a, b): (Vec<&str>, Vec<&str>) = text
        .lines()
        .partition(|line| line.split_whitespace().nth(2) < Some("AP2"));
    let (path_a, path_b) = (dir.path().join("a.trace"), dir.path().join("b.trace"));
    std::fs::write(&path_a, a.join("\n") + "\n").unwrap();
    std::fs::write(&path_b, b.join("\n") + "\n").unwrap();
    let one = stdout_of(blackbox().args(["nest", "-q", TRACE, "--segment-lines", "3000"]));
    let two = stdout_of(
        blackbox()
            .args(["nest", "-q", "--segment-lines", "3000"])
            .arg(&path_a)
            .arg(&path_b),
    );
    assert_eq!(one, two);
}

#[test]
fn lines_later_than_their_segment_are_counted_and_told() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(TRACE).unwrap();
    // A call and its return from the trace's first second, written at its end.
    text.push_str("1.000000001 CALL_SENT client WS1 late\n1.000000002 RET_SENT WS1 client late\n");
    let path = dir.path().join("late.trace");
    std::fs::write(&path, text).unwrap();
    let (_, err) = outputs_of(
        blackbox()
            .args(["nest", "-q", "--segment-lines", "3000"])
            .arg(&path),
    );
    assert!(
        err.contains("skipped: 2 lines earlier than a segment already nested (the input is not in time order"),
        "{err}"
    );
}

#[test]
fn a_bad_line_in_a_later_segment_names_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(TRACE).unwrap();
    let line = text.lines().count() + 1;
    // After the trace's last line, so in its last segment.
    text.push_str("1800000000 CALLED a b x\n");
    let path = dir.path().join("bad.trace");
    std::fs::write(&path, text).unwrap();
    let assert = blackbox()
        .args(["nest", "-q", "--segment-lines", "3000"])
        .arg(&path)
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let expected = format!("{}:{line}: unknown op `CALLED`", path.display());
    assert!(err.contains(&expected), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn a_stretch_without_calls_is_counted_not_refused() {
    // Calls, then 3,000 free-form messages, then calls again: the middle segment has
    // no call pair, and its messages are still counted.
    let mut text = Vec::new();
    let mut t = 1.0f64;
    let mut call = 0;
    let mut calls = |text: &mut Vec<u8>, t: &mut f64, n: usize| {
        for _ in 0..n {
            call += 1;
            writeln!(text, "{:.6} CALL_SENT a b c{call}", *t).unwrap();
            writeln!(text, "{:.6} RET_SENT b a c{call}", *t + 0.001).unwrap();
            *t += 0.01;
        }
    };
    calls(&mut text, &mut t, 1_500);
    for k in 0..3_000 {
        writeln!(text, "{:.6} MSG_SENT x y m{k}", t).unwrap();
        t += 0.01;
    }
    calls(&mut text, &mut t, 1_500);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quiet.trace");
    std::fs::write(&path, text).unwrap();
    let doc = json(&[path.to_str().unwrap(), "--segment-lines", "2000"]);
    assert!(doc["input"]["streamed"]["segments"].as_u64().unwrap() >= 3);
    assert_eq!(doc["input"]["free_messages"], 3_000);
    assert_eq!(doc["input"]["call_pairs"], 3_000);
    assert_eq!(counts(&doc), vec![("a->b".to_owned(), 3_000)]);
}

#[test]
fn outputs_that_need_every_call_read_the_whole_trace() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let (_, err) = outputs_of(
        blackbox()
            .args(["nest", TRACE, "--segment-lines", "3000", "--html"])
            .arg(&html),
    );
    assert!(!err.contains("streamed"), "{err}");
    let (_, err) = outputs_of(blackbox().args(["nest", TRACE, "--segment-lines", "3000"]));
    assert!(err.contains("streamed: nested in "), "{err}");
}

#[test]
fn standard_input_streams_too() {
    let text = std::fs::read(TRACE).unwrap();
    let piped = stdout_of(
        blackbox()
            .args(["nest", "-q", "--segment-lines", "3000", "-"])
            .write_stdin(text),
    );
    let named = stdout_of(blackbox().args(["nest", "-q", "--segment-lines", "3000", TRACE]));
    assert_eq!(piped, named);
}

#[test]
fn captures_in_segments_are_read_once_and_count_every_call_once() {
    // The shop's five captures (3.3 MB, over 4 KB per line of a segment) in segments
    // of 700 lines: one pass for addresses and clocks that keeps the messages on disk,
    // then their message ends replayed as typed ends.
    let files = support::shop_captures();
    let args = |segment: &str| {
        let mut args: Vec<String> = vec!["--segment-lines".into(), segment.into()];
        args.extend(files.iter().cloned());
        args
    };
    let run = |segment: &str| -> serde_json::Value {
        let out = stdout_of(
            blackbox()
                .args(["nest", "-q", "--json", "-"])
                .args(args(segment)),
        );
        serde_json::from_str(&out).unwrap()
    };
    let (whole, streamed) = (run("0"), run("700"));
    assert!(whole["input"].get("streamed").is_none());
    assert!(streamed["input"]["streamed"]["segments"].as_u64().unwrap() >= 3);
    // Captures of less than 4 KB per line of a segment are read whole.
    assert_eq!(run("1000"), whole);
    for key in [
        "files",
        "observations",
        "messages",
        "seen_at_both_ends",
        "call_pairs",
    ] {
        assert_eq!(streamed["input"][key], whole["input"][key], "{key}");
    }
    assert_eq!(streamed["input"]["capture"], whole["input"]["capture"]);
    assert_eq!(
        streamed["input"]["lines"], 0,
        "packets were read, not lines"
    );
    let (a, b) = (counts(&whole), counts(&streamed));
    let top = |c: &[(String, u64)], signature: &str| {
        c.iter().find(|p| p.0 == signature).map_or(0, |p| p.1)
    };
    // Segments this small learn from about 250 requests each: within 5%.
    for signature in ["client->web(app(cache))", "client->web(app(db,cache))"] {
        let (x, y) = (top(&a, signature), top(&b, signature));
        assert!(x.abs_diff(y) * 20 <= x, "{signature}: {x} vs {y}");
    }
    // The report of reading is the first pass's: per capture, and the clocks aligned.
    let (_, err) = outputs_of(blackbox().args(["nest"]).args(args("700")));
    support::assert_contains_all(
        &err,
        &[
            "read 25431 packets from 5 captures",
            "streamed: nested in ",
            "matched at both ends",
        ],
    );
}

#[test]
fn kept_messages_nest_as_the_captures_do() {
    // Whole and in segments: the kept file, nested, gives the same patterns, byte for
    // byte, as the captures it was read from.
    let dir = tempfile::tempdir().unwrap();
    for segments in ["0", "700"] {
        let kept = dir.path().join(format!("kept-{segments}.trace"));
        let kept = kept.to_str().unwrap();
        let from_captures = stdout_of(
            blackbox()
                .args([
                    "nest",
                    "-q",
                    "--segment-lines",
                    segments,
                    "--keep-messages",
                    kept,
                ])
                .args(support::shop_captures()),
        );
        let from_kept =
            stdout_of(blackbox().args(["nest", "-q", "--segment-lines", segments, kept]));
        assert_eq!(from_captures, from_kept, "--segment-lines {segments}");
        let lines = std::fs::read_to_string(kept).unwrap().lines().count();
        assert_eq!(lines, 13440, "every message end of the shop, once");
        assert!(!std::path::Path::new(&format!("{kept}.partial")).exists());
    }
    // Text traces are not kept again; a file that cannot be written is named (exit 1),
    // and what was written stays FILE.partial, never FILE.
    let output = blackbox()
        .args(["nest", "-q", TRACE, "--keep-messages"])
        .arg(dir.path().join("again.trace"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("text traces already"));
    for segments in ["0", "700"] {
        let full = dir.path().join(format!("full-{segments}.trace"));
        std::os::unix::fs::symlink(
            "/dev/full",
            dir.path().join(format!("full-{segments}.trace.partial")),
        )
        .unwrap();
        let output = blackbox()
            .args(["nest", "-q", "--segment-lines", segments, "--keep-messages"])
            .arg(&full)
            .args(support::shop_captures())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1), "--segment-lines {segments}");
        let err = String::from_utf8_lossy(&output.stderr);
        let named = format!("cannot write {}.partial: No space left", full.display());
        assert!(err.contains(&named), "{err}");
        assert!(!full.exists());
    }
}

#[test]
fn a_temporary_directory_that_cannot_keep_the_messages_is_named() {
    // Captures in segments keep their messages in TMPDIR between reading and nesting:
    // where it cannot, the error names the capture and the directory, and no output is
    // half written.
    let mut nest = blackbox();
    nest.env("TMPDIR", "/nonexistent/blackbox-tmp")
        .args(["nest", "-q", "--segment-lines", "700"])
        .args(support::shop_captures());
    let output = nest.output().unwrap();
    // The machine's fault, not the input's (`blackbox::exit`).
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let err = String::from_utf8(output.stderr).unwrap();
    support::assert_contains_all(
        &err,
        &[
            "cannot keep the messages of ",
            ".pcap",
            "on disk in /nonexistent/blackbox-tmp (TMPDIR chooses the directory)",
        ],
    );
    assert!(!err.contains("panicked"), "{err}");
}
