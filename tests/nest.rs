//! End-to-end tests of `blackbox nest`: every flag on the shipped sample trace, the
//! paper's worked examples, and every kind of bad input. Golden files live in
//! `tests/data/`; `BLACKBOX_BLESS=1 cargo test` rewrites them from the current output.

mod support;

use predicates::prelude::*;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use support::{blackbox, blackbox_stdout, data, golden, json_written_by, written_by};

const SAMPLE: &str = "tests/data/multitier-sample.trace";

#[test]
fn table_of_the_sample_matches_golden() {
    golden(
        "multitier-sample.table",
        &blackbox_stdout(&["nest", "--quiet", SAMPLE]),
    );
}

#[test]
fn figure_2_prints_a_calls_b_calls_c_and_d() {
    let out = blackbox_stdout(&["nest", "-q", data("figure2.trace").to_str().unwrap()]);
    assert_eq!(
        out,
        "rank  count  total latency  mean latency  sure  adds most  pattern\n   1      1        10.00 s       10.00 s  100%  B 6.000 s  A->B(C,D)\n"
    );
}

#[test]
fn figure_5_json_shows_the_medium_delays() {
    let doc = json_written_by(&["nest", "-q", data("figure5.trace").to_str().unwrap()]);
    let pattern = &doc["patterns"][0];
    assert_eq!(pattern["signature"], "A->B(C)");
    assert_eq!(pattern["count"], 2);
    let child = &pattern["tree"]["children"][0];
    assert_eq!(child["call_delay_s"]["mean"], 2.0);
    assert_eq!(child["call_delay_s"]["p99"], 2.0);
}

#[test]
fn top_limits_rows_and_says_how_many_are_hidden() {
    let out = blackbox_stdout(&["nest", "-q", "--top", "3", SAMPLE]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(lines[1].trim_start().starts_with("1 "));
    assert!(lines[4].starts_with("(22 more patterns not shown"), "{out}");
}

#[test]
fn min_count_hides_rare_patterns() {
    let out = blackbox_stdout(&["nest", "-q", "--min-count", "30", SAMPLE]);
    let counts: Vec<u64> = out
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('('))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert!(!counts.is_empty());
    assert!(counts.iter().all(|&c| c >= 30), "{counts:?}");
}

#[test]
fn sort_orders_by_the_chosen_key() {
    for (key, field) in [
        ("count", "count"),
        ("total", "total_latency_s"),
        ("mean", "mean_latency_s"),
    ] {
        let doc = json_written_by(&["nest", "-q", "--sort", key, SAMPLE]);
        let values: Vec<f64> = doc["patterns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[field].as_f64().unwrap())
            .collect();
        assert!(
            values.windows(2).all(|w| w[0] >= w[1]),
            "--sort {key} not descending: {values:?}"
        );
        assert_eq!(doc["sort"], key);
    }
}

#[test]
fn json_has_the_design_fields_and_input_counts() {
    let doc = json_written_by(&["nest", "-q", "--top", "2", SAMPLE]);
    assert_eq!(doc["algorithm"], "nesting");
    assert_eq!(doc["input"]["messages"], 3916);
    assert_eq!(doc["input"]["call_pairs"], 1958);
    for key in [
        "unmatched_calls",
        "unmatched_returns",
        "free_messages",
        "blank_or_comment_lines",
        "cycles_broken",
        "orphans",
        "late_children",
    ] {
        assert!(doc["input"][key].is_u64(), "input.{key} missing");
    }
    assert_eq!(doc["patterns_total"], 25);
    let patterns = doc["patterns"].as_array().unwrap();
    assert_eq!(patterns.len(), 2);
    let first = &patterns[0];
    assert_eq!(first["rank"], 1);
    let count = first["count"].as_f64().unwrap();
    let total = first["total_latency_s"].as_f64().unwrap();
    assert!((first["mean_latency_s"].as_f64().unwrap() - total / count).abs() < 1e-12);
    let tree = &first["tree"];
    assert_eq!(tree["caller"], "client");
    for key in ["mean", "p50", "p90", "p99"] {
        assert!(tree["latency_s"][key].is_f64() && tree["call_delay_s"][key].is_f64());
    }
    assert!((tree["latency_s"]["mean"].as_f64().unwrap() - total / count).abs() < 1e-12);
    let signature = first["signature"].as_str().unwrap();
    let child_names: Vec<&str> = tree["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["node"].as_str().unwrap())
        .collect();
    assert!(
        signature.starts_with(&format!(
            "client->{}({}",
            tree["node"].as_str().unwrap(),
            child_names[0]
        )),
        "{signature}"
    );
}

#[test]
fn assignments_give_every_call_a_parent_row_in_the_design_format() {
    assert_eq!(
        written_by(
            &["nest", "-q", data("figure2.trace").to_str().unwrap()],
            "--assignments"
        ),
        "A\tB\t1\t1.000000\t-\t-\t-\t1.000\nB\tC\t2\t3.000000\tA\tB\t1\t1.000\nB\tD\t3\t7.000000\tA\tB\t1\t1.000\n"
    );
    let text = written_by(&["nest", "-q", SAMPLE], "--assignments");
    assert_eq!(text.lines().count(), 1958);
    // The design's seven fields, then the confidence of the choice.
    assert!(text.lines().all(|l| l.split('\t').count() == 8));
    assert!(text
        .lines()
        .all(|l| (0.0..=1.0).contains(&l.rsplit('\t').next().unwrap().parse::<f64>().unwrap())));
    assert_eq!(
        text.lines().filter(|l| l.contains("\t-\t-\t-\t")).count(),
        500
    );
}

#[test]
fn dot_writes_one_figure_8_graph_per_shown_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("graphs");
    blackbox()
        .args([
            "nest",
            "-q",
            "--top",
            "4",
            "--dot",
            out.to_str().unwrap(),
            SAMPLE,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .success();
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "pattern-001.dot",
            "pattern-002.dot",
            "pattern-003.dot",
            "pattern-004.dot"
        ]
    );
    golden(
        "multitier-sample-pattern-001.dot",
        &std::fs::read_to_string(out.join("pattern-001.dot")).unwrap(),
    );
}

#[test]
fn dot_of_figure_2_labels_nodes_with_latency_and_edges_with_delay() {
    let dir = tempfile::tempdir().unwrap();
    blackbox()
        .args([
            "nest",
            "-q",
            "--dot",
            dir.path().to_str().unwrap(),
            data("figure2.trace").to_str().unwrap(),
        ])
        .assert()
        .success();
    let dot = std::fs::read_to_string(dir.path().join("pattern-001.dot")).unwrap();
    for expected in [
        r#"caller -> n0 [label="1 request, 10.00 s in all"]"#,
        r##"n0[label="B\n10.00 s, 6.000 s own\nadds the most" color="#d93025""##,
        r#"n0 -> n1 [label="called after 2.000 s"]"#,
        r#"n0 -> n2 [label="called after 6.000 s"]"#,
        r#"n2[label="D\n2.000 s, 2.000 s own"]"#,
    ] {
        assert!(dot.contains(expected), "missing {expected} in\n{dot}");
    }
}

#[test]
fn algorithm_flags_are_accepted_and_change_the_result() {
    let base = blackbox_stdout(&["nest", "-q", SAMPLE]);
    let no_overlap = blackbox_stdout(&["nest", "-q", "--overlap-penalty", "0", SAMPLE]);
    assert_ne!(
        base, no_overlap,
        "the overlap penalty should matter on an overlapping trace"
    );
    let same = blackbox_stdout(&["nest", "-q", "--same-penalty", "3", SAMPLE]);
    assert_ne!(base, same);
    let generic = blackbox_stdout(&["nest", "-q", "--generic-penalty", "3", SAMPLE]);
    assert_ne!(base, generic);
    let coarse = blackbox_stdout(&[
        "nest",
        "-q",
        "--bin-base",
        "2",
        "--bin-floor",
        "1ms",
        "--bin-ceiling",
        "10s",
        SAMPLE,
    ]);
    assert_ne!(base, coarse);
    // Skew window and smoothing run; on a skew-free trace they must not lose instances.
    let skew = blackbox_stdout(&[
        "nest",
        "-q",
        "--skew-window",
        "200us",
        "--smooth",
        "2",
        SAMPLE,
    ]);
    let total = |table: &str| {
        table
            .lines()
            .skip(1)
            .filter(|l| !l.starts_with('('))
            .map(|l| l.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap())
            .sum::<u64>()
    };
    assert_eq!(total(&base), 500);
    assert!(total(&skew) <= 500 && total(&skew) > 0);
}

#[test]
fn several_files_are_merged_into_one_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.trace"), dir.path().join("b.trace"));
    std::fs::write(
        &a,
        "1 CALL_SENT A B 1\n3 CALL_SENT B C 2\n5 RET_RECV C B 2\n11 RET_RECV B A 1\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "1.1 CALL_RECV A B 1\n3.1 CALL_RECV B C 2\n4.9 RET_SENT C B 2\n10.9 RET_SENT B A 1\n",
    )
    .unwrap();
    blackbox()
        .args(["nest", a.to_str().unwrap(), b.to_str().unwrap()])
        .assert()
        .success()
        .stdout(predicate::str::contains("A->B(C)"))
        .stderr(
            predicate::str::contains("from 2 files")
                .and(predicate::str::contains("4 seen at both ends")),
        );
}

/// Host captures come in any order; the answer must not depend on it.
#[test]
fn file_order_does_not_change_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let sample =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(SAMPLE)).unwrap();
    // Split the sample by the host that saw each line: senders' ends in one file, receivers' in another.
    let (mut sent, mut received) = (String::new(), String::new());
    for line in sample.lines().filter(|l| !l.starts_with('#')) {
        let host = if line.contains("_SENT") {
            &mut sent
        } else {
            &mut received
        };
        host.push_str(line);
        host.push('\n');
    }
    let (a, b) = (
        dir.path().join("sent.trace"),
        dir.path().join("received.trace"),
    );
    std::fs::write(&a, sent).unwrap();
    std::fs::write(&b, received).unwrap();
    let run = |first: &Path, second: &Path, assignments: &Path| {
        let out = blackbox()
            .args([
                "nest",
                "-q",
                "--assignments",
                assignments.to_str().unwrap(),
                first.to_str().unwrap(),
                second.to_str().unwrap(),
            ])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        (out, std::fs::read(assignments).unwrap())
    };
    let forward = run(&a, &b, &dir.path().join("1.tsv"));
    let backward = run(&b, &a, &dir.path().join("2.tsv"));
    assert_eq!(forward, backward);
    assert_eq!(
        forward.0,
        blackbox_stdout(&["nest", "-q", SAMPLE]).into_bytes()
    );
}

/// 100 requests into `app`, each calling `db` inside it, except the last, whose `db`
/// call returns 20 µs after `app` answered, while the next request is open.
fn trace_with_one_late_return() -> String {
    let mut lines = String::new();
    for i in 0..100u64 {
        let t = 1_000 + i * 10;
        let db_end = if i == 99 { t + 8 } else { t + 6 };
        lines += &format!(
            "{t}.000 CALL client app r{i}\n{t}.002 CALL app db d{i}\n{db_end}.020 RET db app d{i}\n{}.000 RET app client r{i}\n",
            t + 8
        );
    }
    // A request from another client open when the late call left, answered first.
    lines += "1989.000 CALL other app x\n1997.500 RET app other x\n";
    lines
}

#[test]
fn a_late_return_keeps_its_parent_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.trace");
    std::fs::write(&t, trace_with_one_late_return()).unwrap();
    let parent_of_the_late_call = |algorithm: &str| {
        let assignments = dir.path().join(format!("{algorithm}.tsv"));
        let run = blackbox()
            .args(["nest", "--algorithm", algorithm, "--assignments"])
            .arg(&assignments)
            .arg(&t)
            .assert()
            .success();
        let stderr = String::from_utf8(run.get_output().stderr.clone()).unwrap();
        let rows = std::fs::read_to_string(&assignments).unwrap();
        let row = rows
            .lines()
            .find(|l| l.starts_with("app\tdb\td99\t"))
            .expect("a row for the late call")
            .split('\t')
            .map(str::to_owned)
            .collect::<Vec<_>>();
        (row[4..7].join(" "), stderr)
    };
    let (parent, stderr) = parent_of_the_late_call("joint");
    assert_eq!(parent, "client app r99");
    assert!(
        stderr.contains("late returns: 1 call enclosed by no call"),
        "{stderr}"
    );
    // The paper's algorithm keeps its containment test: the call is a root.
    let (parent, stderr) = parent_of_the_late_call("paper");
    assert_eq!(parent, "- - -");
    assert!(!stderr.contains("late returns"), "{stderr}");
}

#[test]
fn summary_on_stderr_counts_what_was_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.trace");
    std::fs::write(
        &t,
        "# c\n1 CALL A B 1\n2 RET B A 1\n3 CALL A B 2\n4 RET B A 9\n5 MSG A C -\n",
    )
    .unwrap();
    blackbox()
        .args(["nest", t.to_str().unwrap()])
        .assert()
        .success()
        .stderr(
            predicate::str::contains("1 blank or comment line")
                .and(predicate::str::contains("1 unmatched call,"))
                .and(predicate::str::contains("1 unmatched return,"))
                .and(predicate::str::contains("1 free-form message")),
        );
}

#[test]
fn a_line_missing_a_field_is_named_with_file_and_line() {
    let path = data("bad-missing-field.trace");
    blackbox()
        .args(["nest", path.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(format!("{}:2: expected 5 fields", path.display()))
                .and(predicate::str::contains("`2 CALL_SENT a`")),
        );
}

#[test]
fn an_unknown_op_is_named_with_file_and_line() {
    blackbox()
        .args(["nest", data("bad-op.trace").to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "bad-op.trace:2: unknown op `CALLED`",
        ));
}

#[test]
fn a_bad_timestamp_is_named_with_file_and_line() {
    blackbox()
        .args(["nest", data("bad-timestamp.trace").to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "bad-timestamp.trace:2: bad timestamp `17:05:01`: not a decimal number",
        ));
}

#[test]
fn a_trace_without_calls_points_to_convolve() {
    blackbox()
        .args(["nest", data("free-only.trace").to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("no call was matched")
                .and(predicate::str::contains("convolve")),
        );
}

#[test]
fn a_missing_file_is_named() {
    blackbox()
        .args(["nest", "no/such.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "cannot read no/such.trace: No such file",
        ));
}

#[test]
fn bad_option_values_are_refused() {
    blackbox()
        .args(["nest", "--skew-window", "3d", SAMPLE])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown unit"));
    blackbox()
        .args(["nest", "--bin-base", "0.5", SAMPLE])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bin base must be greater than 1"));
}

#[test]
fn help_explains_every_flag() {
    let help = blackbox_stdout(&["nest", "--help"]);
    for flag in [
        "--top",
        "--sort",
        "--min-count",
        "--dot",
        "--json",
        "--assignments",
        "--skew-window",
        "--smooth",
        "--overlap-penalty",
        "--same-penalty",
        "--generic-penalty",
        "--bin-base",
        "--bin-floor",
        "--bin-ceiling",
        "--quiet",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
    assert!(help.contains("[default: 2]") && help.contains("[default: 1.05]"));
}

/// A crafted chain of calls thousands deep must give an error, not overflow the stack.
#[test]
fn a_very_deep_call_chain_is_refused_by_json_without_crashing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.trace");
    let depth = 5_000;
    let mut text = String::new();
    for i in 0..depth {
        text.push_str(&format!("{i} CALL n{i} n{} c{i}\n", i + 1));
        text.push_str(&format!("{} RET n{} n{i} c{i}\n", 2 * depth - i, i + 1));
    }
    std::fs::write(&path, text).unwrap();
    let json = dir.path().join("deep.json");
    blackbox()
        .args([
            "nest",
            "-q",
            "--json",
            json.to_str().unwrap(),
            path.to_str().unwrap(),
        ])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "pattern 1 is 5000 calls deep; JSON output nests at most 1000",
        ));
    let table = blackbox_stdout(&[
        "nest",
        "-q",
        "--dot",
        dir.path().to_str().unwrap(),
        path.to_str().unwrap(),
    ]);
    assert!(table.contains("n0->n1(n2(n3("), "{}", &table[..200]);
}

/// `blackbox nest ... | head` must exit quietly when the reader goes away.
#[test]
fn closing_stdout_early_exits_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.trace");
    // Thousands of distinct patterns: far more table than a pipe buffer holds.
    let text: String = (0..20_000)
        .map(|i| format!("{i} CALL client service{i} c{i}\n{i}.5 RET service{i} client c{i}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("blackbox"))
        .args(["nest", "-q", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap(); // then dropped: the pipe closes
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "exit {status:?}, stderr: {stderr}");
    assert_eq!(stderr, "");
}

#[test]
fn explain_of_figure_5_shows_the_overlap_penalty_that_decided() {
    let fig5 = data("figure5.trace");
    let out = blackbox_stdout(&["nest", "--quiet", fig5.to_str().unwrap(), "--explain", "c2"]);
    golden("figure5-explain-c2.txt", &out);
    assert!(out.contains("Chosen: A → B (id p2)"), "{out}");
}

/// `--explain` replays the decision on its own; it must reach the parent the run chose,
/// for calls with many candidates as well as roots.
#[test]
fn explain_agrees_with_the_assignments_call_by_call() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("assignments.tsv");
    blackbox_stdout(&[
        "nest",
        "-q",
        SAMPLE,
        "--assignments",
        file.to_str().unwrap(),
    ]);
    let assignments = std::fs::read_to_string(&file).unwrap();
    let rows: Vec<Vec<&str>> = assignments
        .lines()
        .filter(|l| l.contains('\t'))
        .map(|l| l.split('\t').collect())
        .collect();
    assert!(rows.len() > 100, "{} assignment rows", rows.len());
    let mut roots = 0;
    for row in rows.iter().step_by(rows.len() / 25) {
        let query = format!("{} {} {}", row[0], row[1], row[3]);
        let out = blackbox_stdout(&["nest", "-q", SAMPLE, "--explain", &query]);
        let expected = if row[4] == "-" {
            roots += 1;
            "it starts a path (a root)".to_owned()
        } else {
            format!("Chosen: {} → {} (id {})", row[4], row[5], row[6])
        };
        assert!(
            out.contains(&expected) && out.contains(&format!("(id {})", row[2])),
            "{query}: expected {expected:?} in\n{out}"
        );
    }
    assert!(
        roots > 0 && roots < 25,
        "{roots} roots among the sampled calls"
    );
}

#[test]
fn explain_refuses_unknown_calls_and_malformed_queries() {
    let fig5 = data("figure5.trace");
    let fig5 = fig5.to_str().unwrap();
    blackbox()
        .args(["nest", "-q", fig5, "--explain", "nope"])
        .assert()
        // Bad input of any kind exits 2, an unknown call as much as a malformed query.
        .code(2)
        .stderr(predicate::str::contains("no call with id \"nope\""));
    blackbox()
        .args(["nest", "-q", fig5, "--explain", "A B"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("SENDER RECEIVER TIME"));
}

/// The what-if checked against the system itself (issue 46): traces/configs/what-if.toml
/// has a front end waiting for two services called in parallel, SLOW with 47.5 ms
/// injected (95 ms) and FAST (70 ms); what-if-fixed.toml is the same without the
/// delay. Removing it is SLOW's own time 50% shorter, and the request is then 24 ms
/// shorter, not 47.5: FAST becomes the call waited for. The what-if, computed on each
/// request's critical path up to that point, must predict the measured saving within
/// 10%, and the critical path must name SLOW.
#[test]
fn the_what_if_of_removing_an_injected_delay_predicts_the_measured_saving() {
    use support::generated::Generation;
    let nested = |config: &str| {
        let trace = Generation::messages(config, 20_000).trace();
        let nesting = blackbox::nesting::nest(&trace, &Default::default()).unwrap();
        let top = nesting
            .patterns
            .iter()
            .max_by_key(|p| p.count())
            .unwrap()
            .clone();
        assert_eq!(top.signature, "client->FE(SLOW,FAST)");
        assert!(top.count() > 3_000, "{}", top.count());
        (trace, top)
    };
    let (trace, delayed) = nested("what-if");
    let (_, fixed) = nested("what-if-fixed");
    let measured = delayed.mean_latency() - fixed.mean_latency();
    let slow = delayed
        .positions
        .iter()
        .position(|p| trace.node_name(p.node) == "SLOW")
        .unwrap();
    let predicted = delayed.positions[slow].mean_savings(false)[1];
    assert!(
        (predicted - measured).abs() <= 0.1 * measured,
        "predicted {predicted} ns, measured {measured} ns"
    );
    // Half SLOW's own time would have said twice the saving.
    let own = delayed.mean_own_times()[slow];
    assert!(0.5 * own > 1.8 * measured, "{own} vs {measured}");
    // The critical path names SLOW: it holds the most of it and saves the most.
    let fixes = blackbox::report::own_time::fixes(&delayed);
    assert_eq!((fixes[0].position, fixes[0].transit), (slow, false));
    let fast = 3 - slow;
    assert_eq!(delayed.positions[fast].mean_critical(), (0.0, 0.0));
}
