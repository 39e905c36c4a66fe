//! The inferred path instances as OpenTelemetry traces in OTLP/JSON, built from
//! opentelemetry-proto's types so Jaeger, Grafana Tempo or an OpenTelemetry Collector
//! can import what was inferred from raw captures.
//!
//! One trace per root call; two spans per call, as instrumented services would write
//! them: a `CLIENT` span on the caller, from the call leaving to the last byte of its
//! answer arriving (caller's clock), parented to the `SERVER` span of the call it was
//! nested in, and a `SERVER` span on the callee, from the call's arrival to its answer
//! (callee's clock), parented to that `CLIENT` span. Times are in the aligned clock:
//! each service's resource says whether its host's clock was aligned, and by how much it
//! was turned. Where TCP held part of a message back until the peer's ACK, the span that
//! waited for it carries an event saying how long and why. Each server span says its own
//! time and its edge's transit on its request's critical path; the slowest requests of
//! each pattern are marked as its exemplars. Ids are derived from positions in the
//! result, so the same input gives the same file. Every call is exported, whatever
//! `--top` shows. Where the protocol named the call's operation the spans are named
//! after it and carry the semantic-convention attributes of its system (`rpc.*`,
//! `http.*`, `db.*`, and `messaging.*` for a broker's messages, whose spans are
//! `PRODUCER` at the sender and `CONSUMER` at the receiver); a failed answer makes the
//! spans' status an error. A delivery its publisher did not wait for (an asynchronous
//! hop through a broker, `⇒`) stays in its request's trace, as the publish's child, and
//! its consumer span links to the publish's producer span, as the messaging
//! conventions ask of a message's consumer.

use super::{NestReport, Render};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::critical::OnPath;
use crate::nesting::{roots, NO_PARENT};
use crate::trace::{Kind, Nanos, Status, Trace, Transit};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::{Event, Link, SpanKind},
    status::StatusCode,
    ResourceSpans, ScopeSpans, Span, Status as SpanStatus,
};
use std::io::{self, Write};

/// The OTLP/JSON export.
pub struct Otlp;

/// Attribute naming the call id that matched call and return.
pub const CALL_ID: &str = "blackbox.call_id";
/// Attribute of root spans naming their path pattern's signature.
pub const PATTERN: &str = "blackbox.pattern";
/// Semantic-convention attribute for the service called (on client spans).
pub const PEER_SERVICE: &str = "peer.service";
/// Attribute of a pattern's slowest requests' root spans: 1 for the slowest.
pub const EXEMPLAR: &str = "blackbox.pattern.slowest";
/// The slowest requests of each pattern marked as its exemplars.
pub const EXEMPLARS: usize = 3;
/// The name of the event a span gets where TCP held a message back.
pub const HELD_EVENT: &str = "blackbox.tcp.held";

impl Render for Otlp {
    fn render(&self, report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer(&mut *out, &request(report))?;
        out.write_all(b"\n")
    }
}

/// Where each root call stands among its pattern's: `Some(1)` for the slowest, up to
/// [`EXEMPLARS`].
fn exemplar_ranks(report: &NestReport<'_>) -> Vec<Option<u8>> {
    let nesting = report.nesting;
    let mut ranks = vec![None; nesting.pairs.len()];
    for pattern in &nesting.patterns {
        let mut slowest: Vec<u32> = pattern.instances.clone();
        slowest.sort_by_key(|&root| {
            (
                std::cmp::Reverse(nesting.pairs[root as usize].latency()),
                root,
            )
        });
        for (rank, &root) in slowest.iter().take(EXEMPLARS).enumerate() {
            ranks[root as usize] = Some(rank as u8 + 1);
        }
    }
    ranks
}

/// The export request: one resource per service, named after its node, holding the
/// client spans of the calls it made and the server spans of the calls into it, in
/// call-time order; services in name order.
pub fn request(report: &NestReport<'_>) -> ExportTraceServiceRequest {
    let (trace, nesting) = (report.trace, report.nesting);
    let pairs = &nesting.pairs;
    let roots = roots(&nesting.parent);
    let mut pattern_of = vec![None; pairs.len()];
    for pattern in &nesting.patterns {
        for &root in &pattern.instances {
            pattern_of[root as usize] = Some(pattern.signature.as_str());
        }
    }
    let exemplars = exemplar_ranks(report);
    let on_path = crate::nesting::patterns::critical_paths(trace, pairs, &nesting.parent);

    let mut services: Vec<Vec<Span>> = vec![Vec::new(); trace.nodes.len()];
    for (i, pair) in pairs.iter().enumerate() {
        let mut common = vec![string_attribute(CALL_ID, trace.call_id_text(pair.call_id))];
        let name = operation_attributes(trace, pair, &mut common).unwrap_or_else(|| {
            format!(
                "{}->{}",
                trace.node_name(pair.caller),
                trace.node_name(pair.callee)
            )
        });
        if let Some(signature) = pattern_of[i] {
            common.push(string_attribute(PATTERN, signature));
            if let Some(rank) = exemplars[i] {
                common.push(int_attribute(EXEMPLAR, i64::from(rank)));
            }
        }
        let status = match trace.status(pair.call_id) {
            Status::Failed(_) => Some(SpanStatus {
                code: StatusCode::Error as i32,
                ..SpanStatus::default()
            }),
            _ => None,
        };
        let trace_id = trace_id(roots[i], pairs[roots[i] as usize].caller_send);
        let (ask, answer) = (
            trace.transit(pair.call_id, Kind::Call),
            trace.transit(pair.call_id, Kind::Return),
        );
        let parent = nesting.parent[i];
        let messaging = trace.system(pair.call_id).is_some_and(is_messaging);
        let (client_kind, server_kind) = match messaging {
            true => (SpanKind::Producer, SpanKind::Consumer),
            false => (SpanKind::Client, SpanKind::Server),
        };
        // The asynchronous hop's consumer links to its producer.
        let links = match nesting.hops.binary_search(&(i as u32)) {
            Ok(_) => vec![Link {
                trace_id: trace_id.clone(),
                span_id: client_span_id(parent),
                ..Link::default()
            }],
            Err(_) => Vec::new(),
        };

        let mut client = common.clone();
        client.push(string_attribute(PEER_SERVICE, trace.node_name(pair.callee)));
        client.extend(network_attributes(trace, pair));
        let answered = pair.caller_return.saturating_add(answer.spread);
        services[pair.caller.0 as usize].push(Span {
            trace_id: trace_id.clone(),
            span_id: client_span_id(i as u32),
            parent_span_id: match parent {
                NO_PARENT => Vec::new(),
                parent => server_span_id(parent),
            },
            name: name.clone(),
            kind: client_kind as i32,
            status: status.clone(),
            start_time_unix_nano: unix_nanos(pair.caller_send),
            end_time_unix_nano: unix_nanos(answered.max(pair.caller_send)),
            attributes: client,
            events: held_event(answer, pair.caller_return, "answer"),
            ..Span::default()
        });

        let mut server = common;
        server.extend(critical_attributes(&on_path[i]));
        services[pair.callee.0 as usize].push(Span {
            trace_id,
            span_id: server_span_id(i as u32),
            parent_span_id: client_span_id(i as u32),
            name,
            kind: server_kind as i32,
            status,
            start_time_unix_nano: unix_nanos(pair.callee_recv),
            end_time_unix_nano: unix_nanos(pair.callee_return.max(pair.callee_recv)),
            attributes: server,
            events: held_event(ask, pair.callee_recv, "request"),
            links,
            ..Span::default()
        });
    }
    let mut nodes: Vec<usize> = (0..services.len())
        .filter(|&n| !services[n].is_empty())
        .collect();
    nodes.sort_by_key(|&n| trace.node_name(crate::trace::NodeId(n as u32)));
    let scope = InstrumentationScope {
        name: "blackbox".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    };
    ExportTraceServiceRequest {
        resource_spans: nodes
            .into_iter()
            .map(|n| {
                let name = trace.node_name(crate::trace::NodeId(n as u32));
                let mut attributes = vec![string_attribute("service.name", name)];
                attributes.extend(clock_attributes(report, name));
                ResourceSpans {
                    resource: Some(Resource {
                        attributes,
                        ..Resource::default()
                    }),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(scope.clone()),
                        spans: std::mem::take(&mut services[n]),
                        ..ScopeSpans::default()
                    }],
                    ..ResourceSpans::default()
                }
            })
            .collect(),
    }
}

/// Whether the service's host clock was aligned to the reference, and how: its offset
/// and drift from the reference, in the spans' times already taken away. None where the
/// input had no alignment (text traces) or the service is not one captured host.
fn clock_attributes(report: &NestReport<'_>, service: &str) -> Vec<KeyValue> {
    let Some(alignment) = report.alignment else {
        return Vec::new();
    };
    let Some(host) = alignment.hosts.iter().find(|h| h.host == service) else {
        return vec![bool_attribute("blackbox.clock.aligned", false)];
    };
    let aligned = host.reference || host.quality != crate::align::fit::Quality::Absent;
    let mut attributes = vec![
        bool_attribute("blackbox.clock.aligned", aligned),
        bool_attribute("blackbox.clock.reference", host.reference),
    ];
    if aligned && !host.reference {
        attributes.push(double_attribute("blackbox.clock.offset_ns", host.offset_ns));
        attributes.push(double_attribute("blackbox.clock.drift_ppm", host.drift_ppm));
        if let Some(bound) = host.bound_ns {
            attributes.push(double_attribute("blackbox.clock.bound_ns", bound));
        }
    }
    attributes
}

/// `server.address`, `server.port` and `network.transport` from the connection the
/// call travelled on, where the trace knows it.
fn network_attributes(trace: &Trace, pair: &CallPair) -> Vec<KeyValue> {
    let Some(connection) = trace.connection(pair.call_id) else {
        return Vec::new();
    };
    let (transport, ends) = match connection.split_once(':') {
        Some((t @ ("tcp" | "udp"), ends)) => (Some(t), ends),
        _ => (None, connection),
    };
    let server = ends
        .split_once('>')
        .or_else(|| ends.split_once('-'))
        .and_then(|(_, server)| server.split('#').next())
        .and_then(|server| server.parse::<std::net::SocketAddr>().ok());
    let mut attributes = Vec::new();
    if let Some(server) = server {
        attributes.push(string_attribute("server.address", &server.ip().to_string()));
        attributes.push(int_attribute("server.port", i64::from(server.port())));
    }
    if let Some(transport) = transport {
        attributes.push(string_attribute("network.transport", transport));
    }
    attributes
}

/// The call's own time and its edge's transit on its request's critical path.
fn critical_attributes(path: &OnPath) -> Vec<KeyValue> {
    vec![
        int_attribute("blackbox.critical_path.own_ns", path.own),
        int_attribute("blackbox.critical_path.transit_ns", path.transit),
    ]
}

/// The event of a message TCP held back: at its first byte, how long it took to its last
/// and how much of that was held, and why.
fn held_event(transit: Transit, first_byte: Nanos, what: &str) -> Vec<Event> {
    let Some(why) = transit.why else {
        return Vec::new();
    };
    vec![Event {
        time_unix_nano: unix_nanos(first_byte),
        name: HELD_EVENT.to_owned(),
        attributes: vec![
            string_attribute("blackbox.message", what),
            string_attribute("blackbox.tcp.held_by", why.token()),
            string_attribute("blackbox.tcp.held_because", why.meaning()),
            int_attribute("blackbox.tcp.held_ns", transit.held),
            int_attribute("blackbox.transit_ns", transit.spread),
        ],
        ..Event::default()
    }]
}

/// Adds the semantic-convention attributes of a call's operation, if its protocol
/// named it; returns the span's name (`shop.Catalog/GetItem`, `GET /item/{n}`,
/// `SELECT`).
fn operation_attributes(
    trace: &Trace,
    pair: &CallPair,
    attributes: &mut Vec<KeyValue>,
) -> Option<String> {
    let operation = trace.operation_name(trace.operation(pair.call_id))?;
    let status = trace.status(pair.call_id);
    let Some(system) = trace.system(pair.call_id) else {
        return Some(operation.to_owned());
    };
    match system {
        "grpc" => {
            let full = operation.trim_start_matches('/');
            attributes.push(string_attribute("rpc.system", "grpc"));
            if let Some((service, method)) = full.split_once('/') {
                attributes.push(string_attribute("rpc.service", service));
                attributes.push(string_attribute("rpc.method", method));
            }
            let code = match status {
                Status::Ok => Some(0),
                Status::Failed(code) => Some(code),
                Status::Unknown => None,
            };
            if let Some(code) = code {
                attributes.push(int_attribute("rpc.grpc.status_code", i64::from(code)));
            }
            Some(full.to_owned())
        }
        "http" => {
            if let Some((method, route)) = operation.split_once(' ') {
                attributes.push(string_attribute("http.request.method", method));
                // The path with its ids templated: a route, not the URL's own path.
                attributes.push(string_attribute("http.route", route));
            }
            if let Status::Failed(code) = status {
                attributes.push(int_attribute("http.response.status_code", i64::from(code)));
            }
            Some(operation.to_owned())
        }
        "apache_thrift" => {
            attributes.push(string_attribute("rpc.system", system));
            attributes.push(string_attribute("rpc.method", operation));
            Some(operation.to_owned())
        }
        // No span conventions for DNS: the question type names the span.
        "dns" => Some(operation.to_owned()),
        messaging if is_messaging(messaging) => {
            // The broker readers name a message `VERB DESTINATION`.
            let (verb, destination) = operation.split_once(' ').unwrap_or((operation, ""));
            attributes.push(string_attribute("messaging.system", messaging));
            attributes.push(string_attribute("messaging.operation.name", verb));
            let kind = match verb {
                "deliver" => "receive",
                _ => "send",
            };
            attributes.push(string_attribute("messaging.operation.type", kind));
            if !destination.is_empty() {
                attributes.push(string_attribute("messaging.destination.name", destination));
            }
            Some(operation.to_owned())
        }
        db => {
            attributes.push(string_attribute("db.system", db));
            attributes.push(string_attribute("db.operation.name", operation));
            if let Status::Failed(code) = status {
                attributes.push(string_attribute(
                    "db.response.status_code",
                    &code.to_string(),
                ));
            }
            Some(operation.to_owned())
        }
    }
}

/// Whether a system is a message broker's (the `messaging.system` values of the
/// semantic conventions, and NATS's and MQTT's, which they do not list).
fn is_messaging(system: &str) -> bool {
    matches!(system, "kafka" | "rabbitmq" | "nats" | "mqtt")
}

fn int_attribute(key: &str, value: i64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(value)),
        }),
        ..KeyValue::default()
    }
}

/// 16 bytes, never all zero: the root call's send time, then its index plus one.
fn trace_id(root: u32, sent: Nanos) -> Vec<u8> {
    let mut id = Vec::with_capacity(16);
    id.extend_from_slice(&sent.to_be_bytes());
    id.extend_from_slice(&(u64::from(root) + 1).to_be_bytes());
    id
}

/// 8 bytes, never all zero: twice the call's index plus one.
fn client_span_id(call: u32) -> Vec<u8> {
    (2 * u64::from(call) + 1).to_be_bytes().to_vec()
}

/// 8 bytes: twice the call's index plus two.
fn server_span_id(call: u32) -> Vec<u8> {
    (2 * u64::from(call) + 2).to_be_bytes().to_vec()
}

/// OTLP times are unsigned; a trace's times before 1970 (synthetic traces may start
/// at 0 or below) are clamped to the epoch.
fn unix_nanos(t: Nanos) -> u64 {
    t.max(0) as u64
}

fn bool_attribute(key: &str, value: bool) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::BoolValue(value)),
        }),
        ..KeyValue::default()
    }
}

fn double_attribute(key: &str, value: f64) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::DoubleValue(value)),
        }),
        ..KeyValue::default()
    }
}

fn string_attribute(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_zero() {
        assert_ne!(client_span_id(0), vec![0; 8]);
        assert_ne!(client_span_id(0), server_span_id(0));
        assert_ne!(server_span_id(0), client_span_id(1));
        assert_ne!(trace_id(0, 0), vec![0; 16]);
    }
}
