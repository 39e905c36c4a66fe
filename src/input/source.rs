//! What a named input is and where its bytes come from: a file, or standard input for
//! `-`; gzip-compressed or not (read through transparently, as `tcpdump -r` and
//! Wireshark do); and its kind, told by its first bytes: a pcap or pcapng capture, or a
//! text trace. Everything else is refused with a reason a user can act on: an empty
//! file, a capture format not read here, another compression, binary data (shown as
//! hex, never as raw bytes on a terminal). A capture can also be one that another
//! process of a cluster reads ([`super::elsewhere`]). Owns the sniffing, not the
//! formats: those are [`crate::capture`]'s and [`crate::trace::text`]'s.

use crate::progress::Progress;
use flate2::read::MultiGzDecoder;
use std::fmt;
use std::fs::File;
use std::io::{self, Cursor, Read};
use std::path::{Path, PathBuf};

/// The name that means standard input (and standard output, for an output flag).
pub const STANDARD_STREAM: &str = "-";

/// Bytes looked at to tell an input's kind.
const SNIFF: usize = 4096;

/// How a gzip stream starts.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// Whether the file at `path` is gzip-compressed (false where it cannot be read).
pub fn is_gzip(path: &Path) -> bool {
    let mut magic = [0u8; 2];
    File::open(path)
        .and_then(|mut file| file.read_exact(&mut magic))
        .is_ok_and(|()| magic == GZIP_MAGIC)
}

/// Whether `path` names the standard stream.
pub fn is_standard(path: &Path) -> bool {
    path.as_os_str() == STANDARD_STREAM
}

/// How an input is named in messages: its path, or "standard input".
pub fn name(path: &Path) -> Named<'_> {
    Named(path)
}

/// See [`name`].
pub struct Named<'a>(&'a Path);

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_standard(self.0) {
            f.write_str("standard input")
        } else {
            write!(f, "{}", self.0.display())
        }
    }
}

/// What an input holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pcap or pcapng capture.
    Capture,
    /// A text trace.
    Text,
}

/// Why an input cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The file could not be opened or read.
    #[error("cannot read {}", name(path))]
    Io {
        /// The input.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Nothing in it.
    #[error("{} is empty: there is nothing to read", name(path))]
    Empty {
        /// The input.
        path: PathBuf,
    },
    /// A format this tool does not read, that another tool can convert.
    #[error("{} is {what}, which blackbox does not read: {advice}", name(path))]
    Unsupported {
        /// The input.
        path: PathBuf,
        /// What it is.
        what: &'static str,
        /// What to do.
        advice: &'static str,
    },
    /// Not a capture, not text.
    #[error(
        "{} is not a capture (pcap, pcapng, gzip'd or not) or a text trace: it starts with {head}",
        name(path)
    )]
    Binary {
        /// The input.
        path: PathBuf,
        /// Its first bytes in hex.
        head: String,
    },
    /// `-` named twice: standard input can be read once.
    #[error("standard input (-) can be named only once")]
    StandardInputTwice,
}

/// A named input, its kind told.
pub struct Source {
    /// The path as named (`-` for standard input).
    pub path: PathBuf,
    /// What it holds.
    pub kind: Kind,
    /// Whether it is gzip-compressed.
    pub gzip: bool,
    /// A capture's first packet's time, where its first bytes hold a whole packet.
    pub first_packet: Option<crate::trace::Nanos>,
    /// A stream that cannot be opened again (standard input), ready to read from its
    /// start: the bytes sniffed are put back.
    standard: Option<Box<dyn Read + Send>>,
    /// Where another process of a cluster reads it instead of this one.
    elsewhere: Option<super::elsewhere::Elsewhere>,
}

impl fmt::Debug for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Source")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .field("gzip", &self.gzip)
            .field("elsewhere", &self.elsewhere.as_ref().map(|e| e.process))
            .finish()
    }
}

impl Source {
    /// Tells the kind of every input in `paths`, refusing the first that is not one;
    /// `-` is standard input, at most once.
    pub fn sniff_all(paths: &[PathBuf]) -> Result<Vec<Source>, SourceError> {
        if paths.iter().filter(|p| is_standard(p)).count() > 1 {
            return Err(SourceError::StandardInputTwice);
        }
        paths.iter().map(|p| Source::sniff(p)).collect()
    }

    /// Tells what `path` holds from its first bytes.
    pub fn sniff(path: &Path) -> Result<Source, SourceError> {
        if is_standard(path) {
            return Source::from_stream(path, Box::new(io::stdin()));
        }
        let file = File::open(path).map_err(|source| SourceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut sniffed = Source::from_stream(path, Box::new(file))?;
        // A file is opened again to be read, through the progress bar.
        sniffed.standard = None;
        Ok(sniffed)
    }

    /// Tells what the stream `raw`, named `path`, holds from its first bytes, and keeps
    /// it to be read from its start (standard input; the fuzz targets' bytes).
    pub fn from_stream(path: &Path, raw: Box<dyn Read + Send>) -> Result<Source, SourceError> {
        let io_error = |source| SourceError::Io {
            path: path.to_path_buf(),
            source,
        };
        let (raw_head, raw) = head(raw).map_err(io_error)?;
        let gzip = raw_head.starts_with(&GZIP_MAGIC);
        let (first, stream) = if gzip {
            let decompressed = Box::new(Gunzip::new(Cursor::new(raw_head).chain(raw)));
            match head_of_gzip(decompressed) {
                (first, Ok(stream)) => (first, stream),
                // Cut (or damaged) within its first few kilobytes: what came out before
                // is enough to tell a capture by, and a capture is then read up to the
                // cut as one cut further on is; else the error says where it is cut.
                (first, Err(error)) => match kind_of(path, &first, gzip) {
                    Ok(_) if !first.is_empty() => {
                        let again: Box<dyn Read + Send> = Box::new(Failed(error));
                        (first, again)
                    }
                    _ => return Err(io_error(error)),
                },
            }
        } else {
            (raw_head, raw)
        };
        let kind = kind_of(path, &first, gzip)?;
        let first_packet = match kind {
            Kind::Capture => crate::capture::file::first_packet_time(&first),
            _ => None,
        };
        Ok(Source {
            path: path.to_path_buf(),
            kind,
            gzip,
            first_packet,
            standard: Some(Box::new(Cursor::new(first).chain(stream))),
            elsewhere: None,
        })
    }

    /// A capture that another process of a cluster holds and reads.
    pub fn elsewhere(path: &Path, elsewhere: super::elsewhere::Elsewhere) -> Source {
        Source {
            path: path.to_path_buf(),
            kind: Kind::Capture,
            gzip: false,
            first_packet: None,
            standard: None,
            elsewhere: Some(elsewhere),
        }
    }

    /// Where another process reads it, if one does: this process cannot open it.
    pub fn take_elsewhere(&mut self) -> Option<super::elsewhere::Elsewhere> {
        self.elsewhere.take()
    }

    /// Whether it is a file whose bytes can be read again (not standard input).
    pub fn is_file(&self) -> bool {
        self.standard.is_none()
    }

    /// Its size in bytes as stored, when it is a file.
    pub fn stored_size(&self) -> Option<u64> {
        if let Some(elsewhere) = &self.elsewhere {
            Some(elsewhere.size)
        } else if self.is_file() {
            std::fs::metadata(&self.path).ok().map(|m| m.len())
        } else {
            None
        }
    }

    /// Its bytes from the start, decompressed; `progress` counts the bytes as stored.
    pub fn open(mut self, progress: &Progress) -> Result<Box<dyn Read + Send>, SourceError> {
        if let Some(standard) = self.standard.take() {
            return Ok(standard);
        }
        // Never a file of the same name here: another process's capture is read there.
        if let Some(elsewhere) = &self.elsewhere {
            return Err(SourceError::Io {
                path: self.path.clone(),
                source: io::Error::other(format!(
                    "process {} of the cluster reads it, not this one",
                    elsewhere.process
                )),
            });
        }
        let file = File::open(&self.path).map_err(|source| SourceError::Io {
            path: self.path.clone(),
            source,
        })?;
        let counted = progress.wrap(file);
        Ok(if self.gzip {
            Box::new(Gunzip::new(counted))
        } else {
            Box::new(counted)
        })
    }
}

/// The first [`SNIFF`] bytes of `reader` (fewer if it is shorter), and the rest of it.
fn head(mut reader: Box<dyn Read + Send>) -> io::Result<(Vec<u8>, Box<dyn Read + Send>)> {
    let mut first = Vec::with_capacity(SNIFF);
    (&mut reader).take(SNIFF as u64).read_to_end(&mut first)?;
    Ok((first, reader))
}

/// The first [`SNIFF`] bytes of a gzip'd `reader`, decompressed, and the rest of it; or
/// as many as came out before decompressing failed, and the error.
fn head_of_gzip(mut reader: Box<dyn Read + Send>) -> (Vec<u8>, io::Result<Box<dyn Read + Send>>) {
    let mut first = Vec::with_capacity(SNIFF);
    // read_to_end keeps what it read before an error.
    match (&mut reader).take(SNIFF as u64).read_to_end(&mut first) {
        Ok(_) => (first, Ok(reader)),
        Err(error) => (first, Err(error)),
    }
}

/// A gzip'd input, decompressed, whose errors say where in the compressed file its
/// bytes ended or stopped decompressing, and how much came out before: the
/// decompressor's own ("incomplete deflate stream") say neither, and a capture cut
/// within its first block said nothing more.
struct Gunzip<R: Read> {
    decoder: MultiGzDecoder<Compressed<R>>,
    /// Bytes decompressed so far.
    out: u64,
}

/// The compressed bytes under a [`Gunzip`], counted.
struct Compressed<R> {
    inner: R,
    read: u64,
    /// Whether they ended (a read gave none).
    ended: bool,
}

impl<R: Read> Read for Compressed<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        self.ended |= n == 0 && !buf.is_empty();
        Ok(n)
    }
}

impl<R: Read> Gunzip<R> {
    fn new(inner: R) -> Self {
        Gunzip {
            decoder: MultiGzDecoder::new(Compressed {
                inner,
                read: 0,
                ended: false,
            }),
            out: 0,
        }
    }
}

impl<R: Read> Read for Gunzip<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.decoder.read(buf) {
            Ok(n) => {
                self.out += n as u64;
                Ok(n)
            }
            // The decompressor's errors (the file's own, a disk's, pass as they are).
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::UnexpectedEof
                        | io::ErrorKind::InvalidData
                        | io::ErrorKind::InvalidInput
                ) =>
            {
                let compressed = self.decoder.get_ref();
                let out = crate::words::counted(self.out, "byte");
                let at = match compressed.ended {
                    true => format!("the compressed file is cut at byte {}", compressed.read),
                    false => format!(
                        "the compressed file stops decompressing by its byte {}",
                        compressed.read
                    ),
                };
                Err(io::Error::new(
                    error.kind(),
                    format!("{at}, after {out} decompressed: {error}"),
                ))
            }
            Err(error) => Err(error),
        }
    }
}

/// A reader that fails as a read already did, every time: the rest of a gzip'd
/// standard input whose first kilobytes were cut.
struct Failed(io::Error);

impl Read for Failed {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io::Error::new(self.0.kind(), self.0.to_string()))
    }
}

/// What the first bytes of an input (decompressed) say it is.
fn kind_of(path: &Path, first: &[u8], gzip: bool) -> Result<Kind, SourceError> {
    if first.is_empty() {
        return Err(SourceError::Empty {
            path: path.to_path_buf(),
        });
    }
    let unsupported = |what, advice| SourceError::Unsupported {
        path: path.to_path_buf(),
        what,
        advice,
    };
    let magic = first
        .get(..4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    match magic {
        Some(0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 | 0x0a0d_0d0a) => {
            return Ok(Kind::Capture)
        }
        Some(0xa1b2_cd34 | 0x34cd_b2a1) => {
            return Err(unsupported(
                "a modified pcap (the format of Kuznetzov's patched libpcap)",
                "convert it with `editcap -F pcap FILE OUT.pcap` (Wireshark's editcap)",
            ))
        }
        _ => {}
    }
    let starts = |prefix: &[u8]| first.starts_with(prefix);
    if starts(b"snoop\0\0\0") {
        return Err(unsupported(
            "a Sun snoop capture",
            "convert it with `editcap -F pcap FILE OUT.pcap` (Wireshark's editcap)",
        ));
    }
    if starts(&GZIP_MAGIC) && gzip {
        return Err(unsupported(
            "gzip-compressed twice",
            "decompress it once with `gunzip` first",
        ));
    }
    let compressed: [(&[u8], &str, &str); 5] = [
        (
            &[0x28, 0xb5, 0x2f, 0xfd],
            "zstd-compressed",
            "decompress it first (`zstd -d FILE`)",
        ),
        (
            &[0xfd, b'7', b'z', b'X', b'Z', 0],
            "xz-compressed",
            "decompress it first (`xz -d FILE`)",
        ),
        (
            b"BZh",
            "bzip2-compressed",
            "decompress it first (`bunzip2 FILE`)",
        ),
        (
            &[0x04, 0x22, 0x4d, 0x18],
            "lz4-compressed",
            "decompress it first (`lz4 -d FILE`)",
        ),
        (
            b"PK\x03\x04",
            "a zip archive",
            "extract it first (`unzip FILE`)",
        ),
    ];
    if let Some(&(_, what, advice)) = compressed.iter().find(|(magic, _, _)| starts(magic)) {
        return Err(unsupported(what, advice));
    }
    if looks_like_text(first) {
        return Ok(Kind::Text);
    }
    Err(SourceError::Binary {
        path: path.to_path_buf(),
        head: hex(&first[..first.len().min(16)]),
    })
}

/// UTF-8 (a character cut off by the end of the sample aside) without NUL bytes or
/// control characters other than tab, line and page breaks.
fn looks_like_text(first: &[u8]) -> bool {
    let valid = match std::str::from_utf8(first) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    valid
        && !first
            .iter()
            .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c) || b == 0x7f)
}

/// Bytes as space-separated hex.
fn hex(bytes: &[u8]) -> String {
    let pairs: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
    pairs.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(first: &[u8]) -> Result<Kind, String> {
        kind_of(Path::new("x"), first, false).map_err(|e| e.to_string())
    }

    #[test]
    fn capture_magics_in_either_byte_order_are_captures() {
        for magic in [
            [0xd4, 0xc3, 0xb2, 0xa1],
            [0xa1, 0xb2, 0xc3, 0xd4],
            [0x4d, 0x3c, 0xb2, 0xa1],
            [0x0a, 0x0d, 0x0d, 0x0a],
        ] {
            assert_eq!(kind(&magic), Ok(Kind::Capture), "{magic:x?}");
        }
    }

    #[test]
    fn a_modified_pcap_is_named_with_the_command_that_converts_it() {
        let error = kind(&[0x34, 0xcd, 0xb2, 0xa1, 2, 0, 4, 0]).unwrap_err();
        assert!(
            error.contains("modified pcap") && error.contains("editcap -F pcap"),
            "{error}"
        );
    }

    #[test]
    fn binary_data_is_shown_as_hex_not_raw() {
        let error = kind(&[0x00, 0x9f, 0x41, 0x0a, 0xff]).unwrap_err();
        assert!(error.ends_with("starts with 00 9f 41 0a ff"), "{error}");
    }

    #[test]
    fn text_cut_inside_a_character_is_still_text() {
        let mut first = "1.0 CALL_SENT a b c1 é".as_bytes().to_vec();
        first.pop();
        assert_eq!(kind(&first), Ok(Kind::Text));
        assert!(kind(b"1.0 CALL\x01").is_err());
    }

    #[test]
    fn other_compressions_say_how_to_decompress() {
        let error = kind(&[0x28, 0xb5, 0x2f, 0xfd, 0, 0]).unwrap_err();
        assert!(error.contains("zstd -d"), "{error}");
    }
}
