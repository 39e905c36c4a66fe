//! Traces of the configs in `traces/configs/`, made in-process by maketrace and read
//! back through the text reader, as a user's file would be.

use blackbox::trace::{text, Trace, TraceBuilder};
use maketrace::{config, generate};
use rand::SeedableRng;
use std::path::Path;

/// `messages` messages of a config, its parallelism scaled by `parallel`.
pub fn generated(config_name: &str, parallel: f64, messages: u64, seed: u64) -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/configs")
        .join(format!("{config_name}.toml"));
    let mut model = config::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    model.scale_parallel(parallel);
    let options = generate::Options {
        start: 1_700_000_000_000_000_000,
        stop: generate::Stop::Messages(messages),
        network: None,
        resolution: 1_000,
    };
    let trace = generate::generate(
        &model,
        &options,
        &mut rand_chacha::ChaCha8Rng::seed_from_u64(seed),
    );
    let mut text_bytes = Vec::new();
    maketrace::write_text(&trace, &mut text_bytes).unwrap();
    let mut builder = TraceBuilder::new();
    text::read(Path::new(config_name), &text_bytes[..], &mut builder).unwrap();
    builder.finish()
}
