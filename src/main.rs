//! The `blackbox` command: parses flags, calls the library, maps errors to exit codes
//! (see [`blackbox::exit`]: 0 also when stdout closes early, 2 for bad input).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    blackbox::exit::finish("blackbox", cli::run(), |cause| {
        cause.is::<blackbox::trace::text::TraceError>()
            || cause.is::<blackbox::nesting::NestError>()
            || cause.is::<blackbox::convolution::ConvolveError>()
            || cause.is::<blackbox::eval::paths::EvalError>()
            || cause.is::<blackbox::eval::calls::TruthFileError>()
            || cause.is::<blackbox::capture::CaptureError>()
            || cause.is::<cli::Usage>()
    })
}
