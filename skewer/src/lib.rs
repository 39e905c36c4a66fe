//! skewer: adds per-node clock error to a text trace, or removes a known one (paper
//! §7.5.6). Each node's clock reads `t + offset + drift·(t − t0)` at true time `t`;
//! each time in a trace was taken at one node (a `_SENT` line at the sender, a `_RECV`
//! line at the receiver) and is moved by that node's error. Arithmetic is in integers
//! (drift in parts per 10¹⁵), so skewing and then inverting restores every time exactly.
#![deny(missing_docs)]

use blackbox::trace::text::parse_op;
use blackbox::trace::time::{parse_seconds, push_seconds, Nanos};
use blackbox::trace::End;
use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// Drift is held in parts per 10¹⁵: 1 ppm = 10⁹.
const DRIFT_SCALE: i128 = 1_000_000_000_000_000;

/// One node's clock error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Skew {
    /// Offset at `t0`, ns.
    pub offset: Nanos,
    /// Drift in parts per 10¹⁵ (ppm × 10⁹).
    pub drift: i64,
    /// A slow wander on top of the line: amplitude·sin(2π(t − t0)/period), ns (0: none).
    /// Real oscillators drift with temperature; a wander makes the drift not linear.
    pub wander: Nanos,
    /// Its period, ns.
    pub wander_period: Nanos,
}

impl Skew {
    /// The clock error at true time `t`.
    pub fn error_at(&self, t: Nanos, t0: Nanos) -> Nanos {
        // Exact integer rounding, halves away from zero.
        let num = i128::from(t - t0) * i128::from(self.drift);
        let half = DRIFT_SCALE / 2;
        let rounded = if num >= 0 {
            (num + half) / DRIFT_SCALE
        } else {
            (num - half) / DRIFT_SCALE
        };
        self.offset + rounded as Nanos + self.wander_at(t, t0)
    }

    fn wander_at(&self, t: Nanos, t0: Nanos) -> Nanos {
        if self.wander == 0 || self.wander_period <= 0 {
            return 0;
        }
        let phase = (t - t0) as f64 / self.wander_period as f64 * std::f64::consts::TAU;
        (self.wander as f64 * phase.sin()).round() as Nanos
    }

    /// The skewed reading of true time `t`.
    pub fn apply(&self, t: Nanos, t0: Nanos) -> Nanos {
        t + self.error_at(t, t0)
    }

    /// The true time whose skewed reading is `skewed`. When two nanoseconds read the
    /// same (a slow clock), the one on the coarser decimal grid is taken, since captures
    /// tick in microseconds; `None` if no nanosecond reads `skewed` (a fast clock skips
    /// some), in which case the nearest is returned by [`Skew::invert_nearest`].
    pub fn invert(&self, skewed: Nanos, t0: Nanos) -> Option<Nanos> {
        let guess = self.fixed_point(skewed, t0);
        (guess - 2..=guess + 2)
            .filter(|&t| self.apply(t, t0) == skewed)
            .max_by_key(|&t| (trailing_zeros(t), std::cmp::Reverse(t)))
    }

    /// Like [`Skew::invert`], falling back to the nanosecond that reads nearest.
    pub fn invert_nearest(&self, skewed: Nanos, t0: Nanos) -> Nanos {
        self.invert(skewed, t0).unwrap_or_else(|| {
            let guess = self.fixed_point(skewed, t0);
            (guess - 2..=guess + 2)
                .min_by_key(|&t| (self.apply(t, t0) - skewed).abs())
                .expect("a non-empty range")
        })
    }

    fn fixed_point(&self, skewed: Nanos, t0: Nanos) -> Nanos {
        let mut t = skewed - self.error_at(skewed, t0);
        for _ in 0..4 {
            t = skewed - self.error_at(t, t0);
        }
        t
    }
}

fn trailing_zeros(t: Nanos) -> u32 {
    if t == 0 {
        return 19;
    }
    let mut n = 0;
    let mut v = t;
    while v % 10 == 0 {
        v /= 10;
        n += 1;
    }
    n
}

/// The skew of every node, and the reference time `t0` of the drifts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SkewTable {
    /// Reference time of the drifts, ns since the epoch.
    pub t0: Nanos,
    /// Per node; nodes not listed keep their clocks.
    pub nodes: BTreeMap<String, Skew>,
}

/// A trace or table that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SkewError {
    /// Unreadable.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// A bad line.
    #[error("{}:{line}: {problem}: `{text}`", path.display())]
    BadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: u64,
        /// The line.
        text: String,
        /// What is wrong.
        problem: String,
    },
}

/// Parses drift in ppm (decimal, up to 9 fractional digits) into parts per 10¹⁵.
pub fn parse_drift_ppm(text: &str) -> Result<i64, String> {
    parse_seconds(text.as_bytes()).map_err(|e| format!("drift `{text}` ppm: {e}"))
}

fn drift_text(drift: i64) -> String {
    let mut s = String::new();
    push_seconds(&mut s, drift);
    s
}

impl SkewTable {
    /// Writes the table: `# t0 SECONDS`, then `node<TAB>offset_s<TAB>drift_ppm` per node
    /// (and `<TAB>wander_s<TAB>period_s` when it wanders), exact, so that reading it
    /// back gives the same skews.
    pub fn write(&self, out: &mut impl Write) -> io::Result<()> {
        let mut t0 = String::new();
        push_seconds(&mut t0, self.t0);
        writeln!(out, "# skewer table: clock = t + offset + drift·(t − t0)")?;
        writeln!(out, "# t0 {t0}")?;
        writeln!(out, "# node\toffset_s\tdrift_ppm")?;
        for (node, skew) in &self.nodes {
            let mut offset = String::new();
            push_seconds(&mut offset, skew.offset);
            write!(out, "{node}\t{offset}\t{}", drift_text(skew.drift))?;
            if skew.wander != 0 {
                let (mut wander, mut period) = (String::new(), String::new());
                push_seconds(&mut wander, skew.wander);
                push_seconds(&mut period, skew.wander_period);
                write!(out, "\t{wander}\t{period}")?;
            }
            writeln!(out)?;
        }
        Ok(())
    }

    /// Reads a table written by [`SkewTable::write`].
    pub fn read(path: &Path, reader: impl BufRead) -> Result<SkewTable, SkewError> {
        let mut table = SkewTable::default();
        let mut have_t0 = false;
        for (n, line) in reader.lines().enumerate() {
            let line = line.map_err(|source| SkewError::Io {
                path: path.into(),
                source,
            })?;
            let bad = |problem: String| SkewError::BadLine {
                path: path.into(),
                line: n as u64 + 1,
                text: line.clone(),
                problem,
            };
            if let Some(t0) = line.strip_prefix("# t0 ") {
                table.t0 =
                    parse_seconds(t0.trim().as_bytes()).map_err(|e| bad(format!("bad t0: {e}")))?;
                have_t0 = true;
                continue;
            }
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let f: Vec<&str> = line.split('\t').collect();
            if f.len() != 3 && f.len() != 5 {
                return Err(bad(format!(
                    "expected node<TAB>offset_s<TAB>drift_ppm[<TAB>wander_s<TAB>period_s], found {} fields",
                    f.len()
                )));
            }
            let offset =
                parse_seconds(f[1].as_bytes()).map_err(|e| bad(format!("bad offset: {e}")))?;
            let drift = parse_drift_ppm(f[2]).map_err(bad)?;
            let (wander, wander_period) = if f.len() == 5 {
                (
                    parse_seconds(f[3].as_bytes()).map_err(|e| bad(format!("bad wander: {e}")))?,
                    parse_seconds(f[4].as_bytes()).map_err(|e| bad(format!("bad period: {e}")))?,
                )
            } else {
                (0, 0)
            };
            if wander != 0 && wander_period <= 0 {
                return Err(bad("a wander needs a positive period".into()));
            }
            table.nodes.insert(
                f[0].to_owned(),
                Skew {
                    offset,
                    drift,
                    wander,
                    wander_period,
                },
            );
        }
        if !have_t0 && table.nodes.values().any(|s| s.drift != 0) {
            return Err(SkewError::BadLine {
                path: path.into(),
                line: 0,
                text: String::new(),
                problem: "drifts need a `# t0 SECONDS` line".into(),
            });
        }
        Ok(table)
    }
}

/// What [`rewrite`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rewritten {
    /// Lines whose time was moved.
    pub moved: u64,
    /// Lines of nodes the table does not list, or blank and comment lines, copied as they were.
    pub copied: u64,
    /// Inverting only: times that no true nanosecond reads exactly (nearest taken).
    pub inexact: u64,
}

/// The lines of a text trace, kept as read so the rest of each line is copied verbatim.
pub struct TraceLines {
    lines: Vec<String>,
    path: PathBuf,
}

impl TraceLines {
    /// Reads a trace.
    pub fn read(path: &Path, reader: impl BufRead) -> Result<TraceLines, SkewError> {
        let lines = reader
            .lines()
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| SkewError::Io {
                path: path.into(),
                source,
            })?;
        Ok(TraceLines {
            lines,
            path: path.into(),
        })
    }

    /// The earliest time in the trace: the default `t0`.
    pub fn earliest(&self) -> Result<Option<Nanos>, SkewError> {
        let mut earliest = None;
        for (n, line) in self.lines.iter().enumerate() {
            if let Some((t, ..)) = self.fields(n, line)? {
                earliest = Some(earliest.map_or(t, |e: Nanos| e.min(t)));
            }
        }
        Ok(earliest)
    }

    /// Every node named in the trace, sorted (so random skews never depend on line order).
    pub fn nodes(&self) -> Result<Vec<String>, SkewError> {
        let mut nodes = std::collections::BTreeSet::new();
        for (n, line) in self.lines.iter().enumerate() {
            if self.fields(n, line)?.is_some() {
                let f: Vec<&str> = line.split_whitespace().collect();
                nodes.insert(f[2].to_owned());
                nodes.insert(f[3].to_owned());
            }
        }
        Ok(nodes.into_iter().collect())
    }

    /// (time, node the time was taken at, where the time field ends) of a trace line.
    fn fields<'a>(
        &self,
        n: usize,
        line: &'a str,
    ) -> Result<Option<(Nanos, &'a str, usize)>, SkewError> {
        let content = line.split('#').next().unwrap_or("");
        let f: Vec<&str> = content.split_whitespace().collect();
        if f.is_empty() {
            return Ok(None);
        }
        let bad = |problem: String| SkewError::BadLine {
            path: self.path.clone(),
            line: n as u64 + 1,
            text: line.to_owned(),
            problem,
        };
        if f.len() < 5 {
            return Err(bad(format!(
                "expected 5 fields (timestamp op sender receiver call-id), found {}",
                f.len()
            )));
        }
        let t = parse_seconds(f[0].as_bytes())
            .map_err(|e| bad(format!("bad timestamp `{}`: {e}", f[0])))?;
        let (_, end) =
            parse_op(f[1].as_bytes()).ok_or_else(|| bad(format!("unknown op `{}`", f[1])))?;
        let node = if end == End::Sent { f[2] } else { f[3] };
        let start = line.find(f[0]).expect("the field is in the line");
        Ok(Some((t, node, start + f[0].len())))
    }

    /// Writes the trace with each time moved by its node's skew (`invert`: removed).
    pub fn rewrite(
        &self,
        table: &SkewTable,
        invert: bool,
        out: &mut impl Write,
    ) -> Result<Rewritten, anyhow::Error> {
        let mut done = Rewritten::default();
        for (n, line) in self.lines.iter().enumerate() {
            let Some((t, node, time_end)) = self.fields(n, line)? else {
                writeln!(out, "{line}")?;
                done.copied += 1;
                continue;
            };
            let Some(skew) = table.nodes.get(node) else {
                writeln!(out, "{line}")?;
                done.copied += 1;
                continue;
            };
            let moved = if invert {
                skew.invert(t, table.t0).unwrap_or_else(|| {
                    done.inexact += 1;
                    skew.invert_nearest(t, table.t0)
                })
            } else {
                skew.apply(t, table.t0)
            };
            let mut text = String::with_capacity(line.len() + 4);
            let start = time_end - line[..time_end].trim_start().len();
            text.push_str(&line[..start]);
            push_seconds(&mut text, moved);
            text.push_str(&line[time_end..]);
            writeln!(out, "{text}")?;
            done.moved += 1;
        }
        Ok(done)
    }
}

/// Skews (or, `invert`, de-skews) one host's capture into `output`, in the same
/// container: every packet's time is moved by the host's clock error. Bytes and lengths
/// stay as they were.
pub fn skew_capture(
    input: &Path,
    output: &Path,
    skew: &Skew,
    t0: Nanos,
    invert: bool,
) -> Result<blackbox::capture::write::Rewritten, blackbox::capture::CaptureError> {
    use blackbox::capture::write::{rewrite_times, Container};
    rewrite_times(input, output, Container::of(input), |_, t| {
        if invert {
            skew.invert_nearest(t, t0)
        } else {
            skew.apply(t, t0)
        }
    })
}

/// The earliest packet time of a capture (the default `t0` of a capture's skew), or
/// `None` for a capture without packets.
pub fn earliest_packet(path: &Path) -> Result<Option<Nanos>, blackbox::capture::CaptureError> {
    let file = std::fs::File::open(path).map_err(|source| blackbox::capture::CaptureError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut stats = blackbox::capture::stats::FileStats::default();
    let mut earliest: Option<Nanos> = None;
    blackbox::capture::file::read_frames(path, file, &mut stats, |frame, _| {
        earliest = Some(earliest.map_or(frame.time, |e| e.min(frame.time)));
    })?;
    Ok(earliest)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PPM: i64 = 1_000_000_000;

    #[test]
    fn skew_adds_offset_and_drift() {
        let s = Skew {
            offset: 5_000_000,
            drift: 40 * PPM,
            ..Default::default()
        };
        assert_eq!(
            s.apply(1_000_000_000, 0),
            1_000_000_000 + 5_000_000 + 40_000
        );
        assert_eq!(s.apply(0, 0), 5_000_000);
    }

    #[test]
    fn inversion_is_exact_for_fast_and_slow_clocks_on_a_microsecond_grid() {
        for drift in [
            -250 * PPM,
            -40 * PPM,
            -1,
            0,
            3 * PPM / 7,
            40 * PPM,
            250 * PPM,
        ] {
            let s = Skew {
                offset: -45_700_000,
                drift,
                ..Default::default()
            };
            for t in (0..2_000).map(|k| 1_700_000_000_000_000_000 + k * 1_234_567_000) {
                assert_eq!(
                    s.invert(
                        s.apply(t, 1_700_000_000_000_000_000),
                        1_700_000_000_000_000_000
                    ),
                    Some(t),
                    "drift {drift}, t {t}"
                );
            }
        }
    }

    #[test]
    fn tables_round_trip_exactly() {
        let mut table = SkewTable {
            t0: 1_700_000_000_123_456_789,
            nodes: BTreeMap::new(),
        };
        table.nodes.insert(
            "web".into(),
            Skew {
                offset: -45_700_000,
                drift: -40_123_456_789,
                ..Default::default()
            },
        );
        table.nodes.insert(
            "db".into(),
            Skew {
                offset: 3,
                drift: 0,
                ..Default::default()
            },
        );
        let mut text = Vec::new();
        table.write(&mut text).unwrap();
        assert_eq!(SkewTable::read(Path::new("t"), &text[..]).unwrap(), table);
    }
}
