//! Received-header traces from an mbox file (paper §7.1.3): every `Received:` header of
//! every message is one hop, from the host named after `from` to the host named after
//! `by`, at the header's date, which the receiving host wrote. Owns mbox splitting,
//! header unfolding and the reading of Received headers; what a hop means is the
//! trace's. Every header that cannot be used is counted with its reason.
//!
//! Each hop's truth tag is its email's Message-ID, so that a trace made from mail can be
//! scored against the emails' own chains of relays ([`MailChain`], in the order the
//! headers tell, which the hops' times need not: relays' clocks disagree).

use super::text::TraceError;
use super::{End, Kind, Message, Nanos, TraceBuilder};
use hashbrown::HashMap;
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
    /// Emails without a Message-ID, tagged `mailN` by their number instead.
    pub without_message_id: u64,
    /// Emails whose Message-ID an earlier email had (a copy delivered again), tagged
    /// with `#2`, `#3`, ... after it so that each copy is a chain of its own.
    pub repeated_message_id: u64,
    /// Lines read.
    #[serde(skip)]
    pub lines: u64,
}

/// One email's usable hops, oldest first (the order its Received headers tell, read
/// from the bottom): (sender, receiver, the receiver's time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailChain {
    /// The truth tag its hops carry.
    pub truth: String,
    /// (from, by, time) per hop, oldest first.
    pub hops: Vec<(String, String, Nanos)>,
}

/// One email's state while its headers are read.
#[derive(Default)]
struct Email {
    /// Usable hops in header order (newest first).
    hops: Vec<(String, String, Nanos)>,
    message_id: Option<String>,
}

/// Reads an mbox: each email's usable hops as a chain (oldest first) tagged with its
/// Message-ID, and what was read and set aside. [`push`] writes them into a trace,
/// after [`crate::align::mail`] has corrected their times if asked.
pub fn read_emails(
    path: &Path,
    mut reader: impl BufRead,
) -> Result<(Vec<MailChain>, MboxStats), TraceError> {
    let mut stats = MboxStats::default();
    let mut chains = Vec::new();
    let mut line = Vec::new();
    let mut in_headers = false;
    let mut previous_blank = true;
    let mut header = String::new();
    let mut line_no = 0u64;
    let mut email = Email::default();
    let mut seen_ids: HashMap<String, u64> = HashMap::new();
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
                read_header(&header, &mut email, &mut stats);
                header.clear();
            }
            // An email ends where the next begins, or at the end of the file.
            if (n == 0 || separator) && stats.emails > 0 {
                let email = std::mem::take(&mut email);
                chains.push(chain_of(email, stats.emails, &mut seen_ids, &mut stats));
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
    stats.lines = line_no - 1;
    Ok((chains, stats))
}

/// Writes every chain's hops into `builder`, each a received-end observation at its
/// time with its chain's truth tag (its path instance).
pub fn push(chains: &[MailChain], stats: &MboxStats, builder: &mut TraceBuilder) {
    for chain in chains {
        let tag = builder.truth(&chain.truth);
        for (from, by, time) in &chain.hops {
            let (sender, receiver) = (builder.node(from), builder.node(by));
            let call_id = builder.call_id("-");
            builder.push(Message::observed(
                End::Received,
                *time,
                Kind::Free,
                sender,
                receiver,
                call_id,
                tag,
            ));
        }
    }
    builder.stats_mut().files += 1;
    builder.stats_mut().lines += stats.lines;
}

/// One email's chain: its hops oldest first, tagged with its Message-ID (its first
/// word, without angle brackets), `#k` after it for the k-th email with the same one,
/// `mailN` (the email's number) without one.
fn chain_of(
    email: Email,
    number: u64,
    seen_ids: &mut HashMap<String, u64>,
    stats: &mut MboxStats,
) -> MailChain {
    let truth = match email.message_id {
        Some(id) => {
            let copies = seen_ids.entry(id.clone()).or_insert(0);
            *copies += 1;
            if *copies == 1 {
                id
            } else {
                stats.repeated_message_id += 1;
                format!("{id}#{copies}")
            }
        }
        None => {
            stats.without_message_id += 1;
            format!("mail{number}")
        }
    };
    let mut hops = email.hops;
    hops.reverse();
    stats.hops += hops.len() as u64;
    MailChain { truth, hops }
}

/// Reads one unfolded header line into the email: its Message-ID, or a hop if it is a
/// usable Received header.
fn read_header(header: &str, email: &mut Email, stats: &mut MboxStats) {
    let Some((name, value)) = header.split_once(':') else {
        return;
    };
    if name.trim().eq_ignore_ascii_case("message-id") {
        // A token without spaces, as the trace's columns need: the first word.
        let id = value
            .split_whitespace()
            .next()
            .map(|w| w.trim_matches(|c| c == '<' || c == '>'))
            .filter(|w| !w.is_empty());
        if email.message_id.is_none() {
            email.message_id = id.map(as_token);
        }
        return;
    }
    if let Some(hop) = hop(name, value, stats) {
        email.hops.push(hop);
    }
}

/// The hop of one header, if it is a usable Received header: (from, by, time).
fn hop(name: &str, value: &str, stats: &mut MboxStats) -> Option<(String, String, Nanos)> {
    if !name.trim().eq_ignore_ascii_case("received") {
        return None;
    }
    stats.received_headers += 1;
    let (route, date) = match value.rsplit_once(';') {
        Some((route, date)) => (route, date.trim()),
        None => (value, ""),
    };
    let (Some(from), Some(by)) = (host_after(route, "from"), host_after(route, "by")) else {
        stats.missing_host += 1;
        return None;
    };
    if is_generic(&from) || is_generic(&by) {
        stats.generic_host += 1;
        return None;
    }
    // The parser is lenient (it reads "someday soon" as a date): ask for a clock time and
    // a four-digit year first.
    let plausible = date.contains(':')
        && date
            .split_whitespace()
            .any(|w| w.len() == 4 && w.parse::<u32>().is_ok_and(|y| y >= 1970));
    let time = mailparse::dateparse(date)
        .ok()
        .filter(|_| plausible)
        .and_then(|seconds| seconds.checked_mul(1_000_000_000));
    let Some(time) = time else {
        stats.unparseable_date += 1;
        return None;
    };
    Some((from, by, time))
}

/// A Message-ID as a trace's truth token: `%`, `=` and `#` percent-encoded, since the
/// text trace reads a token with `=` as a key and one starting with `#` as a comment.
fn as_token(id: &str) -> String {
    let mut token = String::with_capacity(id.len());
    for c in id.chars() {
        match c {
            '%' => token.push_str("%25"),
            '=' => token.push_str("%3D"),
            '#' => token.push_str("%23"),
            c => token.push(c),
        }
    }
    token
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
        let (chains, stats) = read_emails(Path::new("t.mbox"), MBOX.as_bytes()).unwrap();
        let mut b = TraceBuilder::new();
        push(&chains, &stats, &mut b);
        assert_eq!(
            stats,
            MboxStats {
                emails: 2,
                received_headers: 5,
                hops: 2,
                unparseable_date: 1,
                generic_host: 1,
                missing_host: 1,
                without_message_id: 2,
                repeated_message_id: 0,
                lines: 16,
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

    #[test]
    fn hops_carry_the_message_id_and_chains_keep_the_headers_order() {
        // The relay's clock is two minutes fast: by time, its hop would come first.
        let mbox = "From a@example.com Tue Mar 11 10:00:00 2003\n\
Received: from relay.example.org by mx.example.com; Tue, 11 Mar 2003 10:00:05 -0800\n\
Received: from mail.sender.net by relay.example.org; Tue, 11 Mar 2003 10:02:00 -0800\n\
Message-ID: <1@sender.net> (comment)\n\
\n\
From a@example.com Tue Mar 11 10:00:00 2003\n\
Received: from mail.sender.net by mx.example.com; Tue, 11 Mar 2003 10:00:09 -0800\n\
Message-Id: <1@sender.net>\n\
\n\
body\n";
        let (chains, stats) = read_emails(Path::new("t.mbox"), mbox.as_bytes()).unwrap();
        let mut b = TraceBuilder::new();
        push(&chains, &stats, &mut b);
        assert_eq!((stats.emails, stats.hops), (2, 3));
        assert_eq!(
            (stats.without_message_id, stats.repeated_message_id),
            (0, 1)
        );
        let names: Vec<(&str, Vec<(&str, &str)>)> = chains
            .iter()
            .map(|c| {
                let hops = c
                    .hops
                    .iter()
                    .map(|(f, t, _)| (f.as_str(), t.as_str()))
                    .collect();
                (c.truth.as_str(), hops)
            })
            .collect();
        assert_eq!(
            names,
            vec![
                (
                    "1@sender.net",
                    vec![
                        ("mail.sender.net", "relay.example.org"),
                        ("relay.example.org", "mx.example.com")
                    ]
                ),
                (
                    "1@sender.net#2",
                    vec![("mail.sender.net", "mx.example.com")]
                ),
            ]
        );
        let trace = b.finish();
        let mut tags: Vec<&str> = trace
            .messages
            .iter()
            .filter_map(|m| trace.truth_text(m.truth()))
            .collect();
        tags.sort_unstable();
        assert_eq!(tags, ["1@sender.net", "1@sender.net", "1@sender.net#2"]);
    }

    #[test]
    fn a_message_id_is_one_token_the_text_trace_reads_back() {
        let token = as_token("CA+x=y#1%@mail.example.com");
        assert_eq!(token, "CA+x%3Dy%231%25@mail.example.com");
        let line = format!("1.0 MSG_RECV a b - {token}\n");
        let trace = crate::trace::text::trace_from_str(&line);
        assert_eq!(
            trace.truth_text(trace.messages[0].truth()),
            Some(token.as_str())
        );
    }
}
