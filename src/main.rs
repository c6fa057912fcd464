//! The `dtcast` command-line tool; everything, the process plumbing included, lives in
//! `dtcast::cli` (so that test harnesses can run the very same process).

fn main() -> std::process::ExitCode {
    dtcast::cli::main()
}
