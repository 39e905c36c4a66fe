//! The `blackbox` command: parses flags, calls the library, maps errors to exit codes
//! (see [`blackbox::exit`]: 0 also when stdout closes early, 2 for bad input).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    blackbox::exit::finish("blackbox", cli::run(), blackbox::exit::is_bad_input)
}
