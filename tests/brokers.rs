//! Message brokers captured (`traces/brokers`): an HTTP service publishing to
//! nats-server, RabbitMQ, a Kafka-protocol broker (tansu) and mosquitto, a worker
//! consuming from each. The truth comes from the programs' logs (`truth.py`), not from
//! blackbox: these tests hold the readers' counts and the links through the brokers to
//! it.

mod support;

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use support::{blackbox, outputs_of};

fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/brokers/capture-8")
}

/// The captures of the named hosts (every host's when `hosts` is empty).
fn captures(hosts: &[&str]) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(shipped())
        .expect("the captures ship with the project")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.ends_with(".pcap.gz")
                && (hosts.is_empty() || hosts.iter().any(|h| name == format!("{h}.pcap.gz")))
        })
        .collect();
    paths.sort();
    paths
}

/// Requests per path (`/order/nats`, `/quote/nats`, ...) in the truth the programs
/// logged.
fn requests_by_path() -> BTreeMap<String, u64> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(shipped().join("truth.jsonl.gz")).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let request: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(request["problems"].as_array().map(Vec::len), Some(0));
        *counts
            .entry(request["path"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    counts
}

/// The kinds of messages a capture's summary counts for `protocol`.
fn kinds(summary: &str, capture: &str, protocol: &str) -> BTreeMap<String, u64> {
    let line = summary
        .lines()
        .find(|l| l.contains(&format!("/{capture} ")))
        .unwrap_or_else(|| panic!("no summary of {capture} in\n{summary}"));
    let counted = line
        .split("; ")
        .find_map(|part| part.strip_prefix(&format!("{protocol}: ")))
        .unwrap_or_else(|| panic!("no {protocol} messages counted in {line}"));
    counted
        .split(", ")
        .map(|kind| {
            let (n, what) = kind.split_once(' ').unwrap();
            (what.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// Per broker, the messages it sent that carried a payload and how many of them were
/// linked, from the summary's `broker` lines, and how they were linked.
fn links(summary: &str) -> BTreeMap<String, (u64, u64, String)> {
    summary
        .lines()
        .filter_map(|l| l.strip_prefix("broker "))
        .map(|l| {
            let (name, rest) = l.split_once(": ").unwrap();
            let words: Vec<&str> = rest.split_whitespace().collect();
            let how = rest.split("%; ").nth(1).unwrap().split(')').next().unwrap();
            (
                name.to_string(),
                (
                    words[0].parse().unwrap(),
                    words[3].parse().unwrap(),
                    how.to_string(),
                ),
            )
        })
        .collect()
}

#[test]
fn every_brokers_messages_are_read_and_counted_by_kind_as_the_programs_logged_them() {
    let truth = requests_by_path();
    let (orders, quotes) = (truth["/order/nats"], truth["/quote/nats"]);
    let (_, summary) = outputs_of(
        blackbox()
            .args(["records", "-o", "/dev/null"])
            .args(captures(&[])),
    );
    let nats = kinds(&summary, "nats.pcap.gz", "nats");
    // Orders are published and delivered one way; each quote is a request from web to
    // the server and from the server to the worker, each answered.
    assert_eq!(nats["publishes"], orders, "{nats:?}");
    assert_eq!(nats["deliveries"], orders, "{nats:?}");
    assert_eq!(nats["requests"], 2 * quotes, "{nats:?}");
    assert_eq!(nats["answers"], 2 * quotes, "{nats:?}");
    let rabbit = kinds(&summary, "rabbit.pcap.gz", "amqp");
    let amqp = truth["/order/amqp"];
    assert_eq!(
        (rabbit["publishes"], rabbit["deliveries"], rabbit["answers"]),
        (amqp, amqp, amqp),
        "every delivery acknowledged: {rabbit:?}"
    );
    let mqtt = kinds(&summary, "mqtt.pcap.gz", "mqtt");
    let published = truth["/order/mqtt"];
    // QoS 1 both ways: the broker acknowledges each publish, the worker each delivery.
    assert_eq!(
        (mqtt["publishes"], mqtt["deliveries"], mqtt["answers"]),
        (published, published, 2 * published),
        "{mqtt:?}"
    );
    // A Kafka produce can carry several orders and a fetch bring several: every produce
    // is answered, and no more produces than orders.
    let kafka = kinds(&summary, "kafka.pcap.gz", "kafka");
    assert_eq!(kafka["publishes"], kafka["answers"], "{kafka:?}");
    assert!(kafka["publishes"] <= truth["/order/kafka"], "{kafka:?}");
    assert!(kafka["deliveries"] > 0, "{kafka:?}");
}

#[test]
fn every_delivery_is_linked_to_its_publish_with_the_brokers_captures_and_without_them() {
    let truth = requests_by_path();
    let (_, summary) = outputs_of(blackbox().arg("nest").args(captures(&[])));
    let with = links(&summary);
    let nats = truth["/order/nats"] + 2 * truth["/quote/nats"];
    assert_eq!(with["nats"].0, nats, "{summary}");
    assert_eq!(with["rabbit"].0, truth["/order/amqp"], "{summary}");
    assert_eq!(with["mqtt"].0, truth["/order/mqtt"], "{summary}");
    assert_eq!(with.len(), 4, "the brokers and nothing else: {with:?}");
    // convolve's summary says the same.
    let (_, convolved) = outputs_of(
        blackbox()
            .args(["convolve", "--quantum", "0.01"])
            .args(captures(&[])),
    );
    assert_eq!(links(&convolved), with, "{convolved}");
    for (broker, (sent, linked, how)) in &with {
        assert_eq!(sent, linked, "{broker}: {summary}");
        assert_eq!(how, "all through its own capture", "{broker}");
    }
    // Without the brokers' captures: the payloads at the producer's and the
    // consumers' ends link them alike.
    let ends = captures(&[
        "web",
        "worker-nats",
        "worker-amqp",
        "worker-kafka",
        "worker-mqtt",
    ]);
    let (_, summary) = outputs_of(blackbox().arg("nest").args(&ends));
    let without = links(&summary);
    assert_eq!(without.len(), 4, "{summary}");
    // Named by address there (no capture of their own names them): the same counts.
    let counts = |links: &BTreeMap<String, (u64, u64, String)>| {
        let mut sent: Vec<u64> = links.values().map(|l| l.0).collect();
        sent.sort();
        sent
    };
    assert_eq!(counts(&without), counts(&with), "{summary}");
    for (broker, (sent, linked, how)) in &without {
        assert_eq!(sent, linked, "{broker}: {summary}");
        assert_eq!(
            how, "all by the payloads at the producers' and consumers' ends",
            "{broker}"
        );
    }
}
