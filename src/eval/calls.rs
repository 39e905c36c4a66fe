//! Call-level scores against a file of true parents in the assignments format
//! (`sender receiver call_id call_time parent_sender parent_receiver parent_call_id`,
//! tab separated, `-` for roots): the fraction of calls given their true parent, and
//! the fraction of requests whose whole call tree is right.

use crate::nesting::call_pairs::CallPair;
use crate::nesting::Nesting;
use crate::nesting::NO_PARENT;
use crate::trace::Trace;
use hashbrown::{HashMap, HashSet};
use serde::Serialize;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

/// A call, named as the assignments format names it.
pub type CallKey = (String, String, String);

/// The true parent of every call (`None` for a root).
pub type TrueParents = HashMap<CallKey, Option<CallKey>>;

/// Why a truth file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TruthFileError {
    /// Unreadable.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A line without the seven fields.
    #[error("{}:{line}: expected 7 tab-separated fields (sender receiver call_id call_time parent_sender parent_receiver parent_call_id) and an optional confidence, found {found}", path.display())]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// Fields found.
        found: usize,
    },
    /// A line of a signatures file without its two fields.
    #[error("{}:{line}: expected 2 tab-separated fields (request-id signature), found {found}", path.display())]
    BadSignatureLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// Fields found.
        found: usize,
    },
}

/// Reads true parents; blank lines and `#` comments are skipped.
pub fn read_truth(path: &Path, reader: impl BufRead) -> Result<TrueParents, TruthFileError> {
    let mut truth = HashMap::new();
    for_each_tab_line(path, reader, |line, f| {
        // An eighth field (blackbox's own confidence column) is allowed and ignored.
        if !(7..=8).contains(&f.len()) {
            return Err(TruthFileError::BadLine {
                path: path.into(),
                line,
                found: f.len(),
            });
        }
        let parent = (f[4] != "-").then(|| (f[4].to_owned(), f[5].to_owned(), f[6].to_owned()));
        truth.insert((f[0].to_owned(), f[1].to_owned(), f[2].to_owned()), parent);
        Ok(())
    })?;
    Ok(truth)
}

/// Calls `on_line` with each line of a tab-separated truth file that is neither blank
/// nor a `#` comment, as its number (from 1) and its fields; a read error names `path`.
pub(crate) fn for_each_tab_line(
    path: &Path,
    reader: impl BufRead,
    mut on_line: impl FnMut(u64, &[&str]) -> Result<(), TruthFileError>,
) -> Result<(), TruthFileError> {
    for (n, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| TruthFileError::Io {
            path: path.into(),
            source,
        })?;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        on_line(n as u64 + 1, &fields)?;
    }
    Ok(())
}

/// Call-level scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallScores {
    /// Calls in the truth file.
    pub calls: u64,
    /// Of those, calls given their true parent.
    pub calls_right: u64,
    /// Calls of the truth that the trace did not pair (dropped, or unknown ids).
    pub calls_not_inferred: u64,
    /// Requests (true roots with their trees).
    pub requests: u64,
    /// Requests whose every call has its true parent and that no other call joined.
    pub requests_right: u64,
    /// The calls with a true parent, by the stated confidence of their choice.
    pub reliability: Vec<super::reliability::ConfidenceBucket>,
    /// The inferred requests whose root the truth names, by how sure their whole tree
    /// is; right: exactly a true request.
    pub request_reliability: Vec<super::reliability::ConfidenceBucket>,
}

impl CallScores {
    /// Fraction of calls given their true parent.
    pub fn call_accuracy(&self) -> f64 {
        self.calls_right as f64 / self.calls.max(1) as f64
    }

    /// Fraction of requests exactly right.
    pub fn request_accuracy(&self) -> f64 {
        self.requests_right as f64 / self.requests.max(1) as f64
    }
}

/// A call pair named as the assignments format names it.
fn call_key(trace: &Trace, pair: &CallPair) -> CallKey {
    (
        trace.node_name(pair.caller).to_owned(),
        trace.node_name(pair.callee).to_owned(),
        trace.call_id_text(pair.call_id).to_owned(),
    )
}

/// Per call pair, the index among `pairs` of its true parent; [`NO_PARENT`] for a
/// root, and for a call the truth does not name or whose parent the trace did not pair.
pub fn true_parent_indexes(trace: &Trace, pairs: &[CallPair], truth: &TrueParents) -> Vec<u32> {
    let index: HashMap<CallKey, u32> = pairs
        .iter()
        .enumerate()
        .map(|(i, p)| (call_key(trace, p), i as u32))
        .collect();
    pairs
        .iter()
        .map(|p| {
            truth
                .get(&call_key(trace, p))
                .and_then(Option::as_ref)
                .and_then(|parent| index.get(parent).copied())
                .unwrap_or(NO_PARENT)
        })
        .collect()
}

/// Scores the inferred parents against `truth`.
pub fn evaluate(trace: &Trace, nesting: &Nesting, truth: &TrueParents) -> CallScores {
    let key = |i: usize| call_key(trace, &nesting.pairs[i]);
    let inferred: HashMap<CallKey, Option<CallKey>> = (0..nesting.pairs.len())
        .map(|i| {
            (
                key(i),
                (nesting.parent[i] != NO_PARENT).then(|| key(nesting.parent[i] as usize)),
            )
        })
        .collect();
    let root_of = |k: &CallKey| root(truth, k);
    let calls_right = truth
        .iter()
        .filter(|(k, v)| inferred.get(*k) == Some(v))
        .count() as u64;
    let calls_not_inferred = truth.keys().filter(|k| !inferred.contains_key(*k)).count() as u64;
    let mut wrong: HashSet<CallKey> = HashSet::new();
    for (k, v) in truth {
        if inferred.get(k) != Some(v) {
            wrong.insert(root_of(k));
        }
    }
    // A call put into a request it does not belong to spoils that request too.
    for (k, v) in &inferred {
        if truth.get(k) != Some(v) {
            if let Some(p) = v.as_ref().filter(|p| truth.contains_key(*p)) {
                wrong.insert(root_of(p));
            }
        }
    }
    let requests: HashSet<CallKey> = truth.keys().map(root_of).collect();
    let requests_right = requests.iter().filter(|r| !wrong.contains(*r)).count() as u64;
    let true_parents = true_parent_indexes(trace, &nesting.pairs, truth);
    let sureness = super::reliability::tree_sureness(nesting);
    let request_reliability = super::reliability::bucketed(
        (0..nesting.pairs.len())
            .filter(|&r| nesting.parent[r] == NO_PARENT)
            .filter_map(|r| {
                let k = key(r);
                let root = truth.get(&k)?.is_none();
                Some((sureness[r], root && !wrong.contains(&k)))
            }),
    );
    CallScores {
        calls: truth.len() as u64,
        calls_right,
        calls_not_inferred,
        requests: requests.len() as u64,
        requests_right,
        reliability: super::reliability::buckets(
            nesting,
            true_parents
                .iter()
                .enumerate()
                .filter(|(_, &parent)| parent != NO_PARENT)
                .map(|(i, &parent)| (i, nesting.parent[i] == parent)),
        ),
        request_reliability,
    }
}

/// The root of a call's true tree. A parent missing from the truth ends the walk; a
/// cycle (a broken truth file) ends it too.
fn root(truth: &TrueParents, start: &CallKey) -> CallKey {
    let mut at = start;
    let mut steps = 0;
    while let Some(Some(parent)) = truth.get(at) {
        at = parent;
        steps += 1;
        if steps > truth.len() {
            break;
        }
    }
    at.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nesting::{nest, NestOptions};
    use crate::trace::{text, TraceBuilder};

    #[test]
    fn scores_calls_and_requests_and_counts_planted_errors() {
        let mut b = TraceBuilder::new();
        let t =
            "1 CALL A B 1\n3 CALL B C 2\n5 RET C B 2\n7 CALL B D 3\n9 RET D B 3\n11 RET B A 1\n\
                 20 CALL A B 4\n21 CALL B C 5\n22 RET C B 5\n23 RET B A 4\n";
        text::read(Path::new("t"), t.as_bytes(), &mut b).unwrap();
        let trace = b.finish();
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        let right = "A\tB\t1\t1\t-\t-\t-\nB\tC\t2\t3\tA\tB\t1\nB\tD\t3\t7\tA\tB\t1\nA\tB\t4\t20\t-\t-\t-\nB\tC\t5\t21\tA\tB\t4\n";
        let truth = read_truth(Path::new("truth"), right.as_bytes()).unwrap();
        let s = evaluate(&trace, &nesting, &truth);
        assert_eq!(
            s,
            CallScores {
                calls: 5,
                calls_right: 5,
                calls_not_inferred: 0,
                requests: 2,
                requests_right: 2,
                reliability: vec![crate::eval::reliability::ConfidenceBucket {
                    low: 0.999,
                    high: 1.0,
                    calls: 3,
                    right: 3,
                    mean_confidence: 1.0,
                }],
                request_reliability: vec![crate::eval::reliability::ConfidenceBucket {
                    low: 0.999,
                    high: 1.0,
                    calls: 2,
                    right: 2,
                    mean_confidence: 1.0,
                }],
            }
        );
        // Plant one error: the truth says D belongs to request 4.
        let planted = right.replace("B\tD\t3\t7\tA\tB\t1", "B\tD\t3\t7\tA\tB\t4");
        let truth = read_truth(Path::new("truth"), planted.as_bytes()).unwrap();
        let s = evaluate(&trace, &nesting, &truth);
        assert_eq!((s.calls_right, s.requests_right), (4, 0));
        // Neither inferred request is exactly a true one: request 1 holds D, which is
        // not its own, and request 4 lacks it.
        let requests = &s.request_reliability;
        let counted = requests.iter().map(|b| b.calls).sum::<u64>();
        let right = requests.iter().map(|b| b.right).sum::<u64>();
        assert_eq!((counted, right), (2, 0));
    }

    #[test]
    fn a_short_line_is_named() {
        let err = read_truth(Path::new("truth.tsv"), "a\tb\tc\n".as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), "truth.tsv:1: expected 7 tab-separated fields (sender receiver call_id call_time parent_sender parent_receiver parent_call_id) and an optional confidence, found 3");
    }
}
