//! Reading only some of a capture's packets: `--filter` gives the messages of exactly the
//! packets tcpdump selects with the same expression, and `--from`/`--to` those of the
//! packets captured in the window, each form of time naming the same window, with every
//! packet left out counted.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use support::{blackbox, outputs_of, stdout_of};

fn main() -> ExitCode {
    support::needs::run(checks![
        a_filter_reads_the_packets_tcpdump_selects_with_it needs Tcpdump,
        a_filter_libpcap_refuses_is_bad_usage_in_libpcaps_words needs Tcpdump,
        a_time_window_reads_the_packets_captured_in_it_whatever_form_its_times_take,
    ])
}

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces")
        .join(name)
}

fn a_filter_reads_the_packets_tcpdump_selects_with_it() {
    let dir = tempfile::tempdir().unwrap();
    for capture in ["shop/app.pcap", "shop/db.pcapng"] {
        let capture = shipped(capture);
        let selected = dir.path().join(capture.file_name().unwrap());
        for expression in [
            "not tcp port 6379",
            "tcp[tcpflags] & tcp-push != 0 or port 5432",
            "src host 10.77.0.30 or icmp",
        ] {
            // Nanoseconds, as the pcapng holds them.
            let tcpdump = Command::new("tcpdump")
                .args(["--time-stamp-precision=nano", "-r"])
                .arg(&capture)
                .arg("-w")
                .arg(&selected)
                .arg(expression)
                .output()
                .unwrap();
            assert!(tcpdump.status.success(), "{tcpdump:?}");
            let (ours, summary) = outputs_of(
                blackbox()
                    .args(["records", "--filter", expression])
                    .arg(&capture),
            );
            let theirs = stdout_of(blackbox().arg("records").arg(&selected));
            assert!(ours.lines().count() > 100, "{expression}: {ours}");
            assert!(
                ours == theirs,
                "{} --filter '{expression}' differs from tcpdump's selection",
                capture.display()
            );
            let all = stdout_of(blackbox().arg("records").arg(&capture));
            assert!(
                ours == all || summary.contains(": left out by --filter"),
                "{summary}"
            );
        }
    }
}

fn a_filter_libpcap_refuses_is_bad_usage_in_libpcaps_words() {
    let output = blackbox()
        .args(["nest", "--filter", "tcp prot 80"])
        .arg(shipped("shop/app.pcap"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--filter `tcp prot 80`: ") && stderr.contains("syntax error"),
        "{stderr}"
    );
}

/// The capture times of a classic little-endian microsecond pcap's packets.
fn packet_times(pcap: &[u8]) -> Vec<i64> {
    assert_eq!(
        pcap[..4],
        [0xd4, 0xc3, 0xb2, 0xa1],
        "a little-endian µs pcap"
    );
    let word = |at: usize| i64::from(u32::from_le_bytes(pcap[at..at + 4].try_into().unwrap()));
    let mut times = Vec::new();
    let mut at = 24;
    while at + 16 <= pcap.len() {
        times.push(word(at) * 1_000_000_000 + word(at + 4) * 1_000);
        at += 16 + usize::try_from(word(at + 8)).unwrap();
    }
    times
}

/// What the summary says was left out for `reason`.
fn left_out(summary: &str, reason: &str) -> usize {
    summary
        .lines()
        .find_map(|line| line.trim().strip_suffix(&format!(": {reason}")))
        .and_then(|line| line.strip_prefix("skipped "))
        .map_or(0, |n| n.parse().unwrap())
}

fn a_time_window_reads_the_packets_captured_in_it_whatever_form_its_times_take() {
    let capture = shipped("shop/app.pcap");
    let times = packet_times(&std::fs::read(&capture).unwrap());
    let start = times[0];
    let (from, to) = (start + 2_000_000_000, start + 3_500_000_000);
    let clock = |t: i64| {
        let of_day = t.rem_euclid(86_400 * 1_000_000_000);
        let (seconds, nanos) = (of_day / 1_000_000_000, of_day % 1_000_000_000);
        format!(
            "{:02}:{:02}:{:02}.{nanos:09}",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        )
    };
    let epoch = |t: i64| format!("@{}.{:09}", t / 1_000_000_000, t % 1_000_000_000);
    let read = |from: &str, to: &str| {
        outputs_of(
            blackbox()
                .args(["records", "--from", from, "--to", to])
                .arg(&capture),
        )
    };
    let (records, summary) = read("2s", "3.5s");
    for line in records.lines() {
        let seconds: f64 = line.split(' ').next().unwrap().parse().unwrap();
        let time = (seconds * 1e6).round() as i64 * 1_000;
        assert!((from..to).contains(&time), "{line} is outside the window");
    }
    assert!(records.lines().count() > 100, "{records}");
    let before = times.iter().filter(|&&t| t < from).count();
    let after = times.iter().filter(|&&t| t >= to).count();
    assert!(before > 0 && after > 0);
    assert_eq!(
        left_out(&summary, "captured before --from"),
        before,
        "{summary}"
    );
    assert_eq!(
        left_out(&summary, "captured at or after --to"),
        after,
        "{summary}"
    );
    for (from, to) in [(clock(from), clock(to)), (epoch(from), epoch(to))] {
        assert_eq!(
            read(&from, &to),
            (records.clone(), summary.clone()),
            "{from} {to}"
        );
    }
    let output = blackbox()
        .args(["records", "--from", "5min", "--to", "1min"])
        .arg(&capture)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let output = blackbox()
        .args(["records", "--from", "soon"])
        .arg(&capture)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("`soon` is no time"), "{stderr}");
}
