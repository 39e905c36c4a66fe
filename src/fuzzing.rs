//! Entry points shared by the fuzz targets (`fuzz/`) and the tests that run the same
//! code on generated input in every `cargo test`. Owns no logic of its own.

use crate::nesting::{explain, nest, NestOptions};
use crate::report::{
    assignments::Assignments, dot::Dot, json::Json, otlp::Otlp, table::Table, NestReport, Ranking,
    Render,
};
use crate::trace::{text, TraceBuilder};
use std::path::Path;

/// Reads `data` as a text trace; if it parses and nests, renders every format. Panics
/// only on a bug.
pub fn text_trace(data: &[u8]) {
    let mut builder = TraceBuilder::new();
    if text::read(Path::new("fuzz"), data, &mut builder).is_err() {
        return;
    }
    let trace = builder.finish();
    let mut written = Vec::new();
    text::write(&trace, &mut written).expect("writing to memory cannot fail");
    let options = NestOptions::default();
    let Ok(nesting) = nest(&trace, &options) else {
        return;
    };
    let report = NestReport::new(&trace, &nesting, &options, Ranking::default());
    let mut sink = Vec::new();
    for format in [&Table as &dyn Render, &Json, &Assignments, &Otlp] {
        format
            .render(&report, &mut sink)
            .expect("writing to memory cannot fail");
    }
    if !report.ranked.is_empty() {
        Dot { rank: 1 }
            .render(&report, &mut sink)
            .expect("writing to memory cannot fail");
    }
    crate::report::html::write_nesting(&report, &Default::default(), &mut sink)
        .expect("writing to memory cannot fail");
    let last = nesting.pairs.len() as u32 - 1;
    let explanations = [0, last].map(|call| explain::explain(&trace, &nesting, &options, call));
    crate::report::explanation::write(
        &trace,
        &nesting,
        options.penalties,
        &explanations,
        &mut sink,
    )
    .expect("writing to memory cannot fail");
}

/// Tells what `data` is, as for a named input, and reads it to its end through any gzip
/// layer. Panics only on a bug.
pub fn source(data: &[u8]) {
    let named = std::path::Path::new("-");
    let Ok(source) = crate::input::source::Source::from_stream(
        named,
        Box::new(std::io::Cursor::new(data.to_vec())),
    ) else {
        return;
    };
    let Ok(mut stream) = source.open(&crate::progress::Progress::hidden()) else {
        return;
    };
    let _ = std::io::copy(&mut stream, &mut std::io::sink());
}

/// What `blackbox collect` reads from its hosts and writes: `data` as a host's pcap
/// stream (written whole packets only, never more bytes than came), each of its lines as
/// a line of the host's standard error, and as a manifest and a cluster's snapshot, the
/// manifest's warnings made. Panics only on a bug.
pub fn collected(data: &[u8]) {
    use crate::collect::{kubernetes, manifest, remote, stream};
    if let Ok(sink) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let (written, _) = stream::write_stream(data, sink, 1 << 16, || {});
        assert!(written.bytes <= data.len() as u64, "{written:?}");
        assert!(written.packets <= data.len() as u64 / 16, "{written:?}");
    }
    for line in String::from_utf8_lossy(data).lines() {
        let _ = remote::read_line(line);
        let _ = remote::dumpcap_drops(line);
    }
    if let Ok(manifest) = serde_json::from_slice::<manifest::Manifest>(data) {
        let collected = manifest::Collected {
            dir: std::path::PathBuf::from("run"),
            manifest,
        };
        let _ = collected.captures();
        let _ = collected.warnings(&[]);
    }
    let _ = kubernetes::reused(data, data);
}

/// Reads `data` as an mbox with the relays' clocks estimated and corrected, writes the
/// resulting trace, and reads it back; builds the true chains of its emails as
/// `eval --convolve --mbox` does. Panics only on a bug.
pub fn mbox(data: &[u8]) {
    let mail = crate::input::mbox_from(Path::new("fuzz.mbox"), data, true)
        .expect("reading memory cannot fail");
    let stats = mail.stats;
    assert!(stats.hops <= stats.received_headers);
    let clocks = mail.clocks.expect("asked for");
    assert!(clocks.negative_after <= clocks.delays);
    let trace = mail.trace;
    let chains = crate::eval::message_paths::chains_of_mail(&trace, &mail.chains);
    assert_eq!(
        chains.instances,
        mail.chains.iter().filter(|m| !m.hops.is_empty()).count() as u64
    );
    let mut written = Vec::new();
    text::write(&trace, &mut written).expect("writing to memory cannot fail");
    // Every truth tag is one token the text trace reads back as written.
    let mut again = TraceBuilder::new();
    text::read(Path::new("fuzz.trace"), written.as_slice(), &mut again)
        .expect("a written trace reads back");
    assert_eq!(again.finish().messages.len(), trace.messages.len());
}

/// Reads `data` as a packet capture (of the host `fuzz`) and, if it is one, builds the
/// trace and nests it; then reads it again as the capture of a second host that owns
/// the other addresses, aligns the two (every segment is then seen "at both ends"),
/// repairs causality and nests again, as [`crate::input`] does for files. Panics only
/// on a bug.
pub fn capture(data: &[u8]) {
    use crate::capture::{read_capture, CaptureOptions};
    use crate::input::{from_captures, InputOptions};
    let options = CaptureOptions {
        clock_stamps: true,
        ..CaptureOptions::default()
    };
    let read = |host: &str| read_capture(Path::new("fuzz.pcap"), host.into(), data, &options);
    let Ok(capture) = read("fuzz") else {
        return;
    };
    assert!(capture.stats.tcp + capture.stats.udp <= capture.stats.packets);
    let addresses: std::collections::BTreeSet<std::net::IpAddr> =
        capture.stamps.iter().flat_map(|r| [r.from, r.to]).collect();
    let alone = from_captures(
        vec![capture],
        &InputOptions {
            capture: options.clone(),
            ..InputOptions::default()
        },
    );
    let _ = nest(&alone.trace, &NestOptions::default());

    let Some(&first) = addresses.iter().next() else {
        return;
    };
    for method in [
        crate::align::fit::Method::Hull,
        crate::align::fit::Method::Regression,
    ] {
        let (Ok(mut one), Ok(mut other)) = (read("fuzz"), read("other")) else {
            return;
        };
        one.local = [first].into_iter().collect();
        other.local = addresses.iter().copied().filter(|&a| a != first).collect();
        let input = from_captures(
            vec![one, other],
            &InputOptions {
                capture: options.clone(),
                align: Some(method),
                least_squares: true,
                repair: Some(crate::align::repair::RepairOptions::default()),
                ..InputOptions::default()
            },
        );
        let report = &input.repair.as_ref().expect("repair was asked for").report;
        assert_eq!(report.violations_after, 0, "{report:?}");
        let _ = nest(&input.trace, &NestOptions::default());
    }
}

/// Reads `data` as one frame of a link layer the first byte picks (Ethernet, raw IP,
/// Linux cooked capture v1 and v2, BSD loopback in either byte order), by that byte's
/// high bits wrapped in an Ethernet, IPv4 and UDP datagram to VXLAN's or Geneve's port,
/// as a node's uplink carries pods' frames, or in an Ethernet frame as what a PPPoE
/// session, an MPLS label or an IPv4 packet of GRE or IP-in-IP carries (the rest of the
/// bytes are its headers and all); decodes it, and where the fast reading of plain
/// frames answers, checks it agrees with the general one. Panics only on a bug.
pub fn link_layers(data: &[u8]) {
    use crate::capture::decode::{decode, Transport};
    use crate::capture::file::Frame;
    use crate::capture::stats::FileStats;
    use pcap_parser::Linktype;
    let Some((&choice, frame)) = data.split_first() else {
        return;
    };
    let linktype = [
        Linktype::ETHERNET,
        Linktype::RAW,
        Linktype::LINUX_SLL,
        Linktype::LINUX_SLL2,
        Linktype::NULL,
        Linktype::LOOP,
        Linktype::IPV4,
        Linktype::IPV6,
    ][usize::from(choice & 7)];
    let mut bytes = Vec::new();
    let port = match choice >> 3 & 3 {
        1 => Some((4789u16, vec![0x08, 0, 0, 0, 0, 0, 1, 0])),
        2 => Some((6081u16, vec![0, 0, 0x65, 0x58, 0, 0, 1, 0])),
        _ => None,
    };
    // Ethertype (and IP protocol) of the layers read through that carry the rest.
    let carrier = match choice >> 5 {
        1 => Some((0x8864u16, None)),
        2 => Some((0x8847, None)),
        3 => Some((0x0800, Some(47u8))),
        4 => Some((0x0800, Some(4))),
        5 => Some((0x0800, Some(41))),
        _ => None,
    };
    let (linktype, data) = match (port, carrier) {
        (_, Some((ether_type, protocol))) => {
            bytes.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
            bytes.extend_from_slice(&ether_type.to_be_bytes());
            if let Some(protocol) = protocol {
                let total = u16::try_from(20 + frame.len()).unwrap_or(u16::MAX);
                bytes.extend_from_slice(&[0x45, 0]);
                bytes.extend_from_slice(&total.to_be_bytes());
                bytes.extend_from_slice(&[0, 0, 0, 0, 64, protocol, 0, 0]);
                bytes.extend_from_slice(&[192, 168, 0, 1, 192, 168, 0, 2]);
            }
            bytes.extend_from_slice(frame);
            (Linktype::ETHERNET, bytes.as_slice())
        }
        // The carried frame is Ethernet, whatever the first byte picked.
        (Some((port, header)), None) => {
            let length = 8 + header.len() + frame.len();
            bytes.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
            let total = u16::try_from(20 + length).unwrap_or(u16::MAX);
            bytes.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0]);
            bytes[16..18].copy_from_slice(&total.to_be_bytes());
            bytes.extend_from_slice(&[192, 168, 0, 1, 192, 168, 0, 2]);
            bytes.extend_from_slice(&40000u16.to_be_bytes());
            bytes.extend_from_slice(&port.to_be_bytes());
            bytes.extend_from_slice(&u16::try_from(length).unwrap_or(u16::MAX).to_be_bytes());
            bytes.extend_from_slice(&[0, 0]);
            bytes.extend_from_slice(&header);
            bytes.extend_from_slice(frame);
            (Linktype::ETHERNET, bytes.as_slice())
        }
        (None, None) => (linktype, frame),
    };
    let frame = Frame::bare(linktype, data);
    let mut stats = FileStats::default();
    if let Some(segment) = decode(&frame, &mut stats) {
        assert!(segment.payload.len() <= data.len());
        if let Transport::Udp = segment.transport {
            assert!(segment.payload.len() <= segment.wire_len);
        }
        assert_eq!(stats.tcp + stats.udp, 1, "{stats:?}");
    }
    crate::capture::decode::check_plain_tcp(&frame);
}

/// Reads `data` as segments seen by up to four captures, eight bytes each (capture,
/// source and destination from a pool of six addresses, ports from a pool of four,
/// sequence and acknowledgement numbers from small ranges so that keys meet, a length
/// and a time), each capture owning one address of the pool (and, by the first byte,
/// one more, as a node's capture does); pairs them across translations and learns the
/// translations. Checks what must hold whatever the input. Panics only on a bug.
pub fn nat_pairing(data: &[u8]) {
    use crate::align::pairing::pair_samples;
    use crate::capture::{HostCapture, RouteStamps, SegmentStamp};
    use std::collections::BTreeMap;
    use std::net::{IpAddr, Ipv4Addr};
    let address = |i: u8| IpAddr::V4(Ipv4Addr::new(10, 0, 0, i % 6 + 1));
    let extra = data.first().copied().unwrap_or(0);
    let mut routes: Vec<BTreeMap<(IpAddr, IpAddr), Vec<SegmentStamp>>> = vec![BTreeMap::new(); 4];
    let mut stamps = 0usize;
    for (at, record) in data.get(1..).unwrap_or(&[]).chunks_exact(8).enumerate() {
        let [who, ends, ports, seq, ack, len, time, flags] =
            <[u8; 8]>::try_from(record).expect("eight bytes");
        let numbers = u32::from(seq % 8) * 1_000 + u32::from(flags % 4);
        let stamp = SegmentStamp {
            key: u64::from(numbers) << 32 | u64::from(ack % 8) << 8 | u64::from(flags >> 6),
            time: at as i64 * 1_000 + i64::from(time) * 100,
            ports: (1000 + u16::from(ports % 4), 80 + u16::from(ports >> 6)),
            seq: numbers,
            ack: u32::from(ack % 8),
            len: u32::from(len) * 16,
        };
        routes[usize::from(who % 4)]
            .entry((address(ends), address(ends >> 4)))
            .or_default()
            .push(stamp);
        stamps += 1;
    }
    let mut captures: Vec<HostCapture> = routes
        .into_iter()
        .enumerate()
        .map(|(i, routes)| {
            let mut own: std::collections::BTreeSet<IpAddr> = [address(i as u8)].into();
            if extra >> i & 1 == 1 {
                own.insert(address(extra >> 4));
            }
            let routes = routes
                .into_iter()
                .map(|((from, to), stamps)| RouteStamps { from, to, stamps })
                .collect();
            HostCapture::from_stamps(&format!("host{i}"), own, routes)
        })
        .collect();
    let pairing = pair_samples(&captures);
    let stats = &pairing.stats;
    assert!(
        stats.matched as usize * 2 <= stamps,
        "{stats:?} of {stamps}"
    );
    assert!(
        pairing.links.values().sum::<u64>() <= stats.matched,
        "a match is on one link at most"
    );
    for link in pairing.links.keys() {
        assert_ne!(link.sender, link.receiver, "{link:?}");
    }
    let samples: usize = pairing
        .samples
        .iter()
        .map(|p| p.forward.len() + p.backward.len())
        .sum();
    assert_eq!(samples as u64, stats.matched);
    let translations = crate::nat::learn(&mut captures, &pairing);
    for capture in &captures {
        for (seen, meant) in &capture.translated {
            assert_ne!(seen, meant);
            // The reply direction is translated alike.
            assert_eq!(
                capture.translated.get(&(seen.1, seen.0)),
                Some(&(meant.1, meant.0)),
                "{seen:?} -> {meant:?}"
            );
        }
    }
    assert!(translations.rows.iter().all(|row| row.connections > 0));
}

/// Feeds `data` to every protocol's framer as a conversation: each byte below 0x20
/// switches the sending side or cuts a segment, a byte 0x1f reports lost bytes, and
/// the rest is payload; the same pieces go to the UDP framers as datagrams. Panics
/// only on a bug.
pub fn protocols(data: &[u8]) {
    use crate::capture::protocol::udp::UdpPair;
    use crate::capture::protocol::{Chunk, Output, ProtocolName, Side};
    for protocol in ProtocolName::all() {
        let mut framer = protocol.tcp_framer();
        let mut datagrams = UdpPair::new(protocol);
        let mut out = Output::default();
        let mut side = Side::Client;
        let mut seq = [0u32; 2];
        let mut time = 0;
        for piece in data.split(|&b| b < 0x20) {
            time += 1_000;
            let index = side as usize;
            framer.data(
                side,
                Chunk {
                    time,
                    seq: seq[index],
                    bytes: piece,
                },
                &mut out,
            );
            datagrams.datagram(side, time, piece, &mut out);
            seq[index] = seq[index].wrapping_add(piece.len() as u32);
            if piece.len() % 7 == 3 {
                framer.gap(side, 5, &mut out);
                seq[index] = seq[index].wrapping_add(5);
            }
            if piece.len() % 2 == 1 {
                side = match side {
                    Side::Client => Side::Server,
                    Side::Server => Side::Client,
                };
            }
        }
        framer.close(&mut out);
        datagrams.close(&mut out);
        for message in &out.messages {
            assert!(message.first <= message.last);
        }
    }
}

/// Feeds `data` to one protocol's TCP framer as a conversation of records, so that
/// binary framers (HTTP/2, MySQL) see every byte value: each record is a control byte
/// (bit 0: the server sends; bits 1-7: bytes lost before this segment), a two-byte
/// little-endian length, and that many payload bytes. [`framer_records`] writes this
/// format, for seeds cut from real captures. Panics only on a bug.
pub fn framer(protocol: crate::capture::protocol::ProtocolName, data: &[u8]) {
    use crate::capture::protocol::{Chunk, Output, Side};
    let mut framer = protocol.tcp_framer();
    let mut out = Output::default();
    let mut seq = [0u32; 2];
    let mut rest = data;
    let mut time = 0;
    while let [control, low, high, tail @ ..] = rest {
        let side = if control & 1 == 0 {
            Side::Client
        } else {
            Side::Server
        };
        let index = side as usize;
        let lost = usize::from(control >> 1);
        if lost > 0 {
            framer.gap(side, lost, &mut out);
            seq[index] = seq[index].wrapping_add(lost as u32);
        }
        let len = usize::from(u16::from_le_bytes([*low, *high])).min(tail.len());
        time += 1_000;
        framer.data(
            side,
            Chunk {
                time,
                seq: seq[index],
                bytes: &tail[..len],
            },
            &mut out,
        );
        seq[index] = seq[index].wrapping_add(len as u32);
        rest = &tail[len..];
    }
    framer.close(&mut out);
    for message in &out.messages {
        assert!(message.first <= message.last);
        let named = message.operation == crate::capture::protocol::Operation::NONE
            || (message.operation.0 as usize) < out.operations.len();
        assert!(named, "operation ids index the names given");
    }
}

/// Writes one segment in [`framer`]'s input format.
pub fn framer_records(server: bool, bytes: &[u8], out: &mut Vec<u8>) {
    for piece in bytes.chunks(usize::from(u16::MAX)) {
        out.push(u8::from(server));
        out.extend_from_slice(&(piece.len() as u16).to_le_bytes());
        out.extend_from_slice(piece);
    }
}
