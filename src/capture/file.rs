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
}

/// What the file's container said about one pcapng interface.
#[derive(Debug, Clone, Copy)]
struct Interface {
    linktype: Linktype,
    /// Units per second of its timestamps.
    units_per_second: u64,
    /// Seconds to add to every timestamp.
    offset_seconds: i64,
}

/// Why reading stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// 1-based number of the packet the problem was found at.
    pub packet: u64,
    /// Byte offset in the file.
    pub offset: u64,
    /// What was wrong.
    pub reason: String,
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
    let mut reader = match create_reader(BUFFER, input) {
        Ok(reader) => reader,
        Err(PcapError::Eof) => return Err(not_a_capture("the file is empty".into())),
        Err(PcapError::Incomplete(_)) => {
            return Err(not_a_capture(
                "the file is shorter than a capture header".into(),
            ))
        }
        Err(PcapError::HeaderNotRecognized) => {
            return Err(not_a_capture(
                "no pcap or pcapng magic number at its start".into(),
            ))
        }
        Err(e) => return Err(not_a_capture(format!("{e:?}"))),
    };
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut legacy: Option<(Linktype, u64)> = None;
    let mut number = 0u64;
    // Progress guard: an incomplete block is retried only after a refill that brought
    // new bytes; a second incomplete at the same place is a cut-off file.
    let mut stalled_at: Option<u64> = None;
    loop {
        let offset = reader.consumed() as u64;
        match reader.next() {
            Ok((length, block)) => {
                stalled_at = None;
                match block {
                    PcapBlockOwned::LegacyHeader(header) => {
                        let units = if header.is_nanosecond_precision() {
                            1_000_000_000
                        } else {
                            1_000_000
                        };
                        legacy = Some((header.network, units));
                    }
                    PcapBlockOwned::Legacy(packet) => {
                        number += 1;
                        let (linktype, units) = legacy.unwrap_or((Linktype::ETHERNET, 1_000_000));
                        let time = i64::from(packet.ts_sec) * 1_000_000_000
                            + to_nanos(u64::from(packet.ts_usec), units);
                        frame(
                            &Frame {
                                linktype,
                                time,
                                data: packet.data,
                                wire_len: packet.origlen,
                                number,
                                offset,
                            },
                            stats,
                        );
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => interfaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        interfaces.push(Interface {
                            linktype: idb.linktype,
                            units_per_second: idb.ts_resolution().unwrap_or(1_000_000),
                            offset_seconds: idb.ts_offset(),
                        });
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        number += 1;
                        match interfaces.get(epb.if_id as usize) {
                            Some(interface) => {
                                let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                                frame(
                                    &Frame {
                                        linktype: interface.linktype,
                                        time: ng_time(ticks, interface),
                                        data: epb.data,
                                        wire_len: epb.origlen,
                                        number,
                                        offset,
                                    },
                                    stats,
                                );
                            }
                            None => stats.skip("packet names an interface never described"),
                        }
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(_)) => {
                        // A simple packet block has no timestamp; it cannot be placed.
                        number += 1;
                        stats.skip("pcapng simple packet block (no timestamp)");
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(length);
            }
            Err(PcapError::Eof) => return Ok(None),
            Err(PcapError::Incomplete(_)) => {
                if stalled_at == Some(offset) {
                    return Ok(Some(cut_off(number, offset)));
                }
                stalled_at = Some(offset);
                if reader.refill().is_err() {
                    return Err(super::CaptureError::Io {
                        path: path.to_path_buf(),
                        source: std::io::Error::other("read failed"),
                    });
                }
            }
            Err(PcapError::UnexpectedEof) => return Ok(Some(cut_off(number, offset))),
            Err(PcapError::BufferTooSmall) => {
                return Ok(Some(Stopped {
                    packet: number + 1,
                    offset,
                    reason: format!(
                        "a record claims more than {} MiB: the file is damaged here",
                        BUFFER >> 20
                    ),
                }))
            }
            Err(PcapError::ReadError) => {
                return Err(super::CaptureError::Io {
                    path: path.to_path_buf(),
                    source: std::io::Error::other("read failed"),
                })
            }
            Err(e) => {
                return Ok(Some(Stopped {
                    packet: number + 1,
                    offset,
                    reason: format!("damaged record ({})", short_error(&e)),
                }))
            }
        }
    }
}

fn cut_off(number: u64, offset: u64) -> Stopped {
    Stopped {
        packet: number + 1,
        offset,
        reason: "the file ends inside a record (cut off while it was being written?)".into(),
    }
}

fn short_error(e: &PcapError<&[u8]>) -> String {
    match e {
        PcapError::NomError(_, kind) | PcapError::OwnedNomError(_, kind) => {
            format!("{kind:?}")
        }
        other => format!("{other:?}"),
    }
}

/// `ticks` in `units` per second, as nanoseconds; exact for the usual resolutions.
fn to_nanos(ticks: u64, units: u64) -> Nanos {
    if units == 1_000_000_000 {
        ticks as Nanos
    } else if units < 1_000_000_000 && 1_000_000_000 % units == 0 {
        (ticks * (1_000_000_000 / units)) as Nanos
    } else {
        (u128::from(ticks) * 1_000_000_000 / u128::from(units)) as Nanos
    }
}

fn ng_time(ticks: u64, interface: &Interface) -> Nanos {
    let units = interface.units_per_second.max(1);
    let seconds = (ticks / units) as i64 + interface.offset_seconds;
    seconds * 1_000_000_000 + to_nanos(ticks % units, units)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolutions_convert_exactly() {
        assert_eq!(to_nanos(123_456, 1_000_000), 123_456_000);
        assert_eq!(to_nanos(7, 1_000_000_000), 7);
        // 2^-10 s units: 1 tick = 976,562.5 ns, truncated.
        assert_eq!(to_nanos(1, 1024), 976_562);
        let interface = Interface {
            linktype: Linktype::ETHERNET,
            units_per_second: 1_000_000_000,
            offset_seconds: 10,
        };
        assert_eq!(ng_time(1_500_000_001, &interface), 11_500_000_001);
    }
}
