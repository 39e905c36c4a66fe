//! Connection ends across address translation (NAT): where a Kubernetes service, a
//! NodePort, a load balancer or a Docker port map rewrote addresses and ports between
//! two hosts, each host's capture names the connection differently, and its messages
//! would never pair. Owns learning, from the segments both ends saw
//! ([`crate::align::pairing`]'s links, found by what NAT leaves alone), what each
//! capture's view of a connection is at its two ends, setting it on every capture
//! ([`HostCapture::translated`]) so that call ids and node names use each end's own
//! address; and the table of translations for reports. Does not own finding the
//! segments (pairing) or naming nodes (`capture`).

use crate::align::pairing::Pairing;
use crate::capture::HostCapture;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

/// One direction of a connection: its source and its destination.
type Direction = (SocketAddr, SocketAddr);

/// What translation was learned, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Translations {
    /// One row per (host, address seen, address meant).
    pub rows: Vec<TranslationRow>,
    /// Connections whose ends were joined across a translation.
    pub connections: usize,
    /// Connection views that matched two different connections (a port reused for a
    /// connection translated elsewhere): the one with more segments was kept.
    pub conflicts: usize,
    /// Addresses that stood for several captured hosts: a service's replicas.
    pub services: Vec<Service>,
    /// Per capture that saw connections between two other captured hosts pass (a
    /// node's capture of its pods), how many: their messages are taken from the two
    /// ends' captures ([`HostCapture::passed`]).
    pub passed: Vec<(String, usize)>,
}

/// An address (a Kubernetes ClusterIP or NodePort, a load balancer's) that callers
/// used for two or more captured hosts: replicas of one service, one node unless
/// `--node-by pod` ([`HostCapture::replica_of`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Service {
    /// The address callers used.
    pub address: SocketAddr,
    /// The node's name: what the replicas' names begin with (`app` for `app-0` and
    /// `app-1`), else the address.
    pub name: String,
    /// The replicas' host names, in order.
    pub replicas: Vec<String>,
}

/// One translation, as the host that saw it: it named `meant` (another captured host's
/// own endpoint) as `seen`. A port is `None` where it varied from connection to
/// connection (source ports rewritten, as MASQUERADE does).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct TranslationRow {
    /// The capture whose view it is.
    pub host: String,
    /// The address it saw.
    pub seen: IpAddr,
    /// The port it saw, where it was always the same.
    pub seen_port: Option<u16>,
    /// The other end's own address, as its own capture saw it.
    pub meant: IpAddr,
    /// Its port, where it was always the same.
    pub meant_port: Option<u16>,
    /// The capture that owns `meant`.
    pub meant_host: String,
    /// Connections seen so.
    pub connections: usize,
}

/// Learns, from the links `pairing` found, every capture's translated connections and
/// sets them ([`HostCapture::translated`]), and the connections each capture saw only
/// pass ([`HostCapture::passed`]); returns the table. A link names one direction of a
/// connection as its sender's capture and as its receiver's saw it; the sender's own
/// address is how its source is meant, the receiver's own how its destination is.
pub fn learn(captures: &mut [HostCapture], pairing: &Pairing) -> Translations {
    let links = &pairing.links;
    // Per capture, per view of a direction, the meant direction with its segments.
    let mut votes: Vec<BTreeMap<Direction, BTreeMap<Direction, u64>>> =
        vec![BTreeMap::new(); captures.len()];
    // Links through a translation first; then the links that name a view of theirs
    // alike at both ends vote for no translation, so that a segment matched by the
    // chance of equal numbers cannot outweigh a connection's own.
    for identity in [false, true] {
        for (link, &segments) in links {
            if (link.sent == link.received) != identity {
                continue;
            }
            let meant = (link.sent.0, link.received.1);
            let reply = (meant.1, meant.0);
            for (capture, seen) in [(link.sender, link.sent), (link.receiver, link.received)] {
                for (seen, meant) in [(seen, meant), ((seen.1, seen.0), reply)] {
                    let Some(view) = (match identity {
                        false => Some(votes[capture].entry(seen).or_default()),
                        true => votes[capture].get_mut(&seen),
                    }) else {
                        continue;
                    };
                    *view.entry(meant).or_default() += segments;
                }
            }
        }
    }
    let mut translations = Translations::default();
    // Each connection once, by its meant ends in order.
    let mut joined: BTreeSet<(SocketAddr, SocketAddr)> = BTreeSet::new();
    // Per (host, seen address, meant address): the ports of each side, per connection.
    let mut grouped: BTreeMap<(usize, IpAddr, IpAddr), Vec<(u16, u16)>> = BTreeMap::new();
    // Per destination seen, the destinations meant.
    let mut destinations: BTreeMap<SocketAddr, BTreeSet<SocketAddr>> = BTreeMap::new();
    for (index, votes) in votes.into_iter().enumerate() {
        let mut translated = hashbrown::HashMap::new();
        for (seen, meant) in votes {
            translations.conflicts += usize::from(meant.len() > 1);
            // The most segments; among equals the first, so the choice never varies.
            let (&meant, _) = meant
                .iter()
                .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
                .expect("a vote");
            if seen == meant {
                continue;
            }
            joined.insert((meant.0.min(meant.1), meant.0.max(meant.1)));
            // The far end is the one translated from this capture's view; a view of the
            // reply direction tells the same connection again, so only the source side
            // of each view is counted, as the far end when it differs.
            if seen.0 != meant.0 {
                grouped
                    .entry((index, seen.0.ip(), meant.0.ip()))
                    .or_default()
                    .push((seen.0.port(), meant.0.port()));
            }
            translated.insert(seen, meant);
            if seen.1 != meant.1 {
                destinations.entry(seen.1).or_default().insert(meant.1);
            }
        }
        captures[index].translated = translated;
    }
    translations.connections = joined.len();
    for &(index, (from, to)) in &pairing.passed {
        let passed = &mut captures[index].passed;
        passed.insert((from, to));
        passed.insert((to, from));
    }
    for capture in captures.iter() {
        if !capture.passed.is_empty() {
            // Both directions of each connection are in.
            let connections = capture.passed.len() / 2;
            translations
                .passed
                .push((capture.host.clone(), connections));
        }
    }
    let owner = owners(captures);
    translations.services = services(captures, &destinations, &owner);
    for ((index, seen, meant), ports) in grouped {
        let same = |side: fn(&(u16, u16)) -> u16| {
            let first = side(&ports[0]);
            ports.iter().all(|p| side(p) == first).then_some(first)
        };
        translations.rows.push(TranslationRow {
            host: captures[index].host.clone(),
            seen,
            seen_port: same(|p| p.0),
            meant,
            meant_port: same(|p| p.1),
            meant_host: owner
                .get(&meant)
                .map_or_else(|| meant.to_string(), |&o| captures[o].host.clone()),
            connections: ports.len(),
        });
    }
    translations.rows.sort();
    translations
}

/// The addresses that stood for two or more captured hosts serving on one port, each
/// such host given to the first of them (in order of address) as one of its replicas.
fn services(
    captures: &mut [HostCapture],
    destinations: &BTreeMap<SocketAddr, BTreeSet<SocketAddr>>,
    owner: &BTreeMap<IpAddr, usize>,
) -> Vec<Service> {
    let mut services = Vec::new();
    for (&address, meant) in destinations {
        let hosts: BTreeSet<usize> = meant
            .iter()
            .filter_map(|m| owner.get(&m.ip()).copied())
            .collect();
        // Replicas serve on one port; clients behind a rewritten source port that came
        // round again (MASQUERADE) each have ports of their own.
        let one_port = meant
            .iter()
            .all(|m| m.port() == meant.first().map_or(0, |f| f.port()));
        if hosts.len() < 2 || !one_port {
            continue;
        }
        let replicas: Vec<String> = hosts.iter().map(|&h| captures[h].host.clone()).collect();
        let name = shared_stem(&replicas).unwrap_or_else(|| address.ip().to_string());
        for &host in &hosts {
            captures[host]
                .replica_of
                .get_or_insert_with(|| name.clone());
        }
        services.push(Service {
            address,
            name,
            replicas,
        });
    }
    services
}

/// What every name begins with, less the separators (`-`, `_`, `.`) it ends in: `app`
/// for `app-0` and `app-1` (a StatefulSet's pods), `shop-web-7d9f` for a Deployment's
/// `shop-web-7d9f-x2` and `shop-web-7d9f-q8` (its pod template's hash cannot be told
/// from a word; `--names` gives better). `None` where they share nothing.
fn shared_stem(names: &[String]) -> Option<String> {
    let first = names.first()?;
    let mut length = first.len();
    for name in &names[1..] {
        length = first
            .char_indices()
            .zip(name.chars())
            .take_while(|((_, a), b)| a == b)
            .last()
            .map_or(0, |((at, a), _)| at + a.len_utf8())
            .min(length);
    }
    let stem = first[..length].trim_end_matches(['-', '_', '.']);
    (!stem.is_empty()).then(|| stem.to_string())
}

/// The capture owning each address that exactly one capture owns.
fn owners(captures: &[HostCapture]) -> BTreeMap<IpAddr, usize> {
    let mut owner: BTreeMap<IpAddr, Option<usize>> = BTreeMap::new();
    for (index, capture) in captures.iter().enumerate() {
        for address in &capture.local {
            owner
                .entry(*address)
                .and_modify(|o| *o = None)
                .or_insert(Some(index));
        }
    }
    owner
        .into_iter()
        .filter_map(|(address, o)| o.map(|o| (address, o)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::align::pairing::Link;

    fn pairing(links: &[(Link, u64)]) -> Pairing {
        Pairing {
            links: links.iter().copied().collect(),
            ..Pairing::default()
        }
    }

    fn ends(from: &str, to: &str) -> Direction {
        (from.parse().unwrap(), to.parse().unwrap())
    }

    fn host(name: &str, own: &str) -> HostCapture {
        HostCapture::from_stamps(name, [own.parse().unwrap()].into(), Vec::new())
    }

    #[test]
    fn each_end_of_a_translated_connection_is_named_as_its_own_capture_names_it() {
        let mut captures = [host("client", "10.78.0.100"), host("web", "10.244.1.2")];
        // Through a NodePort: the client calls the node's port, the node rewrites the
        // destination to the pod (DNAT) and the source to itself (MASQUERADE).
        let request = Link {
            sender: 0,
            sent: ends("10.78.0.100:5000", "10.78.0.1:30080"),
            receiver: 1,
            received: ends("10.78.0.1:41000", "10.244.1.2:8080"),
        };
        let reply = Link {
            sender: 1,
            sent: ends("10.244.1.2:8080", "10.78.0.1:41000"),
            receiver: 0,
            received: ends("10.78.0.1:30080", "10.78.0.100:5000"),
        };
        let translations = learn(&mut captures, &pairing(&[(request, 5), (reply, 4)]));
        let meant = ends("10.78.0.100:5000", "10.244.1.2:8080");
        let meant_reply = (meant.1, meant.0);
        assert_eq!(captures[0].translated[&request.sent], meant);
        assert_eq!(captures[0].translated[&reply.received], meant_reply);
        assert_eq!(captures[1].translated[&request.received], meant);
        assert_eq!(captures[1].translated[&reply.sent], meant_reply);
        assert_eq!(translations.connections, 1);
        assert_eq!(translations.conflicts, 0);
        let seen: Vec<(&str, String, String)> = translations
            .rows
            .iter()
            .map(|r| {
                let port = |p: Option<u16>| p.map_or("*".to_string(), |p| p.to_string());
                (
                    r.host.as_str(),
                    format!("{}:{}", r.seen, port(r.seen_port)),
                    format!("{}:{} {}", r.meant, port(r.meant_port), r.meant_host),
                )
            })
            .collect();
        assert_eq!(
            seen,
            [
                (
                    "client",
                    "10.78.0.1:30080".to_string(),
                    "10.244.1.2:8080 web".to_string()
                ),
                (
                    "web",
                    "10.78.0.1:41000".to_string(),
                    "10.78.0.100:5000 client".to_string()
                ),
            ]
        );
    }

    #[test]
    fn a_view_matched_to_two_connections_keeps_the_one_with_more_segments() {
        let mut captures = [
            host("web", "10.244.1.2"),
            host("app-0", "10.244.1.3"),
            host("app-1", "10.244.2.2"),
        ];
        // One port to the service's address, used for two connections that went to
        // different replicas.
        let to = |receiver: usize, pod: &str| Link {
            sender: 0,
            sent: ends("10.244.1.2:40000", "10.96.0.60:80"),
            receiver,
            received: ends("10.244.1.2:40000", pod),
        };
        let links = [(to(1, "10.244.1.3:8080"), 3), (to(2, "10.244.2.2:8080"), 9)];
        let translations = learn(&mut captures, &pairing(&links));
        assert_eq!(
            captures[0].translated[&ends("10.244.1.2:40000", "10.96.0.60:80")],
            ends("10.244.1.2:40000", "10.244.2.2:8080")
        );
        assert_eq!(translations.conflicts, 2, "both directions of the one view");
    }

    #[test]
    fn replicas_are_named_for_what_their_names_share() {
        let stem =
            |names: &[&str]| shared_stem(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>());
        assert_eq!(stem(&["app-0", "app-1"]).as_deref(), Some("app"));
        assert_eq!(stem(&["web1", "web2", "web3"]).as_deref(), Some("web"));
        assert_eq!(
            stem(&["shop-web-7d9f-x2", "shop-web-7d9f-q8"]).as_deref(),
            Some("shop-web-7d9f")
        );
        assert_eq!(stem(&["alpha", "beta"]), None);
        assert_eq!(stem(&["é-1", "é-2"]).as_deref(), Some("é"));
    }

    #[test]
    fn clients_behind_a_source_port_that_came_round_again_are_no_service() {
        // Two clients' connections masqueraded to the same node port, one after the
        // other: the server saw one address for both, but on their own ports.
        let mut captures = [
            host("client-a", "10.78.0.100"),
            host("client-b", "10.78.0.101"),
            host("web", "10.244.1.2"),
        ];
        let request = |sender: usize, client: &str| Link {
            sender,
            sent: ends(client, "10.78.0.1:30080"),
            receiver: 2,
            received: ends("10.78.0.1:41000", "10.244.1.2:8080"),
        };
        let reply = |receiver: usize, client: &str| Link {
            sender: 2,
            sent: ends("10.244.1.2:8080", "10.78.0.1:41000"),
            receiver,
            received: ends("10.78.0.1:30080", client),
        };
        let links = [
            (request(0, "10.78.0.100:5000"), 4),
            (reply(0, "10.78.0.100:5000"), 4),
            (request(1, "10.78.0.101:6000"), 3),
            (reply(1, "10.78.0.101:6000"), 3),
        ];
        let translations = learn(&mut captures, &pairing(&links));
        assert!(
            translations.services.is_empty(),
            "{:?}",
            translations.services
        );
        assert!(captures.iter().all(|c| c.replica_of.is_none()));
    }
}
