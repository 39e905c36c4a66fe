//! Collecting from Kubernetes pods through `kubectl`: the pods a label selector picks
//! in a namespace (running ones, each a host named for itself), the transport into each
//! (`kubectl exec -i` into a container that has tcpdump, or `kubectl debug -i` to add an
//! ephemeral container from an image that has it), and what the cluster said of its
//! pods, Services and EndpointSlices at the start and at the end, kept beside the
//! captures, so that `nest` names pods for their Services and a pod address reused by
//! another pod during the capture is caught. Owns those kubectl calls and their
//! reading; not the capture ([`super`]) nor naming from the JSON
//! ([`crate::capture::cluster`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The snapshot files' names in a collect directory.
pub const AT_START: &str = "kubernetes-start.json";
/// See [`AT_START`].
pub const AT_END: &str = "kubernetes-end.json";

/// Where and how to reach the pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The kubectl to run (`kubectl`, or a path).
    pub kubectl: String,
    /// The namespace.
    pub namespace: String,
    /// The label selector (`app=shop`).
    pub selector: String,
    /// How to run the capture in each pod.
    pub entry: Entry,
}

/// How the capture runs in a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// `kubectl exec -i` into this container of each pod, which has tcpdump.
    Container(String),
    /// An ephemeral container from this image (`kubectl debug -i --profile=netadmin`),
    /// for pods without tcpdump.
    DebugImage(String),
}

/// What the manifest keeps of the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The namespace.
    pub namespace: String,
    /// The selector.
    pub selector: String,
    /// The snapshot files, relative to the manifest.
    pub at_start: String,
    /// See `at_start`.
    pub at_end: Option<String>,
    /// Pod addresses that named another pod at the end than at the start.
    pub reused: Vec<Reused>,
}

/// A pod address that changed hands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reused {
    /// The address.
    pub address: String,
    /// The pod at the start.
    pub at_start: String,
    /// The pod at the end.
    pub at_end: String,
}

/// Why the cluster could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum KubernetesError {
    /// kubectl could not be run.
    #[error("cannot run {kubectl}: {source}")]
    Run {
        /// The command.
        kubectl: String,
        /// Why.
        source: std::io::Error,
    },
    /// kubectl refused.
    #[error("`{command}` failed: {stderr}")]
    Refused {
        /// The command line.
        command: String,
        /// What it said.
        stderr: String,
    },
    /// Its output was not the JSON asked for.
    #[error("`{command}` gave no pod list: {source}")]
    Json {
        /// The command line.
        command: String,
        /// Why.
        source: serde_json::Error,
    },
    /// The selector picked no running pod.
    #[error("no running pod in namespace {namespace} matches {selector}")]
    NoPods {
        /// The namespace.
        namespace: String,
        /// The selector.
        selector: String,
    },
}

/// A running pod the selector picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// Its name.
    pub name: String,
    /// Its addresses.
    pub addresses: Vec<String>,
}

impl Cluster {
    fn kubectl(&self, args: &[&str]) -> Result<Vec<u8>, KubernetesError> {
        let command = format!("{} {}", self.kubectl, args.join(" "));
        let output = Command::new(&self.kubectl)
            .args(args)
            .output()
            .map_err(|source| KubernetesError::Run {
                kubectl: self.kubectl.clone(),
                source,
            })?;
        if !output.status.success() {
            return Err(KubernetesError::Refused {
                command,
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            });
        }
        Ok(output.stdout)
    }

    /// The running pods the selector picks, by name.
    pub fn pods(&self) -> Result<Vec<Pod>, KubernetesError> {
        let args = [
            "get",
            "pods",
            "--namespace",
            &self.namespace,
            "--selector",
            &self.selector,
            "--output",
            "json",
        ];
        let json = self.kubectl(&args)?;
        let list: List = serde_json::from_slice(&json).map_err(|source| KubernetesError::Json {
            command: format!("{} {}", self.kubectl, args.join(" ")),
            source,
        })?;
        let mut pods: Vec<Pod> = list
            .items
            .into_iter()
            .filter(|pod| pod.status.phase.as_deref() == Some("Running"))
            .map(|pod| Pod {
                name: pod.metadata.name,
                addresses: pod.status.pod_ips.into_iter().map(|ip| ip.ip).collect(),
            })
            .collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        if pods.is_empty() {
            return Err(KubernetesError::NoPods {
                namespace: self.namespace.clone(),
                selector: self.selector.clone(),
            });
        }
        Ok(pods)
    }

    /// The namespace's pods, Services and EndpointSlices as JSON, into `path`.
    pub fn snapshot(&self, path: &Path) -> Result<(), KubernetesError> {
        let json = self.kubectl(&[
            "get",
            "pods,services,endpointslices",
            "--namespace",
            &self.namespace,
            "--output",
            "json",
        ])?;
        std::fs::write(path, json).map_err(|source| KubernetesError::Run {
            kubectl: format!("writing {}", path.display()),
            source,
        })
    }

    /// The transport's words into each pod (`{host}` is the pod's name); `unique`
    /// tells this run's ephemeral containers apart from earlier runs'.
    pub fn via(&self, unique: &str) -> Vec<String> {
        let mut words: Vec<String> = vec![self.kubectl.clone()];
        match &self.entry {
            Entry::Container(container) => words.extend(
                [
                    "exec",
                    "-i",
                    "--namespace",
                    &self.namespace,
                    "{host}",
                    "--container",
                    container,
                    "--",
                ]
                .map(str::to_owned),
            ),
            Entry::DebugImage(image) => words.extend([
                "debug".to_owned(),
                "-i".to_owned(),
                "--quiet".to_owned(),
                "--namespace".to_owned(),
                self.namespace.clone(),
                "{host}".to_owned(),
                format!("--image={image}"),
                "--profile=netadmin".to_owned(),
                format!("--container=blackbox-collect-{unique}"),
                "--".to_owned(),
            ]),
        }
        words
    }
}

/// The pod addresses that name another pod in `end` than in `start` (both snapshots'
/// JSON); unreadable snapshots give none.
pub fn reused(start: &[u8], end: &[u8]) -> Vec<Reused> {
    let owners = |json: &[u8]| -> BTreeMap<String, String> {
        let Ok(list) = serde_json::from_slice::<List>(json) else {
            return BTreeMap::new();
        };
        list.items
            .into_iter()
            .filter(|item| item.kind.as_deref().unwrap_or("Pod") == "Pod")
            .flat_map(|pod| {
                let name = pod.metadata.name;
                pod.status
                    .pod_ips
                    .into_iter()
                    .map(move |ip| (ip.ip, name.clone()))
            })
            .collect()
    };
    let (start, end) = (owners(start), owners(end));
    start
        .into_iter()
        .filter_map(|(address, at_start)| {
            let at_end = end.get(&address)?;
            (at_end != &at_start).then(|| Reused {
                address,
                at_start,
                at_end: at_end.clone(),
            })
        })
        .collect()
}

#[derive(Deserialize)]
struct List {
    #[serde(default)]
    items: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    kind: Option<String>,
    metadata: Metadata,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
}

#[derive(Deserialize, Default)]
struct Status {
    phase: Option<String>,
    #[serde(default, rename = "podIPs")]
    pod_ips: Vec<PodIp>,
}

#[derive(Deserialize)]
struct PodIp {
    ip: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(pods: &[(&str, &str)]) -> Vec<u8> {
        let items: Vec<String> = pods
            .iter()
            .map(|(name, ip)| {
                format!(
                    r#"{{"kind":"Pod","metadata":{{"name":"{name}"}},"status":{{"phase":"Running","podIPs":[{{"ip":"{ip}"}}]}}}}"#
                )
            })
            .collect();
        format!(r#"{{"kind":"List","items":[{}]}}"#, items.join(",")).into_bytes()
    }

    #[test]
    fn an_address_that_changed_pods_is_found() {
        let start = list(&[("web-1", "10.1.0.5"), ("db-0", "10.1.0.6")]);
        let end = list(&[("web-2", "10.1.0.5"), ("db-0", "10.1.0.6")]);
        assert_eq!(
            reused(&start, &end),
            vec![Reused {
                address: "10.1.0.5".into(),
                at_start: "web-1".into(),
                at_end: "web-2".into()
            }]
        );
        assert!(reused(&start, b"not json").is_empty());
    }

    #[test]
    fn the_transports_name_the_pod_and_the_container() {
        let cluster = Cluster {
            kubectl: "kubectl".into(),
            namespace: "shop".into(),
            selector: "app=shop".into(),
            entry: Entry::Container("debug".into()),
        };
        assert_eq!(
            cluster.via("x").join(" "),
            "kubectl exec -i --namespace shop {host} --container debug --"
        );
        let debug = Cluster {
            entry: Entry::DebugImage("nicolaka/netshoot".into()),
            ..cluster
        };
        assert_eq!(
            debug.via("20261130").join(" "),
            "kubectl debug -i --quiet --namespace shop {host} --image=nicolaka/netshoot --profile=netadmin --container=blackbox-collect-20261130 --"
        );
    }
}
