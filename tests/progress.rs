//! Progress bars: drawn on a terminal while captures are read, never in piped or
//! redirected output, never with --quiet.

mod support;

use support::blackbox;

const BINARY: &str = env!("CARGO_BIN_EXE_blackbox");

#[test]
fn a_terminal_sees_the_reading_bar_with_throughput_and_time_left() {
    // `script` (util-linux, essential on Debian) runs the command on a pseudo-terminal
    // and copies what it draws to its own stdout.
    let command = format!("{BINARY} nest traces/shop/*.pcap* > /dev/null");
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("script from util-linux runs");
    assert!(output.status.success(), "{output:?}");
    let drawn = String::from_utf8_lossy(&output.stdout);
    assert!(drawn.contains("reading captures ["), "{drawn}");
    assert!(drawn.contains("/s, ") && drawn.contains(" left"), "{drawn}");
    // No text traces were given: no bar for them.
    assert!(!drawn.contains("reading text traces"), "{drawn}");
    // --quiet: nothing drawn.
    let command = format!("{BINARY} nest -q traces/shop/*.pcap* > /dev/null");
    let output = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("script from util-linux runs");
    let drawn = String::from_utf8_lossy(&output.stdout);
    assert!(!drawn.contains("reading captures"), "{drawn}");
}

#[test]
fn redirected_stderr_never_holds_a_bar() {
    let output = blackbox()
        .args(["nest", "traces/multitier.trace"])
        .arg("traces/shop/web.pcap")
        .arg("traces/shop/app.pcap")
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("reading captures ["), "{stderr}");
    assert!(!stderr.contains('\r'), "{stderr}");
    assert!(
        stderr.contains("read "),
        "the summary is still there: {stderr}"
    );
}
