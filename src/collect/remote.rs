//! What runs on each host: a POSIX `sh` script, fed on the transport's standard input
//! (the template's words and `sh -s`, so one script serves `ssh`, which hands the
//! remote shell one line, and `ip netns exec` or `kubectl exec`, which run their
//! arguments as they are). It reports the host (name, addresses, segmentation offloads,
//! the clock's state) on standard error, starts tcpdump (else dumpcap) writing a pcap
//! to standard output, and stops it with SIGTERM (which, unlike SIGINT, a background
//! job never ignores; tcpdump prints its counters on either) when collect says `stop`,
//! when its standard input ends (collect gone, the link lost) or when the shell is
//! signalled: no capture outlives its transport. Owns the
//! script and reading what it says back ([`Said`]); not running it ([`super`]).

use std::fmt::Write as _;

/// The prefix of every line the script says about the host, told apart from the
/// capture tool's own lines on standard error.
pub const PREFIX: &str = "blackbox-collect";

/// What the script is told to capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capture {
    /// The interface (`any`: every one, with Linux cooked headers).
    pub interface: String,
    /// A capture filter in tcpdump's language, if any.
    pub filter: Option<String>,
    /// Bytes kept of each packet (0: whole packets).
    pub snaplen: u32,
    /// The kernel's capture buffer in KiB (tcpdump's `-B`), if not the tool's default.
    pub buffer_kib: Option<u32>,
    /// Seconds after which the capture ends by itself, whatever happens to collect and
    /// the transport (where the host has `timeout`): the last guard against a capture
    /// left running.
    pub deadline_s: u64,
}

/// The script for `capture`. Values are quoted for the shell; nothing from the user is
/// run as code.
pub fn script(capture: &Capture) -> String {
    let quote = |value: &str| {
        shlex::try_quote(value)
            .map(|q| q.into_owned())
            .unwrap_or_default()
    };
    let mut text = String::new();
    let _ = writeln!(text, "iface={}", quote(&capture.interface));
    let _ = writeln!(
        text,
        "filter={}",
        quote(capture.filter.as_deref().unwrap_or(""))
    );
    let _ = writeln!(text, "snaplen={}", capture.snaplen);
    let _ = writeln!(
        text,
        "buffer={}",
        capture
            .buffer_kib
            .map(|b| b.to_string())
            .unwrap_or_default()
    );
    let _ = writeln!(text, "deadline={}", capture.deadline_s);
    text.push_str(BODY);
    text
}

/// The script after its settings. Every report is one line, `blackbox-collect KEY
/// VALUE...`; the capture's bytes are the only thing on standard output.
const BODY: &str = r#"say() { printf 'blackbox-collect %s\n' "$*" >&2; }
now() { t=$(date +%s.%N 2>/dev/null); case $t in *N*|'') t=$(date +%s);; esac; printf '%s' "$t"; }
say hostname "$(hostname 2>/dev/null || cat /proc/sys/kernel/hostname 2>/dev/null)"
if command -v ip >/dev/null 2>&1; then
  ip -o addr show 2>/dev/null | while read -r _ dev family address _; do say address "$dev" "$family" "$address"; done
else
  say note "no ip command: the host's addresses are not recorded"
fi
if command -v ethtool >/dev/null 2>&1; then
  if [ "$iface" = any ]; then devs=$(ls /sys/class/net 2>/dev/null); else devs=$iface; fi
  for dev in $devs; do
    [ "$dev" = lo ] && continue
    ethtool -k "$dev" 2>/dev/null | while IFS=: read -r key value; do
      case $key in
        tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload|large-receive-offload)
          set -- $value; say offload "$dev" "$key" "$1";;
      esac
    done
  done
else
  say note "no ethtool: segmentation offloads are not recorded"
fi
if command -v chronyc >/dev/null 2>&1 && chronyc -n tracking >/dev/null 2>&1; then
  chronyc -n tracking 2>/dev/null | while IFS= read -r line; do say clock chrony "$line"; done
elif command -v timedatectl >/dev/null 2>&1 && timedatectl show >/dev/null 2>&1; then
  timedatectl show 2>/dev/null | while IFS= read -r line; do say clock timedatectl "$line"; done
else
  say clock none
fi
if [ -z "${SSH_CONNECTION:-}" ] && [ -r /proc/self/stat ]; then
  # Under sudo, which drops it from the environment: from the ssh session's shell.
  p=$PPID
  while [ "${p:-1}" -gt 1 ]; do
    c=$(tr '\000' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^SSH_CONNECTION=//p')
    if [ -n "$c" ]; then SSH_CONNECTION=$c; break; fi
    p=$(sed -n 's/^PPid:[[:space:]]*//p' "/proc/$p/status" 2>/dev/null)
  done
fi
if [ -n "${SSH_CONNECTION:-}" ]; then
  set -- $SSH_CONNECTION
  own="not (host $1 and port $2 and host $3 and port $4)"
  if [ -n "$filter" ]; then filter="($filter) and $own"; else filter=$own; fi
fi
guard=
if timeout --foreground 1 true >/dev/null 2>&1; then
  guard="timeout --foreground -s TERM $deadline"
elif timeout -s TERM 1 true >/dev/null 2>&1; then
  guard="timeout -s TERM $deadline"
fi
if command -v tcpdump >/dev/null 2>&1; then
  say tool tcpdump "$(tcpdump --version 2>&1 | head -n 1)"
  precision=
  tcpdump --help 2>&1 | grep -q time-stamp-precision && precision=--time-stamp-precision=nano
  say filter "$filter"
  say start "$(now)"
  $guard tcpdump -n -U -i "$iface" -s "$snaplen" $precision ${buffer:+-B "$buffer"} -w - ${filter:+"$filter"} &
elif command -v dumpcap >/dev/null 2>&1; then
  say tool dumpcap "$(dumpcap --version 2>&1 | head -n 1)"
  say filter "$filter"
  say start "$(now)"
  $guard dumpcap -q -P -i "$iface" -s "$snaplen" ${buffer:+-B "$(( (buffer + 1023) / 1024 ))"} ${filter:+-f "$filter"} -w - &
else
  say fail "neither tcpdump nor dumpcap is installed"
  exit 127
fi
pid=$!
exec >/dev/null
stopped=
stop() {
  [ -n "$stopped" ] && return
  stopped=1
  at=$(now)
  # The capture first: with collect gone, saying anything raises SIGPIPE.
  kill -TERM "$pid" 2>/dev/null
  trap '' PIPE
  say stopping "$at"
  wait "$pid"
  say exit "$?" "$(now)"
}
trap stop EXIT
trap 'stop; exit 130' INT TERM HUP
"#;

/// What collect writes to stop the capture: the script's function, then the shell's
/// end (the script also stops when its input ends, for transports that pass that on).
pub const STOP: &[u8] = b"stop\nexit\n";

/// One line of the host's standard error, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Said {
    /// The host's name for itself.
    Hostname(String),
    /// One of its addresses (`inet`/`inet6`, with its prefix length).
    Address {
        /// The interface.
        interface: String,
        /// The address as `ip` prints it (`10.0.0.2/24`).
        address: String,
    },
    /// A segmentation offload's state.
    Offload {
        /// The interface.
        interface: String,
        /// The feature, as ethtool names it.
        feature: String,
        /// Whether it is on.
        on: bool,
    },
    /// A line of the clock's state, with what said it (`chrony`, `timedatectl`; `none`
    /// when neither could).
    Clock {
        /// chrony, timedatectl or none.
        source: String,
        /// The line.
        line: String,
    },
    /// The capture tool and its version line.
    Tool {
        /// tcpdump or dumpcap.
        name: String,
        /// Its first `--version` line.
        version: String,
    },
    /// The filter the tool was given (with the transport's own connection left out).
    Filter(String),
    /// The host's clock when the tool was started.
    Start(String),
    /// The host's clock when it was told to stop.
    Stopping(String),
    /// The tool's exit status and the host's clock then.
    Exit {
        /// The exit status.
        status: i32,
        /// The host's clock.
        at: String,
    },
    /// The tool is capturing (tcpdump's `listening on`, dumpcap's `Capturing on`).
    Listening(String),
    /// One of the tool's end-of-run counters.
    Counter(Counter, u64),
    /// The script could not capture at all.
    Fail(String),
    /// Something the script could not record.
    Note(String),
    /// Any other line: the tool's or the transport's own words.
    Other(String),
}

/// The counters tcpdump and dumpcap print when they stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Packets the tool wrote.
    Captured,
    /// Packets the filter passed.
    ReceivedByFilter,
    /// Packets the kernel dropped for lack of buffer space.
    DroppedByKernel,
    /// Packets the interface (its driver) dropped.
    DroppedByInterface,
}

/// Reads one line of a host's standard error.
pub fn read_line(line: &str) -> Said {
    let line = line.trim_end_matches(['\r', '\n']);
    if let Some(rest) = line.strip_prefix(PREFIX).and_then(|r| r.strip_prefix(' ')) {
        let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
        let mut words = value.split_whitespace();
        let said = match key {
            "hostname" => Some(Said::Hostname(value.to_owned())),
            "address" => {
                let interface = words.next().unwrap_or_default().to_owned();
                let _family = words.next();
                words.next().map(|address| Said::Address {
                    interface,
                    address: address.to_owned(),
                })
            }
            "offload" => match (words.next(), words.next(), words.next()) {
                (Some(interface), Some(feature), Some(state)) => Some(Said::Offload {
                    interface: interface.to_owned(),
                    feature: feature.to_owned(),
                    on: state == "on",
                }),
                _ => None,
            },
            "clock" => {
                let (source, line) = value.split_once(' ').unwrap_or((value, ""));
                Some(Said::Clock {
                    source: source.to_owned(),
                    line: line.to_owned(),
                })
            }
            "tool" => {
                let (name, version) = value.split_once(' ').unwrap_or((value, ""));
                Some(Said::Tool {
                    name: name.to_owned(),
                    version: version.to_owned(),
                })
            }
            "filter" => Some(Said::Filter(value.to_owned())),
            "start" => Some(Said::Start(value.to_owned())),
            "stopping" => Some(Said::Stopping(value.to_owned())),
            "exit" => match (words.next().map(str::parse), words.next()) {
                (Some(Ok(status)), Some(at)) => Some(Said::Exit {
                    status,
                    at: at.to_owned(),
                }),
                _ => None,
            },
            "fail" => Some(Said::Fail(value.to_owned())),
            "note" => Some(Said::Note(value.to_owned())),
            _ => None,
        };
        return said.unwrap_or_else(|| Said::Other(line.to_owned()));
    }
    if let Some(counter) = counter(line) {
        return counter;
    }
    // tcpdump: "listening on eth0, link-type EN10MB (Ethernet), snapshot length ...";
    // dumpcap: "Capturing on 'eth0'".
    let listening = line
        .strip_prefix("tcpdump: listening on ")
        .or_else(|| line.strip_prefix("Capturing on "));
    if let Some(rest) = listening {
        let interface = rest.split(',').next().unwrap_or(rest).trim_matches('\'');
        return Said::Listening(interface.to_owned());
    }
    Said::Other(line.to_owned())
}

/// tcpdump's "N packets captured" lines; dumpcap's "Packets received/dropped on
/// interface 'eth0': 10/0 (pcap:0/dumpcap:0/flushed:0/ps_ifdrop:0) (100.0%)" and
/// "Packets captured: N".
fn counter(line: &str) -> Option<Said> {
    if let Some((count, what)) = line.split_once(' ') {
        if let Ok(count) = count.parse::<u64>() {
            let counter = match what {
                "packet captured" | "packets captured" => Counter::Captured,
                "packet received by filter" | "packets received by filter" => {
                    Counter::ReceivedByFilter
                }
                "packet dropped by kernel" | "packets dropped by kernel" => {
                    Counter::DroppedByKernel
                }
                "packet dropped by interface" | "packets dropped by interface" => {
                    Counter::DroppedByInterface
                }
                _ => return None,
            };
            return Some(Said::Counter(counter, count));
        }
    }
    if let Some(rest) = line.strip_prefix("Packets captured: ") {
        return rest
            .trim()
            .parse()
            .ok()
            .map(|n| Said::Counter(Counter::Captured, n));
    }
    None
}

/// dumpcap's per-interface line, which holds the kernel's drops as `pcap:N` and the
/// interface's as `ps_ifdrop:N`; as counters.
pub fn dumpcap_drops(line: &str) -> Vec<(Counter, u64)> {
    if !line.starts_with("Packets received/dropped on interface") {
        return Vec::new();
    }
    let mut counters = Vec::new();
    for part in line.split(['(', ')', '/', ' ']) {
        if let Some((name, value)) = part.split_once(':') {
            if let Ok(value) = value.parse::<u64>() {
                match name {
                    "pcap" => counters.push((Counter::DroppedByKernel, value)),
                    "ps_ifdrop" => counters.push((Counter::DroppedByInterface, value)),
                    _ => {}
                }
            }
        }
    }
    counters
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcpdump_counters_and_listening_are_read() {
        assert_eq!(
            read_line("1234 packets captured"),
            Said::Counter(Counter::Captured, 1234)
        );
        assert_eq!(
            read_line("1 packet dropped by kernel"),
            Said::Counter(Counter::DroppedByKernel, 1)
        );
        assert_eq!(
            read_line("7 packets dropped by interface\n"),
            Said::Counter(Counter::DroppedByInterface, 7)
        );
        assert_eq!(
            read_line(
                "tcpdump: listening on eth0, link-type EN10MB (Ethernet), snapshot length 262144 bytes"
            ),
            Said::Listening("eth0".into())
        );
        assert_eq!(
            read_line("Capturing on 'eth0'"),
            Said::Listening("eth0".into())
        );
        assert_eq!(
            read_line("tcpdump: eth9: No such device exists"),
            Said::Other("tcpdump: eth9: No such device exists".into())
        );
    }

    #[test]
    fn the_scripts_reports_are_read() {
        assert_eq!(
            read_line("blackbox-collect address eth0 inet 10.77.0.20/24"),
            Said::Address {
                interface: "eth0".into(),
                address: "10.77.0.20/24".into()
            }
        );
        assert_eq!(
            read_line("blackbox-collect offload eth0 generic-receive-offload on"),
            Said::Offload {
                interface: "eth0".into(),
                feature: "generic-receive-offload".into(),
                on: true
            }
        );
        assert_eq!(
            read_line("blackbox-collect exit 0 1795961130.250000000"),
            Said::Exit {
                status: 0,
                at: "1795961130.250000000".into()
            }
        );
        assert_eq!(
            read_line("blackbox-collect clock chrony Leap status     : Normal"),
            Said::Clock {
                source: "chrony".into(),
                line: "Leap status     : Normal".into()
            }
        );
        // A report cut short is kept as it was said.
        assert_eq!(
            read_line("blackbox-collect exit"),
            Said::Other("blackbox-collect exit".into())
        );
    }

    #[test]
    fn dumpcaps_drops_are_read() {
        assert_eq!(
            dumpcap_drops(
                "Packets received/dropped on interface 'eth0': 10/3 (pcap:2/dumpcap:1/flushed:0/ps_ifdrop:5) (76.9%)"
            ),
            vec![(Counter::DroppedByKernel, 2), (Counter::DroppedByInterface, 5)]
        );
    }

    #[test]
    fn settings_reach_the_shell_as_they_were_given() {
        let filter = "tcp and not host 10.0.0.1'; rm -rf / $(reboot) \"`x`\" \\";
        let text = script(&Capture {
            interface: "eth 0".into(),
            filter: Some(filter.into()),
            snaplen: 0,
            buffer_kib: Some(4),
            deadline_s: 60,
        });
        let settings: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
        let shown = std::process::Command::new("sh")
            .arg("-c")
            .arg(settings + "printf '%s|%s|%s' \"$iface\" \"$filter\" \"$buffer\"")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&shown.stdout),
            format!("eth 0|{filter}|4")
        );
    }
}
