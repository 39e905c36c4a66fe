//! The fuzz target's body on generated input, so that every `cargo test` runs it: no
//! input, however malformed, may panic the reader, the algorithm or a report.

use proptest::prelude::*;

/// Lines that are nearly valid, so that generated input reaches the algorithm.
fn trace_line() -> impl Strategy<Value = String> {
    let op = prop::sample::select(vec![
        "CALL",
        "RET",
        "CALL_SENT",
        "CALL_RECV",
        "RET_SENT",
        "RET_RECV",
        "MSG",
        "MSG_RECV",
        "BOGUS",
    ]);
    let node = prop::sample::select(vec!["a", "b", "c", "d", "a(", "-"]);
    let id = prop::sample::select(vec!["1", "2", "3", "-"]);
    let time = prop_oneof![(0u64..50).prop_map(|t| t.to_string()), "[0-9.:-]{0,12}"];
    (
        time,
        op,
        node.clone(),
        node,
        id,
        prop::option::of("[a-z]{1,3}"),
    )
        .prop_map(|(t, op, from, to, id, truth)| {
            format!("{t} {op} {from} {to} {id} {}\n", truth.unwrap_or_default())
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        blackbox::fuzzing::text_trace(&data);
    }

    #[test]
    fn what_collect_reads_never_panics(data in prop::collection::vec(any::<u8>(), 0..400)) {
        blackbox::fuzzing::collected(&data);
        // A pcap stream's header first, so that the records are reached.
        let mut stream = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0];
        stream.extend_from_slice(&data);
        blackbox::fuzzing::collected(&stream);
    }

    #[test]
    fn arbitrary_inputs_are_sniffed_without_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        blackbox::fuzzing::source(&data);
    }

    #[test]
    fn damaged_gzip_streams_are_sniffed_without_panic(
        cut in 0usize..2000,
        flip in 0usize..2000,
        bit in 0u8..8,
    ) {
        let mut gzipped = gzipped_capture().clone();
        if let Some(byte) = gzipped.get_mut(flip) {
            *byte ^= 1 << bit;
        }
        gzipped.truncate(cut.max(2));
        blackbox::fuzzing::source(&gzipped);
    }

    #[test]
    fn arbitrary_mboxes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400)) {
        blackbox::fuzzing::mbox(&data);
    }

    #[test]
    fn nearly_valid_mboxes_never_panic(lines in prop::collection::vec(prop_oneof![
        Just("From a@b Tue Mar 11 10:00:00 2003".to_string()),
        Just(String::new()),
        "Received: (from|by|with) [a-z.]{0,8} (by|from) [a-z.()]{0,8}; [A-Za-z0-9 ,:+-]{0,30}",
        "\t[a-z ;:0-9]{0,20}",
    ], 0..40)) {
        blackbox::fuzzing::mbox(lines.join("\n").as_bytes());
    }

    #[test]
    fn nearly_valid_traces_never_panic(lines in prop::collection::vec(trace_line(), 0..60)) {
        blackbox::fuzzing::text_trace(lines.concat().as_bytes());
    }
}

/// A small real capture (the start of the shop's cache host) to damage.
fn shop_capture() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/traces/shop/cache.pcap");
    let mut bytes = std::fs::read(path).expect("traces/shop ships with the project");
    bytes.truncate(20_000);
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 120, ..ProptestConfig::default() })]

    #[test]
    fn damaged_captures_never_panic(
        flips in prop::collection::vec((24usize..20_000, any::<u8>()), 0..40),
        cut in 0usize..20_000,
    ) {
        let mut bytes = shop_capture();
        for (at, value) in flips {
            bytes[at] = value;
        }
        bytes.truncate(cut.max(24));
        blackbox::fuzzing::capture(&bytes);
    }

    #[test]
    fn arbitrary_captures_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        // Half the cases start with a valid pcap or pcapng magic, to get past the header.
        let mut bytes = if data.first().is_some_and(|b| b % 2 == 0) {
            vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 1, 0, 0, 0]
        } else {
            Vec::new()
        };
        bytes.extend_from_slice(&data);
        blackbox::fuzzing::capture(&bytes);
    }

    #[test]
    fn tunnelled_frames_never_panic(
        inner in prop::collection::vec(any::<u8>(), 0..300),
        geneve in any::<bool>(),
    ) {
        // One packet: Ethernet, IPv4 and UDP to VXLAN's or Geneve's port, carrying a
        // tunnel header and arbitrary bytes as the pod's frame.
        let (port, header): (u16, &[u8]) = if geneve {
            (6081, &[0x01, 0, 0x65, 0x58, 0, 0, 1, 0, 9, 9, 9, 9])
        } else {
            (4789, &[0x08, 0, 0, 0, 0, 0, 1, 0])
        };
        let udp_len = (8 + header.len() + inner.len()) as u16;
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        frame.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 192, 168, 0, 1, 192, 168, 0, 2]);
        let ip_len = 20 + udp_len;
        frame[16..18].copy_from_slice(&ip_len.to_be_bytes());
        frame.extend_from_slice(&40_000u16.to_be_bytes());
        frame.extend_from_slice(&port.to_be_bytes());
        frame.extend_from_slice(&udp_len.to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(header);
        frame.extend_from_slice(&inner);
        let mut bytes = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0];
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        bytes.extend_from_slice(&frame);
        blackbox::fuzzing::capture(&bytes);
    }

    #[test]
    fn frames_of_every_link_layer_and_tunnel_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..120)
    ) {
        blackbox::fuzzing::link_layers(&data);
    }

    #[test]
    fn nearly_plain_frames_read_alike_both_ways(
        choice in prop_oneof![Just(0u8), Just(8u8), Just(16u8)],
        bent in prop::collection::vec((0usize..80, any::<u8>()), 0..3),
        cut in 0usize..100,
    ) {
        // An Ethernet, IPv4 and TCP frame carrying "GET /", then bent and cut.
        let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        frame.extend_from_slice(&[0x45, 0, 0, 45, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        frame.extend_from_slice(&[0x9c, 0x40, 0, 80, 0, 0, 4, 0xd2, 0, 0, 0, 99, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        frame.extend_from_slice(b"GET /");
        for (at, value) in bent {
            frame[at % 59] = value;
        }
        frame.truncate(cut);
        let mut data = vec![choice];
        data.extend_from_slice(&frame);
        blackbox::fuzzing::link_layers(&data);
    }

    #[test]
    fn segments_paired_across_translations_never_panic(
        data in prop::collection::vec(any::<u8>(), 0..800)
    ) {
        blackbox::fuzzing::nat_pairing(&data);
    }

    #[test]
    fn arbitrary_conversations_never_panic(data in prop::collection::vec(any::<u8>(), 0..600)) {
        blackbox::fuzzing::protocols(&data);
    }

    #[test]
    fn nearly_valid_conversations_never_panic(pieces in prop::collection::vec(prop_oneof![
        Just("GET / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc".to_string()),
        Just("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_string()),
        "[0-9a-f]{1,3}\r\n[a-z]{0,5}\r\n",
        "\\*[0-9]\r\n\\$[0-9]\r\n[A-Z]{0,4}\r\n",
        "[+:$*%-][0-9a-z]{0,4}\r\n",
        "[QZSPB\x00-\x08]{1,4}[a-z]{0,6}",
    ], 0..30)) {
        blackbox::fuzzing::protocols(pieces.join("\x01").as_bytes());
    }
}

/// Pieces of broker conversations, valid and nearly so, for the broker framers.
fn broker_piece() -> impl Strategy<Value = (bool, Vec<u8>)> {
    let valid: Vec<(bool, &'static [u8])> = vec![
        (true, b"INFO {\"max_payload\":1048576}\r\n"),
        (false, b"CONNECT {}\r\nSUB orders 1\r\nPUB orders _INBOX.a.b 2\r\nhi\r\n"),
        (false, b"HPUB orders 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        (true, b"MSG _INBOX.a.b 1 2\r\nok\r\nHMSG q 1 r 12 12\r\nNATS/1.0\r\n\r\n\r\n"),
        (false, b"\x10\x0c\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x00"),
        (false, b"\x32\x09\x00\x03a/b\x00\x07\x00hi"),
        (true, b"\x32\x08\x00\x03a/b\x00\x07hi\x40\x02\x00\x07"),
        (false, b"\x40\x02\x00\x07\x50\x02\x00\x08"),
        (false, b"AMQP\x00\x00\x09\x01"),
        (false, b"\x01\x00\x01\x00\x00\x00\x0d\x00\x3c\x00\x28\x00\x00\x00\x01q\x00\xce\x02\x00\x01\x00\x00\x00\x0e\x00\x3c\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\xce\x03\x00\x01\x00\x00\x00\x02hi\xce"),
        (true, b"\x01\x00\x01\x00\x00\x00\x15\x00\x3c\x00\x3c\x01c\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x01q\x00\xce"),
        (false, b"\x01\x00\x01\x00\x00\x00\x0d\x00\x3c\x00\x50\x00\x00\x00\x00\x00\x00\x00\x01\x00\xce"),
        (false, b"\x00\x00\x00\x0c\x00\x01\x00\x04\x00\x00\x00\x07\xff\xff\x00\x00"),
        (true, b"\x00\x00\x00\x08\x00\x00\x00\x07\x00\x00\x00\x00"),
        (false, b"\x00\x00\x00\x0e\x00\x00\x00\x07\x00\x00\x00\x09\xff\xff\xff\xff\x00\x01"),
    ];
    prop_oneof![
        prop::sample::select(valid).prop_map(|(server, bytes)| (server, bytes.to_vec())),
        (any::<bool>(), prop::collection::vec(any::<u8>(), 0..24)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn broker_conversations_cut_anywhere_never_panic(
        pieces in prop::collection::vec(broker_piece(), 0..24),
        cuts in prop::collection::vec(1usize..40, 1..8),
    ) {
        use blackbox::capture::protocol::ProtocolName;
        let mut data = Vec::new();
        for (index, (server, bytes)) in pieces.iter().enumerate() {
            // Each piece cut into segments at the generated lengths.
            let mut rest = &bytes[..];
            let mut turn = index;
            while !rest.is_empty() {
                let len = cuts[turn % cuts.len()].min(rest.len());
                blackbox::fuzzing::framer_records(*server, &rest[..len], &mut data);
                rest = &rest[len..];
                turn += 1;
            }
        }
        for protocol in [ProtocolName::Nats, ProtocolName::Mqtt, ProtocolName::Amqp, ProtocolName::Kafka] {
            blackbox::fuzzing::framer(protocol, &data);
        }
    }
}

/// The start of the shop's web capture, gzip'd.
fn gzipped_capture() -> &'static Vec<u8> {
    static GZIPPED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    GZIPPED.get_or_init(|| {
        use std::io::Write;
        let capture =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/traces/shop/web.pcap")).unwrap();
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder
            .write_all(&capture[..capture.len().min(20_000)])
            .unwrap();
        encoder.finish().unwrap()
    })
}

/// Inputs the fuzzers once crashed on, kept so the bugs stay fixed.
#[test]
fn inputs_that_once_crashed_the_fuzzers_do_not_panic() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/fuzz");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        match name.split('-').next().unwrap() {
            "capture" => blackbox::fuzzing::capture(&data),
            "protocols" => blackbox::fuzzing::protocols(&data),
            "source" => blackbox::fuzzing::source(&data),
            "link_layers" => blackbox::fuzzing::link_layers(&data),
            "nat" => blackbox::fuzzing::nat_pairing(&data),
            other => panic!("{name}: no fuzz target called {other}"),
        }
        seen += 1;
    }
    assert!(seen >= 1);
}
