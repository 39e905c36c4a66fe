//! `manifest.json`, what `blackbox collect` records beside the captures it writes: per
//! host how it was captured (interface, filter, snaplen, tool), when (its own clock at
//! start and stop), what was lost (the tool's counters of packets dropped by the kernel
//! and by the interface, packets cut short, bytes over the limit), the segmentation
//! offloads and the clock's state, each file's SHA-256; and which address is which
//! host. Read back by `blackbox nest DIR` (through [`crate::input`]): the files and
//! their hosts, the names of the addresses, and the warnings a user must see
//! ([`Collected::warnings`]). Owns the format and those warnings; not the capturing
//! ([`super`]).

use crate::capture::stats::FileStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The manifest's file name in a collect directory.
pub const FILE_NAME: &str = "manifest.json";

/// The format's version; a manifest of another is refused.
pub const VERSION: u32 = 1;

/// What one `blackbox collect` run recorded.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// The format's version ([`VERSION`]).
    pub version: u32,
    /// The blackbox that wrote it.
    pub collector: String,
    /// What was asked of every host.
    pub asked: Asked,
    /// What ended the capture: `duration`, `interrupted`, `every host ended`,
    /// `disk full`.
    pub stopped_by: String,
    /// Per host, in the order given.
    pub hosts: Vec<HostRecord>,
    /// Which address is which host, from the hosts' own interfaces (loopback left out)
    /// and, on Kubernetes, the pods'.
    pub names: Vec<AddressName>,
    /// On Kubernetes, what the cluster said at the start and at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<super::kubernetes::Record>,
}

/// What was asked of every host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Asked {
    /// The interface.
    pub interface: String,
    /// The capture filter, if any.
    pub filter: Option<String>,
    /// Bytes kept of each packet (0: whole packets).
    pub snaplen: u32,
    /// The payload bytes kept after the headers, when `--payload-bytes` set the snaplen.
    pub payload_bytes: Option<u32>,
    /// The kernel buffer in KiB, if set.
    pub buffer_kib: Option<u32>,
    /// The most bytes kept per host.
    pub max_bytes: u64,
    /// How long to capture, in seconds.
    pub duration_s: f64,
}

/// One host's capture.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    /// The host's name, as given.
    pub name: String,
    /// The transport's command (the template filled in).
    pub via: Vec<String>,
    /// The capture's file, relative to the manifest, when one was written.
    pub file: Option<String>,
    /// `captured`, `lost` (the transport ended before it was stopped; the capture up
    /// to then is kept) or `failed` (no capture).
    pub status: String,
    /// Why not `captured`, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The host's name for itself.
    pub hostname: Option<String>,
    /// The capture tool and its version.
    pub tool: Option<String>,
    /// The filter the tool ran (with the transport's own connection left out).
    pub filter: Option<String>,
    /// The interface the tool said it listens on.
    pub listening_on: Option<String>,
    /// The host's clock when the tool started and when it was stopped (seconds since
    /// the epoch, as the host's `date` gave them).
    pub started: Option<String>,
    /// See `started`.
    pub stopped: Option<String>,
    /// The tool's exit status.
    pub exit_status: Option<i32>,
    /// Packets and bytes written to the file; packets the snaplen cut short; packets
    /// past the byte limit (not kept).
    pub packets_written: u64,
    /// See `packets_written`.
    pub bytes_written: u64,
    /// See `packets_written`.
    pub packets_truncated: u64,
    /// See `packets_written`.
    pub packets_over_limit: u64,
    /// The first and last packets' times (seconds since the epoch).
    pub first_packet: Option<String>,
    /// See `first_packet`.
    pub last_packet: Option<String>,
    /// The tool's end-of-run counters, where it printed them.
    pub counters: Counters,
    /// The segmentation offloads of the captured interfaces.
    pub offloads: Vec<Offload>,
    /// The clock's state: what said it, and its lines.
    pub clock: Clock,
    /// The host's addresses (`10.0.0.2/24`), by interface.
    pub addresses: Vec<InterfaceAddress>,
    /// The file's SHA-256.
    pub sha256: Option<String>,
    /// What else the tool, the script or the transport said.
    pub messages: Vec<String>,
}

impl HostRecord {
    /// The addresses the host listed as its own that others reach it at: loopback and
    /// link-local ones left out.
    pub fn own_addresses(&self) -> Vec<IpAddr> {
        self.addresses
            .iter()
            .filter_map(|address| {
                let bare = address.address.split('/').next()?;
                let ip: IpAddr = bare.parse().ok()?;
                let link_local = match ip {
                    IpAddr::V4(v4) => v4.is_link_local(),
                    IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
                };
                (!ip.is_loopback() && !link_local).then_some(ip)
            })
            .collect()
    }
}

/// The tool's end-of-run counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Packets the tool wrote.
    pub captured: Option<u64>,
    /// Packets the filter passed.
    pub received_by_filter: Option<u64>,
    /// Packets the kernel dropped (its buffer was full).
    pub dropped_by_kernel: Option<u64>,
    /// Packets the interface dropped.
    pub dropped_by_interface: Option<u64>,
}

/// A segmentation offload's state on an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offload {
    /// The interface.
    pub interface: String,
    /// The feature, as ethtool names it.
    pub feature: String,
    /// Whether it is on.
    pub on: bool,
}

/// The clock's state as the host told it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clock {
    /// `chrony`, `timedatectl`, or `none`.
    pub source: Option<String>,
    /// Its lines.
    pub lines: Vec<String>,
}

/// An address on an interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceAddress {
    /// The interface.
    pub interface: String,
    /// The address with its prefix length.
    pub address: String,
}

/// An address and the host (or pod) it is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AddressName {
    /// The address.
    pub address: IpAddr,
    /// The name.
    pub name: String,
}

/// Why a manifest cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {}", path.display())]
    Io {
        /// The manifest.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// Not a manifest.
    #[error("{} is not a blackbox collect manifest", path.display())]
    Json {
        /// The manifest.
        path: PathBuf,
        /// Where and why.
        source: serde_json::Error,
    },
    /// Another version.
    #[error("{} is a manifest of version {version}; this blackbox reads version {VERSION}", path.display())]
    Version {
        /// The manifest.
        path: PathBuf,
        /// Its version.
        version: u32,
    },
}

/// A manifest read, with the directory its files are in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Collected {
    /// The directory.
    pub dir: PathBuf,
    /// What it says.
    pub manifest: Manifest,
}

impl Collected {
    /// Reads `dir`'s manifest, if it has one.
    pub fn read(dir: &Path) -> Result<Option<Collected>, ManifestError> {
        let path = dir.join(FILE_NAME);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ManifestError::Io { path, source }),
        };
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|source| ManifestError::Json {
                path: path.clone(),
                source,
            })?;
        let version = value.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
        if version != VERSION {
            return Err(ManifestError::Version { path, version });
        }
        // Read again from the text, so that an error says where it is.
        let manifest = serde_json::from_str(&text).map_err(|source| ManifestError::Json {
            path: path.clone(),
            source,
        })?;
        Ok(Some(Collected {
            dir: dir.to_path_buf(),
            manifest,
        }))
    }

    /// The captures written, each with its host, in the manifest's order.
    pub fn captures(&self) -> Vec<(PathBuf, String)> {
        self.manifest
            .hosts
            .iter()
            .filter_map(|host| Some((self.dir.join(host.file.as_ref()?), host.name.clone())))
            .collect()
    }

    /// Each capture's host's own addresses, as the host listed them; an address
    /// several hosts list (a bridge every node has, a Service's address on every
    /// node) is none of theirs.
    pub fn own_addresses(&self) -> Vec<(PathBuf, Vec<IpAddr>)> {
        let mut listed: BTreeMap<IpAddr, usize> = BTreeMap::new();
        for host in &self.manifest.hosts {
            for address in host.own_addresses() {
                *listed.entry(address).or_default() += 1;
            }
        }
        self.manifest
            .hosts
            .iter()
            .filter_map(|host| {
                let own = host
                    .own_addresses()
                    .into_iter()
                    .filter(|address| listed[address] == 1)
                    .collect();
                Some((self.dir.join(host.file.as_ref()?), own))
            })
            .collect()
    }

    /// What a user must know of each host's capture before trusting what is made of
    /// it: packets lost (dropped by the kernel or the interface, past the byte limit),
    /// hosts that failed or were lost, packets the snaplen cut, connections that began
    /// before the capture, segmentation offloads, an unsynchronised clock. `read` is
    /// what reading the captures counted, by file, matched to the hosts by file.
    /// Only this manifest's captures among those read are spoken of (with `diff`, each
    /// side's), and its failed hosts only where one of them was; with nothing read,
    /// every host.
    pub fn warnings(&self, read: &[(&Path, &FileStats)]) -> Vec<String> {
        let mut warnings = Vec::new();
        let of = |file: &PathBuf| read.iter().find(|(path, _)| path == file);
        let any_read = self.captures().iter().any(|(file, _)| of(file).is_some());
        if !read.is_empty() && !any_read {
            return warnings;
        }
        for host in &self.manifest.hosts {
            let file = host.file.as_ref().map(|file| self.dir.join(file));
            let found = file.as_ref().and_then(of);
            if file.is_some() && found.is_none() && !read.is_empty() {
                continue;
            }
            let stats = found.map(|&(_, stats)| stats);
            let said = self.said_of(host, stats);
            if !said.is_empty() {
                warnings.push(format!("{}: {}", host.name, said.join("; ")));
            }
        }
        if let Some(kubernetes) = &self.manifest.kubernetes {
            for reused in &kubernetes.reused {
                warnings.push(format!(
                    "address {} was {} at the start and {} at the end: its messages are named for the first",
                    reused.address, reused.at_start, reused.at_end
                ));
            }
        }
        warnings
    }

    /// What to say of one host, the gravest first.
    fn said_of(&self, host: &HostRecord, stats: Option<&FileStats>) -> Vec<String> {
        let mut said = Vec::new();
        match host.status.as_str() {
            "captured" => {}
            "capturing" => said.push(
                "its capture was never finished (collect ended before it could say how it ended): its counters of drops are unknown"
                    .to_owned(),
            ),
            "lost" => said.push(format!(
                "the capture ended early ({}); the packets before are used",
                host.problem.as_deref().unwrap_or("its transport ended")
            )),
            _ => said.push(format!(
                "not captured: {}",
                host.problem.as_deref().unwrap_or("no reason recorded")
            )),
        }
        let counters = &host.counters;
        let dropped =
            counters.dropped_by_kernel.unwrap_or(0) + counters.dropped_by_interface.unwrap_or(0);
        if dropped > 0 {
            let seen = counters
                .received_by_filter
                .or(counters.captured)
                .unwrap_or(host.packets_written);
            let by: Vec<String> = [
                (counters.dropped_by_kernel, "the kernel"),
                (counters.dropped_by_interface, "the interface"),
            ]
            .into_iter()
            .filter_map(|(n, who)| Some(format!("{} by {who}", n.filter(|&n| n > 0)?)))
            .collect();
            said.push(format!(
                "{dropped} packets dropped while capturing ({}; {} of the {seen} the filter passed): calls and returns are missing, and the paths through it are less sure (a larger --buffer-size or a narrower --filter keeps up)",
                by.join(", "),
                percent(dropped, seen),
            ));
        }
        if host.packets_over_limit > 0 {
            said.push(format!(
                "the byte limit ({} bytes) was reached: {} packets after it were not kept",
                self.manifest.asked.max_bytes, host.packets_over_limit
            ));
        }
        let truncated = stats.map_or(host.packets_truncated, |s| s.snaplen_truncated);
        if truncated > 0 {
            said.push(format!(
                "{truncated} packets cut short by the snaplen ({} bytes): their payload past it is not read",
                self.manifest.asked.snaplen
            ));
        }
        if let Some(stats) = stats.filter(|s| s.flows_without_handshake > 0) {
            said.push(format!(
                "{} of {} TCP connections began before the capture (server guessed by port)",
                stats.flows_without_handshake, stats.tcp_flows
            ));
        }
        let mut offloaded: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for offload in host.offloads.iter().filter(|o| o.on) {
            offloaded
                .entry(&offload.interface)
                .or_default()
                .push(short_offload(&offload.feature));
        }
        for (interface, features) in offloaded {
            said.push(format!(
                "segmentation offload ({} on {interface}): segments as the kernel handed them, not as on the wire",
                features.join(", ")
            ));
        }
        if let Some(state) = unsynchronised(&host.clock) {
            said.push(format!("its clock {state}"));
        }
        said
    }
}

/// ethtool's feature names as users know them.
fn short_offload(feature: &str) -> &str {
    match feature {
        "tcp-segmentation-offload" => "TSO",
        "generic-segmentation-offload" => "GSO",
        "generic-receive-offload" => "GRO",
        "large-receive-offload" => "LRO",
        other => other,
    }
}

/// How the clock's lines say it is not synchronised, if they do.
fn unsynchronised(clock: &Clock) -> Option<String> {
    let value = |key: &str, separator: char| {
        clock.lines.iter().find_map(|line| {
            let (k, v) = line.split_once(separator)?;
            (k.trim() == key).then(|| v.trim().to_owned())
        })
    };
    match clock.source.as_deref()? {
        "chrony" => value("Leap status", ':')
            .filter(|status| status != "Normal")
            .map(|status| format!("was not synchronised (chrony: Leap status {status})")),
        "timedatectl" => value("NTPSynchronized", '=')
            .filter(|status| status != "yes")
            .map(|_| "was not synchronised to NTP (timedatectl: NTPSynchronized=no)".to_owned()),
        _ => None,
    }
}

fn percent(part: u64, whole: u64) -> String {
    match whole {
        0 => "all".to_owned(),
        _ => format!("{:.2}%", part as f64 * 100.0 / whole as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str) -> HostRecord {
        HostRecord {
            name: name.into(),
            file: Some(format!("{name}.pcap")),
            status: "captured".into(),
            ..HostRecord::default()
        }
    }

    #[test]
    fn a_round_trip_keeps_every_field_and_other_versions_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = Manifest {
            version: VERSION,
            hosts: vec![host("web")],
            names: vec![AddressName {
                address: "10.0.0.2".parse().unwrap(),
                name: "web".into(),
            }],
            ..Manifest::default()
        };
        manifest.hosts[0].counters.dropped_by_kernel = Some(3);
        std::fs::write(
            dir.path().join(FILE_NAME),
            serde_json::to_string_pretty(&manifest).unwrap(),
        )
        .unwrap();
        let read = Collected::read(dir.path()).unwrap().unwrap();
        assert_eq!(read.manifest, manifest);
        assert_eq!(
            read.captures(),
            vec![(dir.path().join("web.pcap"), "web".to_owned())]
        );
        std::fs::write(dir.path().join(FILE_NAME), r#"{"version": 9}"#).unwrap();
        let error = Collected::read(dir.path()).unwrap_err().to_string();
        assert!(error.contains("version 9"), "{error}");
        assert!(Collected::read(&dir.path().join("none")).unwrap().is_none());
    }

    #[test]
    fn drops_failures_offloads_and_clocks_are_warned_of() {
        let mut web = host("web");
        web.counters = Counters {
            captured: Some(900),
            received_by_filter: Some(1000),
            dropped_by_kernel: Some(100),
            dropped_by_interface: None,
        };
        web.offloads.push(Offload {
            interface: "eth0".into(),
            feature: "generic-receive-offload".into(),
            on: true,
        });
        web.clock = Clock {
            source: Some("chrony".into()),
            lines: vec!["Leap status     : Not synchronised".into()],
        };
        let mut db = host("db");
        db.status = "failed".into();
        db.file = None;
        db.problem = Some("ssh: connect to host db port 22: Connection refused".into());
        let collected = Collected {
            dir: PathBuf::from("run"),
            manifest: Manifest {
                version: VERSION,
                hosts: vec![web, db],
                ..Manifest::default()
            },
        };
        let warnings = collected.warnings(&[]);
        assert_eq!(warnings.len(), 2, "{warnings:#?}");
        assert!(
            warnings[0].starts_with(
                "web: 100 packets dropped while capturing (100 by the kernel; 10.00% of the 1000"
            ),
            "{}",
            warnings[0]
        );
        assert!(warnings[0].contains("; segmentation offload (GRO on eth0): "));
        assert!(warnings[0]
            .ends_with("; its clock was not synchronised (chrony: Leap status Not synchronised)"));
        assert!(warnings[1].starts_with("db: not captured: ssh: connect"));
    }
}
