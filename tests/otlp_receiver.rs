//! `blackbox nest --otlp` posted to a real OTLP/HTTP receiver (`tests/otlp/receiver.py`,
//! on the official opentelemetry-proto package from PyPI) as JSON and as protobuf: every
//! span of the shipped captures and of the sample trace must be taken, every parent id
//! must resolve, and every call must have its client and its server span.

mod support;

use std::process::{Command, ExitCode};
use support::{blackbox, captures_in, needs};

fn the_receiver_takes_every_span_of_the_shipped_captures_and_the_sample() {
    let python = needs::otlp_python().expect("the harness runs this only with the receiver");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let inputs: Vec<(&str, Vec<String>)> = vec![
        ("shop", captures_in("shop")),
        ("grpc", captures_in("grpc")),
        ("k8s", captures_in("k8s")),
        (
            "sample",
            vec![root
                .join("tests/data/multitier-sample.trace")
                .display()
                .to_string()],
        ),
    ];
    for (name, files) in inputs {
        let export = dir.path().join(format!("{name}.otlp.json"));
        blackbox()
            .args(["nest", "-q", "--otlp"])
            .arg(&export)
            .args(&files)
            .assert()
            .success();
        let checked = Command::new(&python)
            .arg(root.join("tests/otlp/check.py"))
            .arg(&export)
            .args(["--expect-kinds", "CLIENT,SERVER"])
            .output()
            .expect("python runs");
        let said = String::from_utf8_lossy(&checked.stdout).into_owned()
            + &String::from_utf8_lossy(&checked.stderr);
        assert!(checked.status.success(), "{name}: {said}");
        assert!(said.contains(" 0 rejected"), "{name}: {said}");
        eprintln!("{name}: {said}");
    }
}

fn main() -> ExitCode {
    needs::run(checks![
        the_receiver_takes_every_span_of_the_shipped_captures_and_the_sample needs OtlpReceiver,
    ])
}
