//! Traces of the configs in `traces/configs/`, made in-process by maketrace and read
//! back through the text reader, as a user's file would be. Shared by the tests and the
//! benches (which include this file by path).
// Each includer uses part of this file; the rest would be dead code there.
#![allow(dead_code)]

use blackbox::trace::{text, Nanos, Trace, TraceBuilder};
use maketrace::{config, generate};
use rand::SeedableRng;
use std::path::{Path, PathBuf};

/// One generation of a config.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The config's name in `traces/configs/`, without `.toml`.
    pub config: String,
    /// Its parallelism scaled by this.
    pub parallel: f64,
    /// Its delays' standard deviations scaled by this.
    pub sd: f64,
    /// When to stop starting instances.
    pub stop: generate::Stop,
    /// Gaussian network delay (mean, sd), each message then written at both ends.
    pub network: Option<(Nanos, Nanos)>,
    /// Times rounded to a multiple of this.
    pub resolution: Nanos,
    /// Seed of the generator.
    pub seed: u64,
}

impl Generation {
    /// `messages` messages of `config` at seed 1, 1 µs resolution, no network delay.
    pub fn messages(config: &str, messages: u64) -> Self {
        Generation {
            config: config.to_owned(),
            parallel: 1.0,
            sd: 1.0,
            stop: generate::Stop::Messages(messages),
            network: None,
            resolution: 1_000,
            seed: 1,
        }
    }

    /// `seconds` of `config`, otherwise as [`Generation::messages`].
    pub fn seconds(config: &str, seconds: i64) -> Self {
        Generation {
            stop: generate::Stop::Duration(seconds * 1_000_000_000),
            ..Generation::messages(config, 0)
        }
    }

    /// The generated lines, with their truth.
    pub fn lines(&self) -> generate::Generated {
        self.lines_from(&mut rand_chacha::ChaCha8Rng::seed_from_u64(self.seed))
    }

    /// [`Generation::lines`] drawn from `rng` instead of a generator of the seed, for
    /// callers that go on drawing from it (message loss).
    pub fn lines_from(&self, rng: &mut rand_chacha::ChaCha8Rng) -> generate::Generated {
        let text = std::fs::read_to_string(config_path(&self.config)).expect("config");
        let mut model = config::parse(&text).expect("valid config");
        model.scale_parallel(self.parallel);
        model.scale_sd(self.sd);
        let options = generate::Options {
            start: 1_700_000_000_000_000_000,
            stop: self.stop,
            network: self.network,
            resolution: self.resolution,
        };
        generate::generate(&model, &options, rng)
    }

    /// The generated trace, written as text and read back.
    pub fn trace(&self) -> Trace {
        let mut bytes = Vec::new();
        maketrace::write_text(&self.lines(), &mut bytes).expect("in memory");
        read_text(&self.config, &bytes)
    }
}

/// The path of config `name`.
pub fn config_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("traces/configs")
        .join(format!("{name}.toml"))
}

/// A text trace in memory, read as a file named `name` would be.
pub fn read_text(name: &str, bytes: &[u8]) -> Trace {
    let mut builder = TraceBuilder::new();
    text::read(Path::new(name), bytes, &mut builder).expect("maketrace writes valid traces");
    builder.finish()
}

/// `messages` messages of a config, its parallelism scaled by `parallel`.
pub fn generated(config_name: &str, parallel: f64, messages: u64, seed: u64) -> Trace {
    Generation {
        parallel,
        seed,
        ..Generation::messages(config_name, messages)
    }
    .trace()
}
