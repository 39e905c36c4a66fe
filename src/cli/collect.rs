//! `blackbox collect`: its flags, the hosts file, Ctrl-C, and what it prints while and
//! after it captures. The capturing is [`blackbox::collect`]'s.

use anyhow::{Context, Result};
use blackbox::collect::{self, kubernetes, manifest::Manifest, CollectOptions, Host, Progress};
use blackbox::exit::Usage;
use blackbox::trace::Nanos;
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use super::args::duration;

/// A line on stderr, where a write that fails (a terminal closed under a SIGHUP) is
/// let go: collect must still stop every host.
macro_rules! tell {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

#[derive(Args)]
#[command(
    after_long_help = "Hosts file: one host per line, its name and, optionally, its own
transport command (else --via); `{host}` stands for the name, `#` starts a comment:

  # name   transport (optional)
  web      ssh -p 2222 admin@10.0.0.2
  app      ssh app.internal
  db

The transport is run with `sh -s` appended and the capture script fed on its standard
input, so it can be anything that runs a command on the host: `ssh {host}`, `ip netns
exec {host}`, `kubectl exec -i -n shop {host} -c debug --`, `docker exec -i {host}`.
Each host needs a POSIX sh and tcpdump (or dumpcap) and the right to capture (root, or
CAP_NET_RAW and CAP_NET_ADMIN). Under ssh the capture leaves out its own connection.

Stopping: after --duration from the moment every host captures, or on Ctrl-C (SIGINT) or
SIGTERM, every host is stopped at once and keeps what it captured. If collect itself is
killed or a link is lost, each host's script sees its input end and stops its capture:
nothing is left running (and where the host has timeout(1), the capture also ends by
itself past its deadline).

Exit status: 0 when every host was captured; 1 when some were not (each is named; the
other captures and the manifest are kept) or nothing could be written; 2 for bad flags
or a bad hosts file.

Examples:
  blackbox collect --hosts hosts.txt --via 'ssh {host}' --duration 60s --out run1
  blackbox nest run1
  blackbox collect --host web --host app --host db --via 'ip netns exec shop-{host}' --out run2
  blackbox collect --hosts hosts.txt --via 'ssh {host}' --filter 'tcp' --payload-bytes 256 --out run3
  blackbox collect --kubernetes --namespace shop --selector app=shop --container debug --out run4"
)]
pub(super) struct CollectArgs {
    /// Where the captures (one `HOST.pcap` per host) and `manifest.json` go
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,

    /// A file of hosts, one per line: a name and, optionally, its transport command
    #[arg(long, value_name = "FILE", help_heading = "Hosts")]
    hosts: Option<PathBuf>,

    /// A host to capture on (repeatable; with --via)
    #[arg(long = "host", value_name = "NAME", help_heading = "Hosts")]
    host: Vec<String>,

    /// How to run a command on a host, `{host}` standing for its name
    ///
    /// How to run a command on a host: the words of a command, `{host}` standing for its
    /// name (`ssh {host}`, `ip netns exec {host}`, `kubectl exec -i -n shop {host} -c
    /// debug --`), split as a shell splits them. For hosts whose line in --hosts names
    /// no transport of its own.
    #[arg(long, value_name = "TEMPLATE", help_heading = "Hosts")]
    via: Option<String>,

    /// Capture on the pods a label selector picks, through kubectl
    ///
    /// Capture on the running pods --selector picks in --namespace, each a host named
    /// for its pod: into --container (which has tcpdump) with `kubectl exec -i`, or with
    /// --debug-image into an ephemeral container added by `kubectl debug -i
    /// --profile=netadmin`. The namespace's pods, Services and EndpointSlices are kept
    /// as they were at the start and at the end, so that nest names pods for their
    /// Services and a pod address reused during the capture is caught. See
    /// docs/collect.md for the rights this takes.
    #[arg(long, help_heading = "Kubernetes", requires = "selector")]
    kubernetes: bool,

    /// The pods' namespace
    #[arg(
        long,
        value_name = "NAMESPACE",
        default_value = "default",
        help_heading = "Kubernetes"
    )]
    namespace: String,

    /// The pods' label selector (`app=shop`)
    #[arg(
        long,
        value_name = "SELECTOR",
        requires = "kubernetes",
        help_heading = "Kubernetes"
    )]
    selector: Option<String>,

    /// The container of each pod to capture in (it must have tcpdump)
    #[arg(
        long,
        value_name = "NAME",
        requires = "kubernetes",
        conflicts_with = "debug_image",
        help_heading = "Kubernetes"
    )]
    container: Option<String>,

    /// An image with tcpdump to add to each pod as an ephemeral container
    #[arg(
        long,
        value_name = "IMAGE",
        requires = "kubernetes",
        help_heading = "Kubernetes"
    )]
    debug_image: Option<String>,

    /// The kubectl to run
    #[arg(
        long,
        value_name = "PATH",
        default_value = "kubectl",
        help_heading = "Kubernetes"
    )]
    kubectl: String,

    /// How long to capture, from the moment every host captures (Ctrl-C stops sooner)
    #[arg(long, short, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    duration: Nanos,

    /// The interface to capture on (`any`: every interface)
    #[arg(
        long,
        short,
        value_name = "NAME",
        default_value = "any",
        help_heading = "What is captured"
    )]
    interface: String,

    /// A capture filter in tcpdump's language (`tcp`, `not port 22`)
    #[arg(long, value_name = "EXPRESSION", help_heading = "What is captured")]
    filter: Option<String>,

    /// Bytes kept of each packet (0: whole packets, which every reader needs for its
    /// messages' content)
    #[arg(
        long,
        value_name = "BYTES",
        default_value_t = 0,
        conflicts_with = "payload_bytes",
        help_heading = "What is captured"
    )]
    snaplen: u32,

    /// Keep every header and only this many payload bytes of each packet (privacy)
    ///
    /// Keep every header (link, VLAN, IP, TCP with its options: up to 160 bytes) and
    /// only this many bytes of each packet's payload: the snaplen becomes 160 + BYTES.
    /// Readers that need a message's content past them (HTTP heads, SQL) then read it
    /// from its TCP lengths only; nest's summary counts the packets cut.
    #[arg(long, value_name = "BYTES", help_heading = "What is captured")]
    payload_bytes: Option<u32>,

    /// The most bytes kept per host (`500MB`, `2GiB`); packets past it are counted
    #[arg(long, value_name = "SIZE", default_value = "1GiB", value_parser = size, help_heading = "What is captured")]
    max_bytes: u64,

    /// The kernel's capture buffer per host, in KiB (tcpdump -B): larger drops less
    #[arg(long, value_name = "KIB", help_heading = "What is captured")]
    buffer_size: Option<u32>,

    /// How long a host may take to start capturing before it is given up
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = duration, help_heading = "Hosts")]
    start_timeout: Nanos,

    /// Print only problems, not each host as it starts and the table at the end
    #[arg(long, short)]
    quiet: bool,
}

/// Runs `blackbox collect`.
pub(super) fn collect(args: CollectArgs) -> Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        // A second Ctrl-C ends collect at once; the hosts' scripts then see their
        // input end and stop their captures themselves.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))
            .context("cannot handle signals")?;
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot handle signals")?;
    }
    let (hosts, cluster) = hosts(&args)?;
    let mut kubernetes_record = None;
    if let Some(cluster) = &cluster {
        std::fs::create_dir_all(&args.out)
            .with_context(|| format!("cannot create {}", args.out.display()))?;
        cluster.snapshot(&args.out.join(kubernetes::AT_START))?;
        kubernetes_record = Some(kubernetes::Record {
            namespace: cluster.namespace.clone(),
            selector: cluster.selector.clone(),
            at_start: kubernetes::AT_START.to_owned(),
            ..kubernetes::Record::default()
        });
    }
    let options = CollectOptions {
        hosts,
        out: args.out.clone(),
        capture: collect::remote::Capture {
            interface: args.interface.clone(),
            filter: args.filter.clone(),
            snaplen: match args.payload_bytes {
                Some(payload) => collect::HEADER_BYTES.saturating_add(payload),
                None => args.snaplen,
            },
            buffer_kib: args.buffer_size,
            // Past the longest a run can take to start, capture and stop, with a margin.
            deadline_s: (args.duration + args.start_timeout) as u64 / 1_000_000_000 + 120,
        },
        payload_bytes: args.payload_bytes,
        duration: Duration::from_nanos(u64::try_from(args.duration).unwrap_or(0)),
        max_bytes: args.max_bytes,
        start_timeout: Duration::from_nanos(u64::try_from(args.start_timeout).unwrap_or(0)),
        kubernetes: kubernetes_record,
    };
    let quiet = args.quiet;
    let mut manifest = collect::collect(&options, &stop, &mut |progress| say(&progress, quiet))?;
    if let Some(cluster) = &cluster {
        end_snapshot(cluster, &args.out, &mut manifest)?;
    }
    if !quiet {
        tell!("{}", table(&manifest, &args.out).trim_end());
    }
    let missing: Vec<&str> = manifest
        .hosts
        .iter()
        .filter(|h| h.status != "captured")
        .map(|h| h.name.as_str())
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{} of {} hosts not captured in full ({}); the other captures and the manifest are in {}",
            missing.len(),
            manifest.hosts.len(),
            missing.join(", "),
            args.out.display()
        );
    }
    Ok(())
}

/// The cluster's state at the end, and the pod addresses that changed hands.
fn end_snapshot(cluster: &kubernetes::Cluster, out: &Path, manifest: &mut Manifest) -> Result<()> {
    let end = out.join(kubernetes::AT_END);
    let taken = cluster.snapshot(&end);
    if let Some(record) = &mut manifest.kubernetes {
        match taken {
            Ok(()) => {
                record.at_end = Some(kubernetes::AT_END.to_owned());
                let read = |name: &str| std::fs::read(out.join(name)).unwrap_or_default();
                record.reused =
                    kubernetes::reused(&read(kubernetes::AT_START), &read(kubernetes::AT_END));
            }
            Err(error) => {
                tell!("collect: the cluster's state at the end was not kept: {error}")
            }
        }
    }
    collect::rewrite_manifest(out, manifest)?;
    Ok(())
}

/// What collect tells as it goes, on stderr.
fn say(progress: &Progress, quiet: bool) {
    match progress {
        Progress::Capturing { host, interface } if !quiet => {
            tell!("collect: {host} capturing on {interface}")
        }
        Progress::AllCapturing {
            capturing,
            hosts,
            duration,
        } => {
            if capturing == hosts {
                tell!(
                    "collect: all {hosts} hosts capturing; stopping in {} (Ctrl-C stops now)",
                    blackbox::trace::time::human_duration(duration.as_nanos() as f64)
                );
            } else {
                tell!(
                    "collect: {capturing} of {hosts} hosts capturing; stopping in {} (Ctrl-C stops now)",
                    blackbox::trace::time::human_duration(duration.as_nanos() as f64)
                );
            }
        }
        Progress::Problem { host, what } => tell!("collect: {host}: {what}"),
        Progress::Stopping { why } if !quiet => tell!("collect: stopping every host ({why})"),
        _ => {}
    }
}

/// The table printed at the end: per host its packets, bytes, drops and status.
fn table(manifest: &Manifest, out: &Path) -> String {
    let mut rows = vec![[
        "host", "packets", "bytes", "dropped", "cut", "status", "file",
    ]
    .map(str::to_owned)];
    for host in &manifest.hosts {
        let counters = &host.counters;
        let dropped = match (counters.dropped_by_kernel, counters.dropped_by_interface) {
            (None, None) => "?".to_owned(),
            (kernel, interface) => (kernel.unwrap_or(0) + interface.unwrap_or(0)).to_string(),
        };
        rows.push([
            host.name.clone(),
            host.packets_written.to_string(),
            host.bytes_written.to_string(),
            dropped,
            host.packets_truncated.to_string(),
            host.status.clone(),
            host.file.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    let mut text = String::new();
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            match c {
                0 | 5 | 6 => line.push_str(&format!("{cell}{}  ", " ".repeat(pad))),
                _ => line.push_str(&format!("{}{cell}  ", " ".repeat(pad))),
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text.push_str(&format!(
        "stopped by: {}; manifest: {}\n",
        manifest.stopped_by,
        out.join(collect::manifest::FILE_NAME).display()
    ));
    text
}

/// The hosts from --hosts, --host and --kubernetes, each with its transport.
fn hosts(args: &CollectArgs) -> Result<(Vec<Host>, Option<kubernetes::Cluster>)> {
    let template = |text: &str, whence: &str| -> Result<Vec<String>> {
        shlex::split(text)
            .filter(|words| !words.is_empty())
            .ok_or_else(|| {
                Usage(format!(
                    "{whence}: `{text}` is not a command (unbalanced quotes?)"
                ))
                .into()
            })
    };
    let via = args
        .via
        .as_deref()
        .map(|text| template(text, "--via"))
        .transpose()?;
    let mut named: Vec<(String, Option<Vec<String>>)> = Vec::new();
    if let Some(path) = &args.hosts {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the hosts file {}", path.display()))?;
        for (index, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let whence = format!("{} line {}", path.display(), index + 1);
            let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let own = match rest.trim() {
                "" => None,
                rest => Some(template(rest, &whence)?),
            };
            named.push((name.to_owned(), own));
        }
    }
    named.extend(args.host.iter().map(|name| (name.clone(), None)));
    let mut cluster = None;
    if args.kubernetes {
        let entry = match (&args.container, &args.debug_image) {
            (Some(container), _) => kubernetes::Entry::Container(container.clone()),
            (None, Some(image)) => kubernetes::Entry::DebugImage(image.clone()),
            (None, None) => {
                return Err(Usage("--kubernetes needs --container (a container of each pod with tcpdump) or --debug-image (an image with tcpdump, added as an ephemeral container)".into()).into())
            }
        };
        let found = kubernetes::Cluster {
            kubectl: args.kubectl.clone(),
            namespace: args.namespace.clone(),
            selector: args.selector.clone().unwrap_or_default(),
            entry,
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        // Two runs in the same second still add containers of different names.
        let unique = format!("{}-{}", now.as_secs(), std::process::id());
        let pod_via = found.via(&unique);
        for pod in found.pods()? {
            named.push((pod.name, Some(pod_via.clone())));
        }
        cluster = Some(found);
    }
    if named.is_empty() {
        return Err(
            Usage("no hosts: give --hosts FILE, --host NAME or --kubernetes".into()).into(),
        );
    }
    let hosts = named
        .into_iter()
        .map(|(name, own)| {
            let words = own.or_else(|| via.clone()).ok_or_else(|| {
                Usage(format!(
                    "host {name} has no transport: give --via or a command on its line"
                ))
            })?;
            Ok(Host {
                via: words.iter().map(|w| w.replace("{host}", &name)).collect(),
                name,
            })
        })
        .collect::<Result<Vec<Host>>>()?;
    Ok((hosts, cluster))
}

/// A size as `--max-bytes` takes it: a number of bytes with an optional unit (`kB`,
/// `MB`, `GB`: powers of ten; `KiB`, `MiB`, `GiB`: of two).
fn size(text: &str) -> Result<u64, String> {
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("`{text}`: expected a size such as 500MB or 2GiB"))?;
    let scale: f64 = match unit.trim() {
        "" | "B" => 1.0,
        "k" | "kB" | "KB" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "T" | "TB" => 1e12,
        "Ki" | "KiB" => 1024.0,
        "Mi" | "MiB" => 1024.0 * 1024.0,
        "Gi" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        "Ti" | "TiB" => 1024.0f64.powi(4),
        other => {
            return Err(format!(
                "`{text}`: unknown unit `{other}` (B, kB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    Ok((number * scale) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_read_with_their_units() {
        assert_eq!(size("1GiB"), Ok(1 << 30));
        assert_eq!(size("500MB"), Ok(500_000_000));
        assert_eq!(size("1.5kB"), Ok(1500));
        assert_eq!(size("42"), Ok(42));
        assert!(size("5 parsecs").is_err());
    }
}
