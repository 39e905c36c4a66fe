//! `blackbox nest --otlp`: the export is read back through opentelemetry-proto's types,
//! encoded to protobuf and decoded again, and every span's parent link is checked
//! against the assignments of the same run.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};

mod support;
use support::{blackbox, shop_captures};

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attributes.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Value::StringValue(s) => Some(s.as_str()),
            _ => None,
        }
    })
}

/// (sender, receiver, call id) of a call, as the assignments name it.
type CallKey = (String, String, String);

/// One exported span, as the checks read it.
struct Exported {
    call: CallKey,
    client: bool,
    trace_id: Vec<u8>,
    parent: Vec<u8>,
    times: (u64, u64),
}

/// Spans nest in time as a trace viewer draws them: a server span within its client
/// span, a client span starting within the server span of the call it was made in
/// (the clocks of captures are aligned within microseconds; a call its parent did not
/// wait for may end after it).
fn nest_in_time(spans: &BTreeMap<Vec<u8>, Exported>) {
    const SLACK: u64 = 50_000;
    for span in spans.values() {
        let Some(parent) = spans.get(&span.parent) else {
            continue;
        };
        let ((start, end), (from, to)) = (span.times, parent.times);
        assert!(
            start + SLACK >= from,
            "{:?} starts before its parent",
            span.call
        );
        if !span.client {
            assert!(
                end <= to + SLACK,
                "{:?} ends after its client span",
                span.call
            );
        } else {
            assert!(
                start <= to + SLACK,
                "{:?} starts after its parent ended",
                span.call
            );
        }
    }
}

/// Runs nest with `--otlp` and `--assignments` on `inputs` and checks one against the
/// other, and that the spans nest in time; returns (calls, traces).
fn exported_parents_match_assignments(inputs: &[&str]) -> (usize, usize) {
    let dir = tempfile::tempdir().unwrap();
    let (otlp, assignments) = (dir.path().join("otlp.json"), dir.path().join("a.tsv"));
    blackbox()
        .args(["nest", "-q", "--top", "1"])
        .args(inputs)
        .arg("--otlp")
        .arg(&otlp)
        .arg("--assignments")
        .arg(&assignments)
        .assert()
        .success();

    let json = std::fs::read_to_string(&otlp).unwrap();
    let request: ExportTraceServiceRequest = serde_json::from_str(&json).expect("valid OTLP/JSON");
    let bytes = request.encode_to_vec();
    let decoded = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("valid protobuf");
    assert_eq!(decoded, request, "protobuf round trip changed the export");
    let again: ExportTraceServiceRequest =
        serde_json::from_str(&serde_json::to_string(&decoded).unwrap()).unwrap();
    assert_eq!(again, request, "JSON round trip changed the export");

    // span id → (call, client or server, trace id, parent span id, start, end)
    let mut spans: BTreeMap<Vec<u8>, Exported> = BTreeMap::new();
    for resource in &request.resource_spans {
        let service = attribute(
            &resource.resource.as_ref().unwrap().attributes,
            "service.name",
        )
        .expect("every resource names its service")
        .to_owned();
        for scope in &resource.scope_spans {
            for span in &scope.spans {
                assert!(span.start_time_unix_nano <= span.end_time_unix_nano);
                let call_id = attribute(&span.attributes, "blackbox.call_id")
                    .unwrap()
                    .to_owned();
                let client = span.kind == SpanKind::Client as i32;
                let key = if client {
                    let callee = attribute(&span.attributes, "peer.service").unwrap();
                    (service.clone(), callee.to_owned(), call_id)
                } else {
                    assert_eq!(span.kind, SpanKind::Server as i32);
                    // The caller is the service of its client span, found below.
                    (String::new(), service.clone(), call_id)
                };
                let old = spans.insert(
                    span.span_id.clone(),
                    Exported {
                        call: key,
                        client,
                        trace_id: span.trace_id.clone(),
                        parent: span.parent_span_id.clone(),
                        times: (span.start_time_unix_nano, span.end_time_unix_nano),
                    },
                );
                assert!(old.is_none(), "span ids are unique");
            }
        }
    }

    let table = std::fs::read_to_string(&assignments).unwrap();
    let mut expected: BTreeMap<CallKey, Option<CallKey>> = BTreeMap::new();
    for line in table.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let call = (f[0].to_owned(), f[1].to_owned(), f[2].to_owned());
        let parent = (f[4] != "-").then(|| (f[4].to_owned(), f[5].to_owned(), f[6].to_owned()));
        expected.insert(call, parent);
    }
    assert_eq!(
        spans.len(),
        2 * table.lines().count(),
        "two spans per call, --top notwithstanding"
    );

    // Each server span's parent is its call's client span, of the same call, at the
    // callee; each client span's parent is the server span of the call it was nested in.
    let mut traces = BTreeSet::new();
    let mut roots = 0;
    for server in spans.values().filter(|s| !s.client) {
        let client = &spans[&server.parent];
        assert!(client.client, "a server span's parent is a client span");
        assert_eq!(
            (&client.call.1, &client.call.2),
            (&server.call.1, &server.call.2),
            "of the same call"
        );
        assert_eq!(client.trace_id, server.trace_id);
        traces.insert(server.trace_id.clone());
        let call = &client.call;
        let parent = if client.parent.is_empty() {
            roots += 1;
            None
        } else {
            let parent_server = &spans[&client.parent];
            assert!(
                !parent_server.client,
                "a client span's parent is a server span"
            );
            assert_eq!(
                parent_server.trace_id, client.trace_id,
                "a child shares its parent's trace"
            );
            let parent_client = &spans[&parent_server.parent];
            Some(parent_client.call.clone())
        };
        assert_eq!(expected.get(call), Some(&parent), "parent of {call:?}");
    }
    assert_eq!(traces.len(), roots, "one trace per root call");
    nest_in_time(&spans);
    (spans.len() / 2, traces.len())
}

#[test]
fn otlp_parent_links_equal_the_assignments_on_the_sample_trace() {
    let (spans, traces) =
        exported_parents_match_assignments(&["tests/data/multitier-sample.trace"]);
    assert!(
        spans > 100 && traces > 10 && traces < spans,
        "{spans} spans, {traces} traces"
    );
}

#[test]
fn otlp_parent_links_equal_the_assignments_on_real_captures() {
    let captures = shop_captures();
    assert!(captures.len() >= 4, "{captures:?}");
    let refs: Vec<&str> = captures.iter().map(String::as_str).collect();
    let (spans, traces) = exported_parents_match_assignments(&refs);
    assert!(
        spans > traces && traces > 0,
        "{spans} spans, {traces} traces"
    );
}

#[test]
fn grpc_and_database_spans_are_named_by_their_operation_with_semantic_attributes() {
    let dir = tempfile::tempdir().unwrap();
    let otlp = dir.path().join("otlp.json");
    blackbox()
        .args(["nest", "-q", "--otlp"])
        .arg(&otlp)
        .args(support::captures_in("grpc"))
        .assert()
        .success();
    let request: ExportTraceServiceRequest =
        serde_json::from_str(&std::fs::read_to_string(&otlp).unwrap()).unwrap();
    // name → (attributes other than blackbox's, with int values as text), once per name.
    let mut seen: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for resource in &request.resource_spans {
        for span in &resource.scope_spans[0].spans {
            if span.kind != SpanKind::Server as i32 {
                continue;
            }
            let attributes = span
                .attributes
                .iter()
                .filter(|kv| !kv.key.starts_with("blackbox.") && kv.key != "peer.service")
                .map(|kv| {
                    let value = match kv.value.as_ref().unwrap().value.as_ref().unwrap() {
                        Value::StringValue(s) => s.clone(),
                        Value::IntValue(i) => i.to_string(),
                        other => format!("{other:?}"),
                    };
                    (kv.key.clone(), value)
                })
                .collect();
            seen.entry(span.name.clone()).or_insert(attributes);
        }
    }
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        seen["shop.Catalog/GetItem"],
        pairs(&[
            ("rpc.system", "grpc"),
            ("rpc.service", "shop.Catalog"),
            ("rpc.method", "GetItem"),
            ("rpc.grpc.status_code", "0"),
        ])
    );
    assert_eq!(
        seen["SELECT"],
        pairs(&[("db.system", "mysql"), ("db.operation.name", "SELECT")])
    );
    assert_eq!(
        seen["get"],
        pairs(&[("db.system", "memcached"), ("db.operation.name", "get")])
    );
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        [
            "INSERT",
            "SELECT",
            "SET",
            "get",
            "shop.Auth/Check",
            "shop.Catalog/GetItem",
            "shop.Gateway/GetItem",
            "shop.Gateway/PlaceOrder",
            "shop.Orders/Place",
        ]
    );
}
