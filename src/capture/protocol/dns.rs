//! DNS: a query and its response share the header's id; over TCP each message has a
//! two-byte length prefix, over UDP it is the datagram.

use super::{Label, Meaning, Protocol, Side, Status, Step};
use std::borrow::Cow;

/// What a DNS message's header says: its id and whether it is a response.
pub fn message(bytes: &[u8]) -> Option<(u16, bool)> {
    (bytes.len() >= 12).then(|| {
        (
            u16::from_be_bytes([bytes[0], bytes[1]]),
            bytes[2] & 0x80 != 0,
        )
    })
}

/// A query's operation name: the type its first question asks for (`A`, `AAAA`,
/// `SRV`, ...; `TYPE65` for one without a mnemonic here).
pub fn question_type(bytes: &[u8]) -> Option<Cow<'static, str>> {
    if u16::from_be_bytes([*bytes.get(4)?, *bytes.get(5)?]) == 0 {
        return None;
    }
    // The question's name: labels up to the root (a query's names are not compressed).
    let mut at = 12;
    loop {
        let len = usize::from(*bytes.get(at)?);
        if len == 0 {
            break;
        }
        if len & 0xc0 != 0 {
            return None;
        }
        at += 1 + len;
    }
    let kind = u16::from_be_bytes([*bytes.get(at + 1)?, *bytes.get(at + 2)?]);
    const NAMES: &[(u16, &str)] = &[
        (1, "A"),
        (2, "NS"),
        (5, "CNAME"),
        (6, "SOA"),
        (12, "PTR"),
        (15, "MX"),
        (16, "TXT"),
        (28, "AAAA"),
        (33, "SRV"),
        (35, "NAPTR"),
        (43, "DS"),
        (48, "DNSKEY"),
        (64, "SVCB"),
        (65, "HTTPS"),
        (252, "AXFR"),
        (255, "ANY"),
    ];
    Some(match NAMES.iter().find(|(code, _)| *code == kind) {
        Some((_, name)) => Cow::Borrowed(*name),
        None => Cow::Owned(format!("TYPE{kind}")),
    })
}

/// The name a response's one question asks for (lower case, no final dot) and the
/// IPv4 and IPv6 addresses its answer section gives for it (A and AAAA records, also
/// those that follow a CNAME to another name): how an address is named after what
/// the client asked for. `None` for a query, a failure, or a malformed message.
pub fn answered_addresses(bytes: &[u8]) -> Option<(String, Vec<std::net::IpAddr>)> {
    let (_, response) = message(bytes)?;
    let count = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
    if !response || bytes[3] & 0x0f != 0 || count(4) != 1 || count(6) == 0 {
        return None;
    }
    let mut name = String::new();
    let mut at = 12;
    loop {
        let len = usize::from(*bytes.get(at)?);
        if len == 0 {
            break;
        }
        // A question's name comes first in the message: no earlier name to point to.
        let label = bytes
            .get(at + 1..at + 1 + len)
            .filter(|_| len & 0xc0 == 0)?;
        if !label
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(b))
        {
            return None;
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        at += 1 + len;
    }
    if name.is_empty() {
        return None;
    }
    at += 1 + 4; // the root, the question's type and class
    let mut addresses = Vec::new();
    for _ in 0..count(6) {
        // The owner's name: labels ending at the root or at a pointer to an earlier
        // name (compression), which ends it.
        loop {
            let len = usize::from(*bytes.get(at)?);
            match len & 0xc0 {
                0 if len == 0 => {
                    at += 1;
                    break;
                }
                0 => at += 1 + len,
                0xc0 => {
                    at += 2;
                    break;
                }
                _ => return None,
            }
        }
        let field = |from: usize| -> Option<u16> {
            Some(u16::from_be_bytes([
                *bytes.get(from)?,
                *bytes.get(from + 1)?,
            ]))
        };
        let (kind, class, length) = (field(at)?, field(at + 2)?, usize::from(field(at + 8)?));
        let data = bytes.get(at + 10..at + 10 + length)?;
        match (kind, class, data.len()) {
            (1, 1, 4) => addresses.push(std::net::IpAddr::from(<[u8; 4]>::try_from(data).ok()?)),
            (28, 1, 16) => addresses.push(std::net::IpAddr::from(<[u8; 16]>::try_from(data).ok()?)),
            _ => {}
        }
        at += 10 + length;
    }
    (!addresses.is_empty()).then_some((name, addresses))
}

/// A response's status: its RCODE, 0 (NOERROR) a success.
pub fn response_status(bytes: &[u8]) -> Status {
    match bytes.get(3) {
        Some(flags) if flags & 0x0f == 0 => Status::Ok,
        Some(flags) => Status::Failed(u32::from(flags & 0x0f)),
        None => Status::Unknown,
    }
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

    fn label<'b>(&mut self, from: Side, _meaning: Meaning, head: &'b [u8]) -> Label<'b> {
        let message = head.get(2..).unwrap_or(&[]);
        match from {
            Side::Client => Label {
                propagated: None,
                operation: question_type(message),
                status: Status::Unknown,
                content: super::Content::NONE,
                further: Vec::new(),
            },
            Side::Server => Label {
                propagated: None,
                operation: None,
                status: response_status(message),
                content: super::Content::NONE,
                further: Vec::new(),
            },
        }
    }
}

/// DNS in the registry.
pub const SPEC: super::Spec = super::Spec {
    name: super::ProtocolName::Dns,
    label: "dns",
    ports: &[53, 5353],
    client_first: |first| first.len() >= 14,
    guess: None,
    unmistakable: None,
    server_first: None,
    broker: false,
    system: |_| Some("dns"),
    tcp: || Box::new(super::delimited::Delimited::new(DnsOverTcp)),
    udp: super::registry::OverUdp::ById {
        message: |payload| message(payload).map(|(id, reply)| (u32::from(id), !reply)),
        operation: question_type,
        status: response_status,
    },
};

#[cfg(test)]
mod tests {
    use super::*;

    /// A query for `name` of type `kind`, or (with `rcode`) its response.
    fn message(kind: u16, rcode: Option<u8>) -> Vec<u8> {
        let mut bytes = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        if let Some(rcode) = rcode {
            bytes[2] |= 0x80;
            bytes[3] = 0x80 | rcode;
        }
        for label in ["shop", "internal"] {
            bytes.push(label.len() as u8);
            bytes.extend_from_slice(label.as_bytes());
        }
        bytes.push(0);
        bytes.extend_from_slice(&kind.to_be_bytes());
        bytes.extend_from_slice(&1u16.to_be_bytes());
        bytes
    }

    #[test]
    fn queries_are_named_by_their_question_type_and_answers_fail_by_rcode() {
        assert_eq!(question_type(&message(28, None)).as_deref(), Some("AAAA"));
        assert_eq!(question_type(&message(33, None)).as_deref(), Some("SRV"));
        assert_eq!(question_type(&message(99, None)).as_deref(), Some("TYPE99"));
        assert_eq!(question_type(&message(1, None)[..14]), None);
        assert_eq!(response_status(&message(1, Some(0))), Status::Ok);
        assert_eq!(response_status(&message(1, Some(3))), Status::Failed(3));
    }

    #[test]
    fn a_response_names_the_addresses_it_answers_after_the_name_asked_for() {
        // shop.internal: CNAME to web.cdn.internal (compressed: a pointer to the
        // question's `internal`), then A and AAAA for it, and an MX that names nothing.
        let mut response = message(1, Some(0));
        response[7] = 4;
        let record = |bytes: &mut Vec<u8>, owner: &[u8], kind: u16, data: &[u8]| {
            bytes.extend_from_slice(owner);
            bytes.extend_from_slice(&kind.to_be_bytes());
            bytes.extend_from_slice(&[0, 1, 0, 0, 0, 60]);
            bytes.extend_from_slice(&(data.len() as u16).to_be_bytes());
            bytes.extend_from_slice(data);
        };
        let cname_target = [&[3u8][..], b"web", &[3], b"cdn", &[0xc0, 17]].concat();
        record(&mut response, &[0xc0, 12], 5, &cname_target);
        let target_at = 12 + 15 + 4 + 12;
        let pointer = [0xc0, target_at as u8];
        record(&mut response, &pointer, 1, &[10, 0, 0, 7]);
        let v6: [u8; 16] = "fd00::7".parse::<std::net::Ipv6Addr>().unwrap().octets();
        record(&mut response, &pointer, 28, &v6);
        record(&mut response, &[0xc0, 12], 15, &[0, 10, 0xc0, 12]);
        let (name, addresses) = answered_addresses(&response).unwrap();
        assert_eq!(name, "shop.internal");
        assert_eq!(
            addresses,
            [
                "10.0.0.7".parse::<std::net::IpAddr>().unwrap(),
                "fd00::7".parse().unwrap()
            ]
        );
        // No name for a query, a failure, or an answer cut short.
        assert_eq!(answered_addresses(&message(1, None)), None);
        let mut failed = response.clone();
        failed[3] |= 3;
        assert_eq!(answered_addresses(&failed), None);
        for cut in 0..response.len() - 1 {
            let partial = answered_addresses(&response[..cut]);
            assert!(partial.is_none() || partial.unwrap().1.len() == 1, "{cut}");
        }
    }
}
