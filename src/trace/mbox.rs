//! Received-header traces from an mbox file (paper §7.1.3): every `Received:` header of
//! every message is one hop, from the host named after `from` to the host named after
//! `by`, at the header's date, which the receiving host wrote. Owns mbox splitting,
//! header unfolding and the reading of Received headers; what a hop means is the
//! trace's. Every header that cannot be used is counted with its reason.

use super::text::TraceError;
use super::{End, Kind, Message, TraceBuilder};
use std::io::BufRead;
use std::path::Path;

/// What was read and what was set aside.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MboxStats {
    /// Messages (emails) in the mbox.
    pub emails: u64,
    /// Received headers seen.
    pub received_headers: u64,
    /// Hops written to the trace.
    pub hops: u64,
    /// Headers whose date could not be read.
    pub unparseable_date: u64,
    /// Headers naming a generic host (localhost, unknown, a loopback address), which
    /// would join unrelated paths.
    pub generic_host: u64,
    /// Headers without both a `from` and a `by` host.
    pub missing_host: u64,
}

/// Reads an mbox into `builder`: one received-end observation per usable Received
/// header, with the email's number as the truth tag (its path instance).
pub fn read(
    path: &Path,
    mut reader: impl BufRead,
    builder: &mut TraceBuilder,
) -> Result<MboxStats, TraceError> {
    let mut stats = MboxStats::default();
    let mut line = Vec::new();
    let mut in_headers = false;
    let mut previous_blank = true;
    let mut header = String::new();
    let mut line_no = 0u64;
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|source| TraceError::Io {
                path: path.into(),
                source,
            })?;
        line_no += 1;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let separator = n > 0 && previous_blank && is_separator(text);
        let folded = in_headers && (text.starts_with(' ') || text.starts_with('\t'));
        if folded {
            header.push(' ');
            header.push_str(text.trim());
        } else {
            if !header.is_empty() {
                hop(&header, stats.emails, builder, &mut stats);
                header.clear();
            }
            if n == 0 {
                break;
            }
            if separator {
                stats.emails += 1;
                in_headers = true;
            } else if in_headers && text.is_empty() {
                in_headers = false;
            } else if in_headers {
                header.push_str(text);
            }
        }
        previous_blank = text.is_empty();
    }
    builder.stats_mut().files += 1;
    builder.stats_mut().lines += line_no - 1;
    Ok(stats)
}

/// Adds the hop of one unfolded header line, if it is a usable Received header.
fn hop(header: &str, email: u64, builder: &mut TraceBuilder, stats: &mut MboxStats) {
    let Some((name, value)) = header.split_once(':') else {
        return;
    };
    if !name.trim().eq_ignore_ascii_case("received") {
        return;
    }
    stats.received_headers += 1;
    let (route, date) = match value.rsplit_once(';') {
        Some((route, date)) => (route, date.trim()),
        None => (value, ""),
    };
    let (Some(from), Some(by)) = (host_after(route, "from"), host_after(route, "by")) else {
        stats.missing_host += 1;
        return;
    };
    if is_generic(&from) || is_generic(&by) {
        stats.generic_host += 1;
        return;
    }
    // The parser is lenient (it reads "someday soon" as a date): ask for a clock time and
    // a four-digit year first.
    let plausible = date.contains(':')
        && date
            .split_whitespace()
            .any(|w| w.len() == 4 && w.parse::<u32>().is_ok_and(|y| y >= 1970));
    let Ok(seconds) = mailparse::dateparse(date).map_err(|_| ()).and_then(|s| {
        if plausible {
            Ok(s)
        } else {
            Err(())
        }
    }) else {
        stats.unparseable_date += 1;
        return;
    };
    let Some(time) = seconds.checked_mul(1_000_000_000) else {
        stats.unparseable_date += 1;
        return;
    };
    let (sender, receiver) = (builder.node(&from), builder.node(&by));
    let call_id = builder.call_id("-");
    let truth = builder.truth(&format!("mail{email}"));
    builder.push(Message::observed(
        End::Received,
        time,
        Kind::Free,
        sender,
        receiver,
        call_id,
        truth,
    ));
    stats.hops += 1;
}

/// The host name after a keyword (`from`, `by`), lower-cased, stripped of brackets; names
/// with characters a path signature reserves are not usable.
fn host_after(route: &str, keyword: &str) -> Option<String> {
    let words: Vec<&str> = route.split_whitespace().collect();
    let at = words.iter().position(|w| w.eq_ignore_ascii_case(keyword))?;
    let host = words
        .get(at + 1)?
        .trim_matches(|c| matches!(c, '[' | ']' | '(' | ')' | '<' | '>' | ';' | ','));
    let host = host.to_ascii_lowercase();
    if host.is_empty() || host.contains(['(', ')', ',', '#']) {
        return None;
    }
    Some(host)
}

/// An mbox separator, `From sender date`, whose last word is a year; a body line that
/// merely starts with "From " (unescaped, as some writers leave it) is not one.
fn is_separator(line: &str) -> bool {
    line.starts_with("From ")
        && line.split_whitespace().count() >= 4
        && line
            .split_whitespace()
            .last()
            .is_some_and(|y| y.len() == 4 && y.bytes().all(|b| b.is_ascii_digit()))
}

fn is_generic(host: &str) -> bool {
    host.starts_with("localhost")
        || host == "unknown"
        || host == "127.0.0.1"
        || host == "::1"
        || host == "local"
}

#[cfg(test)]
mod tests {
    use super::*;

    const MBOX: &str = "From alice@example.com Tue Mar 11 10:00:00 2003\n\
Received: from relay.example.org (relay.example.org [10.0.0.2])\n\
\tby mx.example.com (Postfix) with ESMTP id 1;\n\
\tTue, 11 Mar 2003 10:00:05 -0800\n\
Received: from mail.sender.net by relay.example.org; Tue, 11 Mar 2003 10:00:02 -0800\n\
Received: from localhost by mail.sender.net; Tue, 11 Mar 2003 10:00:01 -0800\n\
Subject: hello\n\
\n\
From the body, not a separator\n\
Received: in the body, not a header\n\
\n\
From bob@example.com Tue Mar 11 11:00:00 2003\n\
Received: from mail.sender.net by relay.example.org; someday soon\n\
Received: by mx.example.com; Tue, 11 Mar 2003 11:00:05 -0800\n\
\n\
body\n";

    #[test]
    fn received_headers_become_hops_and_the_rest_is_counted() {
        let mut b = TraceBuilder::new();
        let stats = read(Path::new("t.mbox"), MBOX.as_bytes(), &mut b).unwrap();
        assert_eq!(
            stats,
            MboxStats {
                emails: 2,
                received_headers: 5,
                hops: 2,
                unparseable_date: 1,
                generic_host: 1,
                missing_host: 1
            }
        );
        let trace = b.finish();
        let hops: Vec<(String, String, i64)> = trace
            .messages
            .iter()
            .map(|m| {
                (
                    trace.node_name(m.sender()).to_owned(),
                    trace.node_name(m.receiver()).to_owned(),
                    m.received().unwrap(),
                )
            })
            .collect();
        // 10:00:02 and 10:00:05 at -0800 are 18:00:02 and 18:00:05 UTC.
        let t = 1_047_405_602 * 1_000_000_000;
        assert_eq!(
            hops,
            vec![
                ("mail.sender.net".into(), "relay.example.org".into(), t),
                (
                    "relay.example.org".into(),
                    "mx.example.com".into(),
                    t + 3_000_000_000
                ),
            ]
        );
        assert_eq!(trace.truth_text(trace.messages[0].truth()), Some("mail1"));
    }
}
