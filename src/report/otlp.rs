//! The inferred path instances as OpenTelemetry traces in OTLP/JSON, built from
//! opentelemetry-proto's types so Jaeger, Grafana Tempo or an OpenTelemetry Collector
//! can import what was inferred from raw captures.
//!
//! One trace per root call; one `SERVER` span per call, on the service it entered (the
//! callee), from its arrival to its answer on that service's clock, parented to the span
//! of the call it was nested in. Ids are derived from positions in the result, so the
//! same input gives the same file. Every call is exported, whatever `--top` shows.

use super::{NestReport, Render};
use crate::nesting::{roots, NO_PARENT};
use crate::trace::Nanos;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, InstrumentationScope, KeyValue};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{span::SpanKind, ResourceSpans, ScopeSpans, Span};
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
        let parent = nesting.parent[i];
        services[pair.callee.0 as usize].push(Span {
            trace_id: trace_id(roots[i], pairs[roots[i] as usize].caller_send),
            span_id: span_id(i as u32),
            parent_span_id: if parent == NO_PARENT {
                Vec::new()
            } else {
                span_id(parent)
            },
            name: format!(
                "{}->{}",
                trace.node_name(pair.caller),
                trace.node_name(pair.callee)
            ),
            kind: SpanKind::Server as i32,
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
