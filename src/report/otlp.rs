//! The inferred path instances as OpenTelemetry traces in OTLP/JSON, built from
//! opentelemetry-proto's types so Jaeger, Grafana Tempo or an OpenTelemetry Collector
//! can import what was inferred from raw captures.
//!
//! One trace per root call; one `SERVER` span per call, on the service it entered (the
//! callee), from its arrival to its answer on that service's clock, parented to the span
//! of the call it was nested in. Ids are derived from positions in the result, so the
//! same input gives the same file. Every call is exported, whatever `--top` shows.
//! Where the protocol named the call's operation the span is named after it and
//! carries the semantic-convention attributes of its system (`rpc.*`, `http.*`,
//! `db.*`); a failed answer makes the span's status an error.

use super::{NestReport, Render};
use crate::nesting::call_pairs::CallPair;
use crate::nesting::{roots, NO_PARENT};
use crate::trace::{Nanos, Status, Trace};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{
    span::SpanKind, status::StatusCode, ResourceSpans, ScopeSpans, Span, Status as SpanStatus,
};
use std::io::{self, Write};

/// The OTLP/JSON export.
pub struct Otlp;

/// Attribute naming the call id that matched call and return.
pub const CALL_ID: &str = "blackbox.call_id";
/// Attribute of root spans naming their path pattern's signature.
pub const PATTERN: &str = "blackbox.pattern";
/// Semantic-convention attribute for the calling service.
pub const PEER_SERVICE: &str = "peer.service";

impl Render for Otlp {
    fn render(&self, report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer(&mut *out, &request(report))?;
        out.write_all(b"\n")
    }
}

/// The export request: one resource per service, named after its node, holding the
/// spans of the calls into it in call-time order; services in name order.
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

    let mut services: Vec<Vec<Span>> = vec![Vec::new(); trace.nodes.len()];
    for (i, pair) in pairs.iter().enumerate() {
        let mut attributes = vec![
            string_attribute(PEER_SERVICE, trace.node_name(pair.caller)),
            string_attribute(CALL_ID, trace.call_id_text(pair.call_id)),
        ];
        if let Some(signature) = pattern_of[i] {
            attributes.push(string_attribute(PATTERN, signature));
        }
        let name = operation_attributes(trace, pair, &mut attributes).unwrap_or_else(|| {
            format!(
                "{}->{}",
                trace.node_name(pair.caller),
                trace.node_name(pair.callee)
            )
        });
        let status = match trace.status(pair.call_id) {
            Status::Failed(_) => Some(SpanStatus {
                code: StatusCode::Error as i32,
                ..SpanStatus::default()
            }),
            _ => None,
        };
        let parent = nesting.parent[i];
        services[pair.callee.0 as usize].push(Span {
            trace_id: trace_id(roots[i], pairs[roots[i] as usize].caller_send),
            span_id: span_id(i as u32),
            parent_span_id: if parent == NO_PARENT {
                Vec::new()
            } else {
                span_id(parent)
            },
            name,
            kind: SpanKind::Server as i32,
            status,
            start_time_unix_nano: unix_nanos(pair.callee_recv),
            end_time_unix_nano: unix_nanos(pair.callee_return),
            attributes,
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
            .map(|n| ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![string_attribute(
                        "service.name",
                        trace.node_name(crate::trace::NodeId(n as u32)),
                    )],
                    ..Resource::default()
                }),
                scope_spans: vec![ScopeSpans {
                    scope: Some(scope.clone()),
                    spans: std::mem::take(&mut services[n]),
                    ..ScopeSpans::default()
                }],
                ..ResourceSpans::default()
            })
            .collect(),
    }
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

/// 8 bytes, never all zero: the call's index plus one.
fn span_id(call: u32) -> Vec<u8> {
    (u64::from(call) + 1).to_be_bytes().to_vec()
}

/// OTLP times are unsigned; a trace's times before 1970 (synthetic traces may start
/// at 0 or below) are clamped to the epoch.
fn unix_nanos(t: Nanos) -> u64 {
    t.max(0) as u64
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
        assert_ne!(span_id(0), vec![0; 8]);
        assert_ne!(trace_id(0, 0), vec![0; 16]);
    }
}
