//! TLS: recognised by its record header (a handshake record, version 3.x) and read by
//! turns, which is right for the HTTP/1.1 and most database protocols inside. What is
//! multiplexed inside (HTTP/2, gRPC) cannot be told apart without the keys: each
//! connection is counted with that warning, so the summary says why its calls may
//! merge. Owns the recognition; the framing is [`Turns`]'.

use super::turns::Turns;
use super::{Chunk, Framer, Output, Side};

/// Whether bytes start with a TLS handshake record (a ClientHello, mid-connection any
/// record).
pub fn looks_like_record(bytes: &[u8]) -> bool {
    matches!(bytes, [0x14..=0x17, 0x03, 0x00..=0x04, ..])
}

/// A TLS connection, read by turns.
#[derive(Debug, Default)]
pub struct Tls {
    turns: Turns,
    counted: bool,
}

impl Framer for Tls {
    fn data(&mut self, from: Side, chunk: Chunk<'_>, out: &mut Output) {
        if !self.counted {
            self.counted = true;
            out.housekeeping.push(
                "TLS connections, read by turns: calls multiplexed inside (HTTP/2, gRPC) merge; capture before TLS to split them",
            );
        }
        self.turns.data(from, chunk, out);
    }

    fn gap(&mut self, from: Side, bytes: usize, out: &mut Output) {
        self.turns.gap(from, bytes, out);
    }

    fn close(&mut self, out: &mut Output) {
        self.turns.close(out);
    }
}

/// TLS in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Tls,
    label: "tls",
    ports: &[443, 465, 636, 853, 993, 995, 5671, 6443, 8443],
    client_first: looks_like_record,
    guess: Some(0),
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| None,
    tcp: || Box::new(Tls::default()),
    udp: super::registry::OverUdp::Generic,
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::Kind;

    #[test]
    fn a_tls_connection_is_counted_once_and_read_by_turns() {
        let hello = [0x16, 0x03, 0x01, 0x00, 0x05, 1, 0, 0, 1, 0];
        assert!(looks_like_record(&hello));
        assert!(!looks_like_record(b"GET / HTTP/1.1\r\n"));
        let mut tls = Tls::default();
        let mut out = Output::default();
        for (time, side) in [
            (1, Side::Client),
            (2, Side::Server),
            (3, Side::Client),
            (4, Side::Server),
        ] {
            tls.data(
                side,
                Chunk {
                    time,
                    seq: time as u32 * 100,
                    bytes: &hello,
                },
                &mut out,
            );
        }
        tls.close(&mut out);
        let kinds: Vec<Kind> = out.messages.iter().map(|m| m.kind).collect();
        assert_eq!(kinds, [Kind::Call, Kind::Return, Kind::Call, Kind::Return]);
        assert_eq!(out.housekeeping.len(), 1);
    }
}
