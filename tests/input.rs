//! What every command reads and refuses: captures and text traces told apart by their
//! content, gzip'd ones read through, standard input for `-`, and a clear one-line
//! refusal (never raw bytes on the terminal) for empty input, binary files and capture
//! formats blackbox does not read. `tests/data/modified.pcap` is the first 3 packets of
//! `traces/shop/web.pcap` written by `editcap -r -F modpcap`.

use assert_cmd::Command;
use flate2::write::GzEncoder;
use flate2::Compression;
use predicates::prelude::*;
use std::io::Write;
use std::path::Path;

mod support;
use support::{blackbox, data, shop_captures, stdout_of};

/// The commands that read inputs the same way.
const READERS: [&str; 4] = ["nest", "convolve", "eval", "records"];

fn gzip(path: &str, into: &Path) -> String {
    let name = Path::new(path).file_name().unwrap().to_str().unwrap();
    let out = into.join(format!("{name}.gz"));
    let mut encoder = GzEncoder::new(std::fs::File::create(&out).unwrap(), Compression::fast());
    encoder.write_all(&std::fs::read(path).unwrap()).unwrap();
    encoder.finish().unwrap();
    out.to_str().unwrap().to_owned()
}

/// `web.pcap` in `dir`: the shop's web capture cut to its first 24 bytes, the pcap
/// file header: a capture of nothing.
fn header_only_capture(dir: &Path) -> std::path::PathBuf {
    let header_only = dir.join("web.pcap");
    let web = std::fs::read("traces/shop/web.pcap").unwrap();
    std::fs::write(&header_only, &web[..24]).unwrap();
    header_only
}

/// What a user sees must be text: no byte a terminal would act on.
fn assert_printable(stderr: &[u8]) {
    let text = std::str::from_utf8(stderr).expect("UTF-8 on stderr");
    assert!(
        text.chars().all(|c| !c.is_control() || c == '\n'),
        "control characters on stderr: {text:?}"
    );
}

#[test]
fn gzipped_captures_give_the_same_answer_as_the_plain_ones() {
    let dir = tempfile::tempdir().unwrap();
    let plain = shop_captures();
    let gzipped: Vec<String> = plain.iter().map(|p| gzip(p, dir.path())).collect();
    let of = |files: &[String]| stdout_of(blackbox().args(["nest", "-q"]).args(files));
    assert_eq!(of(&gzipped), of(&plain));
    // Each host is named for its file without the `.gz`.
    let (_, stderr) = support::outputs_of(blackbox().arg("records").args(&gzipped));
    assert!(stderr.contains("(host web, own address"), "{stderr}");
}

#[test]
fn a_gzipped_text_trace_reads_like_the_plain_one() {
    let dir = tempfile::tempdir().unwrap();
    let gzipped = gzip("traces/multitier.trace", dir.path());
    let of = |file: &str| stdout_of(blackbox().args(["nest", "-q", file]));
    assert_eq!(of(&gzipped), of("traces/multitier.trace"));
}

#[test]
fn a_dash_reads_a_text_trace_from_standard_input() {
    let trace = std::fs::read("traces/multitier.trace").unwrap();
    let piped = stdout_of(blackbox().args(["nest", "-q", "-"]).write_stdin(trace));
    assert_eq!(
        piped,
        stdout_of(blackbox().args(["nest", "-q", "traces/multitier.trace"]))
    );
}

#[test]
fn a_dash_reads_a_capture_from_standard_input_as_tcpdump_writes_it() {
    let web = "traces/shop/web.pcap";
    let from_file = stdout_of(blackbox().args(["records", "--host", &format!("web={web}"), web]));
    let (from_pipe, stderr) = support::outputs_of(
        blackbox()
            .args(["records", "--host", "web=-", "-"])
            .write_stdin(std::fs::read(web).unwrap()),
    );
    assert_eq!(from_pipe, from_file);
    assert!(stderr.starts_with("standard input (host web,"), "{stderr}");
}

#[test]
fn records_says_what_it_read() {
    let (_, stderr) = support::outputs_of(blackbox().args(["records", "traces/multitier.trace"]));
    assert!(
        stderr.starts_with("read 11136 lines from 1 file: 11136 observations -> 5568 messages"),
        "{stderr}"
    );
    let (_, stderr) =
        support::outputs_of(blackbox().args(["records", "-q", "traces/multitier.trace"]));
    assert_eq!(stderr, "");
}

#[test]
fn standard_input_can_be_named_once() {
    blackbox()
        .args(["nest", "-", "-"])
        .assert()
        .code(2)
        .stderr("blackbox: standard input (-) can be named only once\n");
}

#[test]
fn an_empty_file_is_refused_by_every_command_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("app.pcap");
    std::fs::write(&empty, b"").unwrap();
    for command in READERS {
        blackbox()
            .arg(command)
            .arg(&empty)
            .assert()
            .code(2)
            .stdout("")
            .stderr(format!(
                "blackbox: {} is empty: there is nothing to read\n",
                empty.display()
            ));
    }
}

#[test]
fn a_capture_without_packets_says_it_holds_none() {
    let dir = tempfile::tempdir().unwrap();
    let header_only = header_only_capture(dir.path());
    for command in READERS {
        blackbox()
            .arg(command)
            .arg(&header_only)
            .assert()
            .code(2)
            .stdout("")
            .stderr(format!(
                "blackbox: no messages to work on: {} holds 0 packets\n",
                header_only.display()
            ));
    }
}

#[test]
fn align_says_when_there_is_nothing_to_align() {
    let dir = tempfile::tempdir().unwrap();
    let header_only = header_only_capture(dir.path());
    blackbox()
        .arg("align")
        .arg(&header_only)
        .arg("traces/shop/app.pcap")
        .assert()
        .code(2)
        .stdout("")
        .stderr(format!(
            "blackbox: nothing to align: {} holds 0 packets\n",
            header_only.display()
        ));
    blackbox()
        .args(["align", "traces/shop/app.pcap"])
        .assert()
        .code(2)
        .stderr("blackbox: align needs two captures or more, one per host: it aligns their clocks to each other\n");
}

#[test]
fn an_empty_trace_gets_a_clear_message_not_an_empty_table() {
    for command in READERS {
        blackbox()
            .args([command, data("empty.trace").to_str().unwrap()])
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                "blackbox: no messages to work on: the text trace holds 2 lines, all blank or comments\n",
            );
    }
}

#[test]
fn a_binary_file_is_shown_in_hex_never_as_raw_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let binary = dir.path().join("random.bin");
    // Bytes a terminal would act on: escape sequences, a bell, NULs.
    std::fs::write(&binary, b"\x1b[2J\x07\x00\x9f\xfe\x01binary\x00\x00").unwrap();
    for command in READERS {
        let output = blackbox().arg(command).arg(&binary).output().unwrap();
        assert_eq!(output.status.code(), Some(2));
        assert_printable(&output.stderr);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains("is not a capture (pcap, pcapng, gzip'd or not) or a text trace: it starts with 1b 5b 32 4a 07 00 9f fe"),
            "{stderr}"
        );
    }
}

#[test]
fn a_text_trace_with_control_characters_is_quoted_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("odd.trace");
    // Text to begin with, so it is read as a trace; a bad line further on.
    let mut bytes = b"1.0 CALL_SENT a b c1\n".repeat(300);
    bytes.extend_from_slice(b"2.0 \x1b[31mCALL\x07\n");
    std::fs::write(&trace, bytes).unwrap();
    let output = blackbox().arg("nest").arg(&trace).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_printable(&output.stderr);
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains(r"`2.0 \u{1b}[31mCALL\u{7}`"), "{stderr}");
}

#[test]
fn a_modified_pcap_is_named_with_the_command_that_converts_it() {
    blackbox()
        .args(["nest", data("modified.pcap").to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "modified.pcap is a modified pcap (the format of Kuznetzov's patched libpcap), which blackbox does not read: convert it with `editcap -F pcap FILE OUT.pcap`",
        ));
}

#[test]
fn align_refuses_text_and_reads_gzipped_captures() {
    let dir = tempfile::tempdir().unwrap();
    let gzipped: Vec<String> = shop_captures()
        .iter()
        .map(|p| gzip(p, dir.path()))
        .collect();
    let table = |files: &[String]| stdout_of(blackbox().arg("align").args(files));
    assert_eq!(table(&gzipped), table(&shop_captures()));
    blackbox()
        .args(["align", "traces/shop/web.pcap", "traces/multitier.trace"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "traces/multitier.trace is not a pcap or pcapng capture: align reads captures only",
        ));
    let mut write = Command::cargo_bin("blackbox").unwrap();
    write
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("align")
        .args(&gzipped)
        .arg("--write")
        .arg(dir.path().join("aligned"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("is gzip-compressed"));
}
