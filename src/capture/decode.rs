//! Decoding one captured frame down to its TCP or UDP segment: link layers (Ethernet,
//! Linux cooked SLL and SLL2, raw IP, BSD loopback), IPv4 and IPv6, and the tunnels
//! found there opened to the packet inside (their headers are [`super::tunnel`]'s).
//! Owns what a frame says; knows nothing of flows or of what the payload means.

use super::file::Frame;
use super::stats::FileStats;
use super::tunnel;
use etherparse::{EtherType, LaxNetSlice, LaxSlicedPacket, TransportSlice};
use pcap_parser::Linktype;
use std::net::{IpAddr, SocketAddr};

/// A link type's name as tcpdump's list (tcpdump.org/linktypes.html) gives it, for
/// errors about the ones this module does not decode.
pub fn link_type_name(linktype: i32) -> &'static str {
    match linktype {
        0 => "BSD loopback",
        1 => "Ethernet",
        6 => "IEEE 802.5 Token Ring",
        8 => "SLIP",
        9 => "PPP",
        10 => "FDDI",
        50 => "PPP in HDLC framing",
        51 => "PPPoE",
        101 => "raw IP",
        104 => "Cisco HDLC",
        105 => "IEEE 802.11 wireless",
        107 => "Frame Relay",
        108 => "OpenBSD loopback",
        113 => "Linux cooked",
        127 => "IEEE 802.11 with radiotap headers",
        138 => "IP over IEEE 1394",
        143 => "DOCSIS",
        147..=162 => "a private (user-defined) link type",
        163 => "IEEE 802.11 with AVS headers",
        166 => "PPP as pppd logs it",
        169 => "GPRS LLC",
        177 => "LAPD",
        187 => "Bluetooth HCI (H4)",
        189 | 220 => "Linux USB",
        192 => "PPI (802.11 per-packet information)",
        195 | 215 | 230 => "IEEE 802.15.4",
        197 => "Endace ERF",
        201 => "Bluetooth HCI (H4) with a direction",
        204 => "PPP with a direction",
        224 => "Fibre Channel",
        227 => "SocketCAN",
        228 => "raw IPv4",
        229 => "raw IPv6",
        231 => "D-Bus",
        239 => "Linux NFLOG",
        242 => "IP over InfiniBand",
        249 => "USBPcap",
        252 => "Wireshark's upper-layer PDUs",
        253 => "Linux netlink",
        258 => "Apple PKTAP",
        263 => "Bluetooth LE link layer",
        276 => "Linux cooked v2",
        _ => "no name known here",
    }
}

/// TCP header fields the flow tracker needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpFields {
    /// Sequence number of the first payload byte (or of the SYN).
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// SYN flag.
    pub syn: bool,
    /// ACK flag.
    pub ack_flag: bool,
    /// FIN flag.
    pub fin: bool,
    /// RST flag.
    pub rst: bool,
}

/// The transport of a decoded segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// TCP, with its header fields.
    Tcp(TcpFields),
    /// UDP.
    Udp,
}

/// A TCP or UDP segment: endpoints, header, and payload.
#[derive(Debug, Clone, Copy)]
pub struct Segment<'a> {
    /// Source address and port.
    pub from: SocketAddr,
    /// Destination address and port.
    pub to: SocketAddr,
    /// TCP or UDP, with TCP's fields.
    pub transport: Transport,
    /// The payload bytes that were captured.
    pub payload: &'a [u8],
    /// The payload's length on the wire; more than `payload.len()` when the capture's
    /// snaplen cut the packet short.
    pub wire_len: usize,
    /// The IPv4 time to live or IPv6 hop limit: a sender sets 64, 128 or 255, and each
    /// router on the way takes one off.
    pub ttl: u8,
}

/// Decodes a frame, counting in `stats` why it is skipped when it carries no TCP or
/// UDP segment.
pub fn decode<'a>(frame: &Frame<'a>, stats: &mut FileStats) -> Option<Segment<'a>> {
    let segment = match plain_tcp(frame) {
        Some(segment) => {
            stats.ipv4 += 1;
            stats.tcp += 1;
            segment
        }
        None => decode_at(frame, stats, 0)?,
    };
    if matches!(segment.transport, Transport::Tcp(_)) && segment.wire_len > 0 {
        stats.tcp_with_data += 1;
    }
    Some(segment)
}

/// Decodes `frame` both ways where the fast way answers, and panics if they disagree:
/// for the fuzz targets ([`crate::fuzzing::link_layers`]).
#[cfg(feature = "fuzzing")]
pub(crate) fn check_plain_tcp(frame: &Frame<'_>) {
    if let Some(fast) = plain_tcp(frame) {
        let general = decode_at(frame, &mut FileStats::default(), 0)
            .expect("a frame read fast is read the general way too");
        assert_eq!(
            (fast.from, fast.to, fast.payload, fast.wire_len, fast.ttl),
            (
                general.from,
                general.to,
                general.payload,
                general.wire_len,
                general.ttl
            )
        );
        let (Transport::Tcp(a), Transport::Tcp(b)) = (fast.transport, general.transport) else {
            panic!("both TCP");
        };
        assert_eq!(a, b);
    }
}

/// The segment of a frame that is what most frames are, Ethernet II, IPv4 unfragmented
/// and whole, TCP with its header whole, read straight from the bytes; `None` for any
/// other frame, which [`decode_at`] reads (as it reads these, field for field, only
/// slower: a general slicer was a tenth of reading a capture).
fn plain_tcp<'a>(frame: &Frame<'a>) -> Option<Segment<'a>> {
    const ETHERNET: usize = 14;
    if frame.linktype != Linktype::ETHERNET {
        return None;
    }
    let data = frame.data;
    let ip = data.get(ETHERNET..)?;
    if data[12..14] != [0x08, 0x00] || ip.len() < 20 || ip[0] >> 4 != 4 {
        return None;
    }
    let header = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let fragmented = ip[6] & 0x20 != 0 || u16::from_be_bytes([ip[6] & 0x1f, ip[7]]) != 0;
    // Cut short or declaring less than its header: left to the general reader, which
    // tells those apart.
    if header < 20 || total < header || total > ip.len() || fragmented || ip[9] != 6 {
        return None;
    }
    let tcp = &ip[header..total];
    if tcp.len() < 20 {
        return None;
    }
    let offset = usize::from(tcp[12] >> 4) * 4;
    if offset < 20 || offset > tcp.len() {
        return None;
    }
    let address = |at: usize| IpAddr::from([ip[at], ip[at + 1], ip[at + 2], ip[at + 3]]);
    let port = |at: usize| u16::from_be_bytes([tcp[at], tcp[at + 1]]);
    let number = |at: usize| u32::from_be_bytes([tcp[at], tcp[at + 1], tcp[at + 2], tcp[at + 3]]);
    let flags = tcp[13];
    let payload = &tcp[offset..];
    Some(Segment {
        from: SocketAddr::new(address(12), port(0)),
        to: SocketAddr::new(address(16), port(2)),
        transport: Transport::Tcp(TcpFields {
            seq: number(4),
            ack: number(8),
            syn: flags & 0x02 != 0,
            ack_flag: flags & 0x10 != 0,
            fin: flags & 0x01 != 0,
            rst: flags & 0x04 != 0,
        }),
        payload,
        wire_len: payload.len(),
        ttl: ip[8],
    })
}

/// [`decode`] of a frame inside `depth` tunnels (0: as captured).
fn decode_at<'a>(frame: &Frame<'a>, stats: &mut FileStats, depth: u8) -> Option<Segment<'a>> {
    let data = frame.data;
    let (ether_type, bytes) = match frame.linktype {
        Linktype::ETHERNET => (tunnel::ETHERNET, data),
        // etherparse tells IPv4 from IPv6 by the version, whichever is named.
        Linktype::RAW | Linktype::IPV4 | Linktype::IPV6 => (tunnel::IPV4, data),
        // Linux cooked: the Ethertype last of 16 bytes (v1) or first of 20 (v2).
        Linktype::LINUX_SLL => match (tunnel::word(data, 14), data.get(16..)) {
            (Some(protocol), Some(rest)) => (protocol, rest),
            _ => return cut_short(stats),
        },
        Linktype::LINUX_SLL2 => match (tunnel::word(data, 0), data.get(20..)) {
            (Some(protocol), Some(rest)) => (protocol, rest),
            _ => return cut_short(stats),
        },
        Linktype::NULL | Linktype::LOOP => match (data.get(..4), data.get(4..)) {
            (Some(&[a, b, c, d]), Some(rest)) => (loopback_type([a, b, c, d]), rest),
            _ => return cut_short(stats),
        },
        other => {
            stats.skip_linktype(other.0);
            return None;
        }
    };
    decode_ether(ether_type, bytes, stats, depth)
}

/// Counts a frame shorter than its link-layer header.
fn cut_short<'a>(stats: &mut FileStats) -> Option<Segment<'a>> {
    stats.skip("link-layer header cut short");
    None
}

/// What a BSD loopback header says its packet is, as an Ethertype: an address family
/// (NULL: in the capturing host's byte order, LOOP: in network order; the families are
/// small numbers, so either order is obvious), or else an Ethertype in one of its two
/// halves, as some systems write it (`0f 00 08 00`, which tshark reads as IPv4).
fn loopback_type(header: [u8; 4]) -> u16 {
    let le = u32::from_le_bytes(header);
    let be = u32::from_be_bytes(header);
    let family = match (le < 256, be < 256) {
        (true, _) => le,
        (false, true) => be,
        (false, false) => {
            let halves = [
                u16::from_be_bytes([header[2], header[3]]),
                u16::from_be_bytes([header[0], header[1]]),
            ];
            return halves
                .into_iter()
                .find(|&half| half == tunnel::IPV4 || half == tunnel::IPV6)
                .unwrap_or(0);
        }
    };
    match family {
        2 => tunnel::IPV4,
        10 | 24 | 28 | 30 => tunnel::IPV6,
        _ => 0,
    }
}

/// Reads through what a tunnel carries (`what` it is counted as): the packet is the one
/// inside, so the outer IP packet (`outer`) is no longer counted. Set aside, counted,
/// where tunnels already nest [`tunnel::MAX_TUNNELS`] deep.
fn through<'a>(
    (what, ether_type, carried): tunnel::Tunnel<'a>,
    outer: &LaxNetSlice<'_>,
    stats: &mut FileStats,
    depth: u8,
) -> Option<Segment<'a>> {
    if depth >= tunnel::MAX_TUNNELS {
        stats.skip(tunnel::TOO_DEEP);
        return None;
    }
    match outer {
        LaxNetSlice::Ipv4(_) => stats.ipv4 -= 1,
        _ => stats.ipv6 -= 1,
    }
    stats.housekeeping(what);
    decode_ether(ether_type, carried, stats, depth + 1)
}

/// The segment in `bytes` that `ether_type` names, through the layers between a link
/// and IP ([`tunnel::to_ip`]) and the tunnels IP and UDP carry.
fn decode_ether<'a>(
    ether_type: u16,
    bytes: &'a [u8],
    stats: &mut FileStats,
    depth: u8,
) -> Option<Segment<'a>> {
    let (ether_type, bytes) = match tunnel::to_ip(ether_type, bytes, stats) {
        Ok(ip) => ip,
        Err(why) => {
            stats.skip(&why);
            return None;
        }
    };
    let sliced = LaxSlicedPacket::from_ether_type(EtherType(ether_type), bytes);
    let Some(net) = &sliced.net else {
        stats.skip("IP header cut short or damaged");
        return None;
    };
    let (from_ip, to_ip, ip_payload, ttl) = match net {
        LaxNetSlice::Ipv4(ip) => {
            stats.ipv4 += 1;
            (
                IpAddr::V4(ip.header().source_addr()),
                IpAddr::V4(ip.header().destination_addr()),
                ip.payload(),
                ip.header().ttl(),
            )
        }
        LaxNetSlice::Ipv6(ip) => {
            stats.ipv6 += 1;
            (
                IpAddr::V6(ip.header().source_addr()),
                IpAddr::V6(ip.header().destination_addr()),
                ip.payload(),
                ip.header().hop_limit(),
            )
        }
        LaxNetSlice::Arp(_) => {
            stats.skip("not IP (ARP, LLDP, ...)");
            return None;
        }
    };
    if ip_payload.fragmented {
        stats.skip("IP fragment (not reassembled)");
        return None;
    }
    match tunnel::in_ip(ip_payload.ip_number.0, ip_payload.payload) {
        Some(Ok(tunnel)) => return through(tunnel, net, stats, depth),
        Some(Err(why)) => {
            stats.skip(&why);
            return None;
        }
        None => {}
    }
    let truncated = ip_payload.incomplete;
    // The payload length the IP header declares, so a snaplen-cut segment still moves
    // the stream on by its real length.
    let declared = if truncated {
        ip_payload_declared_len(net)
    } else {
        None
    };
    let segment = match &sliced.transport {
        Some(TransportSlice::Tcp(tcp)) => {
            stats.tcp += 1;
            let header = usize::from(tcp.data_offset()) * 4;
            let wire_len = match declared {
                Some(total) => total.saturating_sub(header).max(tcp.payload().len()),
                None => tcp.payload().len(),
            };
            Segment {
                from: SocketAddr::new(from_ip, tcp.source_port()),
                to: SocketAddr::new(to_ip, tcp.destination_port()),
                transport: Transport::Tcp(TcpFields {
                    seq: tcp.sequence_number(),
                    ack: tcp.acknowledgment_number(),
                    syn: tcp.syn(),
                    ack_flag: tcp.ack(),
                    fin: tcp.fin(),
                    rst: tcp.rst(),
                }),
                payload: tcp.payload(),
                wire_len,
                ttl,
            }
        }
        Some(TransportSlice::Udp(udp)) => {
            if let Some(tunnel) = tunnel::in_udp(udp.destination_port(), udp.payload()) {
                // A node's uplink carries pods' frames: the packet is the one inside.
                return through(tunnel, net, stats, depth);
            }
            stats.udp += 1;
            let wire_len = usize::from(udp.length()).saturating_sub(8);
            Segment {
                from: SocketAddr::new(from_ip, udp.source_port()),
                to: SocketAddr::new(to_ip, udp.destination_port()),
                transport: Transport::Udp,
                payload: &udp.payload()[..udp.payload().len().min(wire_len)],
                wire_len: wire_len.max(udp.payload().len().min(wire_len)),
                ttl,
            }
        }
        Some(_) => {
            stats.skip("ICMP");
            return None;
        }
        None => {
            if sliced.stop_err.is_some() {
                stats.skip("TCP/UDP header cut short");
            } else {
                stats.skip("IP protocol other than TCP and UDP");
            }
            return None;
        }
    };
    if segment.payload.len() < segment.wire_len {
        stats.snaplen_truncated += 1;
    }
    Some(segment)
}

/// The IP payload length declared by the header (IPv4 total length less its header;
/// IPv6 payload length less the extension headers).
fn ip_payload_declared_len(net: &LaxNetSlice<'_>) -> Option<usize> {
    match net {
        LaxNetSlice::Ipv4(ip) => {
            let header = ip.header();
            Some(usize::from(header.total_len()).saturating_sub(usize::from(header.ihl()) * 4))
        }
        LaxNetSlice::Ipv6(ip) => {
            let extensions = ip.extensions().slice().len();
            Some(usize::from(ip.header().payload_length()).saturating_sub(extensions))
        }
        LaxNetSlice::Arp(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn ip_packet(v6: bool) -> Vec<u8> {
        let builder = if v6 {
            PacketBuilder::ipv6([0xfd; 16], [0xfe; 16], 64)
        } else {
            PacketBuilder::ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        };
        let builder = builder.tcp(40_000, 80, 1234, 1000).ack(99);
        let mut bytes = Vec::new();
        builder
            .write(&mut bytes, b"GET / HTTP/1.1\r\n\r\n")
            .unwrap();
        bytes
    }

    fn decoded(linktype: Linktype, data: &[u8]) -> Option<(SocketAddr, SocketAddr, usize, u32)> {
        let frame = Frame::bare(linktype, data);
        let mut stats = FileStats::default();
        decode(&frame, &mut stats).map(|s| {
            let Transport::Tcp(tcp) = s.transport else {
                panic!("tcp expected")
            };
            (s.from, s.to, s.payload.len(), tcp.seq)
        })
    }

    /// What a segment says, to compare two readings of one frame.
    fn fields(segment: &Segment<'_>) -> impl PartialEq + std::fmt::Debug {
        let tcp = match segment.transport {
            Transport::Tcp(tcp) => Some(tcp),
            Transport::Udp => None,
        };
        (
            segment.from,
            segment.to,
            tcp,
            segment.payload.to_vec(),
            segment.wire_len,
            segment.ttl,
        )
    }

    proptest::proptest! {
        /// The fast reading of plain Ethernet, IPv4 and TCP frames gives what the
        /// general one gives, on frames made right and then bent anywhere.
        #[test]
        fn plain_tcp_frames_read_as_the_general_reader_reads_them(
            options in 0usize..3,
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            flags in 0u8..64,
            padding in 0usize..8,
            bent in proptest::option::of((0usize..120, proptest::num::u8::ANY)),
            cut in proptest::option::of(0usize..120),
        ) {
            let builder = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 61)
                .tcp(40_000, 80, 1234, 1000);
            let builder = match flags & 0x02 != 0 { true => builder.syn(), false => builder };
            let builder = match flags & 0x10 != 0 { true => builder.ack(99), false => builder };
            let builder = match flags & 0x01 != 0 { true => builder.fin(), false => builder };
            let builder = match flags & 0x04 != 0 { true => builder.rst(), false => builder };
            let builder = builder
                .options(&vec![etherparse::TcpOptionElement::Noop; options * 4])
                .unwrap();
            let mut bytes = Vec::new();
            builder.write(&mut bytes, &payload).unwrap();
            // Ethernet pads short frames; IPv4's total length tells where the packet ends.
            bytes.extend(std::iter::repeat_n(0, padding));
            if let Some((at, value)) = bent {
                if let Some(byte) = bytes.get_mut(at) {
                    *byte = value;
                }
            }
            if let Some(cut) = cut {
                bytes.truncate(cut);
            }
            let frame = Frame::bare(Linktype::ETHERNET, &bytes);
            if bent.is_none() && cut.is_none() {
                proptest::prop_assert!(plain_tcp(&frame).is_some(), "a plain frame is read fast");
            }
            if let Some(fast) = plain_tcp(&frame) {
                let general = decode_at(&frame, &mut FileStats::default(), 0);
                proptest::prop_assert_eq!(Some(fields(&fast)), general.as_ref().map(fields));
            }
        }
    }

    #[test]
    fn every_supported_link_layer_gives_the_same_segment() {
        for v6 in [false, true] {
            let ip = ip_packet(v6);
            let ether_type: u16 = if v6 { 0x86dd } else { 0x0800 };
            let expected = decoded(Linktype::RAW, &ip).expect("raw IP decodes");
            assert_eq!(expected.2, 18);
            assert_eq!(expected.3, 1234);
            // Ethernet, with and without an 802.1Q tag.
            let mut ethernet = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
            ethernet.extend_from_slice(&ether_type.to_be_bytes());
            ethernet.extend_from_slice(&ip);
            let mut vlan = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x07];
            vlan.extend_from_slice(&ether_type.to_be_bytes());
            vlan.extend_from_slice(&ip);
            // Linux cooked v1 (16 bytes, protocol last) and v2 (20 bytes, protocol first).
            let mut sll = vec![0u8; 14];
            sll.extend_from_slice(&ether_type.to_be_bytes());
            sll.extend_from_slice(&ip);
            let mut sll2 = ether_type.to_be_bytes().to_vec();
            sll2.extend_from_slice(&[0u8; 18]);
            sll2.extend_from_slice(&ip);
            // BSD loopback: the family in host order (NULL) or network order (LOOP).
            let family: u32 = if v6 { 30 } else { 2 };
            let mut null = family.to_le_bytes().to_vec();
            null.extend_from_slice(&ip);
            let mut looped = family.to_be_bytes().to_vec();
            looped.extend_from_slice(&ip);
            for (linktype, data) in [
                (Linktype::ETHERNET, ethernet),
                (Linktype::ETHERNET, vlan),
                (Linktype::LINUX_SLL, sll),
                (Linktype::LINUX_SLL2, sll2),
                (Linktype::NULL, null),
                (Linktype::LOOP, looped),
                (if v6 { Linktype::IPV6 } else { Linktype::IPV4 }, ip.clone()),
            ] {
                assert_eq!(
                    decoded(linktype, &data),
                    Some(expected),
                    "{linktype:?} v6={v6}"
                );
            }
        }
    }

    #[test]
    fn a_loopback_header_holding_an_ethertype_is_read_as_tshark_reads_it() {
        // PcapPlusPlus's NullLoopback.pcap, packet 3: `0f 00 08 00`, neither byte order
        // a family; tshark reads its low half as the Ethertype IPv4.
        for (header, v6) in [
            ([0x0f, 0x00, 0x08, 0x00], false),
            ([0x00, 0x00, 0x08, 0x00], false),
            ([0x86, 0xdd, 0x0f, 0x00], true),
        ] {
            let mut frame = header.to_vec();
            frame.extend(ip_packet(v6));
            let expected = decoded(Linktype::RAW, &ip_packet(v6));
            assert!(expected.is_some());
            for linktype in [Linktype::NULL, Linktype::LOOP] {
                assert_eq!(decoded(linktype, &frame), expected, "{header:02x?}");
            }
        }
        // A family, in either order, is still a family; anything else is not IP.
        assert_eq!(loopback_type([2, 0, 0, 0]), 0x0800);
        assert_eq!(loopback_type([0, 0, 0, 30]), 0x86dd);
        assert_eq!(loopback_type([0x12, 0x34, 0x56, 0x78]), 0);
    }

    #[test]
    fn what_is_not_tcp_or_udp_is_counted_with_its_reason() {
        let mut stats = FileStats::default();
        let arp = [0u8; 42];
        let mut ethernet_arp = arp.to_vec();
        ethernet_arp[12] = 0x08;
        ethernet_arp[13] = 0x06;
        let frames = [
            (Linktype(147), vec![1u8, 2, 3]),
            (Linktype::ETHERNET, vec![1u8, 2]),
            (Linktype::ETHERNET, ethernet_arp),
        ];
        for (linktype, data) in &frames {
            let frame = Frame::bare(*linktype, data);
            assert!(decode(&frame, &mut stats).is_none());
        }
        let reasons: Vec<&str> = stats.skipped.keys().map(String::as_str).collect();
        assert_eq!(reasons.len(), 3, "{reasons:?}");
        assert!(stats.skipped.contains_key("unsupported link type 147"));
        assert_eq!(stats.skipped.values().sum::<u64>(), 3);
    }

    /// An Ethernet frame of `ether_type` around `inner`.
    fn ethernet(ether_type: u16, inner: &[u8]) -> Vec<u8> {
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        frame.extend(ether_type.to_be_bytes());
        frame.extend(inner);
        frame
    }

    /// An IPv4 header (no options, checksum left 0) of `protocol` around `inner`.
    fn ipv4(protocol: u8, inner: &[u8]) -> Vec<u8> {
        let total = (20 + inner.len()) as u16;
        let mut packet = vec![0x45, 0];
        packet.extend(total.to_be_bytes());
        packet.extend([
            0, 1, 0, 0, 64, protocol, 0, 0, 192, 168, 0, 1, 192, 168, 0, 2,
        ]);
        packet.extend(inner);
        packet
    }

    #[test]
    fn ip_inside_pppoe_mpls_gre_and_ip_is_read_through_and_counted() {
        let ip = ip_packet(false);
        let ip6 = ip_packet(true);
        let pppoe = |protocol: u16, inner: &[u8]| {
            let mut session = vec![0x11, 0, 0x12, 0x34];
            session.extend((inner.len() as u16 + 2).to_be_bytes());
            session.extend(protocol.to_be_bytes());
            session.extend(inner);
            session
        };
        // Two labels, the second the bottom of the stack.
        let mpls = |inner: &[u8]| [&[0, 0x10, 0x00, 64, 0, 0x20, 0x01, 64][..], inner].concat();
        // GRE version 0 with a checksum, a key and a sequence number.
        let gre = |ether_type: u16, inner: &[u8]| {
            let mut header = vec![0xb0, 0];
            header.extend(ether_type.to_be_bytes());
            header.extend([0; 12]);
            header.extend(inner);
            header
        };
        let bridged = ethernet(0x0800, &ip);
        let cases: Vec<(Vec<u8>, &[&str], bool)> = vec![
            (
                ethernet(0x8864, &pppoe(0x0021, &ip)),
                &["packets read inside PPPoE sessions"],
                false,
            ),
            (
                ethernet(0x8864, &pppoe(0x0057, &ip6)),
                &["packets read inside PPPoE sessions"],
                true,
            ),
            (
                ethernet(0x8847, &mpls(&ip)),
                &["packets read under MPLS labels"],
                false,
            ),
            (
                ethernet(0x8848, &mpls(&ip6)),
                &["packets read under MPLS labels"],
                true,
            ),
            (
                ethernet(0x0800, &ipv4(47, &gre(0x0800, &ip))),
                &["packets read inside GRE"],
                false,
            ),
            (
                ethernet(0x0800, &ipv4(47, &gre(0x86dd, &ip6))),
                &["packets read inside GRE"],
                true,
            ),
            (
                ethernet(0x0800, &ipv4(47, &gre(0x6558, &bridged))),
                &["packets read inside GRE"],
                false,
            ),
            (
                ethernet(0x0800, &ipv4(4, &ip)),
                &["packets read inside IP-in-IP (protocol 4)"],
                false,
            ),
            (
                ethernet(0x0800, &ipv4(41, &ip6)),
                &["packets read inside 6in4 (IPv6 in IP, protocol 41)"],
                true,
            ),
            // A tunnel in a tunnel: IP in GRE in IP in GRE (as tcpdump's test capture has it).
            (
                ethernet(
                    0x0800,
                    &ipv4(47, &gre(0x0800, &ipv4(47, &gre(0x0800, &ip)))),
                ),
                &["packets read inside GRE"],
                false,
            ),
        ];
        for (frame, read_inside, v6) in cases {
            let mut stats = FileStats::default();
            let segment = decode(&Frame::bare(Linktype::ETHERNET, &frame), &mut stats)
                .unwrap_or_else(|| panic!("{read_inside:?}: {:?}", stats.skipped));
            assert_eq!(segment.payload, b"GET / HTTP/1.1\r\n\r\n");
            assert_eq!(segment.to.port(), 80);
            // One packet: the one inside; each encapsulation read through counted.
            let expected = if v6 { (0, 1, 1) } else { (1, 0, 1) };
            assert_eq!(
                (stats.ipv4, stats.ipv6, stats.tcp),
                expected,
                "{read_inside:?}"
            );
            for what in read_inside {
                assert!(
                    stats.housekeeping.contains_key(*what),
                    "{:?}",
                    stats.housekeeping
                );
            }
            assert!(stats.skipped.is_empty(), "{:?}", stats.skipped);
        }
    }

    #[test]
    fn tunnels_nested_without_end_stop_at_the_bound_counted() {
        // IP in IP in IP ... as deep as a packet holds; and a cut at every byte.
        let mut packet = ip_packet(false);
        for _ in 0..200 {
            packet = ipv4(4, &packet);
        }
        let mut stats = FileStats::default();
        assert!(decode(&Frame::bare(Linktype::RAW, &packet), &mut stats).is_none());
        assert_eq!(stats.skipped[tunnel::TOO_DEEP], 1);
        assert_eq!(
            stats.housekeeping["packets read inside IP-in-IP (protocol 4)"],
            8
        );
        // Within the bound it is read.
        let mut packet = ip_packet(false);
        for _ in 0..8 {
            packet = ipv4(4, &packet);
        }
        assert!(decode(
            &Frame::bare(Linktype::RAW, &packet),
            &mut FileStats::default()
        )
        .is_some());
        let frame = ethernet(
            0x8100,
            &[
                &[0, 7, 0x88, 0x64][..],
                &[0x11, 0, 0, 1, 0, 40, 0, 0x21],
                &ipv4(47, &[0, 0, 8, 0]),
            ]
            .concat(),
        );
        for cut in 0..frame.len() {
            let _ = decode(
                &Frame::bare(Linktype::ETHERNET, &frame[..cut]),
                &mut FileStats::default(),
            );
        }
    }

    #[test]
    fn a_pods_frame_inside_vxlan_or_geneve_is_read_through() {
        let mut inner = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        inner.extend_from_slice(&ip_packet(false));
        let mut vxlan = vec![0x08, 0, 0, 0, 0, 0, 0x2a, 0];
        vxlan.extend_from_slice(&inner);
        let mut geneve = vec![0x01, 0, 0x65, 0x58, 0, 0, 0x2a, 0, 1, 2, 3, 4];
        geneve.extend_from_slice(&inner);
        for (port, payload, what) in [
            (4789, &vxlan, "frames read inside VXLAN"),
            (8472, &vxlan, "frames read inside VXLAN"),
            (6081, &geneve, "frames read inside Geneve"),
        ] {
            let mut outer = Vec::new();
            PacketBuilder::ethernet2([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 8])
                .ipv4([192, 168, 0, 1], [192, 168, 0, 2], 64)
                .udp(40_000, port)
                .write(&mut outer, payload)
                .unwrap();
            let frame = Frame::bare(Linktype::ETHERNET, &outer);
            let mut stats = FileStats::default();
            let segment = decode(&frame, &mut stats).expect("the inner segment");
            assert_eq!(segment.from, "10.0.0.1:40000".parse().unwrap());
            assert_eq!(segment.to, "10.0.0.2:80".parse().unwrap());
            assert_eq!(segment.payload, b"GET / HTTP/1.1\r\n\r\n");
            // One packet: the one inside.
            assert_eq!((stats.ipv4, stats.tcp, stats.udp), (1, 1, 0));
            assert_eq!(stats.housekeeping[what], 1);
        }
    }
}
