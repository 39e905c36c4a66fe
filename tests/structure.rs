//! The shape of the library, checked by reading the tree: the rules a newcomer relies on
//! to find their way (each module a room of one purpose, arrows that run one way) hold
//! only while something checks them.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, with its text, sorted by path.
fn sources() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a readable entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("UTF-8 source");
                out.push((path, text));
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&root, &mut out);
    out.sort();
    assert!(out.len() > 50, "found only {} sources", out.len());
    out
}

/// The path relative to `src/`, with forward slashes.
fn relative(path: &Path) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    path.strip_prefix(&root)
        .expect("under src/")
        .to_string_lossy()
        .replace('\\', "/")
}

/// The lines of a source before its unit tests (a `#[cfg(test)]` module at the end).
fn code(text: &str) -> impl Iterator<Item = &str> {
    let mut lines = text.lines().peekable();
    let mut in_tests = false;
    std::iter::from_fn(move || loop {
        let line = lines.next()?;
        if in_tests {
            continue;
        }
        if line == "#[cfg(test)]"
            && lines
                .peek()
                .is_some_and(|next| next.starts_with("mod tests"))
        {
            in_tests = true;
            continue;
        }
        return Some(line);
    })
}

/// The files of module `prefix` (a file `prefix.rs` or a folder `prefix/`) whose code
/// names any of `forbidden`, with the offending line.
fn uses_of(prefix: &str, forbidden: &[&str]) -> Vec<String> {
    sources()
        .iter()
        .filter(|(path, _)| {
            let name = relative(path);
            name == format!("{prefix}.rs") || name.starts_with(&format!("{prefix}/"))
        })
        .flat_map(|(path, text)| {
            code(text)
                .filter(|line| !line.trim_start().starts_with("//"))
                .filter(|line| forbidden.iter().any(|f| line.contains(f)))
                .map(|line| format!("{}: {}", relative(path), line.trim()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn no_library_source_is_over_a_thousand_lines_of_code() {
    let long: Vec<String> = sources()
        .iter()
        .filter(|(path, _)| path.file_name().is_some_and(|n| n != "tests.rs"))
        .map(|(path, text)| (relative(path), code(text).count()))
        .filter(|&(_, lines)| lines > 1_000)
        .map(|(name, lines)| format!("{name}: {lines} lines"))
        .collect();
    assert!(long.is_empty(), "split these into rooms: {long:#?}");
}

#[test]
fn the_trace_imports_nothing_from_the_capture_code() {
    let uses = uses_of("trace", &["crate::capture", "super::capture"]);
    assert!(uses.is_empty(), "{uses:#?}");
}

#[test]
fn collecting_imports_no_stage_after_it() {
    let uses = uses_of(
        "collect",
        &[
            "crate::input",
            "crate::nesting",
            "crate::report",
            "crate::align",
            "crate::trace",
            "capture::protocol",
        ],
    );
    assert!(uses.is_empty(), "{uses:#?}");
}

#[test]
fn reports_reach_no_internals_of_the_parent_choice() {
    let uses = uses_of("report", &["nesting::parents", "nesting::joint"]);
    assert!(uses.is_empty(), "{uses:#?}");
}

#[test]
fn only_the_command_line_knows_clap() {
    let uses: Vec<String> = sources()
        .iter()
        .filter(|(path, _)| {
            let name = relative(path);
            !name.starts_with("cli/") && name != "main.rs"
        })
        .flat_map(|(path, text)| {
            code(text)
                .filter(|line| !line.trim_start().starts_with("//"))
                .filter(|line| line.contains("clap::") || line.contains("use clap"))
                .map(|line| format!("{}: {}", relative(path), line.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(uses.is_empty(), "{uses:#?}");
}

#[test]
fn the_checks_see_what_they_look_for() {
    // Each check must be able to fail: the command line does use clap, and the joint
    // choice's own files do name its internals.
    assert!(!uses_of("cli", &["use clap"]).is_empty());
    assert!(!uses_of("nesting", &["nesting::joint", "mod joint"]).is_empty());
    assert!(sources().iter().any(
        |(path, text)| relative(path) == "nesting/joint/search.rs" && code(text).count() > 300
    ));
}
