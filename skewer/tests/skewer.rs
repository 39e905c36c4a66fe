//! End-to-end tests of `skewer`, with maketrace and blackbox.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn skewer() -> Command {
    let mut cmd = Command::cargo_bin("skewer").expect("built");
    cmd.current_dir(root());
    cmd
}

#[test]
fn skewing_then_inverting_restores_the_trace_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (skewed, restored, table) = (
        dir.path().join("s.trace"),
        dir.path().join("r.trace"),
        dir.path().join("skew.tsv"),
    );
    skewer()
        .args([
            "traces/multitier.trace",
            "--random-offset",
            "50ms",
            "--random-drift",
            "200",
            "--seed",
            "5",
        ])
        .args([
            "--write-table",
            table.to_str().unwrap(),
            "-o",
            skewed.to_str().unwrap(),
        ])
        .assert()
        .success();
    let original = std::fs::read_to_string(root().join("traces/multitier.trace")).unwrap();
    let skewed_text = std::fs::read_to_string(&skewed).unwrap();
    assert_ne!(original, skewed_text);
    assert_eq!(original.lines().count(), skewed_text.lines().count());
    skewer()
        .args([
            skewed.to_str().unwrap(),
            "--invert",
            "--table",
            table.to_str().unwrap(),
            "-o",
            restored.to_str().unwrap(),
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("no true nanosecond").not());
    assert_eq!(std::fs::read_to_string(restored).unwrap(), original);
}

#[test]
fn an_explicit_skew_moves_only_that_nodes_times() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    std::fs::write(&trace, "# c\n10.000000 CALL_SENT a b x\n10.001000 CALL_RECV a b x\n10.002000 RET_SENT b a x\n10.003000 RET_RECV b a x\n").unwrap();
    let out = skewer()
        .args([trace.to_str().unwrap(), "--skew", "b=30ms"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "# c\n10.000000 CALL_SENT a b x\n10.031000 CALL_RECV a b x\n10.032000 RET_SENT b a x\n10.003000 RET_RECV b a x\n"
    );
}

#[test]
fn clock_offsets_do_not_change_nesting_when_both_ends_were_captured() {
    // Local clocks first: every nesting decision compares times of one node, so offsets
    // between hosts change nothing. (Drift scales one node's delays by 1 ± ppm, which
    // can move a delay across a bin edge, so it is left out here.)
    let dir = tempfile::tempdir().unwrap();
    let skewed = dir.path().join("s.trace");
    skewer()
        .args([
            "traces/multitier.trace",
            "--random-offset",
            "40ms",
            "-o",
            skewed.to_str().unwrap(),
        ])
        .assert()
        .success();
    let assignments = |trace: &Path, name: &str| {
        let out = dir.path().join(name);
        Command::cargo_bin("blackbox")
            .unwrap()
            .current_dir(root())
            .args([
                "nest",
                "-q",
                "--assignments",
                out.to_str().unwrap(),
                trace.to_str().unwrap(),
            ])
            .assert()
            .success();
        // The call time column is the caller's clock, which skew moves: compare parents only.
        std::fs::read_to_string(out)
            .unwrap()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                format!("{} {} {} <- {} {} {}", f[0], f[1], f[2], f[4], f[5], f[6])
            })
            .collect::<std::collections::BTreeSet<_>>()
    };
    let plain = assignments(&root().join("traces/multitier.trace"), "a");
    let offset = assignments(&skewed, "b");
    let differing = plain.symmetric_difference(&offset).count();
    let sample: Vec<_> = plain.symmetric_difference(&offset).take(6).collect();
    assert_eq!(
        differing, 0,
        "{differing} assignments differ, e.g. {sample:?}"
    );
}

#[test]
fn bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    std::fs::write(&trace, "1 CALL a b x\n2 CALLED b a x\n").unwrap();
    skewer()
        .args([trace.to_str().unwrap(), "--skew", "a=1ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("t.trace:2: unknown op `CALLED`"));
    skewer()
        .args(["traces/multitier.trace", "--skew", "a:1ms"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("expected NODE=OFFSET[,PPM]"));
    skewer()
        .args(["traces/multitier.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no skew given"));
}

/// Every frame's time and bytes.
fn frames(path: &Path) -> Vec<(i64, Vec<u8>)> {
    let mut frames = Vec::new();
    let mut stats = blackbox::capture::stats::FileStats::default();
    let file = std::fs::File::open(path).unwrap();
    blackbox::capture::file::read_frames(path, file, &mut stats, |f, _| {
        frames.push((f.time, f.data.to_vec()))
    })
    .unwrap();
    frames
}

#[test]
fn captures_skewed_then_inverted_give_back_every_packet_time_and_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (skewed, restored, table) = (
        dir.path().join("skewed"),
        dir.path().join("restored"),
        dir.path().join("skew.tsv"),
    );
    let inputs = ["traces/shop/web.pcap", "traces/shop/db.pcapng"];
    skewer()
        .args(inputs)
        .args(["--skew", "web=10s,100", "--skew", "db=-7s,-80,20us,10min"])
        .arg("--output")
        .arg(&skewed)
        .arg("--write-table")
        .arg(&table)
        .assert()
        .success()
        .stderr(predicate::str::contains("(8267 packets, host web)"));
    let table_text = std::fs::read_to_string(&table).unwrap();
    assert!(
        table_text.contains("db\t-7.000000\t-80.000000\t0.000020\t600.000000"),
        "{table_text}"
    );
    skewer()
        .args([skewed.join("web.pcap"), skewed.join("db.pcapng")])
        .args(["--invert", "--table"])
        .arg(&table)
        .arg("--output")
        .arg(&restored)
        .assert()
        .success();
    for input in inputs {
        let name = Path::new(input).file_name().unwrap();
        let original = frames(&root().join(input));
        assert_ne!(frames(&skewed.join(name)), original);
        assert_eq!(frames(&restored.join(name)), original, "{input}");
    }
    // Captures need a directory, and do not mix with a text trace.
    skewer()
        .args(["traces/shop/web.pcap", "--skew", "web=1s"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--output DIR"));
    skewer()
        .args([
            "traces/shop/web.pcap",
            "traces/multitier.trace",
            "--skew",
            "web=1s",
            "-o",
        ])
        .arg(dir.path().join("x"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is not a capture"));
}
