//! `nest --window`: the requests by time window, as tables and as a time series.

mod support;

use support::{blackbox, stdout_of};

#[test]
fn windows_show_when_ws2_got_slow() {
    let dir = tempfile::tempdir().unwrap();
    let trace = support::deployed_delay_trace(dir.path());
    let out = stdout_of(
        blackbox()
            .args(["nest", "-q", "--window", "20s", "--json", "-"])
            .arg(&trace),
    );
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let windows = doc["windows"].as_array().unwrap();
    // 10 s of requests, then 90 s of none, then 10 s more, in 20 s windows on the clock.
    assert!(windows.len() >= 6, "{} windows", windows.len());
    let requests: u64 = windows
        .iter()
        .map(|w| w["requests"].as_u64().unwrap())
        .sum();
    let total: u64 = doc["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(requests, total);
    let start = windows[0]["start"].as_f64().unwrap();
    let ws2_own = |window: &serde_json::Value| -> Option<f64> {
        let pattern = window["patterns"]
            .as_array()?
            .iter()
            .find(|p| p["signature"] == "client->WS2(AUTH,AP1(DB))")?;
        Some(pattern["nodes"][0]["own_time_s"].as_f64().unwrap())
    };
    for window in windows {
        let Some(own) = ws2_own(window) else { continue };
        let late = window["start"].as_f64().unwrap() - start >= 90.0;
        if late {
            assert!((0.28..0.34).contains(&own), "{window}");
        } else {
            assert!((0.08..0.14).contains(&own), "{window}");
        }
    }
    let text = stdout_of(
        blackbox()
            .args(["nest", "-q", "--window", "20s", "--top", "2"])
            .arg(&trace),
    );
    assert!(text.contains("window 1 of "), "{text}");
    assert!(
        text.contains("count  p50 latency  p99 latency  adds the most  pattern"),
        "{text}"
    );
}

#[test]
fn a_window_too_narrow_for_the_trace_is_refused() {
    blackbox()
        .args(["nest", "--window", "1us", "traces/multitier.trace"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("more than 10000 windows"));
}
