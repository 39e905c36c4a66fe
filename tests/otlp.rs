//! `blackbox nest --otlp`: the export is read back through opentelemetry-proto's types,
//! encoded to protobuf and decoded again, and every span's parent link is checked
//! against the assignments of the same run.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value::Value, KeyValue};
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

/// Runs nest with `--otlp` and `--assignments` on `inputs` and checks one against the
/// other; returns (spans, traces).
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

    // span id → (call, trace id, parent span id)
    let mut spans: BTreeMap<Vec<u8>, (CallKey, Vec<u8>, Vec<u8>)> = BTreeMap::new();
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
                let key = (
                    attribute(&span.attributes, "peer.service")
                        .unwrap()
                        .to_owned(),
                    service.clone(),
                    attribute(&span.attributes, "blackbox.call_id")
                        .unwrap()
                        .to_owned(),
                );
                let old = spans.insert(
                    span.span_id.clone(),
                    (key, span.trace_id.clone(), span.parent_span_id.clone()),
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
        table.lines().count(),
        "one span per call, --top notwithstanding"
    );

    let mut traces = BTreeSet::new();
    let mut roots = 0;
    for (call, trace_id, parent_id) in spans.values() {
        traces.insert(trace_id.clone());
        let parent = if parent_id.is_empty() {
            roots += 1;
            None
        } else {
            let (parent, parent_trace, _) = &spans[parent_id];
            assert_eq!(parent_trace, trace_id, "a child shares its parent's trace");
            Some(parent.clone())
        };
        assert_eq!(expected.get(call), Some(&parent), "parent of {call:?}");
    }
    assert_eq!(traces.len(), roots, "one trace per root call");
    (spans.len(), traces.len())
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
