//! `blackbox collect` on network namespaces of this machine: the shipped shop captured
//! through `ip netns exec` and through real OpenSSH servers nests into the patterns of
//! its shipped captures, and what goes wrong (an interrupt, collect or one link killed,
//! a buffer too small, hosts unreachable or without tcpdump, a full disk) is named,
//! recorded and leaves no capture running (tests/collect/faults.sh, one scenario per
//! test), and pods picked by label through a stand-in kubectl are captured and named
//! for their Services. Needs root; `.ci/run` installs the rest.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use support::{blackbox, stdout_of};

fn main() -> ExitCode {
    support::needs::run(checks![
        the_shop_collected_over_netns_and_ssh_nests_as_its_shipped_captures needs Shop,
        an_interrupt_stops_every_capture_and_keeps_it needs Namespaces,
        killing_collect_leaves_no_capture_running needs Namespaces,
        a_lost_ssh_link_stops_its_capture_and_the_others_go_on needs Namespaces,
        drops_from_a_tiny_buffer_are_recorded_and_warned_of needs Namespaces,
        unreachable_hosts_and_hosts_without_tcpdump_are_named needs Namespaces,
        a_full_disk_stops_every_host_cleanly needs Namespaces,
        pods_picked_by_label_are_captured_and_named_for_their_services needs Namespaces,
    ])
}

fn project() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs one scenario of tests/collect/faults.sh; its checks are its output.
fn scenario(name: &str) {
    let output = Command::new("bash")
        .arg(project().join("tests/collect/faults.sh"))
        .arg(name)
        .arg(env!("CARGO_BIN_EXE_blackbox"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && said.contains("ok: ") && !said.contains("FAILED"),
        "faults.sh {name}:\n{said}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn an_interrupt_stops_every_capture_and_keeps_it() {
    scenario("interrupt");
}

fn killing_collect_leaves_no_capture_running() {
    scenario("killed");
}

fn a_lost_ssh_link_stops_its_capture_and_the_others_go_on() {
    scenario("ssh-lost");
}

fn drops_from_a_tiny_buffer_are_recorded_and_warned_of() {
    scenario("drops");
}

fn unreachable_hosts_and_hosts_without_tcpdump_are_named() {
    scenario("unreachable");
}

fn a_full_disk_stops_every_host_cleanly() {
    scenario("full-disk");
}

fn pods_picked_by_label_are_captured_and_named_for_their_services() {
    scenario("kubernetes");
}

/// Each pattern of `nest -q --top 100` with its count, most frequent first.
fn patterns(inputs: &[PathBuf]) -> Vec<(u64, String)> {
    let table = stdout_of(blackbox().args(["nest", "-q", "--top", "100"]).args(inputs));
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            Some((words.get(1)?.parse().ok()?, (*words.last()?).to_owned()))
        })
        .collect()
}

fn the_shop_collected_over_netns_and_ssh_nests_as_its_shipped_captures() {
    let shipped: Vec<PathBuf> = std::fs::read_dir(project().join("traces/shop"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            path.extension()
                .is_some_and(|e| e == "pcap" || e == "pcapng")
        })
        .collect();
    let true_patterns: Vec<String> = patterns(&shipped)
        .into_iter()
        .take(3)
        .map(|(_, pattern)| pattern)
        .collect();
    assert_eq!(true_patterns.len(), 3);
    let dir = tempfile::tempdir().unwrap();
    for transport in ["netns", "ssh"] {
        let out = dir.path().join(transport);
        // As the shipped captures were made: 15 s of load from 4 clients.
        let run = Command::new("bash")
            .arg(project().join("traces/shop/capture.sh"))
            .args(["15", "4"])
            .arg(&out)
            .env("SHOP_COLLECT", transport)
            .env("SHOP_NO_INSTALL", "1")
            .env("SHOP_VENV", std::env::var_os("BLACKBOX_SHOP_VENV").unwrap())
            .env("BLACKBOX", env!("CARGO_BIN_EXE_blackbox"))
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "capture.sh over {transport}:\n{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap())
                .unwrap();
        let hosts = manifest["hosts"].as_array().unwrap();
        let names: Vec<&str> = hosts.iter().map(|h| h["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            ["client", "web", "app", "cache", "db"],
            "{transport}"
        );
        for host in hosts {
            assert_eq!(host["status"], "captured", "{transport}: {host}");
            assert_eq!(
                host["counters"]["dropped_by_kernel"], 0,
                "{transport}: {host}"
            );
        }
        let found = patterns(std::slice::from_ref(&out));
        let all: u64 = found.iter().map(|(count, _)| count).sum();
        let top: Vec<&str> = found.iter().take(3).map(|(_, p)| p.as_str()).collect();
        let mut expected: Vec<&str> = true_patterns.iter().map(String::as_str).collect();
        let mut got = top.clone();
        expected.sort();
        got.sort();
        assert_eq!(
            got, expected,
            "{transport}: the top three patterns: {found:?}"
        );
        let in_top: u64 = found.iter().take(3).map(|(count, _)| count).sum();
        assert!(
            in_top * 100 >= all * 99 && all > 500,
            "{transport}: {in_top} of {all} requests in the true patterns: {found:?}"
        );
    }
    // Over ssh, each capture left out its own ssh connection.
    let out = dir.path().join("ssh");
    for host in ["client", "web", "app", "cache", "db"] {
        let ssh = Command::new("tcpdump")
            .args(["-n", "-r"])
            .arg(out.join(format!("{host}.pcap")))
            .arg("tcp port 22")
            .output()
            .unwrap();
        assert!(ssh.status.success(), "{ssh:?}");
        assert!(
            ssh.stdout.is_empty(),
            "{host}: {}",
            String::from_utf8_lossy(&ssh.stdout)
        );
    }
    // Hosts are named as the manifest names them, whatever their files are called.
    let path = out.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    manifest["hosts"][1]["name"] = "frontend".into();
    for named in manifest["names"].as_array_mut().unwrap() {
        if named["name"] == "web" {
            named["name"] = "frontend".into();
        }
    }
    std::fs::write(&path, manifest.to_string()).unwrap();
    let (table, summary) = support::outputs_of(blackbox().args(["nest", "--top", "1"]).arg(&out));
    assert!(table.contains("client->frontend(app(cache))"), "{table}");
    assert!(
        summary.contains("(host frontend, own address 10.77.0.20)"),
        "{summary}"
    );
}
