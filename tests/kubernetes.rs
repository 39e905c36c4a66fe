//! The shop on a Kubernetes-shaped network (`traces/k8s`): pods in network namespaces
//! behind kube-proxy's iptables rules, so that every call crosses an address
//! translation (a ClusterIP's DNAT, a NodePort's DNAT and MASQUERADE). Truth from the
//! programs' logs (`traces/k8s/truth.py`).

mod support;

use std::path::{Path, PathBuf};
use support::{blackbox, outputs_of, stdout_of};

fn k8s(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/k8s")
        .join(dir)
}

/// The pods' and the client's captures in `dir` (not the node's).
fn pods(dir: &str) -> Vec<PathBuf> {
    let mut captures: Vec<PathBuf> = std::fs::read_dir(k8s(dir))
        .expect("the captures ship with the project")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.to_string_lossy().ends_with(".pcap.gz"))
        .collect();
    captures.sort();
    assert_eq!(captures.len(), 6, "{captures:?}");
    captures
}

/// The share of requests in true patterns, from `eval`'s instances line.
fn in_true_patterns(scores: &str) -> f64 {
    let line = scores
        .lines()
        .find(|l| l.starts_with("instances "))
        .expect("an instances line");
    let numbers: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap())
        .collect();
    1.0 - numbers[2] / numbers[0]
}

#[test]
fn every_message_pairs_across_the_translations_and_the_replicas_are_one_node() {
    let (stdout, stderr) = outputs_of(blackbox().arg("nest").args(pods("")));
    assert!(
        stderr.contains(
            "4166 messages (4166 seen at both ends, 0 at the sender only, 0 at the receiver only)"
        ),
        "{stderr}"
    );
    // The table names every translation: the NodePort and its MASQUERADE, and each
    // ClusterIP with the pods behind it.
    for row in [
        "client  10.78.0.1:30080            8  10.244.1.2:8080 (web)",
        "web     10.78.0.1:*                8  10.78.0.100:* (client)",
        "web     10.96.0.60:80              5  10.244.1.3:8080 (app-0)",
        "web     10.96.0.60:80              3  10.244.2.2:8080 (app-1)",
        "app-0   10.96.0.40:6379            5  10.244.2.3:6379 (cache)",
        "app-1   10.96.0.50:5432            3  10.244.1.4:5432 (db)",
        "10.96.0.60:80 stood for app-0, app-1: replicas of one service, the node app",
    ] {
        assert!(stderr.contains(row), "{row} not in\n{stderr}");
    }
    // Every clock aligned, the client's own address told by the packets' time to live.
    assert!(!stderr.contains("unaligned"), "{stderr}");
    assert!(
        stderr.contains("(host client, own address 10.78.0.100)"),
        "{stderr}"
    );
    let patterns: Vec<&str> = stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(
        patterns,
        [
            "client->web(app(cache))",
            "client->web(app(db,cache))",
            "client->web(app(cache,db,cache))"
        ]
    );
}

#[test]
fn without_aligning_clocks_a_sample_of_segments_still_joins_every_connection() {
    // `--align off` stamps an eighth of the segments and every handshake: most of these
    // connections began before the captures, and each must still be joined.
    let (_, stderr) = outputs_of(
        blackbox()
            .args(["records", "--align", "off"])
            .args(pods(""))
            .arg(k8s("node").join("node-a.pcap.gz")),
    );
    assert!(
        stderr.contains("without a captured handshake")
            && stderr.contains(
                "4166 messages (4166 seen at both ends, 0 at the sender only, 0 at the receiver only)"
            )
            && stderr.contains("32 connections joined across it"),
        "{stderr}"
    );
}

#[test]
fn requests_keep_their_true_paths_with_ids_and_without() {
    for (dir, floor) in [("", 0.99), ("tso", 0.99)] {
        for ids in [None, Some("--ignore-ids")] {
            let scores = stdout_of(
                blackbox()
                    .args(["eval", "-q", "--truth-ids"])
                    .arg(k8s(dir).join("truth.tsv"))
                    .args(ids)
                    .args(pods(dir)),
            );
            let share = in_true_patterns(&scores);
            assert!(share >= floor, "{dir:?} {ids:?}: {share}\n{scores}");
            assert!(
                scores.starts_with(
                    "               truth  inferred  false pos  false neg\npatterns           3"
                ),
                "{scores}"
            );
        }
    }
}

#[test]
fn a_nodes_capture_of_its_pods_changes_no_pattern() {
    let (alone, _) = outputs_of(blackbox().arg("nest").args(pods("")));
    let (with_node, stderr) = outputs_of(
        blackbox()
            .arg("nest")
            .args(pods(""))
            .arg(k8s("node").join("node-a.pcap.gz")),
    );
    assert_eq!(alone, with_node);
    // The node gives up its pods' addresses and keeps its own, and what it saw pass
    // is counted, not added again.
    assert!(
        stderr.contains("(host node-a, own address 10.78.0.1)")
            && stderr.contains(
                "observations left out, seen passing between hosts whose own captures hold them"
            )
            && !stderr.contains("warning"),
        "{stderr}"
    );
}

#[test]
fn replicas_stay_apart_by_pod() {
    let stdout = stdout_of(blackbox().args(["nest", "--node-by", "pod"]).args(pods("")));
    for pattern in ["client->web(app-0(cache))", "client->web(app-1(cache))"] {
        assert!(stdout.contains(pattern), "{pattern} not in\n{stdout}");
    }
    assert!(!stdout.contains("(app("), "{stdout}");
}

#[test]
fn segments_cut_differently_at_the_two_ends_are_found_inside_each_other() {
    // Senders kept TSO (their captures hold segments of up to 4 KB); the links to the
    // receivers cut them to the MSS.
    let (_, stderr) = outputs_of(blackbox().arg("nest").args(pods("tso")));
    assert!(
        stderr.contains("7813 matched at both ends, 2196 found inside a longer segment of the other end (segmentation offloads); left out: 0 repeated (retransmissions), 0 seen at one end only"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "3942 messages (3942 seen at both ends, 0 at the sender only, 0 at the receiver only)"
        ),
        "{stderr}"
    );
}

#[test]
fn the_clusters_own_description_names_the_nodes() {
    // `kubectl get pods,services,endpointslices -o json`: pods named for their Service,
    // or for themselves by pod.
    let names = k8s("cluster.json");
    let by_service = stdout_of(
        blackbox()
            .arg("nest")
            .arg("--names")
            .arg(&names)
            .args(pods("")),
    );
    assert!(
        by_service.contains("client->web(app(db,cache))"),
        "{by_service}"
    );
    let by_pod = stdout_of(
        blackbox()
            .args(["nest", "--node-by", "pod", "--names"])
            .arg(&names)
            .args(pods("")),
    );
    for pattern in [
        "client->web-5c8d7f9b4-k2x7p(app-6f4b8c7d5-qz9wm(cache-0))",
        "client->web-5c8d7f9b4-k2x7p(app-6f4b8c7d5-r7t2n(cache-0))",
    ] {
        assert!(by_pod.contains(pattern), "{pattern} not in\n{by_pod}");
    }
}

/// One pcapng enhanced packet block of an Ethernet frame from `from` to `to` (IPv4 and
/// TCP, ports 40000 → 80 or back), with a packet comment and `epb_flags`' direction.
fn commented_packet(
    from: [u8; 4],
    to: [u8; 4],
    payload: &[u8],
    comment: &str,
    outbound: bool,
) -> Vec<u8> {
    let (source, destination) = if outbound {
        (40_000u16, 80u16)
    } else {
        (80, 40_000)
    };
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 20 + payload.len()) as u16;
    frame.extend_from_slice(&[0x45, 0]);
    frame.extend_from_slice(&total.to_be_bytes());
    frame.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
    frame.extend_from_slice(&from);
    frame.extend_from_slice(&to);
    frame.extend_from_slice(&source.to_be_bytes());
    frame.extend_from_slice(&destination.to_be_bytes());
    let seq: u32 = if outbound { 1000 } else { 5000 };
    let ack: u32 = if outbound { 5000 } else { 1000 + 18 };
    frame.extend_from_slice(&seq.to_be_bytes());
    frame.extend_from_slice(&ack.to_be_bytes());
    frame.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    frame.extend_from_slice(payload);
    let pad = |v: &mut Vec<u8>| {
        while !v.len().is_multiple_of(4) {
            v.push(0)
        }
    };
    let mut body = Vec::new();
    body.extend_from_slice(&0u32.to_le_bytes()); // interface
    body.extend_from_slice(&0u32.to_le_bytes()); // time, high
    body.extend_from_slice(&(if outbound { 1_000_000u32 } else { 1_002_000 }).to_le_bytes());
    body.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    body.extend_from_slice(&(frame.len() as u32).to_le_bytes());
    body.extend_from_slice(&frame);
    pad(&mut body);
    body.extend_from_slice(&1u16.to_le_bytes()); // opt_comment
    body.extend_from_slice(&(comment.len() as u16).to_le_bytes());
    body.extend_from_slice(comment.as_bytes());
    pad(&mut body);
    body.extend_from_slice(&2u16.to_le_bytes()); // epb_flags
    body.extend_from_slice(&4u16.to_le_bytes());
    body.extend_from_slice(&(if outbound { 2u32 } else { 1 }).to_le_bytes());
    body.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
    let length = (body.len() + 12) as u32;
    let mut block = 6u32.to_le_bytes().to_vec();
    block.extend_from_slice(&length.to_le_bytes());
    block.extend_from_slice(&body);
    block.extend_from_slice(&length.to_le_bytes());
    block
}

#[test]
fn pods_named_in_packet_comments_name_their_nodes() {
    // As ptcpdump writes them: the pod that sent or received each packet, per packet.
    let mut pcapng = Vec::new();
    for (kind, body) in [
        (
            0x0a0d_0d0au32,
            [
                0x1a2b_3c4du32.to_le_bytes().to_vec(),
                vec![1, 0, 0, 0],
                vec![0xff; 8],
            ]
            .concat(),
        ),
        (
            1,
            [
                1u16.to_le_bytes().to_vec(),
                vec![0, 0],
                0u32.to_le_bytes().to_vec(),
            ]
            .concat(),
        ),
    ] {
        let length = (body.len() + 12) as u32;
        pcapng.extend_from_slice(&kind.to_le_bytes());
        pcapng.extend_from_slice(&length.to_le_bytes());
        pcapng.extend_from_slice(&body);
        pcapng.extend_from_slice(&length.to_le_bytes());
    }
    let pod = "PID: 7\nCmd: /usr/bin/curl\nArgs: curl\nPodName: web-5c8d7\nPodNamespace: shop\nPodUID: 1\nPodLabels: app=web\nPodAnnotations: ";
    pcapng.extend(commented_packet(
        [10, 244, 1, 2],
        [10, 96, 0, 60],
        b"GET / HTTP/1.1\r\n\r\n",
        pod,
        true,
    ));
    pcapng.extend(commented_packet(
        [10, 96, 0, 60],
        [10, 244, 1, 2],
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
        pod,
        false,
    ));
    let dir = std::env::temp_dir().join(format!("blackbox-ptcpdump-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("node-a.pcapng");
    std::fs::write(&path, &pcapng).unwrap();
    let records = stdout_of(blackbox().args(["records", "-q"]).arg(&path));
    std::fs::remove_dir_all(&dir).unwrap();
    let senders: Vec<&str> = records
        .lines()
        .map(|l| l.split_whitespace().nth(2).unwrap())
        .collect();
    // The packets' direction tells the capture's own address too.
    assert_eq!(senders, ["shop/web-5c8d7", "10.96.0.60"], "{records}");
    assert!(records.starts_with("1.000000 CALL_SENT"), "{records}");
}
