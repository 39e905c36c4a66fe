//! Where the command's work runs: --workers sizes the thread pool every stage shares
//! and the dataflow's workers; --cluster and --process join this process to others
//! (reading the cluster file, deciding whether this process runs the command or lends
//! its workers). What the workers do is [`blackbox::nesting::dataflow`]'s.

use super::args::AlgorithmArgs;
use blackbox::nesting::dataflow::{Engine, Workers};
use std::path::Path;

/// The cluster's engine, where this process is one of several (--cluster).
static CLUSTER: std::sync::OnceLock<&'static Engine> = std::sync::OnceLock::new();

/// How long a cluster's processes wait for each other at the start.
const CLUSTER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// What this process does once its workers are up.
pub(super) enum Role {
    /// Runs the command: alone, or as a cluster's process 0 (with its engine, which
    /// must be finished when the command is done so the other processes end).
    Run(Option<&'static Engine>),
    /// Lent its workers to a cluster's process 0, which has finished.
    Lent,
}

impl AlgorithmArgs {
    /// Sizes the thread pool every stage shares to --workers, before any stage runs,
    /// and with --cluster joins the other processes.
    pub(super) fn start_workers(&self) -> anyhow::Result<Role> {
        let threads = match self.workers {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        };
        if self.workers > 0 {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build_global()
                .map_err(|e| anyhow::anyhow!("cannot start {threads} threads: {e}"))?;
        }
        let (Some(file), Some(process)) = (&self.cluster, self.process) else {
            return Ok(Role::Run(None));
        };
        let addresses = cluster_addresses(file)?;
        let engine = Engine::start_cluster(&addresses, process, threads, CLUSTER_PATIENCE)?;
        if !engine.feeds() {
            let done = engine.finish()?;
            eprintln!(
                "blackbox: process {process} lent its {} to process 0 ({}), which is done \
                 (here: decided {}, ran {} of nodes decided elsewhere)",
                counted(threads, "worker", "workers"),
                addresses[0],
                counted(done.nodes, "node", "nodes"),
                counted(done.parts, "part", "parts"),
            );
            return Ok(Role::Lent);
        }
        let engine: &'static Engine = Box::leak(Box::new(engine));
        let _ = CLUSTER.set(engine);
        Ok(Role::Run(Some(engine)))
    }
}

/// `n` and the noun in the number it takes.
fn counted(n: usize, one: &str, more: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { more })
}

/// Where the nestings of this run decide: the cluster's engine, or one worker per
/// thread of the pool.
pub(super) fn workers() -> Workers {
    CLUSTER
        .get()
        .map_or(Workers::all_cores(), |&engine| Workers::Engine(engine))
}

/// The `host:port` of each process in a --cluster file, in order.
fn cluster_addresses(file: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow::anyhow!("cannot read the cluster file {}: {e}", file.display()))?;
    let mut addresses = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if line
            .rsplit_once(':')
            .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
        {
            anyhow::bail!("{}:{}: `{line}` is not host:port", file.display(), at + 1);
        }
        addresses.push(line.to_owned());
    }
    if addresses.is_empty() {
        anyhow::bail!("the cluster file {} lists no process", file.display());
    }
    Ok(addresses)
}
