//! Entry points shared by the fuzz targets (`fuzz/`) and the tests that run the same
//! code on generated input in every `cargo test`. Owns no logic of its own.

use crate::nesting::{nest, NestOptions};
use crate::report::{
    assignments::Assignments, dot::Dot, json::Json, table::Table, NestReport, Ranking, Render,
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
    for format in [&Table as &dyn Render, &Json, &Assignments] {
        format
            .render(&report, &mut sink)
            .expect("writing to memory cannot fail");
    }
    if !report.ranked.is_empty() {
        Dot { rank: 1 }
            .render(&report, &mut sink)
            .expect("writing to memory cannot fail");
    }
}

/// Reads `data` as an mbox and writes the resulting trace. Panics only on a bug.
pub fn mbox(data: &[u8]) {
    let mut builder = TraceBuilder::new();
    let stats = crate::trace::mbox::read(Path::new("fuzz.mbox"), data, &mut builder)
        .expect("reading memory cannot fail");
    assert!(stats.hops <= stats.received_headers);
    let trace = builder.finish();
    let mut written = Vec::new();
    text::write(&trace, &mut written).expect("writing to memory cannot fail");
}
