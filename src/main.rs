//! The `blackbox` command: parses flags, calls the library, maps errors to exit codes.
//! Exit codes: 0 success (also when stdout is closed early, as by `| head`), 1 an
//! internal or output failure, 2 bad input or bad usage.

mod cli;

use std::io;
use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("blackbox: {err:#}");
            ExitCode::from(exit_code(&err))
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn exit_code(err: &anyhow::Error) -> u8 {
    let bad_input = err.chain().any(|cause| {
        cause.is::<blackbox::trace::text::TraceError>()
            || cause.is::<blackbox::nesting::NestError>()
            || cause.is::<blackbox::eval::paths::EvalError>()
            || cause.is::<blackbox::eval::calls::TruthFileError>()
    });
    if bad_input {
        2
    } else {
        1
    }
}
