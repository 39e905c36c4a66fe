//! The one place protocols are listed. Each protocol's file describes itself in a
//! [`Spec`] (its name, its ports, how its bytes are recognised, how its connections and
//! datagrams are framed, the system it names in OpenTelemetry); [`REGISTRY`] lists the
//! specs, and everything that chooses or names a protocol asks the registry. Adding a
//! protocol is its file, a variant of [`ProtocolName`] and a line in [`REGISTRY`].
//! Owns the choice of protocol by port and content; the framing is each protocol's.

use super::{
    amqp, dns, http, http2, kafka, memcached, mqtt, mysql, nats, onc_rpc, postgres, resp, thrift,
    tls, turns, udp, Framer, Status,
};
use std::fmt;
use std::sync::LazyLock;

/// The protocols a connection or port can be read as.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum ProtocolName {
    /// Generic request/response by turns on TCP.
    Tcp,
    /// HTTP/1.x.
    Http,
    /// HTTP/2 in cleartext, gRPC included: every stream a call.
    Http2,
    /// DNS over UDP or TCP.
    Dns,
    /// ONC RPC (Sun RPC) over TCP or UDP.
    OncRpc,
    /// Redis RESP.
    Redis,
    /// PostgreSQL frontend/backend protocol.
    Postgres,
    /// memcached, text and binary.
    Memcached,
    /// MySQL and MariaDB.
    Mysql,
    /// Apache Thrift: binary and compact protocols, framed or not.
    Thrift,
    /// TLS, read by turns (what is inside cannot be parsed without the keys).
    Tls,
    /// Generic UDP request/response by port pair.
    Udp,
    /// One-way stream: every segment or datagram is a free-form message.
    Stream,
    /// NATS: publishes in, deliveries out, request/reply through inboxes.
    Nats,
    /// MQTT 3.1.1 and 5.
    Mqtt,
    /// AMQP 0-9-1 (RabbitMQ).
    Amqp,
    /// The Apache Kafka protocol.
    Kafka,
}

/// How a protocol's UDP datagrams are read.
#[derive(Clone, Copy)]
pub enum OverUdp {
    /// Not a UDP protocol: datagrams on its port are read by the generic rule
    /// ([`ProtocolName::Udp`]).
    Generic,
    /// Every datagram names the transaction it belongs to.
    ById {
        /// The datagram's transaction id, and whether it is a request.
        message: fn(&[u8]) -> Option<(u32, bool)>,
        /// A request's operation name.
        operation: fn(&[u8]) -> Option<std::borrow::Cow<'static, str>>,
        /// How a reply answered.
        status: fn(&[u8]) -> Status,
    },
    /// Every datagram is a free-form message.
    Free,
    /// The generic UDP rule itself.
    Pairs,
}

/// What the registry knows of one protocol.
pub struct Spec {
    /// Which protocol.
    pub name: ProtocolName,
    /// Its name on the command line and in summaries.
    pub label: &'static str,
    /// The ports it is usually served on.
    pub ports: &'static [u16],
    /// Whether a client's first bytes look like it: the check on a choice made by port.
    pub client_first: fn(&[u8]) -> bool,
    /// Where it is tried by content on a port no protocol owns (or whose protocol the
    /// bytes are not): lower first; `None` for protocols only chosen by port.
    pub guess: Option<u8>,
    /// A start so distinctive that it is this protocol on any port (HTTP/2's preface).
    pub unmistakable: Option<fn(&[u8]) -> bool>,
    /// For protocols whose server speaks first: whether its first bytes look like it.
    pub server_first: Option<fn(&[u8]) -> bool>,
    /// A message broker: its messages are counted by kind (publishes, deliveries…), the
    /// first word of their operation names.
    pub broker: bool,
    /// The OpenTelemetry name of the system a call named `operation` went to
    /// (`rpc.system`, `db.system` or `messaging.system`).
    pub system: fn(&str) -> Option<&'static str>,
    /// The framer of a TCP connection read as it.
    pub tcp: fn() -> Box<dyn Framer>,
    /// How its datagrams are read.
    pub udp: OverUdp,
}

/// Every protocol, in the order of [`ProtocolName`]'s variants (a test holds them to it).
pub static REGISTRY: [&Spec; 17] = [
    &turns::TCP,
    &http::SPEC,
    &http2::SPEC,
    &dns::SPEC,
    &onc_rpc::SPEC,
    &resp::SPEC,
    &postgres::SPEC,
    &memcached::SPEC,
    &mysql::SPEC,
    &thrift::SPEC,
    &tls::SPEC,
    &udp::SPEC,
    &turns::STREAM,
    &nats::SPEC,
    &mqtt::SPEC,
    &amqp::SPEC,
    &kafka::SPEC,
];

/// The protocol that owns each port, built once from the specs.
static BY_PORT: LazyLock<hashbrown::HashMap<u16, ProtocolName>> = LazyLock::new(|| {
    REGISTRY
        .iter()
        .flat_map(|spec| spec.ports.iter().map(|&port| (port, spec.name)))
        .collect()
});

/// The protocols tried by content, in the order they are tried.
static GUESSED: LazyLock<Vec<&'static Spec>> = LazyLock::new(|| {
    let mut guessed: Vec<&Spec> = REGISTRY
        .iter()
        .copied()
        .filter(|spec| spec.guess.is_some())
        .collect();
    guessed.sort_by_key(|spec| spec.guess);
    guessed
});

impl ProtocolName {
    /// Every protocol, for `--help` and errors.
    pub fn all() -> impl Iterator<Item = ProtocolName> {
        REGISTRY.iter().map(|spec| spec.name)
    }

    /// What the registry knows of it.
    pub fn spec(self) -> &'static Spec {
        REGISTRY[self as usize]
    }

    /// The name used on the command line and in summaries.
    pub fn as_str(self) -> &'static str {
        self.spec().label
    }

    /// Parses a name given on the command line.
    pub fn parse(text: &str) -> Option<ProtocolName> {
        Self::all().find(|p| p.as_str() == text)
    }

    /// The protocol usually served on a port.
    pub fn by_port(port: u16) -> Option<ProtocolName> {
        BY_PORT.get(&port).copied()
    }

    /// Whether a client's first bytes look like this protocol (the check on a choice
    /// made by port).
    pub fn sniff(self, first: &[u8]) -> bool {
        (self.spec().client_first)(first)
    }

    /// The protocol a client's first bytes show, trying those that can be told by
    /// content in the registry's order.
    pub fn guess(first: &[u8]) -> Option<ProtocolName> {
        GUESSED
            .iter()
            .find(|spec| (spec.client_first)(first))
            .map(|spec| spec.name)
    }

    /// The protocol a server's first bytes show, for the protocols whose server speaks
    /// first and says so.
    pub fn guess_server(first: &[u8]) -> Option<ProtocolName> {
        REGISTRY
            .iter()
            .find(|spec| spec.server_first.is_some_and(|looks| looks(first)))
            .map(|spec| spec.name)
    }

    /// The protocol whose start is unmistakable in a client's first bytes, on any port.
    pub fn unmistakable(first: &[u8]) -> Option<ProtocolName> {
        REGISTRY
            .iter()
            .find(|spec| spec.unmistakable.is_some_and(|looks| looks(first)))
            .map(|spec| spec.name)
    }

    /// Whether a server's first bytes look like this protocol, where its server speaks
    /// first; `None` where it does not, or the protocol cannot tell.
    pub fn sniff_server(self, first: &[u8]) -> Option<bool> {
        self.spec().server_first.map(|looks| looks(first))
    }

    /// The OpenTelemetry name of the system a call of this protocol went to, for the
    /// protocols that name operations.
    pub fn system(self, operation: &str) -> Option<&'static str> {
        (self.spec().system)(operation)
    }

    /// The framer for a TCP connection read as this protocol.
    pub fn tcp_framer(self) -> Box<dyn Framer> {
        (self.spec().tcp)()
    }

    /// The protocol a UDP port pair is read as when this one owns its port: itself
    /// where it has a datagram reading, else the generic rule.
    pub fn over_udp(self) -> ProtocolName {
        match self.spec().udp {
            OverUdp::Generic => ProtocolName::Udp,
            _ => self,
        }
    }
}

impl fmt::Display for ProtocolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_lists_every_protocol_once_in_the_order_of_its_names() {
        for (index, spec) in REGISTRY.iter().enumerate() {
            assert_eq!(spec.name as usize, index, "{}", spec.label);
            assert_eq!(ProtocolName::parse(spec.label), Some(spec.name));
        }
    }

    #[test]
    fn no_port_is_owned_by_two_protocols() {
        let mut owners = std::collections::BTreeMap::new();
        for spec in REGISTRY {
            for &port in spec.ports {
                if let Some(other) = owners.insert(port, spec.label) {
                    panic!("port {port} is claimed by {other} and {}", spec.label);
                }
            }
        }
    }

    #[test]
    fn content_guesses_keep_their_order() {
        let order: Vec<&str> = GUESSED.iter().map(|spec| spec.label).collect();
        assert_eq!(
            order,
            [
                "tls",
                "http",
                "redis",
                "postgres",
                "memcached",
                "thrift",
                "onc-rpc",
                "amqp",
                "mqtt",
                "kafka",
                "nats"
            ]
        );
    }
}
