//! What the integration tests share: the `blackbox` command, golden files with their
//! bless switch, traces generated from the configs in `traces/configs/`, and the shop
//! captures that ship in `traces/shop/`. The benches include `generated.rs` too.
// Each test crate uses part of this module; the rest would be dead code there.
#![allow(dead_code)]

pub mod generated;
pub mod needs;

use assert_cmd::Command;
use std::path::{Path, PathBuf};

/// The `blackbox` binary, run from the package's root so that `traces/...` resolves.
pub fn blackbox() -> Command {
    let mut command = Command::cargo_bin("blackbox").expect("the binary is built");
    command.current_dir(env!("CARGO_MANIFEST_DIR"));
    command
}

/// Asserts that `text` holds every one of `expected`, showing the text when not.
pub fn assert_contains_all(text: &str, expected: &[&str]) {
    for expected in expected {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
}

/// Runs `command`, which must succeed (its stderr shows when it does not); its stdout.
pub fn stdout_of(command: &mut Command) -> String {
    outputs_of(command).0
}

/// Runs `command`, which must succeed (its stderr shows when it does not); its stdout
/// and its stderr.
pub fn outputs_of(command: &mut Command) -> (String, String) {
    let output = command.output().expect("the command runs");
    let stderr = String::from_utf8(output.stderr).expect("UTF-8 stderr");
    assert!(output.status.success(), "{stderr}");
    (
        String::from_utf8(output.stdout).expect("UTF-8 output"),
        stderr,
    )
}

/// The stdout of `blackbox ARGS...`, which must succeed.
pub fn blackbox_stdout(args: &[&str]) -> String {
    stdout_of(blackbox().args(args))
}

/// What `blackbox ARGS... FLAG FILE` (which must succeed) wrote to FILE, a file in a
/// fresh temporary directory: for `--json`, `--assignments` and the like.
pub fn written_by(args: &[&str], flag: &str) -> String {
    written_and_stdout(args, flag).0
}

/// [`written_by`], with the command's stdout.
pub fn written_and_stdout(args: &[&str], flag: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("output");
    let stdout = stdout_of(blackbox().args(args).arg(flag).arg(&file));
    let written = std::fs::read_to_string(&file).expect("the command wrote its file");
    (written, stdout)
}

/// The JSON document `blackbox ARGS... --json FILE` wrote.
pub fn json_written_by(args: &[&str]) -> serde_json::Value {
    serde_json::from_str(&written_by(args, "--json")).expect("valid JSON")
}

/// A file under `tests/data/`.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Compares `actual` with the golden file `tests/data/NAME`, or rewrites it when
/// BLACKBOX_BLESS is set (`BLACKBOX_BLESS=1 cargo test`).
pub fn golden(name: &str, actual: &str) {
    let path = data(name);
    if std::env::var_os("BLACKBOX_BLESS").is_some() {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "missing golden file {}; run with BLACKBOX_BLESS=1",
            path.display()
        )
    });
    assert_eq!(actual, expected, "output differs from {}", path.display());
}

/// A pattern table without its "adds most" column, for comparing inputs that agree on
/// the patterns but not on what the transport added (a text trace knows no message's
/// time in transit; captures do), or whose node names differ in length.
pub fn without_adds_most(table: &str) -> String {
    let header = table.lines().next().unwrap_or("");
    let (Some(from), Some(to)) = (header.find("adds most"), header.find("pattern")) else {
        return table.to_owned();
    };
    table
        .lines()
        .map(|line| {
            let chars: Vec<char> = line.chars().collect();
            let row = line.starts_with("rank") || line.starts_with(' ');
            if !row || chars.len() < to {
                return format!("{line}\n");
            }
            // The column is as wide as its widest cell: cut at this line's own cell.
            let end = chars[from..]
                .windows(2)
                .position(|w| w == [' ', ' '])
                .map_or(chars.len(), |at| from + at);
            let rest: String = chars[end..].iter().collect();
            let kept: String = chars[..from].iter().collect();
            format!("{kept}{}\n", rest.trim_start())
        })
        .collect()
}

/// Paths of the shop's captures (one per host), sorted.
pub fn shop_captures() -> Vec<String> {
    captures_in("shop")
}

/// Paths of the captures (one per host) in `traces/NAME/`, sorted.
pub fn captures_in(name: &str) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces")
        .join(name);
    let mut captures: Vec<String> = std::fs::read_dir(&dir)
        .expect("the captures ship with the project")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            [".pcap", ".pcapng", ".pcap.gz", ".pcapng.gz"]
                .iter()
                .any(|e| name.ends_with(e))
        })
        .map(|p| p.to_str().expect("UTF-8 path").to_owned())
        .collect();
    captures.sort();
    captures
}

/// A trace of the paper's multi-tier system in which the 200 ms delay at WS2 was
/// deployed after 100 s: `traces/multitier.trace`, then `multitier-added-delay.trace`
/// with its times moved by 100 s and its call ids kept apart. Written into `dir`.
pub fn deployed_delay_trace(dir: &Path) -> PathBuf {
    let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
    let mut joined = std::fs::read_to_string(traces.join("multitier.trace")).unwrap();
    for line in std::fs::read_to_string(traces.join("multitier-added-delay.trace"))
        .unwrap()
        .lines()
    {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (seconds, fraction) = fields[0].split_once('.').unwrap();
        let later = seconds.parse::<u64>().unwrap() + 100;
        joined.push_str(&format!(
            "{later}.{fraction} {} {} {} later-{} {}\n",
            fields[1],
            fields[2],
            fields[3],
            fields[4],
            fields[5..].join(" ")
        ));
    }
    let trace = dir.join("deployed.trace");
    std::fs::write(&trace, joined).unwrap();
    trace
}
