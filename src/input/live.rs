//! One capture read as it arrives (`tcpdump -U -w - | blackbox records -`), its messages
//! written as text-trace lines while it is read rather than when it ends. What a whole
//! read decides from all of a capture before naming anything is decided here from its
//! start: the host's own address from the first messages, and the order of lines by
//! holding each a short while. Owns that early decision and the holding; the reading,
//! naming and line syntax are [`crate::capture`]'s and [`crate::trace::text`]'s.

use super::{empty_input, report_captures, source, Input, InputError, Joined};
use crate::capture::flows::CaptureMessage;
use crate::capture::{self, ends::EndWriter, CaptureOptions, MessageBatch, Uncertain};
use crate::trace::{ends::EndBlock, text, Nanos};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

/// How long a line is held for messages that began earlier but were cut later (a slow
/// reply, a long upload): lines of messages longer than this come out of time order,
/// counted.
pub const HOLD: Nanos = 1_000_000_000;

/// Messages looked at, at most, before the host's own address is decided.
const DECIDE_WITHIN: usize = 200;

/// Messages looked at, at least, before an address that is an end of nearly all of
/// them is taken as the host's own.
const DECIDE_AFTER: usize = 20;

/// What writing as the capture came brought.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Written {
    /// Lines written.
    pub lines: u64,
    /// Of those, lines written after a line of a later time (a message longer than
    /// [`HOLD`]).
    pub out_of_order: u64,
}

/// Whether `options` let a capture be written as it arrives: nodes that need every
/// capture's servers first (`--node-by service`, `operation`) do not.
pub fn can_stream(options: &CaptureOptions) -> bool {
    EndWriter::names_nodes(options.node_by)
}

/// Reads the one capture `source` as it arrives and writes its message ends to `out`
/// as text-trace lines, flushed after each batch of packets; returns what was read, to
/// report as a whole read does, and what was written.
pub fn write_records(
    source: source::Source,
    options: &CaptureOptions,
    out: &mut dyn Write,
) -> Result<(Input, Written), InputError> {
    let path = source.path.clone();
    let host = capture::host_name(&path, options);
    let input = source.open(&crate::progress::Progress::hidden())?;
    let mut options = options.clone();
    // Every packet goes on to be followed as it comes: a batch would wait to fill.
    options.live = true;
    let named = Named::default();
    let mut writer = LiveWriter {
        host: host.clone(),
        options: &options,
        named: &named,
        writer: None,
        undecided: Undecided::default(),
        block: EndBlock::default(),
        held_lines: BTreeMap::new(),
        newest: Nanos::MIN,
        last_written: Nanos::MIN,
        line: String::new(),
        written: Written::default(),
        failed: None,
    };
    let mut sink = |batch: &MessageBatch<'_>| writer.take(batch, out);
    let mut read = capture::read_capture_into(&path, host, input, &options, Some(&mut sink))
        .map_err(InputError::from)?;
    writer.finish(out);
    if let Some(error) = writer.failed.take() {
        return Err(InputError::Output(error));
    }
    let written = std::mem::take(&mut writer.written);
    drop(writer);
    if let Some((local, uncertain)) = named.own.into_inner() {
        read.local = local;
        read.local_uncertain = uncertain;
    }
    let mut input = empty_input();
    report_captures(vec![read], Joined::default(), &mut input);
    Ok((input, written))
}

/// What names the messages once the own address is decided, set once and borrowed by
/// the writer from then on.
#[derive(Default)]
struct Named {
    own: OnceLock<(BTreeSet<IpAddr>, Option<Uncertain>)>,
    capture: OnceLock<capture::HostCapture>,
    names: OnceLock<BTreeMap<IpAddr, String>>,
    truth: BTreeMap<String, String>,
}

/// A capture's clock is its own: one capture, nothing to align.
static SAME_CLOCK: fn(Nanos) -> Nanos = |t| t;

/// Messages held while the own address is undecided, with the tables they index into.
#[derive(Default)]
struct Undecided {
    messages: Vec<CaptureMessage>,
    endpoints: Vec<SocketAddr>,
    operations: Vec<String>,
    propagated: Vec<String>,
}

/// The sink's state: messages held until the own address is decided, then lines held
/// until they are [`HOLD`] old.
struct LiveWriter<'a> {
    host: String,
    options: &'a CaptureOptions,
    named: &'a Named,
    writer: Option<EndWriter<'a>>,
    undecided: Undecided,
    block: EndBlock,
    /// Lines by (time, order written).
    held_lines: BTreeMap<(Nanos, u64), String>,
    /// The latest time a message was seen to reach.
    newest: Nanos,
    last_written: Nanos,
    line: String,
    written: Written,
    /// The first error writing, after which nothing more is written.
    failed: Option<io::Error>,
}

impl<'a> LiveWriter<'a> {
    fn take(&mut self, batch: &MessageBatch<'_>, out: &mut dyn Write) {
        if self.failed.is_some() {
            return;
        }
        for message in batch.messages {
            self.newest = self.newest.max(message.framed.last);
        }
        if self.writer.is_some() {
            self.write_ends(batch);
        } else {
            let held = &mut self.undecided;
            held.messages.extend_from_slice(batch.messages);
            held.endpoints = batch.endpoints.to_vec();
            held.operations = batch.operations.to_vec();
            held.propagated = batch.propagated.to_vec();
            if !self.decide(false) {
                return;
            }
        }
        self.release(self.newest.saturating_sub(HOLD), out);
    }

    /// Decides the own address if the held messages tell it (or `last`), and then
    /// writes them: whether it is decided.
    fn decide(&mut self, last: bool) -> bool {
        let held = &self.undecided;
        // An address --names gives the host's name is its own, as in a whole read.
        let named_own = (self.options.names.iter()).find(|(_, name)| **name == self.host);
        let own = match named_own {
            Some((address, _)) => Some((BTreeSet::from([*address]), None)),
            None => decide(&held.messages, &held.endpoints, last),
        };
        let Some(own) = own else {
            return false;
        };
        let named = self.named;
        let own = named.own.get_or_init(|| own);
        let capture = (named.capture).get_or_init(|| {
            capture::HostCapture::from_stamps(&self.host, own.0.clone(), Vec::new())
        });
        let names = named.names.get_or_init(|| self.names(&own.0));
        self.writer = Some(EndWriter::new(capture, names, &named.truth, &SAME_CLOCK));
        let held = std::mem::take(&mut self.undecided);
        self.write_ends(&MessageBatch {
            messages: &held.messages,
            endpoints: &held.endpoints,
            operations: &held.operations,
            propagated: &held.propagated,
        });
        true
    }

    /// Names the batch's messages and holds their lines.
    fn write_ends(&mut self, batch: &MessageBatch<'_>) {
        let writer = self.writer.as_mut().expect("decided first");
        self.block = EndBlock::default();
        writer.write(batch, &mut self.block);
        for k in 0..self.block.len() {
            self.line.clear();
            text::push_line(&mut self.line, &self.block.fields(k));
            let order = self.written.lines + self.held_lines.len() as u64;
            (self.held_lines).insert((self.block.time(k), order), self.line.clone());
        }
    }

    /// Node names: `--names`, then the host's name for its own address.
    fn names(&self, local: &BTreeSet<IpAddr>) -> BTreeMap<IpAddr, String> {
        let mut names = BTreeMap::new();
        if let [own] = local.iter().copied().collect::<Vec<_>>()[..] {
            names.insert(own, self.host.clone());
        }
        names.extend(self.options.names.iter().map(|(a, n)| (*a, n.clone())));
        names
    }

    /// Writes the held lines of times up to `until`, and flushes.
    fn release(&mut self, until: Nanos, out: &mut dyn Write) {
        let later = self.held_lines.split_off(&(until.saturating_add(1), 0));
        let ready = std::mem::replace(&mut self.held_lines, later);
        for ((time, _), line) in ready {
            self.written.lines += 1;
            if time < self.last_written {
                self.written.out_of_order += 1;
            }
            self.last_written = self.last_written.max(time);
            if let Err(error) = out.write_all(line.as_bytes()) {
                self.failed = Some(error);
                return;
            }
        }
        if let Err(error) = out.flush() {
            self.failed = Some(error);
        }
    }

    /// At the end of the input: decides on what came, if not yet, and writes the rest.
    fn finish(&mut self, out: &mut dyn Write) {
        if self.failed.is_some() {
            return;
        }
        if self.writer.is_none() && !self.undecided.messages.is_empty() {
            self.decide(true);
        }
        self.release(Nanos::MAX, out);
    }
}

/// The host's own address from the messages so far: the one address that is an end of
/// all of them, or of nearly all of at least [`DECIDE_AFTER`] of them; else, after
/// [`DECIDE_WITHIN`] or at the end (`last`), the end of the most, a guess.
fn decide(
    messages: &[CaptureMessage],
    endpoints: &[SocketAddr],
    last: bool,
) -> Option<(BTreeSet<IpAddr>, Option<Uncertain>)> {
    let ends_of = |m: &CaptureMessage| {
        [
            endpoints[m.client as usize].ip(),
            endpoints[m.server as usize].ip(),
        ]
    };
    let mut ends: BTreeMap<IpAddr, usize> = BTreeMap::new();
    for message in messages {
        let [client, server] = ends_of(message);
        *ends.entry(client).or_default() += 1;
        if server != client {
            *ends.entry(server).or_default() += 1;
        }
    }
    let total = messages.len();
    let nearly_all: Vec<IpAddr> = (ends.iter())
        .filter(|&(_, &n)| n * 10 >= total * 9)
        .map(|(a, _)| *a)
        .collect();
    let every: Vec<IpAddr> = (ends.iter())
        .filter(|&(_, &n)| n == total)
        .map(|(a, _)| *a)
        .collect();
    // One address in every message (a loopback capture's from its first) is the host's.
    if (total >= DECIDE_AFTER && nearly_all.len() == 1) || every.len() == 1 {
        let own = if every.len() == 1 { every } else { nearly_all };
        return Some((own.into_iter().collect(), None));
    }
    if !last && total < DECIDE_WITHIN {
        return None;
    }
    let most = (ends.iter()).max_by_key(|&(address, &n)| (n, std::cmp::Reverse(*address)))?;
    Some((BTreeSet::from([*most.0]), Some(Uncertain::Tie)))
}

impl std::fmt::Display for Written {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lines = crate::words::counted(self.lines, "line");
        write!(f, "wrote {lines} as the capture came")?;
        if self.out_of_order > 0 {
            write!(
                f,
                " ({} after a later one: messages longer than the {} lines are held)",
                self.out_of_order,
                crate::trace::time::human_duration(HOLD as f64)
            )?;
        }
        Ok(())
    }
}
