//! ONC RPC (Sun RPC, RFC 5531): calls and replies matched by xid, in any order; over TCP
//! a message is a record of fragments (record marking), over UDP a datagram.

use super::{Meaning, Protocol, Side, Step};

/// Largest record accepted.
const MAX_RECORD: usize = 64 << 20;

/// What an RPC message's first eight bytes say: its xid and whether it is a call.
pub fn message(bytes: &[u8]) -> Option<(u32, bool)> {
    if bytes.len() < 8 {
        return None;
    }
    let xid = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    match u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) {
        0 => Some((xid, true)),
        1 => Some((xid, false)),
        _ => None,
    }
}

/// Whether bytes start like an RPC call record over TCP (record mark, call, version 2).
pub fn looks_like_call_record(bytes: &[u8]) -> bool {
    bytes.len() >= 16
        && u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) & 0x7fff_ffff >= 12
        && message(&bytes[4..]).is_some_and(|(_, call)| call)
        && u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]) == 2
}

/// ONC RPC over TCP.
#[derive(Debug, Default)]
pub struct OverTcp;

impl Protocol for OverTcp {
    fn next(&mut self, _from: Side, bytes: &[u8]) -> Step {
        // Walk the fragments to the last one; the message starts in the first.
        let mut at = 0usize;
        loop {
            if bytes.len() < at + 4 {
                return Step::NeedMore;
            }
            let mark = u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
            let len = (mark & 0x7fff_ffff) as usize;
            if at + 4 + len > MAX_RECORD {
                return Step::Invalid;
            }
            at += 4 + len;
            if bytes.len() < at {
                return Step::NeedMore;
            }
            if mark & 0x8000_0000 != 0 {
                break;
            }
        }
        match message(&bytes[4..at]) {
            Some((xid, true)) => Step::Message {
                len: at,
                meaning: Meaning::Request(Some(xid)),
            },
            Some((xid, false)) => Step::Message {
                len: at,
                meaning: Meaning::Reply(Some(xid)),
            },
            None => Step::Invalid,
        }
    }

    fn could_start(&self, _from: Side, bytes: &[u8]) -> bool {
        bytes.len() >= 12 && message(&bytes[4..]).is_some()
    }
}

/// ONC RPC in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::OncRpc,
    label: "onc-rpc",
    ports: &[111, 2049],
    client_first: looks_like_call_record,
    guess: Some(6),
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| None,
    tcp: || Box::new(super::delimited::Delimited::new(OverTcp)),
    udp: super::registry::OverUdp::ById {
        message,
        operation: |_| None,
        status: |_| super::Status::Unknown,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_make_one_record() {
        let mut record = (0x0000_0008u32).to_be_bytes().to_vec();
        record.extend_from_slice(&7u32.to_be_bytes());
        record.extend_from_slice(&0u32.to_be_bytes());
        record.extend_from_slice(&(0x8000_0004u32).to_be_bytes());
        record.extend_from_slice(&2u32.to_be_bytes());
        let mut rpc = OverTcp;
        assert_eq!(rpc.next(Side::Client, &record[..14]), Step::NeedMore);
        assert_eq!(
            rpc.next(Side::Client, &record),
            Step::Message {
                len: 20,
                meaning: Meaning::Request(Some(7))
            }
        );
    }
}
