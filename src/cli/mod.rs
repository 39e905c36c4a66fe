//! The `blackbox` command line: [`args`] parses it (with [`reading`], the flags of how
//! inputs are read), [`workers`] says where the work runs,
//! [`commands`] runs each command on the library and says where its results go;
//! [`collect`] is `blackbox collect`, flags to table.

mod args;
mod collect;
mod commands;
mod reading;
mod workers;

use anyhow::Result;
use args::{Cli, Command};
use clap::Parser;

/// Parses the command line and runs the command.
pub fn run() -> Result<()> {
    let mut cli = Cli::parse();
    // Directories that collect wrote become their captures, before anything reads the
    // files (a cluster's processes too).
    match &mut cli.command {
        Command::Nest(args) => {
            reading::expand_collected(&mut args.input.files, &mut args.input.capture)?
        }
        Command::Eval(args) => {
            reading::expand_collected(&mut args.input.files, &mut args.input.capture)?
        }
        Command::Convolve(args) => {
            reading::expand_collected(&mut args.input.files, &mut args.input.capture)?
        }
        Command::Records(args) => reading::expand_collected(&mut args.files, &mut args.capture)?,
        Command::Align(args) => reading::expand_collected(&mut args.files, &mut args.capture)?,
        Command::Diff(args) => {
            for files in [&mut args.files, &mut args.before, &mut args.after] {
                reading::expand_collected(files, &mut args.capture)?;
            }
        }
        Command::Collect(_) => {}
    }
    // Decided once, before any stage starts rayon's pool.
    // The files whose captures a process of a cluster reads where they are (diff's two
    // sets are read by the first process).
    let algorithm = match &cli.command {
        Command::Nest(args) => Some((&args.algorithm, &args.input.files[..])),
        Command::Eval(args) => Some((&args.algorithm, &args.input.files[..])),
        Command::Diff(args) => Some((&args.algorithm, &[][..])),
        _ => None,
    };
    let engine = match algorithm
        .map(|(algorithm, files)| algorithm.start_workers(files))
        .transpose()?
    {
        Some(workers::Role::Lent) => return Ok(()),
        Some(workers::Role::Run(engine)) => engine,
        None => None,
    };
    let result = run_command(cli.command);
    // The other processes of a cluster end when this one closes the dataflow.
    if let Some(engine) = engine {
        let finished = engine.finish();
        result?;
        finished?;
        return Ok(());
    }
    result
}

fn run_command(command: Command) -> Result<()> {
    match command {
        Command::Nest(args) => commands::nest(args),
        Command::Eval(args) => commands::eval(args),
        Command::Convolve(args) => commands::convolve(args),
        Command::Diff(args) => commands::diff(args),
        Command::Records(args) => commands::records(args),
        Command::Align(args) => commands::align(args),
        Command::Collect(args) => collect::collect(args),
    }
}
