//! How a capture's messages are named in the trace, and handed to it: each message's
//! call id, which of its ends the capture saw, the addresses each end names itself by
//! where a translation (NAT) stood between them, and its sender's and receiver's nodes
//! (by host, pod, service or operation). [`add_to_trace`] gives them to the trace
//! builder; [`super::lines`] writes the same names as text. Does not own reading
//! captures, or learning translations ([`crate::nat`]).

use super::flows::CaptureMessage;
use super::protocol::Side;
use super::{CaptureOptions, HostCapture, NodeBy};
use crate::trace::{End, Message, TraceBuilder, Transit, Truth};
use hashbrown::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

/// Names nodes and adds the captures' message ends to `builder`: a message leaving one
/// of a file's own addresses is a send at that host, one arriving at them a receive;
/// a message between two others (a capture of a whole network) counts as a send.
/// `clock` turns a time of capture `i` into the common time base (see
/// [`crate::align`]); pass [`same_clock`] to keep each host's own.
pub fn add_to_trace(
    captures: &[HostCapture],
    options: &CaptureOptions,
    clock: impl Fn(usize, crate::trace::Nanos) -> crate::trace::Nanos + Sync,
    builder: &mut TraceBuilder,
) {
    use rayon::prelude::*;
    let names = node_names(captures, options);
    let services = services_per_host(captures, &names);
    let node_of = |address: SocketAddr, serving: bool| -> String {
        let host = host_of(&names, address.ip());
        match options.node_by {
            NodeBy::Host | NodeBy::Pod => host,
            NodeBy::Service | NodeBy::Operation if serving => {
                format!("{host}:{}", address.port())
            }
            NodeBy::Service | NodeBy::Operation => match services.get(&host) {
                Some(ports) if ports.len() == 1 => {
                    format!("{host}:{}", ports.iter().next().expect("one"))
                }
                _ => host,
            },
        }
    };
    // Messages are named a block at a time on every core (call ids formatted, truth
    // looked up, times turned) while the blocks before are interned and pushed, in
    // order, on one.
    builder.reserve(captures.iter().map(|c| c.messages.len()).sum());
    for (index, capture) in captures.iter().enumerate() {
        builder.stats_mut().files += 1;
        let mut namer = Namer::new(capture);
        namer.more_endpoints(&capture.endpoints);
        let prepare = |messages: &[CaptureMessage]| -> Vec<PreparedBlock<'_>> {
            messages
                .par_chunks(BLOCK)
                .map(|block| {
                    let mut text = String::with_capacity(block.len() * 48);
                    let prepared = block
                        .iter()
                        .map(|message| {
                            let start = text.len();
                            let named = namer.name(&capture.endpoints, message, &mut text)?;
                            let truth = options.truth.get(&text[start..]);
                            Some(Prepared {
                                named,
                                call_id: start..text.len(),
                                time: clock(index, message.framed.first),
                                truth,
                            })
                        })
                        .collect();
                    (prepared, text)
                })
                .collect()
        };
        let mut adder = Adder {
            capture,
            node_of: &node_of,
            ids: vec![[None; 2]; capture.endpoints.len()],
            operation_ids: vec![None; capture.operations.len()],
            propagated_ids: vec![None; capture.propagated.len()],
            translated_nodes: HashMap::new(),
        };
        let mut windows = capture.messages.chunks(BLOCK * BLOCKS_AT_ONCE);
        let mut ready = windows.next().map(|window| (window, prepare(window)));
        while let Some((window, blocks)) = ready.take() {
            let next = windows.next();
            let ((), prepared) = rayon::join(
                || adder.add(window, &blocks, builder),
                || next.map(|next| (next, prepare(next))),
            );
            ready = prepared;
        }
    }
}

/// Messages named at a time by one thread.
const BLOCK: usize = 8_192;
/// Blocks named while those before are added.
const BLOCKS_AT_ONCE: usize = 16;

/// Per block of messages, each prepared (`None`: left out) and their call ids' text.
type PreparedBlock<'a> = (Vec<Option<Prepared<'a>>>, String);

/// Adds one capture's prepared messages to the builder, interning their names.
struct Adder<'a, F: Fn(SocketAddr, bool) -> String> {
    capture: &'a HostCapture,
    /// A node's name by its address, and whether it is serving.
    node_of: &'a F,
    /// Per endpoint (its index), its node as a client and as a server, once named.
    ids: Vec<[Option<crate::trace::NodeId>; 2]>,
    /// The capture's few operation names, each interned once, when first met.
    operation_ids: Vec<Option<crate::trace::OperationId>>,
    propagated_ids: Vec<Option<crate::trace::PropagatedId>>,
    translated_nodes: HashMap<(SocketAddr, bool), crate::trace::NodeId>,
}

impl<F: Fn(SocketAddr, bool) -> String> Adder<'_, F> {
    fn add(
        &mut self,
        window: &[CaptureMessage],
        blocks: &[PreparedBlock<'_>],
        builder: &mut TraceBuilder,
    ) {
        let capture = self.capture;
        let node_of = self.node_of;
        for ((prepared, text), block) in blocks.iter().zip(window.chunks(BLOCK)) {
            for (message, prepared) in block.iter().zip(prepared) {
                let Some(prepared) = prepared else {
                    builder.stats_mut().passed_through += 1;
                    continue;
                };
                let named = &prepared.named;
                let (sender, receiver) = match named.endpoints {
                    Some((from, to)) => {
                        let mut node = |index: u32, address: SocketAddr, serving: bool| {
                            *self.ids[index as usize][usize::from(serving)]
                                .get_or_insert_with(|| builder.node(&node_of(address, serving)))
                        };
                        (
                            node(from, named.from, named.from_serves),
                            node(to, named.to, !named.from_serves),
                        )
                    }
                    // Named as each end names itself: the nodes both ends agree on.
                    None => {
                        let mut node = |address: SocketAddr, serving: bool| {
                            *self
                                .translated_nodes
                                .entry((address, serving))
                                .or_insert_with(|| builder.node(&node_of(address, serving)))
                        };
                        (
                            node(named.from, named.from_serves),
                            node(named.to, !named.from_serves),
                        )
                    }
                };
                let call_id = builder.call_id(&text[prepared.call_id.clone()]);
                let framed = message.framed;
                if let Some(name) = capture.operations.get(framed.operation.0 as usize) {
                    let id = *self.operation_ids[framed.operation.0 as usize]
                        .get_or_insert_with(|| builder.operation_id(name));
                    builder.set_operation(call_id, id);
                    if let Some(system) = message.protocol.system(name) {
                        builder.system(call_id, system);
                    }
                }
                builder.status(call_id, framed.status);
                builder.set_content(call_id, framed.kind, framed.content.0);
                if let Some(request) = capture.propagated.get(framed.propagated.0 as usize) {
                    let id = *self.propagated_ids[framed.propagated.0 as usize]
                        .get_or_insert_with(|| builder.propagated_id(request));
                    builder.set_propagated(call_id, id);
                }
                let truth = match prepared.truth {
                    Some(instance) => builder.truth(instance),
                    None => Truth::NONE,
                };
                builder.transit(call_id, framed.kind, named.end, transit(message));
                builder.push(Message::observed(
                    named.end,
                    prepared.time,
                    framed.kind,
                    sender,
                    receiver,
                    call_id,
                    truth,
                ));
            }
        }
    }
}

/// What the capture saw of `message` between its first segment and its last.
pub(super) fn transit(message: &CaptureMessage) -> Transit {
    let framed = &message.framed;
    // Saturating: a capture's times are whatever its file says.
    let spread = framed.last.saturating_sub(framed.first).max(0);
    match message.held() {
        Some(stall) => Transit {
            spread,
            held: stall.waited.clamp(0, spread),
            why: Some(stall.cause),
        },
        None => Transit {
            spread,
            ..Transit::NONE
        },
    }
}

/// A message named, waiting to be interned.
struct Prepared<'a> {
    named: Named,
    /// Its call id, in its block's text.
    call_id: std::ops::Range<usize>,
    /// Its time in the common clock.
    time: crate::trace::Nanos,
    /// The path instance the truth gives its call.
    truth: Option<&'a String>,
}

/// A captured message as the trace names it.
pub(super) struct Named {
    /// The end the capture saw.
    pub end: End,
    /// Its sender, as the sender names itself.
    pub from: SocketAddr,
    /// Its receiver, as the receiver names itself.
    pub to: SocketAddr,
    /// Whether the sender is the connection's server (the message a return).
    pub from_serves: bool,
    /// The capture's endpoints (their indices) of the sender and receiver, where no
    /// translation renamed them.
    pub endpoints: Option<(u32, u32)>,
}

/// Names one capture's messages.
pub(super) struct Namer<'a> {
    capture: &'a HostCapture,
    /// Every endpoint's address formatted once: a call id names two of them.
    endpoint_text: Vec<String>,
}

impl<'a> Namer<'a> {
    /// A namer of `capture`'s messages (its own addresses decided, its translations
    /// learned), before any endpoint is formatted.
    pub fn new(capture: &'a HostCapture) -> Self {
        Namer {
            capture,
            endpoint_text: Vec::new(),
        }
    }

    /// Formats the endpoints of `endpoints` (all the capture's so far) not yet formatted.
    pub fn more_endpoints(&mut self, endpoints: &[SocketAddr]) {
        for endpoint in &endpoints[self.endpoint_text.len().min(endpoints.len())..] {
            self.endpoint_text.push(endpoint.to_string());
        }
    }

    /// Names `message`, whose endpoints are indices into `endpoints` (every one
    /// formatted by [`Namer::more_endpoints`]), and pushes its call id onto `call_id`:
    /// `None` for a message the capture saw pass between two hosts whose own captures
    /// hold it ([`HostCapture::passed`]).
    pub fn name(
        &self,
        endpoints: &[SocketAddr],
        message: &CaptureMessage,
        call_id: &mut String,
    ) -> Option<Named> {
        let capture = self.capture;
        let (client, server) = (
            endpoints[message.client as usize],
            endpoints[message.server as usize],
        );
        if !capture.passed.is_empty() && capture.passed.contains(&(client, server)) {
            return None;
        }
        let from_serves = message.framed.from == Side::Server;
        fn ordered<T>(from_serves: bool, client: T, server: T) -> (T, T) {
            match from_serves {
                false => (client, server),
                true => (server, client),
            }
        }
        let (from, to) = ordered(from_serves, client, server);
        let end = end_seen(&capture.local, from, to);
        let translated = match capture.translated.is_empty() {
            true => None,
            false => capture.translated.get(&(client, server)),
        };
        Some(match translated {
            // Named as each end names itself: the call id and the nodes both ends
            // agree on.
            Some(&(client, server)) => {
                push_call_id(call_id, message, &client.to_string(), &server.to_string());
                let (from, to) = ordered(from_serves, client, server);
                Named {
                    end,
                    from,
                    to,
                    from_serves,
                    endpoints: None,
                }
            }
            None => {
                push_call_id(
                    call_id,
                    message,
                    &self.endpoint_text[message.client as usize],
                    &self.endpoint_text[message.server as usize],
                );
                Named {
                    end,
                    from,
                    to,
                    from_serves,
                    endpoints: Some(ordered(from_serves, message.client, message.server)),
                }
            }
        })
    }
}

/// Whether a message from `from` to `to` was seen where it was sent or where it was
/// received, in a capture whose own addresses are `local`: a message between two
/// others (a capture of a whole network) counts as a send.
pub(super) fn end_seen(local: &BTreeSet<IpAddr>, from: SocketAddr, to: SocketAddr) -> End {
    if local.contains(&from.ip()) || !local.contains(&to.ip()) {
        End::Sent
    } else {
        End::Received
    }
}

/// The host an address belongs to: as [`node_names`] named it, else the address.
pub(super) fn host_of(names: &BTreeMap<IpAddr, String>, address: IpAddr) -> String {
    names
        .get(&address)
        .cloned()
        .unwrap_or_else(|| address.to_string())
}

/// A message's call id, the same in every capture that saw it:
/// `tcp:CLIENT>SERVER#KEY` (`udp:` for UDP). A call named by a correlation id its
/// request and reply both carry names the hosts without their ports: its halves may
/// travel on different connections ([`CallKey::spans_connections`]).
///
/// [`CallKey::spans_connections`]: crate::capture::protocol::CallKey::spans_connections
pub(super) fn push_call_id(
    text: &mut String,
    message: &CaptureMessage,
    client: &str,
    server: &str,
) {
    use std::fmt::Write;
    let host = |endpoint: &'_ str| -> usize {
        match message.framed.key.spans_connections() {
            true => endpoint.rfind(':').unwrap_or(endpoint.len()),
            false => endpoint.len(),
        }
    };
    text.push_str(if message.tcp { "tcp" } else { "udp" });
    text.push(':');
    text.push_str(&client[..host(client)]);
    text.push('>');
    text.push_str(&server[..host(server)]);
    let _ = write!(text, "#{}", message.framed.key);
}

/// Each capture's own clock, unchanged: for [`add_to_trace`] without alignment.
pub fn same_clock(_: usize, t: crate::trace::Nanos) -> crate::trace::Nanos {
    t
}

/// Node names for addresses: `--names` first; then the service a capture's one own
/// address is a replica of, unless `--node-by pod`; then the pods packet comments name;
/// then each file's host name for its one own address (a file with several own
/// addresses names none of them); then the name DNS answers in the captures gave.
pub(crate) fn node_names(
    captures: &[HostCapture],
    options: &CaptureOptions,
) -> BTreeMap<IpAddr, String> {
    let mut names = BTreeMap::new();
    let one_own = |capture: &HostCapture| match capture.local.len() {
        1 => capture.local.first().copied(),
        _ => None,
    };
    // A Service's replicas by the Service; then the pods that packet comments name
    // (explicit, where a node's capture holds several); then each capture's own
    // address by its host.
    for capture in captures {
        if let (Some(address), Some(service)) = (one_own(capture), &capture.replica_of) {
            if options.node_by != NodeBy::Pod {
                names.insert(address, service.clone());
            }
        }
    }
    for capture in captures {
        for (address, pod) in &capture.pods {
            names.entry(*address).or_insert_with(|| pod.clone());
        }
    }
    for capture in captures {
        if let Some(address) = one_own(capture) {
            names.entry(address).or_insert_with(|| capture.host.clone());
        }
    }
    // Then what the DNS answers in the captures called an address: the name the most
    // answers gave it (the first in order of a tie), as all captures counted it.
    let mut answered: BTreeMap<IpAddr, BTreeMap<&str, u64>> = BTreeMap::new();
    for capture in captures {
        for (address, counts) in &capture.dns_names {
            for (name, n) in counts {
                *answered
                    .entry(*address)
                    .or_default()
                    .entry(name)
                    .or_insert(0) += n;
            }
        }
    }
    for (address, counts) in answered {
        let most = counts
            .iter()
            .max_by_key(|&(name, n)| (*n, std::cmp::Reverse(*name)));
        if let Some((name, _)) = most {
            names.entry(address).or_insert_with(|| name.to_string());
        }
    }
    for (address, name) in &options.names {
        names.insert(*address, name.clone());
    }
    names
}

/// The ports each host serves on, for `--node-by service`.
fn services_per_host(
    captures: &[HostCapture],
    names: &BTreeMap<IpAddr, String>,
) -> BTreeMap<String, BTreeSet<u16>> {
    let mut services: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    for capture in captures {
        // Each server once, not once per message: naming it formats its address.
        let mut serving = vec![false; capture.endpoints.len()];
        // Servers behind a translation, by their own address.
        let mut translated = BTreeSet::new();
        for message in &capture.messages {
            let ends = (
                capture.endpoints[message.client as usize],
                capture.endpoints[message.server as usize],
            );
            match capture.translated.get(&ends) {
                Some(&(_, server)) => {
                    translated.insert(server);
                }
                None => serving[message.server as usize] = true,
            }
        }
        let servers = serving.iter().enumerate().filter(|(_, &s)| s);
        let servers = servers.map(|(at, _)| capture.endpoints[at]);
        for server in servers.chain(translated) {
            let host = names
                .get(&server.ip())
                .cloned()
                .unwrap_or_else(|| server.ip().to_string());
            services.entry(host).or_default().insert(server.port());
        }
    }
    services
}
