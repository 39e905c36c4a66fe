//! How the command-line tools end, the same way for all three: an error is printed once,
//! prefixed with the tool's name; bad input or usage exits 2, output and the machine
//! (a file that cannot be created, a full disk, even while reading an input) 1; and a
//! reader that closes stdout early (`blackbox nest ... | head`) ends the run quietly
//! with 0. Owns which of the library's errors are the user's input or usage, in one
//! place ([`is_bad_input`]); nothing else.

use std::error::Error;
use std::io;
use std::process::ExitCode;

/// Exit code for bad input or bad usage (as clap uses for bad flags).
pub const BAD_INPUT: u8 = 2;

/// Maps a run's result to the process's exit code, printing the error if any.
/// `is_bad_input` tells, for each error in the chain, whether it is the user's input.
pub fn finish(
    tool: &str,
    result: anyhow::Result<()>,
    is_bad_input: impl Fn(&(dyn Error + 'static)) -> bool,
) -> ExitCode {
    let Err(err) = result else {
        return ExitCode::SUCCESS;
    };
    let broken_pipe = err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    });
    if broken_pipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("{tool}: {err:#}");
    // The machine's fault anywhere in the chain outweighs the input it was reading.
    let machine = err.chain().any(is_the_machines);
    ExitCode::from(if !machine && err.chain().any(is_bad_input) {
        BAD_INPUT
    } else {
        1
    })
}

/// Whether `cause` is the machine's fault, whatever input it met it on: a capture's
/// messages that could not be kept on disk (a full temporary directory).
fn is_the_machines(cause: &(dyn Error + 'static)) -> bool {
    use crate::capture::CaptureError;
    // InputError is transparent: its capture's error is not in the chain by itself.
    let capture = match cause.downcast_ref::<crate::input::InputError>() {
        Some(crate::input::InputError::Capture(error)) => Some(error),
        _ => cause.downcast_ref::<CaptureError>(),
    };
    matches!(capture, Some(CaptureError::Spill { .. }))
}

/// A request that cannot be carried out as asked: flags that contradict each other or
/// leave nothing to do (exit code 2, like bad input).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

/// Whether `cause`, one error of a chain, is about the user's input or usage: every
/// error the library gives for a file, a flag or a value it was handed. Errors of the
/// machine (a file that cannot be created, a full disk, a cluster's process lost) are
/// not.
pub fn is_bad_input(cause: &(dyn Error + 'static)) -> bool {
    cause.is::<Usage>()
        || cause
            .downcast_ref::<crate::capture::filter::FilterError>()
            .is_some_and(|e| {
                // A filter libpcap refuses is the user's; a libpcap missing, the machine's.
                matches!(e, crate::capture::filter::FilterError::Refused { .. })
            })
        || cause.is::<crate::trace::text::TraceError>()
        || cause.is::<crate::collect::manifest::ManifestError>()
        || cause.is::<crate::capture::CaptureError>()
        || cause
            .downcast_ref::<crate::input::InputError>()
            .is_some_and(|e| {
                !matches!(
                    e,
                    crate::input::InputError::Lost(_) | crate::input::InputError::Output(_)
                )
            })
        || cause
            .downcast_ref::<crate::nesting::NestError>()
            .is_some_and(|e| !matches!(e, crate::nesting::NestError::Workers(_)))
        || cause
            .downcast_ref::<crate::streaming::StreamError>()
            .is_some_and(|e| {
                !matches!(
                    e,
                    crate::streaming::StreamError::Nest(crate::nesting::NestError::Workers(_))
                )
            })
        || cause.is::<crate::nesting::explain::ExplainError>()
        || cause.is::<crate::convolution::ConvolveError>()
        || cause.is::<crate::eval::paths::EvalError>()
        || cause.is::<crate::eval::calls::TruthFileError>()
}
