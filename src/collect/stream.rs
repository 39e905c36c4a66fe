//! One host's capture as it arrives: the classic pcap stream that `tcpdump -w -` and
//! `dumpcap -P -w -` write, cut into whole packets and written to its file, so that
//! whatever stops it (the end, a byte limit, a full disk) leaves a file that ends on a
//! whole packet. Counts what it wrote, the packets the snaplen cut short, the first and
//! last packet's times, and the file's SHA-256 as written. Owns the pcap stream's
//! framing and the file; not what the packets hold ([`crate::capture`]).

use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{self, Read, Write};

/// The pcap file header's length.
const FILE_HEADER: usize = 24;
/// A packet record's header's length.
const RECORD_HEADER: usize = 16;
/// The largest packet a record may hold; more means the stream is not a pcap stream.
const MOST_CAPTURED: u32 = 1 << 20;
/// The buffer the stream is read into: past half of it (packets past the byte limit,
/// not kept), always room for the largest packet.
const BUFFER: usize = 8 << 20;

/// Why a stream stopped being written.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// The bytes are not a pcap stream.
    #[error("not a pcap stream: {0}")]
    NotPcap(String),
    /// Reading the transport failed.
    #[error("reading the capture failed")]
    Read(#[source] io::Error),
    /// Writing the file failed (a full disk); the file holds the whole packets written
    /// before.
    #[error("writing the capture failed")]
    Write(#[source] io::Error),
}

/// What was written of one host's stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    /// Packets in the file.
    pub packets: u64,
    /// The file's length.
    pub bytes: u64,
    /// Packets the snaplen cut short.
    pub truncated: u64,
    /// The first and last packets' times, in nanoseconds since the epoch.
    pub first_ns: Option<i128>,
    /// See `first_ns`.
    pub last_ns: Option<i128>,
    /// The file's SHA-256, in hex.
    pub sha256: String,
    /// Packets left out because the byte limit was reached.
    pub over_limit: u64,
    /// Whether the stream ended inside a packet (the transport cut).
    pub cut_inside_a_packet: bool,
}

/// Byte order and time resolution, from the file header's magic number.
#[derive(Debug, Clone, Copy)]
struct Format {
    big_endian: bool,
    nanoseconds: bool,
}

impl Format {
    fn of(magic: [u8; 4]) -> Option<Format> {
        let little = u32::from_le_bytes(magic);
        let (big_endian, value) = match little {
            0xa1b2_c3d4 | 0xa1b2_3c4d => (false, little),
            _ => (true, u32::from_be_bytes(magic)),
        };
        match value {
            0xa1b2_c3d4 => Some(Format {
                big_endian,
                nanoseconds: false,
            }),
            0xa1b2_3c4d => Some(Format {
                big_endian,
                nanoseconds: true,
            }),
            _ => None,
        }
    }

    fn u32_at(self, bytes: &[u8], at: usize) -> u32 {
        let word = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        match self.big_endian {
            true => u32::from_be_bytes(word),
            false => u32::from_le_bytes(word),
        }
    }
}

/// Counts of whole packets that wait in the buffer, then of those written: a failed
/// write leaves counts true to the file.
struct Writer {
    file: File,
    digest: Sha256,
    waiting: Written,
    written: Written,
    /// Where each waiting packet ends, from the start of the block.
    ends: Vec<usize>,
}

impl Writer {
    fn count(&mut self, end: usize, time: i128, truncated: bool) {
        self.ends.push(end);
        let waiting = &mut self.waiting;
        waiting.packets += 1;
        waiting.truncated += u64::from(truncated);
        waiting.first_ns.get_or_insert(time);
        waiting.last_ns = Some(time);
    }

    /// Writes `block`, the whole packets counted since the last write (and the file
    /// header, first). On a failed write the file is cut back to the last whole packet
    /// that reached it, and those packets are counted.
    fn write(&mut self, block: &[u8]) -> Result<(), StreamError> {
        let mut done = 0;
        let mut failure = None;
        while done < block.len() {
            match self.file.write(&block[done..]) {
                Ok(0) => {
                    failure = Some(io::Error::from(io::ErrorKind::WriteZero));
                    break;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let whole = match failure {
            None => block.len(),
            // The header is not a packet: a block cut before its first packet's end
            // keeps nothing new.
            Some(_) => self
                .ends
                .iter()
                .copied()
                .take_while(|&e| e <= done)
                .last()
                .unwrap_or(0),
        };
        let packets = match failure {
            None => self.ends.len(),
            Some(_) => self.ends.iter().take_while(|&&e| e <= done).count(),
        };
        self.ends.clear();
        let waiting = std::mem::take(&mut self.waiting);
        self.digest.update(&block[..whole]);
        let written = &mut self.written;
        written.bytes += whole as u64;
        if packets == waiting.packets as usize {
            written.packets += waiting.packets;
            written.truncated += waiting.truncated;
            written.first_ns = written.first_ns.or(waiting.first_ns);
            written.last_ns = waiting.last_ns.or(written.last_ns);
        } else {
            // Part of the block reached the disk: its packets are counted, their
            // times and cuts are not known apart from the rest's.
            written.packets += packets as u64;
        }
        match failure {
            None => Ok(()),
            Some(error) => {
                let _ = self.file.set_len(written.bytes);
                Err(StreamError::Write(error))
            }
        }
    }
}

/// Writes the pcap stream `from` into `file`: whole packets only, at most `max_bytes`
/// in all (the packets past it read and counted, not kept); `on_write_failed` is told
/// at once when the file cannot be written (a full disk), as nothing more will be
/// kept. After an error the stream is still read to its end and dropped, so that the
/// capture tool is never left blocked on a full pipe. The bytes are read into one
/// buffer, cut into packets where they lie and written from there: a capture at
/// gigabits a second costs a copy and a hash, little more. Returns what the file
/// holds, and the first error.
pub fn write_stream(
    mut from: impl Read,
    file: File,
    max_bytes: u64,
    mut on_write_failed: impl FnMut(),
) -> (Written, Option<StreamError>) {
    let mut writer = Writer {
        file,
        digest: Sha256::new(),
        waiting: Written::default(),
        written: Written::default(),
        ends: Vec::new(),
    };
    // [0, kept): whole packets (and the file header) to write; [kept, cut): whole
    // packets past the byte limit; [cut, filled): a header or a packet in pieces.
    let mut buffer = vec![0u8; BUFFER];
    let (mut kept, mut cut, mut filled) = (0usize, 0usize, 0usize);
    let mut format: Option<Format> = None;
    let mut over_limit = 0u64;
    let mut limited = false;
    let mut error: Option<StreamError> = None;
    loop {
        let read = match from.read(&mut buffer[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                error.get_or_insert(StreamError::Read(e));
                break;
            }
        };
        if error.is_some() {
            continue;
        }
        filled += read;
        while error.is_none() {
            let rest = &buffer[cut..filled];
            let Some(fmt) = format else {
                if rest.len() < FILE_HEADER {
                    break;
                }
                let magic = [rest[0], rest[1], rest[2], rest[3]];
                match Format::of(magic) {
                    Some(found) => {
                        format = Some(found);
                        cut += FILE_HEADER;
                        kept = cut;
                    }
                    None => {
                        error = Some(StreamError::NotPcap(format!(
                            "it starts with {:02x}{:02x}{:02x}{:02x}",
                            magic[0], magic[1], magic[2], magic[3]
                        )))
                    }
                }
                continue;
            };
            if rest.len() < RECORD_HEADER {
                break;
            }
            let captured = fmt.u32_at(rest, 8);
            if captured > MOST_CAPTURED {
                let packet = writer.written.packets + writer.waiting.packets + over_limit + 1;
                error = Some(StreamError::NotPcap(format!(
                    "packet {packet} claims {captured} captured bytes"
                )));
                break;
            }
            let length = RECORD_HEADER + captured as usize;
            if rest.len() < length {
                break;
            }
            if limited || writer.written.bytes + (cut + length) as u64 > max_bytes {
                limited = true;
                over_limit += 1;
                cut += length;
                continue;
            }
            let seconds = i128::from(fmt.u32_at(rest, 0));
            let fraction = i128::from(fmt.u32_at(rest, 4));
            let time = seconds * 1_000_000_000
                + if fmt.nanoseconds {
                    fraction
                } else {
                    fraction * 1_000
                };
            let truncated = fmt.u32_at(rest, 12) > captured;
            cut += length;
            kept = cut;
            writer.count(kept, time, truncated);
        }
        if error.is_some() {
            continue;
        }
        // Every read's whole packets are written at once, so that what collect has
        // read is on disk however it ends.
        if kept > 0 || filled > BUFFER / 2 {
            if let Err(e) = writer.write(&buffer[..kept]) {
                on_write_failed();
                error = Some(e);
                continue;
            }
            buffer.copy_within(cut..filled, 0);
            filled -= cut;
            (kept, cut) = (0, 0);
        }
    }
    let cut_inside_a_packet = error.is_none() && filled > cut;
    if error.is_none() {
        if let Err(e) = writer.write(&buffer[..kept]) {
            on_write_failed();
            error = Some(e);
        }
    }
    let mut written = writer.written;
    written.sha256 = hex(&writer.digest.finalize());
    written.over_limit = over_limit;
    written.cut_inside_a_packet = cut_inside_a_packet;
    (written, error)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        bytes.extend_from_slice(&2u16.to_le_bytes());
        bytes.extend_from_slice(&4u16.to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&262_144u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes
    }

    fn record(seconds: u32, nanos: u32, data: &[u8], original: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        for word in [seconds, nanos, data.len() as u32, original] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(data);
        bytes
    }

    /// Hands out its bytes a few at a time, as a pipe does.
    struct Trickle(Vec<u8>, usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.1).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0.drain(..n);
            Ok(n)
        }
    }

    fn stream() -> Vec<u8> {
        let mut bytes = header();
        bytes.extend(record(10, 5, &[1; 60], 60));
        bytes.extend(record(11, 7, &[2; 40], 1500));
        bytes.extend(record(12, 9, &[3; 60], 60));
        bytes
    }

    #[test]
    fn whole_packets_are_written_whatever_the_pieces() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let bytes = stream();
        let (written, error) = write_stream(
            Trickle(bytes.clone(), 7),
            file.reopen().unwrap(),
            u64::MAX,
            || {},
        );
        assert!(error.is_none());
        assert_eq!(written.packets, 3);
        assert_eq!(written.truncated, 1);
        assert_eq!(written.first_ns, Some(10_000_000_005));
        assert_eq!(written.last_ns, Some(12_000_000_009));
        assert_eq!(std::fs::read(file.path()).unwrap(), bytes);
        assert_eq!(written.sha256, hex(&Sha256::digest(&bytes)));
        assert!(!written.cut_inside_a_packet);
    }

    #[test]
    fn the_byte_limit_keeps_whole_packets_and_counts_the_rest() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let limit = (FILE_HEADER + 2 * RECORD_HEADER + 100) as u64;
        let (written, error) = write_stream(
            Trickle(stream(), 1000),
            file.reopen().unwrap(),
            limit,
            || {},
        );
        assert!(error.is_none());
        assert_eq!((written.packets, written.over_limit), (2, 1));
        assert_eq!(std::fs::metadata(file.path()).unwrap().len(), limit);
    }

    #[test]
    fn a_stream_cut_inside_a_packet_ends_the_file_on_the_packet_before() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let mut bytes = stream();
        bytes.truncate(bytes.len() - 10);
        let (written, _) =
            write_stream(Trickle(bytes, 64), file.reopen().unwrap(), u64::MAX, || {});
        assert_eq!(written.packets, 2);
        assert!(written.cut_inside_a_packet);
        assert_eq!(
            written.bytes,
            (FILE_HEADER + 2 * RECORD_HEADER + 100) as u64
        );
    }

    #[test]
    fn a_full_disk_stops_the_file_on_a_whole_packet() {
        // /dev/full refuses every write as a full disk does.
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            return;
        };
        let (written, error) = write_stream(Trickle(stream(), 1000), full, u64::MAX, || {});
        assert!(matches!(error, Some(StreamError::Write(_))));
        assert_eq!(written.bytes, 0);
    }

    #[test]
    fn other_bytes_are_refused() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let (_, error) = write_stream(
            Trickle(b"tcpdump: eth0: You don't have permission".to_vec(), 100),
            file.reopen().unwrap(),
            u64::MAX,
            || {},
        );
        assert!(matches!(error, Some(StreamError::NotPcap(_))));
    }
}
