//! The files a user names, read into one merged trace: text traces and packet captures
//! told apart by their first bytes; each capture's own addresses decided; the hosts'
//! clocks aligned onto one reference host's; every message end added to the trace in
//! that clock; causality repaired on request. Returns the trace with structured reports
//! of what was read, set aside and corrected, and prints nothing (a progress bar on a
//! terminal aside): the wording is [`crate::report::input`]'s. Also rewrites captures
//! into the reference clock (`align --write`). Owns the order of these steps, not the
//! steps themselves, which are [`crate::trace`]'s, [`crate::capture`]'s and
//! [`crate::align`]'s.

use crate::align::{self, fit::Method, repair, Alignment};
use crate::capture::{self, file::Stopped, stats::FileStats, write::Container, CaptureOptions};
use crate::progress::Progress;
use crate::trace::mbox::MboxStats;
use crate::trace::{text, Nanos, Trace, TraceBuilder};
use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub mod elsewhere;
pub mod live;
pub mod source;
pub mod streamed;
use source::{Kind, Source, SourceError};

/// How to read the inputs.
#[derive(Debug, Clone, Default)]
pub struct InputOptions {
    /// How captures are read and their nodes named.
    pub capture: CaptureOptions,
    /// How the hosts' clocks are aligned when there are two captures or more; `None`
    /// leaves every host its own clock.
    pub align: Option<Method>,
    /// Where the graph of hosts has loops, solve every host's correction over all pairs
    /// together (see [`align::align_with`]).
    pub least_squares: bool,
    /// Mend messages that still arrive before they leave, after alignment.
    pub repair: Option<repair::RepairOptions>,
    /// Draw progress bars on stderr while files are read (only on a terminal).
    pub progress: bool,
    /// What `blackbox collect` recorded of the captures, where it did: warned of per
    /// host ([`InputWarning::Collected`]).
    pub collected: Vec<crate::collect::manifest::Collected>,
}

/// Why the inputs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// An input is unreadable, empty, or of a kind not read here.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// A text trace is unreadable or malformed.
    #[error(transparent)]
    Trace(#[from] text::TraceError),
    /// A capture is unreadable or not a capture.
    #[error(transparent)]
    Capture(#[from] capture::CaptureError),
    /// Captures nested in segments: the nesting refused ([`streamed`]).
    #[error(transparent)]
    Nest(#[from] crate::streaming::StreamError),
    /// A request that cannot be carried out as asked.
    #[error("{0}")]
    Usage(String),
    /// The inputs were read and hold no message: nothing is left to work on.
    #[error("no messages to work on: {0}")]
    NoMessages(String),
    /// Another process of a cluster, reading captures for this one, was lost
    /// ([`elsewhere`]): the machine's fault, not the input's.
    #[error("{0}")]
    Lost(String),
    /// The records of a capture read as it arrived could not be written ([`live`]):
    /// the output's fault, not the input's.
    #[error("cannot write the records")]
    Output(#[source] std::io::Error),
    /// An output directory could not be made.
    #[error("cannot create {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The merged trace and what reading it reported.
#[derive(Debug)]
pub struct Input {
    /// Every message, both ends merged, in time order.
    pub trace: Trace,
    /// Per capture, in the order given: what it held.
    pub captures: Vec<CaptureRead>,
    /// The captures' counts summed, when there were captures.
    pub capture_totals: Option<FileStats>,
    /// The clock alignment, when captures were aligned.
    pub alignment: Option<Alignment>,
    /// The address translations (NAT) found between captures, when there were two or
    /// more.
    pub translations: Option<crate::nat::Translations>,
    /// What the causality repair moved, when it ran.
    pub repair: Option<Repaired>,
    /// What the user should know even with `--quiet`, in order.
    pub warnings: Vec<InputWarning>,
}

/// What one capture held.
#[derive(Debug, Clone)]
pub struct CaptureRead {
    /// The file.
    pub path: PathBuf,
    /// Its size as stored, when it is a file.
    pub stored_bytes: Option<u64>,
    /// The host it was captured on.
    pub host: String,
    /// The host's own addresses, as far as the traffic tells.
    pub local: Vec<IpAddr>,
    /// Why `local` is only a guess, when it is.
    pub local_uncertain: Option<capture::Uncertain>,
    /// Counts of what was read and set aside.
    pub stats: FileStats,
}

/// What the causality repair did, with the shortest message time it assumed.
#[derive(Debug, Clone)]
pub struct Repaired {
    /// The shortest time a message may take.
    pub min_latency: Nanos,
    /// What was moved.
    pub report: repair::RepairReport,
}

/// Something the user should know about the input even when the summary is hidden.
#[derive(Debug, Clone, PartialEq)]
pub enum InputWarning {
    /// A capture ended in a damaged or cut-off record; the packets before it are used.
    CutShort {
        /// The capture.
        path: PathBuf,
        /// Where and why reading stopped.
        stopped: Stopped,
        /// Packets read before it.
        packets: u64,
    },
    /// No TCP segment links this host to the others: its clock stays its own.
    Unaligned {
        /// The host.
        host: String,
        /// The TCP segments it exchanged with other captured hosts: none (its peers'
        /// captures were not given), or none of them seen at the other end.
        exchanged: u64,
    },
    /// What `blackbox collect` recorded of a host that the analysis should be read
    /// with: packets dropped, a host not captured, packets cut, connections begun
    /// before the capture, segmentation offloads, an unsynchronised clock.
    Collected(String),
    /// The clock fits around a loop of hosts disagree: one of them is wrong.
    LoopDisagrees {
        /// The pair whose fit the loop checks.
        hosts: (String, String),
        /// By how much, in nanoseconds.
        residual_ns: f64,
    },
}

impl fmt::Display for InputWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputWarning::CutShort {
                path,
                stopped,
                packets,
            } => write!(
                f,
                "warning: {}: packet {} at byte {}: {}; {} before it {} used",
                source::name(path),
                stopped.packet,
                stopped.offset,
                stopped.reason,
                match packets {
                    0 => "no packet".to_owned(),
                    1 => "the 1 packet".to_owned(),
                    n => format!("the {n} packets"),
                },
                match packets {
                    1 => "is",
                    _ => "are",
                }
            ),
            InputWarning::Unaligned { host, exchanged: 0 } => write!(
                f,
                "warning: no TCP segment links {host} to the other captures, its clock stays its own: it exchanged none with the hosts they own (are its peers' captures given, under their own addresses?)"
            ),
            InputWarning::Unaligned { host, exchanged } => write!(
                f,
                "warning: no TCP segment links {host} to the other captures, its clock stays its own: none of the {exchanged} segments it exchanged with the hosts they own was seen at the other end (do the captures cover the same time?)"
            ),
            InputWarning::Collected(what) => write!(f, "warning: collected {what}"),
            InputWarning::LoopDisagrees { hosts, residual_ns } => write!(
                f,
                "warning: the clock fits around {}–{} disagree by {}: one of them is wrong",
                hosts.0,
                hosts.1,
                crate::trace::time::human_duration(*residual_ns)
            ),
        }
    }
}

/// Reads and merges `files`: text traces and captures, each plain or gzip'd (told apart
/// by their first bytes; `-` is standard input), the captures aligned and added in the
/// reference clock, then repaired if asked.
pub fn read(files: &[PathBuf], options: &InputOptions) -> Result<Input, InputError> {
    read_sources(Source::sniff_all(files)?, options)
}

/// [`read`] of inputs already told apart ([`Source::sniff_all`]).
pub fn read_sources(sources: Vec<Source>, options: &InputOptions) -> Result<Input, InputError> {
    let (captures, texts): (Vec<Source>, Vec<Source>) = sources
        .into_iter()
        .partition(|source| source.kind == Kind::Capture);
    let mut builder = TraceBuilder::new();
    let text_traces = texts.len();
    read_texts(texts, options.progress, &mut builder)?;
    let mut input = empty_input();
    if !captures.is_empty() {
        let mut capture_options = options.capture.clone();
        // Stamps join connection ends across address translation, and align the clocks.
        capture_options.stamp_for(captures.len(), options.align.is_some());
        let read = read_captures(captures, &capture_options, options.progress)?;
        add_captures(read, options, &mut builder, &mut input);
    }
    let input = finish(builder, options, input);
    match input.trace.messages.is_empty() {
        true => Err(InputError::NoMessages(what_was_read(&input, text_traces))),
        false => Ok(input),
    }
}

/// Text traces opened to be read as a stream ([`crate::streaming`]), with the progress
/// bar over their bytes (to finish when they are read); the sources back, unopened,
/// when any is a capture (captures are read whole) or when they fit one segment of
/// `segment_lines` lines ([`hold_at_most`]).
#[allow(clippy::type_complexity)]
pub fn open_texts(
    sources: Vec<Source>,
    progress: bool,
    segment_lines: usize,
) -> Result<Result<(Vec<crate::streaming::TextInput>, Progress), Vec<Source>>, InputError> {
    if sources.iter().any(|source| source.kind == Kind::Capture)
        || hold_at_most(&sources, segment_lines)
    {
        return Ok(Err(sources));
    }
    let progress = progress_over("reading text traces", &sources, progress);
    let inputs = sources
        .into_iter()
        .map(|source| {
            let path = source.path.clone();
            let reader = std::io::BufReader::with_capacity(1 << 20, source.open(&progress)?);
            Ok(crate::streaming::TextInput {
                path,
                reader: Box::new(reader),
            })
        })
        .collect::<Result<Vec<_>, SourceError>>()?;
    Ok(Ok((inputs, progress)))
}

/// Whether `sources`, all plain files, hold at most `lines` lines between them, told
/// by counting newlines, and no further than that many: such traces are read whole
/// straight into the trace, as they were before segments, instead of held as a chunk
/// of text while the trace is built (the 40-client shop at 1 M messages peaked at 155
/// MB that way, against 113 MB read whole). Standard input and gzip cannot be counted
/// without being read, so they stream.
fn hold_at_most(sources: &[Source], lines: usize) -> bool {
    if sources
        .iter()
        .any(|source| !source.is_file() || source.gzip)
    {
        return false;
    }
    let mut seen = 0usize;
    let mut block = vec![0u8; 1 << 20];
    for source in sources {
        let Ok(mut file) = std::fs::File::open(&source.path) else {
            return false;
        };
        let mut ended = true;
        loop {
            match std::io::Read::read(&mut file, &mut block) {
                Ok(0) => break,
                Ok(n) => {
                    seen += memchr::memchr_iter(b'\n', &block[..n]).count();
                    ended = block[n - 1] == b'\n';
                }
                Err(_) => return false,
            }
            if seen > lines {
                return false;
            }
        }
        // A last line without its newline.
        seen += usize::from(!ended);
    }
    seen <= lines
}

/// The input of text traces read whole by [`crate::streaming`]: refused as [`read`]
/// refuses one that holds no message.
pub fn from_text_trace(trace: Trace, text_traces: usize) -> Result<Input, InputError> {
    let input = Input {
        trace,
        ..empty_input()
    };
    match input.trace.messages.is_empty() {
        true => Err(InputError::NoMessages(what_was_read(&input, text_traces))),
        false => Ok(input),
    }
}

/// What the inputs held, when it came to no message: per capture its packets, what was
/// set aside and why, and where reading stopped (the summary that says so is not
/// printed when the run fails); the text traces' lines.
fn what_was_read(input: &Input, text_traces: usize) -> String {
    use crate::words::counted;
    let mut held: Vec<String> = input
        .captures
        .iter()
        .map(|capture| {
            let name = source::name(&capture.path);
            let stats = &capture.stats;
            let mut said = format!("{name} holds {}", counted(stats.packets, "packet"));
            if stats.tcp + stats.udp > 0 {
                said.push_str(&format!(
                    " (TCP {}, UDP {}) but no call or return{}",
                    stats.tcp,
                    stats.udp,
                    why_no_message(stats)
                ));
            }
            let skipped: Vec<String> = stats
                .skipped
                .iter()
                .map(|(reason, n)| format!("; {n} set aside: {}", skipped_why(reason)))
                .collect();
            said.push_str(&skipped.concat());
            let stopped = input.warnings.iter().find_map(|warning| match warning {
                InputWarning::CutShort { path, stopped, .. } if *path == capture.path => {
                    Some(stopped)
                }
                _ => None,
            });
            if let Some(stopped) = stopped {
                said.push_str(&format!(
                    "; reading stopped at packet {} (byte {}): {}",
                    stopped.packet, stopped.offset, stopped.reason
                ));
            }
            said
        })
        .collect();
    let stats = &input.trace.stats;
    if text_traces > 0 {
        let (traces, hold) = match text_traces {
            1 => ("text trace", "holds"),
            _ => ("text traces", "hold"),
        };
        held.push(match stats.lines {
            0 => format!("the {traces} {hold} 0 lines"),
            lines => format!("the {traces} {hold} {lines} lines, all blank or comments"),
        });
    }
    held.join("; ")
}

/// Why a capture's TCP and UDP gave no message, to end "... but no call or return":
/// the advice to name a protocol only where it could help (a framer met bytes that were
/// not its protocol, or nothing else is known); else what is known: connections that
/// carried no data, or messages set aside (listed after it) as cut by the snaplen or
/// incomplete.
fn why_no_message(stats: &FileStats) -> &'static str {
    let no_tcp_data = stats.tcp > 0 && stats.tcp_with_data == 0;
    if stats.misread() || (stats.skipped.is_empty() && !no_tcp_data) {
        " of a protocol blackbox reads (name one with --protocol PORT=NAME)"
    } else if no_tcp_data {
        ": its TCP connections carry no data (handshakes, acknowledgements or resets only)"
    } else {
        " read whole"
    }
}

/// A skip reason as the error that no message was read gives it: a link type by its
/// name too, and that blackbox does not read it.
fn skipped_why(reason: &str) -> String {
    match reason
        .strip_prefix("unsupported link type ")
        .and_then(|number| number.parse::<i32>().ok())
    {
        Some(number) => format!(
            "link type {number} ({}), which blackbox does not read (it reads Ethernet, Linux cooked, raw IP, loopback and what VLAN, PPPoE, MPLS, GRE, IP-in-IP, VXLAN or Geneve carry)",
            crate::capture::link_type_name(number)
        ),
        None => reason.to_owned(),
    }
}

/// A progress bar labelled `what` over the stored bytes of the files among `sources`
/// (standard input has no size to show).
fn progress_over<S: std::borrow::Borrow<Source>>(
    what: &str,
    sources: &[S],
    show: bool,
) -> Progress {
    let files: Vec<&Path> = sources
        .iter()
        .map(|s| s.borrow())
        .filter(|s| s.is_file())
        .map(|s| s.path.as_path())
        .collect();
    Progress::reading(what, &files, show)
}

/// Reads every text trace into `builder`, in the order given.
fn read_texts(
    texts: Vec<Source>,
    progress: bool,
    builder: &mut TraceBuilder,
) -> Result<(), InputError> {
    let progress = progress_over("reading text traces", &texts, progress);
    for source in texts {
        let path = source.path.clone();
        // A plain file's size tells how much room the trace needs at once.
        let size = if source.gzip {
            None
        } else {
            source.stored_size()
        };
        let reader = std::io::BufReader::with_capacity(1 << 20, source.open(&progress)?);
        match size {
            Some(size) => text::read_with_size(&path, reader, size, builder)?,
            None => text::read(&path, reader, builder)?,
        }
    }
    progress.finish();
    Ok(())
}

/// Reads every capture (in parallel), with a progress bar over their stored bytes.
fn read_captures(
    captures: Vec<Source>,
    options: &capture::CaptureOptions,
    progress: bool,
) -> Result<Vec<capture::HostCapture>, InputError> {
    // `--from 30s` counts from the first packet of them all.
    let mut options = options.clone();
    options.window.start =
        (options.window.start).or_else(|| captures.iter().filter_map(|c| c.first_packet).min());
    let options = &options;
    let (mut here, mut there) = (Vec::new(), Vec::new());
    let sizes: Vec<Option<u64>> = captures.iter().map(Source::stored_size).collect();
    for (index, mut source) in captures.into_iter().enumerate() {
        match source.take_elsewhere() {
            Some(elsewhere) => there.push((index, source.path, elsewhere)),
            None => here.push((index, source)),
        }
    }
    let progress = progress_over(
        "reading captures",
        &here.iter().map(|(_, s)| s).collect::<Vec<_>>(),
        progress,
    );
    let (places, opened): (Vec<usize>, Vec<_>) = here
        .into_iter()
        .map(|(index, source)| Ok((index, (source.path.clone(), source.open(&progress)?))))
        .collect::<Result<Vec<_>, SourceError>>()?
        .into_iter()
        .unzip();
    // Other processes' captures are asked for first, each from a thread that waits
    // for it, so that they read while this process reads its own.
    let mut read: Vec<(usize, capture::HostCapture)> = std::thread::scope(|scope| {
        let asked: Vec<_> = (there.into_iter())
            .map(|(index, path, elsewhere)| {
                (index, scope.spawn(move || elsewhere.read(&path, options)))
            })
            .collect();
        let mut read: Vec<_> = places
            .into_iter()
            .zip(capture::read_each(opened, options)?)
            .collect();
        for (index, reading) in asked {
            read.push((
                index,
                reading.join().expect("reading elsewhere does not panic")?,
            ));
        }
        Ok::<_, InputError>(read)
    })?;
    progress.finish();
    read.sort_by_key(|&(index, _)| index);
    let mut read: Vec<capture::HostCapture> = (read.into_iter())
        .map(|(index, mut read)| {
            read.stored_bytes = sizes[index];
            read
        })
        .collect();
    capture::decide_own_addresses(&mut read, options);
    Ok(read)
}

/// The trace of captures already read (each with its own addresses decided): aligned
/// when asked and there are two or more, every message end added in the reference
/// clock, repaired when asked. For captures read from memory (the fuzz targets).
pub fn from_captures(captures: Vec<capture::HostCapture>, options: &InputOptions) -> Input {
    let mut builder = TraceBuilder::new();
    let mut input = empty_input();
    add_captures(captures, options, &mut builder, &mut input);
    finish(builder, options, input)
}

fn empty_input() -> Input {
    Input {
        trace: Trace::default(),
        captures: Vec::new(),
        capture_totals: None,
        alignment: None,
        translations: None,
        repair: None,
        warnings: Vec::new(),
    }
}

/// Aligns `read` when asked, adds every message end to `builder` in the reference
/// clock, and reports in `input` what the captures held and what to warn of.
fn add_captures(
    mut read: Vec<capture::HostCapture>,
    options: &InputOptions,
    builder: &mut TraceBuilder,
    input: &mut Input,
) {
    let joined = join_and_align(&mut read, options);
    match &joined.alignment {
        Some(alignment) => capture::add_to_trace(
            &read,
            &options.capture,
            |host, t| alignment.to_reference(host, t),
            builder,
        ),
        None => capture::add_to_trace(&read, &options.capture, capture::same_clock, builder),
    }
    report_captures(read, joined, input);
    warn_collected(options, input);
}

/// The warnings of what `blackbox collect` recorded, after what reading found.
pub(crate) fn warn_collected(options: &InputOptions, input: &mut Input) {
    let read: Vec<(&Path, &FileStats)> = input
        .captures
        .iter()
        .map(|c| (c.path.as_path(), &c.stats))
        .collect();
    let warnings: Vec<InputWarning> = options
        .collected
        .iter()
        .flat_map(|collected| collected.warnings(&read))
        .map(InputWarning::Collected)
        .collect();
    input.warnings.extend(warnings);
}

/// What joining and aligning captures found ([`join_and_align`]).
#[derive(Default)]
pub(crate) struct Joined {
    /// The translations learned, with two captures or more.
    pub translations: Option<crate::nat::Translations>,
    /// The clocks, where asked.
    pub alignment: Option<Alignment>,
    /// Per capture, the stamped TCP segments it exchanged with other captured hosts:
    /// why a clock stayed unaligned.
    pub exchanged: Vec<u64>,
}

/// With two captures or more: their segments paired ([`align::pairing`]), each
/// capture's connections named as their ends name themselves where an address
/// translation stood between them ([`crate::nat`]), and their clocks aligned when
/// `options` ask.
pub(crate) fn join_and_align(read: &mut [capture::HostCapture], options: &InputOptions) -> Joined {
    if read.len() < 2 {
        return Joined::default();
    }
    let paired = align::pairing::pair_samples(read);
    let translations = crate::nat::learn(read, &paired);
    let alignment = options
        .align
        .map(|method| align::align_paired(read, &paired, method, options.least_squares));
    // Nothing reads the stamps again: their memory goes before the trace is built.
    for capture in read.iter_mut() {
        capture.stamps = Vec::new();
    }
    Joined {
        translations: Some(translations),
        alignment,
        exchanged: paired.exchanged,
    }
}

/// What `read` held and warned of, and the alignment, into `input`.
fn report_captures(read: Vec<capture::HostCapture>, joined: Joined, input: &mut Input) {
    let Joined {
        translations,
        alignment,
        exchanged,
    } = joined;
    input.translations = translations;
    for host in &read {
        if let Some(stopped) = &host.stopped {
            input.warnings.push(InputWarning::CutShort {
                path: host.path.clone(),
                stopped: stopped.clone(),
                packets: host.stats.packets,
            });
        }
    }
    if let Some(alignment) = &alignment {
        // A capture that only saw other hosts' connections pass gives no message,
        // so its clock does not matter.
        let only_passing: BTreeSet<&str> = read
            .iter()
            .filter(|host| !host.passed.is_empty() && host.only_passed())
            .map(|host| host.host.as_str())
            .collect();
        let mut unaligned = alignment.unaligned();
        unaligned.retain(|host| !only_passing.contains(host));
        for host in unaligned {
            let exchanged = read
                .iter()
                .position(|h| h.host == host)
                .and_then(|at| exchanged.get(at).copied())
                .unwrap_or(0);
            input.warnings.push(InputWarning::Unaligned {
                host: host.to_string(),
                exchanged,
            });
        }
        for check in alignment.loops.iter().filter(|c| c.disagrees) {
            input.warnings.push(InputWarning::LoopDisagrees {
                hosts: check.hosts.clone(),
                residual_ns: check.residual_ns,
            });
        }
    }
    let mut totals = FileStats::default();
    for host in &read {
        totals.add(&host.stats);
    }
    input.capture_totals = Some(totals);
    input.captures = read
        .into_iter()
        .map(|host| CaptureRead {
            stored_bytes: host.stored_bytes,
            path: host.path,
            host: host.host,
            local: host.local.into_iter().collect(),
            local_uncertain: host.local_uncertain,
            stats: host.stats,
        })
        .collect();
    input.alignment = alignment;
}

/// The merged trace, repaired when asked.
fn finish(builder: TraceBuilder, options: &InputOptions, mut input: Input) -> Input {
    input.trace = builder.finish();
    if let Some(repair_options) = &options.repair {
        input.repair = Some(Repaired {
            min_latency: repair_options.min_latency,
            report: repair::repair(&mut input.trace, repair_options),
        });
    }
    // After the repair: the time in a broker is read from the final times.
    input.trace.stats.brokers = crate::brokers::follow(&input.trace).brokers;
    input
}

/// Reads `files` as captures (plain or gzip'd, `-` for standard input) with the segment
/// stamps that alignment needs, refusing any that is not a capture: `align` reads
/// captures only.
pub fn read_for_alignment(
    files: &[PathBuf],
    options: &CaptureOptions,
) -> Result<Vec<capture::HostCapture>, InputError> {
    let sources = Source::sniff_all(files)?;
    if let Some(text) = sources.iter().find(|s| s.kind != Kind::Capture) {
        return Err(InputError::Usage(format!(
            "{} is not a pcap or pcapng capture: align reads captures only",
            source::name(&text.path)
        )));
    }
    if sources.len() < 2 {
        return Err(InputError::Usage(
            "align needs two captures or more, one per host: it aligns their clocks to each other"
                .into(),
        ));
    }
    let mut options = options.clone();
    options.clock_stamps = true;
    let captures = read_captures(sources, &options, false)?;
    let empty: Vec<String> = captures
        .iter()
        .filter(|c| c.stats.packets == 0)
        .map(|c| format!("{} holds 0 packets", source::name(&c.path)))
        .collect();
    if !empty.is_empty() {
        return Err(InputError::Usage(format!(
            "nothing to align: {}",
            empty.join("; ")
        )));
    }
    Ok(captures)
}

/// An mbox read as a trace (see [`crate::trace::mbox`]).
#[derive(Debug)]
pub struct Mail {
    /// One hop per usable Received header, in the relays' corrected clocks.
    pub trace: Trace,
    /// What was read and set aside.
    pub stats: MboxStats,
    /// Each email's hops in the order of its Received headers, corrected likewise.
    pub chains: Vec<crate::trace::mbox::MailChain>,
    /// The relays' clocks as estimated from the chains; `None` when not asked.
    pub clocks: Option<align::mail::MailClocks>,
}

/// Reads an mbox: every Received header of every email becomes one hop, and with
/// `align` every relay's clock is first corrected by [`align::mail`].
pub fn read_mbox(path: &Path, align: bool) -> Result<Mail, InputError> {
    let file = std::fs::File::open(path).map_err(|source| text::TraceError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(mbox_from(
        path,
        std::io::BufReader::with_capacity(1 << 20, file),
        align,
    )?)
}

/// [`read_mbox`] from any reader; `path` names it in errors.
pub fn mbox_from(
    path: &Path,
    reader: impl std::io::BufRead,
    align: bool,
) -> Result<Mail, text::TraceError> {
    let (mut chains, stats) = crate::trace::mbox::read_emails(path, reader)?;
    let clocks = align.then(|| align::mail::estimate(&chains));
    if let Some(clocks) = &clocks {
        clocks.correct(&mut chains);
    }
    let mut builder = TraceBuilder::new();
    crate::trace::mbox::push(&chains, &stats, &mut builder);
    Ok(Mail {
        trace: builder.finish(),
        stats,
        chains,
        clocks,
    })
}

/// One capture rewritten into the reference clock.
#[derive(Debug, Clone)]
pub struct Rewritten {
    /// The new file.
    pub path: PathBuf,
    /// Packets written.
    pub packets: u64,
}

/// Writes every capture into `dir` (same file names; nanosecond pcap or pcapng, as
/// read) with its times in the reference's clock, telling `written` of each as it is
/// done. Refuses to overwrite a capture read.
pub fn write_aligned(
    captures: &[capture::HostCapture],
    alignment: &Alignment,
    dir: &Path,
    mut written: impl FnMut(&Rewritten),
) -> Result<(), InputError> {
    std::fs::create_dir_all(dir).map_err(|source| InputError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    if let Some(host) = captures
        .iter()
        .find(|h| source::is_standard(&h.path) || source::is_gzip(&h.path))
    {
        return Err(InputError::Usage(format!(
            "--write rewrites capture files as they are stored: {} is {}; give it as a plain pcap or pcapng file",
            source::name(&host.path),
            if source::is_standard(&host.path) { "standard input" } else { "gzip-compressed" }
        )));
    }
    for (index, host) in captures.iter().enumerate() {
        let name = host.path.file_name().map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(format!(
                "{}.{}",
                host.host,
                Container::of(&host.path).extension()
            ))
        });
        let output = dir.join(name);
        if output.canonicalize().ok() == host.path.canonicalize().ok() {
            return Err(InputError::Usage(format!(
                "--write {} would overwrite {}: choose another directory",
                dir.display(),
                host.path.display()
            )));
        }
        let stats = capture::write::rewrite_times(
            &host.path,
            &output,
            Container::of(&host.path),
            |_, t| alignment.to_reference(index, t),
        )?;
        written(&Rewritten {
            path: output,
            packets: stats.frames,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn text_file(lines: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(lines.as_bytes()).unwrap();
        file
    }

    #[test]
    fn text_files_are_read_whole_only_when_their_lines_fit_one_segment() {
        let three = text_file("0.1 CALL a b 1\n0.2 RET b a 1\n0.3 CALL a b 2\n");
        let two_unended = text_file("0.4 RET b a 2\n0.5 CALL a b 3");
        let sources = |files: &[&tempfile::NamedTempFile]| -> Vec<Source> {
            files
                .iter()
                .map(|f| Source::sniff(f.path()).unwrap())
                .collect()
        };
        // A last line without its newline still counts.
        assert!(hold_at_most(&sources(&[&three]), 3));
        assert!(!hold_at_most(&sources(&[&three]), 2));
        assert!(hold_at_most(&sources(&[&two_unended]), 2));
        assert!(!hold_at_most(&sources(&[&two_unended]), 1));
        assert!(hold_at_most(&sources(&[&three, &two_unended]), 5));
        assert!(!hold_at_most(&sources(&[&three, &two_unended]), 4));
    }
}
