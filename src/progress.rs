//! Progress on stderr while input files are read: one bar over the bytes of all of
//! them, with the throughput and the time left. It is drawn only when stderr is a
//! terminal (indicatif hides it otherwise), so piped or redirected output never holds
//! it. Owns the bar; the readers wrap their files in it and know nothing else of it.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::Read;
use std::path::Path;

/// A byte bar over a set of files (hidden unless asked for and on a terminal).
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for reading `paths`, labelled `what`, drawn when `show` and stderr is a
    /// terminal.
    pub fn reading<P: AsRef<Path>>(what: &str, paths: &[P], show: bool) -> Progress {
        let total: u64 = paths
            .iter()
            .filter_map(|p| std::fs::metadata(p.as_ref()).ok())
            .map(|m| m.len())
            .sum();
        Progress::over(what, total, show)
    }

    /// A bar over `total` bytes, labelled `what`, drawn when `show` and stderr is a
    /// terminal; the reader tells it what it read ([`Progress::advance`]).
    pub fn over(what: &str, total: u64, show: bool) -> Progress {
        if !show || total == 0 {
            return Progress::hidden();
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}, {eta} left",
            )
            .expect("the template is valid")
            .progress_chars("=> "),
        );
        bar.set_message(what.to_string());
        Progress { bar }
    }

    /// No bar at all.
    pub fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
        }
    }

    /// `reader`, advancing the bar by what is read from it.
    pub fn wrap<R: Read>(&self, reader: R) -> impl Read {
        self.bar.wrap_read(reader)
    }

    /// Advances the bar by `bytes` read.
    pub fn advance(&self, bytes: u64) {
        self.bar.inc(bytes);
    }

    /// Removes the bar once reading is done.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
