//! Tests that need something the checkout does not hold: a browser, Graphviz, the
//! development traces beside the project, a downloaded corpus. The suite never installs
//! anything (`.ci/run` does, for CI). A test whose need is absent is reported as
//! ignored, with the need as its kind, and one line at the end counts the skips and
//! says how to meet them; under `CI` it runs and fails instead, so CI can not pass by
//! skipping. Test files using this are `harness = false` and end their `main` in
//! [`run`].

use libtest_mimic::{Arguments, Trial};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Something outside the checkout a test needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    /// Headless Chromium (or Chrome), for the HTML report.
    Chromium,
    /// Graphviz's `dot`, for `--svg`.
    Graphviz,
    /// `../shared/data/dev/`, the real traces with their true parents.
    DevTraces,
    /// A python with the official opentelemetry-proto package, named by
    /// `BLACKBOX_OTLP_PYTHON`, to run the OTLP receiver of `tests/otlp/`.
    OtlpReceiver,
    /// tcpdump, and with it libpcap, which `--filter` loads: the filter's results are
    /// checked against tcpdump's.
    Tcpdump,
    /// Root and network namespaces, with tcpdump, python3 and an OpenSSH server: for
    /// `blackbox collect` on namespaces of this machine.
    Namespaces,
    /// What the shop of `traces/shop/` runs on (nginx, Redis, PostgreSQL, and the venv
    /// `BLACKBOX_SHOP_VENV` names with its Python clients), besides [`Need::Namespaces`].
    Shop,
    /// The SpamAssassin mbox named by `BLACKBOX_SPAM_ASSASSIN`; a download, so it is
    /// asked for by setting the variable and is never required, not even under CI.
    SpamAssassin,
}

impl Need {
    /// How the summary names it.
    fn name(self) -> &'static str {
        match self {
            Need::Chromium => "Chromium",
            Need::Graphviz => "Graphviz",
            Need::DevTraces => "../shared/data/dev",
            Need::OtlpReceiver => "BLACKBOX_OTLP_PYTHON",
            Need::SpamAssassin => "BLACKBOX_SPAM_ASSASSIN",
            Need::Tcpdump => "tcpdump",
            Need::Namespaces => "root with network namespaces",
            Need::Shop => "the shop's servers",
        }
    }

    /// How to meet it.
    fn how(self) -> &'static str {
        match self {
            Need::Chromium => "install chromium, or set BLACKBOX_CHROMIUM to a Chrome",
            Need::Graphviz => "install graphviz",
            Need::DevTraces => "put the development traces beside the project",
            Need::OtlpReceiver => "run .ci/run, or see tests/otlp/README.md",
            Need::SpamAssassin => "run scripts/spam-assassin-mbox.sh and set the variable",
            Need::Tcpdump => "install tcpdump (it brings libpcap)",
            Need::Namespaces => "run as root with iproute2, tcpdump, python3 and openssh-server (.ci/run installs them)",
            Need::Shop => "install nginx-light, redis-server and postgresql and set BLACKBOX_SHOP_VENV (run .ci/run)",
        }
    }

    /// Whether CI must have it.
    fn required_in_ci(self) -> bool {
        self != Need::SpamAssassin
    }

    /// Whether this machine has it.
    pub fn present(self) -> bool {
        match self {
            Need::Chromium => chromium().is_some(),
            Need::Graphviz => on_path("dot"),
            Need::DevTraces => dev_traces().is_dir(),
            Need::OtlpReceiver => otlp_python().is_some(),
            Need::SpamAssassin => std::env::var_os("BLACKBOX_SPAM_ASSASSIN").is_some(),
            Need::Tcpdump => on_path("tcpdump"),
            Need::Namespaces => namespaces(),
            Need::Shop => namespaces() && shop(),
        }
    }
}

/// Whether `name` is an executable file in a directory on the PATH.
fn on_path(name: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(name))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Whether this process may make network namespaces and has what collect's tests run
/// in them.
fn namespaces() -> bool {
    // SAFETY: geteuid(2) only reads the process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    root && ["ip", "tcpdump", "python3", "ssh", "ssh-keygen"]
        .iter()
        .all(|tool| on_path(tool))
        && Path::new("/usr/sbin/sshd").exists()
}

/// Whether the shop's servers and the venv of its Python clients are here.
fn shop() -> bool {
    let postgres = std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|mut versions| {
        versions.any(|v| v.is_ok_and(|v| v.path().join("bin/postgres").exists()))
    });
    let venv = std::env::var_os("BLACKBOX_SHOP_VENV").is_some_and(|venv| {
        std::process::Command::new(Path::new(&venv).join("bin/python"))
            .args(["-c", "import redis, psycopg2"])
            .output()
            .is_ok_and(|out| out.status.success())
    });
    postgres && venv && on_path("nginx") && on_path("redis-server")
}

/// The Chromium to drive: `BLACKBOX_CHROMIUM`, or one on the PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("BLACKBOX_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| on_path(name))
        .map(PathBuf::from)
}

/// The python `BLACKBOX_OTLP_PYTHON` names, if it imports opentelemetry-proto.
pub fn otlp_python() -> Option<PathBuf> {
    let python = PathBuf::from(std::env::var_os("BLACKBOX_OTLP_PYTHON")?);
    let imports = std::process::Command::new(&python)
        .args(["-c", "import opentelemetry.proto"])
        .output()
        .is_ok_and(|out| out.status.success());
    imports.then_some(python)
}

/// `../shared/data/dev/`, beside the project.
pub fn dev_traces() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/dev")
}

/// One test: its name, what it needs (if anything) and its body.
pub struct Check {
    name: &'static str,
    needs: Option<Need>,
    body: fn(),
}

impl Check {
    /// A test named `name` that needs `needs`; see [`checks!`](crate::checks).
    pub fn new(name: &'static str, needs: Option<Need>, body: fn()) -> Check {
        Check { name, needs, body }
    }
}

/// The tests of a `harness = false` file, each a function named as the test, followed
/// by `needs NEED` when it needs something: `checks![parses_x, renders_y needs Chromium]`.
#[macro_export]
macro_rules! checks {
    ($($body:ident $(needs $need:ident)?),* $(,)?) => {
        vec![$($crate::support::needs::Check::new(
            stringify!($body),
            None $(.or(Some($crate::support::needs::Need::$need)))?,
            $body,
        )),*]
    };
}

/// Runs `checks` like `cargo test` does, then prints one line counting what was skipped
/// for want of what.
pub fn run(checks: Vec<Check>) -> ExitCode {
    let arguments = Arguments::from_args();
    let in_ci = std::env::var_os("CI").is_some();
    let mut skipped: Vec<Need> = Vec::new();
    let mut present: Vec<(Need, bool)> = Vec::new();
    let mut has = |need: Need| match present.iter().find(|(n, _)| *n == need) {
        Some(&(_, here)) => here,
        None => {
            let here = need.present();
            present.push((need, here));
            here
        }
    };
    let trials: Vec<Trial> = checks
        .into_iter()
        .map(|check| {
            let body = check.body;
            let trial = Trial::test(check.name, move || {
                body();
                Ok(())
            });
            let Some(need) = check.needs else {
                return trial;
            };
            let trial = trial.with_kind(format!("needs {}", need.name()));
            if has(need) {
                return trial;
            }
            if in_ci && need.required_in_ci() {
                let message = format!("CI must have {}: {}", need.name(), need.how());
                return Trial::test(check.name, move || Err(message.clone().into()))
                    .with_kind(format!("needs {}", need.name()));
            }
            if !arguments.ignored && filtered_in(&arguments, check.name) {
                skipped.push(need);
            }
            trial.with_ignored_flag(true)
        })
        .collect();
    let conclusion = libtest_mimic::run(&arguments, trials);
    if !skipped.is_empty() {
        skipped.sort();
        let mut parts = Vec::new();
        let mut rest = skipped.as_slice();
        while let Some(&need) = rest.first() {
            let same = rest.iter().take_while(|&&n| n == need).count();
            parts.push(format!(
                "{same} for want of {} ({})",
                need.name(),
                need.how()
            ));
            rest = &rest[same..];
        }
        let tests = if skipped.len() == 1 { "test" } else { "tests" };
        println!("skipped {} {tests}: {}\n", skipped.len(), parts.join("; "));
    }
    conclusion.exit_code()
}

/// Whether the command line's filter lets `name` run.
fn filtered_in(arguments: &Arguments, name: &str) -> bool {
    let Some(filter) = &arguments.filter else {
        return !arguments.skip.iter().any(|s| name.contains(s.as_str()));
    };
    let wanted = if arguments.exact {
        name == filter
    } else {
        name.contains(filter.as_str())
    };
    wanted && !arguments.skip.iter().any(|s| name.contains(s.as_str()))
}
