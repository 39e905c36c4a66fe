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

/// (time ns, op, from, to, call id, truth) of each line, the time exact.
fn exact_lines(trace: &str) -> Vec<(i64, String, String, String, String, String)> {
    trace
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let (secs, frac) = f[0].split_once('.').unwrap();
            let ns = secs.parse::<i64>().unwrap() * 1_000_000_000
                + format!("{frac:0<9}").parse::<i64>().unwrap();
            (
                ns,
                f[1].into(),
                f[2].into(),
                f[3].into(),
                f[4].into(),
                f[5].into(),
            )
        })
        .collect()
}

/// Per call into `host` (a CALL_SENT line to it), in arrival order: (arrival, the host's
/// first action for the call's instance after it, the host's answer), from a trace of
/// sender-side lines (no network delay) where each instance calls `host` once.
fn services(trace: &str, host: &str) -> Vec<(i64, i64, i64)> {
    let l = exact_lines(trace);
    let mut out = Vec::new();
    for (k, (arrival, op, _, to, id, truth)) in l.iter().enumerate() {
        if op != "CALL_SENT" || to != host {
            continue;
        }
        let first = l[k + 1..]
            .iter()
            .find(|x| x.2 == host && &x.5 == truth)
            .expect("the host acts for every call")
            .0;
        let answer = l[k + 1..]
            .iter()
            .find(|x| x.1 == "RET_SENT" && &x.4 == id)
            .expect("every call is answered")
            .0;
        out.push((*arrival, first, answer));
    }
    out
}

/// A tier `b` behind 6 clients, each call into it making one call out to `c`.
const TIER: &str = "[[tracelet]]\nname = \"t\"\nparallel = 6\nthink = [\"0ms\", \"4ms\"]\nsteps = [\"call a b\", \"call b c after 1ms±0.2ms\", \"return c b after 2ms±0.5ms\", \"return b a after 1ms±0.2ms\"]\n";

#[test]
fn a_pool_of_one_worker_serves_one_call_at_a_time_in_arrival_order() {
    let dir = tempfile::tempdir().unwrap();
    // Without a pool the 6 clients' calls overlap at b.
    let free = services(
        &run(&[&config(dir.path(), TIER), "--messages", "4000", "-q"]),
        "b",
    );
    assert!(
        free.windows(2).any(|w| w[1].1 < w[0].2),
        "no overlap at all"
    );
    let pooled = config(dir.path(), &format!("[hosts.b]\nworkers = 1\n{TIER}"));
    let out = maketrace()
        .args([&pooled, "--messages", "4000"])
        .assert()
        .success()
        .get_output()
        .clone();
    let served = services(&String::from_utf8(out.stdout).unwrap(), "b");
    assert!(served.len() >= 999, "{}", served.len());
    // Each call's first action comes after the previous call's answer, and calls are
    // served in the order they arrived (no jitter): by arrival, services never overlap.
    for w in served.windows(2) {
        assert!(w[1].1 >= w[0].2, "overlapping services {w:?}");
    }
    // Calls did wait: many arrived while the one before was still being served.
    let waited = served.windows(2).filter(|w| w[1].0 < w[0].2).count();
    assert!(
        waited > served.len() / 4,
        "{waited} of {} waited",
        served.len()
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        predicate::str::is_match(
            r"maketrace: b \(1 worker\): \d+ calls took a worker, \d+ \(\d+\.\d%\) waited for one; wait mean \d+\.\d+ ms, p99 \d+\.\d+ ms, max"
        )
        .unwrap()
        .eval(&stderr),
        "{stderr}"
    );
}

#[test]
fn queue_jitter_perturbs_the_order_of_service() {
    let dir = tempfile::tempdir().unwrap();
    let pooled = config(
        dir.path(),
        &format!("[hosts.b]\nworkers = 1\nqueue_jitter = \"3ms\"\n{TIER}"),
    );
    let served = services(&run(&[&pooled, "--messages", "4000", "-q"]), "b");
    // Still one at a time, but not always in arrival order.
    let mut by_service = served.clone();
    by_service.sort_by_key(|s| s.1);
    for w in by_service.windows(2) {
        assert!(w[1].1 >= w[0].2, "overlapping services {w:?}");
    }
    let overtaken = served.windows(2).filter(|w| w[1].1 < w[0].1).count();
    assert!(overtaken > 10, "{overtaken} calls overtook the one before");
}

#[test]
fn a_proxy_forwards_no_more_calls_at_once_than_it_has_workers() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        "[hosts.web]\nworkers = 2\n[[tracelet]]\nname = \"t\"\nparallel = 8\nthink = [\"0ms\", \"2ms\"]\nsteps = [\"call client web\", \"call web app after 0.1ms\", \"return app web after 2ms±0.5ms\", \"return web client after 0.1ms\"]\n",
    );
    let l = exact_lines(&run(&[&c, "--messages", "8000", "-q"]));
    // The most calls open at once from one node to another.
    let most_open = |from: &str, to: &str| {
        let mut open = 0i32;
        let mut most = 0;
        for x in &l {
            if (x.1.as_str(), x.2.as_str(), x.3.as_str()) == ("CALL_SENT", from, to) {
                open += 1;
            } else if (x.1.as_str(), x.2.as_str(), x.3.as_str()) == ("RET_SENT", to, from) {
                open -= 1;
            }
            most = most.max(open);
        }
        most
    };
    assert_eq!(most_open("web", "app"), 2);
    assert!(most_open("client", "web") > 4);
}

#[test]
fn pooled_workers_carry_their_calls_out_on_their_own_connections() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(
        dir.path(),
        "[hosts.web]\nworkers = 3\n[[tracelet]]\nname = \"t\"\nparallel = 10\nthink = [\"0ms\", \"2ms\"]\nsteps = [\"call client web\", \"call web app after 0.1ms\", \"return app web after 2ms±0.5ms\", \"return web client after 0.1ms\"]\n",
    );
    let pcap = dir.path().join("pcap");
    maketrace()
        .args([
            &c,
            "--messages",
            "4000",
            "-q",
            "--connections",
            "worker-pool",
        ])
        .arg("--pcap")
        .arg(&pcap)
        .assert()
        .success();
    // Calls by their connection (caller's address and port): web (10.0.0.2) forwards
    // on one keep-alive connection per worker, though ten clients call it at once.
    let truth = std::fs::read_to_string(pcap.join("truth.tsv")).unwrap();
    let connections = |from: &str| {
        let mut ports: Vec<&str> = truth
            .lines()
            .filter(|l| l.starts_with(&format!("tcp:{from}:")))
            .map(|l| l.split('>').next().unwrap())
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports.len()
    };
    assert_eq!(connections("10.0.0.2"), 3);
    assert!(connections("10.0.0.1") > 3);
}

#[test]
fn pool_config_errors_name_the_host_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    for (hosts, expected) in [
        (
            "[hosts.bb]\nworkers = 2\n",
            "[hosts.bb]: no tracelet has a node `bb` (the nodes: a, b, c)",
        ),
        (
            "[hosts.b]\nworkers = 0\n",
            "[hosts.b]: workers = 0: must be at least 1",
        ),
        (
            "[hosts.b]\nqueue_jitter = \"1ms\"\n",
            "[hosts.b]: `workers` is missing",
        ),
        (
            "[hosts.b]\nworkers = 2\nqueue_jitter = \"1 fortnight\"\n",
            "[hosts.b]: queue_jitter `1 fortnight`",
        ),
        ("[hosts.b]\nworker = 2\n", "unknown field `worker`"),
    ] {
        let c = config(dir.path(), &format!("{hosts}{TIER}"));
        maketrace()
            .arg(&c)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(expected));
    }
    // Pools that could wait on each other in a loop are refused.
    let c = config(
        dir.path(),
        "[hosts.b]\nworkers = 1\n[hosts.c]\nworkers = 1\n[[tracelet]]\nname = \"down\"\nsteps = [\"call a b\", \"call b c\", \"return c b\", \"return b a\"]\n[[tracelet]]\nname = \"up\"\nsteps = [\"call a c\", \"call c b\", \"return b c\", \"return c a\"]\n",
    );
    maketrace()
        .arg(&c)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "[hosts.b]: the pools of b → c → b could deadlock",
        ));
}

#[test]
fn the_pooled_shop_is_the_same_for_the_same_seed_and_queues_at_app() {
    let args = |seed: &'static str| {
        [
            "traces/configs/shop-pool.toml",
            "--messages",
            "50000",
            "--parallel-factor",
            "2",
            "--network-delay",
            "100us±20us",
            "--seed",
            seed,
        ]
    };
    let a = maketrace()
        .args(args("4"))
        .assert()
        .success()
        .get_output()
        .clone();
    let b = maketrace()
        .args(args("4"))
        .assert()
        .success()
        .get_output()
        .clone();
    let c = run(&args("5"));
    assert_eq!(a.stdout, b.stdout);
    assert_eq!(a.stderr, b.stderr);
    assert_ne!(a.stdout, c.as_bytes());
    let stderr = String::from_utf8(a.stderr).unwrap();
    let app = stderr
        .lines()
        .find(|l| l.starts_with("maketrace: app (8 workers)"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let mean_ms: f64 = app
        .split("wait mean ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(app.contains(" ms, p99") && mean_ms > 1.0, "{app}");
}
