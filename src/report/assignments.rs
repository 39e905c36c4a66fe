//! The parent given to every call pair, in the design's assignments format:
//! `sender receiver call_id call_time parent_sender parent_receiver parent_call_id`,
//! tab separated, `-` for roots, in call-time order, followed by an eighth column, the
//! confidence of the choice (0 to 1, three decimals). Any ground truth in the same
//! format, with or without the eighth column, can score the inference call by call.

use super::{NestReport, Render};
use crate::nesting::NO_PARENT;
use crate::trace::time::push_seconds;
use std::fmt::Write as _;
use std::io::{self, Write};

/// The assignments file.
pub struct Assignments;

impl Render for Assignments {
    fn render(&self, report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()> {
        let (trace, nesting) = (report.trace, report.nesting);
        let names = |i: usize| {
            let p = &nesting.pairs[i];
            (
                trace.node_name(p.caller),
                trace.node_name(p.callee),
                trace.call_id_text(p.call_id),
            )
        };
        let mut order: Vec<usize> = (0..nesting.pairs.len()).collect();
        order.sort_by(|&a, &b| {
            (nesting.pairs[a].caller_send, names(a)).cmp(&(nesting.pairs[b].caller_send, names(b)))
        });
        let mut line = String::with_capacity(160);
        for i in order {
            let (sender, receiver, id) = names(i);
            line.clear();
            for field in [sender, receiver, id] {
                line.push_str(field);
                line.push('\t');
            }
            push_seconds(&mut line, nesting.pairs[i].caller_send);
            let parent = nesting.parent[i];
            let (ps, pr, pid) = if parent == NO_PARENT {
                ("-", "-", "-")
            } else {
                names(parent as usize)
            };
            for field in [ps, pr, pid] {
                line.push('\t');
                line.push_str(field);
            }
            // Writing to a String cannot fail.
            let _ = write!(line, "\t{:.3}", nesting.confidence[i]);
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        Ok(())
    }
}
