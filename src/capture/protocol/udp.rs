//! Datagrams of one UDP port pair to messages: DNS and ONC RPC by their ids; other
//! protocols by the generic rule (a reply is the server's next datagram within the
//! timeout; a request never answered is a free-form message); streams as free-form
//! messages.

use super::registry::OverUdp;
use super::{CallKey, Framed, Output, ProtocolName, Side};
use crate::trace::{Kind, Nanos};
use std::collections::VecDeque;

/// How long a generic UDP request waits for its reply.
pub const REPLY_TIMEOUT: Nanos = 1_000_000_000;

/// The state of one UDP port pair.
#[derive(Debug)]
pub struct UdpPair {
    protocol: ProtocolName,
    /// Requests not yet answered: key and time.
    open: VecDeque<(CallKey, Nanos)>,
    /// Ids of DNS or RPC requests not yet answered.
    open_ids: Vec<u32>,
}

/// FNV-1a: the two ends of a datagram see the same bytes, so its digest names it.
pub fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl UdpPair {
    /// A port pair read as `protocol`.
    pub fn new(protocol: ProtocolName) -> Self {
        UdpPair {
            protocol,
            open: VecDeque::new(),
            open_ids: Vec::new(),
        }
    }

    /// One datagram from `from`.
    pub fn datagram(&mut self, from: Side, time: Nanos, payload: &[u8], out: &mut Output) {
        let push = |out: &mut Output, from, kind, key| {
            out.messages.push(Framed::new(from, kind, key, time, time))
        };
        let (message, operation, status) = match self.protocol.spec().udp {
            OverUdp::ById {
                message,
                operation,
                status,
            } => (message, operation, status),
            OverUdp::Free => {
                push(out, from, Kind::Free, CallKey::Digest(digest(payload)));
                return;
            }
            OverUdp::Pairs | OverUdp::Generic => {
                self.expire(time, out);
                match from {
                    Side::Client => self
                        .open
                        .push_back((CallKey::Digest(digest(payload)), time)),
                    Side::Server => match self.open.pop_front() {
                        Some((key, sent)) => {
                            out.messages.push(Framed::new(
                                Side::Client,
                                Kind::Call,
                                key,
                                sent,
                                sent,
                            ));
                            push(out, from, Kind::Return, key);
                        }
                        None => push(out, from, Kind::Free, CallKey::Digest(digest(payload))),
                    },
                }
                return;
            }
        };
        let by_id = message(payload);
        match by_id {
            Some((id, true)) => {
                self.open_ids.push(id);
                push(out, from, Kind::Call, CallKey::Id(id));
                if let Some(name) = operation(payload) {
                    let operation = out.operation(&name);
                    out.messages.last_mut().expect("just pushed").operation = operation;
                }
            }
            Some((id, false)) => match self.open_ids.iter().position(|&open| open == id) {
                Some(index) => {
                    self.open_ids.swap_remove(index);
                    push(out, from, Kind::Return, CallKey::Id(id));
                    out.messages.last_mut().expect("just pushed").status = status(payload);
                }
                None => {
                    out.problems
                        .push("replies with no open request (free-form messages)");
                    push(out, from, Kind::Free, CallKey::Id(id));
                }
            },
            None => {
                out.problems
                    .push(crate::capture::stats::NOT_THE_PORTS_PROTOCOL);
            }
        }
    }

    /// Requests older than the timeout at `now` become free-form messages.
    pub fn expire(&mut self, now: Nanos, out: &mut Output) {
        while let Some(&(key, sent)) = self.open.front() {
            if now.saturating_sub(sent) <= REPLY_TIMEOUT {
                break;
            }
            self.open.pop_front();
            out.messages
                .push(Framed::new(Side::Client, Kind::Free, key, sent, sent));
        }
    }

    /// The capture ended: every open request is a free-form message.
    pub fn close(&mut self, out: &mut Output) {
        self.expire(Nanos::MAX, out);
    }
}

/// The generic UDP rule in the registry (on TCP, the generic rule by turns).
pub const SPEC: super::Spec = super::Spec {
    name: ProtocolName::Udp,
    label: "udp",
    ports: &[],
    client_first: |_| true,
    guess: None,
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| None,
    tcp: || Box::new(super::turns::Turns::default()),
    udp: super::registry::OverUdp::Pairs,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generic_udp_pairs_within_the_timeout_only() {
        let mut pair = UdpPair::new(ProtocolName::Udp);
        let mut out = Output::default();
        pair.datagram(Side::Client, 0, b"ask", &mut out);
        pair.datagram(Side::Server, 10, b"answer", &mut out);
        pair.datagram(Side::Client, 20, b"ask again", &mut out);
        pair.datagram(Side::Client, 20 + 2 * REPLY_TIMEOUT, b"late", &mut out);
        pair.close(&mut out);
        let kinds: Vec<(Side, Kind)> = out.messages.iter().map(|m| (m.from, m.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (Side::Client, Kind::Call),
                (Side::Server, Kind::Return),
                (Side::Client, Kind::Free),
                (Side::Client, Kind::Free),
            ]
        );
    }
}
