//! Each command as options → library calls → reports: nothing here reads a file or
//! decides anything the library could; it says where the library's results go.

use super::args::{
    AlignArgs, ConvolveArgs, DiffArgs, EvalArgs, GraphArgs, InputArgs, NestArgs, RecordsArgs,
};
use anyhow::{Context, Result};
use blackbox::align;
use blackbox::convolution;
use blackbox::eval::{self, calls, paths};
use blackbox::exit::Usage;
use blackbox::input::{self, source, Input};
use blackbox::nesting::explain::{self, CallQuery};
use blackbox::nesting::{self, call_pairs::CallPair};
use blackbox::report::{
    self, assignments::Assignments, json::Json, otlp::Otlp, table::Table, NestReport, Ranking,
    Render,
};
use blackbox::streaming;
use blackbox::trace::text;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

pub(super) fn align(args: AlignArgs) -> Result<()> {
    let Some(method) = args.capture.align.method() else {
        return Err(
            Usage("--align off leaves nothing to do: choose hull or regression".into()).into(),
        );
    };
    let merged_only = [
        ("--repair", args.capture.repair),
        ("--truth-ids", args.capture.truth_ids.is_some()),
        (
            "--node-by",
            !matches!(args.capture.node_by, super::args::NodeByArg::Host),
        ),
    ];
    if let Some((flag, _)) = merged_only.iter().find(|(_, given)| *given) {
        return Err(Usage(format!(
            "{flag} is about the merged trace, which align does not build: use it with nest, \
             eval, convolve or records"
        ))
        .into());
    }
    let main = MainOutput::of(
        &[("--json", args.json.as_deref())],
        &[("--write", args.write.as_deref())],
        false,
    )?;
    if let Some(mbox) = &args.mbox {
        let mail = input::read_mbox(mbox, true)?;
        report::input::write_mbox(mbox, &mail.stats, &mut io::stderr().lock())?;
        let clocks = mail.clocks.expect("asked for");
        if let Some(path) = &args.json {
            write_out(Some(path), |w| write_json(&clocks, w))?;
        }
        return main.write(|w| report::alignment::write_mail_clocks(&clocks, usize::MAX, w));
    }
    let captures = input::read_for_alignment(&args.files, &args.capture.options()?)?;
    let alignment = align::align_with(&captures, method, args.capture.least_squares);
    if let Some(path) = &args.json {
        write_out(Some(path), |w| write_json(&alignment, w))?;
    }
    main.write(|w| report::alignment::write_alignment(&alignment, w))?;
    if let Some(dir) = &args.write {
        input::write_aligned(&captures, &alignment, dir, |written| {
            eprintln!(
                "wrote {} ({})",
                written.path.display(),
                blackbox::words::counted(written.packets, "packet")
            );
        })?;
    }
    Ok(())
}

/// `records` of one capture read as it comes: lines written and flushed as its packets
/// arrive, then the summary a whole read gives.
fn records_live(
    source: source::Source,
    options: &blackbox::capture::CaptureOptions,
    args: &RecordsArgs,
) -> Result<()> {
    let written = |result: Result<_, input::InputError>, name: &str| match result {
        Err(input::InputError::Output(error)) => {
            Err(anyhow::Error::new(error).context(format!("writing {name}")))
        }
        other => Ok(other?),
    };
    let (input, lines) = match args.output.as_deref().filter(|p| !source::is_standard(p)) {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = BufWriter::new(file);
            let result = input::live::write_records(source, options, &mut out);
            written(result, &path.display().to_string())?
        }
        None => {
            let mut out = BufWriter::new(io::stdout().lock());
            let result = input::live::write_records(source, options, &mut out);
            written(result, "standard output")?
        }
    };
    let lines_written = lines.lines;
    let Loaded { .. } = report_loaded(input, args.quiet)?;
    if !args.quiet {
        eprintln!("{lines}");
    }
    if lines_written == 0 {
        return Err(input::InputError::NoMessages(format!(
            "{} held no message",
            source::name(Path::new(source::STANDARD_STREAM))
        ))
        .into());
    }
    Ok(())
}

fn write_json(value: &impl serde::Serialize, w: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value)?;
    writeln!(w)
}

pub(super) fn records(args: RecordsArgs) -> Result<()> {
    let Some(mbox) = &args.mbox else {
        let options = args.capture.input_options(args.quiet)?;
        let mut sources =
            source::Source::sniff_all(&args.files).map_err(input::InputError::from)?;
        // One capture coming down a pipe (`tcpdump -U -w - | blackbox records -`) is
        // written as it comes, where nothing needs all of it first.
        if let [only] = &sources[..] {
            let streams = input::live::can_stream(&options.capture) && options.repair.is_none();
            if streams && only.kind == source::Kind::Capture && !only.is_file() {
                let only = sources.pop().expect("one");
                return records_live(only, &options.capture, &args);
            }
        }
        let Loaded { input, .. } = load_sources(sources, &options, args.quiet)?;
        if !args.quiet {
            report::summary::write_input(
                &input.trace.stats,
                input.capture_totals.as_ref(),
                &mut io::stderr().lock(),
            )?;
        }
        return write_out(args.output.as_deref(), |mut w| {
            text::write(&input.trace, &mut w)
        });
    };
    let mail = input::read_mbox(mbox, args.capture.align.method().is_some())?;
    if !args.quiet {
        write_mail_summary(mbox, &mail)?;
    }
    write_out(args.output.as_deref(), |mut w| {
        text::write(&mail.trace, &mut w)
    })
}

/// What an mbox gave, and how its relays' clocks were corrected, on stderr.
fn write_mail_summary(path: &Path, mail: &input::Mail) -> Result<()> {
    let mut text = Vec::new();
    report::input::write_mbox(path, &mail.stats, &mut text)?;
    if let Some(clocks) = &mail.clocks {
        report::alignment::write_mail_clocks(clocks, 10, &mut text)?;
    }
    io::stderr().write_all(&text)?;
    Ok(())
}

pub(super) fn convolve(args: ConvolveArgs) -> Result<()> {
    let options = args.settings.options();
    let main = MainOutput::of(
        &[
            ("--json", args.json.as_deref()),
            ("--html", args.html.as_deref()),
        ],
        &graph_dirs(&args.graphs),
        args.input.quiet,
    )?;
    let loaded = load_inputs(&args.input)?;
    let trace = &loaded.input.trace;
    let files = &args.input.files;
    let result = convolution::convolve(trace, &options).with_context(|| describe(files))?;
    let mut summary = Vec::new();
    report::paths::write_summary(trace, &result, &mut summary)?;
    if !args.input.quiet {
        io::stderr().write_all(&summary)?;
    }
    if let Some(path) = &args.html {
        let notes = input_notes(files, &loaded, summary);
        write_out(Some(path), |w| {
            report::html::write_convolution(trace, &result, args.top, &notes, w)
        })?;
    }
    if let Some(path) = &args.json {
        write_out(Some(path), |w| {
            report::paths::write_json(trace, &result, &options, w)
        })?;
    }
    draw(&args.graphs, |dir| {
        report::paths::write_dot_dir(trace, &result, args.top, dir)
    })?;
    main.write(|w| report::paths::write_table(trace, &result, args.top, w))
}

pub(super) fn eval(args: EvalArgs) -> Result<()> {
    let options = args.algorithm.options();
    let main = MainOutput::of(&[("--json", args.json.as_deref())], &[], args.input.quiet)?;
    if args.convolve {
        return eval_convolution(&args, &main);
    }
    let Loaded { mut input, .. } = load_inputs(&args.input)?;
    let files = &args.input.files;
    if args.against_ids {
        return eval_against_ids(&mut input, &options, &args, &main);
    }
    let trace = &input.trace;
    // Truth files may be gzip'd, as the captures they come with.
    let open = |path: &Path| -> Result<Box<dyn io::BufRead>> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        Ok(match path.extension().is_some_and(|e| e == "gz") {
            true => Box::new(io::BufReader::new(flate2::read::MultiGzDecoder::new(file))),
            false => Box::new(io::BufReader::new(file)),
        })
    };
    let truth = match (&args.truth, &args.true_signatures) {
        (Some(path), _) => EvalTruth::Parents(calls::read_truth(path, open(path)?)?),
        (None, Some(path)) => {
            EvalTruth::Signatures(eval::signatures::read_signatures(path, open(path)?)?)
        }
        (None, None) => EvalTruth::Column(Box::new(
            paths::ground_truth(trace, &options).with_context(|| describe(files))?,
        )),
    };
    // Without a given start, what `nest` would make of the same files: text traces in
    // segments when longer than one, captures when large enough, a mix whole.
    let streams = match input.captures.is_empty() {
        true => true,
        false => {
            let asked = streaming::StreamOptions {
                segment_lines: args.segment_lines,
            };
            input::streamed::streamed_as_read(&input, &args.input.options()?, asked)
        }
    };
    let stream = streaming::StreamOptions {
        segment_lines: if streams { args.segment_lines } else { 0 },
    };
    let nesting: Result<nesting::Nesting> = if args.start_from_truth {
        let start = |pairs: &[CallPair]| match &truth {
            EvalTruth::Parents(parents) => calls::true_parent_indexes(trace, pairs, parents),
            EvalTruth::Column(truth) => truth.parent.clone(),
            EvalTruth::Signatures(_) => unreachable!("clap refuses --start-from-truth with it"),
        };
        nesting::nest_from(trace, &options, &start).map_err(Into::into)
    } else if stream.segment_lines == 0 {
        nesting::nest(trace, &options).map_err(Into::into)
    } else {
        streaming::nest_held(trace, &options, stream).map_err(Into::into)
    };
    let nesting = nesting.with_context(|| describe(files))?;
    write_eval_summary(&input, &nesting, args.input.quiet)?;
    let start = if args.start_from_truth {
        "true parents"
    } else {
        "greedy"
    };
    let json = match &truth {
        EvalTruth::Parents(parents) => {
            let scores = calls::evaluate(trace, &nesting, parents);
            main.write(|w| {
                write_start(args.start_from_truth, w)?;
                report::evaluation::write_calls(&scores, w)
            })?;
            serde_json::json!({ "algorithm": "nesting", "start": start, "truth": args.truth, "calls": scores })
        }
        EvalTruth::Column(truth) => {
            let scores = paths::evaluate(trace, &nesting, truth, args.top_n);
            main.write(|w| {
                write_start(args.start_from_truth, w)?;
                report::evaluation::write_paths(&scores, w)
            })?;
            serde_json::json!({ "algorithm": "nesting", "start": start, "truth": "truth column", "paths": scores })
        }
        EvalTruth::Signatures(truth) => {
            let scores = eval::signatures::evaluate(trace, &nesting, truth);
            main.write(|w| report::evaluation::write_signatures(&scores, w))?;
            serde_json::json!({ "algorithm": "nesting", "truth": args.true_signatures, "requests": scores })
        }
    };
    if let Some(path) = &args.json {
        write_out(Some(path), |w| {
            serde_json::to_writer_pretty(&mut *w, &json)?;
            writeln!(w)
        })?;
    }
    Ok(())
}

/// `eval --convolve`: the convolution algorithm's paths against the true chains, at
/// each threshold asked for.
fn eval_convolution(args: &EvalArgs, main: &MainOutput) -> Result<()> {
    let options = args.convolution.options();
    let files = &args.input.files;
    let mut mail_clocks = None;
    let (trace, chains) = if args.mbox {
        let [path] = files.as_slice() else {
            return Err(Usage(format!("--mbox reads one mbox file, not {}", files.len())).into());
        };
        let mail = input::read_mbox(path, args.input.capture.align.method().is_some())?;
        if !args.input.quiet {
            write_mail_summary(path, &mail)?;
        }
        let chains = eval::message_paths::chains_of_mail(&mail.trace, &mail.chains);
        mail_clocks = mail.clocks;
        (mail.trace, chains)
    } else {
        let Loaded { input, .. } = load_inputs(&args.input)?;
        let chains = eval::message_paths::chains_by_time(&input.trace);
        (input.trace, chains)
    };
    if chains.chains.is_empty() {
        return Err(Usage(format!(
            "{}: no message carries a truth tag (the sixth column, or an mbox's emails with --mbox): nothing to score against",
            describe(files)
        ))
        .into());
    }
    let found = convolution::convolve(&trace, &options).with_context(|| describe(files))?;
    if !args.input.quiet {
        report::paths::write_summary(&trace, &found, &mut io::stderr().lock())?;
    }
    let mut thresholds = match args.min_paths.is_empty() {
        true => vec![options.min_count],
        false => args.min_paths.clone(),
    };
    thresholds.sort_unstable_by(|a, b| b.cmp(a));
    thresholds.dedup();
    let scores: Vec<eval::message_paths::PathScores> = thresholds
        .iter()
        .map(|&n| eval::message_paths::score_paths(&trace, &chains, &found, n, options.quantum))
        .collect();
    main.write(|w| report::evaluation::write_message_paths(&chains, &scores, options.quantum, w))?;
    if let Some(path) = &args.json {
        let json = serde_json::json!({
            "algorithm": "convolution",
            "truth": if args.mbox { "mbox" } else { "truth column" },
            "chains": {
                "instances": chains.instances,
                "runs": chains.chains.len(),
                "cut": chains.cut,
            },
            "relay_clocks": mail_clocks,
            "scores": scores,
        });
        write_out(Some(path), |w| write_json(&json, w))?;
    }
    Ok(())
}

/// `blackbox diff`: nests both runs (or one run, split into two time ranges) and says
/// what changed.
pub(super) fn diff(args: DiffArgs) -> Result<()> {
    let mut options = args.algorithm.options();
    let by_operation = matches!(args.capture.node_by, super::args::NodeByArg::Operation);
    options.by_operation = by_operation;
    let main = MainOutput::of(&[("--json", args.json.as_deref())], &[], args.quiet)?;
    let input_options = args.capture.input_options(args.quiet)?;
    let run = |files: &[PathBuf], side: &str| -> Result<(Input, nesting::Nesting)> {
        if !args.quiet && !side.is_empty() {
            eprintln!("{side}:");
        }
        let Loaded { input, .. } = load(files, &input_options, args.quiet)?;
        let nesting = nesting::nest(&input.trace, &options).with_context(|| describe(files))?;
        write_eval_summary(&input, &nesting, args.quiet)?;
        Ok((input, nesting))
    };
    let comparison = if args.files.is_empty() {
        let (before_input, mut before) = run(&args.before, "before")?;
        let (after_input, mut after) = run(&args.after, "after")?;
        blackbox::compare::compare(
            (&before_input.trace, &std::mem::take(&mut before.patterns)),
            (&after_input.trace, &std::mem::take(&mut after.patterns)),
            args.alpha,
        )
    } else {
        let range = |values: &[PathBuf], flag: &str| -> Result<String> {
            match values {
                [one] => Ok(one.to_string_lossy().into_owned()),
                _ => Err(Usage(format!(
                    "with FILEs, {flag} names one time range (`14:00-14:05` or `0s-5min`), not {} values",
                    values.len()
                ))
                .into()),
            }
        };
        let (before_range, after_range) = (
            range(&args.before, "--before")?,
            range(&args.after, "--after")?,
        );
        let (input, nesting) = run(&args.files, "")?;
        let start = input.trace.messages.first().map_or(0, |m| m.first_time());
        let during = |text: &str, flag: &str| -> Result<Vec<nesting::Pattern>> {
            let span = time_range(text, start)
                .map_err(|problem| Usage(format!("{flag} `{text}`: {problem}")))?;
            Ok(blackbox::compare::patterns_during(
                &input.trace,
                &nesting,
                span,
                by_operation,
            ))
        };
        let before = during(&before_range, "--before")?;
        let after = during(&after_range, "--after")?;
        blackbox::compare::compare((&input.trace, &before), (&input.trace, &after), args.alpha)
    };
    main.write(|w| report::diff::write(&comparison, w))?;
    if let Some(path) = &args.json {
        write_out(Some(path), |w| {
            serde_json::to_writer_pretty(&mut *w, &comparison)?;
            writeln!(w)
        })?;
    }
    Ok(())
}

/// A time range `FROM-TO` of a trace that starts at `start`: clock times
/// `HH:MM[:SS]` (UTC, on the day the trace starts; a range past midnight ends the next
/// day), durations from the start (`0s-5min`), or any other time `--from` takes
/// without a `-` in it.
fn time_range(text: &str, start: blackbox::trace::Nanos) -> Result<(i64, i64), String> {
    let (from, to) = text
        .split_once('-')
        .ok_or("expected FROM-TO, as 14:00-14:05 or 0s-5min")?;
    let window = blackbox::trace::time::TimeWindow {
        from: Some(blackbox::trace::time::parse_moment(from)?),
        to: Some(blackbox::trace::time::parse_moment(to)?),
        start: Some(start),
    };
    let (from, to) = window.bounds(start);
    if to <= from {
        return Err("the range ends before it starts".into());
    }
    Ok((from, to))
}

/// What eval read and nested, on stderr unless `quiet`.
fn write_eval_summary(input: &Input, nesting: &nesting::Nesting, quiet: bool) -> Result<()> {
    if !quiet {
        report::summary::write(
            &input.trace.stats,
            input.capture_totals.as_ref(),
            &nesting.stats,
            nesting.patterns.len(),
            &mut io::stderr().lock(),
        )?;
    }
    Ok(())
}

/// `eval --against-ids`: infers with the ids hidden, scores against them.
fn eval_against_ids(
    input: &mut Input,
    options: &nesting::NestOptions,
    args: &EvalArgs,
    main: &MainOutput,
) -> Result<()> {
    let files = &args.input.files;
    let hidden = input.trace.hide_propagated();
    if hidden.is_empty() {
        return Err(Usage(format!(
            "{}: no call carries a request id or trace context (traceparent, b3, X-B3-TraceId, uber-trace-id, X-Request-ID): nothing to score against",
            describe(files)
        ))
        .into());
    }
    let nesting = nesting::nest(&input.trace, options);
    input.trace.restore_propagated(hidden);
    let nesting = nesting.with_context(|| describe(files))?;
    write_eval_summary(input, &nesting, args.input.quiet)?;
    let trace = &input.trace;
    let named = eval::ids::id_parents(trace, &nesting.pairs, options.skew_window);
    let scores = eval::ids::evaluate(trace, &nesting, &named);
    if scores.labelled == 0 {
        return Err(Usage(format!(
            "{}: calls carry ids, but no node passes them on to the calls it makes, so no id names a parent: nothing to score against",
            describe(files)
        ))
        .into());
    }
    main.write(|w| report::evaluation::write_ids(&scores, w))?;
    if let Some(path) = &args.json {
        write_out(Some(path), |w| {
            let json = serde_json::json!({ "algorithm": "nesting", "truth": "propagated ids", "ids": scores });
            serde_json::to_writer_pretty(&mut *w, &json)?;
            writeln!(w)
        })?;
    }
    Ok(())
}

/// What `eval` scores against.
enum EvalTruth {
    /// A file of true parents (`--truth`).
    Parents(calls::TrueParents),
    /// The trace's truth column, as the nesting it implies.
    Column(Box<nesting::Nesting>),
    /// Each request's true signature (`--true-signatures`).
    Signatures(eval::signatures::TrueSignatures),
}

/// Says, above the scores, that the search started from the truth.
fn write_start(from_truth: bool, w: &mut dyn Write) -> io::Result<()> {
    if from_truth {
        writeln!(
            w,
            "search started from the true parents: a bound on the search, not a result"
        )?;
    }
    Ok(())
}

pub(super) fn nest(args: NestArgs) -> Result<()> {
    let mut options = args.algorithm.options();
    options.by_operation = args.input.by_operation();
    let query = args.explain.as_deref().map(CallQuery::parse).transpose()?;
    let main = MainOutput::of(
        &[
            ("--json", args.json.as_deref()),
            ("--assignments", args.assignments.as_deref()),
            ("--html", args.html.as_deref()),
            ("--otlp", args.otlp.as_deref()),
        ],
        &graph_dirs(&args.graphs),
        args.input.quiet,
    )?;
    let ranking = Ranking {
        sort: args.sort.key(),
        top: args.top,
        min_count: args.min_count,
    };
    let files = &args.input.files;
    let input_options = args.input.options()?;
    let sources = sniffed(files)?;
    // What needs every call at once reads the whole trace; the rest streams.
    let whole_needed = args.html.is_some()
        || args.otlp.is_some()
        || args.assignments.is_some()
        || query.is_some()
        || args.window.is_some()
        || input_options.repair.is_some()
        || args.segment_lines == 0;
    let stream = streaming::StreamOptions {
        segment_lines: args.segment_lines,
    };
    let mut keep = match &args.keep_messages {
        Some(path) => Some(kept_messages(path, &sources)?),
        None => None,
    };
    if !whole_needed && input::streamed::streams(&sources, &input_options, stream) {
        let (input, outcome) = input::streamed::nest_captures(
            sources,
            &input_options,
            &options,
            stream,
            keep.as_mut().map(|(_, keep)| keep),
        )?;
        if let Some((path, keep)) = keep {
            finish_kept(&path, keep)?;
        }
        let loaded = report_loaded(input, args.input.quiet)?;
        match outcome {
            streaming::Outcome::Streamed(streamed) => {
                let totals = loaded.input.capture_totals.as_ref();
                return write_streamed(&args, &options, ranking, &streamed, &main, totals);
            }
            streaming::Outcome::Whole(_) => {
                return nest_loaded(args, options, ranking, query, main, loaded)
            }
        }
    }
    let opened = match whole_needed {
        true => Err(sources),
        false => input::open_texts(sources, input_options.progress, args.segment_lines)?,
    };
    let loaded = match opened {
        Err(sources) => {
            let loaded = load_sources(sources, &input_options, args.input.quiet)?;
            if let Some((path, mut keep)) = keep {
                keep.write_trace(&loaded.input.trace);
                finish_kept(&path, keep)?;
            }
            loaded
        }
        Ok((texts, progress)) => {
            let text_traces = texts.len();
            // Reading errors name their file and line; nesting's need the files named.
            let outcome = match streaming::nest_text(texts, &options, stream, None) {
                Ok(outcome) => outcome,
                Err(streaming::StreamError::Trace(error)) => return Err(error.into()),
                Err(error) => return Err(error).with_context(|| describe(files)),
            };
            progress.finish();
            match outcome {
                streaming::Outcome::Whole(trace) => Loaded {
                    input: input::from_text_trace(trace, text_traces)?,
                    warnings: String::new(),
                },
                streaming::Outcome::Streamed(streamed) => {
                    return write_streamed(&args, &options, ranking, &streamed, &main, None)
                }
            }
        }
    };
    nest_loaded(args, options, ranking, query, main, loaded)
}

/// The file `--keep-messages` names, opened for what the captures among `sources` hold:
/// written as `FILE.partial` and renamed once whole, so that a run that fails leaves
/// no file that looks complete.
fn kept_messages(path: &Path, sources: &[source::Source]) -> Result<(PathBuf, streaming::Keep)> {
    if sources.iter().all(|s| s.kind != source::Kind::Capture) {
        return Err(Usage(
            "--keep-messages keeps the messages read from captures, and these inputs are \
             text traces already"
                .into(),
        )
        .into());
    }
    let file = File::create(partial(path))
        .with_context(|| format!("cannot write {}", partial(path).display()))?;
    let out = Box::new(BufWriter::with_capacity(1 << 20, file));
    Ok((path.to_owned(), streaming::Keep::new(out)))
}

/// Where the kept messages are written until they are whole.
fn partial(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// Closes the kept messages' file and gives it its name, naming it if that failed.
fn finish_kept(path: &Path, keep: streaming::Keep) -> Result<()> {
    keep.finish()
        .with_context(|| format!("cannot write {}", partial(path).display()))?;
    std::fs::rename(partial(path), path).with_context(|| format!("cannot write {}", path.display()))
}

/// `nest` of the whole trace, read.
fn nest_loaded(
    args: NestArgs,
    options: nesting::NestOptions,
    ranking: Ranking,
    query: Option<CallQuery>,
    main: MainOutput,
    loaded: Loaded,
) -> Result<()> {
    let files = &args.input.files;
    let trace = &loaded.input.trace;
    let nesting = nesting::nest(trace, &options).with_context(|| describe(files))?;
    let windows = match args.window {
        None => None,
        Some(0) => return Err(Usage("--window must be longer than 0".into()).into()),
        Some(width) => Some(
            blackbox::windows::windows(trace, &nesting, width, options.by_operation).ok_or_else(
                || {
                    Usage(format!(
                        "--window {}: the trace would fall in more than {} windows; choose a wider one",
                        blackbox::trace::time::human_duration(width as f64),
                        blackbox::windows::MAX_WINDOWS
                    ))
                },
            )?,
        ),
    };
    let report = NestReport::new(trace, &nesting, &options, ranking)
        .with_capture_totals(loaded.input.capture_totals.as_ref())
        .with_windows(windows.as_deref())
        .with_alignment(loaded.input.alignment.as_ref());

    let mut summary = Vec::new();
    report::summary::write(
        &trace.stats,
        loaded.input.capture_totals.as_ref(),
        &nesting.stats,
        nesting.patterns.len(),
        &mut summary,
    )?;
    if !args.input.quiet {
        io::stderr().write_all(&summary)?;
    }
    if let Some(path) = &args.html {
        let notes = input_notes(files, &loaded, summary);
        write_out(Some(path), |w| {
            report::html::write_nesting(&report, &notes, w)
        })?;
    }
    if let Some(path) = &args.json {
        write_out(Some(path), |w| Json.render(&report, w))?;
    }
    if let Some(path) = &args.assignments {
        write_out(Some(path), |w| Assignments.render(&report, w))?;
    }
    if let Some(path) = &args.otlp {
        write_out(Some(path), |w| Otlp.render(&report, w))?;
    }
    draw(&args.graphs, |dir| report::dot::write_dir(&report, dir))?;
    match query {
        Some(query) => {
            let calls = explain::find_calls(trace, &nesting, &query)?;
            let explanations: Vec<_> = calls
                .iter()
                .map(|&call| explain::explain(trace, &nesting, &options, call))
                .collect();
            main.write(|w| {
                report::explanation::write(trace, &nesting, options.penalties, &explanations, w)
            })
        }
        None => main.write(|w| Table.render(&report, w)),
    }
}

/// The outputs of a nesting done in segments: the summary with how it was cut, the
/// JSON, the graphs and the table (what needs every call never streams).
fn write_streamed(
    args: &NestArgs,
    options: &nesting::NestOptions,
    ranking: Ranking,
    streamed: &streaming::Streamed,
    main: &MainOutput,
    capture_totals: Option<&blackbox::capture::stats::FileStats>,
) -> Result<()> {
    let (trace, nesting) = (&streamed.trace, &streamed.nesting);
    let report = NestReport::new(trace, nesting, options, ranking)
        .with_streamed(Some(&streamed.cut))
        .with_capture_totals(capture_totals);
    if !args.input.quiet {
        let mut summary = Vec::new();
        report::summary::write(
            &trace.stats,
            capture_totals,
            &nesting.stats,
            nesting.patterns.len(),
            &mut summary,
        )?;
        report::summary::write_streamed(&streamed.cut, &mut summary)?;
        io::stderr().write_all(&summary)?;
    } else {
        report::summary::write_late_lines(&streamed.cut, &mut io::stderr().lock())?;
    }
    if let Some(path) = &args.json {
        write_out(Some(path), |w| Json.render(&report, w))?;
    }
    draw(&args.graphs, |dir| report::dot::write_dir(&report, dir))?;
    main.write(|w| Table.render(&report, w))
}

/// The directory flags of `graphs`, for [`MainOutput::of`].
fn graph_dirs(graphs: &GraphArgs) -> [(&'static str, Option<&Path>); 2] {
    [
        ("--dot", graphs.dot.as_deref()),
        ("--svg", graphs.svg.as_deref()),
    ]
}

/// Writes the dot files `write_dots` makes into `--dot`'s directory, and into
/// `--svg`'s with a picture of each.
fn draw(graphs: &GraphArgs, write_dots: impl Fn(&Path) -> io::Result<Vec<PathBuf>>) -> Result<()> {
    let dots_in = |dir: &Path| {
        write_dots(dir).with_context(|| format!("writing dot files to {}", dir.display()))
    };
    if let Some(dir) = &graphs.dot {
        dots_in(dir)?;
    }
    if let Some(dir) = &graphs.svg {
        report::svg::draw_and_tell(&dots_in(dir)?, dir)
            .with_context(|| format!("drawing SVG pictures in {}", dir.display()))?;
    }
    Ok(())
}

/// What the HTML report says about the input: the files, the run summary and what
/// loading reported.
fn input_notes(files: &[PathBuf], loaded: &Loaded, summary: Vec<u8>) -> report::html::InputNotes {
    let lines = |text: &str| text.lines().map(str::to_owned).collect::<Vec<_>>();
    report::html::InputNotes {
        files: files.iter().map(|f| source::name(f).to_string()).collect(),
        summary: lines(&String::from_utf8_lossy(&summary)),
        captures: loaded.input.captures.clone(),
        notes: loaded
            .input
            .repair
            .as_ref()
            .map(|repaired| {
                let mut line = Vec::new();
                let _ = report::input::write_repair(repaired, &mut line);
                lines(&String::from_utf8_lossy(&line))
            })
            .unwrap_or_default(),
        warnings: lines(&loaded.warnings),
        alignment: loaded.input.alignment.clone(),
    }
}

fn describe(files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|f| source::name(f).to_string()).collect();
    names.join(", ")
}

/// The input, and the warnings reading it gave.
struct Loaded {
    input: Input,
    /// Warnings, one per line, printed even with `--quiet`.
    warnings: String,
}

/// [`load`] for nest, eval and convolve.
fn load_inputs(args: &InputArgs) -> Result<Loaded> {
    load_sources(sniffed(&args.files)?, &args.options()?, args.quiet)
}

/// The inputs told apart, with a cluster's other processes' captures (each read where
/// it is).
fn sniffed(files: &[PathBuf]) -> Result<Vec<source::Source>> {
    let sources = source::Source::sniff_all(files).map_err(input::InputError::from)?;
    Ok(super::workers::gathered(sources)?)
}

/// Reads and merges the files, and prints on stderr what reading reported: warnings
/// always, per-capture summaries, the alignment table and the repair line unless
/// `quiet`.
fn load(files: &[PathBuf], options: &input::InputOptions, quiet: bool) -> Result<Loaded> {
    load_sources(
        source::Source::sniff_all(files).map_err(input::InputError::from)?,
        options,
        quiet,
    )
}

/// [`load`] of inputs already told apart.
fn load_sources(
    sources: Vec<source::Source>,
    options: &input::InputOptions,
    quiet: bool,
) -> Result<Loaded> {
    report_loaded(input::read_sources(sources, options)?, quiet)
}

/// Prints on stderr what reading reported: warnings always, per-capture summaries, the
/// alignment table and the repair line unless `quiet`.
fn report_loaded(input: Input, quiet: bool) -> Result<Loaded> {
    let text = |write: &dyn Fn(&mut Vec<u8>) -> io::Result<()>| -> io::Result<String> {
        let mut bytes = Vec::new();
        write(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let warnings = text(&|w| report::input::write_warnings(&input, w))?;
    let captures = text(&|w| report::input::write_captures(&input, w))?;
    let translations = input
        .translations
        .as_ref()
        .map(|t| text(&|w| report::translation::write_translations(t, w)))
        .transpose()?;
    let alignment = input
        .alignment
        .as_ref()
        .map(|alignment| text(&|w| report::alignment::write_alignment(alignment, w)))
        .transpose()?;
    let repair = input
        .repair
        .as_ref()
        .map(|repaired| text(&|w| report::input::write_repair(repaired, w)))
        .transpose()?;
    let mut stderr = io::stderr().lock();
    stderr.write_all(warnings.as_bytes())?;
    if !quiet {
        stderr.write_all(captures.as_bytes())?;
        if let Some(table) = &translations {
            stderr.write_all(table.as_bytes())?;
        }
        if let Some(table) = &alignment {
            stderr.write_all(table.as_bytes())?;
        }
        if let Some(line) = &repair {
            stderr.write_all(line.as_bytes())?;
        }
    }
    Ok(Loaded { input, warnings })
}

/// Writes through a buffer to `path`, or to stdout for `None` or `-`; errors name the
/// file, and a closed stdout stays an I/O error in the chain so that `main` can end
/// quietly.
fn write_out(
    path: Option<&Path>,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<()> {
    match path.filter(|p| !source::is_standard(p)) {
        Some(path) => {
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            let mut out = BufWriter::new(file);
            write(&mut out)
                .and_then(|()| out.flush())
                .with_context(|| format!("writing {}", path.display()))
        }
        None => {
            let mut out = BufWriter::new(io::stdout().lock());
            write(&mut out)
                .and_then(|()| out.flush())
                .context("writing standard output")
        }
    }
}

/// Where a command's main output (its table, its records) goes: stdout, unless an
/// output flag sends its file there (`--json -`), in which case nothing else may: the
/// table moves to stderr, or away with `--quiet`, so that `--json - | jq` works.
#[derive(Clone, Copy, PartialEq, Eq)]
enum MainOutput {
    Stdout,
    Stderr,
    Nowhere,
}

impl MainOutput {
    /// Checks the output flags (name, value): at most one may be `-`; directory flags
    /// never.
    fn of(
        files: &[(&str, Option<&Path>)],
        dirs: &[(&str, Option<&Path>)],
        quiet: bool,
    ) -> Result<MainOutput> {
        let is_dash = |value: &Option<&Path>| value.is_some_and(source::is_standard);
        if let Some((flag, _)) = dirs.iter().find(|(_, value)| is_dash(value)) {
            return Err(Usage(format!(
                "{flag} takes a directory: it writes several files, which standard output (-) cannot hold"
            ))
            .into());
        }
        let to_stdout: Vec<&str> = files
            .iter()
            .filter(|(_, v)| is_dash(v))
            .map(|(f, _)| *f)
            .collect();
        match to_stdout.as_slice() {
            [] => Ok(MainOutput::Stdout),
            [_] if quiet => Ok(MainOutput::Nowhere),
            [_] => Ok(MainOutput::Stderr),
            several => Err(Usage(format!(
                "only one output can go to standard output (-): {} ask for it",
                several.join(" and ")
            ))
            .into()),
        }
    }

    /// Writes the main output where it goes.
    fn write(self, write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
        match self {
            MainOutput::Stdout => write_out(None, write),
            MainOutput::Stderr => {
                let mut err = io::stderr().lock();
                write(&mut err)
                    .and_then(|()| err.flush())
                    .context("writing standard error")
            }
            MainOutput::Nowhere => Ok(()),
        }
    }
}
