//! Request-level scores against the true path of each request, named by the request id
//! its root call carries (`request-id<TAB>signature` lines, as a system's own logs give
//! them): how many requests the inferred patterns put in their true pattern, and where
//! each true pattern ranks. Made for systems whose calls cannot all be named in a truth
//! file of parents (a broker's deliveries, a consumer's work), whose requests can.

use super::calls::TruthFileError;
use crate::nesting::Nesting;
use crate::trace::Trace;
use hashbrown::HashMap;
use serde::Serialize;
use std::io::BufRead;
use std::path::Path;

/// Each request's true signature, by the request id its root call carries.
pub type TrueSignatures = HashMap<String, String>;

/// Reads `request-id<TAB>signature` lines; blank lines and `#` comments are skipped.
pub fn read_signatures(
    path: &Path,
    reader: impl BufRead,
) -> Result<TrueSignatures, TruthFileError> {
    let mut truth = HashMap::new();
    super::calls::for_each_tab_line(path, reader, |line, fields| {
        let [id, signature] = fields[..] else {
            return Err(TruthFileError::BadSignatureLine {
                path: path.into(),
                line,
                found: fields.len(),
            });
        };
        truth.insert(id.to_owned(), signature.to_owned());
        Ok(())
    })?;
    Ok(truth)
}

/// How one true pattern fared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TruePattern {
    /// Its signature.
    pub signature: String,
    /// Requests the truth gives it.
    pub requests: u64,
    /// Of those, the ones inferred in it.
    pub right: u64,
    /// Its rank among the inferred patterns by count (1 = the most frequent), if any
    /// request was inferred in it.
    pub rank: Option<usize>,
}

/// Request-level scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SignatureScores {
    /// Requests in the truth file.
    pub requests: u64,
    /// Of those, the ones whose id no root call carried (its root was given a parent,
    /// or the capture missed it): counted wrong.
    pub not_found: u64,
    /// Requests inferred in their true pattern.
    pub right: u64,
    /// The true patterns, most requests first.
    pub patterns: Vec<TruePattern>,
    /// How many of the true patterns rank among the inferred top N, N the number of
    /// true patterns.
    pub in_top: usize,
}

impl SignatureScores {
    /// The share of requests inferred in their true pattern.
    pub fn accuracy(&self) -> f64 {
        self.right as f64 / self.requests.max(1) as f64
    }
}

/// Scores each root call that carries an id of `truth` by whether its pattern is the
/// request's true one.
pub fn evaluate(trace: &Trace, nesting: &Nesting, truth: &TrueSignatures) -> SignatureScores {
    // Inferred patterns ranked by count, ties by signature.
    let mut ranked: Vec<(u64, &str)> = (nesting.patterns.iter())
        .map(|pattern| (pattern.count(), pattern.signature.as_str()))
        .collect();
    ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    let rank: HashMap<&str, usize> = (ranked.iter().enumerate())
        .map(|(k, &(_, signature))| (signature, k + 1))
        .collect();
    let mut by_signature: HashMap<&str, (u64, u64)> = HashMap::new();
    for signature in truth.values() {
        by_signature.entry(signature.as_str()).or_default().0 += 1;
    }
    let mut found = 0u64;
    for pattern in &nesting.patterns {
        for &root in &pattern.instances {
            let call = nesting.pairs[root as usize].call_id;
            let Some(id) = trace.propagated_text(trace.propagated(call)) else {
                continue;
            };
            let Some(signature) = truth.get(id) else {
                continue;
            };
            found += 1;
            if *signature == pattern.signature {
                by_signature.get_mut(signature.as_str()).expect("counted").1 += 1;
            }
        }
    }
    let mut patterns: Vec<TruePattern> = (by_signature.into_iter())
        .map(|(signature, (requests, right))| TruePattern {
            signature: signature.to_owned(),
            requests,
            right,
            rank: rank.get(signature).copied(),
        })
        .collect();
    patterns.sort_unstable_by(|a, b| {
        (b.requests.cmp(&a.requests)).then_with(|| a.signature.cmp(&b.signature))
    });
    let top = patterns.len();
    SignatureScores {
        requests: truth.len() as u64,
        not_found: (truth.len() as u64).saturating_sub(found),
        right: patterns.iter().map(|p| p.right).sum(),
        in_top: (patterns.iter())
            .filter(|p| p.rank.is_some_and(|rank| rank <= top))
            .count(),
        patterns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nesting::{nest, NestOptions};
    use crate::trace::text::trace_from_str;

    #[test]
    fn requests_are_scored_by_the_pattern_their_root_makes() {
        let trace = trace_from_str(
            "1 CALL client web r1 id=a\n2 CALL web db q1\n3 RET db web q1\n4 RET web client r1\n\
             5 CALL client web r2 id=b\n6 RET web client r2\n\
             7 CALL client web r3 id=c\n8 RET web client r3\n",
        );
        let nesting = nest(&trace, &NestOptions::default()).unwrap();
        let truth = read_signatures(
            Path::new("t"),
            "# id\tsignature\na\tclient->web(db)\nb\tclient->web(db)\nc\tclient->web\nd\tclient->web\n"
                .as_bytes(),
        )
        .unwrap();
        let scores = evaluate(&trace, &nesting, &truth);
        assert_eq!((scores.requests, scores.not_found, scores.right), (4, 1, 2));
        assert_eq!(scores.patterns[0].signature, "client->web");
        assert_eq!(
            (scores.patterns[0].requests, scores.patterns[0].right),
            (2, 1)
        );
        // client->web has 2 instances, client->web(db) 1: both rank in the top 2.
        assert_eq!(scores.in_top, 2);
        let bad = read_signatures(Path::new("t.tsv"), "a\tb\tc\n".as_bytes()).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "t.tsv:1: expected 2 tab-separated fields (request-id signature), found 3"
        );
    }
}
