//! The layers between a frame's link header and the IP packet it is about, read through:
//! VLAN tags, PPPoE sessions and the PPP inside them, MPLS label stacks, Ethernet bridged
//! inside a tunnel (GRE's Ethertype 0x6558, VXLAN, Geneve), GRE (version 0 with its
//! optional checksum, key and sequence number; PPTP's version 1 carrying PPP) and IP
//! carried in IP (protocol 4, and 41: 6in4). Owns those headers, what each encapsulation
//! read through is called in the stats, why a packet inside one is set aside (in words
//! that name it: a PPPoE control frame is not "not IP"), and how deep tunnels may nest.
//! Does not own the link types themselves, IP, or TCP and UDP ([`super::decode`]).

use super::stats::FileStats;
use std::borrow::Cow;

/// Tunnels read through inside one another at most. Real ones nest two or three deep
/// (GRE in IP in GRE, a VXLAN overlay on a GRE underlay); a crafted packet of IP-in-IP
/// headers back to back would otherwise be opened once per 20 bytes, hundreds deep.
pub(super) const MAX_TUNNELS: u8 = 8;

/// Why a packet whose tunnels nest deeper than [`MAX_TUNNELS`] is set aside.
pub(super) const TOO_DEEP: &str = "tunnels nested more than 8 deep (not read further)";

/// Ethertypes: IPv4, IPv6, and Ethernet carried whole (Transparent Ethernet Bridging,
/// GRE's name for it; the link type Ethernet and VXLAN's payload are read as it).
pub(super) const IPV4: u16 = 0x0800;
pub(super) const IPV6: u16 = 0x86dd;
pub(super) const ETHERNET: u16 = 0x6558;
const VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
const PPPOE_DISCOVERY: u16 = 0x8863;
const PPPOE_SESSION: u16 = 0x8864;
const MPLS: [u16; 2] = [0x8847, 0x8848];
/// GRE's protocol type for PPP (PPTP).
const PPP: u16 = 0x880b;

/// A reason a packet is set aside: most are fixed words, a few name a number.
pub(super) type Why = Cow<'static, str>;

/// The big-endian 16-bit word at `at`, where `bytes` hold it.
pub(super) fn word(bytes: &[u8], at: usize) -> Option<u16> {
    let pair = bytes.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([pair[0], pair[1]]))
}

/// From `ether_type` naming `bytes` to the Ethertype of the IP packet inside and its
/// bytes: Ethernet headers, VLAN tags, a PPPoE session's header and PPP, MPLS labels,
/// peeled in whatever order they come (each takes at least 4 bytes off, so a chain of
/// them ends with the bytes). Counts in `stats` each PPPoE session and MPLS stack read
/// through; `Err` with why the packet is set aside.
pub(super) fn to_ip<'a>(
    mut ether_type: u16,
    mut bytes: &'a [u8],
    stats: &mut FileStats,
) -> Result<(u16, &'a [u8]), Why> {
    loop {
        match ether_type {
            IPV4 | IPV6 => return Ok((ether_type, bytes)),
            ETHERNET => {
                ether_type = word(bytes, 12).ok_or("link-layer header cut short")?;
                bytes = &bytes[14..];
            }
            tag if VLAN.contains(&tag) => {
                ether_type = word(bytes, 2).ok_or("VLAN tag cut short")?;
                bytes = &bytes[4..];
            }
            PPPOE_SESSION => {
                (ether_type, bytes) = pppoe(bytes)?;
                stats.housekeeping("packets read inside PPPoE sessions");
            }
            PPPOE_DISCOVERY => {
                return Err("PPPoE discovery (a session being set up or ended; no IP in it)".into())
            }
            label if MPLS.contains(&label) => {
                (ether_type, bytes) = mpls(bytes)?;
                stats.housekeeping("packets read under MPLS labels");
            }
            _ => return Err("not IP (ARP, LLDP, ...)".into()),
        }
    }
}

/// The packet a PPPoE session frame carries (RFC 2516: version and type 1, code 0, the
/// session, the length of what follows, then PPP).
fn pppoe(bytes: &[u8]) -> Result<(u16, &[u8]), Why> {
    let length = word(bytes, 4).ok_or("PPPoE header cut short")?;
    if bytes[0] != 0x11 || bytes[1] != 0 {
        return Err("PPPoE session frames of a version or code other than 1 and 0".into());
    }
    // The length leaves out Ethernet's padding; a snaplen may have cut it shorter.
    let end = 6usize.saturating_add(usize::from(length)).min(bytes.len());
    ppp(&bytes[6..end]).map_err(|protocol| not_ip_in_ppp("PPPoE session frames", protocol))
}

/// The IP packet a PPP frame carries, as its Ethertype and bytes; `Err` with the PPP
/// protocol number where it carries something else (`None`: cut before it says).
/// The address and control bytes (`ff 03`) may lead, and the protocol may be compressed
/// to one byte (odd: RFC 1661's protocol field compression).
fn ppp(bytes: &[u8]) -> Result<(u16, &[u8]), Option<u16>> {
    let bytes = bytes.strip_prefix(&[0xff, 0x03]).unwrap_or(bytes);
    let (protocol, rest) = match bytes.first() {
        Some(&one) if one & 1 == 1 => (u16::from(one), &bytes[1..]),
        _ => (word(bytes, 0).ok_or(None)?, &bytes[2..]),
    };
    match protocol {
        0x0021 => Ok((IPV4, rest)),
        0x0057 => Ok((IPV6, rest)),
        other => Err(Some(other)),
    }
}

/// Why a PPP frame inside `carrier` is set aside: what PPP says it carries.
fn not_ip_in_ppp(carrier: &str, protocol: Option<u16>) -> Why {
    let what = match protocol {
        None => return format!("{carrier} whose PPP header is cut short").into(),
        Some(0xc021) => "LCP (link control)",
        Some(0x8021) => "IPCP (IPv4 address setup)",
        Some(0x8057) => "IPv6CP (IPv6 setup)",
        Some(0xc023) => "PAP (authentication)",
        Some(0xc223) => "CHAP (authentication)",
        Some(0x80fd) => "CCP (compression control)",
        Some(0x00fd) => "compressed datagrams",
        Some(other) => return format!("{carrier} of PPP protocol {other:#06x}, not IP").into(),
    };
    format!("{carrier} of PPP's {what}, not IP").into()
}

/// The packet under an MPLS label stack: the labels up to the one marked bottom of
/// stack, then IPv4 or IPv6 as its first four bits say (MPLS names no payload type).
fn mpls(bytes: &[u8]) -> Result<(u16, &[u8]), Why> {
    let mut rest = bytes;
    loop {
        let label = rest.get(..4).ok_or("MPLS label stack cut short")?;
        rest = &rest[4..];
        if label[2] & 1 == 1 {
            break;
        }
    }
    match rest.first().map(|first| first >> 4) {
        Some(4) => Ok((IPV4, rest)),
        Some(6) => Ok((IPV6, rest)),
        Some(_) => Err("MPLS payload neither IPv4 nor IPv6 (a pseudowire?)".into()),
        None => Err("MPLS label stack with nothing under it".into()),
    }
}

/// A tunnel found in an IP packet's payload: what reading through it is counted as, the
/// Ethertype of what it carries, and its bytes.
pub(super) type Tunnel<'a> = (&'static str, u16, &'a [u8]);

/// What the payload of IP protocol `protocol` carries, where it is a tunnel read
/// through: IP in IP (4), IPv6 in IP (41), GRE (47). `None` for any other protocol;
/// `Some(Err)` with why a tunnel's packet is set aside.
pub(super) fn in_ip(protocol: u8, payload: &[u8]) -> Option<Result<Tunnel<'_>, Why>> {
    Some(match protocol {
        4 => Ok(("packets read inside IP-in-IP (protocol 4)", IPV4, payload)),
        41 => Ok((
            "packets read inside 6in4 (IPv6 in IP, protocol 41)",
            IPV6,
            payload,
        )),
        47 => {
            gre(payload).map(|(ether_type, inner)| ("packets read inside GRE", ether_type, inner))
        }
        _ => return None,
    })
}

/// The packet a GRE header carries, as an Ethertype and its bytes. Version 0 (RFC 2784,
/// with RFC 2890's key and sequence number): 4 bytes, then 4 for the checksum where its
/// bit is set, 4 for the key, 4 for the sequence number. Version 1 (PPTP, RFC 2637): 8
/// bytes (the key, PPP's payload length and call), 4 for the sequence number, 4 for the
/// acknowledgement, then PPP.
fn gre(bytes: &[u8]) -> Result<(u16, &[u8]), Why> {
    let protocol = word(bytes, 2).ok_or("GRE header cut short")?;
    let (flags, version) = (bytes[0], bytes[1] & 0x07);
    let four = |bit: u8| if flags & bit != 0 { 4 } else { 0 };
    let length = match version {
        // RFC 1701's source routing: a list of variable length, long obsolete.
        0 if flags & 0x40 != 0 => return Err("GRE with source routing (not read)".into()),
        0 => 4 + four(0x80) + four(0x20) + four(0x10),
        1 if protocol != PPP || flags & 0x20 == 0 => {
            return Err("GRE version 1 carrying other than PPP".into())
        }
        1 => 8 + four(0x10) + if bytes[1] & 0x80 != 0 { 4 } else { 0 },
        other => return Err(format!("GRE version {other} (not read)").into()),
    };
    let inner = bytes.get(length..).ok_or("GRE header cut short")?;
    if inner.is_empty() {
        return Err("GRE with nothing inside (keepalives, PPTP acknowledgements)".into());
    }
    match version {
        1 => ppp(inner).map_err(|protocol| not_ip_in_ppp("GRE (PPTP) frames", protocol)),
        _ => Ok((protocol, inner)),
    }
}

/// The UDP ports of the tunnels whose frames are read through: VXLAN (IANA's 4789, and
/// 8472, the Linux kernel's default that flannel uses) and Geneve.
const VXLAN_PORTS: [u16; 2] = [4789, 8472];
const GENEVE_PORT: u16 = 6081;

/// The Ethernet frame a VXLAN or Geneve datagram to `port` carries, if it is one, with
/// what reading through it is counted as.
pub(super) fn in_udp(port: u16, payload: &[u8]) -> Option<Tunnel<'_>> {
    if VXLAN_PORTS.contains(&port) && payload.len() >= 8 + 14 && payload[0] & 0x08 != 0 {
        return Some(("frames read inside VXLAN", ETHERNET, &payload[8..]));
    }
    if port == GENEVE_PORT && payload.len() >= 8 {
        // Version 0; options in 4-byte words; the carried protocol is Ethernet.
        let options = usize::from(payload[0] & 0x3f) * 4;
        let ethernet = word(payload, 2) == Some(ETHERNET);
        if payload[0] >> 6 == 0 && ethernet && payload.len() >= 8 + options + 14 {
            return Some((
                "frames read inside Geneve",
                ETHERNET,
                &payload[8 + options..],
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_tags_pppoe_and_mpls_are_peeled_to_the_ip_packet() {
        let ip = [0x45u8, 0, 0, 20];
        // Two VLAN tags, then a PPPoE session (length 6: PPP's 2 bytes and 4 of IP),
        // padded as Ethernet pads.
        let mut frame = vec![0u8; 12];
        frame.extend([0x81, 0x00, 0, 1, 0x81, 0x00, 0, 2, 0x88, 0x64]);
        frame.extend([0x11, 0, 0x12, 0x34, 0, 6, 0x00, 0x21]);
        frame.extend(ip);
        frame.extend([0, 0, 0]);
        let mut stats = FileStats::default();
        assert_eq!(to_ip(ETHERNET, &frame, &mut stats), Ok((IPV4, &ip[..])));
        assert_eq!(stats.housekeeping["packets read inside PPPoE sessions"], 1);
        // Two MPLS labels, the second the bottom of the stack, then IPv6.
        let labelled = [0, 0x10, 0x00, 64, 0, 0x20, 0x01, 64, 0x60, 0, 0, 0];
        assert_eq!(
            to_ip(0x8847, &labelled, &mut stats),
            Ok((IPV6, &labelled[8..]))
        );
        assert_eq!(stats.housekeeping["packets read under MPLS labels"], 1);
    }

    #[test]
    fn what_is_not_ip_under_pppoe_mpls_or_gre_is_named() {
        let mut stats = FileStats::default();
        let lcp = [0x11, 0, 0, 1, 0, 6, 0xc0, 0x21, 1, 1, 0, 4];
        let why = to_ip(0x8864, &lcp, &mut stats).unwrap_err();
        assert_eq!(
            why,
            "PPPoE session frames of PPP's LCP (link control), not IP"
        );
        let why = to_ip(0x8863, &[0x11, 0x09, 0, 0, 0, 0], &mut stats).unwrap_err();
        assert!(why.starts_with("PPPoE discovery"), "{why}");
        let pseudowire = [0, 0x10, 0x01, 64, 0, 0, 0, 0];
        let why = to_ip(0x8848, &pseudowire, &mut stats).unwrap_err();
        assert!(why.starts_with("MPLS payload neither"), "{why}");
        assert_eq!(
            to_ip(0x0806, &[0; 28], &mut stats).unwrap_err(),
            "not IP (ARP, LLDP, ...)"
        );
        // Nothing counted as read through.
        assert!(stats.housekeeping.is_empty(), "{:?}", stats.housekeeping);
        // GRE: a keepalive, PPTP's CCP, a version no one uses, source routing.
        let gre_of = |b: &[u8]| in_ip(47, b).unwrap().map(|t| t.1);
        assert!(gre_of(&[0, 0, 0, 0])
            .unwrap_err()
            .starts_with("GRE with nothing"));
        let ccp = [
            0x30, 0x81, 0x88, 0x0b, 0, 4, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0x03, 0x80, 0xfd,
        ];
        assert_eq!(
            gre_of(&ccp).unwrap_err(),
            "GRE (PPTP) frames of PPP's CCP (compression control), not IP"
        );
        assert_eq!(
            gre_of(&[0, 3, 8, 0, 0x45]).unwrap_err(),
            "GRE version 3 (not read)"
        );
        assert!(gre_of(&[0x40, 0, 8, 0, 0x45])
            .unwrap_err()
            .contains("source routing"));
        assert!(in_ip(6, &[]).is_none());
    }

    #[test]
    fn gre_headers_of_every_optional_field_give_what_they_carry() {
        let inner = [0x45u8, 0, 0, 20];
        for (flags, optional) in [
            (0x00u8, 0usize),
            (0x80, 4),
            (0x20, 4),
            (0x10, 4),
            (0xb0, 12),
        ] {
            let mut packet = vec![flags, 0, 0x08, 0x00];
            packet.extend(vec![0xaa; optional]);
            packet.extend(inner);
            let (what, ether_type, carried) = in_ip(47, &packet).unwrap().unwrap();
            assert_eq!(
                (what, ether_type, carried),
                ("packets read inside GRE", IPV4, &inner[..])
            );
        }
        // Ethernet bridged, handed on as Ethernet; PPTP's PPP with a compressed protocol.
        let bridged = [0u8, 0, 0x65, 0x58, 9, 9];
        assert_eq!(in_ip(47, &bridged).unwrap().unwrap().1, ETHERNET);
        let pptp = [
            0x30, 0x01, 0x88, 0x0b, 0, 5, 0, 1, 0, 0, 0, 7, 0x21, 0x45, 0, 0, 20,
        ];
        assert_eq!(in_ip(47, &pptp).unwrap().unwrap().2, &pptp[13..]);
        // Cut anywhere: set aside, never read past the end.
        for cut in 0..pptp.len() {
            let _ = in_ip(47, &pptp[..cut]);
        }
    }
}
