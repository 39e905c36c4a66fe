//! `-` is standard output for every file-output flag: the file's content alone goes to
//! stdout (so `--json - | jq` works) and the table moves to stderr, or away with
//! `--quiet`; two outputs can not share stdout, and directory flags refuse `-`.

use predicates::prelude::*;

mod support;
use support::{blackbox, outputs_of, written_by};

#[test]
fn every_file_flag_writes_to_stdout_for_a_dash() {
    let cases: [(&[&str], &str); 7] = [
        (&["nest", "-q", "traces/multitier.trace"], "--json"),
        (&["nest", "-q", "traces/multitier.trace"], "--assignments"),
        (&["nest", "-q", "traces/multitier.trace"], "--otlp"),
        (&["nest", "-q", "traces/multitier.trace"], "--html"),
        (&["convolve", "-q", "traces/freeform.trace"], "--json"),
        (&["eval", "-q", "traces/multitier.trace"], "--json"),
        (&["records", "-q", "traces/multitier.trace"], "-o"),
    ];
    for (args, flag) in cases {
        let in_file = written_by(args, flag);
        let (stdout, stderr) = outputs_of(blackbox().args(args).args([flag, "-"]));
        // The HTML page says when it was made; everything else is byte for byte.
        if flag == "--html" {
            assert!(stdout.starts_with("<!DOCTYPE html>"), "{flag}");
            assert!(stdout.len().abs_diff(in_file.len()) < 64, "{flag}");
        } else {
            assert_eq!(stdout, in_file, "{args:?} {flag}");
        }
        assert_eq!(stderr, "", "{args:?} {flag}: -q keeps stderr clean");
    }
}

#[test]
fn with_json_on_stdout_the_table_moves_to_stderr() {
    let (stdout, stderr) =
        outputs_of(blackbox().args(["nest", "traces/multitier.trace", "--json", "-"]));
    let json: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON alone");
    assert!(json["patterns"].is_array());
    assert!(
        stderr.contains("rank  count  total latency") && stderr.contains("client->WS"),
        "{stderr}"
    );
}

#[test]
fn align_json_to_stdout_moves_its_table_to_stderr() {
    let mut captures = support::shop_captures();
    captures.extend(["--json".to_owned(), "-".to_owned()]);
    let (stdout, stderr) = outputs_of(blackbox().arg("align").args(&captures));
    serde_json::from_str::<serde_json::Value>(&stdout).expect("stdout is JSON alone");
    assert!(stderr.contains("host"), "{stderr}");
}

#[test]
fn two_outputs_can_not_share_stdout() {
    blackbox()
        .args(["nest", "traces/multitier.trace", "--json", "-", "--html", "-"])
        .assert()
        .code(2)
        .stdout("")
        .stderr("blackbox: only one output can go to standard output (-): --json and --html ask for it\n");
}

#[test]
fn directory_flags_refuse_a_dash() {
    for flag in ["--dot", "--svg"] {
        blackbox()
            .args(["nest", "traces/multitier.trace", flag, "-"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!(
                "{flag} takes a directory"
            )));
    }
}
