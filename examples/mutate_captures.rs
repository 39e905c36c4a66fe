//! Mutation run over real captures (issue 47): makes N mutants of seed captures,
//! deterministically, and feeds each to the capture fuzz target's body
//! (`blackbox::fuzzing::capture`) and the input sniffer's (`blackbox::fuzzing::source`)
//! under `catch_unwind`. Counts the panics and saves every panicking mutant (up to 20 of
//! each distinct panic), its backtrace and, at the end, one minimised input of each
//! distinct panic; reports every mutant that takes more than 2 s (`--slow-ms`).
//!
//! ```text
//! RAYON_NUM_THREADS=1 nice -n 19 cargo run --release --example mutate_captures -- \
//!     SEEDS_DIR N [--out DIR] [--rng SEED] [--start I] [--slow-ms MS] [--hang-s S] \
//!     [--max-seed-bytes B] [--list]
//! cargo run --release --example mutate_captures -- --replay FILE...
//! ```
//!
//! SEEDS_DIR is searched recursively (symbolic links followed) for files that start
//! with a pcap, pcapng or gzip magic number, under 1 MB by default; gzip'd seeds are
//! mutated decompressed. Mutant `i` is made by its own ChaCha generator seeded from
//! `SEED` and `i` (1 and 0.. by default), from the seed `i mod seeds` in path order, by
//! one to three of: byte flips, bit flips, a cut at a random offset, a duplicated or
//! removed range, a splice of another seed, an overwritten length field (pcap record
//! caplen or len, snaplen, link type; pcapng block total length at either end, packet
//! block caplen or len, option length), and last, sometimes, gzip around a cut copy
//! (or a cut gzip stream). The same arguments give the same mutants, so a mutant's
//! number is enough to make it again (`--list` prints how each is made, `--start`
//! begins further on).
//!
//! The mutants run in a child process (this program with `--worker`) that reports each
//! one done; a mutant that runs past the hang limit (60 s, `--hang-s`) or takes the
//! child down (a stack overflow, an abort, a signal) is saved and counted, and a new
//! child goes on after it. Output: one progress line a second on stderr, then the
//! totals, the slow, hung and crashed mutants, and each distinct panic's backtrace on
//! stdout; files in the output directory (default `target/mutants`):
//! `panic-KEY-MUTANT.bin`, `panic-KEY.txt` (message and backtrace), `panic-KEY.min.bin`,
//! `slow-MUTANT.bin`, `hang-MUTANT.bin`, `crash-MUTANT.bin`. `--replay` runs files
//! through both targets in this process and prints any panic's backtrace.

use flate2::write::GzEncoder;
use flate2::Compression;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one panic said and where, as the panic hook saw it.
#[derive(Clone)]
struct PanicReport {
    location: String,
    message: String,
    backtrace: String,
}

/// The last panic's report, filled by the hook, taken by the caller of `catch_unwind`.
static LAST_PANIC: Mutex<Option<PanicReport>> = Mutex::new(None);

fn install_hook() {
    panic::set_hook(Box::new(|info| {
        let location = info
            .location()
            .map(|l| format!("{}:{}:{}", l.file(), l.line(), l.column()))
            .unwrap_or_else(|| "unknown".into());
        let message = if let Some(s) = info.payload().downcast_ref::<&str>() {
            (*s).to_string()
        } else if let Some(s) = info.payload().downcast_ref::<String>() {
            s.clone()
        } else {
            "(no message)".into()
        };
        let backtrace = std::backtrace::Backtrace::force_capture().to_string();
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(PanicReport {
                location,
                message,
                backtrace,
            });
        }
    }));
}

/// Which fuzz target body panicked.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Target {
    Capture,
    Source,
}

/// Runs both targets on `data`; the first panic, if any.
fn run_targets(data: &[u8]) -> Option<(Target, PanicReport)> {
    for (target, body) in [
        (Target::Capture, blackbox::fuzzing::capture as fn(&[u8])),
        (Target::Source, blackbox::fuzzing::source as fn(&[u8])),
    ] {
        if panic::catch_unwind(AssertUnwindSafe(|| body(data))).is_err() {
            let report = LAST_PANIC
                .lock()
                .ok()
                .and_then(|mut last| last.take())
                .unwrap_or(PanicReport {
                    location: "unknown".into(),
                    message: "(no report)".into(),
                    backtrace: String::new(),
                });
            return Some((target, report));
        }
    }
    None
}

/// A distinct panic: the target, the place and the message with its numbers blanked.
fn panic_key(target: Target, report: &PanicReport) -> String {
    let message: String = report
        .message
        .lines()
        .next()
        .unwrap_or("")
        .chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .take(80)
        .collect();
    format!("{target:?} at {}: {message}", report.location)
}

/// A file-name-safe short form of a key.
fn key_slug(key: &str) -> String {
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The frames of a backtrace worth reading: from the first one in this crate's code or
/// its parser, without the panic machinery above it.
fn short_backtrace(backtrace: &str, lines: usize) -> String {
    let all: Vec<&str> = backtrace.lines().collect();
    let start = all
        .iter()
        .position(|l| l.contains("blackbox::") || l.contains("pcap_parser::"))
        .map(|i| i.saturating_sub(4))
        .unwrap_or(0);
    all[start..]
        .iter()
        .take(lines)
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------
// Seeds

fn is_capture_magic(head: &[u8]) -> bool {
    matches!(
        head,
        [0xa1, 0xb2, 0xc3, 0xd4, ..]
            | [0xd4, 0xc3, 0xb2, 0xa1, ..]
            | [0xa1, 0xb2, 0x3c, 0x4d, ..]
            | [0x4d, 0x3c, 0xb2, 0xa1, ..]
            | [0xa1, 0xb2, 0xcd, 0x34, ..]
            | [0x34, 0xcd, 0xb2, 0xa1, ..]
            | [0x0a, 0x0d, 0x0d, 0x0a, ..]
            | [0x1f, 0x8b, ..]
    )
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        // metadata() follows symbolic links, so a directory of links to seeds works.
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            collect_files(&path, out)?;
        } else if meta.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// The seeds under `dir`, in path order: captures under `max_bytes`, gzip'd ones
/// decompressed (when they decompress to at most 4 MiB).
fn load_seeds(dir: &Path, max_bytes: u64) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut files = Vec::new();
    collect_files(dir, &mut files)?;
    files.sort();
    let mut seeds = Vec::new();
    for path in files {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.len() >= max_bytes || meta.len() < 4 {
            continue;
        }
        let data = std::fs::read(&path)?;
        if !is_capture_magic(&data) {
            continue;
        }
        let data = if data.starts_with(&[0x1f, 0x8b]) {
            let mut plain = Vec::new();
            let decoder = flate2::read::MultiGzDecoder::new(data.as_slice());
            if decoder.take(4 << 20).read_to_end(&mut plain).is_err() || plain.len() < 4 {
                continue;
            }
            plain
        } else {
            data
        };
        seeds.push((path, data));
    }
    Ok(seeds)
}

// ---------------------------------------------------------------------------------
// Length fields

/// A length field of the container format: its place, width and byte order.
#[derive(Clone, Copy, Debug)]
struct Field {
    offset: usize,
    width: usize,
    big_endian: bool,
}

fn read_u32(data: &[u8], at: usize, big_endian: bool) -> Option<u32> {
    let bytes: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
    Some(if big_endian {
        u32::from_be_bytes(bytes)
    } else {
        u32::from_le_bytes(bytes)
    })
}

fn read_u16(data: &[u8], at: usize, big_endian: bool) -> Option<u16> {
    let bytes: [u8; 2] = data.get(at..at + 2)?.try_into().ok()?;
    Some(if big_endian {
        u16::from_be_bytes(bytes)
    } else {
        u16::from_le_bytes(bytes)
    })
}

/// The length fields of a pcap or pcapng file, as far as its structure can be walked
/// (at most 4,096 of them).
fn length_fields(data: &[u8]) -> Vec<Field> {
    const MOST: usize = 4096;
    let mut fields = Vec::new();
    let word = |offset, big_endian| Field {
        offset,
        width: 4,
        big_endian,
    };
    match data.get(..4) {
        Some([0xa1, 0xb2, 0xc3 | 0x3c | 0xcd, 0xd4 | 0x4d | 0x34]) => {
            pcap_fields(data, true, &mut fields)
        }
        Some([0xd4 | 0x4d | 0x34, 0xc3 | 0x3c | 0xcd, 0xb2, 0xa1]) => {
            pcap_fields(data, false, &mut fields)
        }
        Some([0x0a, 0x0d, 0x0d, 0x0a]) => {
            let mut big_endian = false;
            let mut at = 0usize;
            while at + 12 <= data.len() && fields.len() < MOST {
                let kind = read_u32(data, at, big_endian).unwrap_or(0);
                if data[at..at + 4] == [0x0a, 0x0d, 0x0d, 0x0a] {
                    big_endian = data.get(at + 8..at + 12) == Some(&[0x1a, 0x2b, 0x3c, 0x4d]);
                }
                let Some(total) = read_u32(data, at + 4, big_endian) else {
                    break;
                };
                let total = total as usize;
                fields.push(word(at + 4, big_endian));
                if total < 12 || at + total > data.len() {
                    break;
                }
                fields.push(word(at + total - 4, big_endian));
                let end = at + total - 4;
                let options = match kind {
                    0x0a0d_0d0a => Some(at + 24),
                    1 => Some(at + 16),
                    6 | 2 => {
                        fields.push(word(at + 20, big_endian));
                        fields.push(word(at + 24, big_endian));
                        let caplen = read_u32(data, at + 20, big_endian).unwrap_or(0) as usize;
                        Some(at + 28 + caplen.div_ceil(4) * 4)
                    }
                    3 => {
                        fields.push(word(at + 8, big_endian));
                        None
                    }
                    5 => Some(at + 20),
                    _ => None,
                };
                if let Some(mut option) = options {
                    while option + 4 <= end && fields.len() < MOST {
                        let code = read_u16(data, option, big_endian).unwrap_or(0);
                        let length =
                            usize::from(read_u16(data, option + 2, big_endian).unwrap_or(0));
                        fields.push(Field {
                            offset: option + 2,
                            width: 2,
                            big_endian,
                        });
                        if code == 0 {
                            break;
                        }
                        option += 4 + length.div_ceil(4) * 4;
                    }
                }
                at += total;
            }
        }
        _ => {}
    }
    fields.truncate(MOST);
    fields
}

fn pcap_fields(data: &[u8], big_endian: bool, fields: &mut Vec<Field>) {
    let word = |offset| Field {
        offset,
        width: 4,
        big_endian,
    };
    // Snaplen and link type (with its FCS bits).
    fields.push(word(16));
    fields.push(word(20));
    let mut at = 24usize;
    while at + 16 <= data.len() && fields.len() < 4096 {
        fields.push(word(at + 8));
        fields.push(word(at + 12));
        let caplen = read_u32(data, at + 8, big_endian).unwrap_or(u32::MAX) as usize;
        at = at.saturating_add(16).saturating_add(caplen);
    }
}

fn write_field(data: &mut [u8], field: Field, value: u32) {
    if field.offset + field.width > data.len() {
        return;
    }
    match (field.width, field.big_endian) {
        (4, true) => data[field.offset..field.offset + 4].copy_from_slice(&value.to_be_bytes()),
        (4, false) => data[field.offset..field.offset + 4].copy_from_slice(&value.to_le_bytes()),
        (_, true) => {
            data[field.offset..field.offset + 2].copy_from_slice(&(value as u16).to_be_bytes())
        }
        (_, false) => {
            data[field.offset..field.offset + 2].copy_from_slice(&(value as u16).to_le_bytes())
        }
    }
}

/// A value for a length field that readers get wrong: edges, off by one or a word,
/// around the 4 MiB and 256 KiB limits, the file's own length, or anything.
fn interesting_value(rng: &mut ChaCha8Rng, old: u32, width: usize, file_len: usize) -> u32 {
    let wide = [
        0,
        1,
        3,
        4,
        11,
        12,
        13,
        16,
        28,
        32,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_fffc,
        0xffff_ffff,
        65_535,
        65_536,
        262_144,
        262_145,
        4 << 20,
        (4 << 20) + 1,
        16 << 20,
        file_len as u32,
    ];
    let narrow = [0, 1, 2, 3, 4, 5, 8, 0x7fff, 0x8000, 0xfffc, 0xffff];
    match rng.gen_range(0..4) {
        0 if width == 4 => wide[rng.gen_range(0..wide.len())],
        0 => narrow[rng.gen_range(0..narrow.len())],
        1 => old.wrapping_add([1, 4, 0xffff_ffff, 0xffff_fffc][rng.gen_range(0..4)]),
        2 => old.wrapping_mul(2).max(old.wrapping_add(8)),
        _ if width == 4 => rng.gen(),
        _ => u32::from(rng.gen::<u16>()),
    }
}

// ---------------------------------------------------------------------------------
// Mutants

/// Mutant `index`: the same arguments always make the same bytes.
fn make_mutant(
    seeds: &[(PathBuf, Vec<u8>)],
    rng_seed: u64,
    index: u64,
) -> (usize, Vec<u8>, String) {
    let mut rng = ChaCha8Rng::seed_from_u64(rng_seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let seed = (index % seeds.len() as u64) as usize;
    let mut data = seeds[seed].1.clone();
    let mut done = Vec::new();
    for _ in 0..rng.gen_range(1..=3) {
        let len = data.len();
        match rng.gen_range(0..8) {
            0 if len > 0 => {
                let count = rng.gen_range(1..=16);
                // Half the time near the front, where the headers are.
                let span = if rng.gen_bool(0.5) { len.min(256) } else { len };
                for _ in 0..count {
                    let at = rng.gen_range(0..span);
                    data[at] = rng.gen();
                }
                done.push(format!("{count} bytes"));
            }
            1 if len > 0 => {
                let count = rng.gen_range(1..=16);
                for _ in 0..count {
                    let at = rng.gen_range(0..len);
                    data[at] ^= 1 << rng.gen_range(0..8);
                }
                done.push(format!("{count} bits"));
            }
            2 if len > 0 => {
                let at = rng.gen_range(0..len);
                data.truncate(at);
                done.push(format!("cut at {at}"));
            }
            3 if len > 0 => {
                let from = rng.gen_range(0..len);
                let size = rng.gen_range(1..=(len - from).min(4096));
                let to = rng.gen_range(0..=len);
                let range: Vec<u8> = data[from..from + size].to_vec();
                data.splice(to..to, range);
                done.push(format!("{size} bytes from {from} copied to {to}"));
            }
            4 if len > 0 => {
                let from = rng.gen_range(0..len);
                let size = rng.gen_range(1..=(len - from).min(4096));
                data.drain(from..from + size);
                done.push(format!("{size} bytes removed at {from}"));
            }
            5 => {
                let other = &seeds[rng.gen_range(0..seeds.len())].1;
                let from = rng.gen_range(0..other.len());
                let size = rng.gen_range(1..=(other.len() - from).min(8192));
                let to = rng.gen_range(0..=len);
                data.splice(to..to, other[from..from + size].iter().copied());
                done.push(format!("{size} bytes of another seed at {to}"));
            }
            _ => {
                // The most likely: an overwritten length field.
                let fields = length_fields(&data);
                if fields.is_empty() {
                    continue;
                }
                for _ in 0..rng.gen_range(1..=2) {
                    let field = fields[rng.gen_range(0..fields.len())];
                    let old = if field.width == 4 {
                        read_u32(&data, field.offset, field.big_endian).unwrap_or(0)
                    } else {
                        u32::from(read_u16(&data, field.offset, field.big_endian).unwrap_or(0))
                    };
                    let value = interesting_value(&mut rng, old, field.width, data.len());
                    write_field(&mut data, field, value);
                    done.push(format!("length at {} {old} -> {value}", field.offset));
                }
            }
        }
    }
    if rng.gen_ratio(1, 8) {
        let cut = rng.gen_range(0..=data.len());
        let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
        gz.write_all(&data[..cut])
            .expect("writing to memory cannot fail");
        let mut zipped = gz.finish().expect("writing to memory cannot fail");
        if rng.gen_bool(0.5) {
            let zcut = rng.gen_range(0..=zipped.len());
            zipped.truncate(zcut);
            done.push(format!("gzip'd, cut at {cut}, stream cut at {zcut}"));
        } else {
            done.push(format!("gzip'd, cut at {cut}"));
        }
        data = zipped;
    }
    (seed, data, done.join("; "))
}

/// A smaller input that panics with the same key, by removing halves, quarters, ...
/// and cutting the end, within `budget`.
fn minimise(data: &[u8], key: &str, budget: Duration) -> Vec<u8> {
    let started = Instant::now();
    let same = |candidate: &[u8]| {
        run_targets(candidate).is_some_and(|(target, report)| panic_key(target, &report) == key)
    };
    let mut best = data.to_vec();
    let mut chunk = best.len() / 2;
    while chunk >= 1 && started.elapsed() < budget {
        let mut at = 0;
        let mut shrunk = false;
        while at < best.len() && started.elapsed() < budget {
            let end = (at + chunk).min(best.len());
            let mut candidate = best[..at].to_vec();
            candidate.extend_from_slice(&best[end..]);
            if same(&candidate) {
                best = candidate;
                shrunk = true;
            } else {
                at += chunk;
            }
        }
        if !shrunk {
            chunk /= 2;
        }
    }
    best
}

// ---------------------------------------------------------------------------------
// The run

struct Options {
    seeds: PathBuf,
    count: u64,
    out: PathBuf,
    rng_seed: u64,
    start: u64,
    slow: Duration,
    hang: Duration,
    max_seed_bytes: u64,
    /// Only say how each mutant is made, without running it.
    list: bool,
}

fn usage() -> ! {
    eprintln!(
        "usage: mutate_captures SEEDS_DIR N [--out DIR] [--rng SEED] [--start I] [--slow-ms MS] \
         [--hang-s S] [--max-seed-bytes B] [--list]\n       mutate_captures --replay FILE..."
    );
    std::process::exit(2)
}

fn parse_options(args: &[String]) -> Options {
    let mut positional = Vec::new();
    let mut options = Options {
        seeds: PathBuf::new(),
        count: 0,
        out: PathBuf::from("target/mutants"),
        rng_seed: 1,
        start: 0,
        slow: Duration::from_secs(2),
        hang: Duration::from_secs(60),
        max_seed_bytes: 1_000_000,
        list: false,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = || args.next().cloned().unwrap_or_else(|| usage());
        let number = |s: String| s.parse::<u64>().unwrap_or_else(|_| usage());
        match arg.as_str() {
            "--out" => options.out = PathBuf::from(value()),
            "--rng" => options.rng_seed = number(value()),
            "--start" => options.start = number(value()),
            "--slow-ms" => options.slow = Duration::from_millis(number(value())),
            "--hang-s" => options.hang = Duration::from_secs(number(value())),
            "--max-seed-bytes" => options.max_seed_bytes = number(value()),
            "--list" => options.list = true,
            _ if arg.starts_with("--") => usage(),
            _ => positional.push(arg.clone()),
        }
    }
    let [seeds, count] = positional.as_slice() else {
        usage()
    };
    options.seeds = PathBuf::from(seeds);
    options.count = count.parse().unwrap_or_else(|_| usage());
    options
}

/// `--replay FILE...`: each file through both targets, saying what panicked.
fn replay(files: &[String]) -> i32 {
    let mut panics = 0;
    for file in files {
        let data = match std::fs::read(file) {
            Ok(data) => data,
            Err(error) => {
                eprintln!("{file}: {error}");
                return 2;
            }
        };
        let started = Instant::now();
        match run_targets(&data) {
            Some((target, report)) => {
                panics += 1;
                println!(
                    "{file}: PANIC in {target:?} at {}: {}",
                    report.location, report.message
                );
                println!("{}", short_backtrace(&report.backtrace, 40));
            }
            None => println!(
                "{file}: no panic ({:.3} s)",
                started.elapsed().as_secs_f64()
            ),
        }
    }
    i32::from(panics > 0)
}

/// `--worker`: runs mutants `start..count`, one line on stdout for each (`D i`), for
/// each panic (`P i SLUG KEY`) and each slow one (`S i MILLISECONDS`); saves the
/// panicking and slow mutants.
fn worker(options: &Options, seeds: &[(PathBuf, Vec<u8>)]) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for index in options.start..options.count {
        let (_, data, _) = make_mutant(seeds, options.rng_seed, index);
        let began = Instant::now();
        let outcome = run_targets(&data);
        let took = began.elapsed();
        if took > options.slow {
            let _ = std::fs::write(options.out.join(format!("slow-{index}.bin")), &data);
            let _ = writeln!(out, "S {index} {}", took.as_millis());
        }
        if let Some((target, report)) = outcome {
            let key = panic_key(target, &report);
            let slug = key_slug(&key);
            let text = options.out.join(format!("panic-{slug}.txt"));
            if !text.exists() {
                let _ = std::fs::write(
                    &text,
                    format!(
                        "{key}\nfirst: mutant {index}\nmessage: {}\n\n{}\n",
                        report.message, report.backtrace
                    ),
                );
            }
            let saved = std::fs::read_dir(&options.out)
                .map(|dir| {
                    dir.filter_map(Result::ok)
                        .filter(|e| {
                            let name = e.file_name().to_string_lossy().into_owned();
                            name.starts_with(&format!("panic-{slug}-"))
                        })
                        .count()
                })
                .unwrap_or(0);
            if saved < 20 {
                let _ =
                    std::fs::write(options.out.join(format!("panic-{slug}-{index}.bin")), &data);
            }
            let _ = writeln!(out, "P {index} {slug} {key}");
        }
        let _ = writeln!(out, "D {index}");
        let _ = out.flush();
    }
}

/// `--minimise IN OUT`: shrinks IN keeping its panic, writing OUT at each step.
fn minimise_file(input: &Path, output: &Path) -> i32 {
    let Ok(data) = std::fs::read(input) else {
        return 2;
    };
    let Some((target, report)) = run_targets(&data) else {
        return 1;
    };
    let key = panic_key(target, &report);
    let _ = std::fs::write(output, &data);
    let mut best = data;
    // Rounds of a short budget each, so that every improvement reaches the file.
    loop {
        let smaller = minimise(&best, &key, Duration::from_secs(5));
        if smaller.len() >= best.len() {
            return 0;
        }
        best = smaller;
        let _ = std::fs::write(output, &best);
    }
}

/// A worker child process, from mutant `start` on, and the channel of its lines.
fn spawn_worker(options: &Options, start: u64) -> std::io::Result<(Child, mpsc::Receiver<String>)> {
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--worker")
        .arg(&options.seeds)
        .arg(options.count.to_string())
        .args(["--start", &start.to_string()])
        .args(["--rng", &options.rng_seed.to_string()])
        .args(["--slow-ms", &options.slow.as_millis().to_string()])
        .args(["--max-seed-bytes", &options.max_seed_bytes.to_string()])
        .arg("--out")
        .arg(&options.out)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().expect("piped");
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    Ok((child, receive))
}

/// One distinct panic: how often and the first mutant.
struct Distinct {
    key: String,
    count: u64,
    first: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    install_hook();
    match args.first().map(String::as_str) {
        Some("--replay") => std::process::exit(replay(&args[1..])),
        Some("--minimise") if args.len() == 3 => {
            std::process::exit(minimise_file(Path::new(&args[1]), Path::new(&args[2])))
        }
        _ => {}
    }
    let is_worker = args.first().map(String::as_str) == Some("--worker");
    let options = parse_options(if is_worker { &args[1..] } else { &args });
    let seeds = match load_seeds(&options.seeds, options.max_seed_bytes) {
        Ok(seeds) if !seeds.is_empty() => seeds,
        Ok(_) => {
            eprintln!(
                "no capture under {} below {} bytes",
                options.seeds.display(),
                options.max_seed_bytes
            );
            std::process::exit(2)
        }
        Err(error) => {
            eprintln!("{}: {error}", options.seeds.display());
            std::process::exit(2)
        }
    };
    if is_worker {
        worker(&options, &seeds);
        return;
    }
    if options.list {
        for index in options.start..options.count {
            let (seed, data, how) = make_mutant(&seeds, options.rng_seed, index);
            println!(
                "{index}\t{}\t{}\t{how}",
                seeds[seed].0.display(),
                data.len()
            );
        }
        return;
    }
    if let Err(error) = std::fs::create_dir_all(&options.out) {
        eprintln!("{}: {error}", options.out.display());
        std::process::exit(2)
    }
    let seed_bytes: usize = seeds.iter().map(|(_, d)| d.len()).sum();
    eprintln!(
        "{} seeds ({} bytes) from {}; mutants {}..{}, rng {}; output in {}",
        seeds.len(),
        seed_bytes,
        options.seeds.display(),
        options.start,
        options.count,
        options.rng_seed,
        options.out.display()
    );
    let describe = |index: u64| {
        let (seed, data, how) = make_mutant(&seeds, options.rng_seed, index);
        (seeds[seed].0.display().to_string(), data, how)
    };

    let started = Instant::now();
    let mut distinct: BTreeMap<String, Distinct> = BTreeMap::new();
    let mut panics = 0u64;
    let mut slow: Vec<(u64, u64)> = Vec::new();
    let mut hangs: Vec<u64> = Vec::new();
    let mut crashes: Vec<(u64, String)> = Vec::new();
    let mut next = options.start;
    let mut done = 0u64;
    while next < options.count {
        let (mut child, lines) = match spawn_worker(&options, next) {
            Ok(worker) => worker,
            Err(error) => {
                eprintln!("cannot start a worker: {error}");
                std::process::exit(2)
            }
        };
        let mut last_activity = Instant::now();
        let mut last_report = Instant::now();
        let mut done_at_report = done;
        loop {
            match lines.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    let mut words = line.splitn(4, ' ');
                    let kind = words.next().unwrap_or("");
                    let index: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                    match kind {
                        "D" => {
                            done += 1;
                            next = index + 1;
                            last_activity = Instant::now();
                        }
                        "S" => {
                            let millis = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                            slow.push((index, millis));
                        }
                        "P" => {
                            panics += 1;
                            let slug = words.next().unwrap_or("").to_string();
                            let key = words.next().unwrap_or("").to_string();
                            distinct
                                .entry(slug)
                                .or_insert(Distinct {
                                    key,
                                    count: 0,
                                    first: index,
                                })
                                .count += 1;
                        }
                        _ => {}
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // The child's output ended: it finished, or it died on mutant `next`.
                    let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
                    if next < options.count {
                        let (seed, data, how) = describe(next);
                        let file = options.out.join(format!("crash-{next}.bin"));
                        let _ = std::fs::write(&file, &data);
                        eprintln!(
                            "CRASH: mutant {next} of {seed} ({how}) ended the worker ({status}); saved as {}",
                            file.display()
                        );
                        crashes.push((next, status));
                        done += 1;
                        next += 1;
                    }
                    break;
                }
            }
            if last_activity.elapsed() > options.hang {
                let _ = child.kill();
                let _ = child.wait();
                let (seed, data, how) = describe(next);
                let file = options.out.join(format!("hang-{next}.bin"));
                let _ = std::fs::write(&file, &data);
                eprintln!(
                    "HANG: mutant {next} of {seed} ({how}) still running after {} s; saved as {}",
                    options.hang.as_secs(),
                    file.display()
                );
                hangs.push(next);
                done += 1;
                next += 1;
                break;
            }
            if last_report.elapsed() >= Duration::from_secs(1) {
                eprintln!(
                    "{:>6.0} s: {done} mutants ({}/s), {panics} panics ({} distinct), {} slow, {} hangs, {} crashes",
                    started.elapsed().as_secs_f64(),
                    done - done_at_report,
                    distinct.len(),
                    slow.len(),
                    hangs.len(),
                    crashes.len(),
                );
                last_report = Instant::now();
                done_at_report = done;
            }
        }
    }
    let elapsed = started.elapsed();

    println!(
        "mutants: {done} (numbers {}..{}, rng {})  panics: {panics} ({} distinct)  slow (> {} ms): {}  hangs (> {} s): {}  crashes: {}  time: {:.1} s",
        options.start,
        options.count,
        options.rng_seed,
        distinct.len(),
        options.slow.as_millis(),
        slow.len(),
        options.hang.as_secs(),
        hangs.len(),
        crashes.len(),
        elapsed.as_secs_f64()
    );
    for (index, millis) in &slow {
        let (seed, _, how) = describe(*index);
        println!(
            "SLOW: mutant {index} ({:.1} s) of {seed} ({how}): {}",
            *millis as f64 / 1000.0,
            options.out.join(format!("slow-{index}.bin")).display()
        );
    }
    for index in &hangs {
        let (seed, _, how) = describe(*index);
        println!(
            "HANG: mutant {index} of {seed} ({how}): {}",
            options.out.join(format!("hang-{index}.bin")).display()
        );
    }
    for (index, status) in &crashes {
        let (seed, _, how) = describe(*index);
        println!(
            "CRASH: mutant {index} of {seed} ({how}), {status}: {}",
            options.out.join(format!("crash-{index}.bin")).display()
        );
    }
    for (slug, found) in &distinct {
        let first = options
            .out
            .join(format!("panic-{slug}-{}.bin", found.first));
        let min_file = options.out.join(format!("panic-{slug}.min.bin"));
        // The minimiser runs in a child too, for two minutes at most.
        if let Ok(mut child) = Command::new(std::env::current_exe().expect("this program"))
            .arg("--minimise")
            .arg(&first)
            .arg(&min_file)
            .stdout(Stdio::null())
            .spawn()
        {
            let began = Instant::now();
            while began.elapsed() < Duration::from_secs(120) {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let (seed, _, how) = describe(found.first);
        let min_len = std::fs::metadata(&min_file).map(|m| m.len()).unwrap_or(0);
        let text = std::fs::read_to_string(options.out.join(format!("panic-{slug}.txt")))
            .unwrap_or_default();
        println!("\nPANIC {slug}: {}", found.key);
        println!(
            "  {} mutants; first: mutant {} of {seed} ({how})",
            found.count, found.first
        );
        println!("  minimised: {min_len} bytes in {}", min_file.display());
        println!("{}", short_backtrace(&text, 30));
    }
    if !distinct.is_empty() || !hangs.is_empty() || !crashes.is_empty() {
        std::process::exit(1);
    }
}
