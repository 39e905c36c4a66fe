//! Captures read where they are, in a cluster (`--cluster`): each process is given the
//! captures on its own machine (or the same ones on a shared path), reads its share and
//! sends what reading gave (a [`HostCapture`], its messages kept on disk sent block by
//! block) to the first process, which goes on as if it had read them itself. What
//! crosses the network is the messages, a few percent of the captures' bytes, not the
//! packets. Owns the errands (what a process holds, read this, the next block), who
//! reads which capture, and serving them; how errands travel is
//! [`crate::nesting::dataflow`]'s, how a capture is read [`crate::capture`]'s.
//!
//! Which process reads a capture: process 0's captures come first, in its order, then
//! each other process's not named already, in process order: the same captures, in
//! the same order, as one process given them all would read, so the output is the same
//! bytes. A path several processes name is one capture on a shared path (its size and
//! first bytes must agree, or the run is refused), read by the one of them with the
//! fewest bytes to read so far, the largest captures placed first; one file named by
//! two paths is refused too (it would be read twice, as two hosts).

use super::source::{Kind, Source};
use super::InputError;
use crate::capture::spill::{SpillWriter, Spilled};
use crate::capture::{self, CaptureError, CaptureOptions, HostCapture};
use crate::progress::Progress;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Sends an errand's bytes to a process of the cluster and waits for the answer.
pub type Ask = Arc<dyn Fn(usize, Vec<u8>) -> Result<Vec<u8>, Unanswered> + Send + Sync>;

/// Why an errand has no answer.
#[derive(Debug, Clone)]
pub enum Unanswered {
    /// The process answered that it could not (a file it was given is unreadable, say).
    Refused(String),
    /// The process was lost, or the link to it.
    Lost(String),
}

/// A capture that another process holds and reads ([`Source::elsewhere`]).
pub struct Elsewhere {
    /// The process that reads it.
    pub process: usize,
    /// Its size as stored there.
    pub size: u64,
    ask: Ask,
}

/// What the first process asks of another.
#[derive(Serialize, Deserialize)]
enum Errand {
    /// Which captures were you given?
    Offer,
    /// Read this capture of yours with these options, and keep its messages until
    /// they are fetched.
    Read {
        path: PathBuf,
        options: Box<CaptureOptions>,
    },
    /// The kept messages of read `id`, from byte `offset` on.
    Fetch { id: u64, offset: u64 },
}

/// A capture a process was given: its path as named there, and what tells whether
/// another process's capture of that path is the same file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Offered {
    path: PathBuf,
    size: u64,
    /// A digest of its first bytes.
    head: u64,
}

/// A capture read, without its messages, which wait to be fetched.
#[derive(Serialize, Deserialize)]
struct ReadThere {
    id: u64,
    capture: HostCapture,
    /// Bytes of messages kept on disk.
    kept: u64,
}

/// Bytes of kept messages sent per errand: a few round trips per capture, and little
/// held at once on either side.
const BLOCK: usize = 8 << 20;

/// Bytes of a file's start digested to tell two files of one path apart.
const HEAD: u64 = 64 << 10;

/// Answers the first process's errands in a process that lends its workers: offers
/// the captures among `files` (its command line's), reads those it is asked to, and
/// sends their kept messages block by block.
pub struct Server {
    files: Vec<PathBuf>,
    kept: Mutex<HashMap<u64, Spilled>>,
    next: AtomicU64,
    served: Mutex<Served>,
    /// Inputs it was given that are not captures: text traces, read by the first
    /// process from its own command line only.
    not_offered: Mutex<Vec<PathBuf>>,
}

/// What a [`Server`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Served {
    /// From the start of the first capture's reading to the end of the last's.
    span: Option<(std::time::Instant, std::time::Instant)>,
    /// Captures read.
    pub captures: usize,
    /// Their bytes as stored.
    pub bytes: u64,
    /// Seconds from the start of the first capture's reading to the end of the
    /// last's (they are read side by side).
    pub seconds: f64,
    /// Bytes of their messages sent.
    pub sent: u64,
}

impl Server {
    /// A server of the captures among `files`.
    pub fn new(files: Vec<PathBuf>) -> Server {
        Server {
            files,
            kept: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            served: Mutex::new(Served::default()),
            not_offered: Mutex::new(Vec::new()),
        }
    }

    /// The inputs it was given that are not captures (text traces), which it did not
    /// offer: the first process reads the text traces on its own command line.
    pub fn not_offered(&self) -> Vec<PathBuf> {
        self.not_offered.lock().expect("not poisoned").clone()
    }

    /// What it did so far.
    pub fn served(&self) -> Served {
        *self.served.lock().expect("not poisoned")
    }

    /// The answer to one errand, or why there is none (with its causes).
    pub fn serve(&self, errand: Vec<u8>) -> Result<Vec<u8>, String> {
        let errand: Errand =
            postcard::from_bytes(&errand).map_err(|e| format!("an errand unread: {e}"))?;
        let answer = match errand {
            Errand::Offer => postcard::to_allocvec(&self.offer()?),
            Errand::Read { path, options } => postcard::to_allocvec(&self.read(&path, &options)?),
            Errand::Fetch { id, offset } => postcard::to_allocvec(&self.fetch(id, offset)?),
        };
        answer.map_err(|e| format!("an answer unwritten: {e}"))
    }

    fn offer(&self) -> Result<Vec<Offered>, String> {
        let mut offered = Vec::new();
        let mut not_offered = Vec::new();
        for path in &self.files {
            if super::source::is_standard(path) {
                return Err("standard input (-) is read by process 0 only".into());
            }
            let source = Source::sniff(path).map_err(|e| chain(&e))?;
            match source.kind {
                Kind::Capture => offered.push(offered_file(path).map_err(|e| chain(&e))?),
                _ => not_offered.push(path.clone()),
            }
        }
        *self.not_offered.lock().expect("not poisoned") = not_offered;
        Ok(offered)
    }

    fn read(&self, path: &Path, options: &CaptureOptions) -> Result<ReadThere, String> {
        if !self.files.iter().any(|file| file == path) {
            return Err(format!(
                "{} is not among this process's inputs",
                path.display()
            ));
        }
        let started = std::time::Instant::now();
        let mut options = options.clone();
        // Kept on disk whatever the first process does with them: they are sent from
        // there, a block at a time.
        options.spill_messages = true;
        let source = Source::sniff(path).map_err(|e| chain(&e))?;
        let size = source.stored_size().unwrap_or(0);
        let input = source.open(&Progress::hidden()).map_err(|e| chain(&e))?;
        let host = capture::host_name(path, &options);
        let mut capture =
            capture::read_capture(path, host, input, &options).map_err(|e| chain(&e))?;
        let spilled = capture.take_spilled().ok_or("its messages were not kept")?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let kept = spilled.bytes();
        self.kept.lock().expect("not poisoned").insert(id, spilled);
        let mut served = self.served.lock().expect("not poisoned");
        served.captures += 1;
        served.bytes += size;
        let (first, _) = served.span.unwrap_or((started, started));
        let last = std::time::Instant::now();
        served.span = Some((first.min(started), last));
        served.seconds = (last - first.min(started)).as_secs_f64();
        Ok(ReadThere { id, capture, kept })
    }

    fn fetch(&self, id: u64, offset: u64) -> Result<Vec<u8>, String> {
        let mut kept = self.kept.lock().expect("not poisoned");
        let spilled = kept.get(&id).ok_or("no such capture read")?;
        let block = spilled
            .raw_bytes(offset, BLOCK)
            .map_err(|e| format!("cannot read its kept messages: {e}"))?;
        // The last block: the file is no longer needed.
        if offset + block.len() as u64 >= spilled.bytes() {
            kept.remove(&id);
        }
        self.served.lock().expect("not poisoned").sent += block.len() as u64;
        Ok(block)
    }
}

/// An error with its causes, as one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// A file's size and the digest of its first bytes.
fn offered_file(path: &Path) -> std::io::Result<Offered> {
    use std::hash::{BuildHasher, Hasher};
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut head = Vec::new();
    file.take(HEAD).read_to_end(&mut head)?;
    let mut hasher = foldhash::quality::FixedState::with_seed(0x0ff3_12ed).build_hasher();
    hasher.write(&head);
    Ok(Offered {
        path: path.to_path_buf(),
        size,
        head: hasher.finish(),
    })
}

/// Every capture of the cluster's `processes`, in order (see the module's doc), with
/// those another process reads as [`Source::elsewhere`]; `own` is this process's
/// (process 0's) inputs as told apart, text traces kept in place.
pub fn gather(own: Vec<Source>, processes: usize, ask: &Ask) -> Result<Vec<Source>, InputError> {
    let refused = |process: usize, why: String| {
        InputError::Usage(format!(
            "process {process} of the cluster could not say which captures it holds: {why}"
        ))
    };
    let mut offers = Vec::with_capacity(processes.saturating_sub(1));
    for process in 1..processes {
        let answer =
            ask(process, to_bytes(&Errand::Offer)).map_err(|unanswered| match unanswered {
                Unanswered::Refused(why) => refused(process, why),
                Unanswered::Lost(why) => InputError::Lost(why),
            })?;
        let offered: Vec<Offered> =
            postcard::from_bytes(&answer).map_err(|e| refused(process, e.to_string()))?;
        offers.push(offered);
    }
    if offers.iter().all(Vec::is_empty) {
        return Ok(own);
    }
    // Each capture once, in order, with the processes that hold it.
    let mut captures: Vec<(Offered, Vec<usize>)> = Vec::new();
    let mut at: HashMap<PathBuf, usize> = HashMap::new();
    for source in own
        .iter()
        .filter(|s| s.kind == Kind::Capture && s.is_file())
    {
        let offered = offered_file(&source.path).map_err(|e| {
            InputError::Usage(format!("cannot read {}: {e}", source.path.display()))
        })?;
        at.insert(source.path.clone(), captures.len());
        captures.push((offered, vec![0]));
    }
    // Each file once by its content too: the same capture under two paths would be
    // read twice, as two hosts.
    let mut contents: HashMap<(u64, u64), usize> = (captures.iter().enumerate())
        .map(|(index, (offered, _))| ((offered.size, offered.head), index))
        .collect();
    for (process, offered) in (1..).zip(offers) {
        for offered in offered {
            match at.get(&offered.path) {
                Some(&index) => {
                    let (first, holders) = &mut captures[index];
                    if first.size != offered.size || first.head != offered.head {
                        let theirs = match first.size == offered.size {
                            true => format!("{} bytes, other first bytes", first.size),
                            false => format!("{} bytes", first.size),
                        };
                        return Err(InputError::Usage(format!(
                            "process {process}'s {} ({} bytes) is not process {}'s ({theirs}): \
                             name each host's capture by a path of its own, or give every \
                             process the same files on a shared path",
                            offered.path.display(),
                            offered.size,
                            holders[0],
                        )));
                    }
                    if !holders.contains(&process) {
                        holders.push(process);
                    }
                }
                None => {
                    if let Some(&index) = contents.get(&(offered.size, offered.head)) {
                        let (first, holders) = &captures[index];
                        return Err(InputError::Usage(format!(
                            "process {process}'s {} is the same file as process {}'s {} (the \
                             same size and first bytes): name it by one path on every process",
                            offered.path.display(),
                            holders[0],
                            first.path.display(),
                        )));
                    }
                    contents.insert((offered.size, offered.head), captures.len());
                    at.insert(offered.path.clone(), captures.len());
                    captures.push((offered, vec![process]));
                }
            }
        }
    }
    let readers = assign(&captures, processes);
    // This process's inputs in their order, each capture read here or elsewhere; then
    // the other processes' own captures.
    let mut sources = Vec::with_capacity(own.len() + captures.len());
    let elsewhere = |index: usize| -> Source {
        let (offered, _) = &captures[index];
        Source::elsewhere(
            &offered.path,
            Elsewhere {
                process: readers[index],
                size: offered.size,
                ask: Arc::clone(ask),
            },
        )
    };
    for source in own {
        let index = (source.kind == Kind::Capture && source.is_file())
            .then(|| at.get(&source.path))
            .flatten();
        match index {
            Some(&index) if readers[index] != 0 => sources.push(elsewhere(index)),
            _ => sources.push(source),
        }
    }
    for (index, (_, holders)) in captures.iter().enumerate() {
        if !holders.contains(&0) {
            sources.push(elsewhere(index));
        }
    }
    Ok(sources)
}

/// Which process reads each capture: its only holder, or among several the one with
/// the fewest bytes to read so far (the largest captures placed first; ties to the
/// lowest process).
fn assign(captures: &[(Offered, Vec<usize>)], processes: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..captures.len()).collect();
    order.sort_by_key(|&index| (std::cmp::Reverse(captures[index].0.size), index));
    let mut load = vec![0u64; processes];
    let mut readers = vec![0; captures.len()];
    for index in order {
        let (offered, holders) = &captures[index];
        let reader = (holders.iter().copied())
            .min_by_key(|&process| (load[process], process))
            .unwrap_or(0);
        load[reader] += offered.size;
        readers[index] = reader;
    }
    readers
}

fn to_bytes(errand: &Errand) -> Vec<u8> {
    postcard::to_allocvec(errand).expect("an errand always serialises")
}

impl Elsewhere {
    /// The capture at `path`, read by its process with `options`, its messages brought
    /// here (kept on disk here too when `options` ask, else in memory).
    pub fn read(&self, path: &Path, options: &CaptureOptions) -> Result<HostCapture, InputError> {
        let failed = |why: String| CaptureError::Elsewhere {
            path: path.to_path_buf(),
            process: self.process,
            why,
        };
        let ask = |errand: Errand| -> Result<Vec<u8>, InputError> {
            (self.ask)(self.process, to_bytes(&errand)).map_err(|unanswered| match unanswered {
                Unanswered::Refused(why) => failed(why).into(),
                Unanswered::Lost(why) => InputError::Lost(why),
            })
        };
        let read: ReadThere = postcard::from_bytes(&ask(Errand::Read {
            path: path.to_path_buf(),
            options: Box::new(options.clone()),
        })?)
        .map_err(|e| InputError::from(failed(e.to_string())))?;
        let ReadThere {
            id,
            mut capture,
            kept,
        } = read;
        let mut copy = SpillWriter::new().map_err(|e| capture::spill::error(path, e))?;
        let mut offset = 0;
        while offset < kept {
            let block: Vec<u8> = postcard::from_bytes(&ask(Errand::Fetch { id, offset })?)
                .map_err(|e| InputError::from(failed(e.to_string())))?;
            if block.is_empty() {
                return Err(failed(format!(
                    "its kept messages ended at byte {offset} of {kept}"
                ))
                .into());
            }
            copy.append_written(&block)
                .map_err(|e| capture::spill::error(path, e))?;
            offset += block.len() as u64;
        }
        capture.set_spilled(copy.finish().map_err(|e| capture::spill::error(path, e))?);
        if !options.spill_messages {
            capture.restore()?;
        }
        Ok(capture)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(path: &str, size: u64) -> Offered {
        Offered {
            path: PathBuf::from(path),
            size,
            head: 0,
        }
    }

    #[test]
    fn a_capture_held_by_several_goes_to_the_least_loaded_largest_first() {
        let captures = vec![
            (offered("a", 10), vec![0, 1]),
            (offered("b", 30), vec![0, 1]),
            (offered("c", 20), vec![0, 1]),
            (offered("d", 5), vec![1]),
        ];
        // b (30) to 0 (a tie, to the lower); c (20) to 1 (0 has 30); a (10) to 1 (20
        // against 30); d is only on 1.
        assert_eq!(assign(&captures, 2), vec![1, 0, 1, 1]);
    }

    #[test]
    fn a_capture_held_by_one_is_read_there() {
        let captures = vec![(offered("a", 10), vec![1]), (offered("b", 1), vec![0])];
        assert_eq!(assign(&captures, 3), vec![1, 0]);
    }
}
