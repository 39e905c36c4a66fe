//! The per-node parent choice as a timely dataflow: timely workers on the threads of
//! this process, or on the threads of several processes (a cluster). Owns starting and
//! stopping the workers, routing each node's input to one of them, and bringing the
//! outcomes back in a fixed order, so that the answer never depends on how many
//! workers there are or which finished first. Inputs are gathered only as outcomes come
//! back (a few per worker in flight), so that their copies never hold the whole trace
//! twice; a worker hands each to rayon's pool and goes on routing, so that no worker
//! waits on a choice. What a node decides is [`super::node`]'s; gathering an input and
//! applying the outcomes is [`super`]'s. In a cluster, the first process can also send
//! errands (opaque bytes) to another process, which answers them on its pool: how
//! captures are read where they are ([`crate::input::elsewhere`] says what the bytes
//! mean). timely is used here and nowhere else.

mod cluster;

use super::joint::{Sharing, Work, Worked};
use super::node::{decide, NodeInput, NodeOutcome};
use super::NestOptions;
use crate::trace::NodeId;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use timely::container::CapacityContainerBuilder;
use timely::dataflow::channels::pact::Pipeline;
use timely::dataflow::operators::generic::operator::Operator;
use timely::dataflow::operators::{Capability, Exchange, Inspect, Probe};
use timely::dataflow::InputHandle;

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

/// A node to decide, and how many calls its input holds (the busiest go first).
pub(crate) type Planned = (NodeId, usize);

/// Gathers one node's input, when a worker is about to be free for it.
pub(crate) type Gather<'a> = dyn Fn(NodeId) -> NodeInput + Sync + 'a;

/// Decides every node of `nodes` on `workers` (options as given: each input travels
/// with them), gathering each input only when it is about to be sent; returns the
/// outcomes sorted by node.
pub(crate) fn decide_all(
    workers: Workers,
    nodes: Vec<Planned>,
    gather: &Gather<'_>,
    options: &NestOptions,
) -> Result<Vec<NodeOutcome>, WorkerError> {
    match workers {
        Workers::Engine(engine) => engine.decide_all(nodes, gather, options),
        Workers::Threads(threads) => {
            let config = match threads {
                0 | 1 => timely::Config::thread(),
                n => timely::Config::process(n),
            };
            let engine = Engine::start(config)?;
            let outcomes = engine.decide_all(nodes, gather, options);
            engine.finish()?;
            outcomes
        }
    }
}

/// Running timely workers, fed one nesting at a time by the same dataflow, so a cluster
/// connects once per run however many segments it nests.
pub struct Engine {
    /// All workers, of every process.
    peers: usize,
    /// Processes of the cluster (1 without one).
    processes: usize,
    /// The first process's link to worker 0, which feeds the dataflow; `None` in the
    /// other processes of a cluster, and once finished.
    feed: Mutex<Option<Feed>>,
    guards: Mutex<Option<timely::communication::WorkerGuards<Done>>>,
}

struct Feed {
    tasks: mpsc::Sender<Task>,
    answers: mpsc::Receiver<Answer>,
    /// Errands for other processes, sent by worker 0.
    errands: mpsc::Sender<AskedErrand>,
    /// Worker 0's thread, woken when a task is sent (it sleeps between steps).
    worker: std::thread::Thread,
}

/// The far ends of [`Feed`], taken by worker 0.
type WorkerLinks = (
    mpsc::Receiver<Task>,
    mpsc::Sender<Answer>,
    mpsc::Receiver<AskedErrand>,
);

/// How a process of a cluster answers the errands the first one sends it: on its
/// pool, bytes in and bytes (or why not) out.
pub type Serve = Arc<dyn Fn(Vec<u8>) -> Result<Vec<u8>, String> + Send + Sync>;

/// An errand to send: to which process, its bytes, and where its answer goes.
type AskedErrand = (usize, Vec<u8>, mpsc::Sender<Result<Vec<u8>, String>>);

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
        Engine::launch((builders, others), (peers, None), (true, None))
    }

    /// Starts this process's `threads` workers of a cluster: one process per address
    /// (`host:port`), the same command in each; this is process `process`. Waits up to
    /// `patience` for every other process, and names those that did not come. `serve`
    /// answers the errands the first process sends ([`Engine::ask`]).
    pub fn start_cluster(
        addresses: &[String],
        (process, threads): (usize, usize),
        patience: std::time::Duration,
        serve: Serve,
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
        // The parts of a node's choice that can run apart go to the worker of the same
        // place in the next process: threads of one process share its pool already.
        let far = (addresses.len() > 1).then_some(threads);
        Engine::launch(
            (builders, Box::new(guard)),
            (threads * addresses.len(), far),
            (process == 0, Some(serve)),
        )
    }

    /// Starts the workers, `peers` in all, parts of choices sent `far` workers on (see
    /// [`run_worker`]); `first`: whether worker 0, which feeds the dataflow, is here;
    /// `serve`: how a cluster's errands are answered.
    fn launch(
        (builders, others): (
            Vec<timely::communication::AllocatorBuilder>,
            Box<dyn std::any::Any + Send>,
        ),
        (peers, far): (usize, Option<usize>),
        (first, serve): (bool, Option<Serve>),
    ) -> Result<Engine, WorkerError> {
        let (tasks, tasks_in) = mpsc::channel();
        let (answers_out, answers) = mpsc::channel();
        let (errands, errands_in) = mpsc::channel();
        let (thread_out, thread) = mpsc::sync_channel(1);
        let links: Arc<Mutex<Option<(WorkerLinks, _)>>> = Arc::new(Mutex::new(Some((
            (tasks_in, answers_out, errands_in),
            thread_out,
        ))));
        let guards = timely::execute::execute_from(
            builders,
            others,
            timely::WorkerConfig::default(),
            move |worker| {
                let links = match worker.index() {
                    0 => links.lock().expect("not poisoned").take(),
                    _ => None,
                };
                let links = links.map(|(links, thread): (WorkerLinks, mpsc::SyncSender<_>)| {
                    let _ = thread.send(std::thread::current());
                    links
                });
                run_worker(worker, links, (far, serve.clone()))
            },
        )
        .map_err(WorkerError::Start)?;
        let feed = match first {
            true => Some(Feed {
                tasks,
                answers,
                errands,
                worker: thread
                    .recv()
                    .map_err(|_| WorkerError::Start("worker 0 did not start".into()))?,
            }),
            false => None,
        };
        Ok(Engine {
            peers,
            processes: far.map_or(1, |threads| peers / threads),
            feed: Mutex::new(feed),
            guards: Mutex::new(Some(guards)),
        })
    }

    /// Whether this process feeds the dataflow (the first of a cluster): the others
    /// only lend their workers, until it finishes.
    pub fn feeds(&self) -> bool {
        self.feed.lock().expect("not poisoned").is_some()
    }

    /// Processes of the cluster (1 for threads of this process alone).
    pub fn processes(&self) -> usize {
        self.processes
    }

    /// Sends `errand` to process `process` of the cluster and waits for its answer:
    /// the answer, or why the process gave none; an error when the process was lost.
    /// Only the first process sends errands, before it finishes; several threads may
    /// wait at once.
    pub fn ask(
        &self,
        process: usize,
        errand: Vec<u8>,
    ) -> Result<Result<Vec<u8>, String>, WorkerError> {
        let lost =
            || WorkerError::Lost(cluster::lost().unwrap_or_else(|| "worker 0 is gone".into()));
        let (sent, answered) = mpsc::channel();
        {
            let feed = self.feed.lock().expect("not poisoned");
            let Some(feed) = feed.as_ref() else {
                return Err(WorkerError::Lost(
                    "only the first process of a cluster sends errands".into(),
                ));
            };
            if process == 0 || process >= self.processes {
                return Err(WorkerError::Lost(format!(
                    "there is no other process {process} to send an errand to"
                )));
            }
            feed.errands
                .send((process, errand, sent))
                .map_err(|_| lost())?;
            feed.worker.unpark();
        }
        wait_lending(&answered).ok_or_else(lost)
    }

    /// Decides every node of `nodes`, gathering each input as it is sent, and returns
    /// the outcomes sorted by node. Nestings from several threads take turns.
    pub(crate) fn decide_all(
        &self,
        mut nodes: Vec<Planned>,
        gather: &Gather<'_>,
        options: &NestOptions,
    ) -> Result<Vec<NodeOutcome>, WorkerError> {
        let feed = self.feed.lock().expect("not poisoned");
        let Some(feed) = feed.as_ref() else {
            return Err(WorkerError::Lost(
                "only the first process of a cluster nests".into(),
            ));
        };
        // Largest first, each to the least loaded worker (by calls): the busiest node
        // bounds the run, so it starts first. Where a node goes never changes its answer.
        nodes.sort_by_key(|&(node, calls)| (std::cmp::Reverse(calls), node));
        let mut load = vec![0usize; self.peers];
        let plan: Vec<(NodeId, u64)> = (nodes.iter())
            .map(|&(node, calls)| {
                let worker = (0..self.peers).min_by_key(|&w| (load[w], w)).unwrap_or(0);
                load[worker] += calls.max(1);
                (node, worker as u64)
            })
            .collect();
        let lost =
            || WorkerError::Lost(cluster::lost().unwrap_or_else(|| "worker 0 is gone".into()));
        // A few inputs per worker in flight: each worker has the next at hand when it
        // finishes one, and the copies held are those few, not every node's.
        let in_flight_at_most = 2 * self.peers.max(1);
        let mut outcomes = Vec::with_capacity(plan.len());
        let mut failed = None;
        let task = |(node, worker): (NodeId, u64), input: Option<NodeInput>| Task {
            worker,
            options: *options,
            input: input.unwrap_or_else(|| gather(node)),
        };
        // The first inputs are gathered side by side: the workers wait for them.
        let first: Vec<NodeInput> = plan[..plan.len().min(in_flight_at_most)]
            .par_iter()
            .map(|&(node, _)| gather(node))
            .collect();
        let mut first = first.into_iter();
        let (mut sent, mut answered) = (0, 0);
        while answered < plan.len() {
            while failed.is_none() && sent < plan.len() && sent - answered < in_flight_at_most {
                feed.tasks
                    .send(task(plan[sent], first.next()))
                    .map_err(|_| lost())?;
                feed.worker.unpark();
                sent += 1;
            }
            if answered == sent {
                break;
            }
            // Every answer sent is awaited, even after a failure: the next nesting must
            // not read this one's.
            match wait_lending(&feed.answers).ok_or_else(lost)? {
                Ok(outcome) => outcomes.push(outcome),
                Err(why) => failed = failed.or(Some(why)),
            }
            answered += 1;
        }
        if let Some(why) = failed {
            return Err(WorkerError::Lost(why));
        }
        outcomes.sort_unstable_by_key(|outcome| outcome.node);
        Ok(outcomes)
    }

    /// Closes the dataflow, waits for every worker of this process to stop, and says
    /// what they did.
    pub fn finish(&self) -> Result<Done, WorkerError> {
        // Worker 0 closes the dataflow's input when the feed closes; every worker stops
        // once every task and part is answered.
        // Woken, or it would notice only when its nap ends (a tenth of a second added to
        // every nesting).
        if let Some(feed) = self.feed.lock().expect("not poisoned").take() {
            let worker = feed.worker.clone();
            drop(feed);
            worker.unpark();
        }
        let guards = self.guards.lock().expect("not poisoned").take();
        let Some(guards) = guards else {
            return Ok(Done::default());
        };
        // A cluster's links are joined last, and panic there if a process was lost.
        let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| guards.join()));
        let lost = |why: String| WorkerError::Lost(cluster::lost().unwrap_or(why));
        let mut done = Done::default();
        for result in joined.map_err(|_| lost("a link to another process broke".into()))? {
            let worker = result.map_err(lost)?;
            done.nodes += worker.nodes;
            done.parts += worker.parts;
            done.received += worker.received;
            done.sent += worker.sent;
        }
        Ok(done)
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

/// What the workers of one process did, once finished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Done {
    /// Nodes whose parents they chose.
    pub nodes: usize,
    /// Parts of other processes' nodes' choices that they ran (second halves of nodes
    /// cut in two, robust starts).
    pub parts: usize,
    /// Bytes of those nodes' inputs and parts received from another process, as timely
    /// sends them (bincode); 0 in the first process, whose workers' inputs come from
    /// its own memory.
    pub received: u64,
    /// Bytes of their outcomes and answers sent back, likewise.
    pub sent: u64,
}

/// What one process's workers did, counted as they do it.
#[derive(Default)]
struct Tally {
    nodes: AtomicUsize,
    parts: AtomicUsize,
    /// Whether records come from and go to another process, and their bytes are
    /// counted.
    crossing: bool,
    received: AtomicU64,
    sent: AtomicU64,
}

impl Tally {
    /// Counts `record`'s bytes in `counter` where records cross to another process.
    fn bytes(&self, counter: &AtomicU64, record: &impl Serialize) {
        if self.crossing {
            let bytes = bincode::serialized_size(record).unwrap_or(0);
            counter.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn done(&self) -> Done {
        Done {
            nodes: self.nodes.load(Ordering::Relaxed),
            parts: self.parts.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            sent: self.sent.load(Ordering::Relaxed),
        }
    }
}

/// A part of a node's choice, sent by worker `from` to be run by worker `to`.
#[derive(Clone, Serialize, Deserialize)]
struct PartTask {
    to: u64,
    from: u64,
    /// Which of `from`'s parts it is.
    id: u64,
    work: Work,
}

/// What a part came to, or what stopped its worker from running it, for worker `to`.
#[derive(Clone, Serialize, Deserialize)]
struct PartDone {
    to: u64,
    id: u64,
    worked: Result<Worked, String>,
}

/// An errand of worker `from` (worker 0, for the first process) for worker `to` (the
/// first of another process).
#[derive(Clone, Serialize, Deserialize)]
struct Errand {
    to: u64,
    from: u64,
    id: u64,
    bytes: Vec<u8>,
}

/// An errand's answer, for worker `to`.
#[derive(Clone, Serialize, Deserialize)]
struct ErrandDone {
    to: u64,
    id: u64,
    answer: Result<Vec<u8>, String>,
}

/// Where an errand's answer goes.
type ErrandAnswer = mpsc::Sender<Result<Vec<u8>, String>>;

/// Where a part's answer goes.
type PartAnswer = mpsc::Sender<Result<Worked, String>>;

/// A part to send, asked for by a choice on rayon's pool, and where its answer goes.
type Ask = (Work, PartAnswer);

/// One worker's life: builds the dataflow (route each task to its worker, decide it
/// there on rayon's pool, send the outcome to worker 0; and the parts of a node's choice
/// that can run apart, route each to a worker of the next process, run it there, and
/// send its answer back); worker 0 feeds it tasks as they come and hands back outcomes
/// as they arrive, until the feed closes; every worker sends the parts its choices ask
/// for until every node is decided. `far`: how many workers on from this one the worker
/// of the next process is, where there are several processes. Worker 0 also sends the
/// errands of the first process to the first worker of theirs, where `serve` answers
/// them on the pool.
///
/// A choice waiting for its part lends its rayon thread to the pool, which may start
/// another node's choice on it: the waits nest at most as deep as the tasks in flight
/// (two per worker), and a part itself never waits, so every wait ends.
fn run_worker(
    worker: &mut timely::worker::Worker,
    links: Option<WorkerLinks>,
    (far, serve): (Option<usize>, Option<Serve>),
) -> Done {
    let index = worker.index() as u64;
    let peers = worker.peers() as u64;
    let mut tasks_input = InputHandle::<u64, CapacityContainerBuilder<Vec<Task>>>::new();
    let mut parts_input = InputHandle::<u64, CapacityContainerBuilder<Vec<PartTask>>>::new();
    let mut errands_input = InputHandle::<u64, CapacityContainerBuilder<Vec<Errand>>>::new();
    // Errands sent, by id, waiting for their answer.
    let errands_waiting: Rc<RefCell<HashMap<u64, ErrandAnswer>>> = Rc::default();
    let errands_answered = Rc::clone(&errands_waiting);
    let collected: Rc<RefCell<Vec<Answer>>> = Rc::default();
    let sink = Rc::clone(&collected);
    // Parts sent, by id, waiting for their answer.
    let waiting: Rc<RefCell<HashMap<u64, PartAnswer>>> = Rc::default();
    let delivered = Rc::clone(&waiting);
    let (asks, asked) = mpsc::channel::<Ask>();
    let this_thread = std::thread::current();
    let decided = timely::dataflow::operators::probe::Handle::new();
    // Records cross the network only to and from the workers of processes other than
    // the first (parts go to the next process, whichever that is; counted where run).
    let tally = Arc::new(Tally {
        crossing: far.is_some_and(|threads| index as usize >= threads),
        ..Tally::default()
    });
    let (deciding, running) = (Arc::clone(&tally), Arc::clone(&tally));
    worker.dataflow::<u64, _, _>(|scope| {
        let decide = move |task: Task| -> Answer {
            deciding.nodes.fetch_add(1, Ordering::Relaxed);
            deciding.bytes(&deciding.received, &task);
            let (asks, thread, node) = (asks.clone(), this_thread.clone(), task.input.node);
            let send = move |work: Work| -> Box<dyn FnOnce() -> Worked + Send> {
                let (answer, answered) = mpsc::channel();
                if asks.send((work, answer)).is_err() {
                    panic!("the worker that sends node {}'s parts is gone", node.0);
                }
                thread.unpark();
                Box::new(move || match wait_lending(&answered) {
                    Some(Ok(choice)) => choice,
                    Some(Err(why)) => panic!("{why}"),
                    None => panic!("a part of node {}'s choice did not come back", node.0),
                })
            };
            let sharing = match far {
                Some(_) => Sharing::Elsewhere(&send),
                None => Sharing::Here,
            };
            let answer = caught(node, || decide(task.input, &task.options, sharing));
            deciding.bytes(&deciding.sent, &answer);
            answer
        };
        on_pool(
            tasks_input
                .to_stream(scope)
                .exchange(|task: &Task| task.worker),
            "Decide",
            (decide, |task: &Task| {
                Err(format!(
                    "deciding node {} stopped without an answer",
                    task.input.node.0
                ))
            }),
        )
        .exchange(|_: &Answer| 0)
        .inspect(move |answer: &Answer| sink.borrow_mut().push(answer.clone()))
        .probe_with(&decided);
        let run = move |task: PartTask| {
            running.parts.fetch_add(1, Ordering::Relaxed);
            // A part always comes from another process.
            let bytes = bincode::serialized_size(&task).unwrap_or(0);
            running.received.fetch_add(bytes, Ordering::Relaxed);
            let worked = std::panic::AssertUnwindSafe(|| task.work.run());
            let done = PartDone {
                to: task.from,
                id: task.id,
                worked: std::panic::catch_unwind(worked).map_err(|panic| {
                    format!("a part of a node's choice failed: {}", panic_text(&panic))
                }),
            };
            let bytes = bincode::serialized_size(&done).unwrap_or(0);
            running.sent.fetch_add(bytes, Ordering::Relaxed);
            done
        };
        on_pool(
            parts_input
                .to_stream(scope)
                .exchange(|task: &PartTask| task.to),
            "Part",
            (run, |task: &PartTask| PartDone {
                to: task.from,
                id: task.id,
                worked: Err("a part of a node's choice stopped without an answer".into()),
            }),
        )
        .exchange(|done: &PartDone| done.to)
        .inspect(move |done: &PartDone| {
            if let Some(answer) = delivered.borrow_mut().remove(&done.id) {
                let _ = answer.send(done.worked.clone());
            }
        });
        let answer = move |errand: Errand| ErrandDone {
            to: errand.from,
            id: errand.id,
            answer: match &serve {
                Some(serve) => {
                    let served = std::panic::AssertUnwindSafe(|| serve(errand.bytes));
                    std::panic::catch_unwind(served).unwrap_or_else(|panic| {
                        Err(format!("an errand failed: {}", panic_text(&panic)))
                    })
                }
                None => Err("this process answers no errands".into()),
            },
        };
        on_pool(
            errands_input
                .to_stream(scope)
                .exchange(|errand: &Errand| errand.to),
            "Errand",
            (answer, |errand: &Errand| ErrandDone {
                to: errand.from,
                id: errand.id,
                answer: Err("an errand stopped without an answer".into()),
            }),
        )
        .exchange(|done: &ErrandDone| done.to)
        .inspect(move |done: &ErrandDone| {
            if let Some(answer) = errands_answered.borrow_mut().remove(&done.id) {
                let _ = answer.send(done.answer.clone());
            }
        });
    });
    let mut feed = links;
    let mut tasks_input = Some(tasks_input).filter(|_| feed.is_some());
    // Parts are sent only to another process; errands only by the first process.
    let mut parts_input = Some(parts_input).filter(|_| far.is_some());
    let mut errands_input = Some(errands_input).filter(|_| far.is_some() && feed.is_some());
    let (mut tasks_epoch, mut parts_epoch, mut next_id) = (0u64, 0u64, 0u64);
    let (mut errands_epoch, mut next_errand) = (0u64, 0u64);
    loop {
        if let (Some((_, _, errands)), Some(input)) = (&feed, &mut errands_input) {
            let mut sent = false;
            while let Ok((process, bytes, answer)) = errands.try_recv() {
                errands_waiting.borrow_mut().insert(next_errand, answer);
                input.send(Errand {
                    to: (process * far.unwrap_or(1)) as u64,
                    from: index,
                    id: next_errand,
                    bytes,
                });
                next_errand += 1;
                sent = true;
            }
            if sent {
                errands_epoch += 1;
                input.advance_to(errands_epoch);
            }
        }
        // Every node decided, everywhere: the first process has finished, and sends
        // no more errands.
        if errands_input.is_some() && decided.done() {
            errands_input = None;
        }
        if let (Some((tasks, _, _)), Some(input)) = (&feed, &mut tasks_input) {
            let (mut open, mut sent) = (true, false);
            loop {
                match tasks.try_recv() {
                    Ok(task) => {
                        input.send(task);
                        sent = true;
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                }
            }
            if !open {
                tasks_input = None;
            } else if sent {
                // Closing a time is what pushes the records on to the other workers
                // (a flush leaves them in the exchange's buffers).
                tasks_epoch += 1;
                input.advance_to(tasks_epoch);
            }
        }
        if let Some(input) = &mut parts_input {
            let mut sent = false;
            while let Ok((work, answer)) = asked.try_recv() {
                let to = (index + far.unwrap_or(0) as u64) % peers;
                waiting.borrow_mut().insert(next_id, answer);
                input.send(PartTask {
                    to,
                    from: index,
                    id: next_id,
                    work,
                });
                next_id += 1;
                sent = true;
            }
            if sent {
                parts_epoch += 1;
                input.advance_to(parts_epoch);
            }
            // Every node decided, everywhere: no part will be asked for again.
            if decided.done() {
                parts_input = None;
            }
        }
        // Parked for a while at most: a lost process wakes no one.
        if !worker.step_or_park(Some(PATIENCE_STEP)) {
            break;
        }
        if let Some((_, answers, _)) = &feed {
            for answer in collected.borrow_mut().drain(..) {
                if answers.send(answer).is_err() {
                    tasks_input = None;
                    feed = None;
                    break;
                }
            }
        }
    }
    tally.done()
}

/// `stream`'s records each handed to rayon's pool to `work` on, their answers given at
/// the records' times: the worker's thread goes on routing meanwhile. Each record's
/// capability is held until its answer comes back, so the stream ends when its input
/// has closed and every record is answered; a record whose work never answered (its
/// job was dropped unrun) is answered by `unanswered`, so that no one waits for it.
fn on_pool<'scope, I, O>(
    stream: timely::dataflow::StreamVec<'scope, u64, I>,
    name: &str,
    (work, unanswered): (
        impl Fn(I) -> O + Send + Sync + 'static,
        impl Fn(&I) -> O + 'static,
    ),
) -> timely::dataflow::StreamVec<'scope, u64, O>
where
    I: Send + 'static,
    O: Clone + Send + 'static,
{
    let worker = stream.scope().worker();
    let work = Arc::new(work);
    stream.unary::<CapacityContainerBuilder<Vec<O>>, _, _, _>(Pipeline, name, |initial, info| {
        // Only the records' own capabilities are held.
        drop(initial);
        let activator = worker.sync_activator_for(info.address.to_vec());
        let mut working: Vec<(Capability<u64>, mpsc::Receiver<O>, Option<O>)> = Vec::new();
        move |records, answers| {
            records.for_each(|capability, batch| {
                for record in batch.drain(..) {
                    let (answer, answered) = mpsc::channel();
                    let instead = unanswered(&record);
                    let (activator, work) = (activator.clone(), Arc::clone(&work));
                    // On rayon's pool, not this worker's thread: the choice splits
                    // itself with rayon::join, and one made inside the pool shares the
                    // work of every node at once (the 6.6 GB capture set: 114 s against
                    // 101 s when a worker's thread joined from outside).
                    rayon::spawn(move || {
                        let _ = answer.send(work(record));
                        let _ = activator.activate();
                    });
                    let held = capability.retain_least(0).expect("records carry a time");
                    working.push((held, answered, Some(instead)));
                }
            });
            working.retain_mut(|(capability, answered, instead)| {
                let answer = match answered.try_recv() {
                    Ok(answer) => answer,
                    Err(mpsc::TryRecvError::Empty) => return true,
                    Err(mpsc::TryRecvError::Disconnected) => instead.take().expect("answered once"),
                };
                answers.session(capability).give(answer);
                false
            });
        }
    })
}

/// How long an idle worker sleeps before it looks at its links again.
const PATIENCE_STEP: std::time::Duration = std::time::Duration::from_millis(100);

/// `choose`'s outcome for `node`, with a panic turned into an answer: a worker that
/// panicked would leave worker 0 waiting for its outcome forever.
fn caught(node: NodeId, choose: impl FnOnce() -> NodeOutcome) -> Answer {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(choose))
        .map_err(|panic| format!("deciding node {} failed: {}", node.0, panic_text(&panic)))
}

/// What a panic said.
fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    (panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}
