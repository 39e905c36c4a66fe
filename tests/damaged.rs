//! Captures as users have them, odd or damaged (issue 47): time units a capture names
//! that are not powers of ten, packet blocks that cannot be placed, records and blocks
//! that are cut or impossible, compressed files cut short, link types blackbox does not
//! read. Each gives a result or an error that names the file, the place and the reason,
//! in words (never a parser's internal name). Also how runs end: the exit code rule
//! (input 2, output and machine 1) and counts that read right ("1 packet").
//!
//! The captures are made here, byte by byte, so each test says what it holds.

use predicates::prelude::*;
use std::io::Write;
use std::path::{Path, PathBuf};

mod support;
use support::{blackbox, outputs_of};

/// A pcapng block of `kind` around `body`, padded to 32 bits, little-endian.
fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let mut body = body.to_vec();
    body.resize(body.len().next_multiple_of(4), 0);
    let length = (12 + body.len()) as u32;
    [
        &kind.to_le_bytes()[..],
        &length.to_le_bytes(),
        &body,
        &length.to_le_bytes(),
    ]
    .concat()
}

fn section() -> Vec<u8> {
    let mut body = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
    body.extend([1, 0, 0, 0]); // version 1.0
    body.extend((-1i64).to_le_bytes()); // section length unknown
    block(0x0A0D_0D0A, &body)
}

/// An Ethernet interface; `tsresol` is its `if_tsresol` option where given.
fn interface(linktype: u16, tsresol: Option<u8>) -> Vec<u8> {
    let mut body = [
        &linktype.to_le_bytes()[..],
        &[0, 0],
        &65535u32.to_le_bytes(),
    ]
    .concat();
    if let Some(resolution) = tsresol {
        body.extend([9, 0, 1, 0, resolution, 0, 0, 0]); // if_tsresol, padded
        body.extend([0, 0, 0, 0]); // opt_endofopt
    }
    block(1, &body)
}

fn packet(ticks: u64, frame: &[u8]) -> Vec<u8> {
    let mut body = 0u32.to_le_bytes().to_vec();
    body.extend(((ticks >> 32) as u32).to_le_bytes());
    body.extend((ticks as u32).to_le_bytes());
    body.extend((frame.len() as u32).to_le_bytes());
    body.extend((frame.len() as u32).to_le_bytes());
    body.extend(frame);
    block(6, &body)
}

fn simple_packet(frame: &[u8]) -> Vec<u8> {
    block(
        3,
        &[&(frame.len() as u32).to_le_bytes()[..], frame].concat(),
    )
}

/// An Ethernet frame with a UDP datagram from 10.0.0.1:1000 to 10.0.0.2:2000.
fn udp_frame() -> Vec<u8> {
    let payload = b"hello";
    let mut frame = vec![0u8; 12];
    frame.extend([0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    frame.extend([0x45, 0]);
    frame.extend(total.to_be_bytes());
    frame.extend([0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    frame.extend(1000u16.to_be_bytes());
    frame.extend(2000u16.to_be_bytes());
    frame.extend(((8 + payload.len()) as u16).to_be_bytes());
    frame.extend([0, 0]);
    frame.extend(payload);
    frame
}

/// A microsecond pcap of `linktype` with `frames` one second apart, from 1,000 s.
fn pcap(linktype: u32, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = 0xa1b2_c3d4u32.to_le_bytes().to_vec();
    out.extend([2, 0, 4, 0]);
    out.extend([0; 8]);
    out.extend(65535u32.to_le_bytes());
    out.extend(linktype.to_le_bytes());
    for (k, frame) in frames.iter().enumerate() {
        out.extend((1000 + k as u32).to_le_bytes());
        out.extend(0u32.to_le_bytes());
        out.extend((frame.len() as u32).to_le_bytes());
        out.extend((frame.len() as u32).to_le_bytes());
        out.extend(frame);
    }
    out
}

fn file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// `blackbox records FILE`: its exit code, stdout and stderr.
fn records(path: &Path) -> (i32, String, String) {
    let output = blackbox().arg("records").arg(path).output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_time_unit_that_is_a_power_of_two_gives_the_captures_times() {
    // if_tsresol 0x8a: 2^-10 s. tshark reads the first packet at 1795336726.0.
    let dir = tempfile::tempdir().unwrap();
    let bytes = [
        section(),
        interface(1, Some(0x8a)),
        packet(1_795_336_726 << 10, &udp_frame()),
        packet((1_795_336_727 << 10) + 512, &udp_frame()),
    ]
    .concat();
    let (code, out, err) = records(&file(dir.path(), "binary.pcapng", &bytes));
    assert_eq!(code, 0, "{err}");
    let times: Vec<&str> = out.lines().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(times, ["1795336726.000000", "1795336727.500000"], "{out}");
}

#[test]
fn packets_that_cannot_be_placed_are_counted_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let frame = udp_frame();
    let simple = [section(), interface(1, None)]
        .into_iter()
        .chain((0..4).map(|_| simple_packet(&frame)))
        .collect::<Vec<_>>()
        .concat();
    let (code, _, err) = records(&file(dir.path(), "simple.pcapng", &simple));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("simple.pcapng holds 0 packets; 4 set aside: a pcapng simple packet block, which has no timestamp"),
        "{err}"
    );
    let early = [
        section(),
        packet(1, &frame),
        interface(1, None),
        packet(2, &frame),
    ]
    .concat();
    let (code, _, err) = records(&file(dir.path(), "early.pcapng", &early));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("skipped 1: a packet block naming an interface not described before it"),
        "{err}"
    );
}

#[test]
fn bytes_after_the_header_that_make_no_record_are_said() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = pcap(1, &[]);
    bytes.extend([0; 6]);
    let (code, _, err) = records(&file(dir.path(), "six.pcap", &bytes));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("six.pcap holds 0 packets; reading stopped at packet 1 (byte 24): the file ends inside a record"),
        "{err}"
    );
}

#[test]
fn damaged_blocks_are_said_in_words_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let frame = udp_frame();
    let start = [section(), interface(1, None), packet(1, &frame)].concat();
    let mut zero = start.clone();
    zero.extend(6u32.to_le_bytes());
    zero.extend(0u32.to_le_bytes());
    zero.extend(packet(2, &frame));
    let (code, _, err) = records(&file(dir.path(), "zero.pcapng", &zero));
    assert_eq!(code, 0, "{err}");
    let place = format!("zero.pcapng: packet 2 at byte {}: ", start.len());
    assert!(err.contains(&place), "{err}");
    assert!(
        err.contains("a damaged pcapng block (type 0x6): its length is 0, under the 12 bytes of a block's frame; the 1 packet before it is used"),
        "{err}"
    );
    assert!(!err.contains("Verify"), "{err}");

    // The first block's length is not a multiple of 4: a pcapng file, damaged, not
    // "no magic number".
    let mut bad = section();
    bad[4..8].copy_from_slice(&13u32.to_le_bytes());
    let (code, _, err) = records(&file(dir.path(), "head.pcapng", &bad));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("head.pcapng is not a pcap or pcapng capture: a pcapng file whose first section header is damaged: its length, 13, is not a multiple of 4"),
        "{err}"
    );
}

#[test]
fn a_compressed_capture_cut_short_is_read_up_to_the_cut_as_a_plain_one_is() {
    let dir = tempfile::tempdir().unwrap();
    let frames = vec![udp_frame(); 2000];
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&pcap(1, &frames)).unwrap();
    let whole = gz.finish().unwrap();
    let cut = &whole[..whole.len() - 200];
    let (code, out, err) = records(&file(dir.path(), "cut.pcap.gz", cut));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("warning: "), "{err}");
    assert!(err.contains("cut.pcap.gz: packet "), "{err}");
    assert!(
        err.contains("the file's bytes end or stop decompressing here"),
        "{err}"
    );
    assert!(
        out.lines().count() > 1000,
        "{} records",
        out.lines().count()
    );
}

#[test]
fn a_link_type_blackbox_does_not_read_is_named_not_blamed_on_the_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = records(&file(dir.path(), "radio.pcap", &pcap(127, &[udp_frame()])));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("radio.pcap holds 1 packet; 1 set aside: link type 127 (IEEE 802.11 with radiotap headers), which blackbox does not read"),
        "{err}"
    );
    assert!(!err.contains("--protocol"), "{err}");
}

#[test]
fn counts_of_one_read_in_the_singular() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = records(&file(dir.path(), "one.pcap", &pcap(1, &[udp_frame()])));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "1 packet (IPv4 1, IPv6 0; TCP 0, UDP 1) -> 1 message (udp 1); 0 TCP connections"
        ),
        "{err}"
    );
    assert!(err.contains("only 1 IP packet;"), "{err}");
    for wrong in ["1 packets", "1 messages", "1 TCP connections"] {
        assert!(!err.contains(wrong), "{wrong}: {err}");
    }
}

/// The exit code and stderr of `blackbox nest -q ARGS` on the shop, with `TMPDIR`
/// where given, stdout to `stdout`.
fn nest_shop(args: &[&str], tmpdir: Option<&str>, stdout: std::process::Stdio) -> (i32, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_blackbox"));
    command
        .args(["nest", "-q"])
        .args(support::shop_captures())
        .args(args);
    if let Some(dir) = tmpdir {
        command.env("TMPDIR", dir);
    }
    let output = command.stdout(stdout).output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn input_is_exit_2_output_and_the_machine_exit_1_each_named() {
    let null = std::process::Stdio::null;
    // The input's fault.
    let (code, err) = nest_shop(&["no-such.pcap"], None, null());
    assert_eq!(code, 2, "{err}");
    // An output that cannot be created.
    let (code, err) = nest_shop(&["--json", "/nonexistent/x.json"], None, null());
    assert_eq!(
        (code, err.contains("cannot create /nonexistent/x.json")),
        (1, true),
        "{err}"
    );
    // A full disk under standard output, named as such.
    if let Ok(full) = std::fs::File::create("/dev/full") {
        let (code, err) = nest_shop(&[], None, full.into());
        assert_eq!(code, 1, "{err}");
        assert!(
            err.contains("writing standard output: No space left on device"),
            "{err}"
        );
    }
    // Messages that cannot be kept on disk while captures are nested in segments: the
    // machine's, not the input's.
    let (code, err) = nest_shop(&["--segment-lines", "700"], Some("/etc/passwd"), null());
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("cannot keep the messages of"), "{err}");
    // And every command's help says the rule.
    for command in ["nest", "eval", "convolve", "records", "align"] {
        let (help, _) = outputs_of(blackbox().args([command, "--help"]));
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            help.contains("Exit status: 0 when done"),
            "{command}: {help}"
        );
        assert!(
            help.contains("2 when an input or the command line is at fault"),
            "{command}"
        );
    }
}

#[test]
fn a_pcap_link_field_with_frame_check_sequence_bits_is_the_link_type_in_its_low_bits() {
    // Two of tcpdump's test captures (tests/data/public/README.md): Ethernet frames whose
    // header's link-type field also carries the FCS bits. Each packet is now read as
    // Ethernet and set aside for what it holds, not for its link type.
    for (file, reason) in [
        ("tcpdump--bootp_asan.pcap", "IP fragment"),
        (
            "tcpdump--tcp_header_heapoverflow.pcap",
            "TCP/UDP header cut short",
        ),
    ] {
        let path = Path::new("tests/data/public").join(file);
        blackbox()
            .arg("records")
            .arg(&path)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(reason))
            .stderr(predicates::str::contains("link type").not());
    }
}

/// An Ethernet frame (two VLAN tags, a PPPoE session, PPP) around the IPv4 packet of a
/// TCP segment from `from` to `to` carrying `data`, as PcapPlusPlus's
/// one_http_stream_rst.pcap has it.
fn pppoe_tcp(from: ([u8; 4], u16), to: ([u8; 4], u16), seq: u32, ack: u32, data: &[u8]) -> Vec<u8> {
    let mut ip = Vec::new();
    etherparse::PacketBuilder::ipv4(from.0, to.0, 64)
        .tcp(from.1, to.1, seq, 65535)
        .ack(ack)
        .write(&mut ip, data)
        .unwrap();
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    frame.extend([0x81, 0x00, 0, 7, 0x81, 0x00, 0, 8, 0x88, 0x64]);
    frame.extend([0x11, 0, 0x12, 0x34]);
    frame.extend((ip.len() as u16 + 2).to_be_bytes());
    frame.extend([0x00, 0x21]);
    frame.extend(ip);
    frame
}

#[test]
fn an_http_call_inside_pppoe_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let (client, server) = (([10, 3, 65, 35], 5068), ([185, 8, 212, 46], 80));
    let request = b"GET /engine/download.php HTTP/1.1\r\nHost: x\r\n\r\n";
    let reply = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n";
    let frames = [
        pppoe_tcp(client, server, 1000, 1, request),
        pppoe_tcp(server, client, 1, 1000 + request.len() as u32, reply),
    ];
    let (code, out, err) = records(&file(dir.path(), "pppoe.pcap", &pcap(1, &frames)));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("CALL_SENT") && out.contains("op=GET_/engine/download.php"),
        "{out}"
    );
    assert!(out.contains("status=503"), "{out}");
    assert!(
        err.contains("read 2, not messages: packets read inside PPPoE sessions"),
        "{err}"
    );
    assert!(!err.contains("not IP"), "{err}");
}

#[test]
fn naming_a_protocol_is_advised_only_where_it_could_help() {
    let dir = tempfile::tempdir().unwrap();
    let tcp = |from: ([u8; 4], u16), to: ([u8; 4], u16), syn: bool, data: &[u8]| {
        let builder = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
            .ipv4(from.0, to.0, 64)
            .tcp(from.1, to.1, 1000, 65535);
        let builder = if syn { builder.syn() } else { builder.ack(1) };
        let mut frame = Vec::new();
        builder.write(&mut frame, data).unwrap();
        frame
    };
    let (client, server) = (([10, 0, 0, 1], 40000), ([10, 0, 0, 2], 80));
    // A handshake and nothing more (tcpdump's tcp-handshake-nano.pcap).
    let handshake = [
        tcp(client, server, true, b""),
        tcp(server, client, true, b""),
        tcp(client, server, false, b""),
    ];
    let (code, _, err) = records(&file(dir.path(), "handshake.pcap", &pcap(1, &handshake)));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("holds 3 packets (TCP 3, UDP 0) but no call or return: its TCP connections carry no data"),
        "{err}"
    );
    assert!(!err.contains("--protocol"), "{err}");
    // Half an HTTP request, recognised as HTTP (PcapPlusPlus's PartialHttpRequest.pcap).
    let half = [tcp(
        client,
        server,
        false,
        b"GET /index.html HTTP/1.1\r\nHost: exa",
    )];
    let (code, _, err) = records(&file(dir.path(), "half.pcap", &pcap(1, &half)));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("but no call or return read whole; 1 set aside: incomplete message"),
        "{err}"
    );
    assert!(!err.contains("--protocol"), "{err}");
    // A datagram the snaplen cut (tcpdump's cve-2014-8767-OLSR.pcap): its record keeps
    // 44 of its bytes.
    let mut cut = pcap(1, &[udp_frame()]);
    let kept = 14 + 20 + 8 + 2;
    cut[32..36].copy_from_slice(&(kept as u32).to_le_bytes());
    cut.truncate(40 + kept);
    let (code, _, err) = records(&file(dir.path(), "cut.pcap", &cut));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(
            "but no call or return read whole; 1 set aside: UDP datagrams cut short by the snaplen"
        ),
        "{err}"
    );
    assert!(!err.contains("--protocol"), "{err}");
    // Where a protocol was tried and the bytes were not it, naming one may help.
    let mut dns = udp_frame();
    dns[36..38].copy_from_slice(&53u16.to_be_bytes());
    let (code, _, err) = records(&file(dir.path(), "notdns.pcap", &pcap(1, &[dns])));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("(name one with --protocol PORT=NAME)"),
        "{err}"
    );
}

/// An enhanced packet block of 32 bytes, whole (both lengths 32), whose captured length
/// says 65,536: PcapPlusPlus's crash-pcapng-epb-unbounded-length.
fn overflowing_packet() -> Vec<u8> {
    let mut body = [0u8; 12].to_vec(); // interface 0, time 0
    body.extend(65536u32.to_le_bytes());
    body.extend(65536u32.to_le_bytes());
    block(6, &body)
}

#[test]
fn a_packet_block_longer_inside_than_its_block_is_damaged_not_a_cut_file() {
    let dir = tempfile::tempdir().unwrap();
    let head = [section(), interface(1, None)].concat();
    // Alone, last in its file: where reading stopped, and why.
    let alone = [head.clone(), overflowing_packet()].concat();
    let (code, _, err) = records(&file(dir.path(), "epb.pcapng", &alone));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("epb.pcapng holds 0 packets; reading stopped at packet 1 (byte 48): a damaged pcapng block (type 0x6): its captured length, 65536, is larger than the block of 32 bytes"),
        "{err}"
    );
    assert!(!err.contains("cut off"), "{err}");
    // Between whole blocks: skipped, counted, and the packets after it read.
    let between = [
        head,
        packet(1_000_000, &udp_frame()),
        overflowing_packet(),
        packet(2_000_000, &udp_frame()),
    ]
    .concat();
    let (code, out, err) = records(&file(dir.path(), "between.pcapng", &between));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(
        err.contains(
            "skipped 1: damaged pcapng packet blocks: a captured length larger than the block"
        ),
        "{err}"
    );
    assert!(!err.contains("warning"), "{err}");
}

#[test]
fn a_compressed_capture_cut_before_its_first_block_says_where() {
    let dir = tempfile::tempdir().unwrap();
    let frames = vec![udp_frame(); 2000];
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&pcap(1, &frames)).unwrap();
    let whole = gz.finish().unwrap();
    // Inside the deflate stream's first block (`head -c 100`), inside the gzip header.
    for cut in [100, 60, 5] {
        let name = format!("cut{cut}.pcap.gz");
        let (code, _, err) = records(&file(dir.path(), &name, &whole[..cut]));
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(&name), "{err}");
        assert!(
            err.contains(&format!("the compressed file is cut at byte {cut}, after ")),
            "{err}"
        );
        assert!(err.contains(" decompressed: "), "{err}");
    }
    // Cut further on, the same words.
    let cut = whole.len() - 200;
    let (code, _, err) = records(&file(dir.path(), "late.pcap.gz", &whole[..cut]));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!("the file's bytes end or stop decompressing here (the compressed file is cut at byte {cut}, after ")),
        "{err}"
    );
}
