//! `--svg DIR`: the dot graphs of nest and convolve drawn as SVG by Graphviz's `dot` (a
//! test that needs Graphviz), or, without it, the dot files and a note saying how to
//! install it.

mod support;

use std::path::Path;
use std::process::ExitCode;
use support::blackbox;
use support::needs::run;

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn nest_and_convolve_draw_their_graphs_as_svg_beside_the_dot_files() {
    let dir = tempfile::tempdir().unwrap();
    let (patterns, paths) = (dir.path().join("patterns"), dir.path().join("paths"));
    let nest = blackbox()
        .args([
            "nest",
            "-q",
            "--top",
            "2",
            "traces/multitier.trace",
            "--svg",
        ])
        .arg(&patterns)
        .output()
        .unwrap();
    assert!(nest.status.success());
    let convolve = blackbox()
        .args([
            "convolve",
            "-q",
            "--top",
            "2",
            "traces/freeform.trace",
            "--svg",
        ])
        .arg(&paths)
        .output()
        .unwrap();
    assert!(convolve.status.success());
    let stderr = String::from_utf8_lossy(&nest.stderr);
    assert_eq!(
        names(&patterns),
        [
            "pattern-001.dot",
            "pattern-001.svg",
            "pattern-002.dot",
            "pattern-002.svg"
        ]
    );
    assert_eq!(
        names(&paths),
        [
            "path-001.dot",
            "path-001.svg",
            "path-002.dot",
            "path-002.svg"
        ]
    );
    let svg = std::fs::read_to_string(patterns.join("pattern-001.svg")).unwrap();
    assert!(svg.contains("<svg"), "{svg}");
    // The picture carries the pattern's nodes.
    assert!(svg.contains("client") && svg.contains("DB"), "{svg}");
    assert!(stderr.contains("wrote 2 SVG pictures"), "{stderr}");
}

fn without_graphviz_the_dot_files_are_written_and_a_note_says_how_to_install_it() {
    let dir = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = dir.path().join("svg");
    let output = blackbox()
        .env("PATH", empty.path())
        .args([
            "nest",
            "-q",
            "--top",
            "3",
            "traces/multitier.trace",
            "--svg",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        names(&out),
        ["pattern-001.dot", "pattern-002.dot", "pattern-003.dot"]
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.starts_with("note: Graphviz"))
            .count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("apt-get install graphviz"), "{stderr}");
}

fn main() -> ExitCode {
    run(checks![
        nest_and_convolve_draw_their_graphs_as_svg_beside_the_dot_files needs Graphviz,
        without_graphviz_the_dot_files_are_written_and_a_note_says_how_to_install_it,
    ])
}
