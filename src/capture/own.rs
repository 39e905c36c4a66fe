//! Which addresses are a capture's host's own: the fewest addresses that are an end of
//! nearly every packet, ties broken by the other captures and by the packets' time to
//! live; `--names` overrides. Owns the decision and why it is only a guess
//! ([`Uncertain`]); does not own reading the packets that are counted.

use super::HostCapture;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// Whether a packet's time to live is one a sender sets (Linux and most Unix 64,
/// Windows 128, network gear 255): it has crossed no router since it was sent.
pub(super) fn fresh_ttl(ttl: u8) -> bool {
    matches!(ttl, 64 | 128 | 255)
}

/// Decides every capture's own addresses together. A host that talks to one peer only
/// (a cache behind one application server) sees that peer in exactly as many packets as
/// itself; the tie is broken by the other captures (the peer is the one another capture
/// shows, unambiguously, to be its own) or by the packets' time to live (the peer's
/// came through a router, as behind a NodePort or a load balancer). Where nothing breaks it, or a capture holds too
/// few packets, the choice is marked a guess ([`Uncertain`]). Addresses that `names`
/// gives a capture's host name are its own, whatever the traffic says; else those its
/// host listed itself (`recorded`, by file), when the traffic has them.
pub fn decide_local_addresses(
    captures: &mut [HostCapture],
    names: &BTreeMap<IpAddr, String>,
    recorded: &BTreeMap<std::path::PathBuf, BTreeSet<IpAddr>>,
) {
    let first: Vec<(BTreeSet<IpAddr>, bool)> = captures
        .iter()
        .map(|c| local_addresses(&c.pairs, &BTreeSet::new()))
        .collect();
    for (index, capture) in captures.iter_mut().enumerate() {
        let packets: u64 = capture.pairs.values().sum();
        let mut tied = first[index].1;
        capture.local = first[index].0.clone();
        if tied {
            // Addresses that are not this host's: another capture's own, and those
            // whose packets came through a router.
            let claimed: BTreeSet<IpAddr> = first
                .iter()
                .enumerate()
                .filter(|&(other, (_, tied))| other != index && !tied)
                .flat_map(|(_, (local, _))| local.iter().copied())
                .chain(capture.routed.iter().copied())
                .collect();
            // The tie is broken by evidence only when one of this capture's addresses
            // is claimed so; otherwise the lowest address wins, a guess.
            tied = !capture
                .pairs
                .keys()
                .any(|(a, b)| claimed.contains(a) || claimed.contains(b));
            capture.local = local_addresses(&capture.pairs, &claimed).0;
        }
        // Addresses `--names` gives the capture's host name are its own, whatever the
        // traffic suggests: the way out of a wrong guess.
        let seen = |address: &IpAddr| {
            capture
                .pairs
                .keys()
                .any(|(a, b)| a == address || b == address)
        };
        let mut named: BTreeSet<IpAddr> = names
            .iter()
            .filter(|(address, name)| **name == capture.host && seen(address))
            .map(|(address, _)| *address)
            .collect();
        if named.is_empty() {
            named = recorded
                .get(&capture.path)
                .into_iter()
                .flatten()
                .filter(|address| seen(address))
                .copied()
                .collect();
        }
        if !named.is_empty() {
            capture.local = named;
            capture.local_uncertain = None;
            continue;
        }
        // A capture with several own addresses (a node's, which sees its pods'
        // traffic; a mirror port's) gives up those another capture shows to be its
        // one own address: that host's, not this one's.
        if capture.local.len() > 1 {
            let others_own = first
                .iter()
                .enumerate()
                .filter_map(|(other, (local, tied))| {
                    (other != index && !tied && local.len() == 1).then(|| local.first().copied())?
                });
            let others_own: BTreeSet<IpAddr> = others_own.collect();
            if !capture.local.is_subset(&others_own) {
                capture
                    .local
                    .retain(|address| !others_own.contains(address));
            }
        }
        capture.local_uncertain = if packets > 0 && packets < FEW_PACKETS {
            Some(Uncertain::FewPackets(packets))
        } else if tied {
            Some(Uncertain::Tie)
        } else {
            None
        };
    }
}

/// Fewer IP packets than this tell a host's own address only weakly.
const FEW_PACKETS: u64 = 20;

/// Why a capture's own address is only a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Uncertain {
    /// Two addresses are ends of as many packets, and no other capture claims either.
    Tie,
    /// Too few packets to tell.
    FewPackets(u64),
}

impl std::fmt::Display for Uncertain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Uncertain::Tie => f.write_str("two addresses are ends of as many packets"),
            Uncertain::FewPackets(n) => {
                write!(f, "only {}", crate::words::counted(*n, "IP packet"))
            }
        }
    }
}

/// Whether `address` can be a host's own: broadcast, multicast and unspecified
/// addresses are ends of packets but never a capturing host's address. (An address
/// ending in .255 is a subnet's broadcast under every mask of /24 or wider.)
fn can_be_own(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => {
            !(v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_unspecified()
                || v4.octets()[3] == 255)
        }
        IpAddr::V6(v6) => !(v6.is_multicast() || v6.is_unspecified()),
    }
}

/// The capturing host's addresses: the fewest addresses that are an end of nearly every
/// packet (greedy cover of the address pairs, stopping when what is left is under 1%).
/// A capture on one host gives its address; a capture of a whole network (a mirror
/// port) gives many.
///
/// Returns the addresses and whether the first choice was a tie; ties go to addresses
/// not in `claimed`, then to the lowest address.
pub(super) fn local_addresses(
    pairs: &BTreeMap<(IpAddr, IpAddr), u64>,
    claimed: &BTreeSet<IpAddr>,
) -> (BTreeSet<IpAddr>, bool) {
    let total: u64 = pairs.values().sum();
    let sorted: Vec<(&(IpAddr, IpAddr), &u64)> = pairs.iter().collect();
    let mut tied = false;
    let mut local = BTreeSet::new();
    let mut uncovered = total;
    while uncovered * 100 > total {
        let mut counts: BTreeMap<IpAddr, u64> = BTreeMap::new();
        for (&(a, b), &n) in &sorted {
            if local.contains(&a) || local.contains(&b) {
                continue;
            }
            for end in [a, b] {
                if can_be_own(end) && (end != b || a != b) {
                    *counts.entry(end).or_default() += n;
                }
            }
        }
        // Most packets first; ties to an unclaimed address, then to the lowest, so the
        // choice is repeatable.
        let Some((&best, &covered)) = counts.iter().max_by(|x, y| {
            x.1.cmp(y.1)
                .then_with(|| claimed.contains(y.0).cmp(&claimed.contains(x.0)))
                .then_with(|| y.0.cmp(x.0))
        }) else {
            break;
        };
        if local.is_empty() {
            tied = counts.values().filter(|&&n| n == covered).count() > 1;
        }
        local.insert(best);
        uncovered -= covered;
    }
    (local, tied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str, u64)]) -> BTreeMap<(IpAddr, IpAddr), u64> {
        list.iter()
            .map(|(a, b, n)| ((a.parse().unwrap(), b.parse().unwrap()), *n))
            .collect()
    }

    fn own(list: &[(&str, &str, u64)]) -> Vec<String> {
        let (local, _) = local_addresses(&pairs(list), &BTreeSet::new());
        local.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn broadcast_and_multicast_addresses_are_never_a_hosts_own() {
        // The subnet's broadcast address sorts first and is an end of every packet.
        assert_eq!(own(&[("10.0.1.3", "10.0.0.255", 40)]), ["10.0.1.3"]);
        assert_eq!(own(&[("10.0.1.3", "255.255.255.255", 40)]), ["10.0.1.3"]);
        assert_eq!(
            own(&[
                ("192.168.1.9", "224.0.0.251", 90),
                ("192.168.1.9", "192.168.1.20", 10)
            ]),
            ["192.168.1.9"]
        );
        assert_eq!(own(&[("fe80::9", "ff02::fb", 50)]), ["fe80::9"]);
    }

    #[test]
    fn unicast_addresses_can_be_a_hosts_own() {
        for address in ["10.0.0.1", "10.0.0.254", "fe80::1", "2001:db8::255"] {
            assert!(can_be_own(address.parse().unwrap()), "{address}");
        }
        for address in ["0.0.0.0", "239.255.255.250", "10.1.2.255", "::", "ff05::2"] {
            assert!(!can_be_own(address.parse().unwrap()), "{address}");
        }
    }

    #[test]
    fn a_peer_whose_packets_came_through_a_router_is_not_the_hosts_own() {
        // A client that talks to one node port only: as many packets from each end.
        let mut capture = HostCapture::from_stamps("client", BTreeSet::new(), Vec::new());
        capture.pairs = pairs(&[("10.78.0.1", "10.78.0.100", 400)]);
        let mut alone = [capture];
        decide_local_addresses(&mut alone, &BTreeMap::new(), &BTreeMap::new());
        // The lowest address, a guess.
        assert_eq!(alone[0].local, ["10.78.0.1".parse().unwrap()].into());
        assert_eq!(alone[0].local_uncertain, Some(Uncertain::Tie));
        // The node's packets came with one less than a sender sets.
        alone[0].routed = ["10.78.0.1".parse().unwrap()].into();
        decide_local_addresses(&mut alone, &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(alone[0].local, ["10.78.0.100".parse().unwrap()].into());
        assert_eq!(alone[0].local_uncertain, None);
    }

    #[test]
    fn a_node_gives_up_the_addresses_its_pods_captures_show_to_be_theirs() {
        let host = |name: &str, list: &[(&str, &str, u64)]| {
            let mut capture = HostCapture::from_stamps(name, BTreeSet::new(), Vec::new());
            capture.pairs = pairs(list);
            capture
        };
        let mut captures = [
            host(
                "web",
                &[
                    ("10.244.1.2", "10.244.1.3", 300),
                    ("10.244.1.2", "10.78.0.1", 100),
                ],
            ),
            host(
                "app",
                &[
                    ("10.244.1.2", "10.244.1.3", 300),
                    ("10.244.1.3", "10.244.2.3", 200),
                ],
            ),
            // The node sees its pods' traffic, and its own to the client.
            host(
                "node",
                &[
                    ("10.244.1.2", "10.244.1.3", 600),
                    ("10.244.1.3", "10.244.2.3", 200),
                    ("10.78.0.1", "10.78.0.100", 100),
                ],
            ),
        ];
        decide_local_addresses(&mut captures, &BTreeMap::new(), &BTreeMap::new());
        let own = |c: &HostCapture| c.local.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(own(&captures[0]), ["10.244.1.2"]);
        assert_eq!(own(&captures[1]), ["10.244.1.3"]);
        assert_eq!(own(&captures[2]), ["10.78.0.1"]);
    }
}
