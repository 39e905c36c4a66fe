//! Received-header traces from an mbox file (paper §7.1.3): every `Received:` header of
//! every message is one hop, from the host named after `from` to the host named after
//! `by`, at the header's date, which the receiving host wrote. Owns mbox splitting,
//! header unfolding and the reading of Received headers; what a hop means is the
//! trace's. Every header that cannot be used is counted with its reason.
//!
//! A header whose sender address is loopback (`from lair.xent.com (localhost
//! [127.0.0.1]) by xent.com`) is a hand-off inside one machine (RFC 5321 §4.4: the
//! bracketed address is the TCP connection's): no hop. The name the machine gave itself
//! on the hop before (`by lair.xent.com`) and the one it gives itself here (`by
//! xent.com`) are one node, named by the one the hops use most, so that the email's
//! chain goes on past it. The name after `from` joins nothing: over loopback it is
//! whatever the sending process said (a mail client says its user's domain).
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
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
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
    /// Headers of a hand-off inside one machine (a loopback sender address): no hop.
    pub loopback_handoffs: u64,
    /// The names such hand-offs showed to be one machine's, each group sorted with the
    /// name the node takes first; groups in the order of that name.
    pub one_machine: Vec<Vec<String>>,
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
    /// Its Received headers in header order (newest first).
    headers: Vec<Header>,
    message_id: Option<String>,
}

/// What one Received header gives.
enum Header {
    /// A hop between two machines: (from, by, the receiver's time).
    Hop(String, String, Nanos),
    /// A hand-off inside one machine, by the name it gives itself.
    Loopback(String),
    /// A header that could not be read (counted where it was read).
    Unread,
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
    join_machines(&mut chains, &mut stats);
    stats.hops = chains.iter().map(|c| c.hops.len() as u64).sum();
    Ok((chains, stats))
}

/// Names every machine's node by one of its names: those joined by a loopback hand-off
/// (generic ones aside) are one machine, named by the name its hops use most (the
/// alphabetically first among equals). A hop that joins a machine to itself that way
/// is not one: only loopback hand-offs do, and they were never hops.
fn join_machines(chains: &mut [MailChain], stats: &mut MboxStats) {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut parent: Vec<usize> = Vec::new();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut id = |name: &str, parent: &mut Vec<usize>| -> usize {
        *index.entry(name.to_owned()).or_insert_with(|| {
            parent.push(parent.len());
            parent.len() - 1
        })
    };
    let pairs = std::mem::take(&mut stats.one_machine);
    for pair in &pairs {
        let (a, b) = (id(&pair[0], &mut parent), id(&pair[1], &mut parent));
        let (a, b) = (root(&mut parent, a), root(&mut parent, b));
        parent[a.max(b)] = a.min(b);
    }
    if parent.is_empty() {
        return;
    }
    let mut uses: HashMap<&str, u64> = HashMap::new();
    for chain in chains.iter() {
        for (from, by, _) in &chain.hops {
            for name in [from, by] {
                if index.contains_key(name.as_str()) {
                    *uses.entry(name).or_default() += 1;
                }
            }
        }
    }
    let mut groups: std::collections::BTreeMap<usize, Vec<String>> = Default::default();
    for (name, &i) in &index {
        groups
            .entry(root(&mut parent, i))
            .or_default()
            .push(name.clone());
    }
    let mut renamed: HashMap<String, String> = HashMap::new();
    let mut named_groups = Vec::new();
    for (_, mut names) in groups {
        let used = |n: &String| uses.get(n.as_str()).copied().unwrap_or(0);
        names.sort_by(|a, b| used(b).cmp(&used(a)).then_with(|| a.cmp(b)));
        for name in &names[1..] {
            renamed.insert(name.clone(), names[0].clone());
        }
        named_groups.push(names);
    }
    drop(uses);
    named_groups.sort();
    stats.one_machine = named_groups;
    for chain in chains.iter_mut() {
        for (from, by, _) in &mut chain.hops {
            for name in [from, by] {
                if let Some(to) = renamed.get(name.as_str()) {
                    name.clone_from(to);
                }
            }
        }
    }
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
    let mut hops = Vec::with_capacity(email.headers.len());
    // The name the machine holding the email last gave itself.
    let mut holder: Option<String> = None;
    for header in email.headers.into_iter().rev() {
        match header {
            Header::Hop(from, by, time) => {
                holder = Some(by.clone());
                hops.push((from, by, time));
            }
            Header::Loopback(by) => {
                if let Some(before) = holder.filter(|before| *before != by && !is_generic(before)) {
                    if !is_generic(&by) {
                        let pair = if before < by {
                            [before, by.clone()]
                        } else {
                            [by.clone(), before]
                        };
                        if !stats.one_machine.iter().any(|p| p[..] == pair[..]) {
                            stats.one_machine.push(pair.to_vec());
                        }
                    }
                }
                holder = Some(by);
            }
            Header::Unread => holder = None,
        }
    }
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
    if name.trim().eq_ignore_ascii_case("received") {
        email.headers.push(received(value, stats));
    }
}

/// What one Received header gives; what is not a hop is counted with its reason.
fn received(value: &str, stats: &mut MboxStats) -> Header {
    stats.received_headers += 1;
    let (route, date) = match value.rsplit_once(';') {
        Some((route, date)) => (route, date.trim()),
        None => (value, ""),
    };
    let by = host_after(route, "by");
    if let Some(by) = by.clone().filter(|_| sent_over_loopback(route)) {
        stats.loopback_handoffs += 1;
        return Header::Loopback(by);
    }
    let (Some(from), Some(by)) = (host_after(route, "from"), by) else {
        stats.missing_host += 1;
        return Header::Unread;
    };
    if is_generic(&from) || is_generic(&by) {
        stats.generic_host += 1;
        return Header::Unread;
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
        return Header::Unread;
    };
    Header::Hop(from, by, time)
}

/// Whether the `from` clause's TCP information (RFC 5321 §4.4: the connection's address,
/// in brackets, with an ident `user@` before it at times) is a loopback address: the
/// mail came from a process of the receiving machine.
fn sent_over_loopback(route: &str) -> bool {
    let words: Vec<&str> = route.split_whitespace().collect();
    let Some(from) = words.iter().position(|w| w.eq_ignore_ascii_case("from")) else {
        return false;
    };
    let end = words[from..]
        .iter()
        .position(|w| w.eq_ignore_ascii_case("by"))
        .map_or(words.len(), |by| from + by);
    words[from + 1..end].iter().any(|word| {
        let word = word.trim_matches(|c| matches!(c, '(' | ')' | ';' | ','));
        let address = word.rsplit_once('@').map_or(word, |(_, at)| at);
        let address = address.trim_matches(|c| c == '[' || c == ']');
        let address = address
            .strip_prefix("IPv6:")
            .or_else(|| address.strip_prefix("ipv6:"))
            .unwrap_or(address);
        address
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
    })
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
                loopback_handoffs: 0,
                one_machine: Vec::new(),
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

    fn chains_of(mbox: &str) -> (Vec<Vec<(String, String)>>, MboxStats) {
        let (chains, stats) = read_emails(Path::new("t.mbox"), mbox.as_bytes()).unwrap();
        let hops = chains
            .iter()
            .map(|c| {
                c.hops
                    .iter()
                    .map(|(f, b, _)| (f.clone(), b.clone()))
                    .collect()
            })
            .collect();
        (hops, stats)
    }

    fn pairs(hops: &[(&str, &str)]) -> Vec<(String, String)> {
        hops.iter()
            .map(|&(f, b)| (f.to_owned(), b.to_owned()))
            .collect()
    }

    #[test]
    fn a_hand_off_over_loopback_is_no_hop_and_joins_the_machines_names() {
        // A list manager (lair.xent.com) hands mail to the MTA of the same machine
        // (xent.com) over loopback; then xent.com relays it to dogma.
        let mbox = "From a@x Tue Mar 11 10:00:00 2003\n\
Received: from xent.com ([64.161.22.236]) by dogma.org; Tue, 11 Mar 2003 10:03:00 -0800\n\
Received: from lair.xent.com (localhost [127.0.0.1]) by xent.com (Postfix);\n\
\tTue, 11 Mar 2003 10:02:00 -0800\n\
Received: from mail.sender.net (mail.sender.net [10.1.1.1]) by lair.xent.com;\n\
\tTue, 11 Mar 2003 10:01:00 -0800\n\
\n\
From b@x Tue Mar 11 11:00:00 2003\n\
Received: from xent.com ([64.161.22.236]) by dogma.org; Tue, 11 Mar 2003 11:03:00 -0800\n\
Received: from other.net (other.net [10.1.1.2]) by xent.com; Tue, 11 Mar 2003 11:01:00 -0800\n\
\n";
        let (chains, stats) = chains_of(mbox);
        // xent.com is named by three hops, lair.xent.com by one: the node is xent.com.
        assert_eq!(
            chains,
            [
                pairs(&[("mail.sender.net", "xent.com"), ("xent.com", "dogma.org")]),
                pairs(&[("other.net", "xent.com"), ("xent.com", "dogma.org")]),
            ]
        );
        assert_eq!((stats.hops, stats.loopback_handoffs), (4, 1));
        assert_eq!(stats.one_machine, [["xent.com", "lair.xent.com"]]);
    }

    #[test]
    fn the_name_a_local_sender_gives_over_loopback_joins_nothing() {
        // A mail client on a DSL host says its user's domain; the machine is the DSL
        // host, and eecs.berkeley.edu elsewhere is another machine.
        let mbox = "From a@x Tue Mar 11 10:00:00 2003\n\
Received: from adsl-1.pacbell.net (adsl-1.pacbell.net [63.1.1.1]) by egwn.net;\n\
\tTue, 11 Mar 2003 10:01:00 -0800\n\
Received: from eecs.berkeley.edu (localhost [127.0.0.1]) by adsl-1.pacbell.net;\n\
\tTue, 11 Mar 2003 10:00:00 -0800\n\
\n\
From b@x Tue Mar 11 11:00:00 2003\n\
Received: from eecs.berkeley.edu (eecs.berkeley.edu [128.32.1.1]) by egwn.net;\n\
\tTue, 11 Mar 2003 11:01:00 -0800\n\
\n";
        let (chains, stats) = chains_of(mbox);
        assert_eq!(
            chains,
            [
                pairs(&[("adsl-1.pacbell.net", "egwn.net")]),
                pairs(&[("eecs.berkeley.edu", "egwn.net")]),
            ]
        );
        assert_eq!(stats.loopback_handoffs, 1);
        assert!(stats.one_machine.is_empty());
    }

    #[test]
    fn a_loopback_sender_is_read_in_each_form_the_tcp_information_takes() {
        for route in [
            "from lugh (root@localhost [127.0.0.1]) by lugh.tuatha.org",
            "from jalapeno [127.0.0.1] by localhost",
            "from localhost (sendmail-bs@127.0.0.1) by mail.example.com",
            "from box (box [IPv6:::1]) by box.example.com",
            "from box (localhost [127.4.5.6]) by box.example.com",
        ] {
            assert!(sent_over_loopback(route), "{route}");
        }
        for route in [
            "from relay.example.org (relay.example.org [10.0.0.2]) by mx.example.com",
            "from relay.example.org by mx.example.com ([127.0.0.1])",
            "by mx.example.com",
        ] {
            assert!(!sent_over_loopback(route), "{route}");
        }
    }
}
