//! Writing captures: nanosecond pcap, or pcapng with one nanosecond interface per link
//! type, through pcap-parser's serializer; and rewriting a capture's times (aligned
//! captures, skewed captures). Owns the output containers; reading is [`super::file`].

use super::file::{self, Frame};
use super::stats::FileStats;
use super::CaptureError;
use crate::trace::Nanos;
use pcap_parser::{Linktype, PcapHeader, ToVec};
use std::io::{self, Write};
use std::path::Path;

/// The container to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// pcap with the nanosecond magic: one link type per file.
    Pcap,
    /// pcapng with nanosecond interfaces.
    PcapNg,
}

impl Container {
    /// The usual file extension.
    pub fn extension(self) -> &'static str {
        match self {
            Container::Pcap => "pcap",
            Container::PcapNg => "pcapng",
        }
    }

    /// The container a file is in, from its magic number.
    pub fn of(path: &Path) -> Container {
        if super::magic(path) == Some(super::PCAPNG_MAGIC) {
            Container::PcapNg
        } else {
            Container::Pcap
        }
    }
}

/// A pcapng section header block of unknown length, little-endian, no options.
pub(crate) fn section_header() -> io::Result<Vec<u8>> {
    use pcap_parser::pcapng::*;
    let mut section = SectionHeaderBlock {
        block_type: SHB_MAGIC,
        block_len1: 28,
        bom: BOM_MAGIC,
        major_version: 1,
        minor_version: 0,
        section_len: -1,
        options: vec![],
        block_len2: 28,
    };
    section.to_vec().map_err(encoding)
}

/// A pcapng enhanced packet block: `ticks` in the interface's units.
pub(crate) fn packet_block(
    if_id: u32,
    ticks: u64,
    data: &[u8],
    wire_len: u32,
) -> io::Result<Vec<u8>> {
    use pcap_parser::pcapng::*;
    let mut packet = EnhancedPacketBlock {
        block_type: EPB_MAGIC,
        block_len1: 0,
        if_id,
        ts_high: (ticks >> 32) as u32,
        ts_low: ticks as u32,
        caplen: data.len() as u32,
        origlen: wire_len,
        data,
        options: vec![],
        block_len2: 0,
    };
    packet.to_vec().map_err(encoding)
}

/// Writes frames one by one; the header goes out with the first frame, once its link
/// type is known.
pub struct CaptureWriter<W: Write> {
    out: W,
    container: Container,
    /// pcap: the file's one link type; pcapng: one interface per link type, in order.
    linktypes: Vec<Linktype>,
    started: bool,
}

/// Snapshot length written in headers: the largest any capture tool uses.
const SNAPLEN: u32 = 262_144;

fn encoding(e: impl std::fmt::Debug) -> io::Error {
    io::Error::other(format!("cannot encode a capture block: {e:?}"))
}

impl<W: Write> CaptureWriter<W> {
    /// A writer to `out`.
    pub fn new(out: W, container: Container) -> CaptureWriter<W> {
        CaptureWriter {
            out,
            container,
            linktypes: Vec::new(),
            started: false,
        }
    }

    fn start(&mut self, linktype: Linktype) -> io::Result<()> {
        self.started = true;
        match self.container {
            Container::Pcap => {
                self.linktypes.push(linktype);
                let header = PcapHeader {
                    // The nanosecond magic: the second field of each record is ns.
                    magic_number: 0xa1b2_3c4d,
                    snaplen: SNAPLEN,
                    network: linktype,
                    ..PcapHeader::new()
                };
                self.out.write_all(&header.to_vec_raw().map_err(encoding)?)
            }
            Container::PcapNg => self.out.write_all(&section_header()?),
        }
    }

    /// The pcapng interface of a link type, written on first use.
    fn interface(&mut self, linktype: Linktype) -> io::Result<u32> {
        if let Some(i) = self.linktypes.iter().position(|&l| l == linktype) {
            return Ok(i as u32);
        }
        use pcap_parser::pcapng::*;
        let mut interface = InterfaceDescriptionBlock {
            block_type: IDB_MAGIC,
            block_len1: 0,
            linktype,
            reserved: 0,
            snaplen: SNAPLEN,
            // The serializer writes the options from the two fields below.
            options: vec![],
            block_len2: 0,
            if_tsresol: 9,
            if_tsoffset: 0,
        };
        self.out.write_all(&interface.to_vec().map_err(encoding)?)?;
        self.linktypes.push(linktype);
        Ok(self.linktypes.len() as u32 - 1)
    }

    /// Writes one frame at `time` (ns since the epoch, not before it).
    pub fn write(
        &mut self,
        linktype: Linktype,
        time: Nanos,
        data: &[u8],
        wire_len: u32,
    ) -> io::Result<()> {
        if !self.started {
            self.start(linktype)?;
        }
        let ticks = u64::try_from(time).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("time {time} ns is before 1970"),
            )
        })?;
        match self.container {
            Container::Pcap => {
                if self.linktypes[0] != linktype {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "a pcap file holds one link type ({}), not also {}; write pcapng",
                            self.linktypes[0].0, linktype.0
                        ),
                    ));
                }
                let seconds = u32::try_from(ticks / 1_000_000_000).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidData, "time past 2106: write pcapng")
                })?;
                let record = pcap_parser::LegacyPcapBlock {
                    ts_sec: seconds,
                    ts_usec: (ticks % 1_000_000_000) as u32,
                    caplen: data.len() as u32,
                    origlen: wire_len,
                    data,
                };
                self.out.write_all(&record.to_vec_raw().map_err(encoding)?)
            }
            Container::PcapNg => {
                let if_id = self.interface(linktype)?;
                self.out
                    .write_all(&packet_block(if_id, ticks, data, wire_len)?)
            }
        }
    }

    /// Writes the header of an empty file if nothing was written, and hands back the
    /// output.
    pub fn finish(mut self) -> io::Result<W> {
        if !self.started {
            self.start(Linktype::ETHERNET)?;
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// What a rewrite did.
#[derive(Debug, Clone, Default)]
pub struct Rewritten {
    /// Frames written.
    pub frames: u64,
    /// Why reading stopped early, if it did (what came before is written).
    pub stopped: Option<file::Stopped>,
}

/// Copies the capture at `input` to `output` in `container`, each frame's time passed
/// through `time` (its number in the file, and its time); bytes and lengths stay.
pub fn rewrite_times(
    input: &Path,
    output: &Path,
    container: Container,
    mut time: impl FnMut(u64, Nanos) -> Nanos,
) -> Result<Rewritten, CaptureError> {
    let io_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| CaptureError::Io { path, source }
    };
    let reader = std::fs::File::open(input).map_err(io_error(input))?;
    let file = std::fs::File::create(output).map_err(io_error(output))?;
    let mut writer = CaptureWriter::new(io::BufWriter::new(file), container);
    let mut stats = FileStats::default();
    let mut failure: Option<io::Error> = None;
    let mut frames = 0;
    let stopped = file::read_frames(
        input,
        reader,
        &mut stats,
        |frame: &Frame<'_>, _: &mut FileStats| {
            if failure.is_some() {
                return;
            }
            let at = time(frame.number, frame.time);
            match writer.write(frame.linktype, at, frame.data, frame.wire_len) {
                Ok(()) => frames += 1,
                Err(e) => failure = Some(e),
            }
        },
    )?;
    if let Some(source) = failure {
        return Err(CaptureError::Io {
            path: output.to_path_buf(),
            source,
        });
    }
    writer.finish().map_err(io_error(output))?;
    Ok(Rewritten { frames, stopped })
}
