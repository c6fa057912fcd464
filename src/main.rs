//! The `dtcast` command-line tool; everything but the process plumbing lives in `dtcast::cli`.

use std::io::{self, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let stdin = io::stdin();
    let mut input = stdin.lock();
    let mut stdout = io::BufWriter::new(io::stdout().lock());
    let mut stderr = io::stderr().lock();
    let code = dtcast::cli::run(std::env::args_os(), &mut input, &mut stdout, &mut stderr);
    // A closed pipe (`dtcast table | head`) is not worth a second error.
    let _ = stdout.flush();
    ExitCode::from(code)
}
