//! The `dtcast` command-line tool.
//!
//! [`run`] is the whole tool minus the process: it takes the arguments and the three standard
//! streams and returns the exit status, so it can be embedded and tested in-process.
//! `main.rs` only connects it to the real streams.
//!
//! Exit status: 0 on success, 1 for an error (message on stderr starting with `error:`), 2 for a
//! usage error (unknown flag, missing argument, a value that does not parse).

use std::ffi::OsString;
use std::io::{BufRead, Write};

use clap::Parser;

mod args;
mod bench;
mod bitcast;
mod cast;
mod checkpoint;
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
        Command::Inspect(a) => checkpoint::inspect(&a, stdout),
        Command::Convert(a) => checkpoint::convert(&a, stdout),
    };
    match result.and_then(|()| stdout.flush().map_err(Into::into)) {
        Ok(()) => 0,
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            1
        }
    }
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
