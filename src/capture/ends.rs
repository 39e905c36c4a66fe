//! A capture's message ends as typed ends ([`EndBlock`]), batch by batch, for nesting
//! captures too long to hold ([`crate::streaming`]): the same node names, ends, call
//! ids, operations, statuses and request ids [`super::add_to_trace`] gives the
//! builder, in the reference clock, as a text trace's lines would say them. Owns only
//! the writing; naming and the end rule are the capture module's.

use super::naming::{host_of, Namer};
use super::{HostCapture, MessageBatch, NodeBy};
use crate::trace::ends::EndBlock;
use crate::trace::text::LineFields;
use crate::trace::Nanos;
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Writes one capture's messages as typed ends; `clock` turns its times into the
/// reference clock.
pub struct EndWriter<'a> {
    names: &'a BTreeMap<IpAddr, String>,
    namer: Namer<'a>,
    truth: &'a BTreeMap<String, String>,
    clock: &'a (dyn Fn(Nanos) -> Nanos + Sync),
    hosts: HashMap<IpAddr, String>,
    call_id: String,
    /// Messages left out: the capture saw them pass between two hosts whose own
    /// captures hold them ([`HostCapture::passed`]).
    pub passed_through: u64,
}

impl<'a> EndWriter<'a> {
    /// A writer for `capture` (read once already, so that its own addresses are
    /// known), naming hosts by `names` ([`super::node_names`] of every capture). Only
    /// `--node-by host` streams: naming services needs every capture's servers first.
    pub fn new(
        capture: &'a HostCapture,
        names: &'a BTreeMap<IpAddr, String>,
        truth: &'a BTreeMap<String, String>,
        clock: &'a (dyn Fn(Nanos) -> Nanos + Sync),
    ) -> Self {
        EndWriter {
            names,
            namer: Namer::new(capture),
            truth,
            clock,
            hosts: HashMap::new(),
            call_id: String::new(),
            passed_through: 0,
        }
    }

    /// Whether captures read with `node_by` can be written as ends without the others.
    pub fn names_nodes(node_by: NodeBy) -> bool {
        matches!(node_by, NodeBy::Host | NodeBy::Pod)
    }

    /// Appends an end per message of `batch` to `out`.
    pub fn write(&mut self, batch: &MessageBatch<'_>, out: &mut EndBlock) {
        self.namer.more_endpoints(batch.endpoints);
        for message in batch.messages {
            self.call_id.clear();
            let Some(named) = self.namer.name(batch.endpoints, message, &mut self.call_id) else {
                self.passed_through += 1;
                continue;
            };
            for address in [named.from.ip(), named.to.ip()] {
                let names = self.names;
                self.hosts
                    .entry(address)
                    .or_insert_with(|| host_of(names, address));
            }
            let framed = &message.framed;
            let (sender, receiver) = (&self.hosts[&named.from.ip()], &self.hosts[&named.to.ip()]);
            out.push(&LineFields {
                time: (self.clock)(framed.first),
                kind: framed.kind,
                end: named.end,
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
                transit: super::naming::transit(message),
                content: framed.content.0,
            });
        }
    }
}
