//! The `blackbox` command line: [`args`] parses it, [`commands`] runs each command on
//! the library and says where its results go.

mod args;
mod commands;

use anyhow::Result;
use args::{Cli, Command};
use clap::Parser;

/// Parses the command line and runs the command.
pub fn run() -> Result<()> {
    match Cli::parse().command {
        Command::Nest(args) => commands::nest(args),
        Command::Eval(args) => commands::eval(args),
        Command::Convolve(args) => commands::convolve(args),
        Command::Diff(args) => commands::diff(args),
        Command::Records(args) => commands::records(args),
        Command::Align(args) => commands::align(args),
    }
}
