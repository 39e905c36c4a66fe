//! Text trace files as a source of message ends ([`super::Ends`]): each file's lines
//! merged by time as they are read, a chunk keeping its lines' bytes back to back and
//! parsing a line only when a segment is built from it. Owns the merge, the line
//! numbers errors name and the count of blank and comment lines; not the line syntax
//! ([`crate::trace::text`]).

use super::{Ends, Store, TextInput};
use crate::trace::text::{self, TraceError};
use crate::trace::{time, InputStats, Nanos, TraceBuilder};

/// One line as read: where its bytes are in its chunk, its time, and where it came from.
#[derive(Debug, Clone, Copy)]
struct LineAt {
    start: usize,
    time: Nanos,
    file: u32,
    number: u64,
}

/// Lines read in a row, their bytes back to back.
#[derive(Default)]
pub(super) struct Lines {
    text: Vec<u8>,
    lines: Vec<LineAt>,
}

impl Lines {
    fn line(&self, k: usize) -> &[u8] {
        let end = self
            .lines
            .get(k + 1)
            .map_or(self.text.len(), |next| next.start);
        &self.text[self.lines[k].start..end]
    }
}

impl Store for Lines {
    fn len(&self) -> usize {
        self.lines.len()
    }

    fn time(&self, k: usize) -> Nanos {
        self.lines[k].time
    }

    fn append(&mut self, other: Lines) {
        let shift = self.text.len();
        self.text.extend_from_slice(&other.text);
        self.lines.extend(other.lines.iter().map(|line| LineAt {
            start: line.start + shift,
            ..*line
        }));
    }

    fn keep_from(&mut self, time: Nanos) {
        let kept: Vec<usize> = (0..self.lines.len())
            .filter(|&k| self.lines[k].time >= time)
            .collect();
        let mut text = Vec::new();
        let mut lines = Vec::with_capacity(kept.len());
        for k in kept {
            lines.push(LineAt {
                start: text.len(),
                ..self.lines[k]
            });
            text.extend_from_slice(self.line(k));
        }
        (self.text, self.lines) = (text, lines);
    }
}

/// One file's next line.
struct Reader {
    input: TextInput,
    number: u64,
    next: Option<(Nanos, Vec<u8>)>,
}

/// The lines of every input, merged by time as they are read.
pub(super) struct MergedLines {
    files: Vec<Reader>,
    /// The file whose next line is earliest ([`MergedLines::earliest`]), found once per
    /// line.
    next: Option<usize>,
    read: u64,
    blank: u64,
}

impl MergedLines {
    /// Opens the merge: reads each file's first event line.
    pub(super) fn new(inputs: Vec<TextInput>) -> Result<Self, TraceError> {
        let mut merged = MergedLines {
            files: inputs
                .into_iter()
                .map(|input| Reader {
                    input,
                    number: 0,
                    next: None,
                })
                .collect(),
            next: None,
            read: 0,
            blank: 0,
        };
        for file in 0..merged.files.len() {
            merged.advance(file)?;
        }
        merged.next = merged.earliest();
        Ok(merged)
    }

    /// Reads file `file`'s next event line (counting blank and comment lines).
    fn advance(&mut self, file: usize) -> Result<(), TraceError> {
        let reader = &mut self.files[file];
        let mut buf = match reader.next.take() {
            Some((_, mut buf)) => {
                buf.clear();
                buf
            }
            None => Vec::with_capacity(128),
        };
        loop {
            let n = reader
                .input
                .reader
                .read_until(b'\n', &mut buf)
                .map_err(|source| TraceError::Io {
                    path: reader.input.path.clone(),
                    source,
                })?;
            if n == 0 {
                return Ok(());
            }
            reader.number += 1;
            self.read += 1;
            let first = buf
                .split(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
                .find(|f| !f.is_empty());
            match first {
                None => {}
                Some(field) if field[0] == b'#' => {}
                Some(field) => {
                    let time =
                        time::parse_seconds(field).map_err(|reason| TraceError::BadLine {
                            path: reader.input.path.clone(),
                            line: reader.number,
                            text: text::shorten(&buf),
                            problem: text::LineProblem::BadTimestamp {
                                text: String::from_utf8_lossy(field).into_owned(),
                                reason,
                            },
                        })?;
                    reader.next = Some((time, buf));
                    return Ok(());
                }
            }
            self.blank += 1;
            buf.clear();
        }
    }

    /// The file whose next line is earliest (ties to the first named).
    fn earliest(&self) -> Option<usize> {
        (0..self.files.len())
            .filter(|&f| self.files[f].next.is_some())
            .min_by_key(|&f| (self.files[f].next.as_ref().map(|n| n.0), f))
    }
}

impl Ends for MergedLines {
    type Store = Lines;

    fn next_time(&self) -> Option<Nanos> {
        let file = self.next?;
        self.files[file].next.as_ref().map(|next| next.0)
    }

    fn take(&mut self, into: Option<&mut Lines>) -> Result<(), TraceError> {
        let Some(file) = self.next else {
            return Ok(());
        };
        if let Some(chunk) = into {
            let (time, bytes) = self.files[file].next.as_ref().expect("a next line");
            chunk.lines.push(LineAt {
                start: chunk.text.len(),
                time: *time,
                file: file as u32,
                number: self.files[file].number,
            });
            chunk.text.extend_from_slice(bytes);
            if !bytes.ends_with(b"\n") {
                chunk.text.push(b'\n');
            }
        }
        self.advance(file)?;
        self.next = self.earliest();
        Ok(())
    }

    fn build(&self, chunk: &Lines, k: usize, builder: &mut TraceBuilder) -> Result<(), TraceError> {
        let line = chunk.lines[k];
        text::parse_line(chunk.line(k), builder).map_err(|problem| TraceError::BadLine {
            path: self.files[line.file as usize].input.path.clone(),
            line: line.number,
            text: text::shorten(chunk.line(k)),
            problem,
        })?;
        Ok(())
    }

    fn count(&self, input: &mut InputStats) {
        input.files = self.files.len() as u64;
        input.lines = self.read;
        input.blank_or_comment_lines = self.blank;
    }
}
