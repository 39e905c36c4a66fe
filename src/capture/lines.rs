//! A capture's message ends written as text trace lines, batch by batch, for nesting
//! captures too long to hold ([`crate::streaming`]): the same node names, ends, call
//! ids, operations, statuses and request ids [`super::add_to_trace`] gives the
//! builder, in the reference clock. Owns only the writing; naming and the end rule are
//! the capture module's.

use super::{end_seen, host_of, push_call_id, HostCapture, MessageBatch, NodeBy};
use crate::trace::text::{self, LineFields};
use crate::trace::Nanos;
use hashbrown::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

/// Writes one capture's messages as lines; `clock` turns its times into the reference
/// clock.
pub struct LineWriter<'a> {
    names: &'a BTreeMap<IpAddr, String>,
    local: &'a BTreeSet<IpAddr>,
    translated: &'a HashMap<(SocketAddr, SocketAddr), (SocketAddr, SocketAddr)>,
    truth: &'a BTreeMap<String, String>,
    clock: &'a (dyn Fn(Nanos) -> Nanos + Sync),
    /// Each endpoint's text, formatted once: a call id names two of them.
    endpoints: Vec<String>,
    hosts: HashMap<IpAddr, String>,
    call_id: String,
    line: String,
    /// Messages left out: the capture saw them pass between two hosts whose own
    /// captures hold them ([`HostCapture::passed`]).
    pub passed_through: u64,
    passed: &'a hashbrown::HashSet<(SocketAddr, SocketAddr)>,
}

impl<'a> LineWriter<'a> {
    /// A writer for `capture` (read once already, so that its own addresses are
    /// known), naming hosts by `names` ([`super::node_names`] of every capture). Only
    /// `--node-by host` streams: naming services needs every capture's servers first.
    pub fn new(
        capture: &'a HostCapture,
        names: &'a BTreeMap<IpAddr, String>,
        truth: &'a BTreeMap<String, String>,
        clock: &'a (dyn Fn(Nanos) -> Nanos + Sync),
    ) -> Self {
        LineWriter {
            names,
            local: &capture.local,
            translated: &capture.translated,
            truth,
            clock,
            endpoints: Vec::new(),
            hosts: HashMap::new(),
            call_id: String::new(),
            line: String::new(),
            passed_through: 0,
            passed: &capture.passed,
        }
    }

    /// Whether captures read with `node_by` can be written as lines.
    pub fn names_nodes(node_by: NodeBy) -> bool {
        matches!(node_by, NodeBy::Host | NodeBy::Pod)
    }

    /// Appends a line per message of `batch` to `out`.
    pub fn write(&mut self, batch: &MessageBatch<'_>, out: &mut Vec<u8>) {
        for endpoint in &batch.endpoints[self.endpoints.len()..] {
            self.endpoints.push(endpoint.to_string());
        }
        for message in batch.messages {
            let client = batch.endpoints[message.client as usize];
            let server = batch.endpoints[message.server as usize];
            if !self.passed.is_empty() && self.passed.contains(&(client, server)) {
                self.passed_through += 1;
                continue;
            }
            let framed = &message.framed;
            let (from, to) = match framed.from {
                super::Side::Client => (client, server),
                super::Side::Server => (server, client),
            };
            let end = end_seen(self.local, from, to);
            self.call_id.clear();
            let (from, to) = match self.translated.get(&(client, server)) {
                // Named as each end names itself, as `add_to_trace` does.
                Some(&(client, server)) => {
                    push_call_id(
                        &mut self.call_id,
                        message,
                        &client.to_string(),
                        &server.to_string(),
                    );
                    match framed.from {
                        super::Side::Client => (client, server),
                        super::Side::Server => (server, client),
                    }
                }
                None => {
                    push_call_id(
                        &mut self.call_id,
                        message,
                        &self.endpoints[message.client as usize],
                        &self.endpoints[message.server as usize],
                    );
                    (from, to)
                }
            };
            for address in [from.ip(), to.ip()] {
                let names = self.names;
                self.hosts
                    .entry(address)
                    .or_insert_with(|| host_of(names, address));
            }
            let (sender, receiver) = (&self.hosts[&from.ip()], &self.hosts[&to.ip()]);
            self.line.clear();
            text::push_line(
                &mut self.line,
                &LineFields {
                    time: (self.clock)(framed.first),
                    kind: framed.kind,
                    end,
                    sender,
                    receiver,
                    call_id: &self.call_id,
                    truth: self.truth.get(&self.call_id).map(String::as_str),
                    operation: batch
                        .operations
                        .get(framed.operation.0 as usize)
                        .map(String::as_str),
                    propagated: batch
                        .propagated
                        .get(framed.propagated.0 as usize)
                        .map(String::as_str),
                    status: framed.status,
                },
            );
            out.extend_from_slice(self.line.as_bytes());
        }
    }
}
