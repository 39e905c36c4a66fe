//! `--html`: the page is self-contained and escapes what it shows, and it renders in a
//! real browser: headless Chromium loads it, the script runs without a console message
//! or an error, sorting by a column works, and a screenshot is saved. The browser tests
//! need a Chromium (`.ci/run` installs one; see `support::needs`).

use std::path::{Path, PathBuf};
use std::process::{Command as Process, ExitCode};

mod support;
use support::needs::{self, run};
use support::{blackbox, shop_captures};

/// The rows of the table that starts with `start`.
fn tbody_of<'a>(html: &'a str, start: &str) -> &'a str {
    tbody(html.split(start).nth(1).expect("the table is on the page"))
}

/// The rows of the page's (first) table.
fn tbody(html: &str) -> &str {
    html.split("<tbody>")
        .nth(1)
        .and_then(|rest| rest.split("</tbody>").next())
        .expect("the page has a table body")
}

/// Runs `blackbox COMMAND ARGS --html DIR/report.html` and returns the page's path.
fn html_of(dir: &Path, command: &str, args: &[String]) -> PathBuf {
    let page = dir.join(format!("{command}.html"));
    blackbox()
        .arg(command)
        .arg("-q")
        .args(args)
        .arg("--html")
        .arg(&page)
        .assert()
        .success();
    page
}

/// Nothing on the page is fetched: no external scripts, styles, fonts or images. (SVG's
/// namespace is a name, not an address that is fetched.)
fn assert_self_contained(html: &str) {
    let html = html.replace("xmlns=\"http://www.w3.org/2000/svg\"", "");
    for needle in ["<link", " src=", "url(", "@import", "http://", "https://"] {
        assert!(
            !html.contains(needle),
            "the page refers outside itself: {needle}"
        );
    }
}

fn the_nesting_page_is_self_contained_and_shows_every_shown_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let page = html_of(dir.path(), "nest", &shop_captures());
    let html = std::fs::read_to_string(page).unwrap();
    assert_self_contained(&html);
    let table = blackbox()
        .args(["nest", "-q"])
        .args(shop_captures())
        .output()
        .unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    let signatures: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert!(signatures.len() >= 3, "{signatures:?}");
    for signature in &signatures {
        let escaped = signature.replace('>', "&gt;");
        assert!(html.contains(&escaped), "{signature} is not on the page");
    }
    let rows = tbody(&html);
    assert_eq!(rows.matches("<tr>").count(), signatures.len());
    // Each drawn pattern: a tree with one highlighted node, a timeline, histograms.
    let sections = html.matches("<section class=\"pattern\"").count();
    assert_eq!(sections, signatures.len().min(40));
    assert_eq!(
        html.matches("<span class=\"badge\">adds the most</span>")
            .count(),
        sections
    );
    // How sure each pattern is, as the table says, and each call below the root.
    let sure: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(6))
        .collect();
    for share in &sure {
        assert!(
            html.contains(&format!(">{share}</td>")),
            "{share} is not in the page's table"
        );
    }
    assert!(html.matches("sure of its caller").count() >= sections * 2);
    // A pattern of many requests: a typical timeline, its slowest requests each as
    // a timeline, latency over time and histograms; a pattern of one: its request.
    let counts: Vec<u64> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect();
    let many = counts.iter().take(40).filter(|&&c| c > 1).count();
    let single = counts.iter().take(40).filter(|&&c| c == 1).count();
    assert!(many >= 3 && single >= 1, "{counts:?}");
    let timelines = html.matches("<div class=\"chart timeline\"><svg").count();
    assert_eq!(timelines, many * 4 + single);
    assert_eq!(html.matches("<h3>Its one request</h3>").count(), single);
    assert_eq!(
        html.matches("<div class=\"chart over-time\"><svg").count(),
        many
    );
    assert!(html.matches("<div class=\"chart histogram\"><svg").count() >= many * 3);
    assert!(!html.contains("not drawn"));
    // The input summary, each capture in a table row, the clock alignment as a table.
    assert!(html.contains("<li>read 25431 packets from 5 captures"));
    assert!(html.contains("47 ICMP<br>"));
    assert!(html.contains("<section id=\"alignment\">"));
    assert_eq!(
        tbody_of(&html, "<table class=\"captures\">")
            .matches("<tr>")
            .count(),
        5
    );
    let alignment = html.split("<section id=\"alignment\">").nth(1).unwrap();
    assert_eq!(tbody(alignment).matches("<tr>").count(), 5);
}

fn names_on_the_page_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("evil.trace");
    std::fs::write(
        &trace,
        "1 CALL <script>alert'x'</script> b&c x\n2 CALL b&c d\"e y\n3 RET d\"e b&c y\n4 RET b&c <script>alert'x'</script> x\n",
    )
    .unwrap();
    let page = html_of(dir.path(), "nest", &[trace.to_str().unwrap().to_owned()]);
    let html = std::fs::read_to_string(page).unwrap();
    assert!(!html.contains("<script>alert"), "a node name became markup");
    assert!(html.contains("&lt;script&gt;alert'x'&lt;/script&gt;-&gt;b&amp;c(d&quot;e)"));
}

fn the_convolution_page_draws_each_path_with_its_delay_spikes() {
    let dir = tempfile::tempdir().unwrap();
    let page = html_of(
        dir.path(),
        "convolve",
        &["traces/freeform.trace".to_owned()],
    );
    let html = std::fs::read_to_string(page).unwrap();
    assert_self_contained(&html);
    assert!(html.contains("source-&gt;relay-&gt;processor-&gt;sink"));
    assert_eq!(html.matches("<div class=\"chart chain\"><svg").count(), 2);
    // The 20 ms spike at relay, as in the table.
    assert!(html.contains("20.02 ms × "), "no delay spike label");
}

/// The Chromium the harness found (the test is only run when there is one).
fn chromium() -> PathBuf {
    needs::chromium().expect("the harness runs this test only with a Chromium")
}

/// Loads `page` (with `fragment`) in headless Chromium; returns the DOM after the
/// scripts ran and Chromium's log. Saves a screenshot to `screenshot`.
fn render(browser: &Path, page: &Path, fragment: &str, screenshot: &Path) -> (String, String) {
    let url = format!("file://{}{fragment}", page.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        "--window-size=1280,2000",
    ];
    let dom = Process::new(browser)
        .args(common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(
        dom.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let shot = Process::new(browser)
        .args(common)
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(shot.status.success());
    let png = std::fs::read(screenshot).expect("a screenshot was written");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 20_000,
        "{} bytes",
        png.len()
    );
    (
        String::from_utf8_lossy(&dom.stdout).into_owned(),
        String::from_utf8_lossy(&dom.stderr).into_owned() + &String::from_utf8_lossy(&shot.stderr),
    )
}

fn assert_rendered_cleanly(dom: &str, log: &str) {
    let root = dom.lines().find(|l| l.starts_with("<html")).unwrap_or("");
    assert!(
        root.contains("data-ready=\"yes\""),
        "the page's script did not finish: {root}"
    );
    assert!(!root.contains("data-errors"), "script errors: {root}");
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
}

fn the_report_renders_in_headless_chromium_and_sorts_by_mean_latency() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let page = html_of(dir.path(), "nest", &shop_captures());
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nest-report.png");
    let (dom, log) = render(&browser, &page, "#sort=mean", &screenshot);
    assert_rendered_cleanly(&dom, &log);
    assert!(dom.contains("<h1>Where the time goes</h1>"));
    assert!(dom.contains("<section class=\"pattern\" id=\"pattern-1\">"));
    // The table is sorted by mean latency, longest first, in the live DOM.
    let body = tbody(&dom);
    let means: Vec<f64> = body
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let cell = row.split("<td data-v=\"").nth(4).unwrap();
            cell.split('"').next().unwrap().parse().unwrap()
        })
        .collect();
    assert!(means.len() >= 3, "{means:?}");
    assert!(
        means.windows(2).all(|w| w[0] >= w[1]),
        "not sorted: {means:?}"
    );
    assert!(dom.contains("aria-sort=\"descending\""));
    eprintln!("screenshot: {}", screenshot.display());
}

fn the_convolution_report_renders_in_headless_chromium() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let page = html_of(
        dir.path(),
        "convolve",
        &["traces/freeform.trace".to_owned()],
    );
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("convolve-report.png");
    let (dom, log) = render(&browser, &page, "", &screenshot);
    assert_rendered_cleanly(&dom, &log);
    assert!(dom.contains("<div class=\"chart chain\"><svg"));
}

fn the_nesting_page_shows_each_nodes_operations_and_error_rate() {
    let dir = tempfile::tempdir().unwrap();
    let page = html_of(dir.path(), "nest", &support::captures_in("grpc"));
    let html = std::fs::read_to_string(page).unwrap();
    assert_self_contained(&html);
    for shown in [
        // The gateway of the top pattern mostly serves GetItem: its count comes first.
        "<span class=\"ops\"><code>/shop.Gateway/GetItem</code> ×",
        "<span class=\"ops\"><code>/shop.Catalog/GetItem</code> ×",
        "<span class=\"ops\"><code>get</code> ×",
        "<span class=\"ops\"><code>INSERT</code> ×",
        "<span class=\"ops\">0.0% errors (0 of ",
    ] {
        assert!(html.contains(shown), "{shown} is not on the page");
    }
}

fn the_window_where_a_patterns_latency_changed_most_is_shaded_in_chromium() {
    let browser = chromium();
    let dir = tempfile::tempdir().unwrap();
    let trace = support::deployed_delay_trace(dir.path());
    let page = html_of(
        dir.path(),
        "nest",
        &[
            "--window".to_owned(),
            "20s".to_owned(),
            trace.to_str().unwrap().to_owned(),
        ],
    );
    let screenshot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nest-window-report.png");
    let (dom, log) = render(&browser, &page, "", &screenshot);
    assert_rendered_cleanly(&dom, &log);
    // Every drawn pattern of many requests, in both runs, has its window shaded: the
    // one in which the delay was deployed, 100 s after the start.
    let marks = dom.matches("class=\"hint window-mark\"").count();
    assert!(marks >= 3, "{marks} windows marked");
    assert_eq!(marks, dom.matches("fill=\"#FDE2B4\"").count());
    let shaded = dom
        .split("class=\"hint window-mark\"")
        .nth(1)
        .and_then(|rest| rest.split(" to ").next())
        .unwrap();
    assert!(shaded.contains("22:15:00"), "{shaded}");
}

fn main() -> ExitCode {
    run(checks![
        the_nesting_page_is_self_contained_and_shows_every_shown_pattern,
        names_on_the_page_are_escaped,
        the_convolution_page_draws_each_path_with_its_delay_spikes,
        the_report_renders_in_headless_chromium_and_sorts_by_mean_latency needs Chromium,
        the_convolution_report_renders_in_headless_chromium needs Chromium,
        the_nesting_page_shows_each_nodes_operations_and_error_rate,
        the_window_where_a_patterns_latency_changed_most_is_shaded_in_chromium needs Chromium,
    ])
}
