//! Output of the convolution algorithm: the ranked table of paths with each hop's delays,
//! the design's JSON, and Graphviz dot in the style of the paper's Figure 9 (each edge
//! labelled with its delays, most frequent first, and its message count).

use super::dot::{attr, edge, node_id, quote};
use super::seconds;
use crate::convolution::{Convolution, ConvolveOptions, PathPattern};
use crate::trace::time::human_duration;
use crate::trace::Trace;
use graphviz_rust::dot_structures::{Graph, Id, Node, Stmt};
use graphviz_rust::printer::{DotPrinter, PrinterContext};
use serde::Serialize;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A hop's delay: its median, then, where its correlation spiked more than once, the
/// spikes, most frequent first (`30.00 ms`; `182.0 s median; spikes 219.4 s | 4.368 s`).
fn delays_text(edge: &crate::convolution::Edge) -> String {
    let spikes: Vec<String> = edge
        .delays
        .iter()
        .map(|d| human_duration(d.delay as f64))
        .collect();
    let Some(median) = edge.median.map(|m| human_duration(m as f64)) else {
        return spikes.join(" | ");
    };
    match spikes.len() {
        0 | 1 => median,
        _ => format!("{median} median; spikes {}", spikes.join(" | ")),
    }
}

/// `a -> b -[30.00 ms]-> c`: the path with the delay at each sender.
fn path_text(trace: &Trace, path: &PathPattern) -> String {
    let mut s = trace.node_name(path.edges[0].from).to_owned();
    for e in &path.edges {
        if e.delays.is_empty() {
            s.push_str(" -> ");
        } else {
            s.push_str(&format!(" -[{}]-> ", delays_text(e)));
        }
        s.push_str(trace.node_name(e.to));
    }
    s
}

/// Writes the ranked table (`top` paths at most).
pub fn write_table(
    trace: &Trace,
    result: &Convolution,
    top: Option<usize>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let shown = top.unwrap_or(usize::MAX).min(result.paths.len());
    writeln!(
        out,
        "rank  count  path, with the delay at each node before it sends on"
    )?;
    for (rank, p) in result.paths.iter().take(shown).enumerate() {
        writeln!(
            out,
            "{:>4}  {:>5}  {}",
            rank + 1,
            p.count(),
            path_text(trace, p)
        )?;
    }
    let hidden = result.paths.len() - shown;
    if hidden > 0 {
        writeln!(
            out,
            "({hidden} more path{} not shown; see --top)",
            if hidden == 1 { "" } else { "s" }
        )?;
    }
    Ok(())
}

/// Names shown in a summary line before the rest are only counted: real mail has
/// hundreds of roots (easy-ham-1: over 500 hosts that only send), which made the
/// first line of the summary many screens long.
const NAMES_SHOWN: usize = 8;

/// `a, b, c`, or the first [`NAMES_SHOWN`] and how many more.
fn names_text(names: &[&str]) -> String {
    match names.len() > NAMES_SHOWN {
        true => format!(
            "{}, and {} more (--json lists them all)",
            names[..NAMES_SHOWN].join(", "),
            names.len() - NAMES_SHOWN
        ),
        false => names.join(", "),
    }
}

/// Writes the summary for stderr.
pub fn write_summary(trace: &Trace, result: &Convolution, out: &mut dyn Write) -> io::Result<()> {
    let s = &result.stats;
    let name = |r: &crate::trace::NodeId| trace.node_name(*r);
    let by_sends = &result.roots_by_unexplained_sends;
    let roots: Vec<&str> = result
        .roots
        .iter()
        .filter(|r| !by_sends.contains(r))
        .map(name)
        .collect();
    writeln!(
        out,
        "read {} messages; roots: {}; {} correlations",
        s.messages,
        names_text(&roots),
        s.correlations
    )?;
    super::summary::write_brokers(&trace.stats.brokers, out)?;
    if !by_sends.is_empty() {
        let names: Vec<&str> = by_sends.iter().map(name).collect();
        writeln!(
            out,
            "paths also start where a node's sends no arrival explains ({} messages): {}",
            s.unexplained_sends,
            names_text(&names)
        )?;
    }
    writeln!(
        out,
        "skipped: {} edges under --min-count, {} spikes at negative delays, {} spikes no stronger than chance; stopped: {} paths at a repeated hop, {} at the depth limit",
        s.edges_below_min_count,
        s.negative_delay_spikes,
        s.coincidental_spikes,
        s.repeated_edges,
        s.depth_limited
    )?;
    if s.budget_cut > 0 {
        writeln!(
            out,
            "warning: the search reached --max-correlations and cut {} paths short; the paths are incomplete (raise the limit, a coarser --quantum or a higher --min-count)",
            s.budget_cut
        )?;
    }
    Ok(())
}

#[derive(Serialize)]
struct Document<'a> {
    algorithm: &'static str,
    input: &'a crate::convolution::ConvolveStats,
    options: OptionsOut,
    roots: Vec<&'a str>,
    patterns: Vec<PathOut<'a>>,
}

#[derive(Serialize)]
struct OptionsOut {
    quantum_s: f64,
    max_delay_s: f64,
    spike_sigma: f64,
    gap_sigma: f64,
    variance_s: f64,
    min_count: u64,
    max_depth: usize,
    max_repeats: usize,
    max_correlations: u64,
}

#[derive(Serialize)]
struct PathOut<'a> {
    rank: usize,
    signature: String,
    count: u64,
    edges: Vec<EdgeOut<'a>>,
}

#[derive(Serialize)]
struct EdgeOut<'a> {
    from: &'a str,
    to: &'a str,
    count: u64,
    /// `None` on a root's hop.
    median_delay_s: Option<f64>,
    delays_s: Vec<DelayOut>,
}

#[derive(Serialize)]
struct DelayOut {
    delay: f64,
    count: u64,
}

/// Writes the design's JSON for convolution.
pub fn write_json(
    trace: &Trace,
    result: &Convolution,
    options: &ConvolveOptions,
    out: &mut dyn Write,
) -> io::Result<()> {
    let document = Document {
        algorithm: "convolution",
        input: &result.stats,
        options: OptionsOut {
            quantum_s: seconds(options.quantum as f64),
            max_delay_s: seconds(options.max_delay as f64),
            spike_sigma: options.spike_sigma,
            gap_sigma: options.gap_sigma,
            variance_s: seconds(options.variance.unwrap_or(options.quantum) as f64),
            min_count: options.min_count,
            max_depth: options.max_depth,
            max_repeats: options.max_repeats,
            max_correlations: options.max_correlations,
        },
        roots: result.roots.iter().map(|&r| trace.node_name(r)).collect(),
        patterns: result
            .paths
            .iter()
            .enumerate()
            .map(|(rank, p)| PathOut {
                rank: rank + 1,
                signature: p.signature(trace),
                count: p.count(),
                edges: p
                    .edges
                    .iter()
                    .map(|e| EdgeOut {
                        from: trace.node_name(e.from),
                        to: trace.node_name(e.to),
                        count: e.count,
                        median_delay_s: e.median.map(|m| seconds(m as f64)),
                        delays_s: e
                            .delays
                            .iter()
                            .map(|d| DelayOut {
                                delay: seconds(d.delay as f64),
                                count: d.count,
                            })
                            .collect(),
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &document)?;
    out.write_all(b"\n")
}

/// Writes `path-NNN.dot` for the first `top` paths into `dir`, returning the paths.
pub fn write_dot_dir(
    trace: &Trace,
    result: &Convolution,
    top: Option<usize>,
    dir: &Path,
) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let shown = top.unwrap_or(usize::MAX).min(result.paths.len());
    let width = shown.to_string().len().max(3);
    (0..shown)
        .map(|i| {
            let file = dir.join(format!("path-{:0width$}.dot", i + 1));
            let mut context = PrinterContext::default();
            context.with_semi();
            let text = dot_graph(trace, &result.paths[i], i + 1).print(&mut context);
            std::fs::write(&file, text + "\n")?;
            Ok(file)
        })
        .collect()
}

fn dot_graph(trace: &Trace, path: &PathPattern, rank: usize) -> Graph {
    let mut stmts = vec![
        Stmt::Attribute(attr(
            "label",
            &format!("#{rank}  {}", path.signature(trace)),
        )),
        Stmt::Attribute(attr("labelloc", "t")),
        Stmt::Attribute(attr("rankdir", "LR")),
        Stmt::Node(Node::new(
            node_id("v0"),
            vec![attr("label", trace.node_name(path.edges[0].from))],
        )),
    ];
    for (i, e) in path.edges.iter().enumerate() {
        stmts.push(Stmt::Node(Node::new(
            node_id(&format!("v{}", i + 1)),
            vec![attr("label", trace.node_name(e.to))],
        )));
        let label = if e.delays.is_empty() {
            format!("({})", e.count)
        } else {
            format!("{}\n({})", delays_text(e), e.count)
        };
        stmts.push(edge(&format!("v{i}"), &format!("v{}", i + 1), &label));
    }
    Graph::DiGraph {
        id: Id::Escaped(quote(&format!("path {rank}"))),
        strict: false,
        stmts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convolution::{Delay, Edge};
    use crate::trace::time::Nanos;
    use crate::trace::NodeId;

    fn hop(median: Option<Nanos>, spikes: &[Nanos]) -> Edge {
        Edge {
            from: NodeId(0),
            to: NodeId(1),
            count: 10,
            delays: spikes
                .iter()
                .map(|&delay| Delay { delay, count: 5 })
                .collect(),
            median,
        }
    }

    #[test]
    fn a_hop_shows_its_median_and_its_spikes_only_where_there_are_several() {
        assert_eq!(delays_text(&hop(None, &[])), "");
        assert_eq!(
            delays_text(&hop(Some(20_010_000), &[20_020_000])),
            "20.01 ms"
        );
        assert_eq!(
            delays_text(&hop(
                Some(182_000_000_000),
                &[219_400_000_000, 4_368_000_000]
            )),
            "182.0 s median; spikes 219.4 s | 4.368 s"
        );
    }

    #[test]
    fn a_summary_names_a_few_roots_and_counts_the_rest() {
        let names: Vec<String> = (0..10).map(|i| format!("n{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(names_text(&names[..2]), "n0, n1");
        assert_eq!(
            names_text(&names),
            "n0, n1, n2, n3, n4, n5, n6, n7, and 2 more (--json lists them all)"
        );
    }
}
