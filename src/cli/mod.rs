//! The `dtcast` command-line tool.
//!
//! [`run`] is the whole tool minus the process: it takes the arguments and the three standard
//! streams and returns the exit status, so it can be embedded and tested in-process. [`main`]
//! adds the process: the real streams, signal handling (SIGINT/SIGTERM remove any temporary
//! output and exit 130/143) and the test-only fault injection of `DTCAST_FAULT`.
//!
//! Exit status: 0 on success, 1 for an error (message on stderr starting with `error:`), 2 for a
//! usage error (unknown flag, missing argument, a value that does not parse).

use std::ffi::OsString;
use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::Parser;

mod args;
mod bench;
mod bench_cuda;
mod bench_int;
mod bench_quant;
mod bitcast;
mod cast;
mod checkpoint;
mod dtypes;
mod gguf;
mod operand;
mod promote;
mod table;

pub use operand::parse_operand;

use args::{Cli, Command};

/// An error a command reports: printed as `error: <message>`, exit status 1.
pub(crate) type CmdError = Box<dyn std::error::Error + Send + Sync>;

/// Runs `dtcast` with `args` (the first being the program name) and returns the exit status.
///
/// ```
/// let mut out = Vec::new();
/// let mut err = Vec::new();
/// let code = dtcast::cli::run(["dtcast", "promote", "int32[2]", "2.5"], &mut &b""[..], &mut out, &mut err);
/// assert_eq!(code, 0);
/// assert_eq!(String::from_utf8(out).unwrap(), "float32\n");
/// ```
pub fn run<I, T>(
    args: I,
    stdin: &mut dyn BufRead,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let text = e.render().to_string();
            // --help and --version are "errors" that go to stdout with status 0.
            let sink: &mut dyn Write = if e.use_stderr() { stderr } else { stdout };
            let _ = sink.write_all(text.as_bytes());
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    let result = match cli.command {
        Command::Promote(a) => promote::run(&a, stdin, stdout),
        Command::CanCast(a) => promote::can_cast(&a, stdout),
        Command::Table(a) => table::run(&a, stdout),
        Command::Bitcast(a) => bitcast::run(&a, stdout),
        Command::Cast(a) => cast::run(&a, stdin, stdout),
        Command::Bench(a) => bench::run(&a, stdout),
        Command::Device(a) => device(&a.device, stdout),
        Command::Devices => devices(stdout),
        Command::Dtypes(a) => dtypes::run(&a, stdout),
        Command::Inspect(a) => checkpoint::inspect(&a, stdout),
        Command::Convert(a) => checkpoint::convert(&a, stdout),
    };
    match result.and_then(|()| stdout.flush().map_err(Into::into)) {
        Ok(()) => 0,
        // A closed pipe (`dtcast inspect big.safetensors | head`): the reader wanted no more.
        Err(e) if is_broken_pipe(&*e) => 0,
        Err(e) => {
            // Paths and names in a message may come from a file (an index's shard names).
            let _ = writeln!(
                stderr,
                "error: {}",
                dtcast_layer::text::escape(&e.to_string())
            );
            1
        }
    }
}

/// Whether `e`, or an error it wraps, is a write to a pipe whose reader has gone.
fn is_broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// The `dtcast` process: [`run`] on the real arguments and streams, after installing the signal
/// handlers and any fault `DTCAST_FAULT` asks for (`nospace-after=N`, `pause-after=N`,
/// `pause-after-commit`, `pause-at-exit`, `named-temps`: for tests that run dtcast as a child process; see
/// `dtcast_layer::output::Fault`).
pub fn main() -> ExitCode {
    if let Some(spec) = std::env::var_os("DTCAST_FAULT") {
        match spec.to_string_lossy().parse() {
            Ok(fault) => dtcast_layer::output::inject(fault),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        }
    }
    install_signal_handlers();
    // Not locked for the whole run: an injected pause reads stdin from another thread.
    let mut input = std::io::BufReader::new(std::io::stdin());
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    // Not locked either: the signal handler's thread writes its message there.
    let mut stderr = std::io::stderr();
    let code = run(std::env::args_os(), &mut input, &mut stdout, &mut stderr);
    // From here a signal changes nothing: its handler waits for the exit, instead of saying
    // "interrupted" while this returns 0.
    dtcast_layer::output::finish();
    dtcast_layer::output::exiting();
    // A closed pipe (`dtcast table | head`) is not worth a second error.
    let _ = stdout.flush();
    ExitCode::from(code)
}

/// SIGINT and SIGTERM: remove this run's temporary files and staging directories, say so — and
/// whether the output was already complete (a signal can land after the final rename, while
/// the summary is still to be printed) — and exit with 128 + the signal's number (130, 143), as
/// shells expect.
#[cfg(unix)]
fn install_signal_handlers() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let done = dtcast_layer::output::remove_pending();
            let name = if signal == SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            let said = interrupted(&done);
            eprintln!(
                "error: interrupted by {name}; {}",
                dtcast_layer::text::escape(&said)
            );
            std::process::exit(128 + signal);
        }
    });
}

#[cfg(not(unix))]
fn install_signal_handlers() {}

/// What a signal's message says after the words naming the signal.
fn interrupted(done: &dtcast_layer::output::Interrupted) -> String {
    let mut cleaned = if done.removed > 0 {
        "; its temporary files were removed".to_owned()
    } else {
        String::new()
    };
    if !done.kept.is_empty() {
        let kept: Vec<String> = done.kept.iter().map(|p| p.display().to_string()).collect();
        cleaned += &format!(
            "; files that appeared in the directory it replaced are kept in {}",
            kept.join(", ")
        );
    }
    if done.published.is_empty() {
        return format!("no output was written{cleaned}");
    }
    let outputs: Vec<String> = done
        .published
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    format!(
        "the output was already complete: {}{cleaned}",
        outputs.join(", ")
    )
}

/// Input as an error message quotes it: control characters escaped, cut after about 40 bytes
/// of output, so that a message stays one short line whatever came in.
pub(crate) fn quote(text: &str) -> String {
    dtcast_layer::text::quote(text, 40)
}

fn device(s: &str, out: &mut dyn Write) -> Result<(), CmdError> {
    let d: dtcast_device::Device = s.parse()?;
    writeln!(out, "{d}")?;
    Ok(())
}

fn devices(out: &mut dyn Write) -> Result<(), CmdError> {
    for line in dtcast_device::describe_backends() {
        writeln!(out, "{line}")?;
    }
    Ok(())
}
