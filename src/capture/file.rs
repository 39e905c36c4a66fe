//! Reading one capture file, pcap or pcapng, into timestamped link-layer frames. Owns
//! the container formats (sections, interfaces, time resolutions and offsets) and the
//! guard against a reader that stops making progress on a cut-off file; knows nothing
//! of what is inside a frame.

use super::stats::FileStats;
use crate::trace::Nanos;
use pcap_parser::pcapng::Block;
use pcap_parser::{create_reader, Linktype, PcapBlockOwned, PcapError};
use std::io::Read;
use std::path::Path;

/// Large enough for any packet a capture tool writes (256 KiB snaplen) several times
/// over; reads from the file happen in steps of this size.
const BUFFER: usize = 4 << 20;

/// A frame as captured: its link type, its time in the capturing host's clock, the
/// bytes kept, and its length on the wire.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// Link-layer header type of the interface it was captured on.
    pub linktype: Linktype,
    /// Capture time, nanoseconds since the epoch.
    pub time: Nanos,
    /// The captured bytes (possibly fewer than on the wire: snaplen).
    pub data: &'a [u8],
    /// Length on the wire.
    pub wire_len: u32,
    /// 1-based number of the packet in the file, for messages.
    pub number: u64,
    /// Byte offset of the packet's record in the file, for messages.
    pub offset: u64,
    /// The pcapng packet's comment (`opt_comment`), where it has one: ptcpdump writes the
    /// process and the pod that sent or received it there.
    pub comment: Option<&'a [u8]>,
    /// Whether the packet left the capturing host (`epb_flags`' direction), where the
    /// pcapng says.
    pub outbound: Option<bool>,
}

impl<'a> Frame<'a> {
    /// A frame of `data` alone, the first of no file, at time 0: bytes decoded without
    /// a capture around them (tests, fuzz targets).
    pub fn bare(linktype: Linktype, data: &'a [u8]) -> Self {
        Frame {
            linktype,
            time: 0,
            data,
            wire_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
            number: 1,
            offset: 0,
            comment: None,
            outbound: None,
        }
    }
}

/// The comment and the direction (true: outbound) an enhanced packet block's options
/// give.
fn packet_options<'a>(
    epb: &'a pcap_parser::pcapng::EnhancedPacketBlock<'_>,
) -> (Option<&'a [u8]>, Option<bool>) {
    use pcap_parser::pcapng::OptionCode;
    let comment = epb
        .options
        .iter()
        .find(|o| o.code == OptionCode::Comment)
        .and_then(|o| o.as_bytes().ok());
    // epb_flags is option 2 of a packet block, in the section's byte order, which the
    // block's type, read as little-endian, tells.
    let big_endian = epb.block_type != 6;
    let outbound = epb
        .options
        .iter()
        .find(|o| o.code == OptionCode(2))
        .and_then(|o| o.as_bytes().ok())
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .and_then(|b| {
            let flags = if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            };
            match flags & 3 {
                1 => Some(false),
                2 => Some(true),
                _ => None,
            }
        });
    (comment, outbound)
}

/// What the file's container said about one pcapng interface.
#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: Linktype,
    /// Units per second of its timestamps; `Err` with its `if_tsresol` where it names
    /// none a u64 can count (its packets are skipped, said).
    units_per_second: Result<u64, u8>,
    /// Seconds to add to every timestamp.
    offset_seconds: i64,
}

/// The input as the parser reads it, keeping the error a read met: the parser says
/// only that one happened, and a compressed capture cut short (an error of the
/// decompressor) is read up to the cut, as a plain one is, where a failing disk is not.
struct Remembering<R> {
    inner: R,
    error: std::sync::Arc<std::sync::Mutex<Option<std::io::Error>>>,
}

impl<R: Read> Read for Remembering<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf);
        if let Err(error) = &read {
            let kept = std::io::Error::new(error.kind(), error.to_string());
            *self.error.lock().unwrap_or_else(|e| e.into_inner()) = Some(kept);
        }
        read
    }
}

/// Whether a read's error is the end of the file's bytes (or of what decompresses), where
/// what came before is read; any other (a failing disk) is fatal.
fn ends_the_bytes(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::InvalidData
            | std::io::ErrorKind::InvalidInput
    )
}

/// The input after the bytes its format is told by: where reading those already met
/// the end of what decompresses, that error again at every read but the first. The
/// parser reads once more as it makes its reader, before any record, and takes a
/// failure there for no capture at all; at the next read, a refill, a cut is told as
/// one, with the packets before it read.
struct AfterStart<R> {
    input: R,
    error: Option<std::io::Error>,
    reads: u64,
}

impl<R: Read> Read for AfterStart<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads += 1;
        match &self.error {
            Some(_) if self.reads == 1 => Ok(0),
            Some(error) => Err(std::io::Error::new(error.kind(), error.to_string())),
            None => self.input.read(buf),
        }
    }
}

/// Why reading stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stopped {
    /// 1-based number of the packet the problem was found at.
    pub packet: u64,
    /// Byte offset in the file.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
}

/// The time of the first packet in `head`, the first bytes of a capture, if they hold
/// a whole one: what `--from` and `--to` count from, known before any capture is read.
pub fn first_packet_time(head: &[u8]) -> Option<Nanos> {
    let mut first = None;
    let mut stats = FileStats::default();
    // The head is cut somewhere: whatever reading says of the cut is of no interest.
    let _ = read_frames(Path::new("-"), head, &mut stats, |frame, _| {
        first.get_or_insert(frame.time);
    });
    first
}

/// Reads every frame of a capture and hands it to `frame`. Returns `Ok(None)` when the
/// file was read to its end, `Ok(Some(stopped))` when a damaged or cut-off record ended
/// the reading early (everything before it was used), and an error when the file is not
/// a capture at all.
pub fn read_frames<R: Read + Send>(
    path: &Path,
    input: R,
    stats: &mut FileStats,
    mut frame: impl FnMut(&Frame<'_>, &mut FileStats),
) -> Result<Option<Stopped>, super::CaptureError> {
    let not_a_capture = |reason: String| super::CaptureError::NotACapture {
        path: path.to_path_buf(),
        reason,
    };
    // The format is told from the first read alone; a pipe may bring only a few bytes in
    // one read, so gather the start of the file first.
    let mut input = input;
    let mut start = vec![0u8; 4096];
    let mut filled = 0;
    // A compressed file cut (or damaged) within these first bytes: what came before the
    // cut is read, as it is where the cut comes later.
    let mut cut_early = None;
    while filled < start.len() {
        match input.read(&mut start[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if ends_the_bytes(&e) => {
                cut_early = Some(e);
                break;
            }
            Err(source) => {
                return Err(super::CaptureError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
    }
    start.truncate(filled);
    let damaged_section = pcapng_section_damage(&start);
    // Kept from the start, so that a file cut before its header is whole says so.
    let copy = |e: &std::io::Error| std::io::Error::new(e.kind(), e.to_string());
    let read_error = std::sync::Arc::new(std::sync::Mutex::new(cut_early.as_ref().map(copy)));
    let input = Remembering {
        inner: std::io::Cursor::new(start).chain(AfterStart {
            input,
            error: cut_early,
            reads: 0,
        }),
        error: read_error.clone(),
    };
    // A read that failed: where the bytes ended early or did not decompress, the cut;
    // else the error, fatal.
    let failed_read = |number: u64, offset: u64| -> Result<Option<Stopped>, super::CaptureError> {
        let error = read_error.lock().unwrap_or_else(|e| e.into_inner()).take();
        let error = error.unwrap_or_else(|| std::io::Error::other("a read failed"));
        match ends_the_bytes(&error) {
            true => Ok(Some(Stopped {
                packet: number + 1,
                offset,
                reason: format!("the file's bytes end or stop decompressing here ({error})"),
            })),
            false => Err(super::CaptureError::Io {
                path: path.to_path_buf(),
                source: error,
            }),
        }
    };
    let mut reader = match create_reader(BUFFER, input) {
        Ok(reader) => reader,
        // Cut before its header was whole: said as a cut further on is.
        Err(_)
            if read_error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_some() =>
        {
            return failed_read(0, 0)
        }
        Err(PcapError::Eof) => return Err(not_a_capture("the file is empty".into())),
        Err(PcapError::Incomplete(_)) => {
            return Err(not_a_capture(
                "the file is shorter than a capture header".into(),
            ))
        }
        Err(PcapError::HeaderNotRecognized) => {
            return Err(not_a_capture(damaged_section.unwrap_or_else(|| {
                "no pcap or pcapng magic number at its start".into()
            })))
        }
        // Its magic number was read, and the rest of its header did not parse.
        Err(_) => {
            return Err(not_a_capture(damaged_section.unwrap_or_else(|| {
                "its header, after the magic number, is damaged".into()
            })))
        }
    };
    let mut interfaces: Vec<Interface> = Vec::new();
    // The section's byte order, for saying what is wrong with a damaged block.
    let mut big_endian = false;
    let mut legacy: Option<(Linktype, u64, usize)> = None;
    let mut number = 0u64;
    let mut empty_refills = 0;
    // The last packet block skipped for a captured length larger than itself, until
    // the next block shows it was not the last.
    let mut overflowed: Option<Stopped> = None;
    loop {
        let offset = reader.consumed() as u64;
        let error = match reader.next() {
            Ok((length, block)) => {
                if overflowed.take().is_some() {
                    stats.skip(OVERFLOWING_PACKET_BLOCKS);
                }
                match block {
                    PcapBlockOwned::LegacyHeader(header) => {
                        let units = if header.is_nanosecond_precision() {
                            1_000_000_000
                        } else {
                            1_000_000
                        };
                        let (linktype, fcs) = pcap_link_field(header.network);
                        legacy = Some((linktype, units, fcs));
                    }
                    PcapBlockOwned::Legacy(packet) => {
                        number += 1;
                        let (linktype, units, fcs) =
                            legacy.unwrap_or((Linktype::ETHERNET, 1_000_000, 0));
                        let time = i64::from(packet.ts_sec) * 1_000_000_000
                            + to_nanos(u64::from(packet.ts_usec), units);
                        frame(
                            &Frame {
                                linktype,
                                time,
                                data: without_fcs(packet.data, packet.origlen, fcs),
                                wire_len: packet.origlen,
                                number,
                                offset,
                                comment: None,
                                outbound: None,
                            },
                            stats,
                        );
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(section)) => {
                        big_endian = section.big_endian();
                        interfaces.clear();
                    }
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        interfaces.push(Interface {
                            linktype: idb.linktype,
                            units_per_second: units_per_second(idb.if_tsresol),
                            offset_seconds: idb.ts_offset(),
                        });
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        number += 1;
                        match interfaces.get(epb.if_id as usize) {
                            Some(Interface {
                                units_per_second: Err(resolution),
                                ..
                            }) => stats.skip(&format!(
                                "its interface's timestamp resolution (if_tsresol {resolution:#04x}) is finer than a 64-bit count can hold"
                            )),
                            Some(interface) => {
                                let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                                let (comment, outbound) = packet_options(&epb);
                                frame(
                                    &Frame {
                                        linktype: interface.linktype,
                                        time: ng_time(ticks, interface),
                                        // The block pads its data to 32 bits.
                                        data: &epb.data
                                            [..(epb.caplen as usize).min(epb.data.len())],
                                        wire_len: epb.origlen,
                                        number,
                                        offset,
                                        comment,
                                        outbound,
                                    },
                                    stats,
                                );
                            }
                            None => stats.skip(
                                "a packet block naming an interface not described before it (so of no known link type or time unit)",
                            ),
                        }
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(_)) => {
                        // A simple packet block has no timestamp; it cannot be placed.
                        number += 1;
                        stats.skip(
                            "a pcapng simple packet block, which has no timestamp to place it by",
                        );
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(length);
                continue;
            }
            // Owned, so that the reader can be asked what it holds.
            Err(error) => error.to_owned_vec(),
        };
        let ended = match error {
            PcapError::Eof if !reader.data().is_empty() => Ok(Some(cut_off(number, offset))),
            PcapError::Eof => Ok(None),
            PcapError::Incomplete(_) => {
                // The parser asks for more bytes for a pcapng packet block whose captured
                // length is larger than the block, as it does for a cut file; where the
                // block is whole (both its lengths agree), it is skipped and reading
                // goes on.
                let overflow = legacy
                    .is_none()
                    .then(|| overflowing(reader.data(), big_endian))
                    .flatten();
                if let Some((length, reason)) = overflow {
                    number += 1;
                    let earlier = overflowed.replace(Stopped {
                        packet: number,
                        offset,
                        reason,
                    });
                    if earlier.is_some() {
                        stats.skip(OVERFLOWING_PACKET_BLOCKS);
                    }
                    reader.consume(length);
                    continue;
                }
                // Progress guard: an incomplete record is retried only while refills
                // bring new bytes (a pipe may bring a few at a time); a refill that
                // brings none means the file ends inside the record.
                let buffered = reader.data().len();
                if reader.refill().is_err() {
                    failed_read(number, offset)
                } else if reader.data().len() != buffered {
                    continue;
                } else if buffered > 0 {
                    Ok(Some(cut_off(number, offset)))
                } else {
                    // Nothing buffered and nothing more to read: the end, between
                    // records (the reader says Eof next; never ask twice).
                    empty_refills += 1;
                    if empty_refills <= 1 {
                        continue;
                    }
                    Ok(None)
                }
            }
            PcapError::UnexpectedEof => Ok(Some(cut_off(number, offset))),
            PcapError::BufferTooSmall => Ok(Some(Stopped {
                packet: number + 1,
                offset,
                reason: format!(
                    "a record claims more than {} MiB: the file is damaged here",
                    BUFFER >> 20
                ),
            })),
            PcapError::ReadError => failed_read(number, offset),
            _ => Ok(Some(Stopped {
                packet: number + 1,
                offset,
                reason: damage(reader.data(), legacy.is_none(), big_endian),
            })),
        };
        // An overflowing block skipped last is where reading stopped, said with its
        // place; one followed by a damaged or cut record is one more set aside.
        return match (ended, overflowed) {
            (Ok(None), Some(last)) => Ok(Some(last)),
            (ended, Some(_)) => {
                stats.skip(OVERFLOWING_PACKET_BLOCKS);
                ended
            }
            (ended, None) => ended,
        };
    }
}

/// Why pcapng packet blocks whose captured length overflows their block, followed by
/// whole blocks, were skipped (the last block of a file is said with its place).
const OVERFLOWING_PACKET_BLOCKS: &str =
    "damaged pcapng packet blocks: a captured length larger than the block (skipped, the blocks after them read)";

/// The length of the whole enhanced packet block at the start of `data` whose captured
/// length is larger than the block, with what is wrong in words; `None` for any other
/// block, or one not all in `data` yet.
fn overflowing(data: &[u8], big_endian: bool) -> Option<(usize, String)> {
    let word = |at: usize| {
        let bytes: [u8; 4] = data.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match big_endian {
            true => u32::from_be_bytes(bytes),
            false => u32::from_le_bytes(bytes),
        })
    };
    let length = word(4)?;
    let whole = usize::try_from(length).ok()?;
    // An enhanced packet block (type 6) of at least its fixed 32 bytes, all here, its
    // length the same at both ends: its frame is sound, only the packet's is not.
    if word(0)? != 6 || whole < 32 || whole % 4 != 0 || word(whole - 4)? != length {
        return None;
    }
    let captured = word(20)?;
    // The packet's bytes are padded to 32 bits between the 28 bytes before them and
    // the 4 after.
    (u64::from(captured).next_multiple_of(4) > u64::from(length) - 32).then(|| {
        (
            whole,
            format!("a damaged pcapng block (type 0x6): its captured length, {captured}, is larger than the block of {length} bytes"),
        )
    })
}

fn cut_off(number: u64, offset: u64) -> Stopped {
    Stopped {
        packet: number + 1,
        offset,
        reason: "the file ends inside a record (cut off while it was being written?)".into(),
    }
}

/// What is wrong with the record at the start of `data` that did not parse, in words:
/// a pcapng block's lengths, or else which kind of record it is.
fn damage(data: &[u8], pcapng: bool, big_endian: bool) -> String {
    let word = |at: usize| {
        let bytes: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(match big_endian {
            true => u32::from_be_bytes(bytes),
            false => u32::from_le_bytes(bytes),
        })
    };
    if !pcapng {
        return "a damaged packet record: its header does not parse".into();
    }
    match (word(0), word(4)) {
        (Some(kind), Some(length)) if length < 12 => {
            format!("a damaged pcapng block (type {kind:#x}): its length is {length}, under the 12 bytes of a block's frame")
        }
        (Some(kind), Some(length)) if length % 4 != 0 => {
            format!("a damaged pcapng block (type {kind:#x}): its length, {length}, is not a multiple of 4")
        }
        (Some(kind), Some(length)) => match word(length as usize - 4) {
            Some(end) if end != length => format!(
                "a damaged pcapng block (type {kind:#x}): its length is {length} at its start and {end} at its end"
            ),
            _ => format!("a damaged pcapng block (type {kind:#x}, {length} bytes): its contents do not parse as its type says"),
        },
        _ => "a damaged pcapng block".into(),
    }
}

/// Where a file starts as pcapng does but its section header cannot be read: what is
/// wrong with it (a file that is not a capture has no such start).
fn pcapng_section_damage(start: &[u8]) -> Option<String> {
    if start.get(..4)? != [0x0a, 0x0d, 0x0d, 0x0a] {
        return None;
    }
    let magic: [u8; 4] = start.get(8..12)?.try_into().ok()?;
    let big_endian = match magic {
        [0x1a, 0x2b, 0x3c, 0x4d] => true,
        [0x4d, 0x3c, 0x2b, 0x1a] => false,
        _ => {
            return Some("a pcapng file whose section header's byte-order magic is damaged".into())
        }
    };
    let damage = damage(start, true, big_endian);
    let why = damage
        .split_once("): ")
        .map_or(damage.as_str(), |(_, why)| why);
    Some(format!(
        "a pcapng file whose first section header is damaged: {why}"
    ))
}

/// `ticks` in `units` per second, as nanoseconds; exact for the usual resolutions.
/// Times beyond the year 2262 (a damaged file) saturate instead of wrapping.
fn to_nanos(ticks: u64, units: u64) -> Nanos {
    let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(units.max(1));
    nanos.min(Nanos::MAX as u128) as Nanos
}

/// Timestamp units per second that an interface's `if_tsresol` names (RFC draft
/// pcapng §4.2: its high bit chooses a power of two, else of ten; absent, 6), or `Err`
/// with it where a u64 cannot count them. (pcap-parser 0.17 gives none for every power
/// of two.)
fn units_per_second(tsresol: u8) -> Result<u64, u8> {
    let exponent = u32::from(tsresol & 0x7f);
    match tsresol & 0x80 {
        0 => 10u64.checked_pow(exponent),
        _ => 1u64.checked_shl(exponent).filter(|_| exponent < 64),
    }
    .ok_or(tsresol)
}

fn ng_time(ticks: u64, interface: &Interface) -> Nanos {
    let units = interface.units_per_second.unwrap_or(1_000_000).max(1);
    let seconds = i128::from(ticks / units) + i128::from(interface.offset_seconds);
    let nanos = seconds * 1_000_000_000 + i128::from(to_nanos(ticks % units, units));
    nanos.clamp(i128::from(Nanos::MIN + 1), i128::from(Nanos::MAX)) as Nanos
}

/// A pcap header's link-type field: the link type in its low 16 bits, and, where its
/// F bit (26) says so, the length of the frame check sequence every frame ends with, in
/// its top four bits as 16-bit words (the pcap file format, §"LinkType and
/// additional information"). Taken whole, the field named a link type no one has
/// (805306369 for Ethernet with a 4-byte FCS).
fn pcap_link_field(field: Linktype) -> (Linktype, usize) {
    let bits = field.0 as u32;
    let fcs = if bits & (1 << 26) != 0 {
        ((bits >> 28) & 0xF) as usize * 2
    } else {
        0
    };
    (Linktype((bits & 0xFFFF) as i32), fcs)
}

/// A frame without its frame check sequence, where it was captured whole.
fn without_fcs(data: &[u8], wire_len: u32, fcs: usize) -> &[u8] {
    if fcs > 0 && data.len() as u64 == u64::from(wire_len) && data.len() >= fcs {
        &data[..data.len() - fcs]
    } else {
        data
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_parser::pcapng::*;
    use pcap_parser::ToVec;

    #[test]
    fn a_pcap_link_field_gives_its_link_type_and_the_frame_check_sequence_apart() {
        // Ethernet with a 4-byte FCS (F bit, two 16-bit words), as tcpdump's test
        // captures have it; the top bits alone (no F bit), and the sign bit set.
        assert_eq!(
            pcap_link_field(Linktype(0x2400_0001)),
            (Linktype::ETHERNET, 4)
        );
        assert_eq!(
            pcap_link_field(Linktype(0x3000_0001)),
            (Linktype::ETHERNET, 0)
        );
        assert_eq!(
            pcap_link_field(Linktype(0x8000_0001_u32 as i32)),
            (Linktype::ETHERNET, 0)
        );
        assert_eq!(without_fcs(&[1, 2, 3, 4, 5, 6], 6, 4), &[1, 2]);
        // Cut by the snaplen: the end is not the FCS.
        assert_eq!(without_fcs(&[1, 2, 3, 4, 5, 6], 60, 4), &[1, 2, 3, 4, 5, 6]);
    }

    fn section() -> Vec<u8> {
        crate::capture::write::section_header().unwrap()
    }

    fn interface(linktype: Linktype, tsresol: u8, tsoffset: i64) -> Vec<u8> {
        InterfaceDescriptionBlock {
            block_type: IDB_MAGIC,
            block_len1: 0,
            linktype,
            reserved: 0,
            snaplen: 65_535,
            options: vec![],
            block_len2: 0,
            if_tsresol: tsresol,
            if_tsoffset: tsoffset,
        }
        .to_vec()
        .unwrap()
    }

    fn packet(if_id: u32, ticks: u64, data: &[u8]) -> Vec<u8> {
        crate::capture::write::packet_block(if_id, ticks, data, data.len() as u32 + 100).unwrap()
    }

    #[test]
    fn pcapng_interfaces_resolutions_offsets_and_sections() {
        let mut file = section();
        file.extend(interface(Linktype::ETHERNET, 6, 0)); // microseconds
        file.extend(interface(Linktype::RAW, 9, 100)); // nanoseconds, 100 s later
        file.extend(packet(0, 1_700_000_000_123_456, b"a"));
        file.extend(packet(1, 1_700_000_000_123_456_789, b"bb"));
        file.extend(packet(5, 1, b"no such interface"));
        // A new section forgets the interfaces of the last one.
        file.extend(section());
        file.extend(interface(Linktype::LINUX_SLL2, 3, 0)); // milliseconds
        file.extend(packet(0, 1_700_000_000_001, b"ccc"));
        let mut stats = FileStats::default();
        let mut seen = Vec::new();
        let stopped = read_frames(Path::new("t.pcapng"), &file[..], &mut stats, |f, _| {
            seen.push((f.linktype, f.time, f.data.to_vec(), f.wire_len, f.number));
        })
        .unwrap();
        assert_eq!(stopped, None);
        assert_eq!(
            seen,
            vec![
                (
                    Linktype::ETHERNET,
                    1_700_000_000_123_456_000,
                    b"a".to_vec(),
                    101,
                    1
                ),
                (
                    Linktype::RAW,
                    1_700_000_100_123_456_789,
                    b"bb".to_vec(),
                    102,
                    2
                ),
                (
                    Linktype::LINUX_SLL2,
                    1_700_000_000_001_000_000,
                    b"ccc".to_vec(),
                    103,
                    4
                ),
            ]
        );
        assert_eq!(
            stats
                .skipped
                .get("a packet block naming an interface not described before it (so of no known link type or time unit)"),
            Some(&1)
        );
    }

    /// A whole enhanced packet block of 32 bytes whose captured length says 65,536.
    fn overflowing_block() -> Vec<u8> {
        let mut block = packet(0, 0, b"");
        assert_eq!(block.len(), 32);
        block[20..24].copy_from_slice(&65_536u32.to_le_bytes());
        block
    }

    #[test]
    fn a_packet_block_whose_captured_length_overflows_it_is_skipped_or_said() {
        let head = [section(), interface(Linktype::ETHERNET, 9, 0)].concat();
        // Between whole blocks: skipped and counted, the packets after it read and
        // numbered as the file numbers them.
        let file = [
            head.clone(),
            packet(0, 1, b"a"),
            overflowing_block(),
            overflowing_block(),
            packet(0, 2, b"b"),
        ]
        .concat();
        let mut stats = FileStats::default();
        let mut seen = Vec::new();
        let stopped = read_frames(Path::new("t.pcapng"), &file[..], &mut stats, |f, _| {
            seen.push((f.number, f.data.to_vec()))
        })
        .unwrap();
        assert_eq!(stopped, None);
        assert_eq!(seen, vec![(1, b"a".to_vec()), (4, b"b".to_vec())]);
        assert_eq!(stats.skipped[OVERFLOWING_PACKET_BLOCKS], 2);
        // Last in the file: where reading stopped, and why; not a cut.
        let file = [head.clone(), overflowing_block()].concat();
        let mut stats = FileStats::default();
        let stopped = read_frames(Path::new("t.pcapng"), &file[..], &mut stats, |_, _| {})
            .unwrap()
            .expect("said");
        assert_eq!((stopped.packet, stopped.offset), (1, head.len() as u64));
        assert_eq!(
            stopped.reason,
            "a damaged pcapng block (type 0x6): its captured length, 65536, is larger than the block of 32 bytes"
        );
        assert!(stats.skipped.is_empty());
        // Followed by a block cut short: that cut is where reading stopped.
        let next = packet(0, 3, b"c");
        let file = [head, overflowing_block(), next[..10].to_vec()].concat();
        let mut stats = FileStats::default();
        let stopped = read_frames(Path::new("t.pcapng"), &file[..], &mut stats, |_, _| {})
            .unwrap()
            .expect("said");
        assert_eq!(stopped.packet, 2);
        assert!(
            stopped.reason.contains("ends inside a record"),
            "{}",
            stopped.reason
        );
        assert_eq!(stats.skipped[OVERFLOWING_PACKET_BLOCKS], 1);
    }

    #[test]
    fn microsecond_pcap_and_a_cut_in_the_last_record() {
        let mut file = pcap_parser::PcapHeader::new().to_vec_raw().unwrap();
        for (i, data) in [b"first".as_slice(), b"second"].into_iter().enumerate() {
            let record = pcap_parser::LegacyPcapBlock {
                ts_sec: 1_700_000_000 + i as u32,
                ts_usec: 250_000,
                caplen: data.len() as u32,
                origlen: data.len() as u32,
                data,
            };
            file.extend(record.to_vec_raw().unwrap());
        }
        let cut = &file[..file.len() - 3];
        let mut times = Vec::new();
        let stopped = read_frames(
            Path::new("t.pcap"),
            cut,
            &mut FileStats::default(),
            |f, _| times.push(f.time),
        )
        .unwrap()
        .expect("the cut is reported");
        assert_eq!(times, vec![1_700_000_000_250_000_000]);
        assert_eq!((stopped.packet, stopped.offset), (2, 24 + 16 + 5));
    }

    /// Hands out its bytes, then fails as a decompressor does where its file is cut.
    struct CutCompressed<'a>(&'a [u8]);

    impl std::io::Read for CutCompressed<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                let cut = "the compressed file is cut at byte 100, after 57 bytes decompressed: incomplete deflate stream";
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, cut));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_compressed_capture_cut_within_its_first_bytes_is_read_up_to_the_cut() {
        let mut file = pcap_parser::PcapHeader::new().to_vec_raw().unwrap();
        for data in [b"first".as_slice(), b"second", b"third"] {
            let record = pcap_parser::LegacyPcapBlock {
                ts_sec: 1_700_000_000,
                ts_usec: 0,
                caplen: data.len() as u32,
                origlen: data.len() as u32,
                data,
            };
            file.extend(record.to_vec_raw().unwrap());
        }
        // Inside the third record, and inside the header: the words a cut further on
        // gets, with the decompressor's place.
        for (cut, packets, stopped_at) in [(file.len() - 2, 2, (3, 24 + 21 + 22)), (10, 0, (1, 0))]
        {
            let mut count = 0;
            let stopped = read_frames(
                Path::new("t.pcap.gz"),
                CutCompressed(&file[..cut]),
                &mut FileStats::default(),
                |_, _| count += 1,
            )
            .unwrap()
            .expect("the cut is said");
            assert_eq!(count, packets);
            assert_eq!((stopped.packet, stopped.offset), stopped_at);
            assert_eq!(
                stopped.reason,
                "the file's bytes end or stop decompressing here (the compressed file is cut at byte 100, after 57 bytes decompressed: incomplete deflate stream)"
            );
        }
    }

    /// Hands out at most seven bytes per read, as a slow pipe might.
    struct Trickle<'a>(&'a [u8]);

    impl std::io::Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min(7).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_reader_that_brings_a_few_bytes_at_a_time_is_read_to_the_end() {
        let mut file = pcap_parser::PcapHeader::new().to_vec_raw().unwrap();
        for i in 0..50u32 {
            let data = vec![i as u8; 100 + i as usize];
            let record = pcap_parser::LegacyPcapBlock {
                ts_sec: 1_700_000_000 + i,
                ts_usec: 0,
                caplen: data.len() as u32,
                origlen: data.len() as u32,
                data: &data,
            };
            file.extend(record.to_vec_raw().unwrap());
        }
        let mut count = 0;
        let stopped = read_frames(
            Path::new("pipe"),
            Trickle(&file),
            &mut FileStats::default(),
            |_, _| count += 1,
        )
        .unwrap();
        assert_eq!((count, stopped), (50, None));
        // Cut inside the last record: everything before it, and the cut named.
        let mut count = 0;
        let stopped = read_frames(
            Path::new("pipe"),
            Trickle(&file[..file.len() - 10]),
            &mut FileStats::default(),
            |_, _| count += 1,
        )
        .unwrap();
        assert_eq!(count, 49);
        assert_eq!(stopped.map(|s| s.packet), Some(50));
    }

    #[test]
    fn not_a_capture_is_an_error() {
        for bytes in [&b""[..], b"\x0a\x0d", b"plain text, not a capture at all"] {
            let result = read_frames(Path::new("x"), bytes, &mut FileStats::default(), |_, _| {});
            assert!(
                matches!(result, Err(super::super::CaptureError::NotACapture { .. })),
                "{bytes:?}"
            );
        }
    }

    #[test]
    fn every_time_resolution_a_u64_can_count_is_read() {
        assert_eq!(units_per_second(6), Ok(1_000_000));
        assert_eq!(units_per_second(9), Ok(1_000_000_000));
        assert_eq!(units_per_second(0x80 | 10), Ok(1024));
        assert_eq!(units_per_second(0x80 | 63), Ok(1 << 63));
        assert_eq!(units_per_second(0x80 | 64), Err(0xc0));
        assert_eq!(units_per_second(20), Err(20));
    }

    #[test]
    fn resolutions_convert_exactly() {
        assert_eq!(to_nanos(123_456, 1_000_000), 123_456_000);
        assert_eq!(to_nanos(7, 1_000_000_000), 7);
        // 2^-10 s units: 1 tick = 976,562.5 ns, truncated.
        assert_eq!(to_nanos(1, 1024), 976_562);
        let interface = Interface {
            linktype: Linktype::ETHERNET,
            units_per_second: Ok(1_000_000_000),
            offset_seconds: 10,
        };
        assert_eq!(ng_time(1_500_000_001, &interface), 11_500_000_001);
    }
}
