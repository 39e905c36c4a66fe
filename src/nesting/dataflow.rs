//! The per-node parent choice as a timely dataflow: timely workers on the threads of
//! this process, or on the threads of several processes (a cluster). Owns starting and
//! stopping the workers, routing each node's input to one of them, and bringing the
//! outcomes back in a fixed order, so that the answer never depends on how many
//! workers there are or which finished first. What a node decides is
//! [`super::node`]'s; gathering the inputs and applying the outcomes is [`super`]'s.
//! timely is used here and nowhere else.

mod cluster;

use super::node::{decide, NodeInput, NodeOutcome};
use super::NestOptions;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{mpsc, Arc, Mutex};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::operators::vec::Map;
use timely::dataflow::operators::{Exchange, Inspect, Probe};
use timely::dataflow::{InputHandle, ProbeHandle};

/// Where the per-node choices run.
#[derive(Clone, Copy)]
pub enum Workers {
    /// This many timely workers on threads of this process, started for each nesting.
    Threads(usize),
    /// The workers of an engine started once for the whole run: those of a cluster of
    /// processes ([`Engine::start_cluster`]).
    Engine(&'static Engine),
}

impl Workers {
    /// One worker per thread of rayon's pool: every core, unless `RAYON_NUM_THREADS`
    /// or the command line says otherwise.
    pub fn all_cores() -> Workers {
        Workers::Threads(rayon::current_num_threads())
    }
}

impl Default for Workers {
    fn default() -> Self {
        Workers::all_cores()
    }
}

impl PartialEq for Workers {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Workers::Threads(a), Workers::Threads(b)) => a == b,
            (Workers::Engine(a), Workers::Engine(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Workers::Threads(n) => write!(f, "Threads({n})"),
            Workers::Engine(engine) => write!(f, "Engine({} workers)", engine.peers),
        }
    }
}

/// Why the workers could not decide.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerError {
    /// timely could not start (a cluster's address, say).
    #[error("the workers could not start: {0}")]
    Start(String),
    /// A worker stopped without answering: it panicked, or its process was lost.
    #[error("a worker stopped: {0}")]
    Lost(String),
}

/// One node's choice to make, as a record of the dataflow.
#[derive(Clone, Serialize, Deserialize)]
struct Task {
    /// The worker that decides it.
    worker: u64,
    options: NestOptions,
    input: NodeInput,
}

/// A node's outcome, or what stopped its worker from deciding it.
type Answer = Result<NodeOutcome, String>;

/// Decides every node's input on `workers` (options as given: each input travels with
/// them), and returns the outcomes sorted by node.
pub(crate) fn decide_all(
    workers: Workers,
    inputs: Vec<NodeInput>,
    options: &NestOptions,
) -> Result<Vec<NodeOutcome>, WorkerError> {
    match workers {
        Workers::Engine(engine) => engine.decide_all(inputs, options),
        Workers::Threads(threads) => {
            let config = match threads {
                0 | 1 => timely::Config::thread(),
                n => timely::Config::process(n),
            };
            let engine = Engine::start(config)?;
            let outcomes = engine.decide_all(inputs, options);
            engine.finish()?;
            outcomes
        }
    }
}

/// Running timely workers, fed one nesting at a time: each nesting is one epoch of the
/// same dataflow, so a cluster connects once per run however many segments it nests.
pub struct Engine {
    /// All workers, of every process.
    peers: usize,
    /// The first process's link to worker 0, which feeds the dataflow; `None` in the
    /// other processes of a cluster, and once finished.
    feed: Mutex<Option<Feed>>,
    guards: Mutex<Option<timely::communication::WorkerGuards<()>>>,
}

struct Feed {
    tasks: mpsc::Sender<Vec<Task>>,
    answers: mpsc::Receiver<Vec<Answer>>,
}

/// The far ends of [`Feed`], taken by worker 0.
type WorkerLinks = (mpsc::Receiver<Vec<Task>>, mpsc::Sender<Vec<Answer>>);

impl Engine {
    /// Starts the workers `config` describes: one thread, or threads of this process.
    /// A cluster starts with [`Engine::start_cluster`].
    pub fn start(config: timely::Config) -> Result<Engine, WorkerError> {
        let peers = match &config.communication {
            timely::CommunicationConfig::Thread => 1,
            timely::CommunicationConfig::Process(n)
            | timely::CommunicationConfig::ProcessBinary(n) => *n,
            timely::CommunicationConfig::Cluster { .. } => {
                return Err(WorkerError::Start(
                    "a cluster starts with Engine::start_cluster".into(),
                ))
            }
        };
        let (builders, others) = config
            .communication
            .try_build()
            .map_err(WorkerError::Start)?;
        Engine::launch((builders, others), peers, true)
    }

    /// Starts this process's `threads` workers of a cluster: one process per address
    /// (`host:port`), the same command in each; this is process `process`. Waits up to
    /// `patience` for every other process, and names those that did not come.
    pub fn start_cluster(
        addresses: &[String],
        process: usize,
        threads: usize,
        patience: std::time::Duration,
    ) -> Result<Engine, WorkerError> {
        let sockets = cluster::connect(addresses, process, patience)?;
        cluster::name_lost_processes(addresses);
        let hooks = timely::communication::Hooks::default();
        let local = timely::communication::allocator::ProcessBuilder::new_typed_vector(
            threads,
            hooks.refill.clone(),
            hooks.spill.clone(),
        );
        let (builders, guard) =
            timely::communication::allocator::zero_copy::initialize::initialize_networking_from_sockets(
                local, sockets, process, threads, hooks,
            )
            .map_err(|e| WorkerError::Start(format!("cannot start the cluster's links: {e}")))?;
        let builders = builders
            .into_iter()
            .map(timely::communication::AllocatorBuilder::Tcp)
            .collect();
        Engine::launch(
            (builders, Box::new(guard)),
            threads * addresses.len(),
            process == 0,
        )
    }

    /// Starts the workers; `first`: whether worker 0, which feeds the dataflow, is here.
    fn launch(
        (builders, others): (
            Vec<timely::communication::AllocatorBuilder>,
            Box<dyn std::any::Any + Send>,
        ),
        peers: usize,
        first: bool,
    ) -> Result<Engine, WorkerError> {
        let (tasks, tasks_in) = mpsc::channel();
        let (answers_out, answers) = mpsc::channel();
        let links: Arc<Mutex<Option<WorkerLinks>>> =
            Arc::new(Mutex::new(Some((tasks_in, answers_out))));
        let guards = timely::execute::execute_from(
            builders,
            others,
            timely::WorkerConfig::default(),
            move |worker| {
                let links = match worker.index() {
                    0 => links.lock().expect("not poisoned").take(),
                    _ => None,
                };
                run_worker(worker, links);
            },
        )
        .map_err(WorkerError::Start)?;
        Ok(Engine {
            peers,
            feed: Mutex::new(first.then_some(Feed { tasks, answers })),
            guards: Mutex::new(Some(guards)),
        })
    }

    /// Whether this process feeds the dataflow (the first of a cluster): the others
    /// only lend their workers, until it finishes.
    pub fn feeds(&self) -> bool {
        self.feed.lock().expect("not poisoned").is_some()
    }

    /// Decides every node's input, and returns the outcomes sorted by node. Nestings
    /// from several threads take turns.
    pub(crate) fn decide_all(
        &self,
        mut inputs: Vec<NodeInput>,
        options: &NestOptions,
    ) -> Result<Vec<NodeOutcome>, WorkerError> {
        let feed = self.feed.lock().expect("not poisoned");
        let Some(feed) = feed.as_ref() else {
            return Err(WorkerError::Lost(
                "only the first process of a cluster nests".into(),
            ));
        };
        // Longest first, each to the least loaded worker (by calls): the busiest node
        // bounds the run, so it starts first. Where a node goes never changes its answer.
        inputs.sort_by_key(|input| (std::cmp::Reverse(input.calls.len()), input.node));
        let mut load = vec![0usize; self.peers];
        let tasks: Vec<Task> = inputs
            .into_iter()
            .map(|input| {
                let worker = (0..self.peers).min_by_key(|&w| (load[w], w)).unwrap_or(0);
                load[worker] += input.calls.len().max(1);
                Task {
                    worker: worker as u64,
                    options: *options,
                    input,
                }
            })
            .collect();
        let lost =
            || WorkerError::Lost(cluster::lost().unwrap_or_else(|| "worker 0 is gone".into()));
        feed.tasks.send(tasks).map_err(|_| lost())?;
        let answers = wait_lending(&feed.answers).ok_or_else(lost)?;
        let mut outcomes = answers
            .into_iter()
            .collect::<Result<Vec<NodeOutcome>, String>>()
            .map_err(WorkerError::Lost)?;
        outcomes.sort_unstable_by_key(|outcome| outcome.node);
        Ok(outcomes)
    }

    /// Closes the dataflow and waits for every worker of this process to stop.
    pub fn finish(&self) -> Result<(), WorkerError> {
        // Worker 0 ends its epochs when the feed closes; the others when it does.
        drop(self.feed.lock().expect("not poisoned").take());
        let guards = self.guards.lock().expect("not poisoned").take();
        let Some(guards) = guards else {
            return Ok(());
        };
        // A cluster's links are joined last, and panic there if a process was lost.
        let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guards.join()));
        let lost = |why: String| WorkerError::Lost(cluster::lost().unwrap_or(why));
        for result in joined.map_err(|_| lost("a link to another process broke".into()))? {
            result.map_err(lost)?;
        }
        Ok(())
    }
}

/// The next message of `from` (`None` once its sender is gone). A thread of rayon's
/// pool lends itself to the pool while it waits: the workers decide on the pool, and
/// nestings run from its threads (a study's seeds side by side) would otherwise leave
/// every thread of it waiting and none deciding.
fn wait_lending<T>(from: &mpsc::Receiver<T>) -> Option<T> {
    if rayon::current_thread_index().is_none() {
        return from.recv().ok();
    }
    loop {
        match from.try_recv() {
            Ok(message) => return Some(message),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) => {
                if rayon::yield_now() != Some(rayon::Yield::Executed) {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
        }
    }
}

/// One worker's life: builds the dataflow (route each task to its worker, decide it
/// there, send the outcome to worker 0); worker 0 feeds it one epoch per nesting.
fn run_worker(worker: &mut timely::worker::Worker, links: Option<WorkerLinks>) {
    let mut input = InputHandle::<u64, CapacityContainerBuilder<Vec<Task>>>::new();
    let probe = ProbeHandle::new();
    let collected: Rc<RefCell<Vec<Answer>>> = Rc::default();
    let sink = Rc::clone(&collected);
    worker.dataflow::<u64, _, _>(|scope| {
        input
            .to_stream(scope)
            .exchange(|task: &Task| task.worker)
            .map(|task: Task| decide_caught(task.input, &task.options))
            .exchange(|_: &Answer| 0)
            .inspect(move |answer: &Answer| sink.borrow_mut().push(answer.clone()))
            .probe_with(&probe);
    });
    if let Some((tasks, answers)) = links {
        let mut epoch = 0u64;
        while let Ok(batch) = tasks.recv() {
            for task in batch {
                input.send(task);
            }
            epoch += 1;
            input.advance_to(epoch);
            while probe.less_than(&epoch) {
                // Parked for a while at most: a lost process wakes no one.
                worker.step_or_park(Some(PATIENCE_STEP));
            }
            let done = std::mem::take(&mut *collected.borrow_mut());
            if answers.send(done).is_err() {
                break;
            }
        }
    }
    drop(input);
    while worker.step_or_park(Some(PATIENCE_STEP)) {}
}

/// How long an idle worker sleeps before it looks at its links again.
const PATIENCE_STEP: std::time::Duration = std::time::Duration::from_millis(100);

/// [`decide`], with a panic turned into an answer: a worker that panicked would leave
/// worker 0 waiting for its outcome forever.
fn decide_caught(input: NodeInput, options: &NestOptions) -> Answer {
    let node = input.node;
    // On rayon's pool, not this worker's thread: the choice splits itself with
    // rayon::join, and a join from outside the pool waits idle while two pool threads
    // work, where one made inside it shares the work of every node at once (the 6.6 GB
    // capture set: 114 s against 101 s). `scope` runs its body on a pool thread.
    let on_pool = || rayon::scope(|_| decide(input, options));
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(on_pool)).map_err(|panic| {
        let what = (panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        format!("deciding node {} failed: {what}", node.0)
    })
}
