//! Where the command's work runs: --workers sizes the thread pool every stage shares
//! and the dataflow's workers; --cluster and --process join this process to others
//! (reading the cluster file, deciding whether this process runs the command or lends
//! its workers, and serving the captures it was given). What the workers do is
//! [`blackbox::nesting::dataflow`]'s; which process reads which capture
//! [`blackbox::input::elsewhere`]'s.

use super::args::AlgorithmArgs;
use blackbox::input::elsewhere::{self, Server};
use blackbox::input::source::Source;
use blackbox::input::InputError;
use blackbox::nesting::dataflow::{Engine, Workers};
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// and with --cluster joins the other processes; a process other than the first
    /// reads those captures among `files` the first asks it to.
    pub(super) fn start_workers(&self, files: &[PathBuf]) -> anyhow::Result<Role> {
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
        let server = Arc::new(Server::new(files.to_vec()));
        let serving = Arc::clone(&server);
        let engine = Engine::start_cluster(
            &addresses,
            (process, threads),
            CLUSTER_PATIENCE,
            Arc::new(move |errand| serving.serve(errand)),
        )?;
        if !engine.feeds() {
            let done = engine.finish()?;
            let served = server.served();
            let read = match served.captures {
                0 => "read no capture".to_owned(),
                n => format!(
                    "read {} ({} in {:.1} s) and sent their messages ({})",
                    counted(n, "capture", "captures"),
                    size(served.bytes),
                    served.seconds,
                    size(served.sent),
                ),
            };
            eprintln!(
                "blackbox: process {process} lent its {} to process 0 ({}), which is done \
                 (here: {read}; decided {}, ran {} of nodes decided elsewhere, from {} of \
                 their inputs, sending back {})",
                counted(threads, "worker", "workers"),
                addresses[0],
                counted(done.nodes, "node", "nodes"),
                counted(done.parts, "part", "parts"),
                size(done.received),
                size(done.sent),
            );
            let texts = server.not_offered();
            if !texts.is_empty() {
                let names: Vec<String> = texts.iter().map(|p| p.display().to_string()).collect();
                eprintln!(
                    "blackbox: process {process} left its text traces to process 0, which \
                     reads those on its own command line: {}",
                    names.join(", ")
                );
            }
            return Ok(Role::Lent);
        }
        let engine: &'static Engine = Box::leak(Box::new(engine));
        let _ = CLUSTER.set(engine);
        Ok(Role::Run(Some(engine)))
    }
}

/// A number of bytes as a reader takes it in (decimal units, as `ls -h --si`).
fn size(bytes: u64) -> String {
    match bytes {
        0..1_000 => format!("{bytes} B"),
        1_000..1_000_000 => format!("{:.0} kB", bytes as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.0} MB", bytes as f64 / 1e6),
        _ => format!("{:.1} GB", bytes as f64 / 1e9),
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

/// `sources` (process 0's inputs, told apart) with every other process's captures, each
/// read by the process that holds it ([`elsewhere::gather`]); as they are without a
/// cluster.
pub(super) fn gathered(sources: Vec<Source>) -> Result<Vec<Source>, InputError> {
    let Some(&engine) = CLUSTER.get() else {
        return Ok(sources);
    };
    let ask: elsewhere::Ask = Arc::new(move |process, errand| match engine.ask(process, errand) {
        Ok(answer) => answer.map_err(elsewhere::Unanswered::Refused),
        Err(lost) => Err(elsewhere::Unanswered::Lost(lost.to_string())),
    });
    elsewhere::gather(sources, engine.processes(), &ask)
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
