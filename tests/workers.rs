//! The answer does not depend on the number of workers: `--workers 1`, 2 and 4 write
//! the same bytes (stdout, stderr, --json and --assignments) on the shipped traces and
//! captures, whole and in segments, with an asynchronous window, and in evaluation
//! started from the truth.

mod support;

use support::blackbox;

/// Runs `args` with `--workers` 1, 2 and 4 and asserts that every output is the same.
fn same_for_any_workers(args: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let mut first: Option<Vec<Vec<u8>>> = None;
    for workers in ["1", "2", "4"] {
        let json = dir.path().join(format!("{workers}.json"));
        let assignments = dir.path().join(format!("{workers}.tsv"));
        let mut command = blackbox();
        command.args(args).args(["--workers", workers]);
        let nest = args[0] == "nest";
        if nest {
            command.arg("--json").arg(&json);
            command.arg("--assignments").arg(&assignments);
        }
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "{args:?} --workers {workers}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let mut outputs = vec![output.stdout, output.stderr];
        if nest {
            outputs.push(std::fs::read(&json).unwrap());
            outputs.push(std::fs::read(&assignments).unwrap());
        }
        match &first {
            None => first = Some(outputs),
            Some(first) => {
                for (at, (a, b)) in first.iter().zip(&outputs).enumerate() {
                    assert!(
                        a == b,
                        "{args:?}: output {at} differs at --workers {workers}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_text_trace_nests_alike_on_any_number_of_workers() {
    same_for_any_workers(&["nest", "traces/multitier.trace"]);
    same_for_any_workers(&["nest", "--async-window", "5ms", "traces/multitier.trace"]);
}

#[test]
fn segments_nest_alike_on_any_number_of_workers() {
    // Six segments, each an epoch of the same dataflow (stderr, compared too, says so).
    same_for_any_workers(&["nest", "--segment-lines", "2000", "traces/multitier.trace"]);
}

#[test]
fn captures_nest_alike_on_any_number_of_workers() {
    same_for_any_workers(&[
        "nest",
        "traces/shop/client.pcap",
        "traces/shop/web.pcap",
        "traces/shop/app.pcap",
        "traces/shop/cache.pcap",
        "traces/shop/db.pcapng",
    ]);
}

#[test]
fn evaluation_is_alike_on_any_number_of_workers() {
    same_for_any_workers(&["eval", "traces/multitier.trace"]);
    same_for_any_workers(&["eval", "--start-from-truth", "traces/multitier.trace"]);
}

/// Two free ports on localhost, as a cluster file's lines.
/// Held by each test that runs a cluster: ports freed by `cluster_file` are handed out
/// again, and two clusters at once could dial each other's (a test's stand-in process
/// connected to the other test's process 0, and its own waited 60 s for it).
static ONE_CLUSTER_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cluster_file(dir: &std::path::Path) -> (std::path::PathBuf, Vec<String>) {
    let listeners: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let addresses: Vec<String> = (listeners.iter())
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    drop(listeners);
    let path = dir.join("cluster");
    let text = format!("# two processes\n{}\n\n{}\n", addresses[0], addresses[1]);
    std::fs::write(&path, text).unwrap();
    (path, addresses)
}

/// Two processes on localhost, one worker each, write what one process writes: the
/// first every output, the second nothing on stdout; it says what it did.
#[test]
fn two_processes_nest_as_one_does() {
    let _alone = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    // In segments: each segment's nodes are shared between the processes.
    let lent = two_processes_alike(&["--segment-lines", "2000", "traces/multitier.trace"]);
    assert!(lent.contains("lent its 1 worker to process 0"), "{lent}");
    // Whole, with a window small enough that nodes are cut in two at quiet instants:
    // parts of process 0's nodes' choices run on process 1.
    let lent = two_processes_alike(&["--learn-window", "100", "traces/multitier.trace"]);
    let parts: usize = lent
        .split("ran ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of parts in {lent:?}"));
    assert!(parts > 0, "{lent}");
    // What crossed to it is counted.
    assert!(lent.contains(" of their inputs, sending back "), "{lent}");
    assert!(!lent.contains("from 0 B"), "{lent}");
}

/// Runs `nest --workers 1` with `args` alone and as two processes of a cluster, checks
/// that the first process writes what one alone does and the second nothing on stdout,
/// and returns what the second wrote on stderr.
fn two_processes_alike(args: &[&str]) -> String {
    cluster_alike(args, args, args)
}

/// Each process reads the captures it is given: split between the two processes, or
/// the same files on a shared path named by both, the first writes what one process
/// given them all writes (its own first, then the second's).
#[test]
fn each_process_reads_the_captures_it_is_given() {
    let _alone = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (first, second) = (
        [
            "traces/shop/client.pcap",
            "traces/shop/web.pcap",
            "traces/shop/app.pcap",
        ],
        ["traces/shop/cache.pcap", "traces/shop/db.pcapng"],
    );
    let lent = cluster_alike(&[&first[..], &second[..]].concat(), &first, &second);
    assert!(lent.contains("read 2 captures ("), "{lent}");
    // In segments, where the first process keeps every capture's messages on disk.
    let segments = ["--segment-lines", "500"];
    let lent = cluster_alike(
        &[&segments[..], &first[..], &second[..]].concat(),
        &[&segments[..], &first[..]].concat(),
        &[&segments[..], &second[..]].concat(),
    );
    assert!(lent.contains("read 2 captures ("), "{lent}");
    // Behind NAT, every capture named by both: each read by one of them.
    let k8s = [
        "traces/k8s/app-0.pcap.gz",
        "traces/k8s/app-1.pcap.gz",
        "traces/k8s/cache.pcap.gz",
        "traces/k8s/client.pcap.gz",
        "traces/k8s/db.pcap.gz",
        "traces/k8s/web.pcap.gz",
        "--names",
        "traces/k8s/cluster.json",
    ];
    let lent = cluster_alike(&k8s, &k8s, &k8s);
    let read: usize = lent
        .split("here: read ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of captures read in {lent:?}"));
    assert!((1..6).contains(&read), "{lent}");
}

/// Two processes that name different files by one path, or one file by two paths, are
/// refused (exit 2), named, rather than a file read twice as two hosts and another
/// never.
#[test]
fn a_capture_must_have_one_path_and_a_path_one_capture() {
    let _alone = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/shop");
    // (process 0's file and what it holds, process 1's, what process 0 says)
    let cases = [
        (
            ("x.pcap", "web.pcap"),
            ("x.pcap", "app.pcap"),
            "process 1's x.pcap (",
        ),
        (
            ("x.pcap", "web.pcap"),
            ("y.pcap", "web.pcap"),
            "process 1's y.pcap is the same file as process 0's x.pcap",
        ),
    ];
    for ((zero, zero_holds), (one, one_holds), said) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (cluster, _) = cluster_file(dir.path());
        for (place, name, from) in [("zero", zero, zero_holds), ("one", one, one_holds)] {
            std::fs::create_dir(dir.path().join(place)).unwrap();
            std::fs::copy(root.join(from), dir.path().join(place).join(name)).unwrap();
        }
        let run = |process: &str, place: &str, file: &str| {
            let mut command = blackbox();
            command
                .current_dir(dir.path().join(place))
                .args(["nest", "--workers", "1", file, "--process", process])
                .arg("--cluster")
                .arg(&cluster);
            command
        };
        let second = run("1", "one", one).get_output_owned_in_thread();
        let first = run("0", "zero", zero).output().unwrap();
        let second = second.join().unwrap();
        let stderr = String::from_utf8_lossy(&first.stderr);
        assert_eq!(first.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
        assert!(second.status.success());
    }
}

/// Runs `nest --workers 1` alone with `alone` and as two processes of a cluster with
/// `first` and `second`, checks that the first process writes what one alone does and
/// the second nothing on stdout, and returns what the second wrote on stderr.
fn cluster_alike(alone: &[&str], first: &[&str], second: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let (cluster, _) = cluster_file(dir.path());
    fn nest<'a>(args: &[&'a str]) -> Vec<&'a str> {
        [&["nest", "--workers", "1"][..], args].concat()
    }
    let alone = blackbox().args(nest(alone)).output().unwrap();
    assert!(alone.status.success());
    let second = blackbox()
        .args(nest(second))
        .arg("--cluster")
        .arg(&cluster)
        .args(["--process", "1"])
        .get_output_owned_in_thread();
    let first = blackbox()
        .args(nest(first))
        .arg("--cluster")
        .arg(&cluster)
        .args(["--process", "0"])
        .output()
        .unwrap();
    let second = second.join().unwrap();
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    assert!(first.stdout == alone.stdout, "stdout differs");
    assert!(first.stderr == alone.stderr, "stderr differs");
    assert!(second.stdout.is_empty());
    String::from_utf8_lossy(&second.stderr).into_owned()
}

/// A process lost mid-run fails the run (exit 1: not the input's fault) with an
/// error naming it. Here "process 1" connects, says who it is and hangs up.
#[test]
fn a_lost_process_fails_the_run_and_is_named() {
    let _alone = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (cluster, addresses) = cluster_file(dir.path());
    let first = blackbox()
        .args([
            "nest",
            "--workers",
            "1",
            "traces/multitier.trace",
            "--process",
            "0",
        ])
        .arg("--cluster")
        .arg(&cluster)
        .get_output_owned_in_thread();
    // The stand-in connects, says it is process 1 and hangs up; again if process 0 has
    // not ended a few seconds later (about one run in thirty, the first connection
    // reached something else listening there for a moment, and process 0 waited 60 s).
    while !first.is_finished() {
        match std::net::TcpStream::connect(&addresses[0]) {
            // (A socket connected to itself, which a port nobody listens on yet allows.)
            Ok(mut stream) if stream.local_addr().ok() != stream.peer_addr().ok() => {
                std::io::Write::write_all(&mut stream, &1u64.to_be_bytes()).unwrap();
                drop(stream);
                for _ in 0..100 {
                    if first.is_finished() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(50));
                }
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    let first = first.join().unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(1), "{stderr}");
    let named = format!("process 1 ({}) was lost", addresses[1]);
    assert!(stderr.contains(&named), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A process lost while it runs parts of process 0's choices (the robust start of a
/// dense node, the second halves) fails the run, named, and process 0 does not hang
/// waiting for their answers. Process 1 is killed a second into a run that takes
/// several; wherever its run is by then, process 0 must fail and name it.
#[test]
fn a_process_lost_while_it_runs_parts_fails_the_run_and_is_named() {
    let _alone = ONE_CLUSTER_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (cluster, addresses) = cluster_file(dir.path());
    let trace = dir.path().join("dense.trace");
    std::fs::write(&trace, dense_requests(40_000)).unwrap();
    let args = [
        "nest".to_string(),
        "-q".into(),
        "--workers".into(),
        "1".into(),
        trace.display().to_string(),
        "--cluster".into(),
        cluster.display().to_string(),
        "--process".into(),
    ];
    let mut second = std::process::Command::new(env!("CARGO_BIN_EXE_blackbox"))
        .args(&args)
        .arg("1")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let first = blackbox().args(&args).arg("0").get_output_owned_in_thread();
    std::thread::sleep(std::time::Duration::from_secs(1));
    second.kill().unwrap();
    second.wait().unwrap();
    let waited = std::time::Instant::now();
    while !first.is_finished() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(120),
            "process 0 still waits two minutes after process 1 was lost"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let first = first.join().unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("process 1 ({})", addresses[1])),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `requests` requests from A into B, one every 0–8 ms, so that some 40 are open at
/// once: each calls C after 45–55 ms, which answers in 9–11 ms, then D after 45–55 ms,
/// which answers in 60–80 ms; B answers 9–11 ms later. A dense node whose choice takes
/// seconds.
fn dense_requests(requests: u32) -> String {
    let mut seed = 2024u64;
    let mut uniform = |low: f64, high: f64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        low + (high - low) * ((seed >> 11) as f64 / (1u64 << 53) as f64)
    };
    let mut lines: Vec<(f64, String)> = Vec::new();
    let mut t = 0.0;
    for r in 0..requests {
        t += uniform(0.0, 8.0);
        let c = t + uniform(45.0, 55.0);
        let c_end = c + uniform(9.0, 11.0);
        let d = c_end + uniform(45.0, 55.0);
        let d_end = d + uniform(60.0, 80.0);
        let end = d_end + uniform(9.0, 11.0);
        lines.extend([
            (t, format!("CALL A B p{r}")),
            (c, format!("CALL B C c{r}")),
            (c_end, format!("RET C B c{r}")),
            (d, format!("CALL B D d{r}")),
            (d_end, format!("RET D B d{r}")),
            (end, format!("RET B A p{r}")),
        ]);
    }
    lines.sort_by(|a, b| a.0.total_cmp(&b.0));
    lines
        .iter()
        .map(|(at, line)| format!("{:.6} {line}\n", at / 1000.0))
        .collect()
}

/// Runs a command on a thread of its own, for a test that plays another process.
trait InThread {
    fn get_output_owned_in_thread(&mut self) -> std::thread::JoinHandle<std::process::Output>;
}

impl InThread for assert_cmd::Command {
    fn get_output_owned_in_thread(&mut self) -> std::thread::JoinHandle<std::process::Output> {
        let mut command = std::mem::replace(self, blackbox());
        std::thread::spawn(move || command.output().unwrap())
    }
}

/// Nestings run from rayon's own threads (a study nesting seeds side by side) finish:
/// a thread of the pool waiting for the workers must lend itself to the pool, where
/// the workers' choices run, or every thread of it waits and none works.
#[test]
fn nestings_from_rayons_threads_finish() {
    use rayon::prelude::*;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/multitier-sample.trace"
    );
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut builder = blackbox::trace::TraceBuilder::new();
        let paths = [std::path::PathBuf::from(path)];
        blackbox::trace::text::read_files(&paths, &mut builder).unwrap();
        let trace = builder.finish();
        let options = blackbox::nesting::NestOptions::default();
        let roots: Vec<u64> = (0..4 * rayon::current_num_threads())
            .into_par_iter()
            .map(|_| {
                blackbox::nesting::nest(&trace, &options)
                    .unwrap()
                    .stats
                    .roots
            })
            .collect();
        done.send(roots).unwrap();
    });
    let roots = finished
        .recv_timeout(std::time::Duration::from_secs(120))
        .expect("the nestings finish");
    assert!(roots.windows(2).all(|two| two[0] == two[1]) && roots[0] > 0);
}
