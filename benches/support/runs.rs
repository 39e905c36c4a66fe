//! Runs of the built `blackbox` binary, for the benchmarks that time whole commands:
//! the traces they read, generated once with maketrace, and a child's resource use.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// A trace of `messages` messages of `traces/configs/{config}.toml` (seed 1), generated
/// once with maketrace and cached under `target/bench-traces/`.
pub fn generated_trace(config: &str, messages: u64) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/bench-traces");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{config}-{messages}.trace"));
    if path.exists() {
        return path;
    }
    eprintln!("generating {path:?} ...");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["run", "--release", "-q", "-p", "maketrace", "--"])
        .arg(root.join(format!("traces/configs/{config}.toml")))
        .args(["--messages", &messages.to_string(), "--seed", "1", "-o"])
        .arg(path.with_extension("partial"))
        .status()
        .unwrap();
    assert!(status.success(), "maketrace failed");
    // Renamed only once whole: an interrupted run leaves no trace that looks done.
    std::fs::rename(path.with_extension("partial"), &path).unwrap();
    path
}

/// The child's stdout (if piped), read to its end, and its resource use once it exited
/// successfully.
pub fn finished(mut child: Child) -> (Vec<u8>, libc::rusage) {
    let mut output = Vec::new();
    if let Some(mut stdout) = child.stdout.take() {
        std::io::Read::read_to_end(&mut stdout, &mut output).unwrap();
    }
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills; the pid is our own child's, and
    // std never waits for it after this.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        let pid = libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut usage);
        assert_eq!(pid, child.id() as libc::pid_t, "wait4 failed");
        usage
    };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "blackbox failed"
    );
    // Already waited for: dropping it would not wait again, but say so.
    std::mem::forget(child);
    (output, usage)
}

/// Peak resident bytes of a finished child (Linux gives `ru_maxrss` in kilobytes).
pub fn peak_bytes(usage: &libc::rusage) -> u64 {
    usage.ru_maxrss as u64 * 1024
}
