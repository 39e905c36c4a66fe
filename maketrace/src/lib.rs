//! maketrace: synthetic message traces with ground truth, from a configuration of
//! tracelets (paper §7.1.1). A tracelet is an ordered sequence of message steps with a
//! Gaussian delay before each; lanes of instances run side by side with a uniform think
//! time between instances; every message carries its path-instance id as the trace's
//! truth column, which `blackbox eval` scores against. Hosts may have bounded worker
//! pools with first-in, first-out queues, so that requests wait when clients outnumber
//! workers ([`config`] has the model).
//!
//! [`config`] reads the TOML, [`generate`] instantiates it, [`loss`] drops what a
//! capture would, [`write_text`] writes the text trace format.
#![deny(missing_docs)]

pub mod capture;
pub mod config;
pub mod generate;
pub mod loss;

use blackbox::trace::time::push_seconds;
use config::StepKind;
use generate::Generated;
use std::io::{self, Write};

/// Writes the trace in blackbox's text format, truth column included.
pub fn write_text(trace: &Generated, out: &mut impl Write) -> io::Result<()> {
    let mut line = String::with_capacity(96);
    for l in &trace.lines {
        line.clear();
        push_seconds(&mut line, l.time);
        line.push_str(match (l.kind, l.received) {
            (StepKind::Call, false) => " CALL_SENT ",
            (StepKind::Call, true) => " CALL_RECV ",
            (StepKind::Return, false) => " RET_SENT ",
            (StepKind::Return, true) => " RET_RECV ",
            (StepKind::Message, false) => " MSG_SENT ",
            (StepKind::Message, true) => " MSG_RECV ",
        });
        line.push_str(&trace.nodes[l.from as usize]);
        line.push(' ');
        line.push_str(&trace.nodes[l.to as usize]);
        match l.call {
            Some(id) => {
                use std::fmt::Write as _;
                let _ = write!(line, " c{id} ");
            }
            None => line.push_str(" - "),
        }
        line.push_str(&trace.tracelets[l.tracelet as usize]);
        line.push('-');
        line.push_str(&l.instance.to_string());
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}
