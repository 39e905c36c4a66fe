//! End-to-end tests of `maketrace`.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::Path;

fn maketrace() -> Command {
    let mut cmd = Command::cargo_bin("maketrace").expect("the binary is built");
    cmd.current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    cmd
}

fn run(args: &[&str]) -> String {
    String::from_utf8(
        maketrace()
            .args(args)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone(),
    )
    .unwrap()
}

fn config(dir: &Path, text: &str) -> String {
    let path = dir.join("c.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// (time s, op, from, to, id, truth) of each line.
fn lines(trace: &str) -> Vec<(f64, String, String, String, String, String)> {
    trace
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (
                f[0].parse().unwrap(),
                f[1].into(),
                f[2].into(),
                f[3].into(),
                f[4].into(),
                f[5].into(),
            )
        })
        .collect()
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let a = run(&[
        "traces/configs/multitier.toml",
        "--duration",
        "5s",
        "--seed",
        "7",
        "-q",
    ]);
    let b = run(&[
        "traces/configs/multitier.toml",
        "--duration",
        "5s",
        "--seed",
        "7",
        "-q",
    ]);
    let c = run(&[
        "traces/configs/multitier.toml",
        "--duration",
        "5s",
        "--seed",
        "8",
        "-q",
    ]);
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.lines().count() > 1000);
}

#[test]
fn delays_think_times_and_counts_match_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        "[[tracelet]]\nname = \"t\"\nparallel = 1\nthink = [\"10ms\", \"30ms\"]\nsteps = [\"call a b\", \"return b a after 5ms±1ms\"]\n",
    );
    let trace = run(&[&c, "--messages", "4000", "--resolution", "1ns", "-q"]);
    let l = lines(&trace);
    assert!((4000..4002).contains(&l.len()), "{}", l.len());
    // Service delay: call to return of each instance.
    let service: Vec<f64> = l.chunks(2).map(|p| p[1].0 - p[0].0).collect();
    let (mean, sd) = mean_sd(&service);
    let n = service.len() as f64;
    assert!((mean - 0.005).abs() < 3.0 * 0.001 / n.sqrt(), "mean {mean}");
    assert!((sd - 0.001).abs() < 0.1 * 0.001, "sd {sd}");
    // Think time: uniform on [10 ms, 30 ms], mean 20 ms, sd 20/√12 ms.
    let think: Vec<f64> = l
        .chunks(2)
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| w[1][0].0 - w[0][1].0)
        .collect();
    let (mean, _) = mean_sd(&think);
    assert!(
        (mean - 0.020).abs() < 3.0 * 0.00577 / (think.len() as f64).sqrt(),
        "think mean {mean}"
    );
    assert!(think
        .iter()
        .all(|&t| (0.010 - 1e-9..=0.030 + 1e-9).contains(&t)));
    // Every message carries its instance as the truth column; instances are distinct.
    assert!(l.chunks(2).all(|p| p[0].5 == p[1].5 && p[0].4 == p[1].4));
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[test]
fn alternatives_are_chosen_once_per_instance() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        "[alternatives]\nS = [\"s1\", \"s2\"]\n[[tracelet]]\nname = \"t\"\nparallel = 3\nsteps = [\"call a S\", \"call S db after 1ms\", \"return db S after 1ms\", \"return S a after 1ms\"]\n",
    );
    let l = lines(&run(&[&c, "--messages", "2000", "-q"]));
    let mut per_instance: std::collections::HashMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for (_, _, from, to, _, truth) in &l {
        for node in [from, to] {
            if node.starts_with('s') {
                per_instance
                    .entry(truth.clone())
                    .or_default()
                    .insert(node.clone());
            }
        }
    }
    assert!(per_instance.values().all(|s| s.len() == 1));
    let s1 = per_instance.values().filter(|s| s.contains("s1")).count();
    assert!(
        s1 > 150 && s1 < per_instance.len() - 150,
        "{s1} of {}",
        per_instance.len()
    );
}

#[test]
fn network_delay_writes_both_ends() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        "[[tracelet]]\nname = \"t\"\nsteps = [\"call a b\", \"return b a after 1ms\"]\n",
    );
    let l = lines(&run(&[
        &c,
        "--messages",
        "10",
        "--network-delay",
        "100us±10us",
        "-q",
    ]));
    let ops: std::collections::BTreeSet<&str> = l.iter().map(|x| x.1.as_str()).collect();
    assert_eq!(
        ops.into_iter().collect::<Vec<_>>(),
        ["CALL_RECV", "CALL_SENT", "RET_RECV", "RET_SENT"]
    );
    assert_eq!(l.len(), 20);
}

#[test]
fn loss_models_drop_and_say_so() {
    maketrace()
        .args([
            "traces/configs/multitier.toml",
            "--duration",
            "10s",
            "--drop-rate",
            "0.05",
        ])
        .assert()
        .success()
        .stderr(
            predicate::str::is_match(
                r"dropped \d+ \([3-7]\.\d\d%\): \d+ at random, 0 by the sniffer queue",
            )
            .unwrap(),
        );
    maketrace()
        .args([
            "traces/configs/multitier.toml",
            "--duration",
            "10s",
            "--sniffer-rate",
            "300",
        ])
        .assert()
        .success()
        .stderr(predicate::str::is_match(r"0 at random, [1-9]\d* by the sniffer queue").unwrap());
}

#[test]
fn config_errors_name_the_tracelet_and_step_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        "[[tracelet]]\nname = \"t\"\nsteps = [\"call a b\", \"return c a\"]\n",
    );
    maketrace()
        .arg(&c)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "tracelet `t`, step 2 (`return c a`): a return with no open call from a to c",
        ));
    let c = config(
        dir.path(),
        "[[tracelet]]\nname = \"t\"\nsteps = [\"call a b after 1ms±-2ms\", \"return b a\"]\n",
    );
    maketrace()
        .arg(&c)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("a negative sd"));
    let c = config(
        dir.path(),
        "[[tracelet]]\nname = \"t\"\nsteps = [\"call a b\", \"return b a\"]\nthinks = []\n",
    );
    maketrace()
        .arg(&c)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown field `thinks`"));
}

/// `blackbox nest -q ARGS... --json FILE TRACE`, the JSON read back.
fn nest_json(trace: &Path, args: &[&str]) -> serde_json::Value {
    let json = trace.with_extension("json");
    Command::cargo_bin("blackbox")
        .unwrap()
        .args(["nest", "-q"])
        .args(args)
        .arg("--json")
        .arg(&json)
        .arg(trace)
        .assert()
        .success();
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

/// The pattern with this signature in `nest --json` output.
fn pattern<'a>(doc: &'a serde_json::Value, signature: &str) -> &'a serde_json::Value {
    doc["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["signature"] == signature)
        .unwrap_or_else(|| panic!("no pattern {signature}"))
}

#[test]
fn blackbox_finds_the_added_delay_at_ws2() {
    // Paper section 7.2, on a trace of 100,000 messages (a short trace leaves the mean of
    // one pattern's call delay noisier than the 5% asked).
    let normal = run(&[
        "traces/configs/multitier.toml",
        "--messages",
        "100000",
        "-q",
        "--seed",
        "3",
    ]);
    let added = run(&[
        "traces/configs/multitier-added-delay.toml",
        "--messages",
        "100000",
        "-q",
        "--seed",
        "3",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let mean_ws2_to_ap = |trace: &str, name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, trace).unwrap();
        let doc = nest_json(&path, &[]);
        pattern(&doc, "client->WS2(AUTH,AP1(DB))")["tree"]["children"][1]["call_delay_s"]["mean"]
            .as_f64()
            .unwrap()
    };
    let extra = mean_ws2_to_ap(&added, "added") - mean_ws2_to_ap(&normal, "normal");
    assert!(
        (extra - 0.200).abs() < 0.200 * 0.05,
        "extra delay at WS2: {extra} s"
    );
}

#[test]
fn write_backs_join_their_requests_with_an_async_window_and_are_marked_in_the_json() {
    let trace = run(&[
        "traces/configs/write-back.toml",
        "--messages",
        "20000",
        "-q",
        "--seed",
        "5",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wb.trace");
    std::fs::write(&path, trace).unwrap();
    // The truth follows the window: a write-back's parent is its instance's cache call.
    let out = Command::cargo_bin("blackbox")
        .unwrap()
        .args(["eval", "--async-window", "20ms"])
        .arg(&path)
        .assert()
        .success()
        .get_output()
        .clone();
    let text = String::from_utf8(out.stdout).unwrap() + &String::from_utf8(out.stderr).unwrap();
    let at = text.find("instances inferred exactly: ").unwrap();
    let exact: f64 = text[at..]
        .split(['(', '%'])
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        text.contains("asynchronous children: "),
        "summary line missing:\n{text}"
    );
    assert!(exact >= 75.0, "{text}");
    let doc = nest_json(&path, &["--async-window", "20ms"]);
    let db = &pattern(&doc, "client->WEB(AUTH,CACHE(DB))")["tree"]["children"][1]["children"][0];
    assert_eq!(db["node"], "DB");
    assert_eq!(db["unawaited_share"], 1.0);
    assert_eq!(doc["options"]["async_window_s"], 0.02);
    // Its DB call is made while the cache call is open, but the pattern also holds the
    // hits that were wrongly given a write-back.
    let share = pattern(&doc, "client->WEB(CACHE(DB))")["tree"]["children"][0]["children"][0]
        ["unawaited_share"]
        .as_f64()
        .unwrap_or(0.0);
    assert!(share < 0.2, "read-miss DB calls after the answer: {share}");
}
