//! The examples in README.md and the hand-written pages of docs/ reproduce: every fenced
//! block's `$ ` lines are run by `sh` in a temporary directory (with `traces/` and
//! `tests/` linked in, `blackbox`, `maketrace` and `skewer` on the PATH), stdout and
//! stderr together, and what they print must be the lines that follow, where a line
//! `...` stands for any number of lines. Commands of one page share the directory, so a
//! later one reads what an earlier one wrote. A page whose examples need Graphviz is
//! skipped without it (`support::needs`). So are the examples that end each command's
//! `--help`.
//! A failure shows each differing example's new output, to paste in when the change
//! is meant.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::OnceLock;

mod support;
use support::needs::run;

/// One command of a page and the output it shows.
struct Example {
    /// 1-based line of the `$ ` line in the page.
    line: usize,
    command: String,
    expected: Vec<String>,
}

/// Every example of `page`: the `$ ` lines of its fenced blocks and the lines after.
fn examples(page: &str) -> Vec<Example> {
    let mut examples: Vec<Example> = Vec::new();
    let mut in_block = false;
    // Whether the lines read belong to the last example: not once its block ended.
    let mut in_example = false;
    for (index, line) in page.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
            in_example = false;
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some(command) = line.strip_prefix("$ ") {
            examples.push(Example {
                line: index + 1,
                command: command.to_owned(),
                expected: Vec::new(),
            });
            in_example = true;
        } else if let Some(example) = examples.last_mut().filter(|_| in_example) {
            example.expected.push(line.trim_end().to_owned());
        }
    }
    examples
}

/// Whether `actual` is `expected` line for line, `...` matching any run of lines.
fn matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=actual.len()).any(|skip| matches(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, others)| line == first && matches(rest, others)),
    }
}

/// The directory of the built binaries, with maketrace and skewer built beside
/// blackbox when this test runs alone.
fn binaries() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = Path::new(env!("CARGO_BIN_EXE_blackbox"))
            .parent()
            .expect("the binary is in a directory")
            .to_path_buf();
        if !dir.join("maketrace").is_file() || !dir.join("skewer").is_file() {
            let built = Command::new(env!("CARGO"))
                .args(["build", "-p", "maketrace", "-p", "skewer"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo runs");
            assert!(built.success(), "maketrace and skewer build");
        }
        dir
    })
}

/// A temporary directory with `traces/` and `tests/` linked in, and a PATH that finds
/// the built tools first.
fn sandbox() -> (tempfile::TempDir, std::ffi::OsString) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    for linked in ["traces", "tests"] {
        std::os::unix::fs::symlink(root.join(linked), dir.path().join(linked)).unwrap();
    }
    let path = std::env::join_paths(std::iter::once(binaries().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    (dir, path)
}

/// Runs every example of `name` (a path from the project's root) and fails listing
/// each one whose output differs.
fn check_page(name: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let page = std::fs::read_to_string(root.join(name)).expect("the page exists");
    let examples = examples(&page);
    assert!(!examples.is_empty(), "{name} has no examples");
    let (dir, path) = sandbox();
    let mut differing = Vec::new();
    for example in &examples {
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!("{} 2>&1", example.command))
            .current_dir(dir.path())
            .env("PATH", &path)
            .env_remove("CI")
            .output()
            .expect("sh runs");
        let text = String::from_utf8_lossy(&output.stdout);
        let actual: Vec<&str> = text.lines().map(str::trim_end).collect();
        if !matches(&example.expected, &actual) {
            differing.push(format!(
                "{name}:{}: $ {}\n--- expected\n{}\n--- got\n{}",
                example.line,
                example.command,
                example.expected.join("\n"),
                actual.join("\n")
            ));
        }
    }
    assert!(
        differing.is_empty(),
        "{} of {} examples differ:\n\n{}",
        differing.len(),
        examples.len(),
        differing.join("\n\n")
    );
}

fn readme_examples_reproduce() {
    check_page("README.md");
}

fn captures_page_examples_reproduce() {
    check_page("docs/captures.md");
}

fn clocks_page_examples_reproduce() {
    check_page("docs/clocks.md");
}

fn algorithm_page_examples_reproduce() {
    check_page("docs/algorithm.md");
}

fn measuring_page_examples_reproduce() {
    check_page("docs/measuring.md");
}

/// Every command's long help ends with two to four examples, and each runs.
fn every_commands_help_examples_run() {
    let (dir, path) = sandbox();
    for command in ["nest", "eval", "convolve", "records", "align"] {
        let help = Command::new(env!("CARGO_BIN_EXE_blackbox"))
            .args([command, "--help"])
            .output()
            .expect("blackbox runs");
        let help = String::from_utf8(help.stdout).unwrap();
        let (_, examples) = help
            .split_once("\nExamples:\n")
            .unwrap_or_else(|| panic!("{command} --help has no examples:\n{help}"));
        let lines: Vec<&str> = examples
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        assert!(
            (2..=4).contains(&lines.len()),
            "{command}: {} examples",
            lines.len()
        );
        for line in lines {
            assert!(line.starts_with("blackbox "), "{command}: {line}");
            let output = Command::new("bash")
                .arg("-c")
                .arg(format!("set -o pipefail; {line} > /dev/null"))
                .current_dir(dir.path())
                .env("PATH", &path)
                .output()
                .expect("sh runs");
            assert!(
                output.status.success(),
                "{command} --help's example failed: {line}\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

fn ellipsis_matches_any_run_of_lines() {
    let expected: Vec<String> = ["a", "...", "d"].map(String::from).to_vec();
    assert!(matches(&expected, &["a", "d"]));
    assert!(matches(&expected, &["a", "b", "c", "d"]));
    assert!(!matches(&expected, &["a", "b"]));
    assert!(!matches(&expected, &["b", "d"]));
}

fn main() -> ExitCode {
    run(checks![
        readme_examples_reproduce needs Graphviz,
        captures_page_examples_reproduce,
        clocks_page_examples_reproduce,
        algorithm_page_examples_reproduce,
        measuring_page_examples_reproduce,
        every_commands_help_examples_run needs Graphviz,
        ellipsis_matches_any_run_of_lines,
    ])
}
