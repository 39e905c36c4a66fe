//! SVG pictures of the dot graphs, drawn by Graphviz's `dot` through graphviz-rust's
//! exec. Owns finding out whether `dot` is there and saying how to get it; the graphs
//! themselves come from [`super::dot`] and [`super::paths`].

use graphviz_rust::cmd::{CommandArg, Format};
use std::io;
use std::path::{Path, PathBuf};

/// What became of the pictures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drawn {
    /// One SVG beside each dot file.
    Pictures(Vec<PathBuf>),
    /// Graphviz's `dot` is not installed; the dot files are all there is.
    NoGraphviz,
}

/// How to get Graphviz, for the message when it is missing.
pub const INSTALL_HINT: &str =
    "Graphviz's `dot` is not installed (apt-get install graphviz, brew install graphviz, or https://graphviz.org/download/)";

/// Draws every dot file as an SVG beside it (`pattern-001.dot` → `pattern-001.svg`).
pub fn draw(dot_files: &[PathBuf]) -> io::Result<Drawn> {
    let mut pictures = Vec::with_capacity(dot_files.len());
    for dot in dot_files {
        let text = std::fs::read_to_string(dot)?;
        let svg = match graphviz_rust::exec_dot(text, vec![CommandArg::Format(Format::Svg)]) {
            Ok(svg) => svg,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Drawn::NoGraphviz),
            Err(e) => {
                return Err(io::Error::other(format!(
                    "dot could not draw {}: {}",
                    dot.display(),
                    e.to_string().trim()
                )))
            }
        };
        let picture = dot.with_extension("svg");
        std::fs::write(&picture, svg)?;
        pictures.push(picture);
    }
    Ok(Drawn::Pictures(pictures))
}

/// Draws the dot files and says on stderr what came of it.
pub fn draw_and_tell(dot_files: &[PathBuf], dir: &Path) -> io::Result<()> {
    match draw(dot_files)? {
        Drawn::Pictures(pictures) => {
            let noun = if pictures.len() == 1 {
                "picture"
            } else {
                "pictures"
            };
            eprintln!("wrote {} SVG {noun} to {}", pictures.len(), dir.display())
        }
        Drawn::NoGraphviz => eprintln!(
            "note: {INSTALL_HINT}; the .dot files are in {}",
            dir.display()
        ),
    }
    Ok(())
}
