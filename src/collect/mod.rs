//! `blackbox collect`: one capture per host, taken at the same time, through whatever
//! reaches the hosts. Each host's transport is a command template (`ssh {host}`, `ip
//! netns exec {host}`, `kubectl exec -i ... {host} --`) followed by `sh -s`, fed the
//! script of [`remote`]; every host starts at once, each capture streams back into its
//! file ([`stream`]) while its standard error reports the host, and every host is
//! stopped at the same moment: when the duration has passed, when the caller's stop
//! flag is raised (Ctrl-C), or when the disk fills. A host that cannot be reached, has
//! no tcpdump, or is lost midway is named, and the others go on. What was asked, seen
//! and lost goes to `manifest.json` ([`manifest`]), written at the start and again at
//! the end. Owns running the transports and stopping them; not what the captures hold
//! ([`crate::capture`]) nor reading them back ([`crate::input`]).

pub mod kubernetes;
pub mod manifest;
pub mod remote;
pub mod stream;

use manifest::{AddressName, HostRecord, Manifest};
use remote::{Counter, Said};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::IpAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the hosts' captures may take to stop, once told, before their transports
/// are terminated.
const STOP_WAIT: Duration = Duration::from_secs(15);

/// Bytes of headers `--payload-bytes` keeps before the payload: the largest link
/// header read (Linux cooked v2, 20), two VLAN tags (8), IPv6 with room for extension
/// headers (40 + 24), and TCP with every option (60), rounded up.
pub const HEADER_BYTES: u32 = 160;

/// One host and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Its name: its capture's file name and its node's.
    pub name: String,
    /// The transport's words, `{host}` filled in; `sh -s` is added.
    pub via: Vec<String>,
}

/// What to collect.
#[derive(Debug, Clone)]
pub struct CollectOptions {
    /// The hosts, in order.
    pub hosts: Vec<Host>,
    /// Where the captures and the manifest go.
    pub out: PathBuf,
    /// What each host captures.
    pub capture: remote::Capture,
    /// The payload bytes kept past the headers, when that set the snaplen.
    pub payload_bytes: Option<u32>,
    /// How long, from the moment every host captures.
    pub duration: Duration,
    /// The most bytes kept per host.
    pub max_bytes: u64,
    /// How long a host may take to start capturing before it is given up.
    pub start_timeout: Duration,
    /// What the cluster said, on Kubernetes (the snapshots are taken by the caller).
    pub kubernetes: Option<kubernetes::Record>,
}

/// Why nothing could be collected.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// The output directory could not be made or written.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Two hosts would write the same file.
    #[error("two hosts are named {0}: each host's capture is a file named for it")]
    SameName(String),
    /// No host captured anything.
    #[error("no host could be captured:\n{0}")]
    NothingCaptured(String),
}

/// Something to tell the user while collecting, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// A host's tool is capturing.
    Capturing {
        /// The host.
        host: String,
        /// Its interface.
        interface: String,
    },
    /// Every host that could start captures; the duration runs from now.
    AllCapturing {
        /// Hosts capturing.
        capturing: usize,
        /// Hosts given.
        hosts: usize,
        /// The duration.
        duration: Duration,
    },
    /// A host could not be captured, or its capture ended early.
    Problem {
        /// The host.
        host: String,
        /// What happened.
        what: String,
    },
    /// Every host is being stopped.
    Stopping {
        /// Why.
        why: String,
    },
}

/// What a host's threads report.
enum Event {
    Said(usize, Said),
    StderrEnded(usize),
    StreamEnded(usize, stream::Written, Option<stream::StreamError>),
    DiskFull(usize),
}

/// A host while it is collected.
struct Running {
    record: HostRecord,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    capturing: bool,
    stream_ended: bool,
    stderr_ended: bool,
    failure: Option<String>,
    /// Whether its problem was told.
    told: bool,
    /// Whether its file could not be written.
    disk_full: bool,
}

impl Running {
    fn ended(&self) -> bool {
        self.stream_ended && self.stderr_ended
    }

    /// Tells the host's script to stop its capture, once.
    fn stop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            // A transport already gone refuses the write; its capture stopped with it.
            let _ = stdin.write_all(remote::STOP);
        }
    }

    /// Signals the transport's process group (the local ssh, kubectl or shell).
    fn signal(&self, signal: i32) {
        if let Some(child) = &self.child {
            if let Ok(pid) = i32::try_from(child.id()) {
                // SAFETY: kill(2) with a negative pid signals the group the child leads
                // (it was started in a group of its own); it touches no memory.
                unsafe {
                    libc::kill(-pid, signal);
                }
            }
        }
    }
}

/// The file a host's capture is written to, in the output directory.
pub fn file_name(host: &str) -> String {
    let safe: String = host
        .chars()
        .map(|c| match c {
            '/' | '\\' | '\0' => '_',
            c => c,
        })
        .collect();
    format!("{safe}.pcap")
}

/// Collects from every host of `options` until the duration has passed or `stop` is
/// raised, telling `progress` as it goes; returns the manifest written.
pub fn collect(
    options: &CollectOptions,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress),
) -> Result<Manifest, CollectError> {
    let out = &options.out;
    std::fs::create_dir_all(out).map_err(|source| CollectError::Write {
        path: out.clone(),
        source,
    })?;
    let mut names = std::collections::BTreeSet::new();
    for host in &options.hosts {
        if !names.insert(file_name(&host.name)) {
            return Err(CollectError::SameName(host.name.clone()));
        }
    }
    let mut manifest = Manifest {
        version: manifest::VERSION,
        collector: format!("blackbox {}", env!("CARGO_PKG_VERSION")),
        asked: manifest::Asked {
            interface: options.capture.interface.clone(),
            filter: options.capture.filter.clone(),
            snaplen: options.capture.snaplen,
            payload_bytes: options.payload_bytes,
            buffer_kib: options.capture.buffer_kib,
            max_bytes: options.max_bytes,
            duration_s: options.duration.as_secs_f64(),
        },
        stopped_by: "still capturing".to_owned(),
        kubernetes: options.kubernetes.clone(),
        ..Manifest::default()
    };
    let script = remote::script(&options.capture);
    let records: Vec<HostRecord> = options
        .hosts
        .iter()
        .map(|host| HostRecord {
            name: host.name.clone(),
            via: host.via.clone(),
            // Named from the start, so that the captures of a collect that was killed
            // can still be read.
            file: Some(file_name(&host.name)),
            status: "capturing".to_owned(),
            ..HostRecord::default()
        })
        .collect();
    // Before any host starts: a directory that cannot be written stops nothing.
    manifest.hosts = records.clone();
    first_manifest(out, &manifest)?;
    let (events, received) = mpsc::channel();
    let mut hosts: Vec<Running> = Vec::new();
    for (index, (host, record)) in options.hosts.iter().zip(records).enumerate() {
        hosts.push(start(
            index,
            host,
            &script,
            out,
            options.max_bytes,
            record,
            &events,
        ));
    }
    drop(events);
    for host in &mut hosts {
        if let Some(failure) = &host.failure {
            host.told = true;
            progress(Progress::Problem {
                host: host.record.name.clone(),
                what: failure.clone(),
            });
        }
    }

    let started = Instant::now();
    let mut all_capturing: Option<Instant> = None;
    let mut stopping: Option<(Instant, String)> = None;
    let mut terminated = false;
    loop {
        if hosts.iter().all(Running::ended) {
            break;
        }
        match received.recv_timeout(Duration::from_millis(100)) {
            Ok(event) => handle(event, &mut hosts, stopping.is_some(), progress),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        let waiting = hosts
            .iter()
            .filter(|h| !h.capturing && h.failure.is_none() && !h.stream_ended)
            .count();
        if all_capturing.is_none() && stopping.is_none() {
            if waiting > 0 && started.elapsed() > options.start_timeout {
                for host in hosts
                    .iter_mut()
                    .filter(|h| !h.capturing && h.failure.is_none() && !h.stream_ended)
                {
                    let what = format!(
                        "did not start capturing within {} s",
                        options.start_timeout.as_secs()
                    );
                    host.failure = Some(what.clone());
                    host.told = true;
                    host.stop();
                    progress(Progress::Problem {
                        host: host.record.name.clone(),
                        what,
                    });
                }
            } else if waiting == 0 {
                let capturing = hosts.iter().filter(|h| h.capturing).count();
                all_capturing = Some(Instant::now());
                if capturing == 0 {
                    stopping = Some((Instant::now(), "no host could capture".to_owned()));
                } else {
                    progress(Progress::AllCapturing {
                        capturing,
                        hosts: hosts.len(),
                        duration: options.duration,
                    });
                }
            }
        }
        if stopping.is_none() {
            let why = if stop.load(Ordering::Relaxed) {
                Some("interrupted")
            } else if hosts
                .iter()
                .any(|h| h.failure.as_deref() == Some(DISK_FULL))
            {
                Some("disk full")
            } else if all_capturing.is_some_and(|at| at.elapsed() >= options.duration) {
                Some("duration")
            } else if all_capturing.is_some() && hosts.iter().all(|h| h.stream_ended) {
                Some("every host ended")
            } else {
                None
            };
            if let Some(why) = why {
                progress(Progress::Stopping {
                    why: why.to_owned(),
                });
                stopping = Some((Instant::now(), why.to_owned()));
                for host in &mut hosts {
                    host.stop();
                }
            }
        }
        if let Some((since, _)) = &stopping {
            // Every host told at once; a transport that does not end by itself is
            // terminated, its group first asked, then made to.
            for host in &mut hosts {
                host.stop();
            }
            if since.elapsed() > STOP_WAIT && !terminated {
                terminated = true;
                for host in hosts.iter().filter(|h| !h.ended()) {
                    host.signal(libc::SIGTERM);
                }
            } else if since.elapsed() > STOP_WAIT + Duration::from_secs(5) {
                for host in hosts.iter().filter(|h| !h.ended()) {
                    host.signal(libc::SIGKILL);
                }
            }
        }
    }
    for host in &mut hosts {
        host.stop();
        let status = host.child.take().and_then(|mut child| child.wait().ok());
        finish_record(host, status, stopping.is_some(), out);
    }
    manifest.stopped_by = stopping.map_or_else(|| "every host ended".to_owned(), |(_, why)| why);
    manifest.hosts = hosts.into_iter().map(|h| h.record).collect();
    manifest.names = address_names(&manifest.hosts);
    rewrite_manifest(out, &manifest)?;
    if manifest.hosts.iter().all(|h| h.file.is_none()) {
        let problems: Vec<String> = manifest
            .hosts
            .iter()
            .map(|h| {
                format!(
                    "  {}: {}",
                    h.name,
                    h.problem.as_deref().unwrap_or("no capture")
                )
            })
            .collect();
        return Err(CollectError::NothingCaptured(problems.join("\n")));
    }
    Ok(manifest)
}

/// How a host's failure reads when its file could not be written.
const DISK_FULL: &str = "its capture could not be written (is the disk full?)";

/// Spawning a transport in a session of its own: the terminal's Ctrl-C reaches
/// collect alone, which stops every host in order; a transport that would prompt (an
/// ssh password, a host key, a kubectl login) has no terminal to prompt on and fails
/// in its own words, instead of stopping in the background; and its process group can
/// be signalled as one.
trait SpawnInSession {
    fn spawn_in_session(&mut self) -> std::io::Result<Child>;
}

impl SpawnInSession for Command {
    fn spawn_in_session(&mut self) -> std::io::Result<Child> {
        // SAFETY: setsid(2) is async-signal-safe and touches no memory of this
        // process; it runs in the child between fork and exec.
        unsafe {
            self.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = self.spawn()?;
        if let Some(stdout) = &child.stdout {
            widen_pipe(stdout);
        }
        Ok(child)
    }
}

/// Gives the pipe a capture streams through room for several megabytes, so that a
/// burst waits there rather than in the capturing kernel's buffer, where it would be
/// dropped; the largest the system allows, else the default kept.
fn widen_pipe(pipe: &impl std::os::fd::AsRawFd) {
    for size in [16 << 20, 4 << 20, 1 << 20] {
        // SAFETY: fcntl(2) on a descriptor this process owns, with an integer
        // argument; it changes only the pipe's capacity.
        if unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, size) } >= 0 {
            return;
        }
    }
}

/// Starts one host's transport and the threads that read it.
fn start(
    index: usize,
    host: &Host,
    script: &str,
    out: &Path,
    max_bytes: u64,
    record: HostRecord,
    events: &mpsc::Sender<Event>,
) -> Running {
    let mut running = Running {
        record,
        child: None,
        stdin: None,
        capturing: false,
        stream_ended: true,
        stderr_ended: true,
        failure: None,
        told: false,
        disk_full: false,
    };
    let path = out.join(file_name(&host.name));
    let file = match std::fs::File::create(&path) {
        Ok(file) => file,
        Err(error) => {
            running.failure = Some(format!("cannot create {}: {error}", path.display()));
            return running;
        }
    };
    let Some((program, args)) = host.via.split_first() else {
        running.failure = Some("no transport: give --via or a command on its line".to_owned());
        return running;
    };
    let spawned = Command::new(program)
        .args(args)
        .args(["sh", "-s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn_in_session();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) => {
            running.failure = Some(format!("cannot run {program}: {error}"));
            return running;
        }
    };
    let mut stdin = child.stdin.take();
    if let Some(input) = &mut stdin {
        // A transport that fails at once refuses the script; its stderr says why.
        let _ = input.write_all(script.as_bytes());
        let _ = input.flush();
    }
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    running.stream_ended = false;
    running.stderr_ended = false;
    let sender = events.clone();
    if let Some(stdout) = stdout {
        std::thread::spawn(move || {
            let (written, error) = stream::write_stream(stdout, file, max_bytes, || {
                let _ = sender.send(Event::DiskFull(index));
            });
            let _ = sender.send(Event::StreamEnded(index, written, error));
        });
    }
    let sender = events.clone();
    if let Some(stderr) = stderr {
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).split(b'\n') {
                let Ok(line) = line else { break };
                let line = String::from_utf8_lossy(&line).into_owned();
                let _ = sender.send(Event::Said(index, remote::read_line(&line)));
            }
            let _ = sender.send(Event::StderrEnded(index));
        });
    }
    running.child = Some(child);
    running.stdin = stdin;
    running
}

/// Takes one host's report into its record.
fn handle(event: Event, hosts: &mut [Running], stopping: bool, progress: &mut dyn FnMut(Progress)) {
    let index = match &event {
        Event::Said(index, _)
        | Event::StderrEnded(index)
        | Event::StreamEnded(index, ..)
        | Event::DiskFull(index) => *index,
    };
    match event {
        Event::Said(index, said) => {
            let host = &mut hosts[index];
            let record = &mut host.record;
            match said {
                Said::Hostname(name) => record.hostname = Some(name),
                Said::Address { interface, address } => record
                    .addresses
                    .push(manifest::InterfaceAddress { interface, address }),
                Said::Offload {
                    interface,
                    feature,
                    on,
                } => record.offloads.push(manifest::Offload {
                    interface,
                    feature,
                    on,
                }),
                Said::Clock { source, line } => {
                    record.clock.source = Some(source);
                    if !line.is_empty() {
                        record.clock.lines.push(line);
                    }
                }
                Said::Tool { name, version } => {
                    record.tool = Some(format!("{name} ({version})"));
                }
                Said::Filter(filter) => record.filter = Some(filter).filter(|f| !f.is_empty()),
                Said::Start(at) => record.started = Some(at),
                Said::Stopping(at) => record.stopped = Some(at),
                Said::Exit { status, at } => {
                    record.exit_status = Some(status);
                    record.stopped.get_or_insert(at);
                }
                Said::Listening(interface) => {
                    if !host.capturing {
                        host.capturing = true;
                        record.listening_on = Some(interface.clone());
                        progress(Progress::Capturing {
                            host: record.name.clone(),
                            interface,
                        });
                    }
                }
                Said::Counter(counter, value) => {
                    let counters = &mut record.counters;
                    let slot = match counter {
                        Counter::Captured => &mut counters.captured,
                        Counter::ReceivedByFilter => &mut counters.received_by_filter,
                        Counter::DroppedByKernel => &mut counters.dropped_by_kernel,
                        Counter::DroppedByInterface => &mut counters.dropped_by_interface,
                    };
                    *slot = Some(value);
                }
                Said::Fail(what) => {
                    host.failure.get_or_insert(what);
                }
                Said::Note(note) => record.messages.push(note),
                Said::Other(line) => {
                    for (counter, value) in remote::dumpcap_drops(&line) {
                        let counters = &mut record.counters;
                        match counter {
                            Counter::DroppedByKernel => counters.dropped_by_kernel = Some(value),
                            _ => counters.dropped_by_interface = Some(value),
                        }
                    }
                    if !line.trim().is_empty() {
                        record.messages.push(line);
                    }
                }
            }
        }
        Event::StderrEnded(index) => hosts[index].stderr_ended = true,
        Event::DiskFull(index) => {
            hosts[index].disk_full = true;
            hosts[index].failure.get_or_insert(DISK_FULL.to_owned());
        }
        Event::StreamEnded(index, written, error) => {
            let host = &mut hosts[index];
            host.stream_ended = true;
            let record = &mut host.record;
            record.packets_written = written.packets;
            record.bytes_written = written.bytes;
            record.packets_truncated = written.truncated;
            record.packets_over_limit = written.over_limit;
            record.first_packet = written.first_ns.map(epoch_seconds);
            record.last_packet = written.last_ns.map(epoch_seconds);
            record.sha256 = (written.bytes > 0).then_some(written.sha256);
            if let Some(error) = error {
                let what = match &error {
                    stream::StreamError::Write(e) => format!("{DISK_FULL}: {e}"),
                    other => format!("{other}"),
                };
                record.messages.push(what);
            }
            if written.cut_inside_a_packet {
                record
                    .messages
                    .push("the stream ended inside a packet: that packet is left out".to_owned());
            }
            let failed_at_once = !host.capturing;
            if !stopping && host.capturing && host.failure.is_none() {
                // The capture ended before it was told to: the link was lost, or the
                // tool died. Told at once: the other hosts go on.
                let what =
                    "its capture ended before it was stopped (the transport or the tool ended)";
                host.failure = Some(what.to_owned());
                host.told = true;
                progress(Progress::Problem {
                    host: record.name.clone(),
                    what: what.to_owned(),
                });
            }
            if failed_at_once {
                // The tool failed at once: its shell, still waiting for `stop`, is
                // told now, so that what it said is in and the host named at once.
                host.stop();
            }
        }
    }
    // A host that never captured is told of once all it said is in.
    if let Some(host) = hosts.get_mut(index) {
        if host.ended() && !host.capturing && !host.told {
            host.told = true;
            let what = host
                .failure
                .get_or_insert_with(|| host_problem(&host.record))
                .clone();
            progress(Progress::Problem {
                host: host.record.name.clone(),
                what,
            });
        }
    }
}

/// Why a host never captured, from what it said.
fn host_problem(record: &HostRecord) -> String {
    let said: Vec<&str> = record
        .messages
        .iter()
        .map(String::as_str)
        .filter(|line| !line.starts_with(remote::PREFIX))
        .collect();
    match said.last() {
        Some(last) => format!("no capture: {last}"),
        None => "no capture: the transport ended without a word".to_owned(),
    }
}

/// The host's record, its status decided, once its transport has ended.
fn finish_record(
    host: &mut Running,
    status: Option<std::process::ExitStatus>,
    stopped: bool,
    out: &Path,
) {
    let record = &mut host.record;
    record.file = (record.bytes_written > 0).then(|| file_name(&record.name));
    if record.file.is_none() {
        // Nothing was captured: no empty file is left to be read as one.
        let _ = std::fs::remove_file(out.join(file_name(&record.name)));
    }
    let exit = status.map(|status| {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => format!("the transport exited with {code}"),
            (None, Some(signal)) => format!("the transport was ended by signal {signal}"),
            _ => "the transport ended".to_owned(),
        }
    });
    record.status = match (&host.failure, &record.file) {
        (None, Some(_)) if host.capturing => "captured",
        (Some(_), Some(_)) if host.capturing => "lost",
        (None, Some(_)) if stopped => "captured",
        _ => "failed",
    }
    .to_owned();
    if record.status != "captured" {
        let mut problem = host.failure.clone().unwrap_or_else(|| host_problem(record));
        if let Some(exit) = exit.filter(|_| record.status == "lost" || record.file.is_none()) {
            problem = format!("{problem}; {exit}");
        }
        record.problem = Some(problem);
    }
}

/// Each non-loopback address a single host owns, and its name; an address two hosts
/// share (a bridge every node has) names neither.
fn address_names(hosts: &[HostRecord]) -> Vec<AddressName> {
    let mut owners: BTreeMap<IpAddr, Vec<&str>> = BTreeMap::new();
    for host in hosts {
        for ip in host.own_addresses() {
            let names = owners.entry(ip).or_default();
            if !names.contains(&host.name.as_str()) {
                names.push(&host.name);
            }
        }
    }
    owners
        .into_iter()
        .filter(|(_, names)| names.len() == 1)
        .map(|(address, names)| AddressName {
            address,
            name: names[0].to_owned(),
        })
        .collect()
}

fn epoch_seconds(ns: i128) -> String {
    format!(
        "{}.{:09}",
        ns.div_euclid(1_000_000_000),
        ns.rem_euclid(1_000_000_000)
    )
}

/// Writes `manifest` into `out`, whole or not at all (a temporary file renamed over
/// the old one); on a full disk, over the old one in place, within the room it kept
/// (see [`first_manifest`]).
pub fn rewrite_manifest(out: &Path, manifest: &Manifest) -> Result<(), CollectError> {
    let path = out.join(manifest::FILE_NAME);
    let temporary = out.join(format!(".{}.part", manifest::FILE_NAME));
    let text = serde_json::to_string_pretty(manifest).expect("a manifest is plain data") + "\n";
    let renamed =
        std::fs::write(&temporary, &text).and_then(|()| std::fs::rename(&temporary, &path));
    let Err(error) = renamed else {
        return Ok(());
    };
    let _ = std::fs::remove_file(&temporary);
    let room = std::fs::metadata(&path).map_or(0, |m| m.len());
    if text.len() as u64 > room {
        return Err(CollectError::Write {
            path,
            source: error,
        });
    }
    // Blocks already the file's: overwriting them asks the disk for none.
    let mut padded = text.into_bytes();
    padded.resize(room as usize, b' ');
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut file| file.write_all(&padded))
        .map_err(|source| CollectError::Write { path, source })
}

/// Writes the manifest as the capture starts, with room after it (white space, which
/// JSON allows) for the final one to be written in place should the disk fill.
fn first_manifest(out: &Path, manifest: &Manifest) -> Result<(), CollectError> {
    let path = out.join(manifest::FILE_NAME);
    let mut text = serde_json::to_string_pretty(manifest).expect("a manifest is plain data") + "\n";
    let room = text.len() + 64 * 1024 + 32 * 1024 * manifest.hosts.len();
    text.extend(std::iter::repeat_n(' ', room - text.len()));
    std::fs::write(&path, text).map_err(|source| CollectError::Write { path, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(out: &Path, hosts: Vec<Host>) -> CollectOptions {
        CollectOptions {
            hosts,
            out: out.to_path_buf(),
            capture: remote::Capture {
                interface: "any".into(),
                filter: None,
                snaplen: 0,
                buffer_kib: None,
                deadline_s: 60,
            },
            payload_bytes: None,
            duration: Duration::from_secs(1),
            max_bytes: u64::MAX,
            start_timeout: Duration::from_secs(5),
            kubernetes: None,
        }
    }

    #[test]
    fn hosts_that_cannot_be_reached_are_named_and_nothing_captured_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = vec![
            Host {
                name: "web".into(),
                via: vec!["/nonexistent/ssh".into(), "web".into()],
            },
            Host {
                name: "db".into(),
                via: vec!["false".into()],
            },
        ];
        let mut told = Vec::new();
        let error = collect(
            &options(dir.path(), hosts),
            &AtomicBool::new(false),
            &mut |p| told.push(p),
        )
        .unwrap_err();
        let text = error.to_string();
        assert!(text.contains("web: cannot run /nonexistent/ssh"), "{text}");
        assert!(
            text.contains(
                "db: no capture: the transport ended without a word; the transport exited with 1"
            ),
            "{text}"
        );
        let manifest = manifest::Collected::read(dir.path())
            .unwrap()
            .unwrap()
            .manifest;
        assert_eq!(manifest.hosts.len(), 2);
        assert!(manifest
            .hosts
            .iter()
            .all(|h| h.status == "failed" && h.file.is_none()));
        assert!(told
            .iter()
            .any(|p| matches!(p, Progress::Problem { host, .. } if host == "web")));
    }

    #[test]
    fn an_address_two_hosts_share_names_neither() {
        let host = |name: &str, addresses: &[&str]| HostRecord {
            name: name.into(),
            addresses: addresses
                .iter()
                .map(|a| manifest::InterfaceAddress {
                    interface: "eth0".into(),
                    address: (*a).into(),
                })
                .collect(),
            ..HostRecord::default()
        };
        let names = address_names(&[
            host(
                "web",
                &["10.0.0.2/24", "172.17.0.1/16", "127.0.0.1/8", "fe80::1/64"],
            ),
            host("db", &["10.0.0.3/24", "172.17.0.1/16"]),
        ]);
        let names: Vec<String> = names
            .iter()
            .map(|n| format!("{} {}", n.address, n.name))
            .collect();
        assert_eq!(names, ["10.0.0.2 web", "10.0.0.3 db"]);
    }
}
