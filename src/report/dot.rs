//! Graphviz dot, one graph per pattern, in the style of the paper's Figure 8: the first
//! edge carries the pattern's count and total latency, each node its name, mean latency
//! (children included) and own time, each further edge the mean call delay, every
//! number with its unit and what it is; an edge whose messages spent time in transit
//! (first byte to last) says how long, and how much of it TCP held back and why. What
//! adds the most latency (a node's own time or an edge's transit,
//! [`super::own_time::most_added`]) is drawn in red.

use super::own_time::most_added;
use super::{NestReport, Render};
use crate::nesting::Pattern;
use crate::trace::time::human_duration;
use graphviz_rust::dot_structures::{
    Attribute, Edge, EdgeTy, Graph, Id, Node, NodeId, Stmt, Vertex,
};
use graphviz_rust::printer::{DotPrinter, PrinterContext};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The dot graph of the pattern at one rank (1-based).
pub struct Dot {
    /// Which ranked pattern.
    pub rank: usize,
}

impl Render for Dot {
    fn render(&self, report: &NestReport<'_>, out: &mut dyn Write) -> io::Result<()> {
        let Some(&index) = report.ranked.get(self.rank.wrapping_sub(1)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no pattern at rank {}", self.rank),
            ));
        };
        let graph = graph(report, &report.nesting.patterns[index], self.rank);
        let mut context = PrinterContext::default();
        context.with_semi();
        out.write_all(graph.print(&mut context).as_bytes())?;
        out.write_all(b"\n")
    }
}

/// Writes `pattern-NNN.dot` for every ranked pattern into `dir` (created if missing),
/// returning the paths written.
pub fn write_dir(report: &NestReport<'_>, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let width = report.ranked.len().to_string().len().max(3);
    (1..=report.ranked.len())
        .map(|rank| {
            let path = dir.join(format!("pattern-{rank:0width$}.dot"));
            let mut file = io::BufWriter::new(std::fs::File::create(&path)?);
            Dot { rank }.render(report, &mut file)?;
            file.flush()?;
            Ok(path)
        })
        .collect()
}

fn graph(report: &NestReport<'_>, pattern: &Pattern, rank: usize) -> Graph {
    let name = |id| report.trace.node_name(id);
    let mut stmts = vec![
        Stmt::Attribute(attr("label", &format!("#{rank}  {}", pattern.signature))),
        Stmt::Attribute(attr("labelloc", "t")),
        Stmt::Node(Node::new(
            node_id("caller"),
            vec![
                attr("label", name(pattern.positions[0].caller)),
                attr("shape", "plaintext"),
            ],
        )),
    ];
    let own = pattern.mean_own_times();
    let most = most_added(pattern);
    let hot = (!most.transit).then_some(most.position);
    for (i, position) in pattern.positions.iter().enumerate() {
        let latency = human_duration(position.latencies.summary().mean);
        let mut label = format!(
            "{}\n{latency}, {} own",
            name(position.node),
            human_duration(own[i])
        );
        let mut attributes = Vec::new();
        if hot == Some(i) {
            label.push_str("\nadds the most");
            attributes.extend([
                attr("color", "#d93025"),
                attr("fontcolor", "#d93025"),
                attr("penwidth", "2"),
                attr("style", "filled"),
                attr("fillcolor", "#fdecea"),
            ]);
        }
        attributes.insert(0, attr("label", &label));
        stmts.push(Stmt::Node(Node::new(node_id(&format!("n{i}")), attributes)));
    }
    let first = format!(
        "{} request{}, {} in all",
        pattern.count(),
        if pattern.count() == 1 { "" } else { "s" },
        human_duration(pattern.total_latency() as f64)
    );
    let hot_edge = |at: usize, label: &mut String| -> Vec<Attribute> {
        transit_label(&pattern.positions[at], pattern.count(), label);
        if !(most.transit && most.position == at) {
            return Vec::new();
        }
        label.push_str("\nadds the most");
        vec![
            attr("color", "#d93025"),
            attr("fontcolor", "#d93025"),
            attr("penwidth", "2"),
        ]
    };
    let mut first = first;
    let red = hot_edge(0, &mut first);
    stmts.push(edge_with("caller", "n0", &first, red));
    for (i, position) in pattern.positions.iter().enumerate() {
        for &child in &position.children {
            let position = &pattern.positions[child as usize];
            let mut delay = match position.through_broker {
                // The asynchronous hop: delivered after its time in the broker.
                true => {
                    let queued = position.call_delays.summary();
                    format!(
                        "⇒ {} in the broker (p50; p99 {})",
                        human_duration(queued.p50 as f64),
                        human_duration(queued.p99 as f64)
                    )
                }
                false => format!(
                    "called after {}",
                    human_duration(position.call_delays.summary().mean)
                ),
            };
            // A call its parent did not wait for is marked: the signature cannot say.
            if !position.through_broker && 2 * position.unawaited > position.latencies.len() as u64
            {
                delay.push_str(", not awaited");
            }
            let mut red = hot_edge(child as usize, &mut delay);
            if position.through_broker {
                red.push(attr("style", "dashed"));
            }
            stmts.push(edge_with(
                &format!("n{i}"),
                &format!("n{child}"),
                &delay,
                red,
            ));
        }
    }
    Graph::DiGraph {
        id: Id::Escaped(quote(&format!("pattern {rank}"))),
        strict: false,
        stmts,
    }
}

/// Adds the edge's time in transit to its label, where there was any worth a line:
/// "33.01 ms in transit, 33.00 held by TCP (Nagle + delayed ACK) in 78%".
fn transit_label(position: &crate::nesting::patterns::Position, count: u64, label: &mut String) {
    let transit = position.mean_transit();
    if transit < 1_000.0 {
        return;
    }
    label.push_str(&format!("\n{} in transit", human_duration(transit)));
    if let Some((why, held)) = position.held_most() {
        let share = 100.0 * held as f64 / count.max(1) as f64;
        label.push_str(&format!(
            ", {} held by TCP ({}) in {share:.0}%",
            human_duration(position.held_sum / count.max(1) as f64),
            why.short()
        ));
    }
}

/// A plain dot node id.
pub(super) fn node_id(id: &str) -> NodeId {
    NodeId(Id::Plain(id.to_owned()), None)
}

/// A `key="value"` attribute, quoted.
pub(super) fn attr(key: &str, value: &str) -> Attribute {
    Attribute(Id::Plain(key.to_owned()), Id::Escaped(quote(value)))
}

/// A labelled edge between two node ids.
pub(super) fn edge(from: &str, to: &str, label: &str) -> Stmt {
    edge_with(from, to, label, Vec::new())
}

/// A labelled edge with more attributes.
fn edge_with(from: &str, to: &str, label: &str, more: Vec<Attribute>) -> Stmt {
    let mut attributes = vec![attr("label", label)];
    attributes.extend(more);
    Stmt::Edge(Edge {
        ty: EdgeTy::Pair(Vertex::N(node_id(from)), Vertex::N(node_id(to))),
        attributes,
    })
}

/// A dot string literal; `\n` becomes dot's centred line break.
pub(super) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
