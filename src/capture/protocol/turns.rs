//! The two framers that need no knowledge of the protocol: turns (a request is what the
//! client sends after the server last spoke, its reply what the server sends next: most
//! RPC protocols that do not pipeline) and one-way streams (every segment is a
//! free-form message).

use super::{CallKey, Chunk, Framed, Framer, Output, Side};
use crate::trace::{Kind, Nanos};
use std::collections::VecDeque;

/// The generic request/response framer.
#[derive(Debug, Default)]
pub struct Turns {
    turn: Option<Turn>,
    open_requests: VecDeque<CallKey>,
}

#[derive(Debug, Clone, Copy)]
struct Turn {
    from: Side,
    key: CallKey,
    first: Nanos,
    last: Nanos,
}

impl Turns {
    fn end_turn(&mut self, out: &mut Output) {
        let Some(turn) = self.turn.take() else { return };
        let (kind, key) = match turn.from {
            Side::Client => {
                self.open_requests.push_back(turn.key);
                (Kind::Call, turn.key)
            }
            Side::Server => match self.open_requests.pop_front() {
                Some(key) => (Kind::Return, key),
                // The server spoke first (a banner, a push): no request to answer.
                None => (Kind::Free, turn.key),
            },
        };
        out.messages
            .push(Framed::new(turn.from, kind, key, turn.first, turn.last));
    }
}

impl Framer for Turns {
    fn data(&mut self, from: Side, chunk: Chunk<'_>, out: &mut Output) {
        match &mut self.turn {
            Some(turn) if turn.from == from => turn.last = chunk.time,
            _ => {
                self.end_turn(out);
                self.turn = Some(Turn {
                    from,
                    key: CallKey::Seq(chunk.seq),
                    first: chunk.time,
                    last: chunk.time,
                });
            }
        }
    }

    fn gap(&mut self, _from: Side, _bytes: usize, _out: &mut Output) {
        // Turns only need to know who spoke: lost bytes change nothing.
    }

    fn close(&mut self, out: &mut Output) {
        self.end_turn(out);
    }
}

/// The one-way stream framer: each segment with data is one free-form message.
#[derive(Debug, Default)]
pub struct Stream;

impl Framer for Stream {
    fn data(&mut self, from: Side, chunk: Chunk<'_>, out: &mut Output) {
        out.messages.push(Framed::new(
            from,
            Kind::Free,
            CallKey::Seq(chunk.seq),
            chunk.time,
            chunk.time,
        ));
    }

    fn gap(&mut self, _from: Side, _bytes: usize, _out: &mut Output) {}

    fn close(&mut self, _out: &mut Output) {}
}

/// Generic request/response by turns in the registry (on UDP, by port pair).
pub const TCP: super::Spec = super::Spec {
    name: super::ProtocolName::Tcp,
    label: "tcp",
    ports: &[],
    client_first: |_| true,
    guess: None,
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| None,
    tcp: || Box::new(Turns::default()),
    udp: super::registry::OverUdp::Generic,
};

/// One-way streams in the registry.
pub const STREAM: super::Spec = super::Spec {
    name: super::ProtocolName::Stream,
    label: "stream",
    ports: &[],
    client_first: |_| true,
    guess: None,
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| None,
    tcp: || Box::new(Stream),
    udp: super::registry::OverUdp::Free,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(time: Nanos, seq: u32) -> Chunk<'static> {
        Chunk {
            time,
            seq,
            bytes: b"x",
        }
    }

    #[test]
    fn a_request_is_what_the_client_sends_until_the_server_speaks() {
        let mut turns = Turns::default();
        let mut out = Output::default();
        turns.data(Side::Server, chunk(1, 500), &mut out); // banner
        turns.data(Side::Client, chunk(2, 100), &mut out);
        turns.data(Side::Client, chunk(3, 101), &mut out);
        turns.data(Side::Server, chunk(4, 501), &mut out);
        turns.data(Side::Client, chunk(5, 102), &mut out);
        turns.close(&mut out);
        let got: Vec<(Side, Kind, CallKey, Nanos, Nanos)> = out
            .messages
            .iter()
            .map(|m| (m.from, m.kind, m.key, m.first, m.last))
            .collect();
        assert_eq!(
            got,
            vec![
                (Side::Server, Kind::Free, CallKey::Seq(500), 1, 1),
                (Side::Client, Kind::Call, CallKey::Seq(100), 2, 3),
                (Side::Server, Kind::Return, CallKey::Seq(100), 4, 4),
                (Side::Client, Kind::Call, CallKey::Seq(102), 5, 5),
            ]
        );
    }
}
