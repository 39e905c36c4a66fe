//! A cluster's links: one TCP connection between each two processes, made here rather
//! than by timely's own set-up, which retries forever and reports on stdout (where
//! the patterns go). Owns the handshake (each process that connects sends its index),
//! the wait for the others with a deadline that names who did not come, and naming a
//! process lost mid-run; the dataflow over the links is [`super`]'s.

use super::WorkerError;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Connects this process (`process`, an index into `addresses`) to every other: it
/// dials those before it and accepts those after it, as timely expects. Returns one
/// stream per process in order, `None` at its own place.
pub(super) fn connect(
    addresses: &[String],
    process: usize,
    patience: Duration,
) -> Result<Vec<Option<TcpStream>>, WorkerError> {
    let start = |why: String| WorkerError::Start(why);
    if process >= addresses.len() {
        return Err(start(format!(
            "--process {process}, but the cluster file lists {} processes (0 to {})",
            addresses.len(),
            addresses.len().saturating_sub(1)
        )));
    }
    let deadline = Instant::now() + patience;
    let listener = TcpListener::bind(addresses[process].as_str())
        .map_err(|e| start(format!("cannot listen on {}: {e}", addresses[process])))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| start(format!("cannot listen on {}: {e}", addresses[process])))?;
    let mut streams: Vec<Option<TcpStream>> = (0..addresses.len()).map(|_| None).collect();
    for (index, address) in addresses.iter().enumerate().take(process) {
        streams[index] = Some(dial(address, process, deadline).map_err(|e| {
            start(format!(
                "process {index} ({address}) did not answer within {} s: {e}",
                patience.as_secs()
            ))
        })?);
    }
    while let Some(missing) = (process + 1..addresses.len()).find(|&i| streams[i].is_none()) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream
                    .set_nonblocking(false)
                    .map_err(|e| start(format!("a link broke while it was made: {e}")))?;
                let mut index = [0u8; 8];
                stream
                    .read_exact(&mut index)
                    .map_err(|e| start(format!("a link broke while it was made: {e}")))?;
                let index = u64::from_be_bytes(index) as usize;
                if index <= process || index >= addresses.len() || streams[index].is_some() {
                    return Err(start(format!(
                        "a process calling itself {index} connected to {}: are two cluster files in use?",
                        addresses[process]
                    )));
                }
                stream
                    .set_nodelay(true)
                    .map_err(|e| start(format!("cannot set up a link: {e}")))?;
                streams[index] = Some(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<String> = (missing..addresses.len())
                        .filter(|&i| streams[i].is_none())
                        .map(|i| format!("process {i} ({})", addresses[i]))
                        .collect();
                    return Err(start(format!(
                        "{} did not connect within {} s",
                        missing.join(", "),
                        patience.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(start(format!(
                    "cannot accept on {}: {e}",
                    addresses[process]
                )))
            }
        }
    }
    Ok(streams)
}

/// Dials `address` until it answers or the deadline passes, and says who is calling.
fn dial(address: &str, process: usize, deadline: Instant) -> std::io::Result<TcpStream> {
    loop {
        match TcpStream::connect(address) {
            // Dialling a local port nobody listens on yet can connect the socket to
            // itself (TCP's simultaneous open, when the kernel picks that very port as
            // the source): that is no process, so dial again.
            Ok(stream) if stream.local_addr().ok() == stream.peer_addr().ok() => {
                drop(stream);
                std::thread::sleep(Duration::from_millis(100));
            }
            Ok(mut stream) => {
                stream.set_nodelay(true)?;
                stream.write_all(&(process as u64).to_be_bytes())?;
                return Ok(stream);
            }
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// What was said of the first process lost, if one was.
static LOST: Mutex<Option<String>> = Mutex::new(None);

/// Once links are up, a lost process panics timely's thread that reads from it
/// (`timely:recv-I`), then every worker that waits on it, then the join of the links.
/// Names the process in [`lost`] and keeps those panics' messages off stderr: the
/// error names it once.
pub(super) fn name_lost_processes(addresses: &[String]) {
    *ADDRESSES.lock().unwrap_or_else(|e| e.into_inner()) = addresses.to_vec();
    // Once per process: a hook installed per cluster would wrap the one before it.
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            let name = thread.name().unwrap_or("");
            let link = (name.strip_prefix("timely:recv-"))
                .or_else(|| name.strip_prefix("timely:send-"))
                .and_then(|index| index.parse::<usize>().ok());
            let mut lost = LOST.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(index) = link {
                if lost.is_none() {
                    let addresses = ADDRESSES.lock().unwrap_or_else(|e| e.into_inner());
                    let address = addresses.get(index).map_or("?", String::as_str);
                    let why = (info.payload().downcast_ref::<String>().cloned())
                        .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    *lost = Some(format!("process {index} ({address}) was lost: {why}"));
                }
                return;
            }
            if lost.is_some() {
                // What follows a lost process (workers waiting on it, its links joined)
                // says nothing more than the error will.
                return;
            }
            drop(lost);
            previous(info);
        }));
    });
}

/// The addresses of the cluster started last, for naming a lost process.
static ADDRESSES: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The process lost, if one was.
pub(super) fn lost() -> Option<String> {
    LOST.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that never comes is named, with its address, once the wait is over.
    #[test]
    fn a_process_that_does_not_come_is_named() {
        let free = |_| {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().to_string()
        };
        let addresses: Vec<String> = (0..3).map(free).collect();
        let error = connect(&addresses, 0, Duration::from_millis(300)).unwrap_err();
        let expected = format!(
            "process 1 ({}), process 2 ({}) did not connect within 0 s",
            addresses[1], addresses[2]
        );
        assert_eq!(error, WorkerError::Start(expected));
        let error = connect(&addresses, 3, Duration::from_millis(300)).unwrap_err();
        assert!(error.to_string().contains("lists 3 processes (0 to 2)"));
    }
}
