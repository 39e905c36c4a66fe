//! Node names from a Kubernetes cluster's own description: the JSON that
//! `kubectl get pods,services,endpointslices -A -o json` prints (a `List` of objects, or
//! one object). Owns reading it: a pod's addresses named for the Service it backs (its
//! EndpointSlices, or the older Endpoints), else for its workload (the Deployment,
//! StatefulSet, DaemonSet or Job that owns it), else for itself, or for itself alone by
//! pod; a Service's cluster addresses for the Service; names prefixed with their
//! namespace where the objects come from several. Does not own how names become nodes.

use super::CaptureError;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;

/// The names `text`, read from `path`, gives addresses; `by_pod` names each pod for
/// itself.
pub fn names(
    text: &str,
    path: &Path,
    by_pod: bool,
) -> Result<BTreeMap<IpAddr, String>, CaptureError> {
    let problem = |line: usize, problem: String| CaptureError::Names {
        path: path.to_path_buf(),
        line,
        problem,
    };
    let json: Value = serde_json::from_str(text)
        .map_err(|e| problem(e.line(), format!("not the JSON of kubectl get: {e}")))?;
    let items: Vec<&Value> = match json.get("items").and_then(Value::as_array) {
        Some(items) => items.iter().collect(),
        None => vec![&json],
    };
    let text_of = |v: &Value, path: &[&str]| -> Option<String> {
        path.iter()
            .try_fold(v, |v, key| v.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let namespaces: BTreeSet<String> = items
        .iter()
        .filter_map(|i| text_of(i, &["metadata", "namespace"]))
        .collect();
    let qualified = |item: &Value, name: String| match namespaces.len() > 1 {
        true => match text_of(item, &["metadata", "namespace"]) {
            Some(namespace) => format!("{namespace}/{name}"),
            None => name,
        },
        false => name,
    };
    let addresses = |values: Option<&Value>, field: Option<&str>| -> Vec<IpAddr> {
        let list = values
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        list.iter()
            .filter_map(|v| match field {
                Some(field) => v.get(field),
                None => Some(v),
            })
            .filter_map(Value::as_str)
            .filter_map(|a| a.parse().ok())
            .collect()
    };
    // By rank: a Service's name over a workload's over a pod's own.
    let mut services: BTreeMap<IpAddr, String> = BTreeMap::new();
    let mut pods: BTreeMap<IpAddr, (String, String)> = BTreeMap::new();
    for item in &items {
        let Some(name) = text_of(item, &["metadata", "name"]) else {
            continue;
        };
        match text_of(item, &["kind"]).as_deref() {
            Some("Pod") => {
                let status = item.get("status");
                let mut own = addresses(status.and_then(|s| s.get("podIPs")), Some("ip"));
                own.extend(one(status.and_then(|s| s.get("podIP"))));
                // The host network's pods share the node's address: not theirs alone.
                if item
                    .get("spec")
                    .and_then(|s| s.get("hostNetwork"))
                    .and_then(Value::as_bool)
                    == Some(true)
                {
                    continue;
                }
                let workload = qualified(item, workload(item).unwrap_or_else(|| name.clone()));
                let pod = qualified(item, name);
                for address in own {
                    pods.insert(address, (pod.clone(), workload.clone()));
                }
            }
            Some("Service") => {
                let spec = item.get("spec");
                let mut cluster = addresses(spec.and_then(|s| s.get("clusterIPs")), None);
                cluster.extend(one(spec.and_then(|s| s.get("clusterIP"))));
                let service = qualified(item, name);
                for address in cluster {
                    services.insert(address, service.clone());
                }
            }
            Some("EndpointSlice") => {
                let Some(service) =
                    text_of(item, &["metadata", "labels", "kubernetes.io/service-name"])
                else {
                    continue;
                };
                let service = qualified(item, service);
                for endpoint in item
                    .get("endpoints")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
                {
                    for address in addresses(endpoint.get("addresses"), None) {
                        services.entry(address).or_insert_with(|| service.clone());
                    }
                }
            }
            Some("Endpoints") => {
                let service = qualified(item, name);
                for subset in item
                    .get("subsets")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
                {
                    for address in addresses(subset.get("addresses"), Some("ip")) {
                        services.entry(address).or_insert_with(|| service.clone());
                    }
                }
            }
            _ => {}
        }
    }
    let mut names = BTreeMap::new();
    for (address, (pod, workload)) in &pods {
        let name = match (by_pod, services.get(address)) {
            (true, _) => pod,
            (false, Some(service)) => service,
            (false, None) => workload,
        };
        names.insert(*address, name.clone());
    }
    for (address, service) in services {
        names.entry(address).or_insert(service);
    }
    for (address, name) in &names {
        if name.contains(['(', ')', ',']) || name.chars().any(char::is_whitespace) {
            return Err(problem(
                0,
                format!("the name `{name}` of {address} holds a parenthesis, a comma or a space"),
            ));
        }
    }
    Ok(names)
}

/// The address a value holds, if it is one ("None" for a headless Service is not).
fn one(value: Option<&Value>) -> Option<IpAddr> {
    value?.as_str()?.parse().ok()
}

/// The workload that owns a pod: its ReplicaSet's Deployment (the ReplicaSet's name
/// less the pod template's hash), or the StatefulSet, DaemonSet or Job itself.
fn workload(pod: &Value) -> Option<String> {
    let owner = pod
        .get("metadata")?
        .get("ownerReferences")?
        .as_array()?
        .first()?;
    let name = owner.get("name")?.as_str()?;
    let hash = pod
        .get("metadata")?
        .get("labels")
        .and_then(|l| l.get("pod-template-hash"))
        .and_then(Value::as_str);
    Some(match (owner.get("kind")?.as_str()?, hash) {
        ("ReplicaSet", Some(hash)) => name
            .strip_suffix(hash)
            .and_then(|n| n.strip_suffix('-'))
            .unwrap_or(name)
            .to_string(),
        _ => name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = r#"{"apiVersion": "v1", "kind": "List", "items": [
      {"kind": "Pod", "metadata": {"name": "app-7d9f6c-x2k4l", "namespace": "shop",
        "labels": {"pod-template-hash": "7d9f6c"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "app-7d9f6c"}]},
       "status": {"podIP": "10.244.1.3", "podIPs": [{"ip": "10.244.1.3"}]}},
      {"kind": "Pod", "metadata": {"name": "app-7d9f6c-q8r9t", "namespace": "shop",
        "labels": {"pod-template-hash": "7d9f6c"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "app-7d9f6c"}]},
       "status": {"podIP": "10.244.2.2"}},
      {"kind": "Pod", "metadata": {"name": "db-0", "namespace": "shop",
        "ownerReferences": [{"kind": "StatefulSet", "name": "db"}]},
       "status": {"podIP": "10.244.1.4"}},
      {"kind": "Pod", "metadata": {"name": "kube-proxy-abc", "namespace": "shop"},
       "spec": {"hostNetwork": true}, "status": {"podIP": "10.78.0.1"}},
      {"kind": "Service", "metadata": {"name": "app", "namespace": "shop"},
       "spec": {"clusterIP": "10.96.0.60", "clusterIPs": ["10.96.0.60"]}},
      {"kind": "Service", "metadata": {"name": "headless", "namespace": "shop"},
       "spec": {"clusterIP": "None"}},
      {"kind": "EndpointSlice", "metadata": {"name": "app-abc", "namespace": "shop",
        "labels": {"kubernetes.io/service-name": "app"}},
       "endpoints": [{"addresses": ["10.244.1.3"]}, {"addresses": ["10.244.2.2"]}]}
    ]}"#;

    fn read(by_pod: bool) -> Vec<(String, String)> {
        names(CLUSTER, Path::new("cluster.json"), by_pod)
            .unwrap()
            .into_iter()
            .map(|(a, n)| (a.to_string(), n))
            .collect()
    }

    #[test]
    fn pods_are_named_for_their_service_else_their_workload_and_services_for_themselves() {
        let pair = |a: &str, n: &str| (a.to_string(), n.to_string());
        assert_eq!(
            read(false),
            [
                pair("10.96.0.60", "app"),
                pair("10.244.1.3", "app"),
                pair("10.244.1.4", "db"),
                pair("10.244.2.2", "app"),
            ]
        );
        assert_eq!(
            read(true),
            [
                pair("10.96.0.60", "app"),
                pair("10.244.1.3", "app-7d9f6c-x2k4l"),
                pair("10.244.1.4", "db-0"),
                pair("10.244.2.2", "app-7d9f6c-q8r9t"),
            ]
        );
    }

    #[test]
    fn what_is_not_the_json_of_kubectl_is_refused_with_its_line() {
        let error = names("{\n  \"items\": [\n  oops", Path::new("c.json"), false).unwrap_err();
        assert!(
            matches!(&error, CaptureError::Names { line: 3, problem, .. } if problem.starts_with("not the JSON of kubectl get")),
            "{error:?}"
        );
    }
}
