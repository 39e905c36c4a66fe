//! DNS: a query and its response share the header's id; over TCP each message has a
//! two-byte length prefix, over UDP it is the datagram.

use super::{Meaning, Protocol, Side, Step};

/// What a DNS message's header says: its id and whether it is a response.
pub fn message(bytes: &[u8]) -> Option<(u16, bool)> {
    (bytes.len() >= 12).then(|| {
        (
            u16::from_be_bytes([bytes[0], bytes[1]]),
            bytes[2] & 0x80 != 0,
        )
    })
}

/// DNS over TCP.
#[derive(Debug, Default)]
pub struct DnsOverTcp;

impl Protocol for DnsOverTcp {
    fn next(&mut self, _from: Side, bytes: &[u8]) -> Step {
        if bytes.len() < 2 {
            return Step::NeedMore;
        }
        let len = 2 + usize::from(u16::from_be_bytes([bytes[0], bytes[1]]));
        if bytes.len() < len {
            return Step::NeedMore;
        }
        match message(&bytes[2..len]) {
            Some((id, response)) => Step::Message {
                len,
                meaning: if response {
                    Meaning::Reply(Some(u32::from(id)))
                } else {
                    Meaning::Request(Some(u32::from(id)))
                },
            },
            None => Step::Invalid,
        }
    }

    fn could_start(&self, _from: Side, bytes: &[u8]) -> bool {
        bytes.len() >= 14
    }
}
