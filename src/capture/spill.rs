//! A capture's messages kept on disk between the two passes of nesting captures in
//! segments ([`crate::input::streamed`]): the first pass must read every capture before
//! the clocks can be aligned and lines merged by time, and reading and framing the
//! packets again made segments 14% slower than whole. So the first pass writes each
//! batch of messages, with the endpoints, operations and propagated ids new since the
//! last batch, to an anonymous temporary file, and the second replays the batches in
//! the order they were cut, with the same tables. Owns the file's format (postcard
//! blocks, each after its length); not the messages' meaning nor where they go.

use super::{CaptureError, CaptureMessage, HostCapture, MessageBatch};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::net::SocketAddr;
use std::path::Path;

/// One batch as written: only what is new in the tables.
#[derive(Serialize)]
struct Written<'a> {
    endpoints: &'a [SocketAddr],
    operations: &'a [String],
    propagated: &'a [String],
    messages: &'a [CaptureMessage],
}

/// One batch as read back.
#[derive(Deserialize)]
struct Replayed {
    endpoints: Vec<SocketAddr>,
    operations: Vec<String>,
    propagated: Vec<String>,
    messages: Vec<CaptureMessage>,
}

/// Writes one capture's batches as they are cut.
pub struct SpillWriter {
    file: BufWriter<File>,
    /// How much of each table is written already.
    endpoints: usize,
    operations: usize,
    propagated: usize,
    encoded: Vec<u8>,
    bytes: u64,
}

impl SpillWriter {
    /// A writer to a new anonymous file in the temporary directory (`TMPDIR`), gone
    /// once the last handle on it is dropped.
    pub fn new() -> io::Result<Self> {
        Ok(SpillWriter {
            file: BufWriter::with_capacity(1 << 20, tempfile::tempfile()?),
            endpoints: 0,
            operations: 0,
            propagated: 0,
            encoded: Vec::new(),
            bytes: 0,
        })
    }

    /// Appends `batch`.
    pub fn write(&mut self, batch: &MessageBatch<'_>) -> io::Result<()> {
        if batch.messages.is_empty() {
            return Ok(());
        }
        let written = Written {
            endpoints: &batch.endpoints[self.endpoints..],
            operations: &batch.operations[self.operations..],
            propagated: &batch.propagated[self.propagated..],
            messages: batch.messages,
        };
        self.encoded.clear();
        self.encoded = postcard::to_extend(&written, std::mem::take(&mut self.encoded))
            .map_err(io::Error::other)?;
        self.file
            .write_all(&(self.encoded.len() as u64).to_le_bytes())?;
        self.file.write_all(&self.encoded)?;
        self.bytes += 8 + self.encoded.len() as u64;
        (self.endpoints, self.operations, self.propagated) = (
            batch.endpoints.len(),
            batch.operations.len(),
            batch.propagated.len(),
        );
        Ok(())
    }

    /// Appends bytes that another writer wrote, as they are: another process's file,
    /// copied here block by block ([`Spilled::raw_bytes`]), in place of [`Self::write`].
    pub fn append_written(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes)?;
        self.bytes += bytes.len() as u64;
        Ok(())
    }

    /// The batches written, to be replayed.
    pub fn finish(self) -> io::Result<Spilled> {
        let mut file = self.file.into_inner().map_err(|e| e.into_error())?;
        file.rewind()?;
        Ok(Spilled {
            file,
            bytes: self.bytes,
        })
    }
}

/// One capture's batches on disk.
pub struct Spilled {
    file: File,
    bytes: u64,
}

impl Spilled {
    /// Bytes on disk.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Hands every batch to `sink`, in the order written, with the tables as they
    /// stood when it was cut; `read` is told the bytes of each block.
    pub fn replay(
        self,
        sink: &mut dyn FnMut(&MessageBatch<'_>),
        read: &dyn Fn(u64),
    ) -> io::Result<()> {
        let mut file = BufReader::with_capacity(1 << 20, self.file);
        let (mut endpoints, mut operations, mut propagated) = (Vec::new(), Vec::new(), Vec::new());
        let mut encoded = Vec::new();
        let mut left = self.bytes;
        while left > 0 {
            let mut length = [0u8; 8];
            file.read_exact(&mut length)?;
            let length = u64::from_le_bytes(length);
            if length + 8 > left {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "a spilled block runs past the end written",
                ));
            }
            encoded.resize(length as usize, 0);
            file.read_exact(&mut encoded)?;
            let batch: Replayed = postcard::from_bytes(&encoded)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            endpoints.extend(batch.endpoints);
            operations.extend(batch.operations);
            propagated.extend(batch.propagated);
            sink(&MessageBatch {
                messages: &batch.messages,
                endpoints: &endpoints,
                operations: &operations,
                propagated: &propagated,
            });
            read(length + 8);
            left -= length + 8;
        }
        Ok(())
    }

    /// Up to `most` bytes of the file as written, from `offset`: for sending it to
    /// another process of a cluster ([`crate::input::elsewhere`]), which keeps them with
    /// [`SpillWriter::append_written`].
    pub fn raw_bytes(&self, offset: u64, most: usize) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let wanted = most.min(self.bytes.saturating_sub(offset) as usize);
        let mut bytes = vec![0u8; wanted];
        self.file.read_exact_at(&mut bytes, offset)?;
        Ok(bytes)
    }
}

/// The error of a capture whose messages could not be kept or read back.
pub fn error(path: &Path, source: io::Error) -> CaptureError {
    CaptureError::Spill {
        path: path.to_path_buf(),
        directory: std::env::temp_dir(),
        source,
    }
}

impl HostCapture {
    /// The messages kept on disk, to be replayed, if they were
    /// ([`super::CaptureOptions::spill_messages`]); the capture keeps none then.
    pub fn take_spilled(&mut self) -> Option<Spilled> {
        self.spilled.take()
    }

    /// Gives it the messages another process kept on disk when it read it.
    pub fn set_spilled(&mut self, spilled: Spilled) {
        self.spilled = Some(spilled);
    }

    /// Takes its messages back from disk, as if it had kept them when read (the tables
    /// it kept already): the captures came to one segment, and are nested whole.
    pub fn restore(&mut self) -> Result<(), CaptureError> {
        let Some(spilled) = self.spilled.take() else {
            return Ok(());
        };
        let mut messages = Vec::with_capacity(self.message_count);
        spilled
            .replay(
                &mut |batch| messages.extend_from_slice(batch.messages),
                &|_| {},
            )
            .map_err(|e| error(&self.path, e))?;
        self.messages = messages;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::protocol::{CallKey, Framed, Operation, Propagated, ProtocolName, Side};
    use crate::trace::{Kind, Status};

    fn message(client: u32, server: u32, kind: Kind, at: i64) -> CaptureMessage {
        CaptureMessage {
            client,
            server,
            tcp: true,
            protocol: ProtocolName::Http,
            framed: Framed {
                from: if kind == Kind::Call {
                    Side::Client
                } else {
                    Side::Server
                },
                kind,
                key: CallKey::Seq(at as u32),
                first: at,
                last: at + 5,
                operation: Operation(0),
                status: Status::Failed(503),
                propagated: Propagated::NONE,
                content: crate::capture::protocol::Content(at as u32 + 1),
            },
            held_us: if kind == Kind::Return { 4 } else { 0 },
            held_why: (kind == Kind::Return).then_some(crate::trace::Held::Nagle),
        }
    }

    /// The second pass must see exactly the tables the first pass saw at each batch:
    /// the line writer formats endpoints by index as they grow.
    #[test]
    fn replayed_batches_see_the_tables_as_they_stood() {
        let first_end: SocketAddr = "10.0.0.1:40000".parse().unwrap();
        let second_end: SocketAddr = "10.0.0.2:80".parse().unwrap();
        let third_end: SocketAddr = "10.0.0.3:3306".parse().unwrap();
        let operations = vec!["GET /".to_string()];
        let first = [message(0, 1, Kind::Call, 100)];
        let second = [
            message(0, 1, Kind::Return, 200),
            message(1, 2, Kind::Call, 150),
        ];
        let mut writer = SpillWriter::new().unwrap();
        let tables = [first_end, second_end, third_end];
        let batches: [(&[CaptureMessage], usize); 3] = [(&first, 2), (&[], 2), (&second, 3)];
        for (messages, endpoints) in batches {
            writer
                .write(&MessageBatch {
                    messages,
                    endpoints: &tables[..endpoints],
                    operations: &operations,
                    propagated: &[],
                })
                .unwrap();
        }
        let spilled = writer.finish().unwrap();
        let total = spilled.bytes();
        let mut seen = Vec::new();
        let read = std::cell::Cell::new(0);
        spilled
            .replay(
                &mut |batch| {
                    seen.push((
                        batch.endpoints.to_vec(),
                        batch.operations.to_vec(),
                        batch.messages.iter().map(|m| m.framed).collect::<Vec<_>>(),
                    ))
                },
                &|bytes| read.set(read.get() + bytes),
            )
            .unwrap();
        assert_eq!(read.get(), total);
        assert_eq!(seen.len(), 2, "an empty batch is not written");
        assert_eq!(seen[0].0, tables[..2]);
        assert_eq!(seen[0].2, vec![first[0].framed]);
        assert_eq!(seen[1].0, tables);
        assert_eq!(seen[1].1, operations);
        assert_eq!(seen[1].2, second.map(|m| m.framed));
    }

    /// Captures that come to one segment are nested whole from their restored
    /// messages: these must be the messages a whole read keeps, in its order.
    #[test]
    fn a_restored_capture_holds_what_a_whole_read_keeps() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/shop/app.pcap");
        let options = crate::capture::CaptureOptions::default();
        let open = || std::fs::File::open(&path).unwrap();
        let whole = crate::capture::read_capture(&path, "app".into(), open(), &options).unwrap();
        let spilling = crate::capture::CaptureOptions {
            spill_messages: true,
            ..options.clone()
        };
        let mut restored =
            crate::capture::read_capture(&path, "app".into(), open(), &spilling).unwrap();
        assert!(restored.messages.is_empty(), "nothing kept in memory");
        restored.restore().unwrap();
        assert!(whole.messages.len() > 1000);
        assert_eq!(restored.messages.len(), whole.messages.len());
        for (a, b) in restored.messages.iter().zip(&whole.messages) {
            assert_eq!(
                (a.client, a.server, a.framed),
                (b.client, b.server, b.framed)
            );
        }
        assert_eq!(restored.endpoints, whole.endpoints);
        assert_eq!(restored.operations, whole.operations);
    }
}
